"""The Inspect AI adapter (``pip install 'evalsi[inspect]'``): Inspect logs imported as records, Evals.si
evaluators as Inspect scorers, and Inspect scorers as Evals.si evaluators. docs/adapters.md#inspect-ai.
"""

from evalsi.adapters.inspect.evaluator import UPSTREAM, inspect_evaluator, task_state
from evalsi.adapters.inspect.judged import inspect_judged_evaluator
from evalsi.adapters.inspect.logs import ImportSummary, LogHeader, import_log, log_rows, read_header
from evalsi.adapters.inspect.rows import SampleParts, sample_row
from evalsi.adapters.inspect.scorer import evalsi_scorer

__all__ = [
    "UPSTREAM",
    "ImportSummary",
    "LogHeader",
    "SampleParts",
    "evalsi_scorer",
    "import_log",
    "inspect_evaluator",
    "inspect_judged_evaluator",
    "log_rows",
    "read_header",
    "sample_row",
    "task_state",
]
