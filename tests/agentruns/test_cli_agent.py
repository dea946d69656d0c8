"""A bring-your-own CLI agent (spec.target.agent.cli), embedded on the real bubblewrap rung: a shell script run in the
environment's sandbox against the task solves it and the checker passes; the task reaches it on stdin, in
$EVALSI_TASK and in a file; a timeout is a result the checker still grades; bad specs are refused naming the field."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from agentrun_support import FAST

from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.records import from_value
from evalsi.runs.embedded import execute_run
from evalsi.runs.spec import load_eval_run, validate_eval_run
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_AGENT
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, EvalRun
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, OUTCOME_SKIPPED

REGISTRY = Registry.from_entry_points()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents" / "env-fix"


@pytest.fixture(autouse=True)
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bwrap rung's sandbox workspaces land in this test's own directory, so none left behind is seen."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no evalsi.yaml here: the default ladder
    return tmp_path


def cli_run(*command: str) -> EvalRun:
    run = load_eval_run(EXAMPLE / "cli-agent.yaml")
    if command:
        del run.spec.target.agent.cli.command[:]
        run.spec.target.agent.cli.command.extend(command)
    return run


async def test_a_cli_agent_fixes_the_file_in_the_sandbox_and_the_checker_passes(workspaces: Path) -> None:
    outcome = await execute_run(cli_run(), base_dir=EXAMPLE, retry=FAST)
    run = outcome.results.run
    assert run.state == RUN_STATE_SUCCEEDED, run.message
    assert [(r.outcome, r.scores[0].passed, r.scores[0].explanation) for r in run.results] == [
        (OUTCOME_SCORED, True, "ok")]
    [record] = outcome.records
    assert record.output.text == "fixed: calc.py's add() returns the wrong sum. F"
    assert record.metadata["agent.exit_code"].number_value == 0
    assert from_value(record.metadata["environment.isolation"])["driver"] == "bwrap"
    [root] = record.trajectory.steps
    assert root.type == STEP_TYPE_AGENT and root.name.startswith("agent:cli:sh -c sed -i")
    assert record.provenance.target == root.name == run.manifest.target
    assert not list(workspaces.glob("evalsi-ws-*"))  # the sandbox was destroyed


async def test_the_task_reaches_the_agent_on_stdin_in_the_environment_and_in_a_file() -> None:
    script = 'printf "%s|%s|%s" "$(cat)" "$EVALSI_TASK" "$(cat .evalsi/task.txt)"; id -u >&2'
    outcome = await execute_run(cli_run("sh", "-c", script), base_dir=EXAMPLE, retry=FAST)
    [record] = outcome.records
    task = "calc.py's add() returns the wrong sum. Fix it so test_calc.py passes."
    assert record.output.text == f"{task}|{task}|{task}"
    [root] = record.trajectory.steps
    assert root.attributes["evalsi.agent.stderr"].string_value == "65534\n"  # unprivileged, in the sandbox
    # It changed nothing, so the checker fails it: a result, not an error.
    assert [(r.outcome, r.scores[0].passed) for r in outcome.results.run.results] == [(OUTCOME_SCORED, False)]
    assert "the checker exited 1" in outcome.results.run.results[0].scores[0].explanation


async def test_a_cli_agent_past_its_timeout_is_stopped_and_its_work_still_graded(workspaces: Path) -> None:
    run = cli_run("sh", "-c", "sed -i 's/a - b/a + b/' calc.py; echo partial; sleep 30")
    run.spec.target.agent.cli.timeout.FromSeconds(1)
    outcome = await execute_run(run, base_dir=EXAMPLE, retry=FAST)
    [record] = outcome.records
    assert record.metadata["agent.stop_reason"].string_value == "timeout"
    assert record.trajectory.steps[0].error == "timed out after 1s"
    assert [(r.outcome, r.scores[0].passed) for r in outcome.results.run.results] == [(OUTCOME_SCORED, True)]
    assert not list(workspaces.glob("evalsi-ws-*"))


async def test_a_cli_agent_the_sandbox_denies_is_a_result_with_a_policy_event() -> None:
    outcome = await execute_run(cli_run("sh", "-c", "echo escaping; echo x > /usr/planted"), base_dir=EXAMPLE,
                                retry=FAST)
    [record] = outcome.records
    assert record.output.text == "escaping"
    assert record.metadata["agent.stop_reason"].string_value == "denied"
    [root] = record.trajectory.steps
    assert root.error == "denied by the sandbox: write to a read-only path"
    assert from_value(root.attributes["evalsi.sandbox.event"]) == {
        "kind": "denied", "effect": "write to a read-only path", "driver": "bwrap"}
    assert not Path("/usr/planted").exists()
    assert [(r.outcome, r.scores[0].passed) for r in outcome.results.run.results] == [(OUTCOME_SCORED, False)]


async def test_a_cli_agent_without_an_environment_runs_in_a_bare_sandbox_with_no_verdict() -> None:
    run = cli_run("sh", "-c", "ls -A; echo done")
    run.spec.ClearField("harness")
    outcome = await execute_run(run, base_dir=EXAMPLE, retry=FAST)
    [record] = outcome.records
    assert record.output.text == ".evalsi\ndone"  # only the task file
    assert [r.outcome for r in outcome.results.run.results] == [OUTCOME_SKIPPED]  # no checker, no task success


@pytest.mark.parametrize(("change", "message"), [
    (lambda run: run.spec.target.agent.cli.ClearField("command"), "spec.target.agent.cli.command: required"),
    (lambda run: run.spec.target.agent.cli.timeout.FromSeconds(-1), "spec.target.agent.cli.timeout: must be longer"),
    (lambda run: run.spec.target.agent.cli.timeout.FromSeconds(100_000),
     "spec.target.agent.cli.timeout: must be longer than zero and at most 86400s"),
    (lambda run: run.spec.target.agent.cli.env.update({"BIG": "x" * 70_000}),
     "spec.target.agent.cli.env: at most 64 variables of 65536 characters in all"),
    (lambda run: run.spec.harness.builtin.SetInParent(), "spec.harness.builtin: a CLI agent runs its own loop"),
    (lambda run: run.spec.harness.environment.update({"check": {"format": "tap", "command": "x"}}),
     "spec.harness.environment.check.format: 'tap'"),
])
def test_a_bad_cli_agent_spec_is_refused_naming_the_field(change: object, message: str) -> None:
    run = cli_run()
    change(run)  # type: ignore[operator]
    with pytest.raises(BadInputError, match=message.replace("(", r"\(").replace(".", r"\.")):
        validate_eval_run(run, registry=REGISTRY, base_dir=EXAMPLE)
