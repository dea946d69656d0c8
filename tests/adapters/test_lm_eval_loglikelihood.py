"""``--model evalsi`` loglikelihood requests (multiple-choice tasks) against a local OpenAI-compatible completions
server that echoes prompt logprobs (lm_eval_fixtures/completions_server.py), offline: lm-eval's CLI runs the
fixture task tasks/evalsi_ll_choice.yaml through our connector, and every choice's log-likelihood, its is_greedy
and the task's accuracy equal what lm-eval's own ``local-completions`` computes against the same server; a server
without prompt logprobs and a loglikelihood_rolling request are refused saying what is needed. The scoring
(``logprobs.py``) is also checked on its own, without lm-eval."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from lm_eval_fixtures.completions_server import CompletionsServer, expected, logprob, tokenize

from evalsi.adapters.lm_eval import UPSTREAM, find_run, run_rows
from evalsi.adapters.lm_eval.config import lm_args
from evalsi.adapters.lm_eval.logprobs import CompletionsConnector, Split, score, score_tokens, split
from evalsi.errors import BadInputError
from evalsi.plugins.manifest import PluginManifest
from evalsi.plugins.venv import ensure_venv, venv_python
from evalsi.targets.config import target_config
from evalsi.v1alpha1.run_pb2 import ModelTarget

FIXTURES = Path(__file__).parent / "lm_eval_fixtures"

TASK = "evalsi_ll_choice"
MAX_LENGTH = 8  # run_lm_eval_loglikelihood.py's, for the perplexity task
DOCS = [json.loads(line) for line in (FIXTURES / "tasks" / "ll_choice.jsonl").read_text().splitlines()]
# Three lm-eval evaluations of 18 requests each, in one process: ~10 s.
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def lm_eval_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned lm-eval's venv (the same one test_lm_eval_model.py builds: one install a session)."""
    manifest = PluginManifest(
        name="adapters/lm-eval", version="0.4.13", description="the lm-eval adapter's contract-test environment",
        entrypoint="evalsi.adapters.lm_eval.model:EvalsiLM", package=UPSTREAM, path=None, share_host_packages=True,
        timeout_s=60.0, startup_timeout_s=120.0, max_batch=1, max_message_bytes=1 << 20,
        source=FIXTURES / "run_lm_eval.py", digest=hashlib.sha256(UPSTREAM.encode()).hexdigest(),
    )
    return venv_python(ensure_venv(manifest, tmp_path_factory.getbasetemp() / "adapter-venvs"))


class Seen:
    def __init__(self, root: Path, seen: dict[str, Any], requests: list[dict[str, Any]]) -> None:
        self.root, self.seen, self.requests = root, seen, requests


