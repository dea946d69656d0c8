"""builtin/bleu and builtin/corpus-bleu equal sacrebleu's sentence_bleu and corpus_bleu, over generated sentence
pairs (unicode, punctuation, numbers, entities, empty and long texts), every tokenizer and smoothing method,
one to four references; params are checked at bind; records without a reference are skipped."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
import sacrebleu
from text_cases import pairs, reference_sets

import evalsi
from evalsi.errors import BadInputError
from evalsi.evaluators import normalize_scores
from evalsi.packs.text.bleu import bleu, corpus_bleu, sentence_bleu
from evalsi.records import make_record

logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # its advice to use effective order, which it does here
SETTINGS = list(itertools.product(["13a", "none", "char"], ["exp", "floor", "add-k", "none"], [False, True]))


@pytest.mark.parametrize(("tokenize", "smooth_method", "lowercase"), SETTINGS)
def test_sentence_bleu_equals_sacrebleu(tokenize: str, smooth_method: str, lowercase: bool) -> None:
    cases = reference_sets(120, seed=len(tokenize) + len(smooth_method))
    for hypothesis, references in cases:
        ours = sentence_bleu(hypothesis, references, tokenize=tokenize, smooth_method=smooth_method,
                             lowercase=lowercase)
        theirs = sacrebleu.sentence_bleu(hypothesis, references, tokenize=tokenize, smooth_method=smooth_method,
                                         lowercase=lowercase).score
        assert ours == theirs, (hypothesis, references)
    assert any(0 < sentence_bleu(h, r, tokenize=tokenize) < 100 for h, r in cases)


@pytest.mark.parametrize(("smooth_method", "smooth_value"), [("floor", 0.5), ("add-k", 2.0), ("add-k", 0.25)])
def test_smooth_value_equals_sacrebleu(smooth_method: str, smooth_value: float) -> None:
    for hypothesis, reference in pairs(150, seed=3):
        ours = sentence_bleu(hypothesis, [reference], smooth_method=smooth_method, smooth_value=smooth_value)
        theirs = sacrebleu.sentence_bleu(hypothesis, [reference], smooth_method=smooth_method,
                                         smooth_value=smooth_value).score
        assert ours == theirs


def test_known_values() -> None:
    assert sentence_bleu("the cat sat on the mat", ["the cat sat on the mat"]) == pytest.approx(100.0)
    assert sentence_bleu("", ["the cat"]) == 0.0
    assert sentence_bleu("dog", ["cat"]) == 0.0
    # The closest reference length, the shorter on a tie: 3 words against references of 2 and 4 words.
    three = sacrebleu.sentence_bleu("a b c", ["a b", "a b c d"])
    assert three.ref_len == 2 and sentence_bleu("a b c", ["a b", "a b c d"]) == three.score


def _padded(references: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu's reference streams from per-record reference lists: None where a record has fewer."""
    width = max(len(r) for r in references)
    return [[r[i] if i < len(r) else None for r in references] for i in range(width)]


@pytest.mark.parametrize(("tokenize", "smooth_method", "lowercase"), SETTINGS[::3])
def test_corpus_bleu_equals_sacrebleu(tokenize: str, smooth_method: str, lowercase: bool) -> None:
    cases = reference_sets(200, seed=7)
    params = {"tokenize": tokenize, "smooth_method": smooth_method, "lowercase": lowercase}
    mapped = [corpus_bleu.mapper(make_record(output=h, reference=r if len(r) > 1 else r[0]), **params)
              for h, r in cases if h]
    kept = [(h, r) for h, r in cases if h]
    theirs = sacrebleu.corpus_bleu([h for h, _ in kept], _padded([r for _, r in kept]), tokenize=tokenize,
                                   smooth_method=smooth_method, lowercase=lowercase).score
    assert corpus_bleu(mapped, **params) == theirs
    assert 0 < theirs < 100


def _score(ev: Any, record: Any, **params: Any) -> dict[str, float]:
    bound = ev.bind(params)
    defaults = {p.name: p.default for p in ev.params if not p.required}
    return {s.name: s.number for s in normalize_scores(ev, ev(record, **{**defaults, **bound.params}))}


def test_json_list_reference_is_several_references() -> None:
    record = make_record(output="the cat is on the mat", reference=["there is a cat on the mat", "a cat is on a mat"])
    expected = sacrebleu.sentence_bleu("the cat is on the mat", ["there is a cat on the mat", "a cat is on a mat"])
    assert _score(bleu, record)["bleu"] == expected.score


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"tokenize": "ja-mecab"}, "tokenize"),
        ({"smooth_method": "floor", "smooth_value": 0.0}, "smooth_value"),
        ({"smooth_method": "exp", "smooth_value": 0.5}, "floor or add-k"),
        ({"smoothing": "exp"}, "smoothing"),
    ],
)
def test_bad_params_are_refused_naming_them(params: dict[str, Any], message: str) -> None:
    for ev in (bleu, corpus_bleu):
        with pytest.raises(BadInputError, match=message):
            ev.bind(params)


def test_evaluate_embedded_sentence_and_corpus() -> None:
    cases = [(h, r) for h, r in reference_sets(60, seed=11) if h.strip() and all(x.strip() for x in r)]
    rows: list[dict[str, Any]] = [{"id": f"r{i}", "output": h, "reference": r if len(r) > 1 else r[0]}
                                  for i, (h, r) in enumerate(cases)]
    rows.append({"id": "no-reference", "output": "a cat"})
    results = evalsi.evaluate(rows, ["bleu", "corpus-bleu"])
    sentence = results.metric("bleu")
    assert sentence.n == len(cases) and sentence.skipped == 1
    expected_mean = sum(sacrebleu.sentence_bleu(h, r).score for h, r in cases) / len(cases)
    assert sentence.mean == pytest.approx(expected_mean)
    skipped = [r for r in results if r.record_id == "no-reference" and r.evaluator == "bleu"]
    assert skipped and "reference" in skipped[0].reason
    corpus = results.metric("corpus-bleu")
    expected = sacrebleu.corpus_bleu([h for h, _ in cases], _padded([r for _, r in cases])).score
    assert corpus.mean == pytest.approx(expected, rel=1e-12)
    assert corpus.ci.low < corpus.mean < corpus.ci.high
