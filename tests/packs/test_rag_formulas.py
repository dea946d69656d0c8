"""The rag pack's verdict -> score math equals RAGAS' published formulas (DeepEval's for answer relevance), on the
hand-worked examples of their documentation and on a brute-force restatement of the formula."""

from __future__ import annotations

import itertools
import math

import pytest

from evalsi.packs.rag import formulas


def test_faithfulness_ragas_docs_einstein_example() -> None:
    # RAGAS docs, faithfulness: "Einstein was born in Germany on 20th March 1879" against a context saying he was
    # born on 14 March 1879 -> claims "born in Germany" (supported), "born on 20th March 1879" (not): 1 / 2.
    assert formulas.faithfulness([1, 0]) == 0.5
    assert formulas.faithfulness([1, 1]) == 1.0  # the high-faithfulness answer
    assert formulas.faithfulness([]) is None  # RAGAS: NaN


def test_context_precision_ragas_docs_examples() -> None:
    # RAGAS docs: the one useful chunk ranked first scores 0.9999999999, ranked second 0.49999999995 (the 1e-10 in
    # the denominator is RAGAS').
    assert formulas.context_precision([1]) == pytest.approx(0.9999999999, abs=1e-15)
    assert formulas.context_precision([1, 0]) == pytest.approx(0.9999999999, abs=1e-15)
    assert formulas.context_precision([0, 1]) == pytest.approx(0.49999999995, abs=1e-15)
    assert formulas.context_precision([0, 0, 0]) == 0.0
    assert formulas.context_precision([]) is None


def test_context_precision_hand_worked_ranks() -> None:
    # [1, 0, 1]: precision@1 = 1, precision@3 = 2/3 -> (1 + 2/3) / 2 = 5/6
    assert formulas.context_precision([1, 0, 1]) == pytest.approx(5 / 6 / (1 + 1e-10 / 2), rel=1e-12)
    # [0, 1, 1]: precision@2 = 1/2, precision@3 = 2/3 -> (1/2 + 2/3) / 2 = 7/12
    assert formulas.context_precision([0, 1, 1]) == pytest.approx(7 / 12, rel=1e-9)


def _ragas_average_precision(verdicts: list[int]) -> float:
    """RAGAS' ``_calculate_average_precision`` as written in its source (a restatement, not an import)."""
    denominator = sum(verdicts) + 1e-10
    numerator = sum((sum(verdicts[: i + 1]) / (i + 1)) * verdicts[i] for i in range(len(verdicts)))
    return numerator / denominator


@pytest.mark.parametrize("length", range(1, 9))
def test_context_precision_equals_the_ragas_source_formula_on_every_verdict_list(length: int) -> None:
    for verdicts in itertools.product((0, 1), repeat=length):
        got = formulas.context_precision(list(verdicts))
        assert got is not None and math.isclose(got, _ragas_average_precision(list(verdicts)), rel_tol=1e-12,
                                                 abs_tol=1e-15)


def test_context_recall_ragas_docs_example() -> None:
    # RAGAS docs: reference "France is in Western Europe and its capital is Paris."; the low-recall context says
    # nothing of the capital: statements [attributed, not] -> 1 / 2.
    assert formulas.context_recall([1, 0]) == 0.5
    assert formulas.context_recall([1]) == 1.0
    assert formulas.context_recall([]) is None


def test_answer_relevance_deepeval_formula() -> None:
    # DeepEval answer relevancy: verdicts other than "no" count as relevant.
    assert formulas.answer_relevance(["yes", "yes", "no"]) == pytest.approx(2 / 3)
    assert formulas.answer_relevance(["idk", "no"]) == 0.5
    assert formulas.answer_relevance(["NO ", "No"]) == 0.0
    assert formulas.answer_relevance([]) is None
