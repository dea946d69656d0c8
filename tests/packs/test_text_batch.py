"""The text pack's batch forms (evaluator(batch=...) of bleu, chrf, rouge, meteor, token-f1 and
embedding-similarity) decide each record exactly (==, bit for bit) as the evaluator's function does: over 2,000
generated pairs and the edge cases (empty, whitespace-only, punctuation, unicode, texts at the pack's length bound,
a vocabulary too large for one key per n-gram), every param setting; None exactly for the records the function
must decide (an empty text, a text over the bound, one holding the batch separator), where the function skips or
reads the content itself; and evaluate() with them gives the result messages the function alone gives."""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from text_cases import pairs

import evalsi
from evalsi.errors import SkipRecord
from evalsi.evaluators import Evaluator
from evalsi.packs.text import _ngrams
from evalsi.packs.text._common import BATCH_CHARS, MAX_CHARS, SEP
from evalsi.packs.text.bleu import (
    _split_after,
    bleu,
    bleu_batch,
    corpus_bleu,
    period_comma_after,
    sentence_bleu,
)
from evalsi.packs.text.chrf import chrf, chrf_batch, corpus_chrf
from evalsi.packs.text.embedding import embedding_batch, embedding_similarity
from evalsi.packs.text.meteor import meteor, meteor_batch
from evalsi.packs.text.rouge import rouge, rouge_batch
from evalsi.packs.text.token_f1 import token_f1, token_f1_batch
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record


def _long(rng: random.Random, words: list[str], limit: int) -> str:
    text = ""
    while len(text) < limit - 12:
        text += rng.choice(words) + rng.choice([" ", " ", ". ", ", "])
    return text[:limit]


def _cases() -> list[tuple[str, str]]:
    """The generated pairs and edge cases, texts at and over the length bound, a large vocabulary (about 6,000
    distinct words: 13 bits an id, so 4-gram keys are renumbered), and texts holding the separator."""
    rng = random.Random(7)
    out = pairs(2000, seed=11)
    vocabulary = [f"w{index}x" for index in range(6000)]
    for _ in range(300):
        reference = [rng.choice(vocabulary) for _ in range(rng.randint(5, 40))]
        output = [w if rng.random() > 0.3 else rng.choice(vocabulary) for w in reference]
        out.append((" ".join(output), " ".join(reference)))
    common = ["the", "cat", "sat", "on", "mat", "dog", "café", "東京", "3.14", "well-known"]
    out += [(_long(rng, common, MAX_CHARS), _long(rng, common, MAX_CHARS)),
            (_long(rng, common, 3000), _long(rng, common, 400)),
            (_long(rng, common, MAX_CHARS + 1), "the cat"), ("the cat", _long(rng, common, MAX_CHARS + 1)),
            (f"the{SEP}cat", "the cat"), ("the cat", f"the {SEP} cat"), ("ΟΔΟΣ ΣΑΣ.", "οδος σας"),
            ("İstanbul ǅ ﬁne", "i̇stanbul ǆ fine"), ("\n\t", "x"), ("x", " \u00a0 ")]
    return out


CASES = _cases()
RECORDS = [make_record(output=output, reference=reference) for output, reference in CASES]
COLUMNS = {"output": [output for output, _ in CASES], "reference": [reference for _, reference in CASES]}
# The records the function must decide: an empty text, a text over the bound, a text holding the separator.
UNCOVERED = {index for index, (output, reference) in enumerate(CASES)
             if not output or not reference or max(len(output), len(reference)) > MAX_CHARS
             or SEP in output + reference}


def _rouge_tuple(value: dict[str, float]) -> tuple[float, float, float]:
    return value["rouge1"], value["rouge2"], value["rougeL"]


def _check(evaluator: Evaluator, batch: Callable[..., list[Any]], params: dict[str, Any],
           shape: Callable[[Any], Any] = lambda value: value, uncovered: set[int] = UNCOVERED) -> None:
    decided = batch(COLUMNS, **params)
    assert len(decided) == len(RECORDS)
    assert {index for index, entry in enumerate(decided) if entry is None} == uncovered
    scored = 0
    for record, entry in zip(RECORDS, decided, strict=True):
        try:
            expected = shape(evaluator.fn(record, **params))
        except SkipRecord:
            assert entry is None, record.output.text[:80]
            continue
        if entry is not None:
            assert entry == expected, (record.output.text[:80], record.reference.text[:80], params)
            assert type(entry) is type(expected)
            scored += 1
    assert scored == len(RECORDS) - len(uncovered)


