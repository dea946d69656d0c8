"""Evals.si evaluators as MLflow scorers (contract tests, offline): a real ``mlflow.genai.evaluate`` run, in a
virtualenv holding the pinned MLflow (built once per test session, sharing the host's packages), logs assessments
equal to what ``evaluate()`` gives on the same rows; a skipped row is no assessment, never a zero; a judge evaluator
calls the judge given; a trace's retrieval spans are the record's context; nothing leaves the machine."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.plugins.manifest import PluginManifest
from evalsi.plugins.venv import ensure_venv, venv_python
from evalsi.v1alpha1.score_pb2 import Outcome

FIXTURES = Path(__file__).parent / "mlflow_fixtures"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mlflow" / "evaluate.py"
# An MLflow run (import, SQLite store creation, the scorers, reading back) takes ~15 s on a loaded 2-core machine.
RUN_TIMEOUT_S = 300

FOUR = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
# (question, MLflow's outputs, MLflow's expectations, the record's output and reference as evaluate() is given them)
ROWS: list[tuple[str, Any, dict[str, Any], Any, str | None]] = [
    ("Capital of France?", "Paris", {"expected_response": "Paris"}, "Paris", "Paris"),
    ("Capital of Italy?", "Rome is it", {"expected_response": "Rome"}, "Rome is it", "Rome"),
    ("Largest planet?", "Jupiter", {}, "Jupiter", None),
    # An OpenAI chat completion is its first choice's text; expected facts are the reference, one per line.
    ("Capital of Spain?", {"choices": [{"message": {"role": "assistant", "content": "Madrid"}}]},
     {"expected_facts": ["Madrid", "in Spain"]}, "Madrid", "Madrid\nin Spain"),
    ("2+2?", {"messages": FOUR}, {"expected_response": "4"}, {"messages": FOUR}, "4"),
]


@pytest.fixture(scope="session")
def mlflow_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLflow venv's python: built from mlflow_fixtures/env's pins the first time in a session."""
    env = tmp_path_factory.mktemp("mlflow-env") / "env"
    shutil.copytree(FIXTURES / "env", env)  # building its wheel writes beside the sources
    pins = (env / "pyproject.toml").read_bytes()
    manifest = PluginManifest(
        name="adapters/mlflow", version="3.18.0", description="the MLflow adapter's contract-test environment",
        entrypoint="evalsi.adapters.mlflow:evalsi_scorer", package="", path=env, share_host_packages=True,
        timeout_s=60.0, startup_timeout_s=120.0, max_batch=1, max_message_bytes=1 << 20,
        source=env / "pyproject.toml", digest=hashlib.sha256(pins).hexdigest(),
    )
    return venv_python(ensure_venv(manifest, tmp_path_factory.getbasetemp() / "adapter-venvs"))


