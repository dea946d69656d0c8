"""Inspect AI's rule-based scorers as Evals.si evaluators (docs/adapters.md#as-a-plugin)."""

from inspect_ai.scorer import exact, f1, includes, match

from evalsi.adapters.inspect import UPSTREAM, inspect_evaluator
from evalsi.evaluators import Pack

pack = Pack(
    name="inspect/scorers",
    evaluators=(
        inspect_evaluator(match(), name="inspect/match", version="0.3.285"),
        inspect_evaluator(includes(), name="inspect/includes", version="0.3.285"),
        inspect_evaluator(exact(), name="inspect/exact", version="0.3.285"),
        inspect_evaluator(f1(), name="inspect/f1", kind="number", version="0.3.285"),
    ),
    description="Inspect AI's match, includes, exact and f1 scorers over records.",
    tier="wrapped",
    upstream=UPSTREAM,
)