@pytest.mark.parametrize(
    ("tokenize", "smooth_method", "smooth_value", "lowercase"),
    [(tokenize, smooth, None, lowercase)
     for tokenize, smooth, lowercase in itertools.product(["13a", "none", "char"], ["exp", "floor", "add-k", "none"],
                                                          [False, True])]
    + [("13a", "floor", 0.5, False), ("13a", "add-k", 2.0, True), ("char", "add-k", 0.25, False)],
)
def test_bleu_batch_equals_the_function(
    tokenize: str, smooth_method: str, smooth_value: float | None, lowercase: bool
) -> None:
    _check(bleu, bleu_batch, {"tokenize": tokenize, "smooth_method": smooth_method, "smooth_value": smooth_value,
                              "lowercase": lowercase})


@pytest.mark.parametrize(
    ("char_order", "word_order", "beta", "lowercase", "whitespace"),
    [(6, 0, 2.0, False, False), (6, 2, 2.0, False, False), (1, 0, 1.0, True, False), (10, 4, 3.0, True, True),
     (4, 1, 0.5, False, True), (10, 0, 2.0, False, False)],
)
def test_chrf_batch_equals_the_function(
    char_order: int, word_order: int, beta: float, lowercase: bool, whitespace: bool
) -> None:
    _check(chrf, chrf_batch, {"char_order": char_order, "word_order": word_order, "beta": beta,
                              "lowercase": lowercase, "whitespace": whitespace})


@pytest.mark.parametrize(("use_stemmer", "measure"),
                         list(itertools.product([False, True], ["fmeasure", "precision", "recall"])))
def test_rouge_batch_equals_the_function(use_stemmer: bool, measure: str) -> None:
    _check(rouge, rouge_batch, {"use_stemmer": use_stemmer, "measure": measure}, _rouge_tuple)


@pytest.mark.parametrize(
    ("tokenize", "alpha", "beta", "gamma"),
    [("whitespace", 0.9, 3.0, 0.5), ("13a", 0.9, 3.0, 0.5), ("whitespace", 0.5, 1.0, 0.9), ("13a", 0.1, 0.0, 0.0)],
)
def test_meteor_batch_equals_the_function(tokenize: str, alpha: float, beta: float, gamma: float) -> None:
    _check(meteor, meteor_batch, {"tokenize": tokenize, "alpha": alpha, "beta": beta, "gamma": gamma})


def test_meteor_batch_leaves_synonyms_to_the_function() -> None:
    assert meteor_batch(COLUMNS, synonyms=True) == [None] * len(RECORDS)


@pytest.mark.parametrize("dim", [256, 64])
def test_embedding_batch_equals_the_function(dim: int) -> None:
    """Long texts too: the batch form's embedder adds each text's own token rows, never padding to the longest."""
    pytest.importorskip("wordllama", reason="the embeddings extra is in the dev install")
    assert any(max(len(output), len(reference)) > 2_000 for output, reference in CASES)
    _check(embedding_similarity, embedding_batch, {"dim": dim})


def test_token_f1_batch_equals_the_function() -> None:
    _check(token_f1, token_f1_batch, {})


def test_13a_period_comma_runs_equal_sacrebleus_rule() -> None:
    """13a's ([^0-9])([.,]) rule, applied from the periods and commas (bleu.period_comma_after), gives the regex's
    text on every string of up to 7 characters over digits, periods, commas, letters and spaces, and on longer
    random ones."""
    rule = re.compile(r"([^0-9])([\.,])")
    rng = random.Random(3)
    strings = ["".join(chars) for size in range(8) for chars in itertools.product(".,0a ", repeat=size)]
    strings += ["".join(rng.choice(".,,9a -\n") for _ in range(rng.randint(8, 40))) for _ in range(5000)]
    for text in strings:
        assert period_comma_after(text) == rule.sub(_split_after, text), repr(text)


@pytest.mark.parametrize(("id_bits", "orders", "one_sort"),
                         [(20, 4, False), (13, 2, False), (6, 6, True), (11, 4, True)])