def _run_offline(python: Path, tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by the venv's python with the offline guard (evalsi.testing.offline_guard) installed first, in a
    scrubbed environment as a plugin gets: no proxy, no keys, a home of its own."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "PYTHONPATH": str(FIXTURES)}
    guarded = (f"from evalsi.testing import offline_guard as offline\noffline.install()\n{code}\n"
               "assert not offline.blocked, offline.blocked\n")
    done = subprocess.run([str(python), "-c", guarded], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, check=False)
    # MLflow and the adapter ran offline: no lookup, no connection beyond this machine (refused and noted if tried).
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _run_mlflow(python: Path, tmp_path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", **spec}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    _run_offline(python, tmp_path, f"import run_evaluate\nrun_evaluate.main({str(tmp_path / 'spec.json')!r}, "
                                   f"{str(tmp_path / 'out.json')!r})")
    out: dict[str, Any] = json.loads((tmp_path / "out.json").read_text())
    assert out["telemetry"] is False  # the adapter's opt-out: MLflow made no telemetry client
    return out


def _logged(out: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The assessments MLflow stored, by (question, assessment name)."""
    return {(json.loads(t["request"])["question"], a["name"]): a for t in out["traces"] for a in t["assessments"]}


def _assert_same(logged: dict[tuple[str, str], dict[str, Any]], results: Any, source_type: dict[str, str],
                 several: frozenset[str] = frozenset()) -> None:
    """Each of our results is MLflow's assessment of that row: its value, rationale and evaluator; a skip is none.
    An evaluator with ``several`` outputs gives one assessment per output, named ``<evaluator>.<output>``."""
    for result in results.results:
        names = {s.name: f"{result.evaluator}.{s.name}" if result.evaluator in several else result.evaluator
                 for s in result.scores}
        if result.outcome == Outcome.OUTCOME_SKIPPED:
            assert not any(key[0] == result.record_id and key[1].startswith(result.evaluator) for key in logged)
            continue
        assert result.outcome == Outcome.OUTCOME_SCORED, (result.record_id, result.reason)
        for score in result.scores:
            key = (result.record_id, names[score.name])
            assessment = logged[key]
            if score.WhichOneof("value") == "passed":
                assert assessment["value"] is score.passed, key
            else:
                assert isinstance(assessment["value"], float) and assessment["value"] == pytest.approx(score.number)
            assert (assessment["rationale"] or "") == score.explanation, key
            assert assessment["metadata"]["evalsi.evaluator"] == f"builtin/{result.evaluator}@1.0.0"
            assert assessment["source_type"] == source_type[result.evaluator] and assessment["error_code"] is None
        assert {key for key in logged if key[0] == result.record_id and key[1].startswith(result.evaluator)} == {
            (result.record_id, name) for name in names.values()}


def test_mlflow_logs_what_evaluate_gives_on_the_same_rows(mlflow_python: Path, judge_server: Any,
                                                          tmp_path: Path) -> None:
    judge = {"provider": "openai", "model": "judge-1", "base_url": judge_server.base_url}
    with socket.socket() as closed:  # a port nothing listens on: the judge is down
        closed.bind(("127.0.0.1", 0))
        down = {"provider": "openai", "model": "judge-1", "max_retries": 0,
                "base_url": f"http://127.0.0.1:{closed.getsockname()[1]}/v1"}
    data = [{"inputs": {"question": q}, "outputs": outputs, **({"expectations": given} if given else {})}
            for q, outputs, given, _, _ in ROWS]
    out = _run_mlflow(mlflow_python, tmp_path, {"data": data, "scorers": [
        {"ref": "builtin/exact-match"}, {"ref": "token-f1"}, {"ref": "llm-judge", "judge": judge, "cache": False},
        {"ref": "llm-judge", "name": "judge-down", "judge": down, "cache": False},
    ]})
    judged_in_mlflow = list(judge_server.requests)
    records = [{"id": q, "input": q, "output": output, **({"reference": ref} if ref else {})}
               for q, _, _, output, ref in ROWS]
    results = evalsi.evaluate(records, ["exact-match", "token-f1", "llm-judge"], judge=judge, cache=False)
    logged = _logged(out)
    _assert_same(logged, results, {"exact-match": "CODE", "token-f1": "CODE", "llm-judge": "LLM_JUDGE"})
    # The row without expectations has no reference: exact-match and token-f1 skip it (no assessment, not a 0).
    assert ("Largest planet?", "exact-match") not in logged and ("Largest planet?", "llm-judge") in logged
    assert {k[0] for k in logged if k[1] == "exact-match"} == {q for q, *_, ref in ROWS if ref}
    # MLflow's own aggregates are over our values, the skipped row left out.
    assert out["metrics"]["exact-match/mean"] == pytest.approx(results.metric("exact-match").mean) == 0.5
    assert logged[("2+2?", "exact-match")]["value"] is True  # the last assistant message is the output text
    assert out["metrics"]["token-f1/mean"] == pytest.approx(results.metric("token-f1").mean)
    # One call a row to the judge we gave (never an MLflow model), as evaluate() makes.
    assert len(judged_in_mlflow) == len(ROWS) and all(body["model"] == "judge-1" for body in judged_in_mlflow)
    assert logged[("Capital of France?", "llm-judge")]["value"] == 1.0
    assert logged[("Capital of Italy?", "llm-judge")]["value"] == 0.0
    # A judge that is down is an error assessment of each row (our outcome and reason), never a value.
    with evalsi.evaluate(records[:1], ["llm-judge"], judge=down, cache=False) as failed:
        (result,) = failed.results
    for question, *_ in ROWS:
        error = logged[(question, "judge-down")]
        assert error["value"] is None and error["error_code"] == Outcome.Name(result.outcome) != "OUTCOME_SCORED"
        assert error["error_message"] == result.reason != ""


def test_a_traces_retrieval_spans_are_the_records_context(mlflow_python: Path, tmp_path: Path) -> None:
    docs = ["Paris is the capital of France.", "Lyon is a city in France."]
    rag = {"Capital of France?": {"answer": "Paris [1]", "documents": docs},
           "Capital of Spain?": {"answer": "Madrid [3]", "documents": docs},
           "Capital of Peru?": {"answer": "Lima", "documents": []}}
    data = [{"inputs": {"question": q}} for q in rag]
    out = _run_mlflow(mlflow_python, tmp_path, {"data": data, "rag": rag,
                                                "scorers": [{"ref": "citation-accuracy"}]})
    logged = _logged(out)
    records = [{"id": q, "input": q, "output": r["answer"], **({"context": r["documents"]} if r["documents"] else {})}
               for q, r in rag.items()]
    results = evalsi.evaluate(records, ["citation-accuracy"])
    _assert_same(logged, results, {"citation-accuracy": "CODE"}, several=frozenset({"citation-accuracy"}))
    # [1] cites a retrieved document, [3] none (two were retrieved); no retrieval, no context: skipped. Without
    # metadata.supporting only the valid output is computed, so it is the only assessment.
    assert logged[("Capital of France?", "citation-accuracy.valid")]["value"] == 1.0
    assert logged[("Capital of Spain?", "citation-accuracy.valid")]["value"] == 0.0
    assert not any(key[0] == "Capital of Peru?" for key in logged)


def test_the_example_runs_offline_and_prints_our_metrics(mlflow_python: Path, tmp_path: Path) -> None:
    done = _run_offline(mlflow_python, tmp_path, f"import runpy, sys\nsys.argv = ['evaluate.py', 'tracking']\n"
                                                 f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')")
    printed = dict(line.split(" = ") for line in done.stdout.splitlines() if " = " in line)
    records = [{"id": "fr", "output": "Paris", "reference": "Paris"},
               {"id": "it", "output": "Rome is the capital", "reference": "Rome"},
               {"id": "planet", "output": "Jupiter"}]
    results = evalsi.evaluate(records, ["exact-match", "token-f1",
                                        {"ref": "regex-match", "alias": "one-word",
                                         "params": {"pattern": "^[A-Z][a-z]+$"}}])
    assert printed == {f"{name}/mean": f"{results.metric(name).mean:.3f}"
                       for name in ("exact-match", "one-word", "token-f1")}
    assert (tmp_path / "tracking" / "mlflow.db").is_file()
