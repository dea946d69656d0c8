"""``EvalsiLM``: an lm-evaluation-harness model (``--model evalsi``) whose generations go through Evals.si's
model-target connectors: the code a run's ``spec.target.model`` uses, with its retries, rate limits, circuit
breaker, token usage and prices. Imports ``lm_eval``: it runs where lm-eval is installed (its own virtualenv).

``generate_until`` through the chat connectors; ``loglikelihood`` (multiple-choice tasks) through an
OpenAI-compatible completions endpoint that echoes the prompt's logprobs (``logprobs.py``), as text or, with
``tokenizer_backend=remote``, as the server's token ids; ``loglikelihood_rolling`` (perplexity tasks) with
``tokenizer_backend=remote``: lm-eval's windows of the server's tokens (``tokenized.py``).
docs/adapters.md#lm-evaluation-harness.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import lm_eval.models  # noqa: F401  # lm-eval registers its own models only into an empty registry: first
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.models.api_models import JsonChatStr
from lm_eval.utils import RemoteTokenizer

from evalsi.adapters.lm_eval.config import LmArgs, cut, generation, lm_args
from evalsi.adapters.lm_eval.logprobs import NEEDS, CompletionsConnector, score, score_tokens, split
from evalsi.adapters.lm_eval.offline import quiet_upstream
from evalsi.adapters.lm_eval.tokenized import pair, prefix_token, remote_tokenizer, windows
from evalsi.errors import BadInputError, InfraError
from evalsi.judges import CircuitBreakers, RateLimiter
from evalsi.judges.config import JudgeConfig
from evalsi.targets.config import target_config, target_prices
from evalsi.targets.models import TargetClient

# Before lm-eval's runs import huggingface_hub (it reads the opt-outs once, on import).
quiet_upstream()

MODEL_NAME = "evalsi"
ROLLING_UNSUPPORTED = (
    "lm-eval loglikelihood_rolling requests (perplexity tasks) are split into windows of the model's tokens, which "
    "needs its tokenizer: add tokenizer_backend=remote to --model_args when the server serves its tokenizer "
    "(/tokenize, /detokenize, /tokenizer_info beside /v1/completions, as vLLM does)"
)
ANTHROPIC_UNSUPPORTED = (
    "lm-eval loglikelihood requests (multiple-choice tasks) need the prompt's token logprobs, which Anthropic's "
    "messages API does not return; use provider=openai-compatible with the base_url of a completions endpoint "
    "that echoes them (echo + logprobs: vLLM, llama.cpp's server)"
)


@dataclass
class UsageTotals:
    """The calls this model made and what they used, as the connectors reported it."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    retries: int = 0
    per_call: list[dict[str, Any]] = field(default_factory=list)

    def add(self, call: dict[str, Any]) -> None:
        self.calls += 1
        self.input_tokens += call["input_tokens"]
        self.output_tokens += call["output_tokens"]
        if "cost_usd" in call:
            self.cost_usd = (self.cost_usd or 0.0) + call["cost_usd"]
        self.per_call.append(call)


