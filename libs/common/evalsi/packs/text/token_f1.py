"""SQuAD v1.1's token F1: both texts normalized as the official evaluation script does (lowercase, ASCII
punctuation removed, the articles a/an/the removed, whitespace collapsed), then the F1 of their bags of words; the
best reference counts (``metric_max_over_ground_truths``)."""

from __future__ import annotations

import re
import string
from collections import Counter

from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import BatchVerdicts
from evalsi.packs.text._common import SEP, covered, texts
from evalsi.v1alpha1.record_pb2 import Record

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _lowered_tokens(lowered: str) -> list[str]:
    return _ARTICLES.sub(" ", lowered.translate(_PUNCTUATION)).split()


def squad_tokens(text: str) -> list[str]:
    """The official script's normalize_answer(text).split()."""
    return _lowered_tokens(text.lower())


def f1_of_counts(same: int, predicted: int, truth: int) -> float:
    """The official script's f1_score from the shared words' count and both lengths."""
    if same == 0:
        return 0.0
    precision = 1.0 * same / predicted
    recall = 1.0 * same / truth
    return (2 * precision * recall) / (precision + recall)


def f1(prediction: list[str], truth: list[str]) -> float:
    """The official script's f1_score on normalized words: 0 when nothing is shared (both empty included)."""
    common = Counter(prediction) & Counter(truth)
    return f1_of_counts(sum(common.values()), len(prediction), len(truth))


def _joined_tokens(texts: list[str]) -> list[str]:
    """``squad_tokens`` of every text in turn, SEP between two texts' tokens, from one pass over the texts joined
    by " SEP " (each lowercased alone, so no letter's case depends on the next text): the punctuation removal,
    the articles' word boundaries and the split act within a text."""
    return _lowered_tokens(f" {SEP} ".join(map(str.lower, texts)))


def token_f1_batch(texts: dict[str, list[str]]) -> BatchVerdicts:
    """``token_f1`` of every record the batch path covers (``covered``: one reference, both texts present), the
    shared words counted for all of them at once (``_ngrams``) and scored by ``f1_of_counts``; None for the rest,
    which the function decides."""
    from evalsi.packs.text import _ngrams  # numpy: loaded by the first batch, not by the catalog

    outputs, references = texts["output"], texts["reference"]
    decided: BatchVerdicts = [None] * len(outputs)
    chosen = covered(outputs, references)
    if not chosen:
        return decided
    predicted, truth, words = _ngrams.word_streams(_joined_tokens([outputs[i] for i in chosen]),
                                                  _joined_tokens([references[i] for i in chosen]), len(chosen))
    (same,) = _ngrams.clipped_matches(predicted, truth, len(words), len(chosen), 1)
    for index, shared, predicted_len, truth_len in zip(chosen, same.tolist(), predicted.lengths.tolist(),
                                                       truth.lengths.tolist(), strict=True):
        decided[index] = f1_of_counts(shared, predicted_len, truth_len)
    return decided


@evaluator(
    "builtin/token-f1",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # linear in the texts, which are bounded (_common.MAX_CHARS)
    batch=token_f1_batch,
    outputs=[Output("f1", "number", min=0.0, max=1.0,
                    description="SQuAD v1.1 token F1 against the best reference.")],
)
def token_f1(record: Record) -> float:
    """SQuAD-style token F1 of the output against the reference, or the best of a JSON-list reference's
    elements, equal to the official SQuAD v1.1 evaluation script's f1_score."""
    output, references = texts(record)
    predicted = squad_tokens(output)
    return max(f1(predicted, squad_tokens(reference)) for reference in references)


EVALUATORS = (token_f1,)
