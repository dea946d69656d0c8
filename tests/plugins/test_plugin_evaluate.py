"""A plugin in its own virtualenv, run through embedded evaluate() like any evaluator."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import evalsi
from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, Pack, Registry, evaluator
from evalsi.plugin.v1alpha1.plugin_pb2 import ReduceRequest
from evalsi.plugins import PluginSet, load_plugins
from evalsi.plugins._calls import MappedDatasets, reduce
from evalsi.v1alpha1.record_pb2 import Content, Record
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_EVALUATOR, OUTCOME_ERROR, OUTCOME_SCORED, OUTCOME_SKIPPED

ROWS = [{"id": f"r{i}", "output": "it is ok" if i % 2 else "nope", "reference": "Paris"} for i in range(10)]


def test_plugin_evaluators_are_registered_with_their_manifest(plugins: tuple[Registry, PluginSet]) -> None:
    registry, _ = plugins
    ev = registry.resolve("acme/has-word")
    assert (ev.ref, ev.pack, ev.scope, ev.requires) == ("acme/has-word@1.0.0", "acme/checks", "record", ("output",))
    assert [(p.name, p.default, p.required) for p in ev.params] == [("word", "ok", False)]
    judged = registry.resolve("acme/judged")
    assert judged.pool == "judge" and [o.name for o in judged.outputs] == ["grade"]
    assert judged.outputs[0].min == 1 and judged.outputs[0].max == 5
    assert registry.resolve("acme/mean-length").scope == "dataset"


def test_evaluate_scores_in_the_plugin_venv(plugins: tuple[Registry, PluginSet], venv_cache: Path) -> None:
    registry, started = plugins
    with evalsi.evaluate(ROWS, ["acme/has-word"], registry=registry) as results:
        summary = results.metric("has-word")
        assert summary.n == 10 and summary.mean == 0.5
        where = {r.scores[0].explanation for r in results.results}
    prefixes = {w.split("|")[0] for w in where}
    pids = {int(w.split("|")[1]) for w in where}
    # Evaluated by the plugin's process, running its own venv's interpreter, not this one.
    assert pids == {started.hosts[0].pid} and os.getpid() not in pids
    assert len(prefixes) == 1 and prefixes != {sys.prefix}
    assert Path(prefixes.pop()).parent == venv_cache


def test_params_skips_and_errors_cross_the_process(plugins: tuple[Registry, PluginSet]) -> None:
    registry, _ = plugins
    rows = [{"id": "a", "output": "boom"}, {"id": "b", "output": "skip"}, {"id": "c", "output": "fine"},
            {"id": "d"}]
    with evalsi.evaluate(rows, ["acme/boom", {"ref": "acme/has-word", "params": {"word": "fine"}}],
                         registry=registry) as results:
        by = {(r.evaluator, r.record_id): r for r in results.results}
    assert by["boom", "a"].outcome == OUTCOME_ERROR and by["boom", "a"].error_kind == ERROR_KIND_EVALUATOR
    assert "boom in the plugin" in by["boom", "a"].reason
    assert by["boom", "b"].outcome == OUTCOME_SKIPPED and by["boom", "b"].reason == "the plugin skipped it"
    assert by["boom", "c"].outcome == OUTCOME_SCORED
    # The host skips a record missing a requirement before sending it.
    assert by["boom", "d"].outcome == OUTCOME_SKIPPED and by["boom", "d"].reason == "missing output"
    assert by["has-word", "c"].scores[0].passed and not by["has-word", "a"].scores[0].passed


def test_a_param_the_plugins_check_refuses_stops_the_evaluation_before_any_record_is_sent(
        plugins: tuple[Registry, PluginSet], tmp_path: Path) -> None:
    registry, started = plugins
    (host,) = started.hosts
    asked: list[str] = []
    real = host._with_retry

    def counted(call, what):
        asked.append(what)
        return real(call, what)

    host._with_retry = counted  # type: ignore[method-assign]
    log = tmp_path / "evaluated.log"
    rows = [{"id": "a", "output": "long enough output"}, {"id": "b", "output": "short"}]
    for _ in range(2):  # the second binding of the same params is answered from the first check
        with pytest.raises(BadInputError, match=r"plugin acme/checks: evaluator acme/long-enough: share 5.0 is "
                                                r"outside 0\.\.1"):
            evalsi.evaluate(rows, [{"ref": "acme/long-enough", "params": {"share": 5, "log": str(log)}}],
                            registry=registry)
    assert asked == ["CheckParams of acme/long-enough@1.0.0"]
    assert not log.exists()  # refused at bind: the plugin evaluated nothing
    with evalsi.evaluate(rows, [{"ref": "acme/long-enough", "params": {"share": 0.8, "log": str(log)}}],
                         registry=registry) as results:
        assert [r.scores[0].passed for r in results.results] == [True, False]
    assert sorted(log.read_text().split()) == ["a", "b"]


def test_dataset_scope_reduces_in_the_plugin(plugins: tuple[Registry, PluginSet]) -> None:
    registry, _ = plugins
    rows = [{"id": "a", "output": "xx"}, {"id": "b", "output": "xxxx"}, {"id": "c"}]
    with evalsi.evaluate(rows, ["acme/mean-length"], registry=registry, bootstrap_resamples=50) as results:
        [result] = results.results
    assert result.outcome == OUTCOME_SCORED and result.scores[0].number == 3.0
    assert result.scores[0].metadata["n"].number_value == 2 and result.scores[0].metadata["skipped"].number_value == 1
    assert result.scores[0].metadata["ci_low"].number_value <= 3.0 <= result.scores[0].metadata["ci_high"].number_value


def test_judge_calls_route_through_the_runs_judge(plugins: tuple[Registry, PluginSet], judge_server) -> None:
    registry, _ = plugins
    rows = [{"id": "p", "input": "Capital of France?", "output": "Paris", "reference": "Paris"},
            {"id": "l", "input": "Capital of France?", "output": "Lyon", "reference": "Paris"}]
    judge = {"model": "judge-1", "base_url": judge_server.base_url}
    with evalsi.evaluate(rows, ["acme/judged"], registry=registry, judge=judge) as results:
        grades = {r.record_id: r.scores[0].number for r in results.results}
        models = {r.scores[0].explanation for r in results.results}
    assert grades == {"p": 5.0, "l": 1.0}
    assert models == {"judge-1"}  # the model the host's judge named
    assert len(judge_server.requests) == 2  # the plugin has no key: both calls went through the host's judge
    with evalsi.evaluate(rows, ["acme/judged"], registry=registry, judge=judge) as again:
        assert {r.record_id: r.scores[0].number for r in again.results} == grades
    assert len(judge_server.requests) == 2  # and through its cache


def test_a_judge_evaluator_without_a_judge_is_pending(plugins: tuple[Registry, PluginSet]) -> None:
    registry, _ = plugins
    with evalsi.evaluate([{"id": "p", "output": "Paris", "reference": "Paris"}], ["acme/judged"],
                         registry=registry) as results:
        [result] = results.results
    assert result.outcome == OUTCOME_SKIPPED and result.reason.startswith("judge_pending")


def test_the_plugin_sees_no_credentials(plugins_dir: Path, venv_cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("EVALSI_METADATA_URL", "postgresql://u:pw@db/evalsi")
    registry = Registry.from_entry_points()
    with (load_plugins(registry, plugins_dir, cache_dir=venv_cache),
          evalsi.evaluate([{"id": "a"}], ["acme/env-keys"], registry=registry) as results):
        [result] = results.results
    keys = set(result.scores[0].label.split(","))
    assert "OPENAI_API_KEY" not in keys and "EVALSI_METADATA_URL" not in keys
    assert keys <= {"PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONUNBUFFERED", "LC_CTYPE"}


def _length(record: Record) -> int:
    if not record.output.text:
        raise SkipRecord("empty output")
    return len(record.output.text)


@evaluator("local/mean-length", version="1.0.0", scope="dataset", requires=["output"], mapper=_length,
           outputs=[Output("mean-length", type="number", min=0)])
def local_mean_length(values: list[int]) -> float:
    return sum(values) / len(values)


def test_a_plugins_bootstrap_matches_the_same_evaluator_in_process(plugins: tuple[Registry, PluginSet]) -> None:
    registry, _ = plugins
    registry.add_pack(Pack(name="local-test", evaluators=(local_mean_length,)))
    rows = [{"id": f"r{i}", "output": "x" * (i % 9 + 1)} for i in range(40)]
    with evalsi.evaluate(rows, ["acme/mean-length", {"ref": "local/mean-length", "alias": "local"}],
                         registry=registry, bootstrap_resamples=300, seed=7) as results:
        plugin, local = (next(r for r in results.results if r.evaluator == name) for name in ("mean-length", "local"))
    # Same value and the same seeded resamples: the plugin reduced each resample by the positions it was sent.
    assert plugin.scores[0].number == local.scores[0].number
    for key in ("ci_low", "ci_high", "n", "resamples"):
        assert plugin.scores[0].metadata[key] == local.scores[0].metadata[key], key


def test_reduce_keeps_a_few_datasets_and_asks_for_a_lost_one() -> None:
    evaluators = {local_mean_length.ref: local_mean_length}
    datasets = MappedDatasets(keep=1)
    records = [Record(id=str(i), output=Content(text="x" * n)) for i, n in enumerate([2, 4, 0, 6])]
    first = reduce(evaluators, ReduceRequest(evaluator=local_mean_length.ref, records=records, dataset="d1"), datasets)
    assert [s.number for s in first.scores] == [4.0]  # the empty output skipped by its mapper
    resample = reduce(evaluators, ReduceRequest(evaluator=local_mean_length.ref, dataset="d1", indices=[0, 0, 2, 3]),
                      datasets)
    assert [s.number for s in resample.scores] == [pytest.approx(10 / 3)]  # positions 0, 0 and 3; 2 was skipped
    reduce(evaluators, ReduceRequest(evaluator=local_mean_length.ref, records=records, dataset="d2"), datasets)
    lost = reduce(evaluators, ReduceRequest(evaluator=local_mean_length.ref, dataset="d1", indices=[0]), datasets)
    assert lost.unknown_dataset and not lost.scores
    past = reduce(evaluators, ReduceRequest(evaluator=local_mean_length.ref, dataset="d2", indices=[9]), datasets)
    assert past.error == "BadInputError: index 9 is past the dataset's 4 records"
