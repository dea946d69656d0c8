"""Efficiency evaluators: steps against a budget or the optimum, and tokens, cost and time against budgets."""

from __future__ import annotations

from typing import Literal

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.packs.agent._trajectory import reference_field, tool_steps, usage_figures
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_LLM, Record
from evalsi.v1alpha1.score_pb2 import Score

StepCount = Literal["steps", "tool_calls", "llm_calls"]


def _positive(evaluator_name: str, **values: float | None) -> None:
    for name, value in values.items():
        if value is not None and value <= 0:
            raise BadInputError(f"evaluator {evaluator_name}: param '{name}' must be > 0, got {value:g}")


def _reference_number(record: Record, key: str) -> float | None:
    value = reference_field(record, key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"reference '{key}' must be a positive number, got {value!r}")
    return float(value)


# --- step-efficiency -----------------------------------------------------------------------------------------


@evaluator(
    "builtin/step-efficiency",
    version="1.0.0",
    pack="agent",
    requires=["trajectory"],
    outputs=[
        Output("steps", "number", min=0.0, higher_is_better=False, description="Steps (or calls) the agent used."),
        Output("within_budget", "boolean", description="steps <= max_steps (only when a maximum is known)."),
        Output(
            "efficiency",
            "number",
            min=0.0,
            max=1.0,
            description="optimal_steps / steps, capped at 1 (only when an optimum is known).",
        ),
    ],
    params={
        "count": "What to count: steps (every trajectory step), tool_calls or llm_calls.",
        "max_steps": "Most steps allowed; unset to read the reference's 'max_steps', or to only report the count.",
        "optimal_steps": "Steps the best known solution takes; unset to read the reference's 'optimal_steps'.",
    },
)
def step_efficiency(
    record: Record,
    *,
    count: StepCount = "steps",
    max_steps: float | None = None,
    optimal_steps: float | None = None,
) -> dict[str, float | Score]:
    """How many steps the agent took, whether within a step budget, and how close to the optimal number."""
    _positive("builtin/step-efficiency", max_steps=max_steps, optimal_steps=optimal_steps)
    trajectory = record.trajectory
    if count == "steps":
        used = len(trajectory.steps)
    elif count == "tool_calls":
        used = len(tool_steps(trajectory))
    elif count == "llm_calls":
        used = sum(1 for s in trajectory.steps if s.type == STEP_TYPE_LLM)
    else:
        raise BadInputError(
            "evaluator builtin/step-efficiency: param 'count' must be one of steps, tool_calls, llm_calls, "
            f"got {count!r}"
        )
    limit = max_steps if max_steps is not None else _reference_number(record, "max_steps")
    optimum = optimal_steps if optimal_steps is not None else _reference_number(record, "optimal_steps")
    scores: dict[str, float | Score] = {"steps": float(used)}
    if limit is not None:
        ok = used <= limit
        scores["within_budget"] = Score(
            passed=ok, explanation="" if ok else f"{used} {count.replace('_', ' ')}, over the budget of {limit:g}"
        )
    if optimum is not None:
        scores["efficiency"] = min(1.0, optimum / used) if used else 1.0
    return scores


# --- budget-adherence ----------------------------------------------------------------------------------------


@evaluator(
    "builtin/budget-adherence",
    version="1.0.0",
    pack="agent",
    outputs=[
        Output("passed", "boolean", description="Every given budget is met (only when a budget is given)."),
        Output("tokens", "number", min=0.0, higher_is_better=False, description="Total tokens spent."),
        Output("usd", "number", min=0.0, higher_is_better=False, description="Cost in US dollars."),
        Output("seconds", "number", min=0.0, higher_is_better=False, description="Wall-clock seconds."),
    ],
    params={
        "max_tokens": "Token budget (total tokens); unset for none.",
        "max_usd": "Cost budget in USD; unset for none.",
        "max_seconds": "Wall-clock budget in seconds; unset for none.",
    },
)
def budget_adherence(
    record: Record,
    *,
    max_tokens: float | None = None,
    max_usd: float | None = None,
    max_seconds: float | None = None,
) -> dict[str, float | Score]:
    """Tokens, cost and time (record.usage, else summed over the trajectory's steps) against budgets.

    A figure that is unknown is not reported; a budget on an unknown figure skips the record.
    """
    _positive("builtin/budget-adherence", max_tokens=max_tokens, max_usd=max_usd, max_seconds=max_seconds)
    figures = usage_figures(record)
    if all(value is None for value in figures.values()):
        raise SkipRecord("no usage: neither record.usage nor the trajectory's steps carry tokens, cost or time")
    budgets = {"tokens": max_tokens, "usd": max_usd, "seconds": max_seconds}
    unknown = [name for name, budget in budgets.items() if budget is not None and figures[name] is None]
    if unknown:
        raise SkipRecord(f"a budget is set but the record has no {' or '.join(unknown)} figure")
    scores: dict[str, float | Score] = {name: value for name, value in figures.items() if value is not None}
    over = [
        f"{name} {figures[name]:.4g} > {budget:g}"
        for name, budget in budgets.items()
        if budget is not None and figures[name] is not None and figures[name] > budget  # type: ignore[operator]
    ]
    if any(budget is not None for budget in budgets.values()):
        scores["passed"] = Score(passed=not over, explanation=f"over budget: {', '.join(over)}" if over else "")
    return scores


EVALUATORS = (step_efficiency, budget_adherence)
