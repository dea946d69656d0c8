"""Ranking: NDCG@k, reciprocal rank, average precision and recall@k of a ranked list of ids, per record.

The output is a ranked JSON list of ids (best first); the reference is the relevant ids (a list: relevance 1
each) or graded relevances (``{id: grade}``). An id listed twice counts at its first place. Per-record figures,
so the run's mean of each is NDCG@k, MRR, MAP and mean recall@k, with the usual intervals over records. NDCG
uses linear gains and a log2(rank + 1) discount over the top k, against the ideal order of every judged id:
scikit-learn's ``ndcg_score`` on the same ranking (tests/packs/test_ml_classic.py). An id the output does not
list is not retrieved (no gain, no precision), where ``ndcg_score``/``average_precision_score`` over a score
matrix would still rank it last; on a ranking that lists every judged id they are equal.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from operator import mul

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.packs.ml_classic._values import ranked_ids, relevances
from evalsi.v1alpha1.record_pb2 import Record

_DISCOUNTS = [1.0 / math.log2(rank + 2) for rank in range(10_000)]


def _check_k(*, k: int = 10) -> None:
    if not 1 <= k <= 10_000:
        raise BadInputError(f"evaluator builtin/ranking: param 'k' must be between 1 and 10000, got {k}")


@evaluator(
    "builtin/ranking",
    version="1.0.0",
    pack="ml-classic",
    requires=["output", "reference"],
    cheap=True,  # linear in the ranked and judged ids, both bounded
    check=_check_k,
    outputs=[
        Output("ndcg", "number", 0.0, 1.0, description="NDCG@k: discounted gain of the top k over the ideal."),
        Output("mrr", "number", 0.0, 1.0, description="Reciprocal rank of the first relevant id (0: none)."),
        Output("map", "number", 0.0, 1.0, description="Average precision: precision at each relevant id listed, "
                                                       "summed, over the relevant ids."),
        Output("recall", "number", 0.0, 1.0, description="recall@k: share of the relevant ids in the top k."),
    ],
    params={"k": "The cutoff of ndcg and recall (1 to 10000)."},
)
def ranking(record: Record, *, k: int = 10) -> dict[str, float]:
    """NDCG@k, reciprocal rank, average precision and recall@k of the output's ranked ids against the reference's
    relevant ids (relevance above 0); a record whose reference judges no id relevant is skipped."""
    grades = relevances(record.reference)
    relevant = sum(1 for grade in grades.values() if grade > 0)
    if not relevant:
        raise SkipRecord("reference: no id has a relevance above 0, so no ranking of it can be scored")
    # Each id at its first place (a dict keeps the first of equal keys in order), as its gain.
    gains = [grades.get(item, 0.0) for item in dict.fromkeys(ranked_ids(record.output))]
    ideal = sorted(grades.values(), reverse=True)[:k]
    # ``sum`` of the products in rank order: the same additions, in the same order, as a loop would make.
    dcg = sum(map(mul, gains[:k], _DISCOUNTS))
    idcg = sum(map(mul, ideal, _DISCOUNTS))
    hits = [rank for rank, gain in enumerate(gains) if gain > 0]  # the places of the relevant ids listed
    precision_sum = sum(found / (rank + 1) for found, rank in enumerate(hits, start=1))
    return {
        "ndcg": dcg / idcg,
        "mrr": 1.0 / (hits[0] + 1) if hits else 0.0,
        "map": precision_sum / relevant,
        "recall": bisect_left(hits, k) / relevant,
    }


EVALUATORS = (ranking,)
