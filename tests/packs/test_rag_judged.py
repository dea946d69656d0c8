"""The rag pack's judged evaluators against a local OpenAI-compatible judge with scripted answers: the verdicts
parsed, the score from the RAGAS formula, the cost of every call, the cache, malformed answers, and skips."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi.evaluators import EvalContext, Evaluator
from evalsi.evaluators.runner import run_evaluators
from evalsi.judges import JudgeCache, JudgeClient, JudgeConfig, RateLimiter
from evalsi.packs.rag.judged import answer_relevance, context_precision, context_recall, faithfulness, template
from evalsi.records import from_value, make_record
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
)

MODEL = "judge-model-1"
CONTEXT = ["Albert Einstein (born 14 March 1879) was a German-born theoretical physicist.",
           "The Brandenburg Gate is located in Berlin."]


async def no_sleep(_seconds: float) -> None:
    return None


def system(body: dict[str, Any]) -> str:
    return next((m["content"] for m in body["messages"] if m["role"] == "system"), "")


def user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def scripted(claims: list[str], verdicts: list[int], *, chunks: dict[str, int] | None = None,
             statements: list[tuple[str, Any]] | None = None) -> Callable[[dict[str, Any]], str]:
    """Answers by prompt: the claim list, the verdicts, per-chunk usefulness (by a word of the chunk), the
    statements (relevance or attribution)."""
    def answer(body: dict[str, Any]) -> str:
        head = system(body)
        if "break an answer into claims" in head:
            return "Here you go:\n```json\n" + json.dumps({"claims": claims}) + "\n```"
        if "check claims against a context" in head:
            return json.dumps({"verdicts": [{"claim": c, "reason": "r", "verdict": v}
                                            for c, v in zip(claims, verdicts, strict=True)]})
        if "retrieved passage" in head:
            passage = user(body).split("<context>")[1]
            useful = next(v for word, v in (chunks or {}).items() if word in passage)
            return json.dumps({"reasoning": f"useful={useful}", "score": useful})
        if "stays relevant" in head:
            return json.dumps({"statements": [{"statement": s, "verdict": v, "reason": "r"}
                                              for s, v in statements or []]})
        if "reference answer could have been written" in head:
            return json.dumps({"classifications": [{"statement": s, "reason": "r", "attributed": v}
                                                   for s, v in statements or []]})
        raise AssertionError(f"unexpected prompt: {head[:80]}")
    return answer


@asynccontextmanager
async def judge_for(server: FakeOpenAI, cache_dir: Path) -> AsyncIterator[JudgeClient]:
    config = JudgeConfig(model=MODEL, provider="openai", base_url=server.base_url, max_retries=1)
    async with JudgeClient(config, limiter=RateLimiter(sleep=no_sleep), cache=JudgeCache(cache_dir), sleep=no_sleep,
                           environ={}) as client:
        yield client


async def run(ev: Evaluator, records: list[Record], judge: JudgeClient | None) -> list[EvaluationResult]:
    return await run_evaluators(records, [ev.bind({})], lambda _b: EvalContext(judge=judge))


def meta(result: EvaluationResult) -> dict[str, Any]:
    return {k: from_value(v) for k, v in result.scores[0].metadata.items()}


def einstein(**fields: Any) -> Record:
    values = {"input": "Where and when was Einstein born?", "context": CONTEXT,
              "output": "Einstein was born in Germany on 20th March 1879."}
    values.update(fields)
    return make_record(id="r1", **{k: v for k, v in values.items() if v is not None})


async def test_faithfulness_lists_claims_then_verdicts_them(tmp_path: Path) -> None:
    claims = ["Einstein was born in Germany.", "Einstein was born on 20th March 1879."]
    async with FakeOpenAI(scripted(claims, [1, 0])) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(faithfulness, [einstein()], judge)
        listing, verdicting = server.requests
    assert result.outcome == OUTCOME_SCORED, result.reason
    score = result.scores[0]
    assert score.number == 0.5  # RAGAS docs' worked example
    assert score.explanation == ("1 of 2 claims supported by the context; unsupported: "
                                 "'Einstein was born on 20th March 1879.'")
    assert "1. Einstein was born in Germany.\n2. Einstein was born on 20th March 1879." in user(verdicting)
    assert "[1] Albert Einstein" in user(verdicting) and "20th March 1879" in user(listing)
    data = meta(result)
    assert data["claims"] == [{"claim": claims[0], "verdict": 1}, {"claim": claims[1], "verdict": 0}]
    assert data["templates"] == ["claims@1", "claim-verdicts@1"] and data["cached"] is False
    assert data["template_hash"] == template("claim-verdicts").hash
    # the cost is both calls' tokens
    assert score.cost.input_tokens > len(user(verdicting).split()) and score.cost.output_tokens > 0


async def test_faithfulness_skips_claimless_outputs_and_errors_on_mismatched_verdicts(tmp_path: Path) -> None:
    async with FakeOpenAI(scripted([], [])) as server, judge_for(server, tmp_path) as judge:
        [none] = await run(faithfulness, [einstein(output="Hello!")], judge)
    assert none.outcome == OUTCOME_SKIPPED and "no claims" in none.reason

    def short(body: dict[str, Any]) -> str:
        if "break an answer into claims" in system(body):
            return json.dumps({"claims": ["a", "b"]})
        return json.dumps({"verdicts": [{"claim": "a", "verdict": 1}]})  # one verdict for two claims

    async with FakeOpenAI(short) as server, judge_for(server, tmp_path / "b") as judge:
        [bad] = await run(faithfulness, [einstein()], judge)
    assert bad.outcome == OUTCOME_ERROR and bad.error_kind == ERROR_KIND_EVALUATOR
    assert "1 verdicts for 2 claims" in bad.reason and not bad.scores


@pytest.mark.parametrize("text", ["The claims are fine.", '{"claims": "one"}', '{"claims": [1, 2]}'])
async def test_malformed_claims_answer_is_an_evaluator_error(text: str, tmp_path: Path) -> None:
    async with FakeOpenAI(lambda _b: text) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(faithfulness, [einstein()], judge)
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_EVALUATOR


async def test_faithfulness_warm_cache_asks_nothing(tmp_path: Path) -> None:
    answer = scripted(["Einstein was born in Germany."], [1])
    async with FakeOpenAI(answer) as server:
        async with judge_for(server, tmp_path) as judge:
            [cold] = await run(faithfulness, [einstein()], judge)
        async with judge_for(server, tmp_path) as judge:
            [warm] = await run(faithfulness, [einstein()], judge)
        assert len(server.requests) == 2
    assert cold.scores[0].number == warm.scores[0].number == 1.0
    assert meta(warm)["cached"] is True and warm.scores[0].cost.total_tokens == 0


async def test_context_precision_average_precision_over_ranks(tmp_path: Path) -> None:
    record = einstein(context=["Berlin has a gate.", "Einstein was born in Ulm.", "Paris has a tower."],
                      reference="Einstein was born in Ulm, Germany, on 14 March 1879.")
    answer = scripted([], [], chunks={"Berlin": 0, "Ulm": 1, "Paris": 0})
    async with FakeOpenAI(answer) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(context_precision, [record], judge)
        prompts = [user(b) for b in server.requests]
    assert len(prompts) == 3  # one call per chunk
    assert result.scores[0].number == pytest.approx(0.5 / (1 + 1e-10))  # useful chunk at rank 2
    assert meta(result)["verdicts"] == [0, 1, 0] and meta(result)["against"] == "reference"
    assert all("on 14 March 1879" in p for p in prompts)  # judged against the reference
    assert result.scores[0].explanation == "1 of 3 chunks useful (ranks 2), judged against the reference"
    no_reference = einstein(context=["Einstein was born in Ulm."])
    async with FakeOpenAI(scripted([], [], chunks={"Ulm": 1})) as server, judge_for(server, tmp_path) as judge:
        [by_output] = await run(context_precision, [no_reference], judge)
        assert "20th March 1879" in user(server.requests[0])
    assert meta(by_output)["against"] == "output" and by_output.scores[0].number == pytest.approx(1 / (1 + 1e-10))


async def test_context_recall_and_answer_relevance(tmp_path: Path) -> None:
    record = einstein(reference="France is in Western Europe and its capital is Paris.")
    recall = scripted([], [], statements=[("France is in Western Europe.", 1), ("Its capital is Paris.", "no")])
    async with FakeOpenAI(recall) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(context_recall, [record], judge)
    assert result.scores[0].number == 0.5
    assert "not found: 'Its capital is Paris.'" in result.scores[0].explanation
    relevance = scripted([], [], statements=[("Einstein was born in Germany.", "yes"), ("He liked violins.", "no"),
                                             ("Germany is in Europe.", "idk")])
    async with FakeOpenAI(relevance) as server, judge_for(server, tmp_path / "b") as judge:
        [relevant] = await run(answer_relevance, [einstein()], judge)
    assert relevant.scores[0].number == pytest.approx(2 / 3)
    assert meta(relevant)["statements"][1] == {"statement": "He liked violins.", "verdict": "no"}
    bad = scripted([], [], statements=[("x", "maybe")])
    async with FakeOpenAI(bad) as server, judge_for(server, tmp_path / "c") as judge:
        [error] = await run(answer_relevance, [einstein()], judge)
    assert error.outcome == OUTCOME_ERROR and "verdict must be one of yes, no, idk" in error.reason


@pytest.mark.parametrize(("ev", "missing"), [(faithfulness, "context"), (context_recall, "reference"),
                                             (context_precision, "context")])
async def test_records_lacking_what_is_needed_are_skipped(ev: Evaluator, missing: str, tmp_path: Path) -> None:
    async with FakeOpenAI(scripted([], [])) as server, judge_for(server, tmp_path) as judge:
        [result] = await run(ev, [einstein(context=None)], judge)
        assert not server.requests
    assert result.outcome == OUTCOME_SKIPPED and f"missing {missing}" in result.reason


async def test_no_judge_is_judge_pending() -> None:
    for ev in (faithfulness, answer_relevance, context_precision):
        [result] = await run(ev, [einstein()], None)
        assert result.outcome == OUTCOME_SKIPPED and result.reason.startswith("judge_pending")


async def test_embedded_evaluate_with_a_judge(tmp_path: Path) -> None:
    """Through the public API, the judge given as ``judge=``: the table's mean is the formula's."""
    answer = scripted(["Einstein was born in Germany.", "Einstein was born on 20th March 1879."], [1, 0])
    rows = [{"id": "a", "input": "Where and when was Einstein born?",
             "output": "Einstein was born in Germany on 20th March 1879.", "context": CONTEXT}]
    async with FakeOpenAI(answer) as server:
        results = await evalsi.evaluate_async(
            rows, ["builtin/faithfulness"], judge={"provider": "openai", "model": MODEL, "base_url": server.base_url},
            cache_dir=tmp_path)
    assert results.summaries["faithfulness"].mean == 0.5
    assert results.summaries["faithfulness"].n == 1
