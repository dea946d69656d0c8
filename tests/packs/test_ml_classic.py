"""The ml-classic pack against scikit-learn on the same inputs: many random cases, ties, one class, bad values.

Each dataset metric is reduced as the runner reduces it (mapper, stack, reduce) and compared with scikit-learn's
function; the bootstrap's weighted resamples are compared with scikit-learn on the resampled rows themselves;
and every evaluator runs once through the public ``evalsi.evaluate``.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as sk
from sklearn.preprocessing import label_binarize

import evalsi
from evalsi.errors import SkipRecord
from evalsi.evaluators import Evaluator, Output, evaluator
from evalsi.packs.ml_classic import PACK
from evalsi.records import from_value, make_record
from evalsi.stats.bootstrap import reducer_bootstrap
from evalsi.v1alpha1.record_pb2 import Record

EVALUATORS = {ev.name: ev for ev in PACK.evaluators}


def _reduce(name: str, records: list[Record], **params: Any) -> Any:
    """The evaluator's value as the runner computes it: map each record, stack, reduce."""
    ev: Evaluator = EVALUATORS[name]
    assert ev.mapper is not None and ev.stack is not None
    return ev.fn(ev.stack([ev.mapper(record, **params) for record in records]), **params)


def _rows(truths: list[Any], predictions: list[Any] | None = None,
          probabilities: list[dict[str, float]] | None = None) -> list[Record]:
    out = []
    for at, truth in enumerate(truths):
        row: dict[str, Any] = {}
        if predictions is not None:
            row["prediction"] = predictions[at]
        if probabilities is not None:
            row["probabilities"] = probabilities[at]
        out.append(make_record(id=str(at), output={"row": row}, reference=truth))
    return out


def _probabilities(rng: np.random.Generator, n: int, k: int, ties: bool) -> np.ndarray:
    raw = rng.integers(0, 4, size=(n, k)).astype(float) + 0.5 if ties else rng.random((n, k))
    return raw / raw.sum(axis=1, keepdims=True)


CASES = [(seed, n, k) for seed in range(12) for n, k in ((2, 2), (7, 2), (40, 2), (200, 3), (150, 5))]


