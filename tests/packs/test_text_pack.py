"""The text pack as a whole: registered opt-in through its entry point, every evaluator's skips (no reference, an
empty reference list, a text or references past the bounds) with their reasons, and the stemmer's missing
dependency refused at bind naming the install."""

from __future__ import annotations

import sys

import pytest

import evalsi
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.packs.text import _common
from evalsi.packs.text.bleu import bleu
from evalsi.packs.text.meteor import meteor
from evalsi.packs.text.rouge import rouge
from evalsi.v1alpha1.score_pb2 import OUTCOME_SKIPPED

NAMES = ["bleu", "corpus-bleu", "chrf", "corpus-chrf", "rouge", "meteor", "token-f1", "embedding-similarity",
         "bertscore"]


def test_the_pack_is_registered_opt_in() -> None:
    registry = Registry.from_entry_points()
    pack = registry.packs["text"]
    assert not pack.default_on
    assert sorted(ev.short_name for ev in pack.evaluators) == sorted(NAMES)
    assert all(ev.version == "1.0.0" and ev.pack == "text" for ev in pack.evaluators)
    assert all(set(ev.requires) == {"output", "reference"} for ev in pack.evaluators)


def test_records_without_what_a_metric_needs_are_skipped_with_the_reason() -> None:
    rows = [
        {"id": "ok", "output": "the cat sat on the mat", "reference": "the cat sat on a mat"},
        {"id": "ok2", "output": "a dog barked", "reference": ["the dog barked", "a dog barks"]},
        {"id": "no-reference", "output": "a cat"},
        {"id": "empty-list", "output": "a cat", "reference": []},
        {"id": "too-long", "output": "word " * (_common.MAX_CHARS // 5 + 1), "reference": "word"},
        {"id": "too-many", "output": "word", "reference": ["word " * (_common.MAX_CHARS // 5)] * 3},
    ]
    results = evalsi.evaluate(rows, NAMES)
    reasons = {(r.record_id, r.evaluator): r.reason for r in results if r.record_id not in ("ok", "ok2")}
    for name in ("bleu", "chrf", "rouge", "meteor", "token-f1", "embedding-similarity", "bertscore"):
        assert "reference" in reasons[("no-reference", name)]
        assert "empty JSON list" in reasons[("empty-list", name)]
        assert f"at most {_common.MAX_CHARS}" in reasons[("too-long", name)]
        assert f"at most {_common.MAX_REFERENCE_CHARS}" in reasons[("too-many", name)]
    for metric in ("bleu", "chrf", "rouge.rouge1", "meteor", "token-f1", "corpus-bleu", "corpus-chrf", "bertscore.f1"):
        assert results.metric(metric).n == 2, metric
    assert results.metric("corpus-bleu").skipped == 4


def test_stemming_without_nltk_is_refused_at_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nltk.stem.porter", None)  # as if nltk were not installed
    _common.porter_stem.cache_clear()
    try:
        with pytest.raises(BadInputError, match=r"evaluator builtin/meteor: .*evalsi\[text\]"):
            meteor.bind({})
        with pytest.raises(BadInputError, match=r"evaluator builtin/rouge: .*evalsi\[text\]"):
            rouge.bind({"use_stemmer": True})
        rouge.bind({})
        bleu.bind({})
    finally:
        _common.porter_stem.cache_clear()


def test_a_corpus_metric_over_no_scorable_record_is_skipped_not_zero() -> None:
    results = evalsi.evaluate([{"id": "a", "output": "a cat"}, {"id": "b", "output": "a dog"}],
                              ["corpus-bleu", "corpus-chrf"])
    assert sorted(r.evaluator for r in results) == ["corpus-bleu", "corpus-chrf"]
    for result in results:
        assert result.outcome == OUTCOME_SKIPPED and not result.scores
        assert "no record has both an output and a reference" in result.reason
