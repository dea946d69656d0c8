"""A record scored by code evaluators in a sandbox carries the rung in its own provenance.isolation (the weakest of
every sandboxed execution behind it), embedded for real on bubblewrap; the served path is checked in
test_code_pack_served.py. The choice of the weakest report is pure and checked here without a sandbox."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import yaml
from google.protobuf import json_format
from sandboxd_process import require_bwrap

from evalsi.runs.embedded import RunOutcome, execute_run
from evalsi.runs.record_isolation import EVALUATED_LABEL, SandboxFold, fold_each, stamp, weakest
from evalsi.runs.spec import load_eval_run
from evalsi.v1alpha1.record_pb2 import (
    ISOLATION_LEVEL_CONFINED,
    ISOLATION_LEVEL_KERNEL,
    ISOLATION_LEVEL_NAMESPACED,
    IsolationLevel,
    IsolationReport,
    Record,
)
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import EvaluationResult, Score

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "code" / "run.yaml"


def _report(level: IsolationLevel, enforcement: str = "full", *, driver: str = "bwrap",
            not_enforced: tuple[str, ...] = ()) -> IsolationReport:
    return IsolationReport(achieved=level, driver=driver, enforcement=enforcement, not_enforced=list(not_enforced))


def test_the_weakest_report_is_the_lowest_level_then_partial_then_the_most_left_unenforced() -> None:
    kernel, namespaced = _report(ISOLATION_LEVEL_KERNEL, driver="gvisor"), _report(ISOLATION_LEVEL_NAMESPACED)
    partial = _report(ISOLATION_LEVEL_NAMESPACED, "partial", not_enforced=("memory",))
    more = _report(ISOLATION_LEVEL_NAMESPACED, "partial", not_enforced=("memory", "pids"))
    assert weakest([kernel, namespaced]) == namespaced
    assert weakest([namespaced, partial, kernel]) == partial
    assert weakest([partial, more]) == more
    assert weakest([]) is None


def test_a_record_keeps_the_weakest_of_its_generation_and_its_scoring_and_the_given_one_is_untouched() -> None:
    generated = Record(id="a")
    generated.provenance.isolation.CopyFrom(_report(ISOLATION_LEVEL_CONFINED, "partial", driver="landlock"))
    scored, unscored = Record(id="b"), Record(id="c")
    found = {("a", 0): (_report(ISOLATION_LEVEL_NAMESPACED), ["unit-tests"]),
             ("b", 0): (_report(ISOLATION_LEVEL_NAMESPACED), ["unit-tests", "code-exec-tests"])}
    a, b, c = stamp([generated, scored, unscored], found)
    assert (a.provenance.isolation.driver, a.provenance.isolation.achieved) == ("landlock", ISOLATION_LEVEL_CONFINED)
    assert a.provenance.isolation.detail == "the weakest of 2 sandboxed execution report(s): generation, unit-tests"
    assert b.provenance.isolation.detail.endswith("code-exec-tests, unit-tests")
    assert not scored.provenance.HasField("isolation")  # copies: the caller's records are not changed
    assert c is unscored and not c.provenance.HasField("isolation")


async def test_records_scored_in_a_sandbox_carry_the_rung_in_their_provenance_embedded(tmp_path: Path) -> None:
    require_bwrap()
    rows = [json.loads(line) for line in (SPEC.parent / "add.jsonl").read_text().splitlines()]
    (tmp_path / "two.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows
                                                if row["id"] in ("correct", "wrong")))
    document = yaml.safe_load(SPEC.read_text())
    document["spec"]["dataset"]["path"] = "two.jsonl"
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(document))
    outcome = await _run(tmp_path / "run.yaml")
    assert outcome.results.run.state == RUN_STATE_SUCCEEDED, outcome.results.run.message
    assert EVALUATED_LABEL not in outcome.results.run.labels  # this process's store key, not part of the run
    assert [r.id for r in outcome.records] == ["correct", "wrong"]
    for record in outcome.records:
        isolation = record.provenance.isolation
        assert (isolation.driver, isolation.achieved, isolation.enforcement) == ("bwrap", ISOLATION_LEVEL_NAMESPACED,
                                                                                 "full")
        assert any(line.startswith("syscalls: seccomp") for line in isolation.enforced), isolation.enforced
        assert isolation.detail == ("the weakest of 2 sandboxed execution report(s): code-exec-tests, unit-tests")
    # A run whose evaluators ran nothing in a sandbox leaves its records' provenance as given.
    document["spec"]["evaluators"] = [{"ref": "builtin/python-syntax"}]
    document["spec"]["gates"] = []
    (tmp_path / "syntax.yaml").write_text(yaml.safe_dump(document))
    plain = await _run(tmp_path / "syntax.yaml")
    assert [r.provenance.HasField("isolation") for r in plain.records] == [False, False]


async def _run(path: Path) -> RunOutcome:
    return await execute_run(load_eval_run(path), base_dir=path.parent)


def test_one_read_of_the_results_gives_the_run_its_rungs_and_each_record_its_weakest() -> None:
    """The driver's end of a run reads the stored results once for the summaries, the manifest's rungs and each
    record's weakest rung (runs.record_isolation.fold_each), never once per fold."""
    def scored(record_id: str, evaluator: str, level: str) -> EvaluationResult:
        score = Score(name="passed", passed=True)
        score.metadata["isolation"].CopyFrom(json_format.ParseDict(
            {"driver": "bwrap", "level": level, "enforcement": "full", "requested": "namespaced"},
            score.metadata["isolation"]))
        return EvaluationResult(record_id=record_id, evaluator=evaluator, scores=[score])

    reads: list[int] = []

    async def batches() -> AsyncIterator[list[EvaluationResult]]:
        reads.append(1)
        yield [scored("a", "unit-tests", "namespaced"), scored("a", "code-exec-tests", "confined")]
        yield [scored("b", "unit-tests", "kernel"),
               EvaluationResult(record_id="c", reason="SANDBOX_UNAVAILABLE: no rung meets min_isolation vm")]

    seen: list[str] = []
    fold = SandboxFold()
    asyncio.run(fold_each(batches(), [lambda batch: seen.extend(r.record_id for r in batch), fold.add]))
    use = fold.use.result()
    assert reads == [1] and seen == ["a", "a", "b", "c"]
    assert (use.refused, [r.achieved for r in use.reports]) == (
        1, [ISOLATION_LEVEL_NAMESPACED, ISOLATION_LEVEL_CONFINED, ISOLATION_LEVEL_KERNEL])
    assert {key: (report.achieved, names) for key, (report, names) in fold.found.items()} == {
        ("a", 0): (ISOLATION_LEVEL_CONFINED, ["unit-tests", "code-exec-tests"]),  # confined is the weaker
        ("b", 0): (ISOLATION_LEVEL_KERNEL, ["unit-tests"])}
    asyncio.run(fold_each(batches(), []))
    assert reads == [1]  # no fold: the results are not read at all


async def test_a_spec_giving_the_evaluated_records_label_runs_as_without_it() -> None:
    """The label is the driver's alone: one a spec sets (embedded; the api refuses evals.si/* labels) names nothing
    stored, so the driver drops it rather than the run's end reading a key that does not exist."""
    path = ROOT / "examples" / "runs" / "qa-outputs.yaml"
    document = load_eval_run(path)
    document.metadata.labels[EVALUATED_LABEL] = "not-a-stored-key"
    outcome = await execute_run(document, base_dir=path.parent)
    assert outcome.results.run.state == RUN_STATE_SUCCEEDED, outcome.results.run.message
    assert EVALUATED_LABEL not in outcome.results.run.labels
    dataset = (path.parent / "../quickstart/qa.jsonl").read_text().splitlines()
    assert len(outcome.records) == len(dataset)  # the records as evaluated: the dataset's, none lost
