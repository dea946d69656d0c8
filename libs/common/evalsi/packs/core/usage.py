"""Size and usage evaluators: output length, latency, tokens and cost."""

from __future__ import annotations

from typing import Literal

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.records import content_text
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score


def _check_range(name: str, low: float | None, high: float | None, low_name: str, high_name: str) -> None:
    for param, value in ((low_name, low), (high_name, high)):
        if value is not None and value < 0:
            raise BadInputError(f"evaluator {name}: param '{param}' must be >= 0, got {value:g}")
    if low is not None and high is not None and low > high:
        raise BadInputError(
            f"evaluator {name}: param '{low_name}' ({low:g}) is greater than '{high_name}' ({high:g})"
        )


def _budget(value: float, budget: float, unit: str, fmt: str) -> Score:
    if value <= budget:
        return Score(passed=True)
    return Score(passed=False, explanation=f"{value:{fmt}}{unit} is over the budget of {budget:{fmt}}{unit}")


# --- length --------------------------------------------------------------------------------------------------


@evaluator(
    "builtin/length",
    version="1.0.0",
    pack="core",
    requires=["output"],
    outputs=[
        Output("length", "number", min=0.0, higher_is_better=False, description="Output length in the unit."),
        Output("in_range", "boolean", description="min <= length <= max (only when min or max is set)."),
    ],
    params={
        "unit": "What to count: chars, words (whitespace-separated) or lines.",
        "min": "Fewest units allowed; unset for no lower bound.",
        "max": "Most units allowed; unset for no upper bound.",
    },
)
def length(
    record: Record,
    *,
    unit: Literal["chars", "words", "lines"] = "words",
    min: float | None = None,
    max: float | None = None,
) -> dict[str, float | Score]:
    """The output's length in characters, words or lines, and whether it is within [min, max]."""
    _check_range("builtin/length", min, max, "min", "max")
    text = content_text(record.output)
    if unit == "words":
        size = len(text.split())
    elif unit == "chars":
        size = len(text)
    elif unit == "lines":
        size = len(text.splitlines())
    else:
        raise BadInputError(f"evaluator builtin/length: param 'unit' must be one of chars, words, lines, got {unit!r}")
    scores: dict[str, float | Score] = {"length": float(size)}
    if min is None and max is None:
        return scores
    if min is not None and size < min:
        scores["in_range"] = Score(passed=False, explanation=f"{size} {unit}, below min {min:g}")
    elif max is not None and size > max:
        scores["in_range"] = Score(passed=False, explanation=f"{size} {unit}, above max {max:g}")
    else:
        scores["in_range"] = Score(passed=True)
    return scores


# --- latency -------------------------------------------------------------------------------------------------


@evaluator(
    "builtin/latency",
    version="1.0.0",
    pack="core",
    requires=["usage"],
    outputs=[
        Output("seconds", "number", min=0.0, higher_is_better=False, description="usage.latency in seconds."),
        Output("within_budget", "boolean", description="seconds <= max_seconds (only when max_seconds is set)."),
    ],
    params={"max_seconds": "Latency budget in seconds; unset to only report the latency."},
)
def latency(record: Record, *, max_seconds: float | None = None) -> dict[str, float | Score]:
    """The latency of producing the output (usage.latency), optionally against a budget."""
    _check_range("builtin/latency", None, max_seconds, "", "max_seconds")
    usage = record.usage
    if not usage.HasField("latency"):
        raise SkipRecord("no latency: usage.latency is unset")
    seconds = usage.latency.seconds + usage.latency.nanos / 1e9
    scores: dict[str, float | Score] = {"seconds": seconds}
    if max_seconds is not None:
        scores["within_budget"] = _budget(seconds, max_seconds, "s", ".3g")
    return scores


# --- token-usage ---------------------------------------------------------------------------------------------


@evaluator(
    "builtin/token-usage",
    version="1.0.0",
    pack="core",
    requires=["usage"],
    outputs=[
        Output("input_tokens", "number", min=0.0, higher_is_better=False, description="Prompt tokens."),
        Output("output_tokens", "number", min=0.0, higher_is_better=False, description="Completion tokens."),
        Output(
            "total_tokens", "number", min=0.0, higher_is_better=False,
            description="usage.total_tokens, or input + output when it is unset.",
        ),
    ],
)
def token_usage(record: Record) -> dict[str, float]:
    """The tokens spent producing the output: input, output and total."""
    usage = record.usage
    total = usage.total_tokens or usage.input_tokens + usage.output_tokens
    if not (usage.input_tokens or usage.output_tokens or total):
        raise SkipRecord("no token counts: usage has no input, output or total tokens")
    return {
        "input_tokens": float(usage.input_tokens),
        "output_tokens": float(usage.output_tokens),
        "total_tokens": float(total),
    }


# --- cost ----------------------------------------------------------------------------------------------------


@evaluator(
    "builtin/cost",
    version="1.0.0",
    pack="core",
    requires=["usage"],
    outputs=[
        Output("usd", "number", min=0.0, higher_is_better=False, description="Cost in US dollars."),
        Output("within_budget", "boolean", description="usd <= max_usd (only when max_usd is set)."),
    ],
    params={
        "price_per_1k_input": "USD per 1,000 input tokens, used when usage.cost_usd is unset.",
        "price_per_1k_output": "USD per 1,000 output tokens, used when usage.cost_usd is unset.",
        "max_usd": "Cost budget in USD; unset to only report the cost.",
    },
)
def cost(
    record: Record,
    *,
    price_per_1k_input: float | None = None,
    price_per_1k_output: float | None = None,
    max_usd: float | None = None,
) -> dict[str, float | Score]:
    """The cost of producing the output: usage.cost_usd, or tokens times the given prices."""
    for name, value in (
        ("price_per_1k_input", price_per_1k_input),
        ("price_per_1k_output", price_per_1k_output),
        ("max_usd", max_usd),
    ):
        if value is not None and value < 0:
            raise BadInputError(f"evaluator builtin/cost: param '{name}' must be >= 0, got {value:g}")
    usage = record.usage
    usd = usage.cost_usd
    if not usage.HasField("cost_usd"):  # 0 is a free call, counted; only an unset cost is priced or skipped
        if price_per_1k_input is None and price_per_1k_output is None:
            raise SkipRecord("no cost: usage.cost_usd is unset and no prices were given")
        if not (usage.input_tokens or usage.output_tokens):
            raise SkipRecord("no cost: usage.cost_usd is unset and usage has no input or output tokens to price")
        usd = (
            usage.input_tokens * (price_per_1k_input or 0.0) + usage.output_tokens * (price_per_1k_output or 0.0)
        ) / 1000.0
    scores: dict[str, float | Score] = {"usd": usd}
    if max_usd is not None:
        scores["within_budget"] = _budget(usd, max_usd, " USD", ".4g")
    return scores


EVALUATORS = (length, latency, token_usage, cost)
