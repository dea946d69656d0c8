"""The judge evaluators end to end: runner -> evaluator -> JudgeClient -> a local fake provider."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from evalsi.errors import BadInputError
from evalsi.evaluators import EvalContext, Evaluator
from evalsi.evaluators.runner import run_evaluators
from evalsi.judges import JudgeCache, JudgeClient, JudgeConfig, RateLimiter
from evalsi.packs.judge import llm_judge, pairwise_preference, prompt_judge, reference_correctness
from evalsi.packs.judge.rubrics import RUBRICS
from evalsi.packs.judge.templates import Template, get_template, register_template, unregister_template
from evalsi.records import from_value, make_record
from evalsi.testing import FakeAnthropic, FakeOpenAI, FakeProvider
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    ERROR_KIND_INFRA,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
    Score,
)

MODEL = "judge-model-1"


async def no_sleep(_seconds: float) -> None:
    return None


def reply_json(score: Any, reasoning: str = "looks right") -> str:
    return json.dumps({"reasoning": reasoning, "score": score})


def fixed(text: str) -> Callable[[dict[str, Any]], str]:
    return lambda _body: text


def user_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def system_text(body: dict[str, Any]) -> str:
    if "system" in body:  # anthropic
        return body["system"]
    return next((m["content"] for m in body["messages"] if m["role"] == "system"), "")


@asynccontextmanager
async def judge_for(server: FakeProvider, cache_dir: Path, **config: Any) -> AsyncIterator[JudgeClient]:
    provider = "anthropic" if isinstance(server, FakeAnthropic) else "openai"
    config.setdefault("max_retries", 2)
    judge_config = JudgeConfig(model=MODEL, provider=provider, base_url=server.base_url, **config)
    client = JudgeClient(judge_config, limiter=RateLimiter(sleep=no_sleep), cache=JudgeCache(cache_dir),
                         sleep=no_sleep, environ={})
    async with client:
        yield client


async def run(
    ev: Evaluator,
    records: Sequence[Record],
    judge: JudgeClient | None,
    params: dict[str, Any] | None = None,
    compare_with: Sequence[Sequence[Record]] = (),
) -> list[EvaluationResult]:
    return await run_evaluators(records, [ev.bind(params or {})], lambda _bound: EvalContext(judge=judge),
                                compare_with=compare_with)


def meta(score: Score) -> dict[str, Any]:
    return {key: from_value(value) for key, value in score.metadata.items()}


def qa(id: str = "r1", **fields: Any) -> Record:
    values = {"input": "What is the capital of France?", "output": "Paris is the capital."}
    values.update(fields)
    return make_record(id=id, **{k: v for k, v in values.items() if v is not None})


# --- llm-judge -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("rubric", sorted(RUBRICS))
async def test_llm_judge_each_rubric(rubric: str, tmp_path: Path) -> None:
    record = qa(reference="Paris", context=["Paris is the capital and largest city of France."])
    async with FakeOpenAI(fixed(reply_json(4, f"{rubric} is fine"))) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(llm_judge, [record], judge, {"rubric": rubric})
        body = server.requests[0]
    assert result.outcome == OUTCOME_SCORED, result.reason
    [score] = result.scores
    assert score.name == "score" and score.number == 0.75
    assert score.explanation == f"{rubric} is fine"
    assert score.cost.input_tokens > 0 and score.cost.output_tokens == len(reply_json(4, f"{rubric} is fine").split())
    assert meta(score) == {
        "raw_score": 4, "judge_model": MODEL, "cached": False, "rubric": rubric,
        "template": "llm-judge@1", "template_hash": get_template("llm-judge@1").hash,
    }
    prompt = user_text(body)
    assert RUBRICS[rubric].text in prompt
    assert "Paris is the capital." in prompt and "What is the capital of France?" in prompt
    assert ("Paris is the capital and largest city" in prompt) == ("context" in RUBRICS[rubric].uses)
    assert ("<reference>\nParis\n</reference>" in prompt) == ("reference" in RUBRICS[rubric].uses)
    assert '"score"' in system_text(body)
    assert body["temperature"] == 0


@pytest.mark.parametrize(("answer", "number"), [(1, 0.0), (2, 0.25), (3, 0.5), (5, 1.0)])
async def test_llm_judge_normalizes_the_scale(answer: int, number: float, tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(reply_json(answer))) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(llm_judge, [qa()], judge)
    assert result.scores[0].number == number


async def test_correctness_uses_the_reference_when_present(tmp_path: Path) -> None:
    records = [qa("with", reference=["Paris", "paris, france"]), qa("without")]
    async with FakeOpenAI(fixed(reply_json(5))) as server, judge_for(server, tmp_path) as judge:
        results = await run(llm_judge, records, judge)
        prompts = [user_text(b) for b in server.requests]  # the two calls run concurrently, in either order
    assert [r.outcome for r in results] == [OUTCOME_SCORED, OUTCOME_SCORED]
    assert sum("Any of these is correct:\n- Paris\n- paris, france" in p for p in prompts) == 1
    assert sum("<reference>\n(none given)\n</reference>" in p for p in prompts) == 1


async def test_faithfulness_without_context_is_skipped_without_a_call(tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(reply_json(5))) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(llm_judge, [qa()], judge, {"rubric": "faithfulness"})
        assert server.requests == []
    assert result.outcome == OUTCOME_SKIPPED
    assert result.reason == (
        "missing context: the faithfulness rubric judges the output against the record's context"
    )


async def test_custom_rubric_text(tmp_path: Path) -> None:
    rubric = "Politeness: 5 = very polite, 1 = rude. Ignore correctness."
    async with FakeOpenAI(fixed(reply_json(2, "curt"))) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(llm_judge, [qa(output="Paris. Obviously.")], judge,
                             {"rubric": "faithfulness", "rubric_text": rubric})  # rubric_text wins
        prompt = user_text(server.requests[0])
    assert result.outcome == OUTCOME_SCORED
    assert rubric in prompt and RUBRICS["correctness"].text not in prompt
    score = result.scores[0]
    assert score.number == 0.25 and score.explanation == "curt" and meta(score)["rubric"] == "custom"


async def test_unknown_rubric_is_bad_input_listing_the_rubrics(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="correctness, helpfulness, relevance, faithfulness"):
        llm_judge.bind({"rubric": "tone"})
    with pytest.raises(BadInputError, match="correctness, helpfulness, relevance, faithfulness"):
        await llm_judge.fn(qa(), EvalContext(), rubric="tone")
    with pytest.raises(BadInputError, match="rubric_text"):
        await llm_judge.fn(qa(), EvalContext(), rubric_text="  ")


@pytest.mark.parametrize(
    "text",
    [
        'Sure!\n```json\n{"reasoning": "good", "score": 5}\n```',
        'After careful thought: {"reasoning": "good", "score": 5}. Hope that helps.',
        "good\nScore: 5",
    ],
)
async def test_tolerant_parsing_through_the_evaluator(text: str, tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(text)) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(llm_judge, [qa()], judge)
    assert result.outcome == OUTCOME_SCORED and result.scores[0].number == 1.0
    assert result.scores[0].explanation == "good"


@pytest.mark.parametrize("text", ["I would rate this highly.", '{"reasoning": "amazing", "score": 9}'])
async def test_unparseable_answer_is_an_evaluator_error_with_the_reason(text: str, tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(text)) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(llm_judge, [qa()], judge)
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_EVALUATOR
    assert not result.scores  # never a score, not even a 0
    detail = ("no JSON object with a score and no 'Score:' line" if text.startswith("I ")
              else "score 9 is not on the 1-5 scale")
    assert result.reason == f"UnparseableAnswer: {detail}; the answer began: {text!r}"


async def test_config_template_override(tmp_path: Path) -> None:
    mine = Template(name="terse-rubric", version=1, kind="rubric",
                    system='Answer {"reasoning": "...", "score": 1-5}.', user="RUBRIC {{rubric}} OUTPUT {{output}}")
    register_template(mine)
    try:
        async with FakeOpenAI(fixed(reply_json(3))) as server:
            async with judge_for(server, tmp_path, template="terse-rubric@1") as judge:
                [result] = await run(llm_judge, [qa()], judge, {"rubric": "relevance"})
            # a template of another kind leaves the evaluator's default in place
            async with judge_for(server, tmp_path, template="pairwise@1") as judge:
                [default_result] = await run(llm_judge, [qa()], judge, {"rubric": "relevance"})
            bodies = list(server.requests)
    finally:
        unregister_template("terse-rubric@1")
    assert user_text(bodies[0]) == f"RUBRIC {RUBRICS['relevance'].text} OUTPUT Paris is the capital."
    assert system_text(bodies[0]) == 'Answer {"reasoning": "...", "score": 1-5}.'
    assert meta(result.scores[0])["template"] == "terse-rubric@1"
    assert meta(result.scores[0])["template_hash"] == mine.hash
    assert meta(default_result.scores[0])["template"] == "llm-judge@1"
    assert user_text(bodies[1]).startswith("# Rubric")


async def test_unknown_config_template_is_bad_input(tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(reply_json(3))) as server, judge_for(server, tmp_path, template="nope@1") as judge:
        with pytest.raises(BadInputError, match="unknown judge template 'nope@1'"):
            await run(llm_judge, [qa()], judge)


# --- reference-correctness -----------------------------------------------------------------------------


async def test_reference_correctness_pass_and_fail(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        prompt = user_text(body)
        correct = "<output>\nParis is the capital.\n</output>" in prompt
        return reply_json(1 if correct else 0, "same city" if correct else "wrong city")

    records = [qa("good", reference="Paris"), qa("bad", output="Lyon.", reference="Paris")]
    async with FakeOpenAI(reply) as server, judge_for(server, tmp_path) as judge:
        results = await run(reference_correctness, records, judge)
        prompt = user_text(server.requests[0])
    assert [r.scores[0].passed for r in results] == [True, False]
    assert [r.scores[0].explanation for r in results] == ["same city", "wrong city"]
    assert results[0].scores[0].name == "passed"
    assert meta(results[0].scores[0])["template"] == "reference-correctness@1"
    assert "<reference>\nParis\n</reference>" in prompt and "What is the capital of France?" in prompt


@pytest.mark.parametrize("text", ["yes, correct!", '{"reasoning": "sure", "score": 0.5}', ""])
async def test_reference_correctness_garbage_never_passes(text: str, tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(text)) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(reference_correctness, [qa(reference="Paris")], judge)
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_EVALUATOR
    assert not result.scores
    assert result.reason.startswith("UnparseableAnswer: ") and f"the answer began: {text!r}" in result.reason


async def test_reference_correctness_skips_without_reference(tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(reply_json(1))) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(reference_correctness, [qa()], judge)
        assert server.requests == []
    assert result.outcome == OUTCOME_SKIPPED and result.reason == "missing reference"


# --- pairwise-preference -------------------------------------------------------------------------------

CANDIDATE = "CANDIDATE says Paris."
BASELINE = "BASELINE says Lyon."


def candidate_is_a(body: dict[str, Any]) -> bool:
    prompt = user_text(body)
    return prompt.index(CANDIDATE) < prompt.index(BASELINE)


def pairwise_records() -> tuple[list[Record], list[Record]]:
    return [qa("q1", output=CANDIDATE)], [qa("q1", output=BASELINE)]


async def run_pairwise(reply: Callable[[dict[str, Any]], str], tmp_path: Path) -> tuple[EvaluationResult, list]:
    ours, theirs = pairwise_records()
    async with FakeOpenAI(reply) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(pairwise_preference, ours, judge, compare_with=[theirs])
        return result, list(server.requests)


def by_name(result: EvaluationResult) -> dict[str, Score]:
    return {s.name: s for s in result.scores}


async def test_pairwise_consistent_win(tmp_path: Path) -> None:
    result, requests = await run_pairwise(lambda b: reply_json("A" if candidate_is_a(b) else "B", "Paris"), tmp_path)
    assert result.outcome == OUTCOME_SCORED, result.reason
    scores = by_name(result)
    assert scores["preference"].label == "win" and scores["win_rate"].number == 1.0
    assert len(requests) == 2 and [candidate_is_a(b) for b in requests].count(True) == 1
    info = meta(scores["preference"])
    assert info["order_dependent"] is False and info["outcomes"] == ["win", "win"]
    assert info["template"] == "pairwise@1" and info["judge_model"] == MODEL
    # both calls' tokens, once per result
    output_tokens = 2 * len(reply_json("A", "Paris").split())
    assert scores["preference"].cost.output_tokens == output_tokens
    assert scores["preference"].cost.input_tokens > 0
    assert scores["win_rate"].cost.output_tokens == 0
    assert scores["preference"].explanation.startswith("win: ")


async def test_pairwise_consistent_loss(tmp_path: Path) -> None:
    result, _ = await run_pairwise(lambda b: reply_json("B" if candidate_is_a(b) else "A"), tmp_path)
    scores = by_name(result)
    assert scores["preference"].label == "loss" and scores["win_rate"].number == 0.0
    assert meta(scores["preference"])["order_dependent"] is False


async def test_pairwise_position_bias_flip_is_an_order_dependent_tie(tmp_path: Path) -> None:
    result, _ = await run_pairwise(fixed(reply_json("A", "the first one")), tmp_path)
    scores = by_name(result)
    assert scores["preference"].label == "tie" and scores["win_rate"].number == 0.5
    info = meta(scores["win_rate"])
    assert info["order_dependent"] is True and info["verdicts"] == ["A", "A"] and info["outcomes"] == ["win", "loss"]


async def test_pairwise_tie_both_ways(tmp_path: Path) -> None:
    result, _ = await run_pairwise(fixed(reply_json("tie")), tmp_path)
    scores = by_name(result)
    assert scores["preference"].label == "tie" and scores["win_rate"].number == 0.5
    assert meta(scores["preference"])["order_dependent"] is False


async def test_pairwise_unparseable_is_an_evaluator_error_never_a_verdict(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        return reply_json("A", "candidate first") if candidate_is_a(body) else "I like the first one."

    result, _ = await run_pairwise(reply, tmp_path)
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_EVALUATOR
    assert not result.scores
    assert result.reason.endswith("the answer began: 'I like the first one.'")


async def test_pairwise_needs_a_counterpart(tmp_path: Path) -> None:
    ours, _ = pairwise_records()
    async with FakeOpenAI(fixed(reply_json("A"))) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(pairwise_preference, ours, judge, compare_with=[[qa("other", output=BASELINE)]])
        assert server.requests == []
    assert result.outcome == OUTCOME_SKIPPED


# --- prompt-judge --------------------------------------------------------------------------------------


async def test_prompt_judge_renders_the_users_template(tmp_path: Path) -> None:
    path = tmp_path / "concise.txt"
    path.write_text('---system---\nReply {"reasoning": "...", "score": 0 or 1}.\n---user---\n'
                    "Is this answer to {{input}} concise?\n{{output}}\n")
    async with FakeOpenAI(fixed(reply_json(1, "short"))) as server, judge_for(server, tmp_path / "c") as judge:
        [result] = await run(prompt_judge, [qa()], judge, {"template_file": str(path), "scale": "pass-fail"})
        body = server.requests[0]
    assert result.outcome == OUTCOME_SCORED
    assert result.scores[0].number == 1.0 and result.scores[0].explanation == "short"
    assert user_text(body) == "Is this answer to What is the capital of France? concise?\nParis is the capital."
    assert system_text(body) == 'Reply {"reasoning": "...", "score": 0 or 1}.'
    assert meta(result.scores[0])["template"] == str(path)


@pytest.mark.parametrize(("scale", "answer", "number"), [("1-5", 3, 0.5), ("0-1", 0.8, 0.8), ("pass-fail", 0, 0.0)])
async def test_prompt_judge_scales(scale: str, answer: float, number: float, tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("Grade {{output}}")  # no split: one user message
    async with FakeOpenAI(fixed(reply_json(answer))) as server, judge_for(server, tmp_path / "c") as judge:
        [result] = await run(prompt_judge, [qa()], judge, {"template_file": str(path), "scale": scale})
        assert [m["role"] for m in server.requests[0]["messages"]] == ["user"]
    assert result.scores[0].number == pytest.approx(number)


async def test_prompt_judge_skips_records_missing_a_used_field(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("{{output}} vs {{reference}}")
    async with FakeOpenAI(fixed(reply_json(5))) as server, judge_for(server, tmp_path / "c") as judge:
        [result] = await run(prompt_judge, [qa()], judge, {"template_file": str(path)})
    assert result.outcome == OUTCOME_SKIPPED
    assert result.reason.startswith("missing reference: template file") and "{{reference}}" in result.reason


async def test_prompt_judge_bad_template_file_is_bad_input_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.txt"
    path.write_text("{{output}} {{score}}")
    async with FakeOpenAI(fixed(reply_json(5))) as server, judge_for(server, tmp_path / "c") as judge:
        with pytest.raises(BadInputError, match=r"broken\.txt.*\{\{score\}\}"):
            await run(prompt_judge, [qa()], judge, {"template_file": str(path)})
        with pytest.raises(BadInputError, match=r"missing\.txt.*no such file"):
            await run(prompt_judge, [qa()], judge, {"template_file": str(tmp_path / "missing.txt")})
    with pytest.raises(BadInputError, match="template_file"):
        prompt_judge.bind({})
    with pytest.raises(BadInputError, match="scale"):
        prompt_judge.bind({"template_file": "x.txt", "scale": "1-10"})


# --- failures, missing judge, cache, anthropic ---------------------------------------------------------


async def test_provider_500_after_retries_is_an_infra_error_not_a_score(tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(reply_json(5))) as server, judge_for(server, tmp_path, max_retries=2) as judge:
        server.enqueue(("status", 500), ("status", 500), ("status", 500))
        [result] = await run(llm_judge, [qa()], judge)
        assert len(server.requests) == 3
        # nothing was cached: the next run asks again (and now gets an answer)
        [again] = await run(llm_judge, [qa()], judge)
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_INFRA
    assert not result.scores
    assert "500" in result.reason
    assert again.outcome == OUTCOME_SCORED and again.scores[0].number == 1.0


@pytest.mark.parametrize("ev", [llm_judge, reference_correctness, prompt_judge])
async def test_no_judge_is_skipped_judge_pending(ev: Evaluator, tmp_path: Path) -> None:
    params = {"template_file": str(tmp_path / "t.txt")} if ev is prompt_judge else {}
    [result] = await run(ev, [qa(reference="Paris")], None, params)
    assert result.outcome == OUTCOME_SKIPPED and result.reason.startswith("judge_pending")


async def test_no_judge_pairwise_is_skipped_judge_pending() -> None:
    ours, theirs = pairwise_records()
    [result] = await run(pairwise_preference, ours, None, compare_with=[theirs])
    assert result.outcome == OUTCOME_SKIPPED and result.reason.startswith("judge_pending")


async def test_warm_cache_rerun_makes_no_provider_requests(tmp_path: Path) -> None:
    records = [qa("a", reference="Paris"), qa("b", output="Lyon", reference="Paris")]
    ours, theirs = pairwise_records()

    def reply(body: dict[str, Any]) -> str:  # a 1-5 score for llm-judge, a verdict for the pairwise prompts
        return reply_json("A") if CANDIDATE in user_text(body) else reply_json(4)

    async with FakeOpenAI(reply) as server:
        async with judge_for(server, tmp_path) as judge:
            cold = await run(llm_judge, records, judge)
            cold_pairwise = await run(pairwise_preference, ours, judge, compare_with=[theirs])
        assert len(server.requests) == 4
        async with judge_for(server, tmp_path) as judge:  # a new client (a new run), same cache directory
            warm = await run(llm_judge, records, judge)
            warm_pairwise = await run(pairwise_preference, ours, judge, compare_with=[theirs])
            stats = judge.stats()
            assert stats.cache_hits == 4 and stats.calls == 0
        assert len(server.requests) == 4
    for before, after in zip(cold + cold_pairwise, warm + warm_pairwise, strict=True):
        assert after.outcome == OUTCOME_SCORED
        assert [s.number for s in after.scores] == [s.number for s in before.scores]
        assert [s.explanation for s in after.scores] == [s.explanation for s in before.scores]
        assert meta(before.scores[0])["cached"] is False and meta(after.scores[0])["cached"] is True
        assert before.scores[0].cost.input_tokens > 0 and after.scores[0].cost.input_tokens == 0
    # a changed template is a different cache key: it asks again
    mine = Template(name="other-rubric", version=1, kind="rubric", system="S", user="{{rubric}} {{output}}")
    register_template(mine)
    try:
        async with FakeOpenAI(fixed(reply_json(4))) as server:
            async with judge_for(server, tmp_path, template="other-rubric@1") as judge:
                await run(llm_judge, records, judge)
            assert len(server.requests) == 2
    finally:
        unregister_template("other-rubric@1")


async def test_no_cache_always_asks(tmp_path: Path) -> None:
    async with FakeOpenAI(fixed(reply_json(4))) as server:
        for _ in range(2):
            config = JudgeConfig(model=MODEL, base_url=server.base_url)
            async with JudgeClient(config, limiter=RateLimiter(sleep=no_sleep), cache=JudgeCache.disabled(),
                                   sleep=no_sleep, environ={}) as judge:
                [result] = await run(llm_judge, [qa()], judge)
                assert meta(result.scores[0])["cached"] is False
        assert len(server.requests) == 2


async def test_llm_judge_against_anthropic(tmp_path: Path) -> None:
    record = qa(context=["Paris is the capital of France."])
    async with FakeAnthropic(fixed(reply_json(5, "fully supported"))) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(llm_judge, [record], judge, {"rubric": "faithfulness"})
        body = server.requests[0]
    assert result.outcome == OUTCOME_SCORED, result.reason
    score = result.scores[0]
    assert score.number == 1.0 and score.explanation == "fully supported"
    assert score.cost.output_tokens == len(reply_json(5, "fully supported").split())
    assert meta(score)["judge_model"] == MODEL
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert '"score"' in body["system"]
    assert "Paris is the capital of France." in user_text(body)