@pytest.fixture(scope="module")
def run(lm_eval_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Seen:
    root = tmp_path_factory.mktemp("lm-eval-ll")
    (root / "home").mkdir()
    with CompletionsServer() as server:
        spec = {"base_url": server.base_url, "tasks": str(FIXTURES / "tasks"), "out": str(root / "out"),
                "usage": str(root / "usage.jsonl")}
        (root / "spec.json").write_text(json.dumps(spec))
        env = {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
        done = subprocess.run([str(lm_eval_python), str(FIXTURES / "run_lm_eval_loglikelihood.py"),
                               str(root / "spec.json"), str(root / "seen.json")], env=env, cwd=FIXTURES,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr[-4000:]
    return Seen(root, json.loads((root / "seen.json").read_text()), requests)


def _by_hand() -> dict[str, list[list[Any]]]:
    """Each choice scored from the server's logprob function: the context lm-eval builds, a space, the choice."""
    return {str(i): [list(expected(f"Q: {doc['question']}\nA:", f" {choice}")) for choice in doc["choices"]]
            for i, doc in enumerate(DOCS)}


def test_each_choice_scores_as_lm_evals_own_local_completions(run: Seen) -> None:
    ours, upstream = run.seen["evalsi"], run.seen["upstream"]
    assert ours["samples"] == upstream["samples"] == _by_hand()
    greedy = [g for choices in ours["samples"].values() for _, g in choices]
    assert True in greedy and False in greedy  # the fixture exercises both
    assert ours["acc"] == upstream["acc"]
    # lm-eval's acc: the highest log-likelihood is the answer.
    picks = [max(range(len(c)), key=lambda k: c[k][0]) for c in _by_hand().values()]
    assert ours["acc"] == pytest.approx(sum(p == d["answer"] for p, d in zip(picks, DOCS, strict=True)) / len(DOCS))
    assert 0 < ours["acc"] < 1


def test_the_requests_are_text_completions_echoing_logprobs(run: Seen) -> None:
    ours = [r for r in run.requests if "seed" not in r and r["path"] == "/v1/completions"]  # lm-eval sends one
    choices = [r for r in ours if isinstance(r["prompt"], str)]
    assert len(choices) == 2 * 18  # the CLI's run and simple_evaluate's: 6 documents x 3 choices each
    for body in ours:
        assert (body["echo"], body["logprobs"], body["max_tokens"], body["temperature"]) == (True, 1, 1, 0)
    assert all(body["prompt"].startswith("Q: ") and "\nA: " in body["prompt"] for body in choices)
    # local-completions sent token ids (its remote tokenizer) for the same 18 requests, and the rolling windows.
    theirs = [r for r in run.requests if "seed" in r]
    assert len(theirs) == 18 + len(ours) - len(choices)


def test_perplexity_scores_as_lm_evals_own_local_completions_window_by_window(run: Seen) -> None:
    ours, upstream = run.seen["rolling_evalsi"], run.seen["rolling_upstream"]
    assert ours == upstream
    assert set(ours["metrics"]) >= {"word_perplexity,none", "byte_perplexity,none", "bits_per_byte,none"}
    texts = [json.loads(line)["text"] for line in (FIXTURES / "tasks" / "ll_rolling.jsonl").read_text().splitlines()]
    # The short texts fit one window: every token given the one before, the first given the BOS token.
    for doc_id in (0, 2):
        tokens = ["<s>", *tokenize(texts[doc_id])]
        assert len(tokens) <= MAX_LENGTH - 1
        assert ours["samples"][str(doc_id)] == pytest.approx(sum(logprob(a, b) for a, b in pairwise(tokens)))
    # The long one was scored in windows of at most max_length - 1 token ids (one kept for the generated token),
    # each predicting max_length - 2 of its tokens (one more is the window's context).
    windows = [r["prompt"] for r in run.requests if "seed" not in r and isinstance(r["prompt"], list)]
    # 18 + 1: the next test's choices and empty context, also sent as token ids.
    assert len(windows) == 18 + 1 + 2 + math.ceil(len(tokenize(texts[1])) / (MAX_LENGTH - 2))
    assert max(len(w) for w in windows) == MAX_LENGTH - 1


def test_the_cli_run_logs_samples_and_usage_that_import(run: Seen) -> None:
    rows = [row for _, row in run_rows(find_run(run.root / "out"))]
    assert len(rows) == len(DOCS)
    expected_lls = _by_hand()
    for row in rows:
        lls = row["metadata"]["lm_eval.loglikelihoods"]
        assert lls == [ll for ll, _ in expected_lls[row["id"]]]
    usage = [json.loads(line) for line in (run.root / "usage.jsonl").read_text().splitlines()]
    assert len(usage) == 18 and {u["task"] for u in usage} == {TASK}
    # The server counts its word tokens: the echoed prompt, and one generated token.
    prompts = {f"Q: {d['question']}\nA: {c}" for d in DOCS for c in d["choices"]}
    assert sorted(u["input_tokens"] for u in usage) == sorted(len(tokenize(p)) for p in prompts)
    assert {u["output_tokens"] for u in usage} == {1}


def test_with_the_servers_tokenizer_choices_are_sent_as_token_ids_as_lm_eval_sends_them(run: Seen) -> None:
    ours, upstream = run.seen["tokenized_evalsi"], run.seen["tokenized_upstream"]
    assert ours == upstream
    # Every prompt (9 to 12 tokens) was over the window and cut on the left to max_length - 1 ids; the server scores
    # a token given the one before, which the cut keeps, so the scores are the text path's.
    ids = [r["prompt"] for r in run.requests if "seed" not in r and isinstance(r["prompt"], list)]
    assert sum(len(prompt) == MAX_LENGTH - 1 for prompt in ids) >= 18
    assert ours["samples"] == run.seen["evalsi"]["samples"]
    # An empty context is the BOS token (the text path refuses it: test_split_...).
    (evalsi, upstream_empty) = run.seen["empty_context"]
    assert evalsi == upstream_empty
    assert evalsi[0] == pytest.approx(sum(logprob(a, b) for a, b in pairwise(["<s>", "Paris", " is", " big"])))


def test_a_server_without_prompt_logprobs_is_refused_naming_the_endpoint(run: Seen) -> None:
    error = run.seen["no_logprobs"]
    assert error.startswith("BadInputError: http://127.0.0.1:")
    assert "/plain/v1/completions returned no logprobs" in error
    assert "echo: true with logprobs: 1" in error


def test_rolling_loglikelihood_without_a_tokenizer_is_refused_saying_what_is_needed(run: Seen) -> None:
    assert run.seen["rolling"].startswith("BadInputError: lm-eval loglikelihood_rolling requests (perplexity")
    assert "add tokenizer_backend=remote to --model_args" in run.seen["rolling"]


def test_nothing_left_the_machine(run: Seen) -> None:
    assert run.seen["blocked"] == []


def _echo(tokens: list[str], lps: list[float | None], tops: list[Any]) -> dict[str, Any]:
    offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    return {"choices": [{"text": "".join(tokens), "logprobs": {
        "tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}}]}


def test_split_moves_the_contexts_trailing_spaces_onto_the_continuation() -> None:
    assert split("Q: x\nA: ", "Paris") == Split(prompt="Q: x\nA: Paris", boundary=len("Q: x\nA:"))
    with pytest.raises(BadInputError, match="empty context"):
        split("  ", "Paris")


def test_score_sums_the_continuations_tokens_and_leaves_out_the_generated_one() -> None:
    request = split("A:", " big city")
    doc = _echo(["A:", " big", " city", " the"], [None, -0.5, -1.5, -0.1],
                [None, {" big": -0.5}, {" town": -0.2}, {" the": -0.1}])
    assert score(doc, request, "u") == (-2.0, False)
    # A token spanning the boundary (a server that merged ":" and " big") is the continuation's.
    merged = _echo(["A", ": big", " city", "."], [None, -0.25, -0.5, -0.1], [None, {": big": -0.25},
                                                                           {" city": -0.5}, {".": -0.1}])
    assert score(merged, request, "u") == (-0.75, True)


def test_score_refuses_a_response_that_did_not_echo_the_prompt() -> None:
    request = split("A:", " big")
    not_echoed = _echo([" the"], [-0.1], [{" the": -0.1}])
    not_echoed["choices"][0]["logprobs"]["text_offset"] = [len(request.prompt)]
    with pytest.raises(BadInputError, match="do not cover the prompt"):
        score(not_echoed, request, "u")
    no_offsets = _echo(["A:", " big"], [None, -1.0], [None, {" big": -1.0}])
    del no_offsets["choices"][0]["logprobs"]["text_offset"]
    with pytest.raises(BadInputError, match=r"logprobs.text_offset is NoneType"):
        score(no_offsets, request, "u")


def test_score_tokens_scores_a_window_from_its_context_length() -> None:
    doc = _echo(["<s>", " a", " b", " c", " the"], [None, -1.0, -2.0, -0.5, -0.1],
                [None, {" a": -1.0}, {" x": -1.0}, {" c": -0.5}, {" the": -0.1}])
    assert score_tokens(doc, length=4, ctxlen=2, url="u") == (-2.5, False)
    assert score_tokens(doc, length=4, ctxlen=3, url="u") == (-0.5, True)
    with pytest.raises(BadInputError, match="2 echoed token logprobs for a prompt of 4 tokens"):
        score_tokens(_echo(["<s>", " a"], [None, -1.0], [None, {" a": -1.0}]), length=4, ctxlen=1, url="u")


def test_tokenizer_backend_and_max_length_model_args() -> None:
    args = lm_args({"model": "m", "tokenizer_backend": "remote", "max_length": "512"})
    assert (args.tokenizer_backend, args.max_length) == ("remote", 512)
    assert (lm_args({"model": "m"}).tokenizer_backend, lm_args({"model": "m"}).max_length) == ("none", 2048)
    with pytest.raises(BadInputError, match="tokenizer_backend='huggingface'; accepted: none, remote"):
        lm_args({"model": "m", "tokenizer_backend": "huggingface"})
    with pytest.raises(BadInputError, match="max_length=2; accepted: an integer from 3"):
        lm_args({"model": "m", "max_length": 2})


def test_a_busy_completions_server_is_retried_by_the_connector() -> None:
    async def call(base_url: str) -> tuple[float, bool]:
        target = ModelTarget(connector="openai-compatible", model="tiny", base_url=f"{base_url}/v1")
        target.params.update({"max_retries": 2})
        connector = CompletionsConnector(target_config(target), sleep=lambda _: asyncio.sleep(0))
        text = split("A:", " big city")
        try:
            completion = await connector.complete([{"role": "user", "content": text.prompt}])
        finally:
            await connector.aclose()
        assert connector.retries == 2
        return score(completion.raw, text, connector.url)

    with CompletionsServer() as server:
        server.unavailable = 2
        assert asyncio.run(call(server.base_url)) == expected("A:", " big city")
        assert len(server.requests) == 3