@pytest.mark.parametrize(("seed", "n", "k"), CASES)
def test_classification_equals_scikit_learn(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    classes = [f"c{i}" for i in range(k)] if seed % 2 else ["ja", "né", "ünï", "x y"][:k] + [str(i) for i in range(k)]
    truths = [classes[i] for i in rng.integers(0, k, n)]
    predictions = [classes[i] for i in rng.integers(0, k + (seed % 3), n) % len(classes)]
    got = _reduce("builtin/classification", _rows(truths, predictions))
    assert math.isclose(got["accuracy"], sk.accuracy_score(truths, predictions), rel_tol=1e-12)
    for average in ("micro", "macro", "weighted"):
        precision, recall, f1, _ = sk.precision_recall_fscore_support(truths, predictions, average=average,
                                                                      zero_division=0)
        assert math.isclose(got[f"precision_{average}"], precision, rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(got[f"recall_{average}"], recall, rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(got[f"f1_{average}"], f1, rel_tol=1e-12, abs_tol=1e-15)
    positive = truths[0]
    binary = _reduce("builtin/positive-class", _rows(truths, predictions), positive_label=positive)
    precision, recall, f1, _ = sk.precision_recall_fscore_support(
        truths, predictions, labels=[positive], average="macro", zero_division=0)
    assert binary == pytest.approx({"precision": precision, "recall": recall, "f1": f1}, rel=1e-12, abs=1e-15)
    matrix = from_value(_reduce("builtin/confusion-matrix", _rows(truths, predictions)).structured)
    labels = sorted({*truths, *predictions})
    assert matrix["labels"] == labels
    assert np.array_equal(np.array(matrix["counts"]),
                          sk.confusion_matrix(truths, predictions, labels=labels))


@pytest.mark.parametrize(("seed", "n", "k"), CASES)
def test_probability_metrics_equal_scikit_learn(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(100 + seed)
    classes = [f"k{i}" for i in range(k)]
    truths = [classes[i] for i in rng.permutation(np.arange(n) % k)]  # every class present
    matrix = _probabilities(rng, n, k, ties=seed % 3 == 0)
    rows = _rows(truths, probabilities=[dict(zip(classes, p, strict=True)) for p in matrix])
    if k == 2:
        auc = sk.roc_auc_score(truths, matrix[:, 1])
        ap = sk.average_precision_score(truths, matrix[:, 1], pos_label=classes[1])
    else:
        auc = sk.roc_auc_score(truths, matrix, multi_class="ovr", average="macro", labels=classes)
        ap = sk.average_precision_score(label_binarize(truths, classes=classes), matrix, average="macro")
    assert math.isclose(_reduce("builtin/roc-auc", rows), auc, rel_tol=1e-9)
    assert math.isclose(_reduce("builtin/pr-auc", rows), ap, rel_tol=1e-9)
    assert math.isclose(_reduce("builtin/log-loss", rows), sk.log_loss(truths, matrix, labels=classes), rel_tol=1e-9)
    brier = sk.brier_score_loss(truths, matrix[:, 1] if k == 2 else matrix, pos_label=classes[1], labels=classes)
    assert math.isclose(_reduce("builtin/brier", rows), brier, rel_tol=1e-9)
    positive = classes[0]
    one = sk.roc_auc_score([t == positive for t in truths], matrix[:, 0])
    assert math.isclose(_reduce("builtin/roc-auc", rows, positive_label=positive), one, rel_tol=1e-9)
    for bins in (1, 5, 10, 15):
        assert math.isclose(_reduce("builtin/ece", rows, bins=bins), _ece(truths, matrix, classes, bins),
                            rel_tol=1e-9, abs_tol=1e-12)


def _ece(truths: list[str], matrix: np.ndarray, classes: list[str], bins: int) -> float:
    """ECE transcribed from its definition: bins ((m-1)/M, m/M] (0 in the first), |acc - conf| by bin share."""
    total = 0.0
    n = len(truths)
    for m in range(1, bins + 1):
        members = []
        for i in range(n):
            confidence = max(matrix[i])
            if (m - 1) / bins < confidence <= m / bins or (m == 1 and confidence == 0):
                members.append(i)
        if members:
            accuracy = sum(classes[int(np.argmax(matrix[i]))] == truths[i] for i in members) / len(members)
            confidence_mean = sum(max(matrix[i]) for i in members) / len(members)
            total += len(members) / n * abs(accuracy - confidence_mean)
    return total


def test_one_probability_of_two_classes_gives_the_other_as_its_complement() -> None:
    truths = ["0", "1", "1", "0", "1"]
    scores = [0.2, 0.9, 0.4, 0.4, 0.7]
    rows = _rows(truths, probabilities=[{"1": p} for p in scores])
    assert math.isclose(_reduce("builtin/roc-auc", rows), sk.roc_auc_score([int(t) for t in truths], scores))
    assert math.isclose(_reduce("builtin/brier", rows), sk.brier_score_loss([int(t) for t in truths], scores))
    assert math.isclose(_reduce("builtin/log-loss", rows), sk.log_loss([int(t) for t in truths], scores))


def test_one_class_is_a_skip_with_the_reason_not_a_crash() -> None:
    rows = _rows(["yes"] * 4, probabilities=[{"yes": 0.9, "no": 0.1}] * 4)
    with pytest.raises(SkipRecord, match="every record has the label 'yes'"):
        _reduce("builtin/roc-auc", rows)
    with pytest.raises(SkipRecord, match="needs both it and another class"):
        _reduce("builtin/pr-auc", rows)
    only = _rows(["yes"] * 3, probabilities=[{"yes": 1.0}] * 3)
    with pytest.raises(SkipRecord, match="only one class"):
        _reduce("builtin/log-loss", only)
    result = evalsi.evaluate([{"output": {"row": {"probabilities": {"yes": 0.8, "no": 0.2}}}, "reference": "yes"}] * 3,
                             ["builtin/roc-auc"])
    (scored,) = result.results
    assert scored.outcome == 2 and "every record has the label 'yes'" in scored.reason  # OUTCOME_SKIPPED


def test_records_without_what_a_metric_needs_are_skipped_with_reasons() -> None:
    ev = EVALUATORS["builtin/roc-auc"]
    assert ev.mapper is not None
    cases = [
        (make_record(output="yes", reference="yes"), "no class probabilities"),
        (make_record(output={"row": {"probabilities": {"a": float("nan")}}}, reference="a"), r"not in \[0, 1\]"),
        (make_record(output={"row": {"probabilities": {"a": 1.5}}}, reference="a"), r"not in \[0, 1\]"),
        (make_record(output={"row": {"probabilities": {"a": 1.0}}}, reference=["a", "b"]), "expected a class label"),
    ]
    for record, reason in cases:
        with pytest.raises(SkipRecord, match=reason):
            ev.mapper(record)
    regression = EVALUATORS["builtin/regression"]
    assert regression.mapper is not None
    for output, reason in (("abc", "'abc' is not a number"), ({"row": {"prediction": "nan"}}, "not a finite"),
                           (True, "expected a number")):
        with pytest.raises(SkipRecord, match=reason):
            regression.mapper(make_record(output=output, reference=1))
    result = evalsi.evaluate([{"output": "x", "reference": "1"}, {"output": "2", "reference": "1"},
                              {"output": "3", "reference": "5"}], ["builtin/regression"])
    mae = result.metric("regression.mae")
    assert mae.n == 2 and math.isclose(mae.mean, 1.5) and mae.skipped == 1


@pytest.mark.parametrize("seed", range(15))
def test_regression_equals_scikit_learn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    truths = rng.normal(0, 10, n) if seed % 4 else rng.integers(-3, 4, n).astype(float)  # zeros: MAPE's eps
    predictions = truths + rng.normal(0, 3, n)
    rows = [make_record(id=str(i), output=float(p) if i % 2 else {"row": {"prediction": float(p)}},
                        reference=str(float(t)) if i % 3 == 0 else float(t))
            for i, (t, p) in enumerate(zip(truths, predictions, strict=True))]
    got = _reduce("builtin/regression", rows)
    expected = {"mae": sk.mean_absolute_error(truths, predictions), "mse": sk.mean_squared_error(truths, predictions),
                "rmse": sk.root_mean_squared_error(truths, predictions), "r2": sk.r2_score(truths, predictions),
                "mape": sk.mean_absolute_percentage_error(truths, predictions)}
    assert got == pytest.approx(expected, rel=1e-9)


def test_regression_edge_cases_follow_scikit_learn() -> None:
    constant = [make_record(output=p, reference=3) for p in (3, 3, 3)]
    assert _reduce("builtin/regression", constant)["r2"] == sk.r2_score([3, 3, 3], [3, 3, 3]) == 1.0
    off = [make_record(output=p, reference=3) for p in (3, 4, 3)]
    assert _reduce("builtin/regression", off)["r2"] == sk.r2_score([3, 3, 3], [3, 4, 3]) == 0.0
    assert "r2" not in _reduce("builtin/regression", [make_record(output=1, reference=2)])


def _ndcg_reference(ranked: list[str], grades: dict[str, float], k: int) -> float:
    """scikit-learn's ndcg_score over every judged and listed id, the listed ones scored by rank."""
    items = list(dict.fromkeys([*ranked, *grades]))
    scores = [len(ranked) - ranked.index(item) if item in ranked else -1.0 - i for i, item in enumerate(items)]
    return float(sk.ndcg_score([[grades.get(item, 0.0) for item in items]], [scores], k=k))


@pytest.mark.parametrize("seed", range(40))
def test_ranking_equals_scikit_learn_and_the_definitions(seed: int) -> None:
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(rng.randint(2, 30))] + ["ü", "1"]
    ranked = rng.sample(pool, rng.randint(1, len(pool)))
    graded = seed % 2 == 0
    judged = rng.sample(pool, rng.randint(1, len(pool)))
    grades = {item: float(rng.randint(0, 3)) for item in judged} if graded else dict.fromkeys(judged, 1.0)
    if not any(grades.values()):
        grades[judged[0]] = 2.0
    k = rng.randint(1, len(ranked))  # within the listed ids, where unlisted ones cannot matter
    record = make_record(output=ranked, reference=grades if graded else judged)
    got = EVALUATORS["builtin/ranking"](record, k=k)
    assert math.isclose(got["ndcg"], _ndcg_reference(ranked, grades, k), rel_tol=1e-9)
    relevant = {item for item, grade in grades.items() if grade > 0}
    first = next((i for i, item in enumerate(ranked) if item in relevant), None)
    assert got["mrr"] == (0.0 if first is None else 1 / (first + 1))
    hits = [i for i, item in enumerate(ranked) if item in relevant]
    assert math.isclose(got["map"], sum((j + 1) / (i + 1) for j, i in enumerate(hits)) / len(relevant))
    assert got["recall"] == len(relevant & set(ranked[:k])) / len(relevant)
    if relevant <= set(ranked):  # every relevant id listed: IR's AP is scikit-learn's
        scores = [len(ranked) - i for i in range(len(ranked))]
        expected = sk.average_precision_score([item in relevant for item in ranked], scores)
        assert math.isclose(got["map"], expected, rel_tol=1e-9)


def test_ranking_skips_what_it_cannot_score() -> None:
    ranking = EVALUATORS["builtin/ranking"]
    with pytest.raises(SkipRecord, match="no id has a relevance above 0"):
        ranking(make_record(output=["a"], reference={"a": 0}))
    with pytest.raises(SkipRecord, match="ranked JSON list"):
        ranking(make_record(output="not json", reference=["a"]))
    with pytest.raises(SkipRecord, match="relevance of 'a' must be a finite number"):
        ranking(make_record(output=["a"], reference={"a": "high"}))
    twice = ranking(make_record(output='["a", "a", "b"]', reference=["b"]))
    assert twice["mrr"] == 0.5  # an id listed twice counts at its first place


@pytest.mark.parametrize("seed", range(4))
def test_bootstrap_resamples_by_weight_equal_scikit_learn_on_the_resampled_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 60
    truths = [str(int(v)) for v in rng.integers(0, 2, n)]
    scores = np.round(rng.random(n), 1)  # ties
    rows = _rows(truths, [str(int(s > 0.5)) for s in scores], [{"1": float(s), "0": float(1 - s)} for s in scores])
    units = [str(i) for i in range(n)]
    for name, metric, reference in (
        ("builtin/roc-auc", "roc_auc", lambda t, s, _p: sk.roc_auc_score(t, s)),
        ("builtin/pr-auc", "average_precision", lambda t, s, _p: sk.average_precision_score(t, s, pos_label="1")),
        ("builtin/classification", "f1_macro",
         lambda t, _s, p: sk.f1_score(t, p, average="macro", zero_division=0)),
    ):
        ev = EVALUATORS[name]
        assert ev.mapper is not None and ev.stack is not None
        mapped = [ev.mapper(record) for record in rows]
        stacked = ev.stack(mapped)

        def ours(sample: Any, ev: Evaluator = ev, metric: str = metric) -> dict[str, float]:
            value = ev.fn(sample)
            return {metric: value[metric] if isinstance(value, dict) else value}

        def theirs(sample: list[int], reference: Any = reference, metric: str = metric) -> dict[str, float]:
            return {metric: reference([truths[i] for i in sample], scores[sample],
                                      [rows[i].output.row.prediction.string_value for i in sample])}

        by_weight = reducer_bootstrap(mapped, units, ours, seed=seed, resamples=300, take=stacked.take)
        by_rows = reducer_bootstrap(list(range(n)), units, theirs, seed=seed, resamples=300)
        assert by_weight.resamples == by_rows.resamples and by_weight.failed == by_rows.failed
        assert by_weight.intervals[metric] == pytest.approx(by_rows.intervals[metric], rel=1e-9)


def test_every_evaluator_runs_through_evaluate_with_intervals() -> None:
    rng = np.random.default_rng(7)
    rows: list[dict[str, Any]] = []
    for i in range(120):
        truth = ["cat", "dog", "emu"][i % 3]
        p = _probabilities(rng, 1, 3, ties=False)[0]
        probabilities = dict(zip(["cat", "dog", "emu"], map(float, p), strict=True))
        rows.append({"id": f"r{i}", "reference": truth,
                     "output": {"row": {"features": {"x": i}, "prediction": max(probabilities, key=probabilities.get),
                                        "probabilities": probabilities}}})
    names = ["builtin/correct", "builtin/classification", "builtin/roc-auc", "builtin/pr-auc", "builtin/log-loss",
             "builtin/brier", "builtin/ece", "builtin/confusion-matrix"]
    result = evalsi.evaluate(rows, names, bootstrap_resamples=200)
    truths = [row["reference"] for row in rows]
    predictions = [row["output"]["row"]["prediction"] for row in rows]
    matrix = np.array([list(row["output"]["row"]["probabilities"].values()) for row in rows])
    accuracy = result.metric("classification.accuracy")
    assert math.isclose(accuracy.mean, sk.accuracy_score(truths, predictions))
    assert accuracy.ci.low <= accuracy.mean <= accuracy.ci.high and accuracy.ci.low < accuracy.ci.high
    assert math.isclose(result.metric("correct").mean, accuracy.mean)
    assert math.isclose(result.metric("roc-auc").mean, sk.roc_auc_score(truths, matrix, multi_class="ovr"))
    assert math.isclose(result.metric("log-loss").mean, sk.log_loss(truths, matrix))
    regression = evalsi.evaluate([{"output": i + 0.5, "reference": i} for i in range(30)], ["builtin/regression"])
    assert math.isclose(regression.metric("regression.mae").mean, 0.5)
    ranked = evalsi.evaluate([{"output": ["a", "b", "c"], "reference": {"b": 2, "c": 1}}] * 5,
                             [{"ref": "builtin/ranking", "params": {"k": 2}}])
    assert math.isclose(ranked.metric("ranking.mrr").mean, 0.5)
    assert math.isclose(ranked.metric("ranking.recall").mean, 0.5)


def test_the_batch_form_of_correct_agrees_with_the_function() -> None:
    ev = EVALUATORS["builtin/correct"]
    assert ev.batch is not None
    records = [make_record(output=o, reference=r) for o, r in (
        ("yes", "yes"), ("yes", "no"), ("", "no"), ("1", 1), ({"row": {"prediction": "a"}}, "a"),
        ({"row": {"probabilities": {"a": 0.3, "b": 0.7}}}, "b"), (2, "2"), ("Yes", "yes"), (True, "true"))]
    texts = {field: [getattr(r, field).text for r in records] for field in ("output", "reference")}
    for record, verdict in zip(records, ev.batch(texts), strict=True):
        expected = ev(record)
        assert verdict is None or verdict == expected
    assert [ev(r) for r in records] == [True, False, False, True, True, True, True, False, True]
    result = evalsi.evaluate([{"output": "a", "reference": "a"}, {"output": {"row": {"prediction": 1}}, "reference": 1},
                              {"output": "b", "reference": "a"}], ["builtin/correct"])
    assert result.metric("correct").mean == pytest.approx(2 / 3)


def test_a_stack_that_fails_is_that_evaluators_outcome_not_the_runs() -> None:
    def refuse(values: list[Any]) -> Any:
        raise SkipRecord("nothing to stack")

    def broken(values: list[Any]) -> Any:
        raise RuntimeError("stack bug")

    made = [evaluator(f"t/{name}", scope="dataset", mapper=lambda r: 1.0, stack=stack,
                      outputs=[Output("x", "number")])(lambda values: 1.0)
            for name, stack in (("skips", refuse), ("breaks", broken))]
    result = evalsi.evaluate([{"output": "a"}, {"output": "b"}], [*made, "builtin/correct"])
    outcomes = {r.evaluator: (r.outcome, r.reason) for r in result.results if r.evaluator in ("skips", "breaks")}
    assert outcomes["skips"] == (2, "nothing to stack")  # OUTCOME_SKIPPED
    assert outcomes["breaks"][1] == "RuntimeError: stack bug"
