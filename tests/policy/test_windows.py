"""Windowed aggregates with intervals, alert rules with min_samples, and dedup per window."""

from __future__ import annotations

from evalsi.policy import AlertTracker, WindowAggregator, compile_alert, window_start


def test_aggregates_per_window_with_intervals() -> None:
    windows = WindowAggregator(300)
    for i, value in enumerate([0.5, 0.6, 0.7, 0.8]):
        assert windows.add("llm-judge", value, 600 + i) == 600
    windows.add("pii-leak", True, 650)
    windows.add("llm-judge", 0.9, 900)
    assert windows.windows() == [600, 900]
    agg = windows.aggregates(600)
    assert agg["llm-judge"].n == 4 and abs(agg["llm-judge"].mean - 0.65) < 1e-12
    assert agg["llm-judge"].ci_low < 0.65 < agg["llm-judge"].ci_high and agg["llm-judge"].method == "t"
    assert agg["pii-leak"].method == "wilson"
    windows.drop_before(900)
    assert windows.windows() == [900]
    assert window_start(899.9, 300) == 600


def test_alert_needs_min_samples_and_fires_once_per_window() -> None:
    rule = compile_alert("mean('llm-judge') < 0.7", index=0, notify="http://x/hook", min_samples=3)
    tracker = AlertTracker("prod", [rule])
    windows = WindowAggregator(300)
    windows.add("llm-judge", 0.1, 0)
    windows.add("llm-judge", 0.2, 1)
    (decision,) = tracker.evaluate(0, windows.aggregates(0))
    assert not decision.fire and "2 of 3 samples" in decision.reason
    windows.add("llm-judge", 0.3, 2)
    (decision,) = tracker.evaluate(0, windows.aggregates(0))
    assert decision.fire and not decision.duplicate and "mean('llm-judge') = 0.2" in decision.reason
    (again,) = tracker.evaluate(0, windows.aggregates(0))
    assert not again.fire and again.duplicate and again.key == decision.key
    for i in range(3):
        windows.add("llm-judge", 0.1, 300 + i)
    (next_window,) = tracker.evaluate(300, windows.aggregates(300))
    assert next_window.fire and next_window.key != decision.key
    tracker.forget_before(300)
    (after,) = tracker.evaluate(300, windows.aggregates(300))
    assert after.duplicate


def test_a_rule_that_does_not_hold_or_reads_nothing() -> None:
    rule = compile_alert("mean('llm-judge') < 0.7 && n('llm-judge') >= 2", index=0, notify="http://x", min_samples=1)
    windows = WindowAggregator(60)
    windows.add("llm-judge", 0.9, 0)
    windows.add("llm-judge", 0.95, 1)
    (decision,) = AlertTracker("p", [rule]).evaluate(0, windows.aggregates(0))
    assert not decision.fire and not decision.duplicate
    (missing,) = AlertTracker("p", [rule]).evaluate(0, {})
    assert not missing.fire and "0 of 1 samples" in missing.reason


def test_a_metric_whose_kind_changes_starts_again() -> None:
    # A policy edit can make a metric numeric where it was pass/fail: the two cannot share an aggregate, and a
    # window must not stop the service (it used to raise), so the earlier values go and the metric starts again.
    windows = WindowAggregator(60)
    for passed in (True, False, True):
        windows.add("polite", passed, 10)
    windows.add("length", 4.0, 10)
    windows.add("polite", 0.25, 20)
    windows.add("polite", 0.75, 30)
    aggregates = windows.aggregates(0)
    assert aggregates["polite"].n == 2 and aggregates["polite"].mean == 0.5
    assert aggregates["length"].n == 1  # other metrics keep their values
