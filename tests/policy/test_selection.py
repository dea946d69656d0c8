"""The selector over resource, span and trace; deterministic sampling; always-rules."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from policy_helpers import trace

from evalsi.errors import BadInputError
from evalsi.policy import Selector, decide_sampling, parse_always, sample_fraction

SELECTOR = 'resource["service.name"] == "support-agent" && span.type == "agent"'


def test_selector_reads_resource_and_span() -> None:
    assert Selector(SELECTOR).matches(trace())
    assert not Selector(SELECTOR).matches(trace(service="billing"))
    assert Selector('span.type == "llm"').matches(trace())  # any span of the trace
    assert Selector("trace.span_count == 2 && trace.project == 'support'").matches(trace())
    assert Selector("").matches(trace())


def test_selector_that_cannot_be_evaluated_does_not_select() -> None:
    assert not Selector('resource["missing"] == "x"').matches(trace())
    with pytest.raises(BadInputError, match="invalid CEL"):
        Selector("span.type ==")


def test_sampling_is_a_pure_function_of_the_trace_id() -> None:
    ids = [f"{i:032x}" for i in range(2000)]
    fractions = [sample_fraction(t) for t in ids]
    assert all(0.0 <= f < 1.0 for f in fractions)
    share = sum(f < 0.1 for f in fractions) / len(ids)
    assert 0.07 < share < 0.13
    assert sample_fraction("0AF7651916CD43DD8448EB211C80319C") == sample_fraction("0af7651916cd43dd8448eb211c80319c")


def test_sampling_is_the_same_in_another_process() -> None:
    ids = [f"{i * 7919:032x}" for i in range(50)]
    code = (
        "import sys; from evalsi.policy import sample_fraction; "
        "print(','.join(repr(sample_fraction(t)) for t in sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, *ids], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == ",".join(repr(sample_fraction(t)) for t in ids)


def test_always_rules_sample_whatever_the_rate() -> None:
    rules = [parse_always("trace.error"), parse_always("feedback.negative"), parse_always("latency > 800ms")]
    assert not decide_sampling(trace(), 0.0, rules).sampled
    assert decide_sampling(trace(error=True), 0.0, rules).reasons == ("trace.error",)
    assert decide_sampling(trace(negative_feedback=True), 0.0, rules).reasons == ("feedback.negative",)
    slow = decide_sampling(trace(end=2_000_000_000), 0.0, rules)
    assert slow.sampled and slow.reasons == ("latency > 800ms",)
    assert decide_sampling(trace(), 1.0, rules).reasons == ("rate",)
    assert parse_always("latency > 2.5").threshold_s == 2.5


def test_percentile_latency_is_refused_with_the_reason() -> None:
    with pytest.raises(BadInputError, match="not built yet"):
        parse_always("latency > p99")
    with pytest.raises(BadInputError, match="unknown rule"):
        parse_always("trace.slow")


def test_a_selector_is_type_checked_when_compiled_with_the_field_and_the_position() -> None:
    with pytest.raises(BadInputError) as info:
        Selector('span.kind == "llm"')
    assert str(info.value) == (
        "span has no field 'kind'; accepted: id, parent_id, name, type, model, tool, error, duration_s, attributes "
        "(in 'span.kind == \"llm\"' at column 6)"
    )
    with pytest.raises(BadInputError) as info:
        Selector("trace.latency_s > '2s'")
    assert str(info.value) == (
        "> cannot order double and string (in \"trace.latency_s > '2s'\" at column 17)"
    )
    with pytest.raises(BadInputError) as info:
        Selector("trace.span_count")
    assert str(info.value) == "a selector must be true or false; 'trace.span_count' is an int"


def test_a_selector_compares_an_int_field_with_a_fraction_and_a_double_with_an_int() -> None:
    assert Selector("trace.span_count > 1.5").matches(trace())  # 2 spans
    assert not Selector("trace.span_count > 2.5").matches(trace())
    assert Selector("trace.latency_s >= 0").matches(trace())  # a double against an int literal
