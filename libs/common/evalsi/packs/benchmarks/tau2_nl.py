"""tau2's ``NL_ASSERTION`` component: its ``NLAssertionsEvaluator`` asked of the run's judge.

As tau2 does, one judge call gets the whole conversation (``role: content`` lines) and the task's natural-language
assertions (its ``expectedOutcomes``), and answers ``{"results": [{"expectedOutcome", "reasoning",
"metExpectation"}]}``; the component holds when every assertion is met. The prompt is tau2's (template
``tau2-nl-assertions@1``, in the judge's cache key), with the conversation fenced as data. tau2 reads whatever
results come back; here the answer must give one result per assertion, in order, else it is unreadable (an
evaluator error, never a verdict), so an assertion the judge left out is never counted as met.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evalsi.errors import SkipRecord
from evalsi.judges import Completion, JudgeClient
from evalsi.packs.judge.answers import Answer, UnparseableAnswer
from evalsi.packs.judge.evaluators import judged_calls
from evalsi.packs.judge.templates import Template, pack_template
from evalsi.packs.rag.answers import binary, item_list
from evalsi.v1alpha1.score_pb2 import Score

MAX_ASSERTIONS = 50  # as the tau2:// import allows
MESSAGE_CHARS = 4000  # each message's text as the judge sees it
REASON_CHARS = 500


def template() -> Template:
    return pack_template("evalsi.packs.benchmarks", "tau2-nl-assertions", 1, "session")


def transcript(messages: Sequence[tuple[str, str]]) -> str:
    """tau2's ``f"{role}: {content}"`` lines."""
    return "\n".join(f"{role}: {content[:MESSAGE_CHARS]}" for role, content in messages)


def verdicts(raw: str, assertions: Sequence[str]) -> list[tuple[str, bool, str]]:
    """``(assertion, met, reasoning)`` per assertion from the judge's answer."""
    items = item_list(raw, "results")
    if len(items) != len(assertions):
        raise UnparseableAnswer(Answer(raw, None, error=f"{len(items)} results for {len(assertions)} expected "
                                                        "outcomes (one each, in order)"))
    out = []
    for assertion, item in zip(assertions, items, strict=True):
        met = binary(item.get("metExpectation")) if isinstance(item, dict) else None
        if met is None:
            raise UnparseableAnswer(Answer(raw, None, error="a result without a true/false metExpectation"))
        out.append((assertion, bool(met), str(item.get("reasoning") or "")[:REASON_CHARS]))
    return out


async def nl_assertions(judge: JudgeClient, assertions: Sequence[str], messages: Sequence[tuple[str, str]]
                        ) -> Score:
    """The ``nl_assertion`` component: passed when the judge finds every assertion met."""
    if len(assertions) > MAX_ASSERTIONS:
        raise SkipRecord(f"{len(assertions)} NL assertions: over the limit of {MAX_ASSERTIONS} for one judge call")
    chosen = template()
    values = {"transcript": transcript(messages), "goal": json.dumps(list(assertions), ensure_ascii=False)}
    completion: Completion = await judge.complete(chosen.render(values), template_hash=chosen.hash)
    found = verdicts(completion.text, assertions)
    unmet = [assertion for assertion, met, _ in found if not met]
    explanation = f"not met: {unmet}" if unmet else f"all {len(found)} expected outcomes met"
    checks: list[dict[str, Any]] = [{"assertion": a, "met": m, "reasoning": r} for a, m, r in found]
    return judged_calls(Score(passed=not unmet), explanation, chosen, [completion], nl_assertions=checks)
