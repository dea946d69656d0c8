"""builtin/embedding-similarity equals WordLlama's own similarity: the reference model here is loaded by WordLlama's
public ``WordLlama.load`` (from a cache folder holding the wheel's files, where that loader looks), not by the
evaluator's loader, and nothing may be downloaded: every test runs with the proxy pointed at a closed port."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from text_cases import pairs, reference_sets

import evalsi
from evalsi.errors import BadInputError
from evalsi.packs.text import embedding
from evalsi.packs.text._embed import Embedder
from evalsi.packs.text.embedding import embedding_similarity
from evalsi.records import make_record

wordllama = pytest.importorskip("wordllama", reason="the embeddings extra is in the dev install")
Tokenizer = pytest.importorskip("tokenizers").Tokenizer


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # a download attempt fails instead of reaching the hub
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def reference_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """WordLlama's cache layout holding the wheel's own files, so ``WordLlama.load(cache_dir=...)`` finds them."""
    cache = tmp_path_factory.mktemp("wordllama")
    root = Path(wordllama.__file__).parent
    (cache / "weights").mkdir()
    (cache / "tokenizers").mkdir()
    shutil.copy(root / "weights" / "l2_supercat_256.safetensors", cache / "weights")
    shutil.copy(root / "tokenizers" / "l2_supercat_tokenizer_config.json", cache / "tokenizers")
    return cache


def reference_model(cache: Path, dim: int) -> Any:
    from wordllama import WordLlama

    return WordLlama.load(cache_dir=cache, dim=256, trunc_dim=None if dim == 256 else dim, disable_download=True)


@pytest.mark.parametrize("dim", [256, 64])
def test_equals_wordllamas_similarity(reference_cache: Path, dim: int) -> None:
    model = reference_model(reference_cache, dim)
    cases = [*pairs(150, seed=31), ("The Cat!", "cat"), ("İstanbul'da", "in Istanbul"), ("", "something"),
             ("Ünïcödé ✓ text", "unicode text"), ("same words", "same words")]
    for output, reference in cases:
        got = embedding_similarity(make_record(output=output, reference=reference), dim=dim)
        assert got == pytest.approx(model.similarity(output, reference), abs=1e-6), (output, reference)
        assert -1.0 <= got <= 1.0 + 1e-6


def test_several_references_take_the_best(reference_cache: Path) -> None:
    model = reference_model(reference_cache, 256)
    for output, references in reference_sets(60, seed=32):
        record = make_record(output=output, reference=references if len(references) > 1 else references[0])
        best = max(model.similarity(output, reference) for reference in references)
        assert embedding_similarity(record) == pytest.approx(best, abs=1e-6)


def test_related_texts_score_above_unrelated_ones() -> None:
    related = embedding_similarity(make_record(output="the cat sat on the mat", reference="a cat was on the mat"))
    unrelated = embedding_similarity(make_record(output="the cat sat on the mat", reference="bond yields rose"))
    assert related > 0.8 > 0.3 > unrelated


def test_evaluate_embedded_with_an_interval_and_skips() -> None:
    rows = [{"id": "1", "output": "Paris is the capital of France.", "reference": "The capital of France is Paris."},
            {"id": "2", "output": "It rained all day in Lyon.", "reference": "Lyon had rain the whole day."},
            {"id": "3", "output": "The meeting moved to Tuesday.", "reference": "Stocks fell on Tuesday."},
            {"id": "4", "output": "No reference here."}]
    results = evalsi.evaluate(rows, ["embedding-similarity"], params={"embedding-similarity": {"dim": 128}})
    metric = results.metric("embedding-similarity")
    scored = [embedding_similarity(make_record(output=r["output"], reference=r["reference"]), dim=128)
              for r in rows[:3]]
    assert metric.n == 3 and metric.mean == pytest.approx(sum(scored) / 3, abs=1e-9)
    assert metric.ci.low < metric.mean < metric.ci.high and metric.skipped == 1


def test_a_dimension_it_does_not_have_is_refused_at_bind() -> None:
    with pytest.raises(BadInputError, match=r"param 'dim' must be one of \[64, 128, 256\], got 300"):
        evalsi.evaluate([{"output": "a", "reference": "a"}], ["embedding-similarity"],
                        params={"embedding-similarity": {"dim": 300}})


def test_without_wordllama_the_bind_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def without_wordllama(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "wordllama":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    embedding.wordllama_model.cache_clear()
    monkeypatch.setattr(builtins, "__import__", without_wordllama)
    try:
        with pytest.raises(BadInputError, match=r"evalsi\[embeddings\]"):
            evalsi.evaluate([{"output": "a", "reference": "a"}], ["embedding-similarity"])
    finally:
        monkeypatch.undo()
        embedding.wordllama_model.cache_clear()


def _awkward_texts(count: int, seed: int) -> list[str]:
    """Texts the tokenizer treats unusually: runs of spaces, leading and trailing spaces, "▁" itself, characters
    outside the vocabulary (byte fallback), combining marks, the tokenizer's added tokens, control characters."""
    rng = random.Random(seed)
    odd = [*"abcéèABC.,;:!?'\"-()[]$%&@#0129 \t\n", "中", "文", "ß", "ﬁ", "İ", "ı", "ς", "😀", "\u200b", "\u00a0",
           "…", "«", "\u0301", "’", "、", "１", "\u2581", "<s>", "</s>", "<unk>", "  ", "   ", "\U0010ffff", "\x01"]
    words = ["the ", "cat ", "sat ", "mat ", "a ", "dog's ", "U.S. ", "1,000 ", "3.14 ", "don't ", "  "]
    return ["".join(rng.choice(odd) if rng.random() < 0.5 else rng.choice(words)
                    for _ in range(rng.randint(0, 60))) for _ in range(count)]


