"""builtin/token-f1 equals the official SQuAD v1.1 evaluation script's f1_score (transcribed below as published:
normalize_answer, f1_score, metric_max_over_ground_truths) over generated answers, including unicode, punctuation
only and article-only texts."""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

import pytest
from text_cases import pairs, reference_sets

import evalsi
from evalsi.packs.text.token_f1 import token_f1
from evalsi.records import make_record


def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction: str, ground_truth: str) -> float:
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def metric_max_over_ground_truths(metric_fn: Any, prediction: str, ground_truths: list[str]) -> float:
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


def test_token_f1_equals_the_squad_script() -> None:
    for output, reference in [*pairs(400, seed=21), ("The Cat!", "cat"), ("a an the", "the"), ("İ", "i")]:
        assert token_f1(make_record(output=output, reference=reference)) == f1_score(output, reference), output


def test_several_references_take_the_best() -> None:
    for output, references in reference_sets(200, seed=22):
        record = make_record(output=output, reference=references if len(references) > 1 else references[0])
        assert token_f1(record) == metric_max_over_ground_truths(f1_score, output, references)


def test_evaluate_embedded() -> None:
    rows = [{"id": "exact", "output": "The Eiffel Tower.", "reference": "eiffel tower"},
            {"id": "half", "output": "Paris France", "reference": "Paris"},
            {"id": "list", "output": "Lyon", "reference": ["Paris", "lyon"]},
            {"id": "none", "output": "Berlin", "reference": "Paris"}]
    results = evalsi.evaluate(rows, ["token-f1"])
    assert results.metric("token-f1").mean == pytest.approx((1.0 + 2 / 3 + 1.0 + 0.0) / 4)
