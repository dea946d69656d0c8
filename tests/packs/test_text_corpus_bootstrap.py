"""The corpus metrics' intervals come from resamples drawn by weight over their stacked counts
(``evaluator(stack=...)``): the same intervals, to the last bit, as re-reducing each resample's list of counts."""

from __future__ import annotations

import pytest
from text_cases import pairs

from evalsi.evaluators import Registry
from evalsi.packs.text import PACK
from evalsi.records import make_record
from evalsi.stats.bootstrap import reducer_bootstrap


@pytest.mark.parametrize("name", ["builtin/corpus-bleu", "builtin/corpus-chrf"])
def test_weighted_resamples_give_the_intervals_of_the_resampled_lists(name: str) -> None:
    ev = Registry([PACK]).resolve(name)
    assert ev.mapper is not None and ev.stack is not None
    records = [make_record(output=out, reference=ref, id=f"r{i}") for i, (out, ref) in enumerate(pairs(300, seed=7))]
    mapped = [ev.mapper(record) for record in records]
    units = [record.id for record in records]
    stacked = ev.stack(mapped)

    def figures(values: object) -> dict[str, float]:
        return {"score": float(ev.fn(values))}

    assert ev.fn(stacked) == ev.fn(mapped)  # the figure itself, from the matrix and from the list
    by_list = reducer_bootstrap(mapped, units, figures, seed=3, resamples=300)
    by_weight = reducer_bootstrap(mapped, units, figures, seed=3, resamples=300, take=stacked.take)
    assert by_weight.intervals == by_list.intervals and by_weight.failed == by_list.failed == 0
    low, high = by_weight.intervals["score"]
    assert low < ev.fn(mapped) < high
