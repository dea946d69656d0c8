"""The code pack's pure parts: how an execution's outcome becomes a score or an infrastructure error, the harness
lines only the nonce makes count, code extraction, the run manifest's isolation entries, and spec.sandbox as a
SandboxSpec."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from google.protobuf import json_format

from evalsi.errors import InfraError
from evalsi.evaluators import EvalContext
from evalsi.evaluators._slots import fail
from evalsi.packs.code.evaluators import python_syntax, unit_tests
from evalsi.packs.code.execution import _interpret, extract_code
from evalsi.records import make_record
from evalsi.runs.isolation import sandbox_use
from evalsi.sandbox.access import sandbox_request
from evalsi.sandbox.model import Endpoint, ExecResult, IsolationReport, Level, Outcome
from evalsi.v1alpha1.run_pb2 import SandboxSpec
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, EvaluationResult, Score

REPORT = IsolationReport("bwrap", Level.NAMESPACED, "full", {"timeout": "30s wall clock"}, (), Level.NAMESPACED)
NONCE = "ab" * 16


def _result(kind: str, stdout: bytes = b"", **outcome: object) -> ExecResult:
    return ExecResult(Outcome(kind, **outcome), REPORT, stdout=stdout)  # type: ignore[arg-type]


def test_a_runner_failure_is_an_infra_error_never_a_score() -> None:
    with pytest.raises(InfraError, match="sandbox runner failure \\(bwrap\\): bwrap: setting up uid map") as caught:
        _interpret(_result("runner_failure", signature="bwrap: setting up uid map: Permission denied"), NONCE)
    result = EvaluationResult()
    fail(result, caught.value)
    assert (result.outcome, result.error_kind) == (OUTCOME_ERROR, ERROR_KIND_INFRA)


def test_denials_and_timeouts_fail_every_test_with_the_effect() -> None:
    denied = _interpret(_result("denied", effect="oom-kill"), NONCE)
    assert (denied.passed, denied.pass_rate, denied.explanation()) == (False, 0.0, "denied: oom-kill")
    timed_out = _interpret(_result("timeout"), NONCE)
    assert not timed_out.passed
    assert timed_out.explanation() == "timeout: the program ran past 30s wall clock and was stopped"


def test_only_lines_with_the_nonce_count() -> None:
    forged = (b'all passed\nffff {"test": "t", "passed": true}\n{"done": true}\n'
              + f'{NONCE} {{"test": "test_a", "passed": false, "detail": "AssertionError"}}\n'.encode()
              + f'{NONCE} {{"test": "test_b", "passed": true, "detail": ""}}\n'.encode()
              + f'{NONCE} {{"done": true}}\n'.encode())
    run = _interpret(_result("exit", forged, code=0), NONCE)
    assert [(t.name, t.passed) for t in run.tests] == [("test_a", False), ("test_b", True)]
    assert (run.passed, run.pass_rate) == (False, 0.5)
    assert run.explanation() == "1 of 2 tests passed; test_a failed: AssertionError"


def test_a_harness_that_never_finished_is_an_infra_error() -> None:
    with pytest.raises(InfraError, match="without its results"):
        _interpret(_result("exit", b"", code=1), NONCE)


def test_code_is_taken_from_the_first_fence() -> None:
    assert extract_code("Here:\n```python\nx = 1\n```\nand ```y```") == "x = 1\n"
    assert extract_code("x = 1") == "x = 1"


def test_python_syntax_names_line_and_column() -> None:
    bad = python_syntax(make_record(output="```python\ndef f(:\n    pass\n```"))
    assert (bad.passed, bad.explanation) == (False, "SyntaxError at line 1, column 7: invalid syntax")
    assert python_syntax(make_record(output="def f():\n    return 1\n")).passed


def test_an_executing_evaluator_without_a_sandbox_is_an_infra_error() -> None:
    record = make_record(output="def add(a, b):\n    return a + b\n", reference="assert add(1, 2) == 3\n")
    with pytest.raises(InfraError, match="code evaluators need a sandbox"):
        asyncio.run(unit_tests.fn(record, EvalContext()))


def test_spec_sandbox_becomes_the_sandbox_request() -> None:
    message = json_format.ParseDict({"minIsolation": "confined", "network": "allow", "allow": ["pypi.org:443"],
                                     "resources": {"timeout": "5s", "memory": 1 << 26, "pids": 32}}, SandboxSpec())
    spec = sandbox_request(message)
    assert spec.min_isolation is Level.CONFINED
    assert spec.network.allow == (Endpoint("pypi.org", 443),)
    assert (spec.resources.timeout_s, spec.resources.memory_bytes, spec.resources.pids) == (5.0, 1 << 26, 32)
    assert sandbox_request(None).min_isolation is Level.NAMESPACED  # unset: namespaced, never unconfined


def test_the_manifest_lists_each_distinct_isolation_once() -> None:
    def scored(enforcement: str) -> EvaluationResult:
        score = Score(name="passed", passed=True)
        score.metadata["isolation"].CopyFrom(json_format.ParseDict(
            {"driver": "landlock", "level": "confined", "enforcement": enforcement, "requested": "confined",
             "bounds": {"network": "TCP denied"}, "not_enforced": [] if enforcement == "full" else ["tcp"]},
            score.metadata["isolation"]))
        return EvaluationResult(scores=[score])

    async def batches() -> AsyncIterator[list[EvaluationResult]]:
        yield [scored("full"), scored("partial")]
        yield [scored("full"), EvaluationResult()]
        yield [EvaluationResult(reason="SANDBOX_UNAVAILABLE: no sandbox rung meets min_isolation vm"),
               EvaluationResult(reason="SANDBOX_UNAVAILABLE: again")]

    use = asyncio.run(sandbox_use(batches()))
    reports = use.reports
    assert (use.refused, use.first_refusal) == (2, "SANDBOX_UNAVAILABLE: no sandbox rung meets min_isolation vm")
    assert [(r.driver, r.enforcement, list(r.not_enforced), list(r.enforced)) for r in reports] == [
        ("landlock", "full", [], ["network: TCP denied"]), ("landlock", "partial", ["tcp"], ["network: TCP denied"])]
    assert json.dumps([r.achieved for r in reports]) == "[2, 2]"  # ISOLATION_LEVEL_CONFINED
