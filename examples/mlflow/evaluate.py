"""Evals.si evaluators as MLflow scorers: three answers graded by mlflow.genai.evaluate, offline.

Run where mlflow-skinny is installed (docs/adapters.md#mlflow): ``python evaluate.py [TRACKING_DIR]``. The tracking
store is SQLite in TRACKING_DIR (default ./mlruns-evalsi), which needs sqlalchemy and alembic beside mlflow-skinny.
"""

import sys
from pathlib import Path

import mlflow

from evalsi.adapters.mlflow import evalsi_scorer

tracking = Path(sys.argv[1] if len(sys.argv) > 1 else "mlruns-evalsi").resolve()
tracking.mkdir(parents=True, exist_ok=True)
mlflow.set_tracking_uri(f"sqlite:///{tracking / 'mlflow.db'}")

data = [
    {"inputs": {"question": "Capital of France?"}, "outputs": "Paris",
     "expectations": {"expected_response": "Paris"}},
    {"inputs": {"question": "Capital of Italy?"}, "outputs": "Rome is the capital",
     "expectations": {"expected_response": "Rome"}},
    # No expectations: exact-match and token-f1 need a reference, so they skip this row (no assessment, not a 0).
    {"inputs": {"question": "Largest planet?"}, "outputs": "Jupiter"},
]
scorers = [
    evalsi_scorer("builtin/exact-match"),
    evalsi_scorer("token-f1"),
    evalsi_scorer("regex-match", params={"pattern": "^[A-Z][a-z]+$"}, name="one-word"),
]
result = mlflow.genai.evaluate(data=data, scorers=scorers)
for name, value in sorted(result.metrics.items()):
    print(f"{name} = {float(value):.3f}")
