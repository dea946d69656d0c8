"""lm-eval ``loglikelihood`` requests as OpenAI-compatible *completions* calls that echo the prompt's logprobs
(``POST {base_url}/completions`` with ``echo: true``, ``logprobs: 1``, ``max_tokens: 1``: the body lm-eval's own
``local-completions`` model sends), through the judges' connector (its retries on 429/5xx, timeouts, key and rate
limits). Pure of lm-eval, so it is tested without lm-eval installed.

lm-eval's API models tokenize context and continuation locally and send token ids, so they need a tokenizer; this
sends the text and finds where the continuation starts from the response's ``text_offset`` (the character at which
each echoed token starts), so it needs none. Both score the same tokens where the server's tokenization of
``context + continuation`` puts a token boundary where the continuation starts (the usual case: lm-eval moves the
context's trailing spaces onto the continuation, as here, so the continuation starts with its word).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError
from evalsi.judges.connectors import Completion, Message, OpenAIConnector, _tokens

NEEDS = ("--model evalsi loglikelihood requests need an OpenAI-compatible completions endpoint that returns the "
         "prompt's logprobs (echo: true with logprobs: 1, as vLLM and llama.cpp's server do)")


@dataclass(frozen=True)
class Split:
    """A request's text as sent, and the character where the scored continuation starts."""

    prompt: str
    boundary: int


def split(context: str, continuation: str) -> Split:
    """lm-eval's ``TemplateLM._encode_pair``: the context's trailing whitespace belongs to the continuation (a
    tokenizer puts a word's leading space in the word's token). An empty context has no token to condition the
    first one on: lm-eval's API models put a prefix token there, which needs a tokenizer, so it is refused."""
    stripped = context.rstrip()
    if not stripped:
        raise BadInputError("lm-eval loglikelihood: a request with an empty context needs the model's prefix "
                            "(BOS) token, which --model evalsi cannot send without a tokenizer")
    return Split(prompt=context + continuation, boundary=len(stripped))


class CompletionsConnector(OpenAIConnector):
    """``POST {base_url}/completions``: the prompt is the one user message's content."""

    def build_request(self, messages: Sequence[Message]) -> tuple[str, dict[str, str], dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {**self._params(), "model": self.config.model, "prompt": messages[-1]["content"],
                "temperature": 0, "max_tokens": 1, "logprobs": 1, "echo": True}
        return self.url, headers, body

    @property
    def url(self) -> str:
        return f"{self.config.base_url}/completions"

    def parse_response(self, doc: Any) -> Completion:
        choice = doc["choices"][0]
        usage = doc.get("usage") or {}
        return Completion(
            text=str(choice.get("text") or ""),
            input_tokens=_tokens(usage.get("prompt_tokens", 0), "usage.prompt_tokens"),
            output_tokens=_tokens(usage.get("completion_tokens", 0), "usage.completion_tokens"),
            model=str(doc.get("model") or self.config.model),
            raw=doc,
        )


def score(doc: Any, request: Split, url: str) -> tuple[float, bool]:
    """The continuation's log-likelihood and whether each of its tokens was the most likely one (lm-eval's
    ``LocalCompletionsAPI.parse_logprobs``: the sum of ``token_logprobs`` and ``token == max(top_logprobs)``), over
    the echoed tokens from the one holding ``boundary`` to the prompt's end (the generated token left out)."""
    logprobs = _logprobs(doc, url, ("text_offset", "token_logprobs", "top_logprobs"))
    offsets, token_lps, tops = logprobs["text_offset"], logprobs["token_logprobs"], logprobs["top_logprobs"]
    if not (len(offsets) == len(token_lps) == len(tops)) or not offsets:
        raise BadInputError(f"{url}: logprobs.text_offset, token_logprobs and top_logprobs differ in length "
                            f"({len(offsets)}, {len(token_lps)}, {len(tops)}); {NEEDS}")
    start = max((i for i, offset in enumerate(offsets) if offset <= request.boundary), default=None)
    end = sum(1 for offset in offsets if offset < len(request.prompt))
    if start is None or start == 0 or end <= start:
        raise BadInputError(f"{url}: the echoed tokens' text_offset {offsets[:8]}... do not cover the prompt's "
                            f"{len(request.prompt)} characters with the continuation at {request.boundary}; {NEEDS}")
    return _sum(token_lps, tops, range(start, end), url)


def score_tokens(doc: Any, length: int, ctxlen: int, url: str) -> tuple[float, bool]:
    """A prompt sent as ``length`` token ids scored from token ``ctxlen`` on: lm-eval's ``parse_logprobs``
    (``token_logprobs[ctxlen:-1]``, the generated token left out), for ``loglikelihood_rolling`` windows."""
    logprobs = _logprobs(doc, url)
    token_lps, tops = logprobs["token_logprobs"], logprobs["top_logprobs"]
    if len(token_lps) < length or len(tops) < length or not 0 < ctxlen < length:
        raise BadInputError(f"{url}: {len(token_lps)} echoed token logprobs for a prompt of {length} tokens "
                            f"(scored from {ctxlen}); {NEEDS}")
    return _sum(token_lps, tops, range(ctxlen, length), url)


def _sum(token_lps: list[Any], tops: list[Any], indices: range, url: str) -> tuple[float, bool]:
    total, greedy = 0.0, True
    for index in indices:
        value, top = token_lps[index], tops[index]
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise BadInputError(f"{url}: token_logprobs[{index}] is {value!r}, not a log-probability; {NEEDS}")
        if not isinstance(top, dict) or not top:
            raise BadInputError(f"{url}: top_logprobs[{index}] is {top!r}, not the most likely tokens; {NEEDS}")
        total += value
        greedy = greedy and value == max(top.values())
    return total, greedy


def _logprobs(doc: Any, url: str, fields: tuple[str, ...] = ("token_logprobs", "top_logprobs"),
              ) -> dict[str, list[Any]]:
    choices = doc.get("choices") if isinstance(doc, dict) else None
    logprobs = choices[0].get("logprobs") if isinstance(choices, list) and choices else None
    if not isinstance(logprobs, dict):
        raise BadInputError(f"{url} returned no logprobs (choices[0].logprobs is {logprobs!r}); {NEEDS}")
    found = {}
    for name in fields:
        value = logprobs.get(name)
        if not isinstance(value, list):
            raise BadInputError(f"{url} returned no prompt logprobs (choices[0].logprobs.{name} is "
                                f"{type(value).__name__}); {NEEDS}")
        found[name] = value
    return found
