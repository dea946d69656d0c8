"""SQuAD v1.1's token F1: both texts normalized as the official evaluation script does (lowercase, ASCII
punctuation removed, the articles a/an/the removed, whitespace collapsed), then the F1 of their bags of words; the
best reference counts (``metric_max_over_ground_truths``)."""

from __future__ import annotations

import re
import string
from collections import Counter

from evalsi.evaluators import Output, evaluator
from evalsi.packs.text._common import texts
from evalsi.v1alpha1.record_pb2 import Record

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_tokens(text: str) -> list[str]:
    """The official script's normalize_answer(text).split()."""
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split()


def f1(prediction: list[str], truth: list[str]) -> float:
    """The official script's f1_score on normalized words: 0 when nothing is shared (both empty included)."""
    common = Counter(prediction) & Counter(truth)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = 1.0 * same / len(prediction)
    recall = 1.0 * same / len(truth)
    return (2 * precision * recall) / (precision + recall)


@evaluator(
    "builtin/token-f1",
    version="1.0.0",
    pack="text",
    requires=["output", "reference"],
    cheap=True,  # linear in the texts, which are bounded (_common.MAX_CHARS)
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
