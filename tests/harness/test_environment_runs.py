"""Agent runs in harness environments, embedded (evalsi run's engine) on the real bubblewrap rung: the built-in
agent on a scripted model fixes a file in the sandbox and the checker passes; a wrong fix fails; a record whose
setup fails is an infrastructure error, never scored; every sandbox is gone afterwards."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from evalsi.judges import RetryPolicy
from evalsi.records import from_value
from evalsi.runs.embedded import execute_run
from evalsi.runs.spec import load_eval_run
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import ISOLATION_LEVEL_NAMESPACED, STEP_TYPE_TOOL
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, EvalRun
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents" / "env-fix"
FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.005)


@pytest.fixture(autouse=True)
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bwrap rung's sandbox workspaces land in this test's own directory, so none left behind is seen."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLE))  # fix_model, the scripted model
    monkeypatch.chdir(tmp_path)  # no evalsi.yaml here: the default ladder
    return tmp_path


def env_fix(base_url: str) -> EvalRun:
    run = load_eval_run(EXAMPLE / "env-fix.yaml")
    run.spec.target.model.base_url = base_url
    run.spec.target.model.params["max_retries"] = 0
    return run


def metric(run: object, name: str) -> object:
    return next(s for s in run.summaries if s.metric == name)  # type: ignore[attr-defined]


async def test_the_built_in_agent_fixes_the_file_in_the_sandbox_and_the_checker_passes(workspaces: Path) -> None:
    from fix_model import reply

    async with FakeOpenAI(reply=reply) as model:
        outcome = await execute_run(env_fix(model.base_url), base_dir=EXAMPLE, retry=FAST)
    run = outcome.results.run
    assert run.state == RUN_STATE_SUCCEEDED, run.message
    assert metric(run, "task-success").mean == 1.0 and all(g.passed for g in run.gates)  # type: ignore[attr-defined]
    [record] = outcome.records
    tools = [s.name for s in record.trajectory.steps if s.type == STEP_TYPE_TOOL]
    assert tools == ["read_file", "write_file", "run_shell"]
    assert record.output.text == 'Changed calc.py; the tests say: {"success": true, "reason": "3/3 cases pass"}'
    assert record.metadata["task_success"].bool_value is True
    assert record.metadata["checker_output"].string_value == "3/3 cases pass"
    assert from_value(record.metadata["environment.isolation"])["driver"] == "bwrap"
    # The record's provenance says which rung its output came from, and the run's manifest lists that rung.
    isolation = record.provenance.isolation
    assert (isolation.driver, isolation.enforcement) == ("bwrap", "full")
    assert isolation.achieved == ISOLATION_LEVEL_NAMESPACED
    assert any(line.startswith("network: ") for line in isolation.enforced)
    assert [(i.driver, i.achieved) for i in run.manifest.isolation] == [("bwrap", ISOLATION_LEVEL_NAMESPACED)]
    assert [r.scores[0].explanation for r in run.results] == ["3/3 cases pass"]
    # The agent was told the sandbox tools, and what it read was the environment's file.
    assert {t["function"]["name"] for t in model.requests[0]["tools"]} == {"run_shell", "read_file", "write_file",
                                                                            "list_files", "request_escalation"}
    assert model.requests[1]["messages"][-1]["content"] == "def add(a, b):\n    return a - b\n"
    assert not list(workspaces.glob("evalsi-ws-*"))  # the sandbox was destroyed


async def test_a_wrong_fix_fails_the_checker_as_a_scored_result() -> None:
    from fix_model import make_reply

    async with FakeOpenAI(reply=make_reply("a * b")) as model:
        outcome = await execute_run(env_fix(model.base_url), base_dir=EXAMPLE, retry=FAST)
    run = outcome.results.run
    assert [(r.outcome, r.scores[0].passed, r.scores[0].explanation) for r in run.results] == [
        (OUTCOME_SCORED, False, "1/3 cases pass")]
    assert metric(run, "task-success").mean == 0.0  # type: ignore[attr-defined]
    assert not all(g.passed for g in run.gates)


async def test_a_record_whose_setup_fails_is_an_infra_error_and_the_others_are_scored(workspaces: Path) -> None:
    from fix_model import reply

    broken = {"files": {"calc.py": "def add(a, b):\n    return a - b\n"},
              "setup": ["echo cannot install the toolchain >&2; exit 7"], "check": "true"}
    rows = [{"id": "fix-add", "input": "Fix calc.py."},
            {"id": "broken", "input": "Fix calc.py.", "metadata": {"environment": broken}}]
    (workspaces / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    async with FakeOpenAI(reply=reply) as model:
        run_spec = env_fix(model.base_url)
        run_spec.spec.dataset.path = "rows.jsonl"
        del run_spec.spec.gates[:]
        outcome = await execute_run(run_spec, base_dir=workspaces, retry=FAST)
    results = {r.record_id: r for r in outcome.results.run.results}
    assert results["fix-add"].outcome == OUTCOME_SCORED and results["fix-add"].scores[0].passed
    assert (results["broken"].outcome, results["broken"].error_kind) == (OUTCOME_ERROR, ERROR_KIND_INFRA)
    assert "environment setup[0]" in results["broken"].reason and "exited 7: cannot install the toolchain" in \
        results["broken"].reason
    summary = metric(outcome.results.run, "task-success")
    assert (summary.n, summary.mean, summary.errors) == (1, 1.0, 1)  # type: ignore[attr-defined]
    assert not list(workspaces.glob("evalsi-ws-*"))
    # Only the record that ran asked the model anything (4 turns): a failed setup never starts the agent.
    assert len(model.requests) == 4


async def test_a_denied_command_is_a_tool_error_recorded_as_a_sandbox_policy_event() -> None:
    calls = {"n": 0}

    def planting(body: dict) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            return ("tool_calls", [{"name": "run_shell", "arguments": {"command": "echo x > /usr/planted"}}])
        return "I could not finish."

    async with FakeOpenAI(reply=planting) as model:
        run = env_fix(model.base_url)
        del run.spec.gates[:]
        outcome = await execute_run(run, base_dir=EXAMPLE, retry=FAST)
    [record] = outcome.records
    [step] = [s for s in record.trajectory.steps if s.type == STEP_TYPE_TOOL]
    assert step.error == "denied by the sandbox: write to a read-only path"
    event = from_value(step.attributes["evalsi.sandbox.event"])
    assert event == {"kind": "denied", "effect": "write to a read-only path", "tool": "run_shell", "driver": "bwrap"}
    assert model.requests[1]["messages"][-1]["content"] == "error: denied by the sandbox: write to a read-only path"
    assert [r.scores[0].passed for r in outcome.results.run.results] == [False]  # the checker still graded it
