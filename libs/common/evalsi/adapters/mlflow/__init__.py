"""The MLflow adapter: Evals.si evaluators as MLflow GenAI scorers (``mlflow.genai.evaluate``). It imports mlflow,
so use it where ``mlflow-skinny`` (or ``mlflow``) is installed. docs/adapters.md#mlflow.
"""

from evalsi.adapters.mlflow.rows import mlflow_row, retrieved_documents
from evalsi.adapters.mlflow.scorer import UPSTREAM, EvalsiScorer, evalsi_scorer, feedbacks, trace_contexts

__all__ = [
    "UPSTREAM",
    "EvalsiScorer",
    "evalsi_scorer",
    "feedbacks",
    "mlflow_row",
    "retrieved_documents",
    "trace_contexts",
]
