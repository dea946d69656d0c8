"""The code pack embedded, for real (bubblewrap): `evalsi eval` and `evalsi run` over examples/code/add.jsonl (one
correct program, one wrong, an infinite loop, one reading /etc/shadow and opening a socket, one printing forged pass
lines, one that does not parse) give the right per-record outcomes, the metrics table, the isolation report in each
result and the run's manifest, and fail closed with SANDBOX_UNAVAILABLE when no rung meets the minimum."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from google.protobuf import json_format
from sandboxd_process import require_bwrap

from evalsi.cli.main import cli
from evalsi.sdk import evaluate
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "code" / "add.jsonl"
SPEC = ROOT / "examples" / "code" / "run.yaml"
PARAMS = ["--param", "unit-tests.timeout_s=2", "--param", "code-exec-tests.timeout_s=2",
          "--param", "code-exec-tests.cases_field=cases"]

# record -> (python-syntax, unit-tests, code-exec-tests) verdicts and what each failure's explanation says
EXPECTED: dict[str, tuple[bool, bool, bool]] = {
    "correct": (True, True, True),
    "wrong": (True, False, False),
    "infinite-loop": (True, False, False),
    "escape": (True, False, False),
    "forged-pass": (True, False, False),
    "syntax-error": (False, False, False),
}
EXPLAINED = {
    ("wrong", "unit-tests"): "AssertionError",
    ("wrong", "code-exec-tests"): "expected '5', got '-1'",
    ("infinite-loop", "unit-tests"): "timeout after 2s",
    ("infinite-loop", "code-exec-tests"): "timeout after 2s",
    ("escape", "unit-tests"): "/etc/shadow",
    ("escape", "code-exec-tests"): "/etc/shadow",
    ("forged-pass", "unit-tests"): "exited before the test finished",
    ("forged-pass", "code-exec-tests"): "got 'all passed",
    ("syntax-error", "python-syntax"): "SyntaxError at line 1, column 14",
    ("syntax-error", "unit-tests"): "SyntaxError",
}


def _passed(result: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in result["scores"] if s.get("name", "passed") == "passed")


def _check_outcomes(results: list[dict[str, Any]]) -> None:
    seen = set()
    for result in results:
        record, evaluator = result["recordId"], result["evaluator"]
        assert result["outcome"] == "OUTCOME_SCORED", result
        score = _passed(result)
        column = ("python-syntax", "unit-tests", "code-exec-tests").index(evaluator)
        assert score["passed"] is EXPECTED[record][column], (record, evaluator, score)
        if (record, evaluator) in EXPLAINED:
            assert EXPLAINED[record, evaluator] in score["explanation"], (record, evaluator, score["explanation"])
        if evaluator != "python-syntax":
            isolation = score["metadata"]["isolation"]
            assert (isolation["driver"], isolation["level"], isolation["enforcement"]) == ("bwrap", "namespaced",
                                                                                       "full")
            assert "seccomp" in isolation["bounds"]["syscalls"]
            tests = score["metadata"]["tests"]
            assert [t["passed"] for t in tests] == [EXPECTED[record][column]] * 2, tests
        seen.add((record, evaluator))
    assert len(seen) == 18


def test_evalsi_eval_scores_each_program_for_what_it_did(tmp_path: Path) -> None:
    require_bwrap()
    out = tmp_path / "results.json"
    done = CliRunner().invoke(cli, ["eval", "--data", str(DATA), "-e", "python-syntax,unit-tests,code-exec-tests",
                                    *PARAMS, "--output", str(out)])
    assert done.exit_code == 0, done.output
    for metric in ("python-syntax", "unit-tests.passed", "unit-tests.pass_rate", "unit-tests.isolation_full",
                   "code-exec-tests.passed"):
        assert metric in done.stdout
    _check_outcomes(json.loads(out.read_text())["results"])


def test_evalsi_run_with_spec_sandbox_gates_on_full_enforcement_and_records_it_in_the_manifest(
        tmp_path: Path) -> None:
    require_bwrap()
    out = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "-f", str(SPEC), "--output", str(out)])
    assert done.exit_code == 0, done.output
    run = json.loads(out.read_text())
    assert run["state"] == "RUN_STATE_SUCCEEDED"
    assert [gate.get("passed", False) for gate in run["gates"]] == [True, True]
    isolation = run["manifest"]["isolation"]
    assert [(i["driver"], i["achieved"], i["enforcement"]) for i in isolation] == [
        ("bwrap", "ISOLATION_LEVEL_NAMESPACED", "full")]
    # spec.sandbox.resources reached the sandbox: its memory and pids bounds are the spec's.
    assert any("memory.limit_in_bytes=268435456" in line for line in isolation[0]["enforced"])
    assert any("pids.max=64" in line for line in isolation[0]["enforced"])
    _check_outcomes(run["results"])


def test_no_rung_meeting_the_minimum_fails_closed_and_nothing_runs(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A ladder of bwrap and landlock (./evalsi.yaml) has no vm rung (the default one would reach QEMU on demand).
    (tmp_path / "evalsi.yaml").write_text("sandbox: {ladder: [bwrap, landlock]}\n")
    monkeypatch.chdir(tmp_path)
    document = yaml.safe_load(SPEC.read_text())
    document["spec"]["dataset"]["path"] = str(DATA)
    document["spec"]["sandbox"]["minIsolation"] = "vm"
    spec = tmp_path / "vm.yaml"
    spec.write_text(yaml.safe_dump(document))
    out = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "-f", str(spec), "--output", str(out)])
    assert done.exit_code == 1, done.output  # nothing was measured
    assert "SANDBOX_UNAVAILABLE: no sandbox rung meets min_isolation vm" in done.output
    run = json.loads(out.read_text())
    executing = [r for r in run["results"] if r["evaluator"] != "python-syntax"]
    assert len(executing) == 12
    for result in executing:  # each an infrastructure error saying why, none scored: nothing ran
        assert (result["outcome"], result["errorKind"]) == ("OUTCOME_ERROR", "ERROR_KIND_INFRA")
        assert "bwrap (namespaced): available, below vm" in result["reason"]
    assert not run["manifest"].get("isolation")
    assert run["state"] == "RUN_STATE_FAILED"  # fail closed: the code it was to grade never ran
    assert run["message"].startswith("12 code evaluation(s) did not run: task failed: SANDBOX_UNAVAILABLE: no sandbox "
                                     "rung meets min_isolation vm")
    assert [gate.get("passed", False) for gate in run["gates"]] == [False, False]


@pytest.mark.parametrize(("sandbox", "message"), [
    ({"minIsolation": "chroot"}, "spec.sandbox.minIsolation: 'chroot' is not an isolation level; accepted: vm, "
                                 "kernel, namespaced, confined, none"),
    ({"network": "open"}, "spec.sandbox.network: 'open'; accepted: deny, allow"),
    ({"network": "allow"}, "spec.sandbox.allow: network allow needs at least one HOST:PORT endpoint"),
    ({"network": "allow", "allow": ["example.com"]}, "spec.sandbox.allow[0]: 'example.com' is not an endpoint"),
    ({"network": "allow", "allow": ["example.com:\u00b2"]}, "spec.sandbox.allow[0]: 'example.com:\u00b2' is not an"),
    ({"network": "allow", "allow": ["example.com:" + "1" * 5000]}, "spec.sandbox.allow[0]: 'example.com:111"),
    ({"network": "allow", "allow": ["exa mple/../x:80"]}, "spec.sandbox.allow[0]: 'exa mple/../x:80' is not an"),
    ({"allow": ["example.com:443"]}, "spec.sandbox.allow: endpoints are only used with network: allow"),
    ({"class": "gpu"}, "spec.sandbox.class: 'gpu' is not a sandbox class here; accepted: default"),
    ({"resources": {"pids": 100000}}, "spec.sandbox.resources.pids: 100000 is out of range; accepted: 1 to 65536"),
    ({"resources": {"timeout": "100000s"}}, "spec.sandbox.resources.timeout: 100000s is out of range"),
])
def test_a_bad_spec_sandbox_is_refused_naming_the_field(tmp_path: Path, sandbox: dict[str, Any],
                                                        message: str) -> None:
    document = yaml.safe_load(SPEC.read_text())
    document["spec"]["dataset"]["path"] = str(DATA)
    document["spec"]["sandbox"] = sandbox
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(document))
    done = CliRunner().invoke(cli, ["run", "-f", str(spec), "--dry-run"])
    assert done.exit_code == 2
    assert message in done.output


def test_pass_at_k_over_trials_of_one_task(tmp_path: Path) -> None:
    require_bwrap()
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    by_id = {row["id"]: row for row in rows}
    # Three samples of one task (rows sharing an id are its trials): one correct of three.
    trials = [{**by_id[name], "id": "add"} for name in ("wrong", "correct", "infinite-loop")]
    results = evaluate(trials, ["unit-tests"], params={"unit-tests": {"timeout_s": 1.0}})
    summaries = results.summaries
    assert summaries["unit-tests.passed"].mean == pytest.approx(1 / 3)
    assert summaries["unit-tests.passed.pass@3"].mean == pytest.approx(1.0)
    assert summaries["unit-tests.passed.pass^3"].mean == pytest.approx(0.0)


def test_a_program_past_the_memory_cap_fails_with_the_effect(tmp_path: Path) -> None:
    require_bwrap()
    hog = {"id": "hog", "output": "def add(a, b):\n    block = bytearray(1 << 30)\n    return a + b\n",
           "reference": "def test_add():\n    assert add(1, 2) == 3\n"}
    results = evaluate([hog], ["unit-tests"])
    [result] = [r for r in results.results if r.evaluator == "unit-tests"]
    [passed] = [s for s in result.scores if s.name == "passed"]
    assert not passed.passed
    assert any(word in passed.explanation for word in ("MemoryError", "oom-kill", "signal 9")), passed.explanation


def test_embedded_evaluation_follows_the_sandbox_section_of_evalsi_yaml(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # As `evalsi sandbox run` reads it: ./evalsi.yaml's ladder, minimum and bounds apply to the code pack too.
    # Landlock cannot change the root, so a ladder of it alone needs the operator's `root: host` (trusted code).
    (tmp_path / "evalsi.yaml").write_text(yaml.safe_dump(
        {"sandbox": {"ladder": ["landlock"], "min_isolation": "confined", "root": "host", "resources": {"pids": 48}}}))
    monkeypatch.chdir(tmp_path)
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    results = evaluate([row for row in rows if row["id"] in ("correct", "escape")], ["unit-tests"])
    for result in results.results:
        [passed] = [s for s in result.scores if s.name == "passed"]
        assert passed.passed is (result.record_id == "correct"), passed.explanation
        isolation = json_format.MessageToDict(passed.metadata["isolation"])
        assert (isolation["driver"], isolation["level"], isolation["requested"]) == ("landlock", "confined",
                                                                                   "confined")
        assert "48" in isolation["bounds"]["pids"]
    # A bad section stops the code evaluators (infra errors naming the file and key), never a silent default.
    (tmp_path / "evalsi.yaml").write_text("sandbox: {ladder: [nope]}\n")
    [failed] = [r for r in evaluate(rows[:1], ["unit-tests"]).results if r.evaluator == "unit-tests"]
    assert failed.outcome == OUTCOME_ERROR and failed.error_kind == ERROR_KIND_INFRA
    assert "evalsi.yaml: sandbox.ladder: 'nope' is not a sandbox driver" in failed.reason, failed.reason
