"""ROUGE-1, ROUGE-2 and ROUGE-L as Google's rouge-score computes them (``RougeScorer``: its tokenizer, its
optional Porter stemming of words longer than three letters, the best reference by F-measure per type), equal to
it on the same texts (tests/packs/test_text_rouge.py). ROUGE-L's longest common subsequence is computed
bit-parallel (Hyyrö 2004) over Python integers instead of rouge-score's quadratic table."""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from typing import Any, Literal

from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.packs.text._common import SEP, check_stemmer, covered, list_overlap, porter_stem, texts
from evalsi.v1alpha1.record_pb2 import Record

_WORD = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")
_WORD_OR_SEP = re.compile(rf"[a-z0-9]+|{SEP}")
Measure = Literal["fmeasure", "precision", "recall"]
_TYPES = ("rouge1", "rouge2", "rougeL")
_MEASURES = ("precision", "recall", "fmeasure")  # the order of each type's scores


def _stemmed(word: str, stemmer: Callable[[str], str]) -> str:
    return stemmer(word) if len(word) > 3 else word


def rouge_tokens(text: str, stem: bool) -> list[str]:
    """rouge-score's tokenize: lowercase, runs of [a-z0-9] (everything else separates), stems of words longer
    than three letters when asked, kept only if still [a-z0-9]+."""
    words = _WORD.findall(text.lower())
    if not stem:
        return words
    stemmer = porter_stem()
    stemmed = (_stemmed(word, stemmer) for word in words)
    return [word for word in stemmed if _VALID.match(word)]


def joined_rouge_tokens(texts: list[str], stem: bool) -> list[str]:
    """``rouge_tokens`` of every text in turn, SEP between two texts' tokens: the words of the texts joined by
    " SEP " (each lowercased alone) found in one pass, each distinct word stemmed and checked once."""
    words = _WORD_OR_SEP.findall(f" {SEP} ".join(map(str.lower, texts)))
    if not stem:
        return words
    stemmer = porter_stem()
    kept = {word: stemmed if _VALID.match(stemmed := _stemmed(word, stemmer)) else ""
            for word in dict.fromkeys(words)}
    kept[SEP] = SEP
    return list(filter(None, map(kept.__getitem__, words)))


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


def _counted_scores(common: int, predicted: int, target: int) -> tuple[float, float, float]:
    precision = common / max(predicted, 1)
    recall = common / max(target, 1)
    return precision, recall, _fmeasure(precision, recall)


def _ngram_scores(target: list[Any], prediction: list[Any]) -> tuple[float, float, float]:
    return _counted_scores(list_overlap(target, prediction), len(prediction), len(target))


def _lcs_counted(common: int, predicted: int, target: int) -> tuple[float, float, float]:
    if not target or not predicted:
        return 0.0, 0.0, 0.0
    precision = common / predicted
    recall = common / target
    return precision, recall, _fmeasure(precision, recall)


def _lcs_scores(target: list[str], prediction: list[str]) -> tuple[float, float, float]:
    return _lcs_counted(lcs_length(target, prediction), len(prediction), len(target))


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


def _split(tokens: list[str]) -> list[list[str]]:
    """A SEP-separated token list as one list a record."""
    out: list[list[str]] = [[]]
    for token in tokens:
        if token == SEP:
            out.append([])
        else:
            out[-1].append(token)
    return out


def rouge_batch(
    texts: dict[str, list[str]], *, use_stemmer: bool = False, measure: str = "fmeasure",
) -> BatchVerdicts:
    """``rouge`` of every record the batch path covers (``covered``: one reference, both texts present) as its
    (rouge1, rouge2, rougeL): unigram and bigram matches counted for all of them at once, the LCS bit-parallel
    across records (``_ngrams``), each scored as the function scores it; None for the rest."""
    from evalsi.packs.text import _ngrams  # numpy: loaded by the first batch, not by the catalog

    outputs, references = texts["output"], texts["reference"]
    decided: BatchVerdicts = [None] * len(outputs)
    chosen = covered(outputs, references)
    if not chosen:
        return decided
    predicted = joined_rouge_tokens([outputs[i] for i in chosen], use_stemmer)
    target = joined_rouge_tokens([references[i] for i in chosen], use_stemmer)
    pred, tgt, words = _ngrams.word_streams(predicted, target, len(chosen))
    matched = _ngrams.clipped_matches(pred, tgt, len(words), len(chosen), 2)
    unigrams, bigrams = (counts.tolist() for counts in matched)
    lcs = _ngrams.lcs_lengths(tgt, pred, len(words), len(chosen)).tolist()
    if -1 in lcs:  # records outside the vectorized LCS: the function's own, on their words
        pred_words, tgt_words = _split(predicted), _split(target)
        lcs = [common if common >= 0 else lcs_length(tgt_words[n], pred_words[n]) for n, common in enumerate(lcs)]
    at = _MEASURES.index(measure)
    for index, one, two, longest, pred_len, tgt_len in zip(chosen, unigrams, bigrams, lcs, pred.lengths.tolist(),
                                                           tgt.lengths.tolist(), strict=True):
        decided[index] = (_counted_scores(one, pred_len, tgt_len)[at],
                          _counted_scores(two, max(pred_len - 1, 0), max(tgt_len - 1, 0))[at],
                          _lcs_counted(longest, pred_len, tgt_len)[at])
    return decided


def _check(*, use_stemmer: bool = False, **_: object) -> None:
    check_stemmer(use_stemmer, "builtin/rouge")


@evaluator(
    "builtin/rouge",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # linear in the words (LCS: words times machine words of the reference); texts are bounded
    check=_check,
    batch=rouge_batch,
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
    index = _MEASURES.index(measure)
    scores = rouge_scores(output, references, use_stemmer)
    return {kind: scores[kind][index] for kind in _TYPES}


EVALUATORS = (rouge,)
