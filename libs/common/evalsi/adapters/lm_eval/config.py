"""``--model_args`` of ``lm_eval --model evalsi`` as the model target a run would call, and each request's
generation settings as provider params: pure, so they are tested without lm-eval installed.

The target is an ordinary ``spec.target.model`` (``ModelTarget``): the same connector config, retries, rate limits
and prices as ``evalsi run`` builds from a suite's target, keys read from this process's environment
(``api_key_env``, else the provider's usual variable), as embedded runs do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError
from evalsi.judges import PROVIDERS
from evalsi.targets.config import target_config
from evalsi.v1alpha1.run_pb2 import ModelTarget

# The ModelTarget's own fields, as model_args name them.
TARGET_ARGS = ("provider", "model", "base_url", "api_key_env", "system_prompt")
# Provider params sent with every call, and the call settings of ``TARGET_CALL_PARAMS``.
NUMBER_ARGS = ("seed", "timeout_s", "max_retries", "rpm", "tpm", "price_per_1k_input", "price_per_1k_output")
ADAPTER_ARGS = ("concurrency", "usage_log", "tokenizer_backend", "max_length")
# What lm-eval adds to every model's arguments (``--batch_size``, ``--max_batch_size``, ``--device``): calls are
# sent ``concurrency`` at a time whatever the batch size, and there is no device.
LM_EVAL_ARGS = ("batch_size", "max_batch_size", "device")
ACCEPTED = (*TARGET_ARGS, *NUMBER_ARGS, *ADAPTER_ARGS, *LM_EVAL_ARGS)
# ``tokenizer_backend``: none, or the server's own tokenizer endpoints (lm-eval's ``remote``: /tokenize,
# /detokenize, /tokenizer_info, as vLLM serves them). lm-eval's ``huggingface`` and ``tiktoken`` backends download
# the tokenizer (and huggingface needs transformers), so they are not offered.
TOKENIZER_BACKENDS = ("none", "remote")
# lm-eval's API models' default ``max_length``: a loglikelihood_rolling window holds at most this many tokens.
DEFAULT_MAX_LENGTH = 2048
MAX_CONCURRENCY = 64
DEFAULT_CONCURRENCY = 4
# lm-eval's own default for a request that names no length (its API models' ``_max_gen_toks``).
DEFAULT_MAX_GEN_TOKS = 256
MAX_GEN_TOKS = 1 << 17
# OpenAI's chat completions take at most 4 ``stop`` strings; the rest are cut client-side (all of them are).
OPENAI_MAX_STOP = 4
# lm-eval's names for the output length, in the order it reads them (``normalize_gen_kwargs``).
_LENGTH_KEYS = ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens")
# A gen_kwargs string value over this is refused (a task's YAML, not a document).
_MAX_TEXT = 4096


@dataclass(frozen=True)
class LmArgs:
    target: ModelTarget
    concurrency: int
    usage_log: str  # "" when no per-call usage is written
    tokenizer_backend: str = "none"
    max_length: int = DEFAULT_MAX_LENGTH


@dataclass(frozen=True)
class Generation:
    """One request's settings: the provider params it adds to the target's, and where its text is cut."""

    params: dict[str, Any]
    until: tuple[str, ...]


def lm_args(args: Mapping[str, Any]) -> LmArgs:
    """``model_args`` (strings from the CLI's ``key=value,...``, or typed values from Python) checked and made
    the target; every error names the argument and what is accepted."""
    unknown = sorted(set(args) - set(ACCEPTED))
    if unknown:
        raise BadInputError(f"lm-eval --model_args: unknown argument(s) {', '.join(unknown)}; accepted: "
                            f"{', '.join(ACCEPTED)}")
    model = _text(args, "model")
    if not model:
        raise BadInputError("lm-eval --model_args: model= is required (the provider's model id, e.g. "
                            "model=gpt-4o-mini)")
    provider = _text(args, "provider") or "openai"
    if provider not in PROVIDERS:
        raise BadInputError(f"lm-eval --model_args: provider={provider!r}; accepted: {', '.join(PROVIDERS)}")
    target = ModelTarget(connector=provider, model=model, base_url=_text(args, "base_url"),
                         api_key_env=_text(args, "api_key_env"), system_prompt=_text(args, "system_prompt"))
    params = {key: _number(args[key], key) for key in NUMBER_ARGS if args.get(key) not in (None, "")}
    if params:
        target.params.update(params)
    target_config(target)  # refuses what a run's target would refuse (a negative price, a bad timeout)
    concurrency = _number(args.get("concurrency", DEFAULT_CONCURRENCY), "concurrency")
    if not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise BadInputError(f"lm-eval --model_args: concurrency={concurrency!r}; accepted: an integer "
                            f"from 1 to {MAX_CONCURRENCY}")
    backend = _text(args, "tokenizer_backend").lower() or "none"
    if backend not in TOKENIZER_BACKENDS:
        raise BadInputError(f"lm-eval --model_args: tokenizer_backend={backend!r}; accepted: "
                            f"{', '.join(TOKENIZER_BACKENDS)} (remote: the server's /tokenize endpoints; lm-eval's "
                            "huggingface and tiktoken backends download a tokenizer and are not offered)")
    max_length = _number(args.get("max_length", DEFAULT_MAX_LENGTH), "max_length")
    if not isinstance(max_length, int) or not 3 <= max_length <= MAX_GEN_TOKS:
        raise BadInputError(f"lm-eval --model_args: max_length={max_length!r}; accepted: an integer from 3 to "
                            f"{MAX_GEN_TOKS}")
    return LmArgs(target=target, concurrency=concurrency, usage_log=_text(args, "usage_log"),
                  tokenizer_backend=backend, max_length=max_length)


def generation(gen_kwargs: Mapping[str, Any], provider: str) -> Generation:
    """A ``generate_until`` request's ``gen_kwargs`` as provider params. Greedy unless the task samples
    (``do_sample: true`` or a temperature): temperature 0, as lm-eval's API models send. The output length is
    ``max_tokens`` (lm-eval's default 256 when the task names none); ``until`` goes to the provider as stop
    sequences (OpenAI takes 4, Anthropic ``stop_sequences``) and is also cut here, so every one of them holds.
    Other keys (``top_p``, ...) go to the provider as they are."""
    kwargs = dict(gen_kwargs)
    until = _until(kwargs.pop("until", None))
    sample = bool(kwargs.pop("do_sample", False))
    length = next((kwargs.pop(key) for key in _LENGTH_KEYS if key in kwargs), DEFAULT_MAX_GEN_TOKS)
    for key in _LENGTH_KEYS:
        kwargs.pop(key, None)
    length = _number(length, "gen_kwargs max_gen_toks")
    if not isinstance(length, int) or not 1 <= length <= MAX_GEN_TOKS:
        raise BadInputError(f"lm-eval gen_kwargs: max_gen_toks={length!r}; accepted: an integer from 1 to "
                            f"{MAX_GEN_TOKS}")
    params: dict[str, Any] = {key: _bounded(value, key) for key, value in kwargs.items()}
    if not sample:
        params.setdefault("temperature", 0.0)
    params["max_tokens"] = length
    if provider == "anthropic":
        stops = [s for s in until if s.strip()]  # Anthropic refuses whitespace-only ones: they are cut here
        if stops:
            params["stop_sequences"] = stops
    elif until:
        params["stop"] = list(until[:OPENAI_MAX_STOP])
    return Generation(params=params, until=until)


def cut(text: str, until: tuple[str, ...]) -> str:
    """The text before the first of the stop sequences, as lm-eval cuts its own models' generations."""
    end = min((index for stop in until if stop and (index := text.find(stop)) >= 0), default=len(text))
    return text[:end]


def _until(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list | tuple) or not all(isinstance(s, str) for s in stops):
        raise BadInputError(f"lm-eval gen_kwargs: until={value!r}; accepted: a string or a list of strings")
    return tuple(_bounded(s, "until") for s in stops if s)


def _bounded(value: Any, key: str) -> Any:
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        raise BadInputError(f"lm-eval gen_kwargs: {key} is {len(value)} characters, over the {_MAX_TEXT} accepted")
    return value


def _text(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadInputError(f"lm-eval --model_args: {key}={value!r}; accepted: a string")
    return _bounded(value, key)


def _number(value: Any, key: str) -> int | float:
    """lm-eval parses ``key=value`` strings into ints, floats and bools itself; Python callers may pass strings."""
    if isinstance(value, bool):
        raise BadInputError(f"lm-eval --model_args: {key}={value!r}; accepted: a number")
    if isinstance(value, int | float):
        return value
    try:
        return int(str(value))
    except ValueError:
        try:
            return float(str(value))
        except ValueError:
            raise BadInputError(f"lm-eval --model_args: {key}={value!r}; accepted: a number") from None