@pytest.mark.parametrize("dim", [256, 64])
def test_the_batch_embedder_equals_wordllamas_embed_and_cosine_bit_for_bit(dim: int) -> None:
    """The batch form's ``Embedder`` (its own tokenizing by pieces, pooling and cosines) against WordLlama's
    ``embed`` and ``vector_similarity`` on the same model: the same float32 bits, on generated and awkward texts,
    empty ones and texts of thousands of tokens among them."""
    model = embedding.wordllama_model(dim)
    embedder = Embedder(model)
    assert embedder._exact, "the shipped tokenizer splits at spaces: the fast path must be the one tested"
    texts = [*_awkward_texts(1500, seed=33), *(text for pair in pairs(300, seed=34) for text in pair),
             "", " ", "word " * 1200 + "end", "\u2581\u2581x"]
    mine = embedder.embed(texts)
    theirs = model.embed(texts)
    assert mine.dtype == theirs.dtype == np.float32
    assert np.array_equal(mine.view(np.uint32), theirs.view(np.uint32))
    half = len(texts) // 2
    expected = [model.vector_similarity(theirs[i], theirs[half + i]).item() for i in range(half)]
    assert embedder.cosines(mine[:half], mine[half:2 * half]) == expected


def test_a_tokenizer_of_another_shape_is_left_to_wordllama() -> None:
    """A pre-tokenizer (or any normalizer but WordLlama's two edits) voids the argument for tokenizing by pieces:
    the embedder then calls WordLlama's own ``embed``."""
    from tokenizers import pre_tokenizers
    from wordllama.inference import WordLlamaInference

    shipped = embedding.wordllama_model(64)
    tokenizer = Tokenizer.from_str(shipped.tokenizer.to_str())
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    model = WordLlamaInference(shipped.embedding, tokenizer)
    embedder = Embedder(model)
    assert not embedder._exact
    texts = ["the cat  sat", "a dog's mat", ""]
    assert np.array_equal(embedder.embed(texts), model.embed(texts))
