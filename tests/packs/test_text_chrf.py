"""builtin/chrf and builtin/corpus-chrf equal sacrebleu's CHRF sentence_score and corpus_score (chrF and chrF++),
over generated sentence pairs with one to four references; params are checked at bind."""

from __future__ import annotations

from typing import Any

import pytest
from sacrebleu.metrics import CHRF
from text_cases import reference_sets

import evalsi
from evalsi.errors import BadInputError
from evalsi.packs.text.chrf import chrf, corpus_chrf, f_score, segment_stats
from evalsi.records import make_record

SETTINGS = [
    {"char_order": 6, "word_order": 0, "beta": 2.0, "lowercase": False, "whitespace": False},
    {"char_order": 6, "word_order": 2, "beta": 2.0, "lowercase": False, "whitespace": False},
    {"char_order": 4, "word_order": 1, "beta": 1.0, "lowercase": True, "whitespace": False},
    {"char_order": 6, "word_order": 0, "beta": 3.0, "lowercase": False, "whitespace": True},
    {"char_order": 1, "word_order": 4, "beta": 0.5, "lowercase": True, "whitespace": True},
]


def _reference(settings: dict[str, Any]) -> CHRF:
    return CHRF(**settings)


@pytest.mark.parametrize("settings", SETTINGS)
def test_sentence_chrf_equals_sacrebleu(settings: dict[str, Any]) -> None:
    metric = _reference(settings)
    order = settings["char_order"] + settings["word_order"]
    cases = reference_sets(150, seed=settings["char_order"])
    for hypothesis, references in cases:
        ours = f_score(segment_stats(hypothesis, references, **settings), order, settings["beta"])
        assert ours == metric.sentence_score(hypothesis, references).score, (hypothesis, references)


@pytest.mark.parametrize("settings", SETTINGS[:3])
def test_corpus_chrf_equals_sacrebleu(settings: dict[str, Any]) -> None:
    cases = [(h, r) for h, r in reference_sets(150, seed=5)]
    mapped = [corpus_chrf.mapper(make_record(output=h, reference=r if len(r) > 1 else r[0]), **settings)
              for h, r in cases]
    width = max(len(r) for _, r in cases)
    streams = [[r[i] if i < len(r) else None for _, r in cases] for i in range(width)]
    theirs = _reference(settings).corpus_score([h for h, _ in cases], streams).score
    assert corpus_chrf(mapped, **settings) == theirs
    assert 0 < theirs < 100


def test_known_values() -> None:
    assert chrf(make_record(output="the cat", reference="the cat"), char_order=6, word_order=0, beta=2.0,
                lowercase=False, whitespace=False) == pytest.approx(100.0)
    assert f_score(segment_stats("", ["the cat"], char_order=6, word_order=0, beta=2, lowercase=False,
                                 whitespace=False), 6, 2) == 0.0


@pytest.mark.parametrize(
    ("params", "message"),
    [({"char_order": 0}, "char_order"), ({"word_order": 9}, "word_order"), ({"beta": 0.0}, "beta")],
)
def test_bad_params_are_refused_naming_them(params: dict[str, Any], message: str) -> None:
    for ev in (chrf, corpus_chrf):
        with pytest.raises(BadInputError, match=f"{ev.name}: param '{message}'"):
            ev.bind(params)


def test_evaluate_embedded_chrf_plus_plus() -> None:
    cases = [(h, r) for h, r in reference_sets(40, seed=9) if h.strip() and all(x.strip() for x in r)]
    rows = [{"id": f"r{i}", "output": h, "reference": r if len(r) > 1 else r[0]} for i, (h, r) in enumerate(cases)]
    spec = [{"ref": "chrf", "params": {"word_order": 2}}, {"ref": "corpus-chrf", "params": {"word_order": 2}}]
    results = evalsi.evaluate(rows, spec)
    metric = CHRF(word_order=2)
    expected = sum(metric.sentence_score(h, r).score for h, r in cases) / len(cases)
    assert results.metric("chrf").mean == pytest.approx(expected)
    width = max(len(r) for _, r in cases)
    streams = [[r[i] if i < len(r) else None for _, r in cases] for i in range(width)]
    corpus = results.metric("corpus-chrf")
    assert corpus.mean == pytest.approx(CHRF(word_order=2).corpus_score([h for h, _ in cases], streams).score)
    assert corpus.ci.low < corpus.mean < corpus.ci.high
