"""Run ``mlflow.genai.evaluate`` with Evals.si scorers in the MLflow venv, then read back what MLflow logged.

``python run_evaluate.py SPEC OUT``: SPEC (JSON) holds ``tracking_uri``, ``data`` (MLflow's evaluation rows),
``scorers`` (``evalsi_scorer`` keyword arguments, ``ref`` first) and optionally ``rag``: question -> ``answer`` and
``documents``, answered by a traced app whose retrieval span returns the documents (so scorers get a trace). OUT
gets, per trace, its request and the assessments read back from the tracking store, plus the run's metrics and
every connection the process tried to open beyond this machine (none are allowed: the socket is refused).
"""

from __future__ import annotations

import ipaddress
import json
import sys
from pathlib import Path
from typing import Any

blocked: list[str] = []


def _local(host: Any) -> bool:
    if not isinstance(host, str) or host == "localhost":
        return True  # an AF_UNIX path, or the loopback name
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _offline(event: str, args: tuple[Any, ...]) -> None:
    """Refuse (and note) any connection or name lookup that would leave this machine."""
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else address
    elif event == "socket.getaddrinfo":
        host = args[0]
    else:
        return
    if not _local(host):
        blocked.append(f"{event} {host}")
        raise OSError(f"offline test: {event} to {host} refused")


sys.addaudithook(_offline)

import mlflow  # noqa: E402 (after the hook, so mlflow's import-time calls are watched too)
from mlflow.entities import Document, SpanType  # noqa: E402

from evalsi.adapters.mlflow import evalsi_scorer  # noqa: E402


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
    Path(out_path).write_text(json.dumps({"traces": traces, "metrics": metrics, "blocked": blocked}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
