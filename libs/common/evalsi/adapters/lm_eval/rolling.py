"""``loglikelihood_rolling`` (perplexity tasks) as lm-eval's API models compute it: the text tokenized by the
server's own tokenizer endpoints (lm-eval's ``RemoteTokenizer``: ``/tokenize``, ``/tokenizer_info``), cut into
disjoint windows of at most ``max_length - 1`` tokens by lm-eval's ``get_rolling_token_windows`` and
``make_disjoint_window``, the first conditioned on the BOS (else EOS) token, each window's tokens scored from its
context length on. Imports ``lm_eval``: it runs in lm-eval's virtualenv.
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


def windows(tokens: list[int], prefix: int, max_length: int) -> list[Window]:
    """lm-eval's ``loglikelihood_rolling`` windows and ``batch_loglikelihood_requests`` truncation: its API
    models keep one token of ``max_length`` for the generated one."""
    limit = max_length - 1
    out = []
    for context, continuation in map(make_disjoint_window,
                                     get_rolling_token_windows(tokens, prefix, limit - 1, 1)):
        ids = (context + continuation)[-limit:]
        ctxlen = len(context) - max(0, len(context) + len(continuation) - limit)
        out.append(Window(ids=ids, ctxlen=ctxlen))
    return out
