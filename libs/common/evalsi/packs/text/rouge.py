"""ROUGE-1, ROUGE-2 and ROUGE-L as Google's rouge-score computes them (``RougeScorer``: its tokenizer, its
optional Porter stemming of words longer than three letters, the best reference by F-measure per type), equal to
it on the same texts (tests/packs/test_text_rouge.py). ROUGE-L's longest common subsequence is computed
bit-parallel (Hyyrö 2004) over Python integers instead of rouge-score's quadratic table."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any, Literal

from evalsi.evaluators import Output, evaluator
from evalsi.packs.text._common import check_stemmer, list_overlap, porter_stem, texts
from evalsi.v1alpha1.record_pb2 import Record

_WORD = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")
Measure = Literal["fmeasure", "precision", "recall"]
_TYPES = ("rouge1", "rouge2", "rougeL")


def rouge_tokens(text: str, stem: bool) -> list[str]:
    """rouge-score's tokenize: lowercase, runs of [a-z0-9] (everything else separates), stems of words longer
    than three letters when asked, kept only if still [a-z0-9]+."""
    words = _WORD.findall(text.lower())
    if not stem:
        return words
    stemmer = porter_stem()
    stemmed = (stemmer(word) if len(word) > 3 else word for word in words)
    return [word for word in stemmed if _VALID.match(word)]


def lcs_length(a: list[str], b: list[str]) -> int:
    """The length of the longest common subsequence of two word lists, by Hyyrö's bit-vector recurrence: one
    integer addition per word of ``b``, however long ``a`` is."""
    if not a or not b:
        return 0
    positions: dict[str, int] = {}
    for i, word in enumerate(a):
        positions[word] = positions.get(word, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for word in b:
        u = v & positions.get(word, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _fmeasure(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _ngram_scores(target: list[Any], prediction: list[Any]) -> tuple[float, float, float]:
    common = list_overlap(target, prediction)
    precision = common / max(len(prediction), 1)
    recall = common / max(len(target), 1)
    return precision, recall, _fmeasure(precision, recall)


def _lcs_scores(target: list[str], prediction: list[str]) -> tuple[float, float, float]:
    if not target or not prediction:
        return 0.0, 0.0, 0.0
    common = lcs_length(target, prediction)
    precision = common / len(prediction)
    recall = common / len(target)
    return precision, recall, _fmeasure(precision, recall)


def rouge_scores(prediction: str, targets: list[str], stem: bool = False) -> dict[str, tuple[float, float, float]]:
    """(precision, recall, F-measure) per ROUGE type, each from the target with the highest F-measure for that
    type (the first on a tie), as RougeScorer.score_multi picks them."""
    predicted = rouge_tokens(prediction, stem)
    bigrams = list(pairwise(predicted))
    best: dict[str, tuple[float, float, float]] = {}
    for target in targets:
        words = rouge_tokens(target, stem)
        scores = {"rouge1": _ngram_scores(words, predicted),
                  "rouge2": _ngram_scores(list(pairwise(words)), bigrams),
                  "rougeL": _lcs_scores(words, predicted)}
        for kind, score in scores.items():
            if kind not in best or score[2] > best[kind][2]:
                best[kind] = score
    return best


def _check(*, use_stemmer: bool = False, **_: object) -> None:
    check_stemmer(use_stemmer, "builtin/rouge")


@evaluator(
    "builtin/rouge",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # linear in the words (LCS: words times machine words of the reference); texts are bounded
    check=_check,
    outputs=[
        Output("rouge1", "number", min=0.0, max=1.0, description="ROUGE-1: unigram overlap."),
        Output("rouge2", "number", min=0.0, max=1.0, description="ROUGE-2: bigram overlap."),
        Output("rougeL", "number", min=0.0, max=1.0, description="ROUGE-L: longest common subsequence."),
    ],
    params={
        "use_stemmer": "Porter-stem words longer than three letters before matching, as rouge-score's "
        "use_stemmer (needs nltk: the text extra).",
        "measure": "Which figure each output is: fmeasure (rouge-score's usual report), precision or recall.",
    },
)
def rouge(record: Record, *, use_stemmer: bool = False, measure: Measure = "fmeasure") -> dict[str, float]:
    """ROUGE-1/2/L of the output against the reference (the best of a JSON-list reference's elements per type),
    equal to rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=...)."""
    output, references = texts(record)
    index = ("precision", "recall", "fmeasure").index(measure)
    scores = rouge_scores(output, references, use_stemmer)
    return {kind: scores[kind][index] for kind in _TYPES}


EVALUATORS = (rouge,)
