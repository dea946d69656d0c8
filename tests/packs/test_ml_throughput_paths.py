"""The fast paths of the ml-classic and ml-monitoring packs give what the plain ones give.

- ``records.from_value``, which the packs read every JSON and row value with, reads a protobuf Value field by field
  as protobuf's JSON printer reads it (types included: a whole number is an int), and refuses what it refuses.
- A bootstrap resample reduced from its drawn positions (``_drawn``) equals the same metric computed on the drawn
  rows themselves: by scikit-learn where it has the metric, by the evaluator's own whole-data path otherwise, and
  for drift (bins fixed from the whole data) by the PSI and Jensen-Shannon definitions with those bins. Cases: ties,
  unicode labels, a class missing from a record's probabilities, resamples that miss a class or a group.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Value
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as sk

import evalsi
from evalsi.evaluators import Evaluator, Output, evaluator
from evalsi.packs.ml_classic import PACK as CLASSIC
from evalsi.packs.ml_monitoring import PACK as MONITORING
from evalsi.packs.ml_monitoring._features import features, row_feature
from evalsi.records import from_value, make_record, struct_to_dict, to_value
from evalsi.stats.bootstrap import reducer_bootstrap
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

EVALUATORS = {ev.name: ev for ev in (*CLASSIC.evaluators, *MONITORING.evaluators)}
_LABELS = ["ja", "né", "ünï", "x y", "猫"]
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([2.0**53, -(2.0**53), 2.0**53 - 1, -0.0, 1e300, 0.5]) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=15,
)


def _same(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right) and math.copysign(1, left) == math.copysign(1, right) if isinstance(left, float) \
        else bool(left == right)


def _printed(message: Value) -> Any:
    """The reference: protobuf's JSON printer, whole numbers below 2**53 as ints, an object's keys sorted (a
    Struct keeps no order, and ``struct_to_dict`` sorts them so every process reads a record alike)."""
    def whole(obj: Any) -> Any:
        if isinstance(obj, float) and obj.is_integer() and abs(obj) < 2**53:
            return int(obj)
        if isinstance(obj, list):
            return [whole(item) for item in obj]
        if isinstance(obj, dict):
            return {key: whole(obj[key]) for key in sorted(obj)}
        return obj

    return whole(json_format.MessageToDict(message))


@settings(max_examples=400, deadline=None)
@given(_json)
def test_from_value_reads_a_value_as_protobufs_printer_does(value: Any) -> None:
    message = to_value(value)
    assert _same(from_value(message), _printed(message))
    wrapper = to_value({"v": value, "also": [value]})  # a Struct read in place (a copy may reorder its map)
    assert _same(struct_to_dict(wrapper.struct_value), _printed(wrapper))


def test_from_value_refuses_what_the_printer_refuses() -> None:
    for number in (math.nan, math.inf, -math.inf):
        message = to_value([1, {"x": number}])
        with pytest.raises(ValueError) as theirs:
            _printed(message)
        with pytest.raises(ValueError) as ours:
            from_value(message)
        assert str(ours.value) == str(theirs.value)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["age", "city", "é", ""]), _json, max_size=4), st.booleans())
def test_one_feature_is_that_feature_of_every_feature(row: dict[str, Any], in_input: bool) -> None:
    content = {"row": {"features": row, "prediction": "x"}}
    record = make_record(input=content) if in_input else make_record(output=content)
    for name in ("age", "city", "é", "", "absent"):
        assert _same(row_feature(record, name), features(record).get(name))


def _by_positions(name: str, records: list[Record], positions: np.ndarray, **params: Any) -> Any:
    ev: Evaluator = EVALUATORS[name]
    assert ev.mapper is not None and ev.stack is not None
    return ev.fn(ev.stack([ev.mapper(record, **params) for record in records]).take(positions), **params)


def _on_rows(name: str, records: list[Record], **params: Any) -> Any:
    ev: Evaluator = EVALUATORS[name]
    assert ev.mapper is not None and ev.stack is not None
    return ev.fn(ev.stack([ev.mapper(record, **params) for record in records]), **params)


def _draws(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Resamples: ordinary ones, a lopsided one (a few records drawn many times), and one record drawn twice."""
    return [*(rng.integers(0, n, size=n) for _ in range(6)), rng.integers(0, 3, size=n), np.array([1, 1])]


