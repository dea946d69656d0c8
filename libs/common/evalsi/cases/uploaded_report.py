"""A case report sent to the server (``evalsi cases run --server``, CaseService.UploadCaseReport): checked, and
indexed for lists (tenant, agents, outcome counts, pass rate, regressions), before anything is stored.

The document is the one ``evalsi cases run --output`` writes (``Report.to_dict``). What a list shows is read from
its cases, never taken from what the document claims about itself; the document is stored as sent (canonical
JSON), so the server shows exactly the report the run produced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from evalsi.cases.gate import REPORT_KIND
from evalsi.cases.graders import CheckStatus
from evalsi.cases.model import DEFAULT_TENANT
from evalsi.cases.runner import CASE_STATUSES
from evalsi.edge_checks import text_problem
from evalsi.errors import BadInputError
from evalsi.stats import wilson

# A report is a few KiB a case (each transcript with its tool calls): 8 MiB holds thousands of cases, and one
# request stays well under the api's 16 MiB request limit.
MAX_REPORT_BYTES = 8 * 1024 * 1024
MAX_REPORT_CASES = 10_000
MAX_NAME_CHARS = 200
CHECK_STATUSES: tuple[str, ...] = get_args(CheckStatus)


@dataclass(frozen=True)
class ReportIndex:
    """What lists show of a report, read from its cases."""

    report_id: str
    tenant: str
    agents: tuple[str, ...]
    counts: dict[str, int]
    pass_rate: float | None
    ci_low: float | None
    ci_high: float | None
    regressions: int | None  # None: the run had no baseline
    simulated: bool
    canonical: str  # the document as stored: sorted keys, no spaces
    size_bytes: int


def whole_numbers(value: Any) -> Any:
    """``value`` with every integral float as an int: a report crosses the API as a protobuf Struct, whose numbers
    are all doubles, and a count of 3 should read back as 3, not 3.0 (nor hash differently)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def canonical_json(document: Mapping[str, Any]) -> str:
    """One text per document whatever its key order, spacing or number types (3 or 3.0), so a report uploaded
    twice has one id."""
    return json.dumps(whole_numbers(document), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def index_report(document: Mapping[str, Any], *, where: str = "report") -> ReportIndex:
    """Check ``document`` is a case report within the limits and index it; BadInputError naming the field."""
    if document.get("kind") != REPORT_KIND:
        raise BadInputError(f"{where}.kind: expected {REPORT_KIND!r} (the JSON `evalsi cases run --output` writes), "
                            f"got {document.get('kind')!r}")
    try:
        canonical = canonical_json(document)
    except ValueError as exc:  # NaN or infinity: not JSON
        raise BadInputError(f"{where}: {exc}") from None
    size = len(canonical.encode("utf-8"))
    if size > MAX_REPORT_BYTES:
        raise BadInputError(f"{where}: {size} bytes of JSON exceeds the limit of {MAX_REPORT_BYTES} bytes "
                            f"({MAX_REPORT_BYTES // (1024 * 1024)} MiB); split the suite into smaller runs")
    cases = document.get("cases")
    if not isinstance(cases, list):
        raise BadInputError(f"{where}.cases: expected a list of case results")
    if len(cases) > MAX_REPORT_CASES:
        raise BadInputError(f"{where}.cases: {len(cases)} case results exceed the limit of {MAX_REPORT_CASES}")
    counts = {status: 0 for status in CASE_STATUSES}
    tenants: dict[str, int] = {}
    agents: set[str] = set()
    for i, case in enumerate(cases):
        here = f"{where}.cases[{i}]"
        _check_case(case, here)
        counts[case["status"]] += 1
        if isinstance(case.get("tenant"), str):
            tenants.setdefault(case["tenant"], i)
        if isinstance(case.get("agent"), str) and case["agent"]:
            agents.add(case["agent"])
    if len(tenants) > 1:
        (first, _), (second, index) = sorted(tenants.items(), key=lambda item: item[1])[:2]
        raise BadInputError(f"{where}.cases[{index}].tenant: {second!r} differs from {first!r}; a report holds one "
                            "tenant's cases (run with --tenant)")
    n = counts["pass"] + counts["fail"]
    interval = wilson(counts["pass"], n)
    return ReportIndex(
        report_id=hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32],
        tenant=next(iter(tenants), DEFAULT_TENANT),
        agents=tuple(sorted(agents)),
        counts=counts,
        pass_rate=counts["pass"] / n if n else None,
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        regressions=_regressions(document.get("gate"), where),
        simulated=document.get("simulated") is True,
        canonical=canonical,
        size_bytes=size,
    )


def _check_case(case: Any, here: str) -> None:
    if not isinstance(case, dict):
        raise BadInputError(f"{here}: expected an object (a case result)")
    if case.get("status") not in CASE_STATUSES:
        raise BadInputError(f"{here}.status: {case.get('status')!r}; accepted: {', '.join(CASE_STATUSES)}")
    for key in ("id", "agent", "tenant"):
        if case.get(key) is not None and not isinstance(case[key], str):
            raise BadInputError(f"{here}.{key}: expected a string or null")
        problem = text_problem(case[key]) if isinstance(case.get(key), str) else None
        if problem:  # the agent and tenant are stored in columns of their own
            raise BadInputError(f"{here}.{key}: {problem}")
    checks = case.get("checks", [])
    if not isinstance(checks, list):
        raise BadInputError(f"{here}.checks: expected a list")
    for j, check in enumerate(checks):
        if not isinstance(check, dict) or not isinstance(check.get("name"), str):
            raise BadInputError(f"{here}.checks[{j}]: expected an object with a string name")
        if check.get("status") not in CHECK_STATUSES:
            raise BadInputError(f"{here}.checks[{j}].status: {check.get('status')!r}; accepted: "
                                f"{', '.join(CHECK_STATUSES)}")


def _regressions(gate: Any, where: str) -> int | None:
    if gate is None:
        return None
    if not isinstance(gate, dict) or not isinstance(gate.get("regressions"), list):
        raise BadInputError(f"{where}.gate.regressions: expected a list (the gate against --baseline)")
    return len(gate["regressions"])


def check_name(name: str) -> str:
    if len(name) > MAX_NAME_CHARS:
        raise BadInputError(f"name: {len(name)} characters exceed the limit of {MAX_NAME_CHARS}")
    return name
