"""The lm-eval adapter against the pinned lm-eval (contract tests, offline): ``--model evalsi`` runs a local
generate_until task (examples/lm_eval/tasks: a JSONL dataset, no Hub download) through our connectors to a local
OpenAI-compatible server, from lm-eval's CLI (``python -m evalsi.adapters.lm_eval``) and from
``lm_eval.simple_evaluate``; its logged samples, imported, grade to lm-eval's own metric; the calls' usage is
recorded; a loglikelihood task against a chat-only server fails saying what it needs; nothing leaves the machine.

lm-eval runs in its own virtualenv (its pins clash with ours), built once per test session sharing the host's
packages, so pip installs only lm-eval and what the host lacks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalsi.adapters.lm_eval import UPSTREAM, find_run, run_rows
from evalsi.cli.main import cli
from evalsi.plugins.manifest import PluginManifest
from evalsi.plugins.venv import ensure_venv, venv_python
from evalsi.testing.providers import FakeOpenAI
from evalsi.testing.threaded import ThreadedProvider

FIXTURES = Path(__file__).parent / "lm_eval_fixtures"
# The example tasks of docs/adapters.md: their data files are named relative to this directory, where lm_eval runs.
EXAMPLE = Path(__file__).parents[2] / "examples" / "lm_eval"
# Three lm-eval evaluations in one process take ~30 s on a loaded 2-core machine.
RUN_TIMEOUT_S = 300
# What each model answers (by a word of the question). Run A's Italy answer runs on past the task's `until: "\n"`,
# which the adapter cuts; A gets Japan wrong, B gets everything right.
ANSWERS = {
    "model-a": {"France": "Paris", "Italy": "Rome\nQ: and Spain?", "Japan": "Kyoto", "Canada": "Ottawa"},
    "model-b": {"France": "Paris", "Italy": "Rome", "Japan": "Tokyo", "Canada": "Ottawa"},
    "model-chat": {"France": "Paris"},
}
REPEATS = 2  # examples/lm_eval/tasks/evalsi_capitals.yaml


def _reply(body: dict[str, Any]) -> str:
    question = body["messages"][-1]["content"]
    return next(answer for word, answer in ANSWERS[body["model"]].items() if word in question)


@pytest.fixture(scope="session")
def lm_eval_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lm-eval venv's python: the pinned release installed the first time in a session."""
    source = FIXTURES / "run_lm_eval.py"
    manifest = PluginManifest(
        name="adapters/lm-eval", version="0.4.13", description="the lm-eval adapter's contract-test environment",
        entrypoint="evalsi.adapters.lm_eval.model:EvalsiLM", package=UPSTREAM, path=None, share_host_packages=True,
        timeout_s=60.0, startup_timeout_s=120.0, max_batch=1, max_message_bytes=1 << 20, source=source,
        digest=hashlib.sha256(UPSTREAM.encode()).hexdigest(),
    )
    return venv_python(ensure_venv(manifest, tmp_path_factory.getbasetemp() / "adapter-venvs"))


class LmEvalRun:
    def __init__(self, root: Path, seen: dict[str, Any], requests: list[dict[str, Any]]) -> None:
        self.root, self.seen, self.requests = root, seen, requests

    def requests_of(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["model"] == model]


@pytest.fixture(scope="module")
def lm_eval_run(lm_eval_python: Path, tmp_path_factory: pytest.TempPathFactory) -> LmEvalRun:
    root = tmp_path_factory.mktemp("lm-eval-run")
    home = root / "home"
    home.mkdir()
    server: FakeOpenAI
    with ThreadedProvider(_reply) as server:
        spec = {"base_url": server.base_url, "tasks": str(EXAMPLE / "tasks"), "out_a": str(root / "a"),
                "out_b": str(root / "b"), "out_choice": str(root / "choice"),
                "out_chat": str(root / "chat"), "usage_a": str(root / "usage-a.jsonl")}
        (root / "spec.json").write_text(json.dumps(spec))
        # A scrubbed environment, as a plugin gets: no proxy, no keys, a home (and Hugging Face cache) of its own.
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
        done = subprocess.run([str(lm_eval_python), str(FIXTURES / "run_lm_eval.py"), str(root / "spec.json"),
                               str(root / "seen.json")], env=env, cwd=EXAMPLE, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False)
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr[-4000:]
    return LmEvalRun(root, json.loads((root / "seen.json").read_text()), requests)


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _lm_eval_results(directory: Path) -> dict[str, Any]:
    run = find_run(directory)
    assert run.results is not None
    results: dict[str, Any] = json.loads(run.results.read_text())
    return results


