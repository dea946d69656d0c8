"""The ml-monitoring pack against SciPy and transcribed definitions: KS (``scipy.stats.ks_2samp``), Jensen-Shannon
(``scipy.spatial.distance.jensenshannon``), PSI, data quality and fairlearn's fairness formulas, by hand."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import ks_2samp

import evalsi
from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Evaluator
from evalsi.packs.ml_monitoring import PACK
from evalsi.records import make_record
from evalsi.stats.bootstrap import reducer_bootstrap
from evalsi.v1alpha1.record_pb2 import Record

EVALUATORS = {ev.name: ev for ev in PACK.evaluators}


def _reduce(name: str, records: list[Record], **params: Any) -> Any:
    ev: Evaluator = EVALUATORS[name]
    bound = ev.bind(params)
    assert ev.mapper is not None and ev.stack is not None
    return ev.fn(ev.stack([ev.mapper(record, **bound.params) for record in records]), **bound.params)


def _split(reference: list[Any], current: list[Any], name: str = "x") -> list[Record]:
    rows = [make_record(id=f"r{i}", output={"row": {"features": {name: v}}}, metadata={"split": "reference"})
            for i, v in enumerate(reference)]
    rows += [make_record(id=f"c{i}", output={"row": {"features": {name: v}}}) for i, v in enumerate(current)]
    return rows


def _psi_reference(reference: np.ndarray, current: np.ndarray, bins: int) -> float:
    """PSI transcribed: reference-quantile edges, [q_i, q_i+1) bins open at both ends, shares floored at 1e-4."""
    edges = sorted(set(np.quantile(reference, np.linspace(0, 1, bins + 1)).tolist()))
    inner = edges[1:-1]

    def shares(sample: np.ndarray) -> list[float]:
        counts = [0] * (len(inner) + 1)
        for value in sample:
            counts[sum(1 for edge in inner if value >= edge)] += 1
        return [max(count / len(sample), 1e-4) for count in counts]

    return sum((c - r) * math.log(c / r) for r, c in zip(shares(reference), shares(current), strict=True))


@pytest.mark.parametrize("seed", range(20))
def test_drift_equals_scipy_and_the_psi_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_ref, n_cur = int(rng.integers(5, 200)), int(rng.integers(5, 200))
    reference = rng.normal(0, 1, n_ref)
    current = rng.normal(0.3 * (seed % 3), 1 + 0.2 * (seed % 2), n_cur)
    if seed % 4 == 0:  # ties, and values as CSV strings
        reference, current = np.round(reference, 1), np.round(current, 1)
    as_given = [str(v) for v in current] if seed % 5 == 0 else current.tolist()
    records = _split(reference.tolist(), as_given)
    expected = ks_2samp(reference, current)
    got = _reduce("builtin/ks", records, feature="x")
    assert math.isclose(got["statistic"], expected.statistic, rel_tol=1e-12)
    assert math.isclose(got["pvalue"], expected.pvalue, rel_tol=1e-12)
    for bins in (2, 5, 10):
        assert math.isclose(_reduce("builtin/psi", records, feature="x", bins=bins),
                            _psi_reference(reference, current, bins), rel_tol=1e-9)
        edges = np.unique(np.quantile(reference, np.linspace(0, 1, bins + 1)))
        p = np.bincount(np.searchsorted(edges[1:-1], reference, side="right"), minlength=len(edges) - 1)
        q = np.bincount(np.searchsorted(edges[1:-1], current, side="right"), minlength=len(edges) - 1)
        js = _reduce("builtin/js-divergence", records, feature="x", bins=bins)
        assert math.isclose(js["distance"], jensenshannon(p, q, base=2), rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(js["divergence"], js["distance"] ** 2, rel_tol=1e-12)


def test_categorical_drift_compares_category_shares() -> None:
    reference = ["a"] * 50 + ["b"] * 30 + ["c"] * 20
    current = ["a"] * 20 + ["b"] * 30 + ["c"] * 40 + ["d"] * 10
    records = _split(reference, current)
    p, q = np.array([50, 30, 20, 0]), np.array([20, 30, 40, 10])
    js = _reduce("builtin/js-divergence", records, feature="x")
    assert math.isclose(js["distance"], jensenshannon(p, q, base=2), rel_tol=1e-12)
    shares_p, shares_q = np.maximum(p / p.sum(), 1e-4), np.maximum(q / q.sum(), 1e-4)
    assert math.isclose(_reduce("builtin/psi", records, feature="x"),
                        float(((shares_q - shares_p) * np.log(shares_q / shares_p)).sum()), rel_tol=1e-12)
    with pytest.raises(SkipRecord, match="not numeric"):
        _reduce("builtin/ks", records, feature="x")


def test_drift_needs_both_samples_and_the_feature() -> None:
    with pytest.raises(SkipRecord, match="no reference records"):
        _reduce("builtin/psi", [make_record(output={"row": {"features": {"x": 1}}})] * 3, feature="x")
    ev = EVALUATORS["builtin/psi"]
    assert ev.mapper is not None
    with pytest.raises(SkipRecord, match="feature 'y' is missing"):
        ev.mapper(make_record(output={"row": {"features": {"x": 1}}}), feature="y")
    with pytest.raises(SkipRecord, match="no tabular row"):
        ev.mapper(make_record(output="text"), feature="x")
    with pytest.raises(BadInputError, match="'bins' must be between 2 and 1000"):
        ev.bind({"feature": "x", "bins": 1})
    # KS compares the values themselves: it takes no bins, and says so rather than ignoring one.
    with pytest.raises(BadInputError, match=r"builtin/ks: unknown param\(s\) bins"):
        EVALUATORS["builtin/ks"].bind({"feature": "x", "bins": 5})
    result = evalsi.evaluate([{"output": {"row": {"features": {"x": 1}}}}] * 4,
                             [{"ref": "builtin/ks", "params": {"feature": "x"}}])
    (only,) = result.results
    assert only.outcome == 2 and "no reference records" in only.reason


def test_ks_resamples_by_weight_equal_scipy_on_the_resampled_rows() -> None:
    rng = np.random.default_rng(3)
    reference, current = np.round(rng.normal(0, 1, 40), 1), np.round(rng.normal(0.5, 1, 50), 1)
    records = _split(reference.tolist(), current.tolist())
    values = np.concatenate([reference, current])
    is_reference = np.arange(90) < 40
    ev = EVALUATORS["builtin/ks"]
    assert ev.mapper is not None and ev.stack is not None
    mapped = [ev.mapper(record, feature="x") for record in records]
    stacked = ev.stack(mapped)
    units = [record.id for record in records]

    def ours(sample: Any) -> dict[str, float]:
        return {"statistic": ev.fn(sample, feature="x")["statistic"]}

    def theirs(sample: list[int]) -> dict[str, float]:
        picked = np.array(sample)
        ref, cur = values[picked[is_reference[picked]]], values[picked[~is_reference[picked]]]
        if not len(ref) or not len(cur):
            raise ValueError("one sample")
        return {"statistic": float(ks_2samp(ref, cur).statistic)}

    by_weight = reducer_bootstrap(mapped, units, ours, seed=1, resamples=300, take=stacked.take)
    by_rows = reducer_bootstrap(list(range(90)), units, theirs, seed=1, resamples=300)
    assert by_weight.intervals["statistic"] == pytest.approx(by_rows.intervals["statistic"], rel=1e-12)
    assert by_weight.failed == by_rows.failed


SCHEMA = {"age": {"type": "number", "min": 18, "max": 99}, "city": {"type": "string", "values": ["Lj", "Mb"]},
          "vip": {"type": "bool"}, "note": {"type": "string", "required": False}}


def test_data_quality_counts_each_problem_once() -> None:
    quality = EVALUATORS["builtin/data-quality"]
    cases = [
        ({"age": "31", "city": "Lj", "vip": "true"}, (0, 0, 0), True),
        ({"age": 12, "city": "Kp", "vip": True, "note": "x"}, (0, 2, 0), False),
        ({"age": "old", "city": 5, "note": None}, (1, 0, 2), False),  # vip missing; note optional
        ({}, (3, 0, 0), False),
    ]
    for features, (missing, out_of_range, mismatched), clean in cases:
        scores = {s.name: s for s in quality(make_record(output={"row": {"features": features}}), features=SCHEMA)}
        assert scores["missing_rate"].number == missing / 4
        assert scores["out_of_range_rate"].number == out_of_range / 4
        assert scores["type_mismatch_rate"].number == mismatched / 4
        assert scores["clean"].passed is clean
    explained = quality(make_record(output={"row": {"features": {"age": 12}}}), features=SCHEMA)[-1].explanation
    assert "age: out of range (12)" in explained and "city: missing" in explained
    with pytest.raises(BadInputError, match=r"features.age.type must be one of number, string, bool"):
        quality.bind({"features": {"age": {"type": "int"}}})
    with pytest.raises(BadInputError, match="unknown key"):
        quality.bind({"features": {"age": {"type": "number", "maximum": 3}}})
    result = evalsi.evaluate([{"output": {"row": {"features": {"age": a}}}} for a in (20, 30, 120, "x")]
                             + [{"output": "no row"}],
                             [{"ref": "builtin/data-quality", "params": {"features": {"age": SCHEMA["age"]}}}])
    assert result.metric("data-quality.out_of_range_rate").mean == 0.25
    assert result.metric("data-quality.type_mismatch_rate").mean == 0.25
    assert result.metric("data-quality.missing_rate").skipped == 1


def _fairness_by_hand(groups: list[str], truths: list[bool], chosen: list[bool]) -> dict[str, float]:
    """fairlearn's formulas transcribed: per-group selection rate, TPR and FPR; differences max - min, ratio
    min / max (groups without positives or negatives left out of that rate)."""
    selection, tpr, fpr = {}, {}, {}
    for group in sorted(set(groups)):
        members = [i for i, g in enumerate(groups) if g == group]
        selection[group] = sum(chosen[i] for i in members) / len(members)
        positives = [i for i in members if truths[i]]
        negatives = [i for i in members if not truths[i]]
        if positives:
            tpr[group] = sum(chosen[i] for i in positives) / len(positives)
        if negatives:
            fpr[group] = sum(chosen[i] for i in negatives) / len(negatives)
    out = {"demographic_parity_difference": max(selection.values()) - min(selection.values())}
    if max(selection.values()) > 0:
        out["demographic_parity_ratio"] = min(selection.values()) / max(selection.values())
    gaps = [max(r.values()) - min(r.values()) for r in (tpr, fpr) if len(r) >= 2]
    if gaps:
        out["equalized_odds_difference"] = max(gaps)
    return out


@pytest.mark.parametrize("seed", range(15))
def test_fairness_equals_the_formulas(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 120))
    groups = [["f", "m", "x", "ž"][i] for i in rng.integers(0, 2 + seed % 3, n)]
    if len(set(groups)) < 2:
        groups[0], groups[1] = "f", "m"
    truths = (rng.random(n) < 0.4).tolist()
    chosen = (rng.random(n) < 0.5).tolist()
    records = [make_record(id=str(i), output={"row": {"prediction": "yes" if c else "no",
                                                     **({"features": {"sex": g}} if i % 2 else {})}},
                           reference="yes" if t else "no", metadata=None if i % 2 else {"sex": g})
               for i, (g, t, c) in enumerate(zip(groups, truths, chosen, strict=True))]
    got = _reduce("builtin/fairness", records, sensitive="sex", positive_label="yes")
    assert got == pytest.approx(_fairness_by_hand(groups, truths, chosen), rel=1e-12)


def test_fairness_needs_two_groups_and_the_attribute() -> None:
    records = [make_record(output={"row": {"prediction": "yes", "features": {"sex": "f"}}}, reference="yes")] * 3
    with pytest.raises(SkipRecord, match="fewer than two groups"):
        _reduce("builtin/fairness", records, sensitive="sex", positive_label="yes")
    ev = EVALUATORS["builtin/fairness"]
    assert ev.mapper is not None
    with pytest.raises(SkipRecord, match="neither a row feature nor a metadata key"):
        ev.mapper(make_record(output="yes", reference="yes"), sensitive="sex", positive_label="yes")


def test_monitoring_runs_through_evaluate_with_intervals() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(200):
        reference = i < 80
        age = float(rng.normal(40 if reference else 46, 10))
        rows.append({"id": f"r{i}", "reference": "yes" if rng.random() < 0.5 else "no",
                     "output": {"row": {"features": {"age": age, "sex": "fm"[i % 2]},
                                        "prediction": "yes" if age > 42 else "no"}},
                     "metadata": {"split": "reference" if reference else "current"}})
    specs = [{"ref": "builtin/psi", "params": {"feature": "age"}}, {"ref": "builtin/ks", "params": {"feature": "age"}},
             {"ref": "builtin/fairness", "params": {"sensitive": "sex", "positive_label": "yes"}}]
    result = evalsi.evaluate(rows, specs, bootstrap_resamples=200)
    ages = np.array([row["output"]["row"]["features"]["age"] for row in rows])
    expected = ks_2samp(ages[:80], ages[80:])
    statistic = result.metric("ks.statistic")
    assert math.isclose(statistic.mean, expected.statistic)
    assert statistic.ci.low < statistic.ci.high
    assert math.isclose(result.metric("ks.pvalue").mean, expected.pvalue)
    assert result.metric("psi").mean > 0
    assert result.metric("fairness.demographic_parity_difference").n == 200


def test_loading_the_ml_packs_does_not_import_numpy() -> None:
    """The catalog loads every pack: their numpy halves load with the first reduce, not with the pack."""
    code = ("import sys, evalsi.packs.ml_classic, evalsi.packs.ml_monitoring; "
            "print(sorted(m for m in ('numpy', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
