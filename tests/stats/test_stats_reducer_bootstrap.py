"""The dataset-scope bootstrap: whole records drawn with numpy's seeded generator, interpolated quantiles, failed
resamples counted."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from evalsi.stats.bootstrap import reducer_bootstrap


def _mean(values: list[float]) -> dict[str, float]:
    return {"mean": float(np.mean(values))}


def test_quantiles_are_interpolated_over_resamples_of_whole_records() -> None:
    rng = np.random.default_rng(3)
    values = list(rng.normal(size=40))
    units = [f"r{i // 2}" for i in range(40)]  # two trials per record
    got = reducer_bootstrap(values, units, _mean, seed=9, resamples=500)
    # The reference, written the obvious way: draw 20 records with replacement, keep both trials of each.
    draws = np.random.default_rng(9).integers(0, 20, size=(500, 20))
    means = [np.mean([values[2 * r + t] for r in row for t in (0, 1)]) for row in draws]
    assert got.intervals["mean"] == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])), rel=1e-12)
    assert got.resamples == {"mean": 500} and got.failed == 0


def test_trials_of_a_record_always_travel_together() -> None:
    values = [(f"r{i // 3}", i % 3) for i in range(30)]

    def check(sample: list[tuple[str, int]]) -> dict[str, float]:
        per_record = Counter(record for record, _ in sample)
        assert all(count % 3 == 0 for count in per_record.values())
        return {"n": float(len(sample))}

    result = reducer_bootstrap(values, [record for record, _ in values], check, seed=1, resamples=200)
    assert result.failed == 0 and result.intervals["n"] == (30.0, 30.0)


def test_resamples_the_reducer_fails_on_are_counted_not_hidden() -> None:
    values = [1.0, 1.0, 1.0, 0.0]

    def needs_both_classes(sample: list[float]) -> dict[str, float]:
        if len(set(sample)) < 2:
            raise ValueError("one class only")
        return {"share": sum(sample) / len(sample)}

    result = reducer_bootstrap(values, ["a", "b", "c", "d"], needs_both_classes, seed=0, resamples=1000)
    # P(no zero drawn in 4 draws of 4) = (3/4)^4, about 316 of 1000 resamples.
    assert 250 < result.failed < 380
    assert result.resamples["share"] == 1000 - result.failed


def test_one_record_has_no_interval() -> None:
    assert reducer_bootstrap([1.0, 2.0], ["a", "a"], _mean).intervals == {}
