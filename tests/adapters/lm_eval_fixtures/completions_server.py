"""A local OpenAI-compatible *completions* server that echoes prompt logprobs as vLLM does (``echo: true`` with
``logprobs: 1``: ``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``, the first token's logprob null),
with the tokenizer endpoints lm-eval's ``remote`` tokenizer backend calls (``/tokenizer_info``, ``/tokenize``,
``/detokenize``), so lm-eval's own ``local-completions`` can score against it offline.

Its tokenizer is word-level (a word with the whitespace before it); a token's logprob is a hash of it and the token
before, so every score can be recomputed (``expected``). ``/plain/v1/completions`` is a server that ignores
``logprobs`` (as a chat-only gateway's completions shim may)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = re.compile(r"\s*\S+|\s+")
GENERATED = " the"  # the one token each call generates (max_tokens: 1)


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text)


def _unit(*parts: str) -> int:
    return int(hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:8], 16)


def logprob(previous: str, token: str) -> float:
    return -(1 + _unit(previous, token) % 500) / 100


def favourite(previous: str) -> tuple[str, float]:
    """The most likely token after ``previous`` unless the actual one scores higher."""
    return " <fav>", -(1 + _unit(previous) % 200) / 100


def expected(context: str, continuation: str) -> tuple[float, bool]:
    """A request's score by hand: the continuation's tokens (after lm-eval moves the context's trailing spaces
    onto it) each given the token before."""
    stripped = context.rstrip()
    tokens = tokenize(stripped)
    rest = tokenize(context[len(stripped):] + continuation)
    total, greedy, previous = 0.0, True, tokens[-1]
    for token in rest:
        value = logprob(previous, token)
        total += value
        greedy = greedy and value >= favourite(previous)[1]
        previous = token
    return total, greedy


class CompletionsServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.unavailable = 0  # completions calls still to answer 503 (a busy server)
        self._vocab: dict[str, int] = {}
        self._words: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> CompletionsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def ids(self, tokens: list[str]) -> list[int]:
        with self._lock:
            for token in tokens:
                if token not in self._vocab:
                    self._vocab[token] = len(self._words)
                    self._words.append(token)
            return [self._vocab[t] for t in tokens]

    def words(self, ids: list[int]) -> list[str]:
        with self._lock:
            return [self._words[i] for i in ids]

    def choice(self, prompt: Any, index: int, body: dict[str, Any], plain: bool) -> dict[str, Any]:
        tokens = self.words(prompt) if isinstance(prompt, list) else tokenize(prompt)
        every = [*tokens, GENERATED]
        offsets = [sum(len(t) for t in every[:i]) for i in range(len(every))]
        lps: list[float | None] = [None]
        tops: list[dict[str, float] | None] = [None]
        for previous, token in itertools.pairwise(every):
            value = logprob(previous, token)
            fav, fav_lp = favourite(previous)
            lps.append(value)
            tops.append({token: value} if value >= fav_lp else {fav: fav_lp})
        keep = slice(0, None) if body.get("echo") else slice(-1, None)  # the prompt's tokens only when echoed
        logprobs = {"tokens": every[keep], "token_logprobs": lps[keep], "top_logprobs": tops[keep],
                    "text_offset": offsets[keep]}
        return {"index": index, "text": "".join(every[keep]), "finish_reason": "length",
                "logprobs": None if plain or not body.get("logprobs") else logprobs}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, doc: Any, status: int = 200) -> None:
                payload = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path == "/tokenizer_info":
                    self._reply({"eos_token": "</s>", "bos_token": "<s>", "pad_token": None})
                else:
                    self._reply({"error": {"message": "not found"}}, 404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":
                    self._reply({"tokens": server.ids(tokenize(body["prompt"]))})
                elif self.path == "/detokenize":
                    self._reply({"prompt": "".join(server.words(body["tokens"]))})
                elif self.path in ("/v1/completions", "/plain/v1/completions"):
                    with server._lock:
                        server.requests.append({"path": self.path, **body})
                        busy, server.unavailable = server.unavailable > 0, max(0, server.unavailable - 1)
                    if busy:
                        self._reply({"error": {"message": "busy"}}, 503)
                        return
                    prompt = body["prompt"]
                    # One prompt (text or token ids) or a batch of them.
                    batch = prompt if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) \
                        else [prompt]
                    choices = [server.choice(p, i, body, self.path.startswith("/plain")) for i, p in enumerate(batch)]
                    prompt_tokens = sum(len(p) if isinstance(p, list) else len(tokenize(p)) for p in batch)
                    self._reply({"id": "cmpl-1", "object": "text_completion", "model": body["model"],
                                 "choices": choices,
                                 "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(batch),
                                           "total_tokens": prompt_tokens + len(batch)}})
                else:
                    self._reply({"error": {"message": "not found"}}, 404)

        return Handler
