"""What every DeepEval evaluator of the plugin shares: its outputs, its threshold check, its judge cache key, and
one measurement of a DeepEval metric over a test case turned into scores. Runs in DeepEval's virtualenv, but
imports nothing of DeepEval: the metric and the test case are built by the caller."""

from __future__ import annotations

import asyncio
from typing import Any

from evalsi.adapters.deepeval import UPSTREAM
from evalsi.adapters.deepeval.judge_model import JudgeLLM
from evalsi.errors import BadInputError
from evalsi.evaluators import Output
from evalsi.v1alpha1.score_pb2 import Score

VERSION = UPSTREAM.split("==")[1]
MAX_CRITERIA = 4000  # characters of a G-Eval criteria param: it is sent to the judge with every record
# The params every metric takes, as DeepEval names them.
COMMON_PARAMS = {
    "threshold": "DeepEval's threshold for passed (0-1)",
    "include_reason": "ask the judge for DeepEval's reason (one call more per record)",
    "strict_mode": "DeepEval's strict mode: the score is 0 or 1, the threshold 1",
}


def outputs(about: str) -> list[Output]:
    return [
        Output("score", "number", min=0.0, max=1.0, description=f"DeepEval's score: {about}"),
        Output("passed", description="DeepEval's success: the score at or above the threshold"),
    ]


def check_threshold(*, threshold: float, **_: Any) -> None:
    if not 0.0 <= threshold <= 1.0:
        raise BadInputError(f"param threshold: {threshold} is outside [0, 1] (DeepEval's scores are in [0, 1])")


def check_optional_text(param: str, value: str | None, limit: int, unset: str) -> None:
    """An optional text param: 1 to ``limit`` characters, or unset (``unset`` says what happens then)."""
    if value is not None and not 0 < len(value.strip()) <= limit:
        raise BadInputError(f"param {param}: 1 to {limit} characters, or unset {unset} (got {len(value.strip())})")


def check_criteria(*, threshold: float, criteria: str, **_: Any) -> None:
    check_threshold(threshold=threshold)
    if not criteria.strip() or len(criteria) > MAX_CRITERIA:
        raise BadInputError(f"param criteria: give what G-Eval grades, 1 to {MAX_CRITERIA} characters "
                            f"(got {len(criteria.strip())})")


def template(slug: str) -> str:
    """The judge cache key of a metric's calls: another metric, or another DeepEval release, never reuses them."""
    return f"deepeval:{slug}@{VERSION}"


async def measure(metric: Any, model: JudgeLLM | None, case: Any, *, threaded: bool = False) -> list[Score]:
    """``metric`` (a DeepEval metric) over ``case`` (its test case): DeepEval's score and success, explained by its
    reason, the score costed with the judge tokens ``model`` spent (None: a metric that asks no model). ``threaded``:
    DeepEval's synchronous ``measure`` in a worker thread (the metric made with async_mode=False), for a metric whose
    a_measure asks its model synchronously; the judge answers it on this loop (``JudgeLLM.generate``)."""
    if threaded:
        await asyncio.to_thread(metric.measure, case, _show_indicator=False)
    else:
        await metric.a_measure(case, _show_indicator=False)
    if metric.score is None:
        raise ValueError(f"DeepEval's {type(metric).__name__} gave no score: {metric.error or 'no error given'}")
    reason = metric.reason or ""
    score = Score(name="score", number=float(metric.score), explanation=reason)
    live = [c for c in model.completions if not c.cached] if model is not None else []  # cache hits spent nothing
    score.cost.input_tokens = sum(c.input_tokens for c in live)
    score.cost.output_tokens = sum(c.output_tokens for c in live)
    score.cost.total_tokens = score.cost.input_tokens + score.cost.output_tokens
    # DeepEval's evaluate() asks is_successful() after measuring; a few metrics (tool use) leave success unset.
    success = metric.success if metric.success is not None else metric.is_successful()
    return [score, Score(name="passed", passed=bool(success), explanation=reason)]
