"""builtin/rouge equals rouge-score's RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=...) (score, and
score_multi for several references), precision, recall and F-measure, over generated sentence pairs; the
bit-parallel LCS equals the textbook table."""

from __future__ import annotations

import random
from typing import Any

import pytest
from rouge_score import rouge_scorer
from text_cases import pairs, reference_sets

import evalsi
from evalsi.evaluators import normalize_scores
from evalsi.packs.text.rouge import lcs_length, rouge, rouge_scores
from evalsi.records import make_record

TYPES = ["rouge1", "rouge2", "rougeL"]


def _table_lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def test_bit_parallel_lcs_equals_the_table() -> None:
    rng = random.Random(0)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 90))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 90))]
        assert lcs_length(a, b) == _table_lcs(a, b)


@pytest.mark.parametrize("stem", [False, True])
def test_rouge_equals_rouge_score(stem: bool) -> None:
    scorer = rouge_scorer.RougeScorer(TYPES, use_stemmer=stem)
    for hypothesis, reference in pairs(300, seed=int(stem)):
        ours = rouge_scores(hypothesis, [reference], stem)
        theirs = scorer.score(reference, hypothesis)
        assert {k: ours[k] for k in TYPES} == {k: tuple(theirs[k]) for k in TYPES}, (hypothesis, reference)


@pytest.mark.parametrize("stem", [False, True])
def test_several_references_equal_score_multi(stem: bool) -> None:
    scorer = rouge_scorer.RougeScorer(TYPES, use_stemmer=stem)
    for hypothesis, references in reference_sets(200, seed=2):
        ours = rouge_scores(hypothesis, references, stem)
        theirs = scorer.score_multi(references, hypothesis)
        assert {k: ours[k] for k in TYPES} == {k: tuple(theirs[k]) for k in TYPES}


def _score(record: Any, **params: Any) -> dict[str, float]:
    bound = rouge.bind(params)
    defaults = {p.name: p.default for p in rouge.params if not p.required}
    return {s.name: s.number for s in normalize_scores(rouge, rouge(record, **{**defaults, **bound.params}))}


@pytest.mark.parametrize("measure", ["fmeasure", "precision", "recall"])
def test_measure_param_reports_that_figure(measure: str) -> None:
    output, reference = "the quick brown fox jumped over dogs", "a quick brown fox jumps over the lazy dog"
    theirs = rouge_scorer.RougeScorer(TYPES, use_stemmer=True).score(reference, output)
    ours = _score(make_record(output=output, reference=reference), use_stemmer=True, measure=measure)
    assert ours == {k: getattr(theirs[k], measure) for k in TYPES}
    assert _score(make_record(output=output, reference=reference), measure=measure)["rouge1"] < ours["rouge1"]


def test_evaluate_embedded() -> None:
    cases = [(h, r) for h, r in pairs(50, seed=4) if h.strip() and r.strip()]
    rows = [{"id": f"r{i}", "output": h, "reference": r} for i, (h, r) in enumerate(cases)]
    rows.append({"id": "no-output", "reference": "a cat"})
    results = evalsi.evaluate(rows, [{"ref": "rouge", "params": {"use_stemmer": True}}])
    scorer = rouge_scorer.RougeScorer(TYPES, use_stemmer=True)
    for kind in TYPES:
        metric = results.metric(f"rouge.{kind}")
        assert metric.n == len(cases) and metric.skipped == 1
        expected = sum(scorer.score(r, h)[kind].fmeasure for h, r in cases) / len(cases)
        assert metric.mean == pytest.approx(expected)
