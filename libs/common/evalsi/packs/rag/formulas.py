"""From per-item verdicts to scores: the published RAGAS (and DeepEval) formulas, as pure functions.

Each takes the verdicts a judge gave (1 = yes, 0 = no) and returns the score, or None where the reference library
returns NaN (nothing to score): the evaluators then skip the record with the reason instead of scoring it.
"""

from __future__ import annotations

from collections.abc import Sequence

# RAGAS adds this to the denominator of context precision, so no relevant chunk scores 0 rather than 0/0.
RAGAS_EPSILON = 1e-10


def faithfulness(verdicts: Sequence[int]) -> float | None:
    """RAGAS faithfulness: claims of the response supported by the context / claims in the response."""
    if not verdicts:
        return None
    return sum(verdicts) / len(verdicts)


def context_precision(verdicts: Sequence[int]) -> float | None:
    """RAGAS context precision (average precision over ranks): per chunk ``v_k`` (relevant or not, in retrieval
    order), ``sum_k(precision@k * v_k) / (sum_k v_k + 1e-10)`` with ``precision@k = sum_{i<=k} v_i / k``."""
    if not verdicts:
        return None
    relevant_so_far = 0
    numerator = 0.0
    for rank, verdict in enumerate(verdicts, 1):
        relevant_so_far += verdict
        numerator += relevant_so_far / rank * verdict
    return numerator / (sum(verdicts) + RAGAS_EPSILON)


def context_recall(attributed: Sequence[int]) -> float | None:
    """RAGAS context recall: statements of the reference attributable to the context / statements in it."""
    if not attributed:
        return None
    return sum(attributed) / len(attributed)


def answer_relevance(verdicts: Sequence[str]) -> float | None:
    """DeepEval answer relevancy: statements of the output whose verdict is not "no" (so "yes" and "idk") /
    statements. (DeepEval scores an output with no statements 1; here that is no score.)"""
    if not verdicts:
        return None
    return sum(1 for v in verdicts if v.strip().lower() != "no") / len(verdicts)
