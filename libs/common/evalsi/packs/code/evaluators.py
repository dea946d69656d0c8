"""The code pack's evaluators: syntax (no execution), unit tests and input/output cases (in a sandbox).

The candidate program is the record's output (its first fenced code block when it has one). Executing evaluators
are on the ``sandbox`` pool: embedded they use the in-process ladder, on a server evalsi-sandboxd. Their ``passed``
output is boolean, so trials give pass@k and pass^k; ``isolation_full`` says whether the sandbox enforced its whole
profile for the record (a gate can require ``metric('unit-tests.isolation_full').mean == 1``), and the passed
score's metadata carries the isolation report and the per-test results.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import EvalContext, Output, evaluator
from evalsi.packs.code.execution import TestRun, extract_code, isolation_dict, run_tests
from evalsi.records import content_text, content_value, from_value, to_value
from evalsi.sandbox.egress_attach import event_dict
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

__all__ = ["EVALUATORS", "code_exec_tests", "python_syntax", "unit_tests"]

MAX_CASES = 1000
MAX_TIMEOUT_S = 600.0

_RESULTS = [
    Output("passed", "boolean", description="Every test passed."),
    Output("pass_rate", "number", min=0.0, max=1.0, description="The share of tests that passed."),
    Output("isolation_full", "boolean", description="The sandbox enforced its whole profile (enforcement full)."),
]


def _check_timeout(timeout_s: float = 5.0, **_: Any) -> None:
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise BadInputError(f"param 'timeout_s': {timeout_s:g} is out of range; accepted: more than 0 and at most "
                            f"{MAX_TIMEOUT_S:g} seconds")


@evaluator(
    "builtin/python-syntax",
    version="1.0.0",
    pack="code",
    requires=["output"],
    outputs=[Output("passed", "boolean", description="The program parses as Python.")],
    params={"extract": "Take the first fenced code block of the output when it has one."},
)
def python_syntax(record: Record, *, extract: bool = True) -> Score:
    """Whether the output parses as Python (nothing is executed); a failure names the line and column."""
    text = content_text(record.output)
    source = extract_code(text) if extract else text
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return Score(passed=False, explanation=f"SyntaxError at line {exc.lineno}, column {exc.offset}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, nesting too deep for the parser
        return Score(passed=False, explanation=f"{type(exc).__name__}: {exc}"[:500])
    return Score(passed=True)


def _scores(run: TestRun) -> dict[str, Score | float | bool]:
    passed = Score(passed=run.passed, explanation=run.explanation())
    passed.metadata["isolation"].CopyFrom(to_value(isolation_dict(run.isolation)))
    passed.metadata["tests"].CopyFrom(to_value(run.details()))
    if run.egress:
        passed.metadata["egress"].CopyFrom(to_value([event_dict(event) for event in run.egress]))
    return {"passed": passed, "pass_rate": run.pass_rate, "isolation_full": run.isolation.enforcement == "full"}


def _field(record: Record, key: str, what: str) -> Any:
    if key not in record.metadata:
        raise SkipRecord(f"no {what}: metadata {key!r} is missing")
    return from_value(record.metadata[key])


@evaluator(
    "builtin/unit-tests",
    version="1.0.0",
    pack="code",
    pool="sandbox",
    requires=["output"],
    outputs=_RESULTS,
    params={
        "tests_field": "Metadata key holding the tests; empty: the record's reference.",
        "timeout_s": "Seconds each test may run.",
        "extract": "Take the first fenced code block of the output when it has one.",
    },
    check=_check_timeout,
)
async def unit_tests(record: Record, ctx: EvalContext, *, tests_field: str = "", timeout_s: float = 5.0,
                     extract: bool = True) -> dict[str, Score | float | bool]:
    """The candidate program against unit tests in a sandbox: test functions, test methods of classes
    (``unittest.TestCase`` or plain) or, with none, the tests file's top-level asserts as one test."""
    tests = _field(record, tests_field, "tests") if tests_field else content_text(record.reference)
    if not isinstance(tests, str) or not tests.strip():
        raise SkipRecord("no tests: the reference (or tests_field) holds no test code")
    text = content_text(record.output)
    run = await run_tests(ctx, extract_code(text) if extract else text, tests=tests, timeout_s=timeout_s)
    return _scores(run)


def _cases(value: Any, where: str) -> list[dict[str, str]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SkipRecord(f"{where}: not JSON ({exc.msg} at line {exc.lineno}); expected "
                             '[{"input": "...", "output": "..."}]') from None
    if isinstance(value, dict) and "cases" in value:
        value = value["cases"]
    if not isinstance(value, list) or not value:
        raise SkipRecord(f'{where}: expected a non-empty list of cases [{{"input": "...", "output": "..."}}]')
    if len(value) > MAX_CASES:
        raise SkipRecord(f"{where}: {len(value)} cases exceed the limit of {MAX_CASES}")
    cases = []
    for index, case in enumerate(value):
        if not isinstance(case, dict) or not isinstance(case.get("output"), str) or not isinstance(
                case.get("input", ""), str):
            raise SkipRecord(f'{where}[{index}]: expected {{"input": "...", "output": "..."}} (strings)')
        cases.append({"input": case.get("input", ""), "output": case["output"], "name": str(case.get("name", ""))})
    return cases


@evaluator(
    "builtin/code-exec-tests",
    version="1.0.0",
    pack="code",
    pool="sandbox",
    requires=["output"],
    outputs=_RESULTS,
    params={
        "cases_field": "Metadata key holding the cases; empty: the record's reference.",
        "timeout_s": "Seconds each case may run.",
        "extract": "Take the first fenced code block of the output when it has one.",
    },
    check=_check_timeout,
)
async def code_exec_tests(record: Record, ctx: EvalContext, *, cases_field: str = "", timeout_s: float = 5.0,
                          extract: bool = True) -> dict[str, Score | float | bool]:
    """The candidate program run on each case's input (stdin) in a sandbox, its stdout compared with the case's
    expected output (trailing whitespace ignored); the verdicts come from a harness process the program cannot
    reach, on lines tagged with a nonce it cannot know."""
    if cases_field:
        where, raw = f"metadata {cases_field!r}", _field(record, cases_field, "cases")
    else:
        where, raw = "reference", content_value(record.reference) if record.HasField("reference") else None
    if raw is None:
        raise SkipRecord('no cases: give a reference [{"input": "...", "output": "..."}] or cases_field')
    cases = _cases(raw, where)
    text = content_text(record.output)
    run = await run_tests(ctx, extract_code(text) if extract else text, cases=cases, timeout_s=timeout_s)
    return _scores(run)


EVALUATORS = (python_syntax, unit_tests, code_exec_tests)
