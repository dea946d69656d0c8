"""The RAGAS adapter's contract: RAGAS 0.4.3's metrics served as a plugin from their own venv (built once per
session, offline after the build), graded through ``evalsi.evaluate`` with the run's judge a local
OpenAI-compatible server answering RAGAS's prompts by script (examples/ragas/offline_judge.py). Each score must
equal what RAGAS's own ``single_turn_ascore`` gives with its own LLM wrapper against the same server, in the same
venv (ragas_fixtures/ragas_reference.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import evalsi
from evalsi.adapters.ragas import METRICS, PLUGIN_DIR
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.plugins import PluginSet, load_plugins
from evalsi.plugins.manifest import MANIFEST_NAME, read_manifest
from evalsi.plugins.venv import ensure_venv, venv_python
from evalsi.testing import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_EVALUATOR, OUTCOME_ERROR, OUTCOME_SCORED, OUTCOME_SKIPPED

FIXTURES = Path(__file__).parent / "ragas_fixtures"
sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "ragas"))
import offline_judge  # noqa: E402

MODEL = "ragas-judge-1"
CONTEXTS = ["The Eiffel Tower is located in Paris, France. It was completed in 1889.",
            "Berlin is the capital of Germany."]
ROWS = [
    {"id": "good", "input": "Where is the Eiffel Tower?", "output": "The Eiffel Tower is in Paris.",
     "context": CONTEXTS, "reference": "The Eiffel Tower is in Paris, France."},
    {"id": "mixed", "input": "Where is the Eiffel Tower and how tall is it?",
     "output": "The Eiffel Tower is in Paris. It is 330 m tall. It was completed in 1889.",
     "context": CONTEXTS[::-1], "reference": "The Eiffel Tower is in Paris. It was completed in 1889."},
    {"id": "wrong", "input": "Where is the Eiffel Tower?", "output": "The Eiffel Tower is in Berlin, Germany.",
     "context": CONTEXTS, "reference": "The Eiffel Tower is in Paris, France."},
]
REFS = [f"ragas/{name}" for name in METRICS]


@pytest.fixture(scope="session")
def ragas_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A plugins directory holding a copy of the shipped plugin (building its wheel writes beside its sources),
    and the venv cache it was built into: once per session, under the session's base temp."""
    root = tmp_path_factory.mktemp("ragas")
    plugins = root / "plugins"
    shutil.copytree(PLUGIN_DIR, plugins / "ragas", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    cache = root / "venvs"
    ensure_venv(read_manifest(plugins / "ragas" / MANIFEST_NAME), cache)
    return plugins, cache


@pytest.fixture(scope="module")
def ragas_judge() -> Iterator[FakeOpenAI]:
    with ThreadedProvider(offline_judge.reply) as server:
        yield server


@pytest.fixture(scope="module")
def ragas_registry(ragas_venv: tuple[Path, Path]) -> Iterator[tuple[Registry, PluginSet]]:
    plugins, cache = ragas_venv
    registry = Registry.from_entry_points()
    with load_plugins(registry, plugins, cache_dir=cache) as started:
        yield registry, started


def _python(ragas_venv: tuple[Path, Path]) -> Path:
    _, cache = ragas_venv
    [venv] = [path for path in cache.iterdir() if path.name.startswith("ragas--metrics-")]
    return venv_python(venv)


def test_scores_equal_ragas_own_and_judge_calls_are_cached(
        ragas_registry: tuple[Registry, PluginSet], ragas_venv: tuple[Path, Path], ragas_judge: FakeOpenAI,
        tmp_path: Path) -> None:
    registry, _ = ragas_registry
    assert registry.resolve("ragas/faithfulness").requires == ("input", "output", "context", "judge")
    pack = registry.packs["ragas/metrics"]
    assert (pack.tier, pack.upstream) == ("wrapped", "ragas==0.4.3")
    judge = {"model": MODEL, "base_url": ragas_judge.base_url}
    with evalsi.evaluate(ROWS, REFS, registry=registry, judge=judge) as results:
        ours = {(f"ragas/{r.evaluator}", r.record_id): r for r in results.results}
    assert {r.outcome for r in ours.values()} == {OUTCOME_SCORED}, [r.reason for r in ours.values()]
    calls = len(ragas_judge.requests)
    assert calls >= len(ROWS) * len(REFS)  # every metric asked the judge, through the host
    assert {body["model"] for body in ragas_judge.requests} == {MODEL}

    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(ROWS), encoding="utf-8")
    done = subprocess.run([str(_python(ragas_venv)), str(FIXTURES / "ragas_reference.py"), ragas_judge.base_url,
                           MODEL, str(rows_file)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    for ref in REFS:
        for row in ROWS:
            assert ours[(ref, row["id"])].scores[0].number == pytest.approx(theirs[ref][row["id"]], abs=1e-12), (
                ref, row["id"])
    # The rows tell the metrics apart (a constant score would pass the equality above by luck).
    assert ours[("ragas/faithfulness", "good")].scores[0].number == 1.0
    assert ours[("ragas/faithfulness", "mixed")].scores[0].number == pytest.approx(2 / 3)
    assert ours[("ragas/factual-correctness", "wrong")].scores[0].number == 0.0
    relevancy = ours[("ragas/answer-relevancy", "good")].scores[0]
    assert 0.0 < relevancy.number < 1.0  # a cosine of WordLlama embeddings, not a verdict
    assert relevancy.metadata["judge_calls"].number_value == 3  # RAGAS's strictness: three generated questions

    calls_with_reference = len(ragas_judge.requests)
    with evalsi.evaluate(ROWS, REFS, registry=registry, judge=judge) as again:
        assert {(f"ragas/{r.evaluator}", r.record_id): r.scores[0].number for r in again.results} == {
            key: r.scores[0].number for key, r in ours.items()}
        assert all(r.scores[0].metadata["judge_calls_cached"].number_value
                   == r.scores[0].metadata["judge_calls"].number_value > 0 for r in again.results)
    assert len(ragas_judge.requests) == calls_with_reference  # every judge call of the second run was cached


def test_missing_contexts_skip_and_malformed_answers_and_bad_params_error(
        ragas_registry: tuple[Registry, PluginSet], ragas_judge: FakeOpenAI) -> None:
    registry, _ = ragas_registry
    rows = [{"id": "no-context", "input": "Where is the Eiffel Tower?", "output": "In Paris.",
             "reference": "In Paris."},
            {"id": "malformed", "input": "Where is the gibberish tower?", "output": "The gibberish tower is here.",
             "context": ["A gibberish tower."], "reference": "Here."},
            {"id": "no-claims", "input": "Where is the Eiffel Tower?", "output": " ", "context": CONTEXTS,
             "reference": "The Eiffel Tower is in Paris."}]
    judge = {"model": MODEL, "base_url": ragas_judge.base_url}
    with evalsi.evaluate(rows, ["ragas/faithfulness", "ragas/context-recall"], registry=registry,
                         judge=judge) as results:
        got = {(f"ragas/{r.evaluator}", r.record_id): r for r in results.results}
    for ref in ("ragas/faithfulness", "ragas/context-recall"):
        skipped = got[(ref, "no-context")]
        assert skipped.outcome == OUTCOME_SKIPPED and "context" in skipped.reason, skipped
        error = got[(ref, "malformed")]
        assert error.outcome == OUTCOME_ERROR and error.error_kind == ERROR_KIND_EVALUATOR, error
        assert "RagasOutputParserException" in error.reason, error.reason
    nan = got[("ragas/faithfulness", "no-claims")]  # the judge finds no statements: RAGAS gives NaN
    assert nan.outcome == OUTCOME_SKIPPED and "gave no score (NaN)" in nan.reason, nan
    assert got[("ragas/context-recall", "no-claims")].outcome == OUTCOME_SCORED
    assert results.metric("faithfulness").n == 0

    # A bad param is refused when the evaluator is bound (the plugin's CheckParams), before any record is sent.
    bad_param = [{"ref": "ragas/factual-correctness", "params": {"mode": "bogus"}}]
    requests = len(ragas_judge.requests)
    with pytest.raises(BadInputError, match=r"param mode: 'bogus' is not one of f1, precision, recall"):
        evalsi.evaluate(rows[:1], bad_param, registry=registry, judge=judge)
    assert len(ragas_judge.requests) == requests


def test_the_plugin_venv_is_sealed_offline(ragas_venv: tuple[Path, Path], tmp_path: Path) -> None:
    """What would phone home (RAGAS telemetry, a tiktoken BPE download into an empty cache) does not."""
    env = {"PATH": "/usr/bin:/bin", "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken"), "HOME": str(tmp_path)}
    done = subprocess.run([str(_python(ragas_venv)), str(FIXTURES / "offline_check.py")], capture_output=True,
                          text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["do_not_track"] is True
    assert report["tiktoken"].startswith("failed: "), report
    assert "the RAGAS plugin runs offline: refused to resolve 'openaipublic" in report["tiktoken"], report
    assert not any((tmp_path / "tiktoken").glob("*"))
