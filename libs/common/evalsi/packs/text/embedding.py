"""Embedding similarity: the cosine of the output's and the reference's embeddings, as WordLlama computes it.

The model is the one the ``wordllama`` package ships inside its wheel (``l2_supercat``: LLM token embeddings
distilled to 256 dimensions, average-pooled over the text's tokens), so nothing is downloaded at run time. It is
the heavy option of the text pack: ``pip install 'evalsi[embeddings]'``, imported only when this evaluator is bound.

WordLlama's own ``WordLlama.load()`` looks for the shipped tokenizer in a folder the wheel does not have
(``wordllama/tokenizer/``; the wheel's is ``tokenizers/``) and then fetches it from the Hugging Face hub, so the
model is built here from the package's own files, with the package's own classes: the numbers are
``WordLlamaInference.similarity``'s, and no network is ever asked.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.packs.text._common import covered, texts
from evalsi.packs.text._embed import Embedder
from evalsi.v1alpha1.record_pb2 import Record

INSTALL_HINT = "pip install 'evalsi[embeddings]' (it brings wordllama, whose wheel holds the model)"
# The shipped weights are 256-dimensional; WordLlama's smaller sizes are their first columns (Matryoshka training).
DIMENSIONS = (64, 128, 256)
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")


@lru_cache(maxsize=len(DIMENSIONS))
def wordllama_model(dim: int = 256) -> Any:
    """WordLlama's inference model over the weights and tokenizer its package ships, truncated to ``dim``."""
    try:
        import wordllama  # heavy optional dependency (the embeddings extra)
        from safetensors import safe_open
        from wordllama import WordLlama
        from wordllama.inference import WordLlamaInference
    except ImportError as exc:
        raise BadInputError(f"embedding similarity needs wordllama, which is not installed: {INSTALL_HINT}") from exc
    root = Path(wordllama.__file__).parent
    weights, tokenizer = root.joinpath(*_WEIGHTS), root.joinpath(*_TOKENIZER)
    for path in (weights, tokenizer):
        if not path.is_file():
            raise BadInputError(f"the installed wordllama has no {path.relative_to(root)}; {INSTALL_HINT}")
    with safe_open(str(weights), framework="np", device="cpu") as tensors:
        embedding = tensors.get_tensor("embedding.weight")[:, :dim]
    return WordLlamaInference(embedding, WordLlama.load_tokenizer(tokenizer))


@lru_cache(maxsize=len(DIMENSIONS))
def wordllama_embedder(dim: int = 256) -> Embedder:
    """The batch form's embedder over ``wordllama_model(dim)`` (it remembers the pieces it has tokenized)."""
    return Embedder(wordllama_model(dim))


def embedding_batch(texts: dict[str, list[str]], *, dim: int = 256) -> BatchVerdicts:
    """``embedding_similarity`` of every record the batch path covers (``covered``: one reference, both texts
    present): every text embedded at once and each pair's cosine, by ``Embedder``,
    whose vectors and cosines are WordLlama's to the bit; None for the rest, which the function decides."""
    outputs, references = texts["output"], texts["reference"]
    decided: BatchVerdicts = [None] * len(outputs)
    chosen = covered(outputs, references)
    if not chosen:
        return decided
    embedder = wordllama_embedder(dim)
    embedded = embedder.embed([outputs[i] for i in chosen] + [references[i] for i in chosen])
    for index, cosine in zip(chosen, embedder.cosines(embedded[:len(chosen)], embedded[len(chosen):]), strict=True):
        decided[index] = cosine
    return decided


def _check(*, dim: int = 256, **_: object) -> None:
    if dim not in DIMENSIONS:
        raise BadInputError(
            f"evaluator builtin/embedding-similarity: param 'dim' must be one of {list(DIMENSIONS)}, got {dim!r}"
        )
    try:
        wordllama_model(dim)  # loaded once per process, at bind time, so a missing install fails before any record
    except BadInputError as exc:
        raise BadInputError(f"evaluator builtin/embedding-similarity: {exc}") from None


@evaluator(
    "builtin/embedding-similarity",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # a lookup and a mean of at most a few thousand token vectors; texts are bounded (_common.MAX_CHARS)
    check=_check,
    batch=embedding_batch,
    outputs=[Output("embedding-similarity", "number", min=-1.0, max=1.0,
                    description="Cosine similarity of WordLlama embeddings, the best reference.")],
    params={"dim": "Embedding dimensions: 64, 128 or 256 (WordLlama's truncations of its 256-dimensional model)."},
)
def embedding_similarity(record: Record, *, dim: int = 256) -> float:
    """Cosine similarity of the output's and the reference's WordLlama embeddings (the best of a JSON-list
    reference's elements), equal to ``WordLlamaInference.similarity`` on the package's shipped model."""
    output, references = texts(record)
    model = wordllama_model(dim)
    return max(float(model.similarity(output, reference)) for reference in references)


EVALUATORS = (embedding_similarity,)
