"""Run ``mlflow.genai.evaluate`` with Evals.si scorers in the MLflow venv, then read back what MLflow logged.

``main(SPEC, OUT)``, called once the offline guard (offline.py) is installed. SPEC (JSON) holds ``tracking_uri``,
``data`` (MLflow's evaluation rows), ``scorers`` (``evalsi_scorer`` keyword arguments, ``ref`` first) and optionally
``rag``: question -> ``answer`` and ``documents``, answered by a traced app whose retrieval span returns the
documents (so scorers get a trace). OUT gets, per trace, its request and the assessments read back from the
tracking store, the run's metrics, and whether MLflow's telemetry client is on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Document, SpanType
from mlflow.telemetry.client import get_telemetry_client

from evalsi.adapters.mlflow import evalsi_scorer


def _rag_app(answers: dict[str, Any]) -> Any:
    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(question: str) -> list[Document]:
        return [Document(page_content=text, id=f"doc-{i}") for i, text in enumerate(answers[question]["documents"])]

    @mlflow.trace
    def app(question: str) -> str:
        retrieve(question)
        return str(answers[question]["answer"])

    return app


def main(spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    mlflow.set_tracking_uri(spec["tracking_uri"])
    scorers = [evalsi_scorer(s.pop("ref"), **s) for s in spec["scorers"]]
    predict = _rag_app(spec["rag"]) if spec.get("rag") else None
    result = mlflow.genai.evaluate(data=spec["data"], scorers=scorers, predict_fn=predict)
    traces = []
    for trace in mlflow.search_traces(run_id=result.run_id, return_type="list"):
        assessments = []
        for a in trace.info.assessments:
            if a.expectation is not None:
                continue
            error = a.feedback.error if a.feedback is not None else None
            assessments.append({
                "name": a.name, "value": a.feedback.value if a.feedback is not None else None,
                "rationale": a.rationale, "metadata": a.metadata or {}, "source_type": a.source.source_type,
                "error_code": error.error_code if error else None,
                "error_message": error.error_message if error else None,
            })
        traces.append({"request": trace.data.request, "assessments": assessments})
    metrics = {key: float(value) for key, value in result.metrics.items()}
    telemetry = get_telemetry_client() is not None
    Path(out_path).write_text(json.dumps({"traces": traces, "metrics": metrics, "telemetry": telemetry}))