def test_nothing_left_the_machine(lm_eval_run: LmEvalRun) -> None:
    # lm-eval's datasets counts every load of its json builder with a request to S3 unless the adapter opts out.
    assert lm_eval_run.seen["blocked"] == []


def test_the_model_is_called_through_our_connector_with_the_tasks_settings(lm_eval_run: LmEvalRun) -> None:
    calls = lm_eval_run.requests_of("model-a")
    assert len(calls) == 4 * REPEATS  # each document asked `repeats` times
    for body in calls:
        assert body["messages"][0]["role"] == "user" and body["messages"][0]["content"].startswith("Q: What is")
        # The task's generation_kwargs: greedy, its length, its `until` as stop sequences.
        assert (body["temperature"], body["max_tokens"], body["stop"]) == (0.0, 16, ["\n"])


def test_imported_samples_grade_to_lm_evals_own_metric_field_by_field(lm_eval_run: LmEvalRun, tmp_path: Path) -> None:
    out_dir = lm_eval_run.root / "a"
    (samples_file,) = (out_dir / "model-a").glob("samples_evalsi_capitals_*.jsonl")
    logged = [json.loads(line) for line in samples_file.read_text().splitlines()]
    records = tmp_path / "a.jsonl"
    code, _, err = _cli("import", "lm-eval", str(out_dir), "--out", str(records),
                        "--usage", str(lm_eval_run.root / "usage-a.jsonl"))
    assert code == 0, err
    assert "imported 8 records (4 samples) of evalsi_capitals, model model-a" in err
    assert f"usage: 8 of 8 records matched a call in {lm_eval_run.root / 'usage-a.jsonl'}" in err
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert rows == [row for _, row in run_rows(find_run(samples_file), usage=lm_eval_run.root / "usage-a.jsonl")]
    by_key = {(row["id"], row["trial"]): row for row in rows}
    assert len(by_key) == 8
    for sample in logged:
        doc = sample["doc"]
        for trial in range(REPEATS):
            row = by_key[(str(sample["doc_id"]), trial)]
            assert row["input"] == sample["arguments"]["gen_args_0"]["arg_0"] == f"Q: {doc['question']}\nA:"
            assert row["output"] == sample["resps"][0][trial]
            assert row["reference"] == sample["target"] == doc["answer"]
            metadata = row["metadata"]
            assert {k: metadata[k] for k in doc} == doc
            assert (metadata["lm_eval.task"], metadata["lm_eval.model"], metadata["lm_eval.filter"]) == (
                "evalsi_capitals", "model-a", "none")
            assert metadata["lm_eval.doc_id"] == sample["doc_id"]
            assert metadata["lm_eval.exact_match"] == sample["exact_match"]
            assert metadata.get("lm_eval.repeat", 0) == trial
            # The fake server counts whitespace-separated words as tokens: 8 in each prompt.
            assert row["usage"]["input_tokens"] == 8 and row["usage"]["latency_s"] > 0
        assert by_key[(str(sample["doc_id"]), 0)]["output"] == sample["filtered_resps"][0]
    assert by_key[("1", 0)]["output"] == "Rome"  # "Rome\nQ: and Spain?" cut at the task's until
    assert by_key[("1", 0)]["usage"]["output_tokens"] == 4  # the call's tokens: the whole answer was paid for

    code, stdout, err = _cli("eval", "--data", str(records), "-e", "exact-match", "--format", "json")
    assert code == 0, err
    summaries = {s["metric"]: s for s in json.loads(stdout)["summaries"]}
    lm_evals = _lm_eval_results(out_dir)["results"]["evalsi_capitals"]["exact_match,none"]
    assert lm_evals == 0.75 and summaries["exact-match"]["mean"] == pytest.approx(lm_evals)
    assert summaries["exact-match"]["ci"]["low"] < lm_evals < summaries["exact-match"]["ci"]["high"]
    # The repeats are trials of one document: pass@2 is over the 4 documents.
    assert summaries[f"exact-match.pass@{REPEATS}"]["n"] == "4"


