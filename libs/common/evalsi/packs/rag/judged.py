"""The rag pack's judged evaluators: faithfulness, answer relevance, context precision and context recall.

The judge gives per-item verdicts (claims, statements, chunks); the score is computed from them by the published
formulas in ``formulas`` (RAGAS; DeepEval for answer relevance), so it is reproducible from the verdicts kept in
the score's metadata. Through the judge pack's ``ask``/``judged``: no judge skips ``judge_pending``, a provider
failure is an infrastructure error, an unreadable answer an evaluator error, never a score. Every call goes through
the run's judge (its cache, rate limit and cost); the score's cost is the tokens of every live call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from evalsi.errors import SkipRecord
from evalsi.evaluators import EvalContext, Output, evaluator
from evalsi.judges import Completion, JudgeClient
from evalsi.packs.judge.evaluators import ask, judged_calls, record_values
from evalsi.packs.judge.templates import Template, pack_template
from evalsi.records import content_text, has_content
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

from . import answers, formulas

VERSION = "1.0.0"
PACK_NAME = "rag"
MAX_CHUNKS = 100  # context items judged one by one for context precision
SHOWN = 5  # unsupported claims or statements named in an explanation
T = TypeVar("T")


def template(name: str) -> Template:
    return pack_template("evalsi.packs.rag", name, 1, "rag")


async def ask_items(judge: JudgeClient, chosen: Template, values: Mapping[str, str],
                    read: Callable[[str], T]) -> tuple[T, Completion]:
    """One judge call whose answer is a list (``read`` raises ``UnparseableAnswer`` when it is not)."""
    completion = await judge.complete(chosen.render(values), template_hash=chosen.hash)
    return read(completion.text), completion


def _values(record: Record, **extra: str) -> dict[str, str]:
    return {**record_values(record), "claims": "", **extra}


def _listing(items: list[str]) -> str:
    return "\n".join(f"{index}. {item}" for index, item in enumerate(items, 1))


def _named(texts: list[str]) -> str:
    shown = "; ".join(repr(t) for t in texts[:SHOWN])
    return shown + (f" and {len(texts) - SHOWN} more" if len(texts) > SHOWN else "")


def _number(score: float | None, nothing: str) -> float:
    if score is None:
        raise SkipRecord(nothing)
    return score


@evaluator(
    "builtin/faithfulness",
    version=VERSION,
    requires=("output", "context", "judge"),
    outputs=[Output("score", "number", min=0.0, max=1.0,
                    description="Claims of the output supported by the context / claims (RAGAS faithfulness)")],
    pack=PACK_NAME,
)
async def faithfulness(record: Record, ctx: EvalContext) -> Score:
    """Groundedness, claim by claim (RAGAS faithfulness): the judge lists the output's claims, then gives each a
    verdict against the context; the score is supported claims / claims. An output with no claims is skipped.
    Templates ``claims@1`` and ``claim-verdicts@1``."""
    judge = ctx.require_judge()
    listing, verdicting = template("claims"), template("claim-verdicts")
    found, first = await ask_items(judge, listing, _values(record), answers.claims)
    if not found:
        raise SkipRecord("the output makes no claims to check (RAGAS scores it NaN)")
    read, second = await ask_items(judge, verdicting, _values(record, claims=_listing(found)),
                                   lambda raw: answers.verdicts(raw, "verdicts", "verdict", expected=len(found)))
    verdicts = [verdict for _, verdict, _ in read]
    number = _number(formulas.faithfulness(verdicts), "no claims")
    unsupported = [claim for claim, verdict in zip(found, verdicts, strict=True) if not verdict]
    explanation = f"{sum(verdicts)} of {len(verdicts)} claims supported by the context"
    if unsupported:
        explanation += f"; unsupported: {_named(unsupported)}"
    return judged_calls(Score(number=number), explanation, verdicting, [first, second],
                        claims=[{"claim": c, "verdict": v} for c, v in zip(found, verdicts, strict=True)],
                        templates=[listing.ref, verdicting.ref])


@evaluator(
    "builtin/answer-relevance",
    version=VERSION,
    requires=("input", "output", "judge"),
    outputs=[Output("score", "number", min=0.0, max=1.0,
                    description="Statements of the output relevant to the input / statements (DeepEval formula)")],
    pack=PACK_NAME,
)
async def answer_relevance(record: Record, ctx: EvalContext) -> Score:
    """The judge splits the output into statements and marks each relevant to the input (yes), irrelevant (no) or
    ambiguous (idk); the score is statements not marked no / statements (DeepEval's answer relevancy). An output
    with no statements is skipped. Template ``answer-relevance@1``."""
    judge = ctx.require_judge()
    chosen = template("answer-relevance")
    read, completion = await ask_items(judge, chosen, _values(record), answers.relevance_verdicts)
    verdicts = [verdict for _, verdict, _ in read]
    number = _number(formulas.answer_relevance(verdicts), "the output makes no statements to judge")
    irrelevant = [statement for statement, verdict, _ in read if verdict == "no"]
    explanation = f"{len(verdicts) - len(irrelevant)} of {len(verdicts)} statements relevant to the input"
    if irrelevant:
        explanation += f"; irrelevant: {_named(irrelevant)}"
    return judged_calls(Score(number=number), explanation, chosen, [completion],
                        statements=[{"statement": s, "verdict": v} for s, v, _ in read])


async def _gather(calls: list[Awaitable[T]]) -> list[T]:
    """Every call's result; the first failure (in order) raised once all have settled, so no call is left
    running unawaited."""
    settled = await asyncio.gather(*calls, return_exceptions=True)
    for item in settled:
        if isinstance(item, BaseException):
            raise item
    return settled  # type: ignore[return-value]


@evaluator(
    "builtin/context-precision",
    version=VERSION,
    requires=("input", "context", "judge"),
    outputs=[Output("score", "number", min=0.0, max=1.0,
                    description="RAGAS context precision: average precision of the useful chunks over ranks")],
    pack=PACK_NAME,
)
async def context_precision(record: Record, ctx: EvalContext) -> Score:
    """The judge marks each context chunk, in retrieval order, useful or not for the answer (the reference when
    the record has one, else the output); the score is RAGAS' average precision over ranks, so useful chunks
    ranked first score higher. Template ``context-precision@1``, one call per chunk."""
    against = "reference" if has_content(record, "reference") else "output"
    if against == "output" and not has_content(record, "output"):
        raise SkipRecord("missing reference and output: context precision judges chunks against one of them")
    if len(record.context) > MAX_CHUNKS:
        raise ValueError(f"{len(record.context)} context chunks exceed the limit of {MAX_CHUNKS}")
    judge = ctx.require_judge()
    chosen = template("context-precision")
    base = _values(record)
    answer_text = base["reference"] if against == "reference" else base["output"]
    settled = await _gather([
        ask(judge, chosen, {**base, "reference": answer_text, "context": content_text(chunk)}, "pass-fail")
        for chunk in record.context
    ])
    verdicts = [int(answer.value == 1.0) for answer, _ in settled]
    number = _number(formulas.context_precision(verdicts), "no context chunks")
    ranks = [str(rank) for rank, verdict in enumerate(verdicts, 1) if verdict]
    explanation = (f"{len(ranks)} of {len(verdicts)} chunks useful"
                   + (f" (ranks {', '.join(ranks)})" if ranks else "") + f", judged against the {against}")
    extra: dict[str, Any] = {"verdicts": verdicts, "against": against,
                             "reasons": [answer.explanation for answer, _ in settled]}
    return judged_calls(Score(number=number), explanation, chosen, [c for _, c in settled], **extra)


@evaluator(
    "builtin/context-recall",
    version=VERSION,
    requires=("input", "reference", "context", "judge"),
    outputs=[Output("score", "number", min=0.0, max=1.0,
                    description="Statements of the reference attributable to the context / statements (RAGAS)")],
    pack=PACK_NAME,
)
async def context_recall(record: Record, ctx: EvalContext) -> Score:
    """The judge splits the reference answer into statements and marks each attributable to the context or not;
    the score is attributable statements / statements (RAGAS context recall): did retrieval find what the right
    answer needs? Template ``context-recall@1``."""
    judge = ctx.require_judge()
    chosen = template("context-recall")
    read, completion = await ask_items(judge, chosen, _values(record),
                                       lambda raw: answers.verdicts(raw, "classifications", "attributed"))
    attributed = [verdict for _, verdict, _ in read]
    number = _number(formulas.context_recall(attributed), "the reference makes no statements (RAGAS scores NaN)")
    missing = [statement for statement, verdict, _ in read if not verdict]
    explanation = f"{sum(attributed)} of {len(attributed)} reference statements found in the context"
    if missing:
        explanation += f"; not found: {_named(missing)}"
    return judged_calls(Score(number=number), explanation, chosen, [completion],
                        statements=[{"statement": s, "attributed": v} for s, v, _ in read])


EVALUATORS = (faithfulness, answer_relevance, context_precision, context_recall)
