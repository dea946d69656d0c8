"""The generated protobuf code is current, and the staleness check notices when it is not."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_current(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["gen_proto.py", "--check"])
    assert _generator().main() == 0


def test_check_fails_naming_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    generator = _generator()
    copy = tmp_path / "common"
    shutil.copytree(ROOT / "libs" / "common" / "evalsi" / "v1alpha1", copy / "evalsi" / "v1alpha1")
    stale = copy / "evalsi" / "v1alpha1" / "score_pb2.py"
    stale.write_text(stale.read_text() + "\n# edited by hand\n")
    monkeypatch.setattr(generator, "OUT_DIR", copy)
    monkeypatch.setattr(sys, "argv", ["gen_proto.py", "--check"])
    assert generator.main() == 1
    assert "evalsi/v1alpha1/score_pb2.py" in capsys.readouterr().out


def test_schema_keeps_the_plan_field_numbers() -> None:
    from evalsi.v1alpha1 import record_pb2, score_pb2

    record = {f.name: f.number for f in record_pb2.Record.DESCRIPTOR.fields}
    assert record == {
        "id": 1,
        "input": 2,
        "output": 3,
        "reference": 4,
        "context": 5,
        "trajectory": 6,
        "usage": 7,
        "metadata": 8,
        "provenance": 9,
    }
    content = {f.name: f.number for f in record_pb2.Content.DESCRIPTOR.fields}
    assert content == {"text": 1, "messages": 2, "json": 3, "row": 4, "tensor": 5, "media": 6}
    score = {f.name: f.number for f in score_pb2.Score.DESCRIPTOR.fields}
    assert score == {
        "name": 1,
        "number": 2,
        "passed": 3,
        "label": 4,
        "structured": 5,
        "explanation": 6,
        "confidence": 7,
        "cost": 8,
        "metadata": 9,
    }
    result = {f.name: f.number for f in score_pb2.EvaluationResult.DESCRIPTOR.fields}
    assert {
        k: result[k] for k in ("record_id", "evaluator", "evaluator_ref", "outcome", "scores", "reason", "duration")
    } == {"record_id": 1, "evaluator": 2, "evaluator_ref": 3, "outcome": 4, "scores": 5, "reason": 6, "duration": 7}


def test_evaluate_rpc_has_its_http_route() -> None:
    from google.api import annotations_pb2

    from evalsi.v1alpha1 import evaluation_service_pb2

    method = evaluation_service_pb2.DESCRIPTOR.services_by_name["EvaluationService"].methods_by_name["Evaluate"]
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    assert rule.post == "/v1alpha1/evaluate" and rule.body == "*"