def test_simple_evaluate_from_python_records_the_calls_usage_and_cost(lm_eval_run: LmEvalRun) -> None:
    calls = lm_eval_run.requests_of("model-b")
    assert len(calls) == 4 * REPEATS
    usage = lm_eval_run.seen["usage_b"]
    # What the server reported, summed: 8 prompt words and a one-word answer per call.
    assert (usage["calls"], usage["input_tokens"], usage["output_tokens"], usage["retries"]) == (8, 64, 8, 0)
    assert usage["cost_usd"] == pytest.approx(64 / 1000 * 2.0 + 8 / 1000 * 10)  # the model_args' prices
    assert lm_eval_run.seen["metric_b"] == 1.0


def test_two_imported_runs_compare_document_by_document(lm_eval_run: LmEvalRun, tmp_path: Path) -> None:
    outputs = []
    for name in ("a", "b"):
        records, result = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
        assert _cli("import", "lm-eval", str(lm_eval_run.root / name), "-o", str(records))[0] == 0
        code, _, err = _cli("eval", "--data", str(records), "-e", "exact-match", "--output", str(result))
        assert code == 0, err
        outputs.append(str(result))
    code, stdout, err = _cli("compare", *outputs, "--format", "json")
    assert code == 0, err
    (metric,) = [m for m in json.loads(stdout)["metrics"] if m["metric"] == "exact-match"]
    assert metric["nPairs"] == "8" and metric["test"] == "cluster-paired-t"  # repeats are trials of a document
    assert metric["meanA"] == pytest.approx(0.75) and metric["meanB"] == pytest.approx(1.0)


def test_a_loglikelihood_task_against_a_chat_only_server_names_what_it_needs(lm_eval_run: LmEvalRun) -> None:
    # This server has no /v1/completions route (test_lm_eval_loglikelihood.py runs them against one that has).
    refusal = lm_eval_run.seen["refusal"]
    assert refusal.startswith("InfraError: lm-eval task evalsi_capitals_choice doc ")
    assert "404" in refusal and "/v1/completions" in refusal
    assert "completions endpoint that returns the prompt's logprobs (echo: true with logprobs: 1" in refusal


def test_a_multiple_choice_log_imports_the_most_likely_choice(lm_eval_run: LmEvalRun, tmp_path: Path) -> None:
    """lm-eval's dummy model (random log-likelihoods) logs a real multiple-choice sample file."""
    directory = lm_eval_run.root / "choice"
    rows = [row for _, row in run_rows(find_run(directory))]
    assert len(rows) == 4
    for row in rows:
        choices, lls = row["metadata"]["lm_eval.choices"], row["metadata"]["lm_eval.loglikelihoods"]
        assert choices == [" Paris", " Rome", " Tokyo", " Ottawa"]
        assert row["output"] == choices[lls.index(max(lls))]
        assert row["reference"] == " " + row["metadata"]["answer"]
        assert row["metadata"]["lm_eval.acc"] == float(row["output"] == row["reference"])
    results = tmp_path / "choice.jsonl"
    assert _cli("import", "lm-eval", str(directory), "-o", str(results))[0] == 0
    code, stdout, err = _cli("eval", "--data", str(results), "-e", "exact-match", "--format", "json")
    assert code == 0, err
    (summary,) = [s for s in json.loads(stdout)["summaries"] if s["metric"] == "exact-match"]
    acc = _lm_eval_results(directory)["results"]["evalsi_capitals_choice"]["acc,none"]
    assert summary["mean"] == pytest.approx(acc)


def test_a_chat_template_conversation_is_sent_and_imported_as_messages(lm_eval_run: LmEvalRun) -> None:
    messages = [{"role": "system", "content": "Answer with the city only."},
                {"role": "user", "content": "Q: What is the capital of France?\nA:"}]
    calls = lm_eval_run.requests_of("model-chat")
    assert [call["messages"] for call in calls] == [messages] * REPEATS  # limit=1: the first document
    rows = [row for _, row in run_rows(find_run(lm_eval_run.root / "chat"))]
    assert [(row["trial"], row["input"], row["output"]) for row in rows] == [
        (trial, {"messages": messages}, "Paris") for trial in range(REPEATS)]
