"""Codec and subject names: one protobuf message per payload, its type in a header, decoded at the edge."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from evalsi.bus import Permanent, subjects
from evalsi.bus.codec import (
    MSG_ID_HEADER,
    TRACEPARENT_HEADER,
    TRACESTATE_HEADER,
    TYPE_HEADER,
    decode,
    decode_any,
    encode,
    message_class,
)
from evalsi.bus.offload import payload_limit
from evalsi.bus.v1alpha1 import bus_pb2

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_encode_names_the_type_and_the_key(make_task: Callable[..., bus_pb2.Task]) -> None:
    task = make_task("run1/0/evaluate/0/exact-match@1.0.0")
    data, headers = encode(task, key=task.key, traceparent=TRACEPARENT, tracestate="k=v")
    assert headers[TYPE_HEADER] == "evalsi.bus.v1alpha1.Task"
    assert headers[MSG_ID_HEADER] == task.key
    assert headers[TRACEPARENT_HEADER] == TRACEPARENT
    assert headers[TRACESTATE_HEADER] == "k=v"
    assert decode(data, headers, bus_pb2.Task) == task


def test_no_key_means_no_message_id() -> None:
    _, headers = encode(bus_pb2.RunControl(run_id="r"), key=None)
    assert MSG_ID_HEADER not in headers
    with pytest.raises(ValueError, match="one non-empty line"):
        encode(bus_pb2.RunControl(run_id="r"), key="a\nb")


def test_a_traceparent_in_the_given_headers_is_carried() -> None:
    _, headers = encode(bus_pb2.RunControl(run_id="r"), headers={TRACEPARENT_HEADER: TRACEPARENT, "X-Extra": "a\nb"})
    assert headers[TRACEPARENT_HEADER] == TRACEPARENT
    assert headers["X-Extra"] == "a b"  # header values are one line on the wire


def test_decode_refuses_another_type_as_permanent() -> None:
    data, headers = encode(bus_pb2.RunControl(run_id="r"))
    with pytest.raises(Permanent, match=r"RunControl, expected evalsi\.bus\.v1alpha1\.Task"):
        decode(data, headers, bus_pb2.Task)


def test_decode_refuses_a_missing_type_header_and_garbage_bytes() -> None:
    with pytest.raises(Permanent, match="no Evalsi-Type"):
        decode(b"", {}, bus_pb2.Task)
    with pytest.raises(Permanent, match="does not parse"):
        decode(b"\xff\xff\xff\xff", {TYPE_HEADER: "evalsi.bus.v1alpha1.Task"}, bus_pb2.Task)


def test_decode_any_finds_the_class_by_name(make_task: Callable[..., bus_pb2.Task]) -> None:
    data, headers = encode(make_task("k"))
    assert message_class("evalsi.bus.v1alpha1.TaskResult") is bus_pb2.TaskResult
    assert decode_any(data, headers) == make_task("k")
    assert decode_any(data, {TYPE_HEADER: "no.such.Type"}) is None


def test_subjects() -> None:
    assert subjects.work("cpu") == "work.cpu"
    assert subjects.work_consumer("judge") == "work-judge"
    assert subjects.results("run-1") == "results.run-1"
    assert subjects.run_events("r1") == "runs.events.r1"
    assert subjects.run_control("r1") == "runs.control.r1"
    assert subjects.deadletter("gpu") == "deadletter.gpu"
    assert subjects.evaluate("sandbox") == "evaluate.sandbox"
    assert subjects.evaluate_queue("sandbox") == "evaluate-sandbox"
    assert subjects.deadletter_for("work.harness") == "deadletter.harness"
    assert subjects.deadletter_for("results.r1") == "deadletter.results"
    assert subjects.deadletter_for("runs.control.r1") == "deadletter.control"
    assert set(subjects.POOLS) == {"cpu", "judge", "gpu", "sandbox", "harness"}


@pytest.mark.parametrize("bad", ["", "a.b", "a b", "*", ">"])
def test_a_run_id_must_be_one_token(bad: str) -> None:
    with pytest.raises(ValueError, match="subject token"):
        subjects.results(bad)


def test_unknown_pool() -> None:
    with pytest.raises(ValueError, match="pools are cpu, judge, gpu, sandbox, harness"):
        subjects.work("tpu")


def test_payload_limit() -> None:
    assert payload_limit(1024 * 1024) == 1024 * 1024 - 8 * 1024
    assert payload_limit(1024 * 1024, configured=1000) == 1000
    with pytest.raises(ValueError):
        payload_limit(100)
