"""WordLlama's embeddings and cosines for a column of texts: the same float32 figures as
``WordLlamaInference.embed`` and ``vector_similarity``, without their per-text costs.

Where WordLlama's time goes, per text of about 25 tokens (2026-12-03): its ``tokenizers`` pipeline about 50 µs of
CPU (the normalizers track every character's alignment, and an ``Encoding`` with offsets and masks is built), the
BPE merges themselves a few; then a padded gather and a masked mean per group of 64, and a cosine of two
1-row matrices per pair (about 40 µs, mostly small numpy calls). Here:

- **tokens**: the model's normalizer is two string edits (a leading "▁", each space "▁"), and its merges never
  join a piece ending in another character to one starting with "▁" (checked on the tokenizer's own merges when
  the embedder is built). A merge therefore never crosses the start of a run of "▁", so the normalized text
  splits there into pieces that BPE tokenizes independently, to the same ids as the whole text, and each distinct
  piece (a word with its leading space) is tokenized once, by the model's own BPE, and remembered. A text holding
  one of the tokenizer's added tokens (``<s>``, ...) is tokenized whole by the tokenizer, as WordLlama does.
  A tokenizer of any other shape is left to WordLlama's own ``embed``;
- **pooling**: the texts longest first, the token rows at each position added at once for every text still that
  long (so each text's rows are added in order, in float32, as WordLlama's masked sum adds them), then divided
  by the token count in float32;
- **cosine**: the norms and the division for the whole column at once (numpy reduces each row alike whatever the
  number of rows), then WordLlama's own matrix product for each pair, on the same shapes.

``tests/packs/test_text_embedding.py`` holds the vectors and the cosines to WordLlama's, bit for bit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

_SPACE = "\u2581"
# A piece: a run of "▁" and the characters up to the next "▁", or a run of "▁" that ends the text.
_PIECES = re.compile(f"{_SPACE}*[^{_SPACE}]+|{_SPACE}+")
_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": _SPACE}, {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE}]}
# Pieces remembered at most (a word with its leading space each: a few MB), then forgotten all at once.
_PIECE_CACHE = 200_000


def _splits_at_spaces(config: dict[str, Any]) -> bool:
    """Whether a tokenizer (its JSON) normalizes as above, has no pre-tokenizer, and is a BPE no merge of which
    joins across the start of a run of "▁": then tokenizing the pieces gives the whole text's ids."""
    model = config.get("model") or {}
    if (config.get("normalizer") != _NORMALIZER or config.get("pre_tokenizer") is not None
            or model.get("type") != "BPE" or model.get("dropout") is not None
            or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix")):
        return False
    for merge in model.get("merges") or ():
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        if _SPACE in left.lstrip(_SPACE) or _SPACE in right.lstrip(_SPACE):
            return False
        if right.startswith(_SPACE) and left.strip(_SPACE):
            return False
    return True


class Embedder:
    """``embed`` and ``cosines`` equal to a ``WordLlamaInference``'s (dense, not binary) on the same texts."""

    def __init__(self, model: Any) -> None:
        self.model = model
        tokenizer = model.tokenizer
        self._exact = not model.binary and _splits_at_spaces(json.loads(tokenizer.to_str()))
        self._added = tuple(token.content for token in tokenizer.get_added_tokens_decoder().values())
        self._marks = tuple({token[0] for token in self._added if token})  # a text without these holds none
        self._pieces: dict[str, tuple[int, ...]] = {}

    def _ids(self, text: str) -> list[int]:
        if any(map(text.__contains__, self._marks)) and any(token in text for token in self._added):
            return list(self.model.tokenizer.encode(text, add_special_tokens=False).ids)
        pieces = self._pieces
        found = _PIECES.findall(_SPACE + text.replace(" ", _SPACE)) if text else []
        try:
            return list(chain.from_iterable(map(pieces.__getitem__, found)))
        except KeyError:  # a piece not seen yet: the model's BPE tokenizes it, once
            if len(pieces) > _PIECE_CACHE:
                pieces.clear()
            tokenize = self.model.tokenizer.model.tokenize
            for piece in found:
                if piece not in pieces:
                    pieces[piece] = tuple(token.id for token in tokenize(piece))
            return list(chain.from_iterable(map(pieces.__getitem__, found)))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The mean of each text's token rows, float32, as ``WordLlamaInference.embed(texts)``."""
        model = self.model
        if not self._exact:
            return np.asarray(model.embed(list(texts)))
        table = model.embedding
        per_text = [self._ids(text) for text in texts]
        counts = np.fromiter(map(len, per_text), dtype=np.intp, count=len(per_text))
        # Longest first, so the texts still adding a token row at position l are the first ones.
        order = np.argsort(-counts, kind="stable")
        ranked = counts[order]
        longest = int(ranked[0]) if len(ranked) else 0
        flat = np.fromiter(chain.from_iterable(map(per_text.__getitem__, order.tolist())), dtype=np.intp,
                           count=int(counts.sum()))
        np.clip(flat, 0, table.shape[0] - 1, out=flat)  # as WordLlama clamps out-of-range ids
        starts = np.cumsum(ranked) - ranked  # where each text's ids begin in ``flat``
        sums = np.zeros((len(per_text), table.shape[1]), dtype=np.float32)
        still = np.searchsorted(-ranked, -np.arange(longest), side="left")  # how many texts are longer than l
        for position in range(longest):
            # Row by row in order, in float32: WordLlama's masked sum over its padded token axis adds them so.
            rows = int(still[position])
            sums[:rows] += table[flat[starts[:rows] + position]]
        pooled = np.empty_like(sums)
        pooled[order] = sums / np.maximum(ranked, 1).astype(np.float32)[:, np.newaxis]
        return pooled

    @staticmethod
    def cosines(a: np.ndarray, b: np.ndarray) -> list[float]:
        """Row i of ``a`` against row i of ``b``: ``vector_similarity(a[i], b[i])`` of WordLlama (dense)."""
        norms_a = np.linalg.norm(a, axis=1, keepdims=True)
        norms_b = np.linalg.norm(b, axis=1, keepdims=True)
        unit_a = a / np.where(norms_a == 0, 1.0, norms_a)
        unit_b = b / np.where(norms_b == 0, 1.0, norms_b)
        dot = np.dot
        return [float(dot(unit_a[i:i + 1], unit_b[i:i + 1].T).astype(np.float32).item()) for i in range(len(a))]
