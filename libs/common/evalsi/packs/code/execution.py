"""Running a candidate program's tests in a sandbox, and what the execution's outcome means for the score.

The harness (``sandbox_main.py``, the candidate and its tests) goes into a fresh session's workspace; one exec runs
it. How that exec ended decides what the record gets:

- ``exit``: the harness's nonce-tagged lines are the per-test results (lines without the nonce are ignored, so a
  program printing "all passed" gains nothing);
- ``denied`` and ``timeout``: the program's behavior under the policy (a memory cap, a forbidden syscall, its wall
  clock): every test fails, with the effect in the explanation;
- ``runner_failure``: the infrastructure failed, an ``InfraError`` (error kind infra: retried, never scored);
- no rung meets ``spec.sandbox.minIsolation``: ``SANDBOX_UNAVAILABLE`` as a ``BadInputError``, which stops the
  evaluation (the run fails closed, and nothing ran).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import EvalContext
from evalsi.sandbox.egress_attach import session_egress_log
from evalsi.sandbox.model import EgressEvent, ExecResult, IsolationReport, SandboxUnavailable

__all__ = ["TestResult", "TestRun", "extract_code", "isolation_dict", "run_tests"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_STDERR_CHARS = 500


@dataclass(frozen=True)
class TestResult:
    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class TestRun:
    """Per-test results, or ``failure`` (the effect of a denial or timeout that failed every test)."""

    tests: tuple[TestResult, ...]
    isolation: IsolationReport
    failure: str = ""
    # The egress proxy's log when spec.sandbox allows egress: evidence for safety evaluators.
    egress: tuple[EgressEvent, ...] = ()

    @property
    def pass_rate(self) -> float:
        return sum(t.passed for t in self.tests) / len(self.tests) if self.tests else 0.0

    @property
    def passed(self) -> bool:
        return not self.failure and bool(self.tests) and all(t.passed for t in self.tests)

    def explanation(self) -> str:
        if self.failure:
            return self.failure
        failed = [t for t in self.tests if not t.passed]
        if not failed:
            return f"{len(self.tests)} of {len(self.tests)} tests passed"
        first = failed[0]
        # A traceback's last line names the exception; the whole tail is in the score's metadata (tests).
        lines = first.detail.strip().splitlines()
        return (f"{len(self.tests) - len(failed)} of {len(self.tests)} tests passed; {first.name} failed: "
                f"{lines[-1] if lines else 'no detail'}")[:1000]

    def details(self) -> list[dict[str, Any]]:
        return [{"test": t.name, "passed": t.passed, "detail": t.detail} for t in self.tests]


def extract_code(text: str) -> str:
    """The first fenced code block of a model's answer (```python ... ```), else the whole text."""
    match = _FENCE.search(text)
    return match.group(2) if match else text


def isolation_dict(report: IsolationReport) -> dict[str, Any]:
    """The isolation report as score metadata (and the run manifest's entries): what the sandbox enforced."""
    return {
        "driver": report.driver,
        "level": report.level.label,
        "enforcement": report.enforcement,
        "requested": report.requested.label,
        "bounds": dict(report.bounds),
        "not_enforced": list(report.not_enforced),
    }


@cache
def _harness_source() -> bytes:
    return (Path(__file__).parent / "sandbox_main.py").read_bytes()


async def run_tests(ctx: EvalContext, candidate: str, *, tests: str = "", cases: list[dict[str, str]] | None = None,
                    timeout_s: float) -> TestRun:
    """The candidate against ``tests`` (unit mode) or ``cases`` (exec mode), in one sandbox session."""
    access = ctx.sandbox
    if access is None:
        raise InfraError("code evaluators need a sandbox, and none is configured where this evaluation runs "
                         "(use evalsi eval/run, or a server's sandbox worker pool)")
    nonce = secrets.token_hex(16)
    request = {"nonce": nonce, "mode": "unit" if cases is None else "exec", "timeout": timeout_s,
               "cases": cases or []}
    files = {"harness.py": _harness_source(), "candidate.py": candidate.encode()}
    if cases is None:
        files["tests.py"] = tests.encode()
    try:
        session = await access.open()
    except SandboxUnavailable as exc:
        raise BadInputError(str(exc)) from exc
    try:
        await session.write_files(files)
        result = await session.exec(["python3", "-I", "-S", "harness.py"],
                                    stdin=json.dumps(request).encode() + b"\n")
        egress = await session_egress_log(session)
    finally:
        await session.destroy()
    return replace(_interpret(result, nonce), egress=egress)


def _interpret(result: ExecResult, nonce: str) -> TestRun:
    outcome = result.outcome
    if outcome.kind == "runner_failure":
        raise InfraError(f"sandbox runner failure ({result.isolation.driver}): {outcome.signature}")
    if outcome.kind == "timeout":
        timeout = result.isolation.bounds.get("timeout", "its wall clock")
        return TestRun((), result.isolation, f"timeout: the program ran past {timeout} and was stopped")
    if outcome.kind == "denied":
        return TestRun((), result.isolation, f"denied: {outcome.effect or 'the sandbox stopped the program'}")
    tests: list[TestResult] = []
    done = False
    prefix = nonce + " "
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        if not line.startswith(prefix):
            continue
        entry = json.loads(line[len(prefix):])
        if entry.get("done"):
            done = True
            continue
        tests.append(TestResult(str(entry["test"]), bool(entry["passed"]), str(entry.get("detail", ""))))
    if not done:
        if result.stdout_truncated:
            return TestRun(tuple(tests), result.isolation, "denied: output cap (the program printed past it)")
        stderr = result.stderr.decode("utf-8", "replace").strip()[-_STDERR_CHARS:]
        raise InfraError(f"the code harness ended (exit {outcome.code}) without its results: {stderr}")
    return TestRun(tuple(tests), result.isolation)