def test_clipped_matches_equal_counters(id_bits: int, orders: int, one_sort: bool) -> None:
    """Each record's matches equal Counter's, by either path: one sort an order (ids of 20 bits, whose keys are
    renumbered from order 2 on; two orders, which one sort does not make cheaper), and one sort for all orders
    where every order's key fits 63 bits (6 orders of 6-bit ids, as chrF's characters; 4 of 11-bit ids)."""
    rng = random.Random(5 + id_bits)
    high = 1 << id_bits

    def text() -> list[int]:
        return [rng.randrange(1, high) if rng.random() < 0.5 else rng.randrange(1, 4)
                for _ in range(rng.randint(0, 30))]

    def grams(ids: list[int], n: int) -> Counter[tuple[int, ...]]:
        return Counter(tuple(ids[i:i + n]) for i in range(len(ids) - n + 1))

    texts = [(text(), text()) for _ in range(300)]
    streams = []
    for side in range(2):
        flat: list[int] = []
        for index, pair in enumerate(texts):
            flat += ([0] if index else []) + pair[side]
        streams.append(_ngrams.Stream.of(np.array(flat, dtype=np.int64), len(texts)))
    bits = (high + 1).bit_length()
    assert (orders > 2 and len(texts).bit_length() + orders * bits + 1 <= 63) == one_sort
    matched = _ngrams.clipped_matches(streams[0], streams[1], high, len(texts), orders)
    for n in range(1, orders + 1):
        assert matched[n - 1].tolist() == [(grams(h, n) & grams(r, n)).total() for h, r in texts]
    assert any(matched[1])


def test_a_batch_decides_records_up_to_its_character_budget() -> None:
    """Texts over BATCH_CHARS in all: the records after the budget runs out are the function's (None)."""
    text = "the cat sat on the mat " * 400
    count = BATCH_CHARS // (2 * len(text)) + 5
    decided = bleu_batch({"output": [text] * count, "reference": [text] * count})
    assert decided[:count - 5] == [sentence_bleu(text, [text])] * (count - 5)
    assert decided[count - 5:] == [None] * 5


def test_rouge_batch_past_the_vectorized_lcs_rows_equals_the_function() -> None:
    """Past 8,192 records in one call, ROUGE-L's LCS is the function's own, with the same figures."""
    rng = random.Random(9)
    words = ["a", "b", "c", "d", "e"]
    pairs_ = [(" ".join(rng.choices(words, k=rng.randint(1, 6))), " ".join(rng.choices(words, k=rng.randint(1, 6))))
              for _ in range(8300)]
    decided = rouge_batch({"output": [o for o, _ in pairs_], "reference": [r for _, r in pairs_]})
    for (output, reference), entry in zip(pairs_, decided, strict=True):
        assert entry == _rouge_tuple(rouge.fn(make_record(output=output, reference=reference)))


def test_a_batch_of_records_none_covers_is_all_none() -> None:
    columns = {"output": ["", "x", f"a{SEP}"], "reference": ["x", "", "a"]}
    for batch in (bleu_batch, chrf_batch, rouge_batch, token_f1_batch, meteor_batch):
        assert batch(columns) == [None, None, None]


