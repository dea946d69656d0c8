"""The cascade: cheap stages first, a judge only when its `when` holds; no content is skipped loudly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from policy_helpers import REGISTRY

from evalsi.policy import SCORED, SKIPPED, Cascade, Stage, StageResult, run_cascade
from evalsi.policy.cascade import compile_when
from evalsi.v1alpha1.record_pb2 import Content, Record
from evalsi.v1alpha1.score_pb2 import Score


def cascade(judge_when: str = "scores.all(s, s.passed)") -> Cascade:
    pii = REGISTRY.resolve("test/pii-leak").bind(alias="pii-leak")
    judge = REGISTRY.resolve("test/llm-judge").bind(alias="llm-judge")
    pii2 = REGISTRY.resolve("test/pii-leak").bind(alias="pii-2")
    return Cascade((
        Stage("pii-leak", pii),
        Stage("pii-2", pii2),
        Stage("llm-judge", judge, compile_when(judge_when), judge_when),
    ))


def evaluator_returning(passed: bool, calls: list[list[str]]):
    async def evaluate(stages: Sequence[Stage]) -> list[StageResult]:
        calls.append([s.alias for s in stages])
        out = []
        for stage in stages:
            score = Score(number=0.4) if stage.alias == "llm-judge" else Score(passed=passed)
            out.append(StageResult(stage.alias, SCORED, (score,)))
        return out

    return evaluate


async def test_judge_runs_after_cheap_stages_pass() -> None:
    calls: list[list[str]] = []
    results = await run_cascade(cascade(), evaluator_returning(True, calls))
    assert calls == [["pii-leak", "pii-2"], ["llm-judge"]]
    assert [r.outcome for r in results] == [SCORED, SCORED, SCORED]


async def test_judge_is_skipped_when_an_earlier_stage_fails() -> None:
    calls: list[list[str]] = []
    results = await run_cascade(cascade(), evaluator_returning(False, calls))
    assert calls == [["pii-leak", "pii-2"]]
    judge = results[2]
    assert judge.outcome == SKIPPED and "scores.all(s, s.passed)" in judge.reason and judge.reason.endswith("false")


async def test_score_function_and_an_unreadable_when() -> None:
    calls: list[list[str]] = []
    results = await run_cascade(cascade("score('pii-leak') == 1.0"), evaluator_returning(True, calls))
    assert results[2].outcome == SCORED
    results = await run_cascade(cascade("score('nope') > 0.5"), evaluator_returning(True, []))
    assert results[2].outcome == SKIPPED and "could not be evaluated" in results[2].reason


def test_planning_is_pure_and_stepwise() -> None:
    c = cascade()
    first = c.next_stages({})
    assert [s.alias for s in first.run] == ["pii-leak", "pii-2"] and not first.skipped
    done = {a: StageResult(a, SCORED, (Score(passed=True),)) for a in ("pii-leak", "pii-2")}
    assert [s.alias for s in c.next_stages(done).run] == ["llm-judge"]
    done["llm-judge"] = StageResult("llm-judge", SCORED, (Score(number=0.9),))
    assert c.next_stages(done).done


async def test_no_content_is_skipped_not_scored() -> None:
    calls: list[list[str]] = []
    judge = REGISTRY.resolve("test/llm-judge").bind(alias="llm-judge")
    output_judge = replace(judge, evaluator=replace(judge.evaluator, requires=("output",)))
    c = Cascade((Stage("llm-judge", output_judge),))
    results = await run_cascade(c, evaluator_returning(True, calls), record=Record(id="t", input=Content(text="q")))
    assert calls == [] and results[0].outcome == SKIPPED and results[0].reason.startswith("no content")
    results = await run_cascade(c, evaluator_returning(True, calls), record=Record(id="t", output=Content(text="a")))
    assert results[0].outcome == SCORED
