"""The worker's side of credentials by name: with its own connections it resolves judges, model targets and
agents by name for the task's project, and never calls an endpoint or reads a variable a message names."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_EVALUATE, STAGE_GENERATE, Task
from evalsi.connections import Connections
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.judges.panel import JudgeSet
from evalsi.records import from_value
from evalsi.runs.execute import TARGET_FAILURE_KEY, Executor
from evalsi.runs.result_columns import task_results
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef, JudgeSpec
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED

PLANTED = "secret-planted-0123456789"
VERDICT = '{"reasoning": "fine", "score": 5}'


def record() -> Record:
    out = Record(id="r")
    out.input.text, out.output.text = "q?", "a"
    return out


def connections(base_url: str, key_file: Path) -> Connections:
    return Connections.from_mapping(
        {"good": {"base_url": base_url, "model": "judge", "api_key": {"file": str(key_file)}},
         "unset": {"base_url": base_url, "model": "judge", "api_key": {"env": "EVALSI_TEST_UNSET_KEY"}},
         "team": {"base_url": base_url, "model": "judge", "projects": ["team-a"]}},
        {"shop": {"protocol": "http", "url": base_url, "agent": "shop"}})


def task(stage: int, project: str = "default") -> Task:
    out = Task(key="t", run_id="run", project=project, stage=stage, trial=1)
    out.records.append(record())
    return out


async def test_a_judge_is_resolved_by_name_with_the_workers_own_key(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    key = tmp_path / "judge-key"
    key.write_text("key-from-file-42\n")
    async with FakeOpenAI(reply=lambda body: VERDICT, api_key="key-from-file-42") as provider, \
            FakeOpenAI(reply=lambda body: VERDICT) as listener, JudgeSet({}, cache=False) as judges:
        executor = Executor(Registry.from_entry_points(), judges, connections=connections(provider.base_url, key))
        request = EvaluateRequest(project="default", records=[record()],
                                  evaluators=[EvaluatorRef(ref="llm-judge", judge="good")])
        (scored,) = (await executor.evaluate_request(request)).results
        # A message that names an endpoint (an older api, a forged publish) is refused before any call.
        forged = task(STAGE_EVALUATE)
        forged.evaluators.append(EvaluatorRef(ref="llm-judge"))
        forged.judges["default"].CopyFrom(
            JudgeSpec(model="m", base_url=listener.base_url, api_key_env="OPENAI_API_KEY"))
        with pytest.raises(BadInputError, match=r"^judges\.default\.baseUrl, judges\.default\.apiKeyEnv: not accepted"):
            await executor.execute(forged)
        granted = task(STAGE_EVALUATE, project="other")
        granted.evaluators.append(EvaluatorRef(ref="llm-judge", judge="team"))
        with pytest.raises(BadInputError, match="'team' is not granted to project 'other'"):
            await executor.execute(granted)
        unset = task(STAGE_EVALUATE)
        unset.evaluators.append(EvaluatorRef(ref="llm-judge", judge="unset"))
        (missing,) = task_results(await executor.execute(unset, final_attempt=True))
    assert scored.outcome == OUTCOME_SCORED
    assert [h.get("Authorization") for h in provider.request_headers] == ["Bearer key-from-file-42"]
    assert listener.requests == []
    # A configured variable that is unset fails the call as infrastructure, naming the variable, sending nothing.
    assert missing.outcome == OUTCOME_ERROR and missing.error_kind == ERROR_KIND_INFRA
    assert "EVALSI_TEST_UNSET_KEY" in missing.reason and len(provider.requests) == 1


async def test_targets_are_resolved_by_name_and_never_by_a_messages_address(tmp_path: Path) -> None:
    key = tmp_path / "k"
    key.write_text("key-from-file-42")
    async with FakeOpenAI(reply=lambda body: "Paris", api_key="key-from-file-42") as provider, \
            FakeOpenAI(reply=lambda body: "leaked") as listener, JudgeSet({}) as judges:
        executor = Executor(Registry.from_entry_points(), judges, connections=connections(provider.base_url, key))
        named = task(STAGE_GENERATE)
        named.target.model.connection = "good"
        forged_model = task(STAGE_GENERATE)
        forged_model.target.model.model = "m"
        forged_model.target.model.base_url = listener.base_url
        forged_agent = task(STAGE_GENERATE)
        forged_agent.target.agent.http.url = listener.base_url
        forged_agent.target.agent.http.agent = "a"
        forged_tool = task(STAGE_GENERATE)
        forged_tool.target.model.connection = "good"
        forged_tool.harness.builtin.tools.python.append("os:getenv")
        results = [await executor.execute(t) for t in (named, forged_model, forged_agent, forged_tool)]
    assert results[0].records[0].output.text == "Paris" and TARGET_FAILURE_KEY not in results[0].records[0].metadata
    assert provider.requests[0]["model"] == "judge"
    reasons = [from_value(r.records[0].metadata[TARGET_FAILURE_KEY])["reason"] for r in results[1:]]
    assert reasons[0].startswith("target: spec.target.model.baseUrl: not accepted on a server")
    assert reasons[1].startswith("target: spec.target.agent.http: on a server an agent target names a configured")
    assert reasons[2].startswith("target: spec.harness.builtin.tools.python[0]: 'os:getenv' is not a tool the server")
    assert listener.requests == [] and len(provider.requests) == 1


async def test_two_connections_to_one_endpoint_never_share_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_KEY_A", "key-of-team-a")
    monkeypatch.setenv("EVALSI_TEST_KEY_B", "key-of-team-b")
    async with FakeOpenAI(reply=lambda body: VERDICT) as provider, JudgeSet({}, cache=False) as judges:
        same = {"base_url": provider.base_url, "model": "judge"}
        executor = Executor(Registry.from_entry_points(), judges, connections=Connections.from_mapping(
            {"a": {**same, "api_key": {"env": "EVALSI_TEST_KEY_A"}, "projects": ["team-a"]},
             "b": {**same, "api_key": {"env": "EVALSI_TEST_KEY_B"}, "projects": ["team-b"]}}, None))
        for project, connection in (("team-a", "a"), ("team-b", "b"), ("team-a", "a")):
            request = EvaluateRequest(project=project, records=[record()], evaluators=[EvaluatorRef(ref="llm-judge")])
            request.judges["default"].connection = connection
            (result,) = (await executor.evaluate_request(request)).results
            assert result.outcome == OUTCOME_SCORED
    assert [h["Authorization"] for h in provider.request_headers] == [
        "Bearer key-of-team-a", "Bearer key-of-team-b", "Bearer key-of-team-a"]
