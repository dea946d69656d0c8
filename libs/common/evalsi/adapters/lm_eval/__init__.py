"""The lm-evaluation-harness adapter (``lm-eval==0.4.13``): lm-eval's sample logs imported as records (no lm-eval
needed: they are JSONL), and ``--model evalsi``, an lm-eval model that generates through Evals.si's model-target
connectors (``evalsi.adapters.lm_eval.model``, imported only where lm-eval is installed: its own virtualenv).
docs/adapters.md#lm-evaluation-harness.
"""

from evalsi.adapters.lm_eval.rows import SampleContext, sample_rows
from evalsi.adapters.lm_eval.samples import ImportSummary, Run, find_run, import_samples, read_usage, run_rows

UPSTREAM = "lm-eval==0.4.13"

__all__ = [
    "UPSTREAM",
    "ImportSummary",
    "Run",
    "SampleContext",
    "find_run",
    "import_samples",
    "read_usage",
    "run_rows",
    "sample_rows",
]
