"""The checker's verdict, from how its command ended: pure functions of its outcome, output and report.

A checker that ran and said "no" is the agent's failure (``passed`` False). A checker that could not run (a
runner failure of the sandbox, a report that is not JUnit) is the environment's, an infrastructure error
(``CheckerError``), never a score. A checker that was denied or timed out ran against the state the agent left,
so it fails the task with the effect as its reason.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from typing import Any

from evalsi.errors import InfraError
from evalsi.sandbox.model import ExecResult

from .environment import Checker

MAX_REPORT_BYTES = 4 * 1024 * 1024
_REASON_CHARS = 2000


class CheckerError(InfraError):
    """The checker could not give a verdict: the environment's failure, reported and never scored."""


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    format: str
    score: float | None = None
    tests: int | None = None
    failures: int | None = None

    def to_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"passed": self.passed, "reason": self.reason, "format": self.format}
        for key in ("score", "tests", "failures"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def output_tail(data: bytes, limit: int = _REASON_CHARS) -> str:
    """The last ``limit`` characters of a process's output, decoded (bad bytes replaced) and stripped."""
    return data.decode("utf-8", "replace").strip()[-limit:]


def verdict_of(checker: Checker, result: ExecResult, report: bytes | None = None) -> Verdict:
    """The verdict of one checker execution (``report``: the JUnit file's bytes, for format junit)."""
    outcome = result.outcome
    if outcome.kind == "runner_failure":
        raise CheckerError(f"the checker could not run: {outcome.signature}")
    if outcome.kind == "timeout":
        return Verdict(False, f"the checker timed out after {checker.timeout_s:g}s", checker.format)
    if outcome.kind == "denied":
        return Verdict(False, f"the checker was denied by the sandbox: {outcome.effect}", checker.format)
    code = outcome.code if outcome.code is not None else -1
    if checker.format == "json":
        return _json_verdict(result.stdout, code)
    if checker.format == "junit":
        if report is None:
            return Verdict(False, f"no JUnit report at {checker.junit} (the checker exited {code})", "junit")
        return junit_verdict(report)
    output = output_tail(result.stdout + b"\n" + result.stderr)
    if code == 0:
        return Verdict(True, output or "the checker exited 0", "exit")
    return Verdict(False, f"the checker exited {code}" + (f": {output}" if output else ""), "exit")


def _json_verdict(stdout: bytes, code: int) -> Verdict:
    """The last stdout line that is a JSON object with a boolean ``success`` (or ``passed``)."""
    for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(doc, dict):
            continue
        key = "success" if "success" in doc else "passed" if "passed" in doc else None
        if key is None or not isinstance(doc[key], bool):
            continue
        reason = doc.get("reason")
        score = doc.get("score")
        score_value = float(score) if isinstance(score, int | float) and not isinstance(score, bool) \
            and math.isfinite(score) else None
        return Verdict(doc[key], str(reason)[:_REASON_CHARS] if reason is not None else f"{key}: {doc[key]}",
                       "json", score=score_value)
    return Verdict(False, f"the checker printed no JSON verdict line ({{\"success\": true|false}}); it exited {code}",
                   "json")


def junit_verdict(report: bytes) -> Verdict:
    """Passes when the report has tests and none failed or errored; the first failures' names are the reason."""
    if len(report) > MAX_REPORT_BYTES:
        raise CheckerError(f"the JUnit report is over {MAX_REPORT_BYTES} bytes")
    if b"<!DOCTYPE" in report or b"<!ENTITY" in report:
        raise CheckerError("the JUnit report declares a DOCTYPE or entities, which are refused")
    try:
        root = ElementTree.fromstring(report)
    except ElementTree.ParseError as exc:
        raise CheckerError(f"the JUnit report is not XML: {exc}") from None
    cases = list(root.iter("testcase"))
    failed = [case for case in cases if case.find("failure") is not None or case.find("error") is not None]
    if not cases:
        return Verdict(False, "the JUnit report has no test cases", "junit", tests=0, failures=0)
    names = ", ".join(f"{case.get('classname', '')}.{case.get('name', '')}".strip(".") for case in failed[:5])
    score = (len(cases) - len(failed)) / len(cases)
    reason = f"{len(cases) - len(failed)}/{len(cases)} tests passed" + (f"; failed: {names}" if failed else "")
    return Verdict(not failed, reason, "junit", score=score, tests=len(cases), failures=len(failed))
