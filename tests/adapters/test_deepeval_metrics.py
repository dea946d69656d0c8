"""DeepEval's metrics as Evals.si evaluators, served by the adapter's plugin from DeepEval's own virtualenv (built
once per session): graded through ``evalsi.evaluate`` with a registry from ``load_plugins``, their model calls
answered by the run's judge (a local OpenAI-compatible server with scripted answers), they give exactly what
DeepEval's own ``metric.measure()`` gives with DeepEval's own model against the same server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deepeval_fixtures.venv import adapter_python, plugins_dir, run_in_venv, scripted_reply

import evalsi
from evalsi.adapters.deepeval import PLUGIN_DIR
from evalsi.evaluators import Registry
from evalsi.plugins import load_plugins
from evalsi.plugins.loader import PluginSet
from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.score_pb2 import ErrorKind, Outcome

QUESTION = "What is the capital of France?"
ROWS = [
    {"id": "right", "input": QUESTION, "output": "Paris is the capital of France.", "reference": "Paris",
     "context": ["Paris is the capital of France.", "France is in Europe."]},
    {"id": "wrong", "input": QUESTION, "output": "Lyon is the capital of France.", "reference": "Paris",
     "context": ["Lyon is a large city in France.", "France is in Europe."]},
]
CRITERIA = "Does the answer name the capital correctly?"
# Evaluator -> DeepEval's class and the keyword arguments the reference measures it with.
METRICS: dict[str, tuple[str, dict[str, Any]]] = {
    "answer-relevancy": ("AnswerRelevancyMetric", {}),
    "faithfulness": ("FaithfulnessMetric", {}),
    "contextual-precision": ("ContextualPrecisionMetric", {}),
    "contextual-recall": ("ContextualRecallMetric", {}),
    "contextual-relevancy": ("ContextualRelevancyMetric", {}),
    "hallucination": ("HallucinationMetric", {}),
    "bias": ("BiasMetric", {}),
    "toxicity": ("ToxicityMetric", {}),
    "g-eval": ("GEval", {"name": "G-Eval", "criteria": CRITERIA,
                         "evaluation_params": ["input", "actual_output", "expected_output", "retrieval_context"]}),
}
reply = scripted_reply()
EVALUATORS = [{"ref": f"deepeval/{slug}", "params": {"criteria": CRITERIA} if slug == "g-eval" else {}}
              for slug in METRICS]


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return adapter_python(tmp_path_factory)


@pytest.fixture(scope="module")
def plugin(python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Registry, PluginSet]]:
    registry = Registry.from_entry_points()
    directory = plugins_dir(tmp_path_factory.mktemp("deepeval-plugins"))
    with load_plugins(registry, directory, cache_dir=python.parents[2]) as started:
        yield registry, started


def judge(server: FakeOpenAI) -> dict[str, Any]:
    return {"provider": "openai", "model": "scripted-judge", "base_url": server.base_url, "max_retries": 0}


def test_metrics_equal_deepevals_own_measure_and_cache_their_judge_calls(
        plugin: tuple[Registry, PluginSet], python: Path, tmp_path: Path) -> None:
    registry, started = plugin
    assert registry.resolve("deepeval/faithfulness").pack == "deepeval/metrics"
    assert started.hosts[0].manifest.source.parent.resolve() == PLUGIN_DIR  # served through the docs' link
    with ThreadedProvider(reply) as server:
        results = evalsi.evaluate(ROWS, EVALUATORS, registry=registry, judge=judge(server))
        calls = len(server.requests)
        again = evalsi.evaluate(ROWS, EVALUATORS, registry=registry, judge=judge(server))
        assert len(server.requests) == calls  # every judge call the second time came from the judge cache
        jobs = [{"cls": cls, "kwargs": kwargs, "case": _case(row)} for row in ROWS for cls, kwargs in METRICS.values()]
        measured = json.loads(run_in_venv(python, "reference.py", {"base_url": server.base_url, "jobs": jobs},
                                          tmp_path))
    assert measured["blocked"] == []  # DeepEval's own run reached nothing beyond this machine
    reference = measured["scores"]
    # Three to four calls a metric and record (items, verdicts, reason), some shared: answered by the local server.
    assert 40 <= calls <= 80, calls
    ours = {(r.record_id, r.evaluator): r for r in results.results}
    assert len(ours) == len(ROWS) * len(METRICS)
    for (row, slug), expected in zip([(row, s) for row in ROWS for s in METRICS], reference, strict=True):
        result = ours[(row["id"], slug)]
        assert result.outcome == Outcome.OUTCOME_SCORED, (slug, result.reason)
        score, passed = result.scores
        assert (score.number, passed.passed) == (expected["score"], expected["success"]), (row["id"], slug)
        assert score.explanation == expected["reason"], (row["id"], slug)
    for slug in METRICS:  # the scripted judge finds fault with the wrong answer, and every metric sees it
        assert ours[("right", slug)].scores[0].number > ours[("wrong", slug)].scores[0].number, slug
    assert ours[("right", "g-eval")].scores[0].number == pytest.approx(0.8)
    spent = sum(r.scores[0].cost.total_tokens for r in results.results)
    assert spent > 0 and all(r.scores[0].cost.total_tokens == 0 for r in again.results)  # cache hits spend none
    assert [(r.record_id, r.evaluator, [_without_cost(s) for s in r.scores]) for r in again.results] == [
        (r.record_id, r.evaluator, [_without_cost(s) for s in r.scores]) for r in results.results]
    assert started.hosts[0].restarts == 0


def test_an_unreadable_answer_is_the_evaluators_error_and_params_are_checked(
        plugin: tuple[Registry, PluginSet]) -> None:
    registry, _ = plugin
    with ThreadedProvider(lambda body: "The statements are fine, I think.") as server:
        results = evalsi.evaluate(ROWS[:1], ["deepeval/answer-relevancy"], registry=registry, judge=judge(server))
        no_judge = evalsi.evaluate(ROWS[:1], ["deepeval/bias"], registry=registry)
    (result,) = results.results
    assert result.outcome == Outcome.OUTCOME_ERROR and result.error_kind == ErrorKind.ERROR_KIND_EVALUATOR
    assert "not the JSON DeepEval's Statements asks for" in result.reason and not result.scores
    assert no_judge.results[0].outcome == Outcome.OUTCOME_SKIPPED and "judge_pending" in no_judge.results[0].reason
    # A param's value is checked by the plugin's own check when the evaluator is bound (the protocol's CheckParams):
    # the evaluation stops naming it, before any record or judge call.
    with ThreadedProvider(reply) as server:
        with pytest.raises(evalsi.BadInputError, match=r"param threshold: 2.0 is outside \[0, 1\]"):
            evalsi.evaluate(ROWS[:1], [{"ref": "deepeval/bias", "params": {"threshold": 2.0}}], registry=registry,
                            judge=judge(server))
        assert not server.requests
    with pytest.raises(evalsi.BadInputError, match="criteria"):
        evalsi.evaluate(ROWS[:1], ["deepeval/g-eval"], registry=registry)


def _case(row: dict[str, Any]) -> dict[str, Any]:
    return {"input": row["input"], "actual_output": row["output"], "expected_output": row["reference"],
            "retrieval_context": row["context"], "context": row["context"]}


def _without_cost(score: Any) -> Any:
    copy = type(score)()
    copy.CopyFrom(score)
    copy.ClearField("cost")
    return copy

