"""Baselines and the gate (docs/cases.md, "The gate").

A baseline is the accepted state of the corpus: per case, its outcome and (for a rubric'd case) the panel's
score. A gated run blocks only on a **regression**: a case that passed and now fails, one that passed and is
now skipped (the agent lost what the case needs), or a judge score that dropped by more than the tolerance.
Known failures do not block; a case with no baseline entry never blocks.

Three baselines are refused before anything runs, because gating on them would measure nothing: a missing
file, an all-red baseline (no case passed), and a baseline recorded with judge scores replayed with no judge
(a rubric'd case with no verdict would beat a measurement it never took).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.cases.result import CaseResult
from evalsi.cases.runner import Report
from evalsi.errors import BadInputError

BASELINE_KIND = "evalsi.cases.baseline/v1"
REPORT_KIND = "evalsi.cases.report/v1"
# What a baseline records: outcomes that are a measurement. Skipped cases are left out (a skip is not an
# accepted state), and so are broken and errored ones (nothing was measured).
RECORDED = ("pass", "fail", "judge_pending")


def case_key(case_id: str | None, tenant: str | None) -> str:
    return f"{case_id}@{tenant}" if tenant not in (None, "platform") else str(case_id)


def rubric_score(checks: list[dict[str, Any]]) -> float | None:
    for check in checks:
        if check.get("name") == "rubric" and isinstance(check.get("detail"), dict):
            score = check["detail"].get("score")
            return float(score) if isinstance(score, int | float) else None
    return None


def _result_score(result: CaseResult) -> float | None:
    return rubric_score([check.to_dict() for check in result.checks])


@dataclass(frozen=True)
class Baseline:
    path: str
    cases: dict[str, dict[str, Any]]  # key -> {"status", "score"}
    tolerance: float | None = None

    @property
    def judged(self) -> bool:
        return any(entry.get("score") is not None for entry in self.cases.values())


def baseline_document(report: Report, tolerance: float | None) -> dict[str, Any]:
    """What ``--update-baseline`` writes: every measured case of ``report``, skipped cases left out."""
    cases = {
        case_key(result.id, result.tenant): {"status": result.status, "score": _result_score(result)}
        for result in report.results if result.status in RECORDED and result.id is not None
    }
    return {"kind": BASELINE_KIND, "tolerance": tolerance, "cases": dict(sorted(cases.items()))}


def write_baseline(path: str | Path, report: Report, tolerance: float | None) -> dict[str, Any]:
    document = baseline_document(report, tolerance)
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return document


def load_baseline(path: str | Path) -> Baseline:
    """A baseline file, or a saved report (``--output``) used as one. Refuses a missing or all-red baseline."""
    file = Path(path)
    if not file.is_file():
        raise BadInputError(f"--baseline {path}: no baseline there; a gate without a recorded baseline refuses "
                            "(record one with --update-baseline)")
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInputError(f"--baseline {path}: not a readable JSON baseline: {exc}") from None
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind == BASELINE_KIND and isinstance(doc.get("cases"), dict):
        cases = {str(key): dict(entry) for key, entry in doc["cases"].items() if isinstance(entry, dict)}
        tolerance = doc.get("tolerance")
    elif kind == REPORT_KIND and isinstance(doc.get("cases"), list):
        cases = {
            case_key(c.get("id"), c.get("tenant")): {"status": c.get("status"), "score": rubric_score(c["checks"])}
            for c in doc["cases"]
            if isinstance(c, dict) and c.get("status") in RECORDED and c.get("id") and isinstance(c.get("checks"), list)
        }
        tolerance = None
    else:
        raise BadInputError(f"--baseline {path}: expected a baseline ({BASELINE_KIND}) or a saved report "
                            f"({REPORT_KIND})")
    if not any(entry.get("status") == "pass" for entry in cases.values()):
        raise BadInputError(f"--baseline {path}: an all-red baseline (no case passed in it) refuses to gate: "
                            "every candidate would beat it")
    if tolerance is not None and not (isinstance(tolerance, int | float) and 0 <= tolerance <= 1):
        raise BadInputError(f"--baseline {path}: tolerance {tolerance!r}; expected a number from 0 to 1")
    return Baseline(str(path), cases, float(tolerance) if tolerance is not None else None)


def refuse_unjudged(baseline: Baseline, judged: bool) -> None:
    if baseline.judged and not judged:
        raise BadInputError(f"--baseline {baseline.path}: it was recorded with judge scores and no judge is "
                            "configured; a rubric'd case with no verdict cannot be compared (configure a judge: "
                            "--judge-model, --judges FILE or evals.yaml)")


def compare(baseline: Baseline, report: Report, tolerance: float) -> dict[str, Any]:
    """The regressions of ``report`` against ``baseline``, the cases new to it and those it lost."""
    regressions: list[dict[str, Any]] = []
    new: list[str] = []
    seen: set[str] = set()
    for result in report.results:
        if result.id is None:
            continue
        key = case_key(result.id, result.tenant)
        seen.add(key)
        entry = baseline.cases.get(key)
        if entry is None:
            new.append(key)
            continue
        was, now = entry.get("status"), result.status
        if was == "pass" and now in ("fail", "skipped"):
            regressions.append({"case": key, "kind": f"pass -> {now}", "reason": result.reason})
            continue
        before, after = entry.get("score"), _result_score(result)
        if isinstance(before, int | float) and after is not None and before - after > tolerance + 1e-9:
            regressions.append({"case": key, "kind": "score drop", "before": before, "after": after,
                                "reason": f"rubric score {before:.2f} -> {after:.2f}, past tolerance {tolerance}"})
    missing = sorted(set(baseline.cases) - seen)
    return {"baseline": baseline.path, "tolerance": tolerance, "regressions": regressions, "new_cases": new,
            "not_run": missing}


def render_gate(gate: dict[str, Any]) -> str:
    lines = [f"gate: baseline {gate['baseline']}, tolerance {gate['tolerance']}: "
             f"{len(gate['regressions'])} regression(s)"]
    lines += [f"  REGRESSION {r['case']}: {r['kind']} ({r['reason']})" for r in gate["regressions"]]
    if gate["new_cases"]:
        lines.append(f"  new (never block): {', '.join(gate['new_cases'])}")
    if gate["not_run"]:
        lines.append(f"  in the baseline, not in this run: {', '.join(gate['not_run'])}")
    return "\n".join(lines)
