"""Requests as token ids, as lm-eval's API models build them with ``tokenizer_backend=remote``: the text tokenized
by the server's own tokenizer endpoints (lm-eval's ``RemoteTokenizer``: ``/tokenize``, ``/tokenizer_info``).
``loglikelihood``: lm-eval's ``TemplateLM._encode_pair`` (the continuation's tokens are those of the whole text
after the context's); ``loglikelihood_rolling`` (perplexity tasks): disjoint windows by lm-eval's
``get_rolling_token_windows`` and ``make_disjoint_window``, the first conditioned on the BOS (else EOS) token.
Each prompt keeps at most ``max_length - 1`` ids (left-truncated, as ``batch_loglikelihood_requests`` does) and is
scored from its context length on. Imports ``lm_eval``: it runs in lm-eval's virtualenv.
"""

from __future__ import annotations

from dataclasses import dataclass

from lm_eval.utils import RemoteTokenizer, get_rolling_token_windows, make_disjoint_window

from evalsi.errors import BadInputError


@dataclass(frozen=True)
class Window:
    """A prompt of token ids, scored from ``ctxlen`` on."""

    ids: list[int]
    ctxlen: int


def remote_tokenizer(completions_url: str, timeout_s: float, api_key: str | None) -> RemoteTokenizer:
    """The server's tokenizer (lm-eval strips ``/v1/completions`` to find its root), checked now: a server
    without ``/tokenizer_info`` fails before any text is scored."""
    try:
        return RemoteTokenizer(completions_url, timeout=int(timeout_s), auth_token=api_key)
    except RuntimeError as exc:
        raise BadInputError(f"lm-eval --model_args tokenizer_backend=remote: {exc}; the server must serve "
                            "/tokenizer_info, /tokenize and /detokenize beside /v1/completions (as vLLM does)",
                            ) from None


def prefix_token(tokenizer: RemoteTokenizer) -> int:
    """What lm-eval's API models condition the first token on with a remote tokenizer."""
    prefix = tokenizer.bos_token_id or tokenizer.eos_token_id
    if prefix is None:
        raise BadInputError("lm-eval loglikelihood_rolling: the server's /tokenizer_info names no bos_token or "
                            "eos_token to condition the text's first token on")
    return prefix


def pair(tokenizer: RemoteTokenizer, prefix: int, context: str, continuation: str, max_length: int) -> Window:
    """lm-eval's ``TemplateLM.loglikelihood`` tokenization of one request (an empty context is the prefix token)."""
    if context == "":
        cont = tokenizer.encode(continuation)
        ctx, cont = ([prefix], cont) if not cont or prefix != cont[0] else (cont[:1], cont[1:])
        return _truncated(ctx, cont, max_length)
    spaces = len(context) - len(context.rstrip())
    if spaces:  # a word's leading space belongs to its token
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole, ctx = tokenizer.encode(context + continuation), tokenizer.encode(context)
    return _truncated(ctx, whole[len(ctx):], max_length)


def windows(tokens: list[int], prefix: int, max_length: int) -> list[Window]:
    """lm-eval's ``loglikelihood_rolling`` windows: its API models keep one token of ``max_length`` for the
    generated one, and one more for each window's context."""
    rolling = get_rolling_token_windows(tokens, prefix, max_length - 2, 1)
    return [_truncated(context, continuation, max_length) for context, continuation in map(make_disjoint_window,
                                                                                            rolling)]


def _truncated(context: list[int], continuation: list[int], max_length: int) -> Window:
    """lm-eval's ``batch_loglikelihood_requests``: at most ``max_length - 1`` ids, the context cut on the left."""
    limit = max_length - 1
    ids = (context + continuation)[-limit:]
    return Window(ids=ids, ctxlen=len(context) - max(0, len(context) + len(continuation) - limit))
