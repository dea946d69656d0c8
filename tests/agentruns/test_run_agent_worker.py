"""The worker's side of agent runs: a generate task carrying the spec's harness runs the reference agent as the
embedded run does, and a worker that cannot import the spec's tool reports every record as an infrastructure
error instead of dead-lettering the task (which would leave its evaluations waiting)."""

from __future__ import annotations

import pytest
from agentrun_support import EXAMPLES, example

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_GENERATE, TASK_STATUS_DONE, Task
from evalsi.datasets import load_dataset
from evalsi.evaluators import Registry
from evalsi.judges.panel import JudgeSet
from evalsi.records import from_value
from evalsi.runs.execute import TARGET_FAILURE_KEY, Executor
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_TOOL


def generate_task(base_url: str, tool: str) -> Task:
    run = example("agent-harness.yaml")
    task = Task(key="r/0/generate/1/target", run_id="r", project="quickstart", stage=STAGE_GENERATE, trial=1,
                seed=run.spec.seed)
    task.records.extend(load_dataset(EXAMPLES / "weather-tasks.jsonl").records)
    task.target.CopyFrom(run.spec.target)
    task.target.model.base_url = base_url
    task.harness.CopyFrom(run.spec.harness)
    task.harness.builtin.tools.python[:] = [tool]
    return task


async def test_a_harness_generate_task_runs_the_reference_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from weather_model import reply

    async with FakeOpenAI(reply=reply) as model, JudgeSet({}) as judges:
        executor = Executor(Registry.from_entry_points(), judges)
        result = await executor.execute(generate_task(model.base_url, "weather_tools:get_weather"))
        missing = await executor.execute(generate_task(model.base_url, "no_such_module:get_weather"))
    assert result.status == TASK_STATUS_DONE and len(result.records) == 3
    paris = result.records[0]
    assert paris.output.text == "It is 21 C in Paris." and paris.provenance.trial == 1
    assert [s.name for s in paris.trajectory.steps if s.type == STEP_TYPE_TOOL] == ["get_weather"]
    assert result.usage.total_tokens == sum(r.usage.total_tokens for r in result.records) > 0

    assert missing.status == TASK_STATUS_DONE and len(missing.records) == 3
    failures = [from_value(r.metadata[TARGET_FAILURE_KEY]) for r in missing.records]
    assert {f["kind"] for f in failures} == {"infra"}
    assert "no_such_module" in failures[0]["reason"]