# Through evalsi.evaluate() (the engine's column path): rows of every kind a batch form meets (text pairs, a
# JSON-list reference, an empty output, a chat output, a missing reference, a text over the bound), each metric's
# results the same messages as the same evaluator's without its batch form (the function on every record).
_ROWS: list[dict[str, Any]] = [
    *({"id": f"r{index}", "output": output, "reference": reference}
      for index, (output, reference) in enumerate(pairs(300, seed=21))),
    {"id": "list", "output": "the cat sat", "reference": ["a cat sat", "the cat sat on"]},
    {"id": "empty-output", "output": "", "reference": "the cat"},
    {"id": "chat", "output": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "the cat sat"}],
     "reference": "the cat sat"},
    {"id": "no-reference", "output": "the cat"},
    {"id": "too-long", "output": "cat " * (MAX_CHARS // 4 + 1), "reference": "the cat"},
]


@pytest.mark.parametrize(
    ("evaluator", "params"),
    [(bleu, {}), (bleu, {"tokenize": "char", "smooth_method": "add-k", "lowercase": True}), (chrf, {}),
     (chrf, {"word_order": 2, "lowercase": True}), (rouge, {}), (rouge, {"use_stemmer": True, "measure": "recall"}),
     (token_f1, {}), (meteor, {}), (meteor, {"tokenize": "13a", "gamma": 0.3}), (embedding_similarity, {})],
)
def test_evaluate_with_the_batch_form_gives_the_functions_results(
    evaluator: Evaluator, params: dict[str, Any]
) -> None:
    if evaluator is embedding_similarity:
        pytest.importorskip("wordllama", reason="the embeddings extra is in the dev install")
    batch, fn = evaluator.batch, evaluator.fn
    assert batch is not None
    decided: list[int] = []
    called: list[str] = []

    def counted_batch(texts: dict[str, list[str]], **values: Any) -> list[Any]:
        entries = batch(texts, **values)
        decided.append(sum(entry is not None for entry in entries))
        return entries

    def counted_fn(record: Record, **values: Any) -> Any:
        called.append(record.id)
        return fn(record, **values)

    counted = dataclasses.replace(evaluator, batch=counted_batch, fn=counted_fn)
    batched = evalsi.evaluate(_ROWS, [counted.bind(params)])
    # The batch form decided the text pairs and the function only the rest (but the row without a reference, which
    # the engine skips): the engine took the batch form's entries.
    assert sum(decided) >= 280 and len(called) == len(_ROWS) - sum(decided) - 1
    assert {"list", "empty-output", "chat", "too-long"} <= set(called)
    alone = evalsi.evaluate(_ROWS, [dataclasses.replace(evaluator, batch=None).bind(params)])

    def rows(results: Any) -> dict[str, bytes]:
        out = {}
        for result in results:
            result.ClearField("duration")
            out[result.record_id] = result.SerializeToString(deterministic=True)
        return out

    ours, theirs = rows(batched), rows(alone)
    assert ours == theirs
    assert len(ours) == len(_ROWS)
    summary = next(iter(batched.summaries.values()))
    assert summary.n == len(_ROWS) - 2 and summary.skipped == 2  # no reference; too long


@pytest.mark.parametrize(("ev", "params"), [
    (corpus_bleu, {}), (corpus_bleu, {"tokenize": "char", "lowercase": True}), (corpus_bleu, {"tokenize": "zh"}),
    (corpus_chrf, {}), (corpus_chrf, {"word_order": 2, "lowercase": True, "whitespace": True}),
    (corpus_chrf, {"char_order": 3, "word_order": 1}),
])
def test_corpus_map_batch_equals_the_mapper(ev: Evaluator, params: dict[str, Any]) -> None:
    """corpus-bleu's and corpus-chrf's ``map_batch``: each record's counts equal to the mapper's, same ints; None
    for exactly the records the mapper must decide (it skips the empty and the over-long ones)."""
    assert ev.map_batch is not None and ev.mapper is not None
    mapped = ev.map_batch(COLUMNS, **params)
    assert {index for index, value in enumerate(mapped) if value is None} == UNCOVERED
    for record, value in zip(RECORDS, mapped, strict=True):
        if value is not None:
            expected = ev.mapper(record, **params)
            assert value == expected and all(type(v) is int for v in value), record.output.text[:80]


@pytest.mark.parametrize("ev", [corpus_bleu, corpus_chrf])
def test_corpus_metrics_through_evaluate_equal_sacrebleu(ev: Evaluator) -> None:
    """With the batch mapper on the runner's path, the whole figure is still sacrebleu's corpus score."""
    import sacrebleu
    from sacrebleu.metrics import CHRF

    kept = [(h, r) for h, r in CASES[:600] if h.strip() and r.strip() and SEP not in h + r]
    rows = [{"id": str(i), "output": h, "reference": r} for i, (h, r) in enumerate(kept)]
    got = evalsi.evaluate(rows, [ev]).metric(ev.name.split("/")[1])
    hyps, refs = [h for h, _ in kept], [[r for _, r in kept]]
    expected = (sacrebleu.corpus_bleu(hyps, refs) if ev is corpus_bleu else CHRF().corpus_score(hyps, refs)).score
    assert got.mean == expected and got.ci.low < got.mean < got.ci.high
