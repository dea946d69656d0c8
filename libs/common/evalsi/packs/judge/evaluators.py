"""Model-graded evaluators: an LLM judge reads the record and answers with a score.

Every evaluator here needs a judge (``requires`` includes ``judge``): without one the runner skips the
record with ``judge_pending``, never passes it. A provider failure after retries is an ``InfraError``: the
record becomes an infrastructure error, counted apart and never a score. An answer that cannot be read
(``UnparseableAnswer``) is an evaluator error, counted apart with the answer's start as its reason: never a
score, a pass or a win.

Each score carries the judge's reasoning as its explanation, the tokens this evaluation spent as its cost
(0 when the answer came from the cache) and, in its metadata, the raw score, the judge's model, whether
the answer was cached, and the template (``name@version`` and hash).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import EvalContext, Output, evaluator
from evalsi.judges import Completion, JudgeClient
from evalsi.records import canonical_json, content_text, from_value, has_content, to_value
from evalsi.v1alpha1.record_pb2 import Content, Record
from evalsi.v1alpha1.score_pb2 import Score

from .answers import Answer, ScaleName, UnparseableAnswer, normalize, parse_answer
from .rubrics import CUSTOM_USES, RUBRICS, Rubric, get_rubric
from .templates import KINDS, Template, load_template_file, placeholder_list, select_template

VERSION = "1.0.0"
PACK_NAME = "judge"

NONE_GIVEN = "(none given)"
NOT_USED = "(not used by this rubric)"
RubricName = Literal["correctness", "helpfulness", "relevance", "faithfulness"]
PromptScale = Literal["1-5", "0-1", "pass-fail"]
FAITHFULNESS_SKIP = "missing context: the faithfulness rubric judges the output against the record's context"

DEFAULT_TEMPLATES = {"rubric": "llm-judge@1", "reference": "reference-correctness@1", "pairwise": "pairwise@1"}


# --- rendering records into prompt values --------------------------------------------------------------


def render_content(content: Content, *, conversation: bool = False) -> str:
    """Text for a prompt: text as is, JSON canonically, and chat messages either as the whole
    conversation (``role: content`` lines, for inputs) or as the last assistant message (outputs)."""
    kind = content.WhichOneof("kind")
    if kind == "messages" and conversation:
        lines = []
        for message in content.messages.messages:
            text = message.content
            if message.tool_calls:
                calls = ", ".join(f"{c.name}({canonical_json(from_value(c.arguments))})" for c in message.tool_calls)
                text = f"{text}\n[tool calls: {calls}]" if text else f"[tool calls: {calls}]"
            lines.append(f"{message.role}: {text}")
        return "\n".join(lines)
    return content_text(content)


def render_reference(record: Record) -> str:
    reference = record.reference
    if reference.WhichOneof("kind") == "json" and reference.json.WhichOneof("kind") == "list_value":
        items = [content_text(Content(json=v)) for v in reference.json.list_value.values]
        if items:
            return "Any of these is correct:\n" + "\n".join(f"- {item}" for item in items)
    return render_content(reference)


def render_context(record: Record) -> str:
    parts = [content_text(c) for c in record.context]
    if len(parts) == 1:
        return parts[0]
    return "\n\n".join(f"[{i}] {part}" for i, part in enumerate(parts, 1))


def record_values(record: Record, *, shown: Iterable[str] = CUSTOM_USES, hidden: str = NOT_USED) -> dict[str, str]:
    """Values for input, output, reference and context: absent fields read ``(none given)``, fields not in
    ``shown`` read ``hidden`` (kept out of the prompt, and so out of the cache key)."""
    shown = set(shown)
    renderers = {
        "input": lambda r: render_content(r.input, conversation=True),
        "reference": render_reference,
        "context": render_context,
    }
    values = {"output": render_content(record.output)}
    for field, render in renderers.items():
        if field not in shown:
            values[field] = hidden
        elif has_content(record, field):
            values[field] = render(record)
        else:
            values[field] = NONE_GIVEN
    return values


# --- asking and scoring --------------------------------------------------------------------------------


async def ask(judge: JudgeClient, template: Template, values: Mapping[str, str], scale: ScaleName
              ) -> tuple[Answer, Completion]:
    """One judge call: render, complete (through the cache), parse; an answer with no score on ``scale`` raises
    ``UnparseableAnswer`` (the evaluation's evaluator error)."""
    completion = await judge.complete(template.render(values), template_hash=template.hash)
    answer = parse_answer(completion.text, scale)
    if not answer.ok:
        raise UnparseableAnswer(answer)
    return answer, completion


def _metadata(score: Score, items: Mapping[str, Any]) -> None:
    for key, value in items.items():
        score.metadata[key].CopyFrom(to_value(value))


def _add_cost(score: Score, completions: Sequence[Completion]) -> None:
    """The tokens this evaluation spent: cache hits spent none."""
    live = [c for c in completions if not c.cached]
    score.cost.input_tokens = sum(c.input_tokens for c in live)
    score.cost.output_tokens = sum(c.output_tokens for c in live)
    score.cost.total_tokens = score.cost.input_tokens + score.cost.output_tokens


def _judge_metadata(template: Template, completions: Sequence[Completion]) -> dict[str, Any]:
    return {
        "judge_model": completions[0].model,
        "cached": all(c.cached for c in completions),
        "template": template.ref,
        "template_hash": template.hash,
    }


def judged(score: Score, answer: Answer, template: Template, completion: Completion, **extra: Any) -> Score:
    """``score`` with the judge's explanation, the tokens it spent and what identifies the judgement (metadata)."""
    score.explanation = answer.explanation
    _add_cost(score, [completion])
    _metadata(score, {"raw_score": answer.value, **_judge_metadata(template, [completion]), **extra})
    return score


def judged_calls(score: Score, explanation: str, template: Template, completions: Sequence[Completion],
                 **extra: Any) -> Score:
    """``judged`` for an evaluation that took several judge calls (another pack's claim-by-claim judgements):
    the tokens of every live call, cached only when every answer was."""
    score.explanation = explanation
    _add_cost(score, completions)
    _metadata(score, {**_judge_metadata(template, completions), **extra})
    return score


def _judge_template(judge: JudgeClient, kind: str) -> Template:
    return select_template(DEFAULT_TEMPLATES[kind], judge.config.template)


# --- evaluators ----------------------------------------------------------------------------------------


@evaluator(
    "builtin/llm-judge",
    version=VERSION,
    requires=("output", "judge"),
    outputs=[Output("score", "number", min=0.0, max=1.0,
                    description="Rubric score 1-5 from the judge, normalized to [0, 1] as (s - 1) / 4")],
    params={
        "rubric": "Built-in rubric: correctness (uses the reference when present), helpfulness, relevance, "
                  "faithfulness (needs context).",
        "rubric_text": "Your own rubric text, used instead of the built-in rubric; describe what 1 to 5 mean.",
    },
    pack=PACK_NAME,
)
async def llm_judge(
    record: Record, ctx: EvalContext, *, rubric: RubricName = "correctness", rubric_text: str | None = None
) -> Score:
    """An LLM judge grades the output 1-5 against a rubric (built-in or your own); normalized to [0, 1].

    The built-in rubrics: correctness (against the reference when the record has one), helpfulness,
    relevance and faithfulness (every claim supported by the record's context; records without context
    are skipped). Template ``llm-judge@1``.
    """
    chosen = _rubric(rubric, rubric_text)
    if chosen.needs_context and not has_content(record, "context"):
        raise SkipRecord(FAITHFULNESS_SKIP)
    judge = ctx.require_judge()
    template = _judge_template(judge, "rubric")
    values = {**record_values(record, shown=chosen.uses), "rubric": chosen.text}
    answer, completion = await ask(judge, template, values, "1-5")
    number = normalize(float(answer.value), "1-5")  # type: ignore[arg-type]
    return judged(Score(number=number), answer, template, completion, rubric=chosen.name)


def _rubric(name: str, text: str | None) -> Rubric:
    if text is not None:
        if not text.strip():
            raise BadInputError("evaluator builtin/llm-judge: param 'rubric_text' is empty")
        return Rubric(name="custom", text=text.strip(), uses=CUSTOM_USES)
    if name not in RUBRICS:
        raise BadInputError(
            f"evaluator builtin/llm-judge: param 'rubric' must be one of {', '.join(RUBRICS)}, got {name!r}"
        )
    return get_rubric(name)


@evaluator(
    "builtin/reference-correctness",
    version=VERSION,
    requires=("input", "output", "reference", "judge"),
    outputs=[Output("passed", "boolean", description="The judge found the output correct given the reference")],
    pack=PACK_NAME,
)
async def reference_correctness(record: Record, ctx: EvalContext) -> Score:
    """An LLM judge decides whether the output answers the input correctly, with the reference as ground truth.

    Wording and format do not matter; a different, contradicting, incomplete or hedged answer fails. A JSON
    list reference means "any of these". An unparseable judge answer is an evaluator error. Template
    ``reference-correctness@1``.
    """
    judge = ctx.require_judge()
    template = _judge_template(judge, "reference")
    answer, completion = await ask(judge, template, record_values(record), "pass-fail")
    return judged(Score(passed=answer.value == 1.0), answer, template, completion)


_OUTCOME_NUMBER = {"win": 1.0, "tie": 0.5, "loss": 0.0}


@evaluator(
    "builtin/pairwise-preference",
    version=VERSION,
    scope="comparative",
    requires=("input", "output", "judge"),
    outputs=[
        Output("preference", "label", description="win, tie or loss for the candidate against the baseline"),
        Output("win_rate", "number", min=0.0, max=1.0,
               description="1 for a win, 0.5 for a tie, 0 for a loss; its mean is the candidate's win rate"),
    ],
    pack=PACK_NAME,
)
async def pairwise_preference(records: list[Record], ctx: EvalContext) -> list[Score]:
    """An LLM judge compares the candidate's output with the baseline's, asked twice with the order swapped.

    The same winner both times is a win or a loss for the candidate; a tie, or a verdict that changes with
    the order (``order_dependent``), is a tie. An unparseable answer in either order makes the comparison an
    evaluator error, never a win or a loss. Template ``pairwise@1``.
    """
    if len(records) != 2:
        raise BadInputError(
            f"evaluator builtin/pairwise-preference compares two result sets, got {len(records)} "
            "(give exactly one --compare-to / compare_to)"
        )
    candidate, baseline = records
    judge = ctx.require_judge()
    template = _judge_template(judge, "pairwise")
    base = record_values(candidate)
    cand_out, base_out = render_content(candidate.output), render_content(baseline.output)
    orders = (
        {**base, "output_a": cand_out, "output_b": base_out},  # candidate as A
        {**base, "output_a": base_out, "output_b": cand_out},  # candidate as B
    )
    settled = await asyncio.gather(*(ask(judge, template, v, "pairwise") for v in orders), return_exceptions=True)
    for item in settled:
        if isinstance(item, BaseException):
            raise item
    (first, first_completion), (second, second_completion) = settled  # type: ignore[misc]
    completions = [first_completion, second_completion]
    meta = _judge_metadata(template, completions)
    as_a = {"A": "win", "B": "loss", "tie": "tie"}[str(first.value)]
    as_b = {"A": "loss", "B": "win", "tie": "tie"}[str(second.value)]
    order_dependent = as_a != as_b
    preference = as_a if not order_dependent else "tie"
    explanation = (f"{preference}: candidate as A -> {as_a} ({first.reasoning or 'no reasoning'}); "
                   f"candidate as B -> {as_b} ({second.reasoning or 'no reasoning'})")
    meta.update(verdicts=[first.value, second.value], outcomes=[as_a, as_b])
    meta["order_dependent"] = order_dependent
    scores = [Score(name="preference", label=preference),
              Score(name="win_rate", number=_OUTCOME_NUMBER[preference])]
    for score in scores:
        score.explanation = explanation
        _metadata(score, meta)
    _add_cost(scores[0], completions)  # once per result: run totals add up every score's cost
    return scores


@evaluator(
    "builtin/prompt-judge",
    version=VERSION,
    requires=("output", "judge"),
    outputs=[Output("score", "number", min=0.0, max=1.0,
                    description="The judge's score on the chosen scale, normalized to [0, 1]")],
    params={
        "template_file": "Path of your prompt template (text; optional ---system--- / ---user--- split; "
                         "placeholders {{input}}, {{output}}, {{reference}}, {{context}}).",
        "scale": "How to read the judge's score: 1-5 (normalized as (s - 1) / 4), 0-1 (as is), "
                 "pass-fail (0 or 1).",
    },
    pack=PACK_NAME,
)
async def prompt_judge(record: Record, ctx: EvalContext, *, template_file: str, scale: PromptScale = "1-5") -> Score:
    """An LLM judge grades the output with your own prompt template; the score is normalized to [0, 1].

    Your template must ask for ``{"reasoning": "...", "score": N}`` on the chosen scale. Records lacking a
    field the template uses are skipped.
    """
    if scale not in ("1-5", "0-1", "pass-fail"):
        raise BadInputError(f"evaluator builtin/prompt-judge: param 'scale' must be one of 1-5, 0-1, pass-fail, "
                            f"got {scale!r}")
    template = load_template_file(template_file)
    missing = [f for f in KINDS["custom"] if f != "output" and template.uses(f) and not has_content(record, f)]
    if missing:
        raise SkipRecord(f"missing {', '.join(missing)}: template file {template_file!r} uses "
                         f"{placeholder_list(missing)}")
    judge = ctx.require_judge()
    answer, completion = await ask(judge, template, record_values(record), scale)
    number = normalize(float(answer.value), scale)  # type: ignore[arg-type]
    return judged(Score(number=number), answer, template, completion, scale=scale)


EVALUATORS = (llm_judge, reference_correctness, pairwise_preference, prompt_judge)