@pytest.mark.parametrize("seed", range(6))
def test_class_and_probability_resamples_equal_scikit_learn_on_the_drawn_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k = 50, 3 + seed % 2
    classes = sorted(_LABELS[:k])  # scikit-learn takes the columns in sorted order
    raw = rng.integers(0, 3, size=(n, k)).astype(float) + 0.5 if seed % 2 else rng.random((n, k))
    raw[0, -1] = 0.0
    matrix = raw / raw.sum(axis=1, keepdims=True)
    truths = [classes[i] for i in rng.permutation(np.arange(n) % k)]
    predictions = [classes[i] for i in rng.integers(0, k, n)]
    given = [dict(zip(classes, map(float, row), strict=True)) for row in matrix]
    given[0] = {name: p for name, p in given[0].items() if name != classes[-1]}  # a class left out counts as 0
    records = [make_record(id=str(i), reference=truths[i],
                           output={"row": {"prediction": predictions[i], "probabilities": given[i]}})
               for i in range(n)]
    for positions in _draws(rng, n):
        drawn_truths = [truths[i] for i in positions]
        drawn_predictions = [predictions[i] for i in positions]
        figures = _by_positions("builtin/classification", records, positions)
        assert figures["accuracy"] == pytest.approx(sk.accuracy_score(drawn_truths, drawn_predictions), rel=1e-12)
        for average in ("macro", "weighted"):
            precision, recall, f1, _ = sk.precision_recall_fscore_support(
                drawn_truths, drawn_predictions, average=average, zero_division=0)
            assert [figures[f"{m}_{average}"] for m in ("precision", "recall", "f1")] == pytest.approx(
                [precision, recall, f1], rel=1e-12, abs=1e-15)
        labels = sorted({*truths, *predictions})
        counts = _by_positions("builtin/confusion-matrix", records, positions)
        assert np.array_equal(np.array(from_value(counts.structured)["counts"]),
                              sk.confusion_matrix(drawn_truths, drawn_predictions, labels=labels))
        rows = [records[i] for i in positions]
        for name in ("builtin/log-loss", "builtin/brier", "builtin/ece", "builtin/roc-auc", "builtin/pr-auc"):
            try:
                expected = _on_rows(name, rows)
            except Exception as exc:
                with pytest.raises(type(exc)):
                    _by_positions(name, records, positions)
                continue
            assert _by_positions(name, records, positions) == pytest.approx(expected, rel=1e-12, abs=1e-15)
        if len(set(drawn_truths)) == k:
            assert _by_positions("builtin/log-loss", records, positions) == pytest.approx(
                sk.log_loss(drawn_truths, matrix[positions], labels=classes), rel=1e-9)
            assert _by_positions("builtin/roc-auc", records, positions) == pytest.approx(
                sk.roc_auc_score(drawn_truths, matrix[positions], multi_class="ovr", labels=classes), rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_regression_and_fairness_resamples_equal_the_drawn_rows(seed: int) -> None:
    rng = np.random.default_rng(50 + seed)
    n = 40
    truths = np.round(rng.normal(0, 3, n), 1)
    truths[:3] = 0.0  # MAPE's epsilon floor
    guesses = truths + np.round(rng.normal(0, 1, n), 1)
    numbers = [make_record(id=str(i), reference=float(truths[i]), output={"row": {"prediction": float(guesses[i])}})
               for i in range(n)]
    groups = [_LABELS[i % 3] for i in range(n)]
    labels = [["ja", "né"][i] for i in rng.integers(0, 2, n)]
    chosen = [["ja", "né"][i] for i in rng.integers(0, 2, n)]
    people = [make_record(id=str(i), reference=labels[i],
                          output={"row": {"prediction": chosen[i], "features": {"group": groups[i]}}})
              for i in range(n)]
    for positions in _draws(rng, n):
        figures = _by_positions("builtin/regression", numbers, positions)
        assert figures["mae"] == pytest.approx(sk.mean_absolute_error(truths[positions], guesses[positions]))
        assert figures["mse"] == pytest.approx(sk.mean_squared_error(truths[positions], guesses[positions]))
        assert figures["mape"] == pytest.approx(
            sk.mean_absolute_percentage_error(truths[positions], guesses[positions]))
        assert ("r2" in figures) == (len(set(positions.tolist())) >= 2)
        if "r2" in figures:
            assert figures["r2"] == pytest.approx(sk.r2_score(truths[positions], guesses[positions]), rel=1e-9)
        rows = [people[i] for i in positions]
        params = {"sensitive": "group", "positive_label": "ja"}
        try:
            expected = _on_rows("builtin/fairness", rows, **params)
        except Exception as exc:
            with pytest.raises(type(exc)):
                _by_positions("builtin/fairness", people, positions, **params)
            continue
        assert _by_positions("builtin/fairness", people, positions, **params) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("numeric", [True, False])
def test_drift_resamples_equal_the_definitions_over_the_whole_datas_bins(numeric: bool) -> None:
    rng = np.random.default_rng(9)
    n = 80
    values: list[Any] = (list(np.round(rng.normal(0, 1, n), 1)) if numeric
                         else [_LABELS[i] for i in rng.integers(0, 4, n)])
    split = [i % 3 == 0 for i in range(n)]
    records = [make_record(id=str(i), output={"row": {"features": {"x": values[i]}}},
                           metadata={"split": "reference"} if split[i] else {}) for i in range(n)]
    if numeric:
        reference = np.array([v for v, is_ref in zip(values, split, strict=True) if is_ref])
        edges = np.unique(np.quantile(reference, np.linspace(0.0, 1.0, 6)))
        bin_of = [int(np.searchsorted(edges[1:-1], v, side="right")) for v in values]
        count = len(edges) - 1
    else:
        names = sorted(set(values))
        bin_of = [names.index(v) for v in values]
        count = len(names)
    for positions in _draws(rng, n)[:6]:
        shares = np.zeros((2, count))
        for i in positions:
            shares[0 if split[i] else 1, bin_of[i]] += 1
        if not shares[0].sum() or not shares[1].sum():
            continue
        ref, cur = shares[0] / shares[0].sum(), shares[1] / shares[1].sum()
        floored_ref, floored_cur = np.maximum(ref, 1e-4), np.maximum(cur, 1e-4)
        psi = sum((c - r) * math.log(c / r) for r, c in zip(floored_ref, floored_cur, strict=True))
        assert _by_positions("builtin/psi", records, positions, feature="x", bins=5) == pytest.approx(psi, rel=1e-12)
        middle = (ref + cur) / 2
        divergence = sum(0.5 * s * math.log2(s / m) for share in (ref, cur)
                         for s, m in zip(share, middle, strict=True) if s > 0)
        js = _by_positions("builtin/js-divergence", records, positions, feature="x", bins=5)
        assert js["divergence"] == pytest.approx(max(divergence, 0.0), rel=1e-9, abs=1e-15)


def _counted_like(stacked: Any, positions: np.ndarray) -> Any:
    """The resample of ``positions`` as the bootstrap's counted form: the first row of each declared cell the draw
    reached, and how many drawn rows fall in that cell."""
    codes, count = stacked.cells
    drawn = np.bincount(codes[positions], minlength=count)
    reached = np.flatnonzero(drawn)
    firsts = np.array([int(np.flatnonzero(codes == cell)[0]) for cell in reached], dtype=np.intp)
    return stacked.counted(firsts, drawn[reached])


@pytest.mark.parametrize("seed", range(3))
def test_a_resample_counted_by_cell_gives_what_its_drawn_positions_give(seed: int) -> None:
    rng = np.random.default_rng(70 + seed)
    n = 60
    truths = [_LABELS[i] for i in rng.integers(0, 3, n)]
    predictions = [_LABELS[i] for i in rng.integers(0, 3, n)]
    ages: list[Any] = [int(v) for v in rng.integers(18, 30, n)] if seed != 1 else [_LABELS[i] for i in
                                                                                   rng.integers(0, 4, n)]
    records = [make_record(id=str(i), reference=truths[i], metadata={"split": "reference"} if i % 4 == 0 else {},
                           output={"row": {"prediction": predictions[i], "features": {"age": ages[i],
                                                                                     "group": _LABELS[i % 3]}}})
               for i in range(n)]
    cases: list[tuple[str, dict[str, Any]]] = [
        ("builtin/classification", {}), ("builtin/positive-class", {"positive_label": _LABELS[0]}),
        ("builtin/fairness", {"sensitive": "group", "positive_label": _LABELS[1]}),
        ("builtin/psi", {"feature": "age", "bins": 4}), ("builtin/js-divergence", {"feature": "age", "bins": 4}),
        *([("builtin/ks", {"feature": "age"})] if seed != 1 else []),
    ]
    for name, params in cases:
        ev: Evaluator = EVALUATORS[name]
        assert ev.mapper is not None and ev.stack is not None
        stacked = ev.stack([ev.mapper(record, **params) for record in records])
        assert stacked.cells is not None, name
        ev.fn(stacked, **params)  # the whole data first, as the runner reduces it (drift's bins are fixed there)
        for positions in _draws(rng, n):
            try:
                expected = ev.fn(stacked.take(positions), **params)
            except Exception as exc:
                with pytest.raises(type(exc)):
                    ev.fn(_counted_like(stacked, positions), **params)
                continue
            assert ev.fn(_counted_like(stacked, positions), **params) == expected, (name, positions)


def test_the_bootstrap_counts_by_cell_where_declared_and_its_interval_is_the_positions_one() -> None:
    rng = np.random.default_rng(5)
    n = 600
    labels = ["a", "b", "c"]
    truths = [labels[i] for i in rng.integers(0, 3, n)]
    predictions = [truth if rng.random() < 0.6 else labels[int(rng.integers(0, 3))] for truth in truths]
    records = [make_record(id=str(i), reference=truths[i], output=predictions[i]) for i in range(n)]
    ev = EVALUATORS["builtin/classification"]
    assert ev.mapper is not None and ev.stack is not None
    mapped = [ev.mapper(record) for record in records]
    stacked = ev.stack(mapped)
    units = [str(i) for i in range(n)]
    calls: list[int] = []

    def counted(positions: np.ndarray, counts: np.ndarray) -> Any:
        calls.append(int(counts.sum()))
        return stacked.counted(positions, counts)

    by_cell = reducer_bootstrap(mapped, units, ev.fn, seed=2, resamples=2000, take=stacked.take,
                                cells=stacked.cells, counted=counted)
    by_position = reducer_bootstrap(mapped, units, ev.fn, seed=2, resamples=2000, take=stacked.take)
    assert calls == [n] * 2000  # every resample counted by cell, each of n draws
    # Two seeded estimates of the same percentiles (the counts' distribution is the same): within a few 1/n steps.
    for name in ("accuracy", "f1_macro", "precision_weighted"):
        assert by_cell.intervals[name] == pytest.approx(by_position.intervals[name], abs=4 / n), name
    # One unit with two values (trials): its cells are not one value's, so positions are drawn as before.
    calls.clear()
    reducer_bootstrap(mapped, ["0", *units[1:-1], "0"], ev.fn, seed=2, resamples=50, take=stacked.take,
                      cells=stacked.cells, counted=counted)
    assert calls == []


def test_a_dataset_evaluator_with_no_number_output_is_reduced_once_without_a_bootstrap() -> None:
    calls: list[int] = []

    @evaluator("test/structured-only", scope="dataset", mapper=lambda record: record.id,
               outputs=[Output("ids", "structured")])
    def structured_only(ids: list[str]) -> Score:
        calls.append(len(ids))
        return Score(structured=to_value({"count": len(ids)}))

    result = evalsi.evaluate([{"id": f"r{i}", "output": "x"} for i in range(30)], [structured_only],
                             bootstrap_resamples=200)
    assert calls == [30]  # the reduce on the data, and no resample
    (score,) = [score for res in result.results if res.evaluator == "structured-only" for score in res.scores]
    assert from_value(score.metadata["n"]) == 30 and "resamples" not in score.metadata


def test_a_run_of_dataset_evaluators_alone_publishes_its_reduce_before_waiting_for_news(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from evalsi.runs import driver as run_driver
    from evalsi.runs import news as run_news

    steps: list[str] = []
    wait, publish = run_news.RunNews.wait, run_driver.RunDriver._publish_reducers

    async def waiting(self: Any, run_id: str, timeout_s: float) -> None:
        steps.append("wait")
        await wait(self, run_id, timeout_s)

    async def publishing(self: Any, *args: Any) -> None:
        steps.append("reduce published")
        await publish(self, *args)

    monkeypatch.setattr(run_news.RunNews, "wait", waiting)
    monkeypatch.setattr(run_driver.RunDriver, "_publish_reducers", publishing)
    result = evalsi.evaluate([{"id": f"r{i}", "reference": "ab"[i % 2], "output": "ab"[i // 2 % 2]} for i in range(20)],
                             ["builtin/classification"], bootstrap_resamples=20)
    assert result.metric("classification.accuracy").mean == 0.5
    # Nothing was in flight before the reduce: a wait first would only have run out its tick (0.25 s embedded).
    assert steps[0] == "reduce published" and "wait" in steps
