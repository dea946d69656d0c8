"""Trace labels, pure: what a resource carries, a trace's labels over its resources, what an OTLP batch is decided
on, the credential's labels stamped over the resource's, ``key=value`` filters, and the JSON member both stores
search for."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.authz.attributes import DEFAULT_SOURCES, otlp_export
from evalsi.errors import BadInputError
from evalsi.labels import (
    common_labels,
    merged_labels,
    parse_label_filters,
    resource_labels,
    stamp_resource_labels,
)
from evalsi.stores.traces.labels import label_member, labels_by_trace


def batch(*resources: dict[str, object]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for attributes in resources:
        resource = request.resource_spans.add().resource
        for key, value in attributes.items():
            attribute = resource.attributes.add()
            attribute.key = key
            if isinstance(value, str):
                attribute.value.string_value = value
            else:
                attribute.value.int_value = int(value)  # type: ignore[call-overload]
    return request


def test_a_resource_labels_only_string_values_under_the_prefix() -> None:
    assert resource_labels({"evalsi.label.app": "checkout", "evalsi.label.n": 3, "evalsi.label.": "x",
                            "my.evalsi.label.team": "a", "service.name": "shop"}) == {"app": "checkout"}


def test_a_traces_labels_merge_its_resources_in_any_order() -> None:
    sets = [{"app": "checkout"}, {"team": "a", "app": "cart"}]
    assert merged_labels(sets) == merged_labels(reversed(sets)) == {"app": "checkout", "team": "a"}


def test_a_batch_is_decided_on_the_labels_all_its_resources_share() -> None:
    assert common_labels([]) == {}
    assert common_labels([{"app": "checkout", "team": "a"}, {"app": "checkout"}]) == {"app": "checkout"}
    mixed = otlp_export(batch({"service.name": "a", "evalsi.label.app": "checkout"},
                              {"service.name": "b", "evalsi.label.app": "search"}), DEFAULT_SOURCES)
    assert mixed["labels"] == {} and mixed["services"] == ["a", "b"]
    same = otlp_export(batch({"evalsi.label.app": "checkout", "evalsi.label.n": 3}), DEFAULT_SOURCES)
    assert same["labels"] == {"app": "checkout"}


def test_the_credentials_labels_replace_the_resources_own() -> None:
    request = batch({"service.name": "shop", "evalsi.label.app": "search", "evalsi.label.team": "a"}, {})
    stamp_resource_labels((group.resource for group in request.resource_spans), {"app": "checkout"})
    decided = otlp_export(request, DEFAULT_SOURCES)
    assert decided["labels"] == {"app": "checkout"}  # the second resource has only the stamped label
    first = [(a.key, a.value.string_value) for a in request.resource_spans[0].resource.attributes]
    assert first == [("service.name", "shop"), ("evalsi.label.team", "a"), ("evalsi.label.app", "checkout")]
    stamp_resource_labels((group.resource for group in request.resource_spans), {})
    assert len(request.resource_spans[0].resource.attributes) == 3


def test_label_filters_are_key_value_items() -> None:
    assert parse_label_filters(["app=checkout", " team = a=b "], "labels") == {"app": "checkout", "team": "a=b"}
    for bad in ("app", "=x"):
        with pytest.raises(BadInputError, match=r"labels\[1\]: expected key=value"):
            parse_label_filters(["ok=1", bad], "labels")


def test_the_member_searched_for_is_exactly_the_label_in_a_stored_resource() -> None:
    stored = json.dumps({"evalsi.label.app": "checkout", "note": '"evalsi.label.app": "search"'}, sort_keys=True)
    assert label_member("app", "checkout") in stored
    assert label_member("app", "search") not in stored  # quoted inside a value: escaped, so never a member
    assert label_member("app", "check") not in stored and label_member("pp", "checkout") not in stored
    rows = [("t1", stored), ("t1", json.dumps({"evalsi.label.team": "a"})), ("t2", json.dumps({"x": 1}))]
    assert labels_by_trace(rows) == {"t1": {"app": "checkout", "team": "a"}}


def test_label_filters_are_bounded_like_a_runs_labels() -> None:
    from evalsi.limits import MAX_LABEL_VALUE_CHARS, MAX_LABELS

    assert len(parse_label_filters([f"k{i}=v" for i in range(MAX_LABELS)], "labels")) == MAX_LABELS
    with pytest.raises(BadInputError, match=rf"labels: {MAX_LABELS + 1} label filters exceed the limit"):
        parse_label_filters([f"k{i}=v" for i in range(MAX_LABELS + 1)], "labels")
    with pytest.raises(BadInputError, match=r"labels\[0\]: a label key is at most 253 characters"):
        parse_label_filters(["app=" + "x" * (MAX_LABEL_VALUE_CHARS + 1)], "labels")
