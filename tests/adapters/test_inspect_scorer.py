"""Evals.si evaluators as Inspect scorers (contract tests with inspect_ai installed, offline): an Inspect eval scored
by ``evalsi_scorer`` gives, sample for sample, what ``evaluate()`` gives on the records imported from its own log;
a judge evaluator calls the judge given, never Inspect's model; skips are no score, errors errored samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_tasks import ANSWERS_A, run_task, text_answers

import evalsi
from evalsi import Output, Registry, Score, evaluator
from evalsi.adapters.inspect import evalsi_scorer, log_rows
from evalsi.errors import BadInputError


def _scores(log: EvalLog, scorer: str) -> dict[tuple[str, int], Any]:
    assert log.samples is not None
    return {(str(s.id), s.epoch - 1): (s.scores or {}).get(scorer) for s in log.samples}


def test_an_inspect_eval_scored_by_evalsi_gives_what_evaluate_gives_on_its_imported_records(tmp_path: Path) -> None:
    scorers = [evalsi_scorer("builtin/exact-match"), evalsi_scorer("token-f1")]
    log = run_task(tmp_path, text_answers(ANSWERS_A), scorers=scorers)
    assert log.status == "success"
    rows = list(log_rows(log.location))
    results = evalsi.evaluate(rows, ["exact-match", "token-f1"])
    ours = {(r.record_id, r.trial, r.evaluator): r for r in results.results}
    exact, f1 = _scores(log, "exact-match"), _scores(log, "token-f1")
    assert len(exact) == 9
    for key, score in exact.items():
        verdict = ours[(*key, "exact-match")].scores[0]
        assert score.value == ("C" if verdict.passed else "I"), key
        assert (score.explanation or "") == verdict.explanation
        assert score.metadata["evalsi.evaluator"] == "builtin/exact-match@1.0.0"
        assert f1[key].value == pytest.approx(ours[(*key, "token-f1")].scores[0].number)
    # "Paris." is Inspect's exact() match but not ours: the verdict is our evaluator's, not a copy of Inspect's.
    assert log.samples is not None
    paris_dot = next(s for s in log.samples if s.output.completion == "Paris.")
    assert paris_dot.scores is not None and paris_dot.scores["exact-match"].value == "I"
    # Inspect's own metrics over our values: accuracy of the pass/fail, mean of the number.
    assert log.results is not None
    metrics = {s.name: s.metrics for s in log.results.scores}
    assert set(metrics["exact-match"]) == {"accuracy", "stderr"} and set(metrics["token-f1"]) == {"mean", "stderr"}
    assert metrics["exact-match"]["accuracy"].value == pytest.approx(results.metric("exact-match").mean)


def test_a_judge_evaluator_calls_the_judge_given_and_never_inspects_model(judge_server: Any, tmp_path: Path) -> None:
    generated: list[str] = []

    def answer(messages: Any, call: int) -> Any:
        generated.append(messages[-1].text)
        return text_answers({"Capital of France?": ["Paris", "Lyon", "Paris"]})(messages, call)

    judge = {"provider": "openai", "model": "judge-1", "base_url": judge_server.base_url}
    samples = [Sample(input="Capital of France?", target="Paris", id="fr")]
    log = run_task(tmp_path, answer, samples=samples, scorers=[evalsi_scorer("llm-judge", judge=judge, cache=False)])
    assert log.status == "success", log.error
    values = sorted(score.value for score in _scores(log, "llm-judge").values())
    # The conftest judge grades 5/5 (1.0) unless the output is Lyon (1/5, 0.0).
    assert values == [0.0, 1.0, 1.0]
    assert len(judge_server.requests) == 3  # one judge call a sample and epoch, to the judge we gave
    assert all(body["model"] == "judge-1" for body in judge_server.requests)
    assert len(generated) == 3  # Inspect's model generated the answers and was asked nothing else


def test_a_record_the_evaluator_cannot_grade_is_left_unscored_not_failed(tmp_path: Path) -> None:
    samples = [Sample(input="Capital of France?", target="", id="no-target"),
               Sample(input="2+2?", target="4", id="math")]
    log = run_task(tmp_path, text_answers({"Capital of France?": ["Paris"], "2+2?": ["4"]}), samples=samples,
                   epochs=1, scorers=[evalsi_scorer("exact-match")])
    scores = _scores(log, "exact-match")
    assert scores[("no-target", 0)] is None and scores[("math", 0)].value == "C"
    assert log.results is not None
    (summary,) = log.results.scores
    assert summary.scored_samples == 1 and summary.metrics["accuracy"].value == 1.0


def test_an_evaluator_error_errors_the_sample_and_several_outputs_score_as_a_dict(tmp_path: Path) -> None:
    @evaluator("test/boom", requires=["output"])
    def boom(record: Any) -> bool:
        raise ValueError("evaluator bug")

    @evaluator("test/length", requires=["output"],
               outputs=[Output("chars", "number", min=0), Output("short")])
    def length(record: Any) -> dict[str, Any]:
        text = record.output.text
        return {"chars": Score(number=len(text), explanation=f"{len(text)} characters"), "short": len(text) < 5}

    registry = Registry.from_entry_points()
    registry.add(boom)
    registry.add(length)
    samples = [Sample(input="Capital of France?", target="Paris", id="fr")]
    answers = text_answers({"Capital of France?": ["Paris"]})
    log = run_task(tmp_path / "length", answers, samples=samples, epochs=1,
                   scorers=[evalsi_scorer("test/length", registry=registry)])
    (score,) = _scores(log, "length").values()
    assert score.value == {"chars": 5.0, "short": False} and score.explanation == "5 characters"
    assert log.results is not None
    assert {s.name for s in log.results.scores} == {"chars", "short"}  # Inspect's metrics per output

    log = run_task(tmp_path / "boom", answers, samples=samples, epochs=1, fail_on_error=False,
                   scorers=[evalsi_scorer("test/boom", registry=registry)])
    assert log.samples is not None
    (sample,) = log.samples
    assert sample.error is not None and "did not grade sample fr" in sample.error.message
    assert "evaluator bug" in sample.error.message


def test_params_are_checked_when_the_scorer_is_made() -> None:
    with pytest.raises(BadInputError, match="pattern"):
        evalsi_scorer("regex-match")  # its pattern is required
    with pytest.raises(BadInputError, match="colour"):
        evalsi_scorer("exact-match", params={"colour": "red"})
    with pytest.raises(BadInputError):
        evalsi_scorer("no-such-evaluator")
    with pytest.raises(BadInputError, match="needs a judge; pass judge="):
        evalsi_scorer("llm-judge")
