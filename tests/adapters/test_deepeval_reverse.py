"""Evals.si evaluators as DeepEval metrics (``evalsi_metric``) inside a real ``deepeval.evaluate`` run, in the
adapter's venv (built once per session): each case's score, success and reason equal what ``evalsi.evaluate``
gives on the same records here, a judged evaluator calls our judge (the local server), and the DeepEval process
runs with its telemetry off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deepeval_fixtures.venv import adapter_python, run_in_venv

import evalsi
from evalsi.adapters.deepeval.cases import case_row
from evalsi.testing import FakeOpenAI

CASES = [
    {"name": "fr", "input": "Capital of France?", "actual_output": "Paris", "expected_output": "Paris",
     "retrieval_context": ["Paris is the capital of France."]},
    {"name": "it", "input": "Capital of Italy?", "actual_output": "Milan is the capital", "expected_output": "Rome"},
    {"name": "es", "input": "Capital of Spain?", "actual_output": "Madrid"},  # no reference: skipped
]


def test_evalsi_metrics_in_deepeval_evaluate_equal_our_evaluate(judge_server: FakeOpenAI,
                                                                 tmp_path_factory: pytest.TempPathFactory,
                                                                 tmp_path: Path) -> None:
    judge = {"provider": "openai", "model": "scripted-judge", "base_url": judge_server.base_url}
    metrics: list[dict[str, Any]] = [
        {"evaluator": "builtin/exact-match"},
        {"evaluator": "builtin/token-f1", "threshold": 0.3},
        {"evaluator": "builtin/llm-judge", "judge": judge, "threshold": 0.75},
    ]
    answer = json.loads(run_in_venv(adapter_python(tmp_path_factory), "reverse_run.py",
                                    {"cases": CASES, "metrics": metrics}, tmp_path))
    assert answer["telemetry_off"] is True
    judged_there = len(judge_server.requests)
    assert judged_there >= 3  # llm-judge asked our judge, in the DeepEval process, once per case at least
    rows = [case_row(**case) for case in CASES]
    ours = evalsi.evaluate(rows, ["builtin/exact-match", "builtin/token-f1", "builtin/llm-judge"], judge=judge)
    by_case = {test["name"]: test["metrics"] for test in answer["graded"]}
    thresholds = {"exact-match": None, "token-f1": 0.3, "llm-judge": 0.75}
    for result in ours.results:
        graded = by_case[result.record_id][f"evalsi:builtin/{result.evaluator}@1.0.0"] if result.scores else None
        if result.record_id == "es" and result.evaluator != "llm-judge":
            assert graded is None  # skipped there (skip_on_missing_params) as here (missing reference)
            continue
        (score,) = result.scores
        value = score.number if score.WhichOneof("value") == "number" else float(score.passed)
        threshold = thresholds[result.evaluator]
        success = score.passed if threshold is None else value >= threshold
        assert graded is not None, (result.record_id, result.evaluator)
        assert (graded["score"], graded["success"]) == (value, success), (result.record_id, result.evaluator)
        assert graded["reason"] == (score.explanation or None), (result.record_id, result.evaluator)
    assert by_case["fr"]["evalsi:builtin/llm-judge@1.0.0"]["score"] == 1.0  # the judge's 5/5, normalized
    assert by_case["it"]["evalsi:builtin/llm-judge@1.0.0"]["score"] == 0.0
    # assert_test with exact-match: passes, fails, and says what is missing.
    assert answer["asserted"][:2] == [True, False] and "missing reference" in answer["asserted"][2]