@register_model(MODEL_NAME)
class EvalsiLM(LM):
    """``lm_eval --model evalsi --model_args model=...,provider=...,base_url=...`` (config.ACCEPTED lists them)."""

    def __init__(self, **model_args: Any) -> None:
        super().__init__()
        self.args: LmArgs = lm_args(model_args)
        log_dir = Path(self.args.usage_log).parent
        if self.args.usage_log and not log_dir.is_dir():  # found now, not after every call was paid for
            raise BadInputError(f"lm-eval --model_args: usage_log={self.args.usage_log}: the directory {log_dir} "
                                "does not exist")
        self.usage = UsageTotals()
        self._written = 0  # calls already in the usage log

    def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """Each request's ``(context, continuation)`` scored by one completions call, ``concurrency`` at a time:
        ``(log-likelihood, is_greedy)`` in the requests' order. Sent as text, the continuation found by the
        echoed tokens' offsets (``logprobs.py``); with ``tokenizer_backend=remote``, as token ids the way lm-eval's
        API models send them (``tokenized.py``). A server without prompt logprobs is a ``BadInputError`` naming
        the endpoint; a call failing after retries an InfraError."""
        self._check_completions()
        prompts: list[str | list[int]] = []
        scorers: list[Callable[..., tuple[float, bool]]] = []
        if self.args.tokenizer_backend == "remote":
            tokenizer, prefix = self._tokenizer()
            for request in requests:
                context, continuation = request.args
                window = pair(tokenizer, prefix, context, continuation, self.args.max_length)
                prompts.append(window.ids)
                scorers.append(functools.partial(score_tokens, length=len(window.ids), ctxlen=window.ctxlen))
        else:
            for request in requests:  # bad requests found before any call is paid for
                text = split(*request.args)
                prompts.append(text.prompt)
                scorers.append(functools.partial(score, request=text))
        results = asyncio.run(self._score(requests, prompts, scorers))
        for request, result in zip(requests, results, strict=True):
            self.cache_hook.add_partial("loglikelihood", request.args, result)
        return results

    def loglikelihood_rolling(self, requests: list[Instance], disable_tqdm: bool = False) -> list[float]:
        """Each text's log-likelihood, summed over lm-eval's rolling windows of the server's tokens
        (``tokenized.py``; ``tokenizer_backend=remote``)."""
        self._check_completions()
        if self.args.tokenizer_backend != "remote":
            raise BadInputError(ROLLING_UNSUPPORTED)
        tokenizer, prefix = self._tokenizer()
        per_text = [windows(tokenizer.encode(request.args[0]), prefix, self.args.max_length) for request in requests]
        flat = [(request, window) for request, texts in zip(requests, per_text, strict=True) for window in texts]
        scores = asyncio.run(self._score(
            [request for request, _ in flat], [window.ids for _, window in flat],
            [functools.partial(score_tokens, length=len(w.ids), ctxlen=w.ctxlen) for _, w in flat]))
        totals, at = [], 0
        for request, texts in zip(requests, per_text, strict=True):
            total = sum(value for value, _ in scores[at:at + len(texts)])  # is_greedy is not reported, as lm-eval
            at += len(texts)
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
            totals.append(total)
        return totals

    def _tokenizer(self) -> tuple[RemoteTokenizer, int]:
        config = target_config(self.args.target)
        tokenizer = remote_tokenizer(f"{config.base_url}/completions", config.timeout_s, _api_key(config))
        return tokenizer, prefix_token(tokenizer)

    def _check_completions(self) -> None:
        if self.args.target.connector == "anthropic":
            raise BadInputError(ANTHROPIC_UNSUPPORTED)

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> Any:
        """``--apply_chat_template``: the provider applies the model's template, so the conversation is sent as
        chat messages (lm-eval's own chat-completion models carry it the same way, as a JSON string)."""
        return JsonChatStr(json.dumps(chat_history, ensure_ascii=False))

    @property
    def tokenizer_name(self) -> str:
        return ""  # the provider's: no local tokenizer

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return ""

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        """Each request's context sent as a chat (a user message, or the conversation a chat template built),
        ``concurrency`` at a time; the texts in the requests' order, each cut at the request's ``until``.
        A call that fails after the connector's retries stops the evaluation (an ``InfraError`` naming the
        task and document): an outage is never scored as a wrong answer."""
        return asyncio.run(self._generate(requests))

    async def _generate(self, requests: list[Instance]) -> list[str]:
        limiter, breakers = RateLimiter(), CircuitBreakers()
        semaphore = asyncio.Semaphore(self.args.concurrency)
        clients: dict[str, TargetClient] = {}
        async with aiohttp.ClientSession() as session:

            def client_for(params: Mapping[str, Any]) -> TargetClient:
                key = json.dumps(params, sort_keys=True)
                if key not in clients:  # one per distinct setting: a task's requests usually share one
                    target = type(self.args.target)()
                    target.CopyFrom(self.args.target)
                    target.params.update(dict(params))
                    clients[key] = TargetClient(target, session=session, limiter=limiter, breakers=breakers)
                return clients[key]

            async def one(request: Instance) -> str:
                context, gen_kwargs = request.args
                settings = generation(gen_kwargs or {}, self.args.target.connector or "openai")
                client = client_for(settings.params)
                async with semaphore:
                    started = time.perf_counter()
                    try:
                        completion = await client.complete(self._messages(context))
                    except InfraError as exc:
                        raise InfraError(f"lm-eval task {request.task_name} doc {request.doc_id}: the model "
                                         f"{self.args.target.model} failed after retries: {exc}") from None
                    latency = time.perf_counter() - started
                call: dict[str, Any] = {
                    "task": request.task_name, "doc_id": request.doc_id,
                    "input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens,
                    "latency_s": latency,
                }
                cost = client.cost(completion.input_tokens, completion.output_tokens)
                if cost is not None:
                    call["cost_usd"] = cost
                self.usage.add(call)
                text = cut(completion.text, settings.until)
                self.cache_hook.add_partial("generate_until", request.args, text)
                return text

            try:
                texts = await asyncio.gather(*(one(r) for r in requests))
            finally:
                self.usage.retries += sum(c.retries for c in clients.values())
                self._write_usage()
        return list(texts)

    async def _score(self, requests: list[Instance], prompts: Sequence[str | list[int]],
                     scorers: Sequence[Callable[..., tuple[float, bool]]]) -> list[tuple[float, bool]]:
        """One completions call a prompt (text or token ids), ``concurrency`` at a time, each response read by
        its scorer; the results in the prompts' order."""
        semaphore = asyncio.Semaphore(self.args.concurrency)
        config = target_config(self.args.target)
        breaker = CircuitBreakers().for_model(config.provider, config.model)
        async with aiohttp.ClientSession() as session:
            limiter = RateLimiter().for_model(config.provider, config.model, rpm=config.rpm, tpm=config.tpm)
            connector = CompletionsConnector(config, session=session, limiter=limiter)

            async def one(request: Instance, prompt: str | list[int],
                          scorer: Callable[..., tuple[float, bool]]) -> tuple[float, bool]:
                async with semaphore:
                    started = time.perf_counter()
                    try:
                        with breaker.guard():
                            completion = await connector.complete([{"role": "user", "content": prompt}])
                    except InfraError as exc:
                        # A chat-only server has no completions route: say what the request needs.
                        hint = f"; {NEEDS}" if getattr(exc, "status", None) in (404, 405) else ""
                        raise InfraError(f"lm-eval task {request.task_name} doc {request.doc_id}: the model "
                                         f"{config.model} failed after retries: {exc}{hint}") from None
                    latency = time.perf_counter() - started
                result = scorer(completion.raw, url=connector.url)
                self._record(request, completion.input_tokens, completion.output_tokens, latency)
                return result

            try:
                results = await asyncio.gather(*(one(request, prompt, scorer) for request, prompt, scorer
                                                 in zip(requests, prompts, scorers, strict=True)))
            finally:
                self.usage.retries += connector.retries
                self._write_usage()
        return list(results)

    def _record(self, request: Instance, input_tokens: int, output_tokens: int, latency: float) -> None:
        call: dict[str, Any] = {"task": request.task_name, "doc_id": request.doc_id, "input_tokens": input_tokens,
                                "output_tokens": output_tokens, "latency_s": latency}
        prices = target_prices(self.args.target)
        if prices is not None:
            call["cost_usd"] = input_tokens / 1000 * prices[0] + output_tokens / 1000 * prices[1]
        self.usage.add(call)

    def _messages(self, context: Any) -> list[dict[str, Any]]:
        if isinstance(context, JsonChatStr):
            messages: list[dict[str, Any]] = json.loads(context.prompt)
        else:
            messages = [{"role": "user", "content": str(context)}]
        if self.args.target.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": self.args.target.system_prompt})
        return messages

    def _write_usage(self) -> None:
        """``usage_log=PATH``: every call's task, document, tokens, cost and latency, one JSON line each, in the
        order they finished (``evalsi import lm-eval --usage`` puts them on the records)."""
        if not self.args.usage_log:
            return
        with Path(self.args.usage_log).open("a", encoding="utf-8") as out:
            for call in self.usage.per_call[self._written:]:
                out.write(json.dumps(call, separators=(",", ":")) + "\n")
        self._written = len(self.usage.per_call)


def _api_key(config: JudgeConfig) -> str | None:
    """The key the completions calls send, for the tokenizer endpoints too (none when the target names none)."""
    try:
        return config.api_key(None)
    except BadInputError:
        return None
