"""Rubric grading by a judge panel, against FakeOpenAI judges with scripted scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalsi.cases import CallableTransport, Case, load_file, run_cases
from evalsi.cases.judging import Panel, PanelConfig, load_panel, panel_for_source, rubric_messages
from evalsi.cases.transcript import Transcript, Turn
from evalsi.errors import BadInputError
from evalsi.judges.panel import JudgeSet
from evalsi.testing import FakeOpenAI

RUBRIC_CASE = """\
id: cupom
agent: shop
turns:
  - user: tem cupom?
expect:
  tools_called: [search_voucher]
  policy: { ask_once: { max: 2 } }
  rubric: Says the active coupon without inventing one.
  min_score: 0.7
"""


def respond(message: str, ctx: Any) -> dict[str, Any]:
    return {"reply": "Temos o CHOCO10.", "tool_calls": [{"name": "search_voucher", "status": "ok"}]}


def the_case(tmp_path: Path, text: str = RUBRIC_CASE) -> Case:
    path = tmp_path / "case.yaml"
    path.write_text(text, encoding="utf-8")
    (item,) = load_file(path)
    assert isinstance(item, Case)
    return item


def scores_by_model(scores: dict[str, Any]) -> Any:
    def reply(body: dict[str, Any]) -> str:
        score = scores[body["model"]]
        if isinstance(score, str):
            return score  # scripted garbage
        return f'{{"reasoning": "{body["model"]} read it", "score": {score}}}'

    return reply


async def grade_with(tmp_path: Path, server: FakeOpenAI, models: list[str], **panel: Any) -> dict[str, Any]:
    judges = [{"model": m, "base_url": server.base_url, "max_retries": 0} for m in models]
    config = PanelConfig.from_mapping({"judges": judges, **panel}, "test panel")
    async with JudgeSet(config.judges, cache=False) as judge_set:
        report = await run_cases([the_case(tmp_path)], CallableTransport(respond),
                                 panel=Panel(config, dict(judge_set.clients)))
    (result,) = report.to_dict()["cases"]
    return result


def rubric_of(result: dict[str, Any]) -> dict[str, Any]:
    return next(check for check in result["checks"] if check["name"] == "rubric")


async def test_agreeing_panel_passes_and_keeps_each_score(tmp_path: Path) -> None:
    async with FakeOpenAI(scores_by_model({"judge-a": 0.9, "judge-b": 0.8, "judge-c": 1.0})) as server:
        result = await grade_with(tmp_path, server, ["judge-a", "judge-b", "judge-c"])
    rubric = rubric_of(result)
    assert result["status"] == "pass" and rubric["status"] == "pass"
    assert rubric["detail"]["score"] == 0.9 and rubric["detail"]["agreement"] == 1.0
    assert {j["judge"]: j["score"] for j in rubric["detail"]["judges"]} == {
        "judge-a": 0.9, "judge-b": 0.8, "judge-c": 1.0}
    prompt = server.requests[0]["messages"][1]["content"]
    assert "CHOCO10" in prompt and "without inventing" in prompt and "at most 2 question(s)" in prompt


async def test_split_panel_is_visible_and_min_agreement_decides(tmp_path: Path) -> None:
    scores = {"judge-a": 0.9, "judge-b": 0.2, "judge-c": 0.8}
    async with FakeOpenAI(scores_by_model(scores)) as server:
        majority = await grade_with(tmp_path, server, list(scores))
        unanimous = await grade_with(tmp_path, server, list(scores), min_agreement=1.0)
    assert majority["status"] == "pass"  # median 0.8, two of three pass
    assert [j["passed"] for j in rubric_of(majority)["detail"]["judges"]] == [True, False, True]
    assert unanimous["status"] == "fail" and "min_agreement 100%" in rubric_of(unanimous)["reason"]
    assert "judge-b 0.20" in rubric_of(unanimous)["reason"]


@pytest.mark.parametrize(("aggregate", "status", "score"), [("median", "pass", 0.8), ("mean", "fail", 0.6333),
                                                             ("min", "fail", 0.2)])
async def test_aggregate(tmp_path: Path, aggregate: str, status: str, score: float) -> None:
    scores = {"judge-a": 0.9, "judge-b": 0.2, "judge-c": 0.8}
    async with FakeOpenAI(scores_by_model(scores)) as server:
        result = await grade_with(tmp_path, server, list(scores), aggregate=aggregate)
    assert result["status"] == status and rubric_of(result)["detail"]["score"] == score


async def test_quorum_samples_each_judge_and_takes_the_median(tmp_path: Path) -> None:
    answers = iter(['{"score": 0.2}', '{"score": 0.9}', '{"score": 0.8}'])
    async with FakeOpenAI(lambda body: next(answers)) as server:
        result = await grade_with(tmp_path, server, ["judge-a"], quorum=3)
    judge = rubric_of(result)["detail"]["judges"][0]
    assert len(server.requests) == 3 and judge["samples"] == [0.2, 0.9, 0.8] and judge["score"] == 0.8
    assert result["status"] == "pass"


async def test_low_score_fails(tmp_path: Path) -> None:
    async with FakeOpenAI(scores_by_model({"judge-a": 0.5})) as server:
        result = await grade_with(tmp_path, server, ["judge-a"])
    assert result["status"] == "fail" and "score 0.50 < min_score 0.7" in rubric_of(result)["reason"]


async def test_unparseable_answer_scores_zero_never_a_pass(tmp_path: Path) -> None:
    async with FakeOpenAI(scores_by_model({"judge-a": "looks great to me!", "judge-b": 1.0})) as server:
        result = await grade_with(tmp_path, server, ["judge-a", "judge-b"], min_agreement=1.0)
    judges = rubric_of(result)["detail"]["judges"]
    assert judges[0]["score"] == 0.0 and "unparseable judge answer: looks great" in judges[0]["reason"]
    assert result["status"] == "fail"


async def test_a_judge_down_is_an_error_not_a_fail(tmp_path: Path) -> None:
    async with FakeOpenAI(scores_by_model({"judge-a": 0.9, "judge-b": 0.9})) as up:
        down = FakeOpenAI()
        await down.start()
        dead_url = down.base_url
        await down.close()
        judges = [{"model": "judge-a", "base_url": up.base_url, "max_retries": 0},
                  {"model": "judge-b", "base_url": dead_url, "max_retries": 0, "timeout_s": 2}]
        config = PanelConfig.from_mapping({"judges": judges}, "panel")
        async with JudgeSet(config.judges, cache=False) as judge_set:
            report = await run_cases([the_case(tmp_path)], CallableTransport(respond),
                                     panel=Panel(config, dict(judge_set.clients)))
    (result,) = report.results
    assert result.status == "error" and "judge judge-b could not answer" in result.reason
    assert report.summary.counts["fail"] == 0


async def test_a_deterministic_failure_stays_a_fail_even_when_the_judge_is_down(tmp_path: Path) -> None:
    text = RUBRIC_CASE.replace("[search_voucher]", "[add_to_cart]")
    config = PanelConfig.from_mapping({"judges": [{"model": "m", "base_url": "http://127.0.0.1:9/v1",
                                                   "max_retries": 0, "timeout_s": 1}]}, "panel")
    async with JudgeSet(config.judges, cache=False) as judge_set:
        report = await run_cases([the_case(tmp_path, text)], CallableTransport(respond),
                                 panel=Panel(config, dict(judge_set.clients)))
    assert report.results[0].status == "fail"


async def test_no_judge_is_judge_pending_and_perf_calls_no_judge(tmp_path: Path) -> None:
    report = await run_cases([the_case(tmp_path)], CallableTransport(respond))
    assert report.results[0].status == "judge_pending"
    async with FakeOpenAI() as server:
        config = PanelConfig.from_mapping({"judges": [{"model": "m", "base_url": server.base_url}]}, "panel")
        async with JudgeSet(config.judges, cache=False) as judge_set:
            report = await run_cases([the_case(tmp_path)], CallableTransport(respond),
                                     panel=Panel(config, dict(judge_set.clients)), call_judges=False)
        assert not server.requests
    assert report.results[0].status == "judge_pending" and "--mode perf" in report.results[0].reason


def test_panel_config_validation(tmp_path: Path) -> None:
    config = PanelConfig.from_mapping({"judges": ["gpt-4o-mini", {"model": "claude-x", "provider": "anthropic"}],
                                       "aggregate": "min", "min_agreement": 1, "quorum": 2, "tolerance": 0.05},
                                      "evals.yaml")
    assert list(config.judges) == ["gpt-4o-mini", "claude-x"] and config.judges["claude-x"].provider == "anthropic"
    assert (config.aggregate, config.min_agreement, config.quorum, config.tolerance) == ("min", 1.0, 2, 0.05)
    assert PanelConfig.from_mapping({}, "x") == PanelConfig()
    for bad, needle in [({"aggregate": "max"}, "aggregate"), ({"min_agreement": 2}, "min_agreement"),
                        ({"quorum": 0}, "quorum"), ({"judges": ["a", "a"]}, "listed twice"),
                        ({"judge": []}, "unknown key"), ({"judges": [{"provider": "openai"}]}, "model")]:
        with pytest.raises(BadInputError, match=needle):
            PanelConfig.from_mapping(bad, "evals.yaml")
    (tmp_path / "evals.yaml").write_text("judges: [gpt-4o-mini]\naggregate: mean\n", encoding="utf-8")
    assert panel_for_source(tmp_path) == load_panel(tmp_path / "evals.yaml")
    assert panel_for_source(tmp_path / "evals.yaml") is None


def test_rubric_prompt_shows_the_conversation_not_the_verdicts(tmp_path: Path) -> None:
    transcript = Transcript((Turn("oi", "Olá! Como posso ajudar?"), Turn("tem cupom?", "Temos o CHOCO10.")))
    messages = rubric_messages(the_case(tmp_path), transcript)
    user = messages[1]["content"]
    assert "customer: oi\nagent: Olá! Como posso ajudar?\ncustomer: tem cupom?" in user
    assert "## The agent's last reply\n\nTemos o CHOCO10." in user
