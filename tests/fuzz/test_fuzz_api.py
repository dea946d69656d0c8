"""Every route of evalsi-api, derived from the proto descriptors' ``google.api.http`` options, and every gRPC
method, fed hostile paths, query strings, headers and bodies. Each answer must be a 4xx or a success (never a
5xx), within a bounded time; a refused request stores nothing; no service process exits or restarts."""

from __future__ import annotations

import time
from typing import Any

import grpc
import httpx
import pytest
from fuzz_stack import FuzzStack
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor
from hostile import (
    hostile_text,
    json_bodies,
    json_values,
    message_shaped,
    mutated,
    nested_field_bytes,
    self_nesting_field,
    url_text,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalsi.api.table import PUBLIC_SERVICES
from evalsi.api.transcoding import Route, routes_for

ROUTES = routes_for(method for service in PUBLIC_SERVICES for method in service.methods)
METHODS = [method for service in PUBLIC_SERVICES for method in service.methods]
ANSWER_WITHIN_S = 10.0
# Reproducible in CI: the same examples on every run.
FUZZ = settings(
    max_examples=12, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SERVER_FAULTS = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS,
                 grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


def _path(route: Route, values: list[str]) -> str:
    path = route.template.text
    for field, value in zip(route.template.variables, values, strict=True):
        start = path.index("{")
        path = path[:start] + url_text(value) + path[path.index("}", start) + 1:]
        assert field  # every capture got a value
    return path


@st.composite
def http_calls(draw: st.DrawFn, route: Route) -> dict[str, Any]:
    descriptor = route.method.input_type
    values = [draw(hostile_text.filter(bool)) for _ in route.template.variables]
    names = [field.json_name for field in descriptor.fields] + [field.name for field in descriptor.fields]
    params = draw(st.lists(st.tuples(st.one_of(st.sampled_from(names or ["x"]), hostile_text), hostile_text),
                           max_size=3))
    headers = draw(st.fixed_dictionaries({}, optional={
        "x-evalsi-project": st.sampled_from(["../x", "a" * 300, "x y", "", "ok-project"]),
        "x-evalsi-timeout": st.sampled_from(["NaN", "-1", "0", "1e999", "abc", "5"]),
        "Content-Type": st.sampled_from(["application/json", "text/plain", "application/x-protobuf", ""]),
    }))
    body = draw(json_bodies(descriptor)) if route.body else draw(st.sampled_from([b"", b"{}"]))
    method = draw(st.sampled_from([route.http_method, route.http_method, "PUT", "PATCH"]))
    query = "&".join(f"{url_text(name)}={url_text(value)}" for name, value in params)
    url = _path(route, values) + (f"?{query}" if query else "")
    return {"method": method, "url": url, "headers": headers, "content": body}


def _check_http(fuzz: FuzzStack, client: httpx.Client, call: dict[str, Any]) -> None:
    before = fuzz.stored()
    started = time.monotonic()
    answer = client.request(call["method"], fuzz.api_http + call["url"], headers=call["headers"],
                            content=call["content"])
    elapsed = time.monotonic() - started
    shown = f"{call['method']} {call['url'][:300]} body={call['content'][:300]!r}"
    assert answer.status_code < 500, f"{shown} -> {answer.status_code} {answer.text[:500]}"
    assert elapsed < ANSWER_WITHIN_S, f"{shown} took {elapsed:.1f} s"
    if answer.status_code >= 400:
        assert fuzz.stored() == before, f"{shown} was refused ({answer.status_code}) but changed the stores"
        assert "Traceback" not in answer.text


@pytest.fixture(scope="module")
def client() -> httpx.Client:
    with httpx.Client(timeout=ANSWER_WITHIN_S + 5) as http:
        yield http


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: f"{route.http_method} {route.path}")
def test_every_http_route_answers_hostile_requests_with_a_4xx(
    fuzz_stack: FuzzStack, client: httpx.Client, route: Route
) -> None:
    @FUZZ
    @given(call=http_calls(route))
    def check(call: dict[str, Any]) -> None:
        _check_http(fuzz_stack, client, call)

    check()
    assert fuzz_stack.alive() == []


# --- gRPC ----------------------------------------------------------------------------------------


def _grpc_payloads(method: MethodDescriptor) -> st.SearchStrategy[bytes]:
    message_type = message_factory.GetMessageClass(method.input_type)

    def serialized(obj: dict[str, Any]) -> bytes:
        message = message_type()
        try:
            json_format.ParseDict(obj, message, ignore_unknown_fields=True)
            return message.SerializeToString()
        except Exception:  # a shape the JSON mapping refuses (or NUL text): send its repr as bytes instead
            return repr(obj).encode("utf-8", "surrogatepass")[:200]

    shaped = message_shaped(method.input_type).map(serialized)
    deep = nested_field_bytes(self_nesting_field(method.input_type) or 1, 150)
    return st.one_of(shaped, shaped.flatmap(mutated), st.binary(max_size=64), st.just(deep),
                     st.just(b"\x0a\x01\x00"), st.just(b"\x0a\x03a\x00b"), st.just(b"\x0a\x02\xed\xa0"))


@pytest.mark.parametrize("method", METHODS, ids=lambda method: method.full_name)
def test_every_grpc_method_answers_hostile_bytes_with_a_client_error(
    fuzz_stack: FuzzStack, method: MethodDescriptor
) -> None:
    path = f"/{method.containing_service.full_name}/{method.name}"
    with grpc.insecure_channel(fuzz_stack.api_grpc) as channel:

        @FUZZ
        @given(payload=_grpc_payloads(method))
        def check(payload: bytes) -> None:
            before = fuzz_stack.stored()
            started = time.monotonic()
            code = _call(channel, method, path, payload)
            elapsed = time.monotonic() - started
            assert code not in SERVER_FAULTS, f"{path} {payload[:200]!r} -> {code}"
            assert elapsed < ANSWER_WITHIN_S, f"{path} {payload[:200]!r} took {elapsed:.1f} s"
            if code != grpc.StatusCode.OK:
                assert fuzz_stack.stored() == before, f"{path} {payload[:200]!r} refused ({code}) but stored"

        check()
    assert fuzz_stack.alive() == []


def _call(channel: grpc.Channel, method: MethodDescriptor, path: str, payload: bytes) -> grpc.StatusCode:
    try:
        if method.client_streaming:
            replies = channel.stream_stream(path)(iter([payload]), timeout=ANSWER_WITHIN_S)
            for _ in replies:
                pass
        elif method.server_streaming:
            # A run that exists would stream until cancelled; none of these payloads names one.
            for _ in channel.unary_stream(path)(payload, timeout=ANSWER_WITHIN_S):
                pass
        else:
            channel.unary_unary(path)(payload, timeout=ANSWER_WITHIN_S)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def test_json_values_strategy_reaches_every_hostile_kind() -> None:
    """The strategies do produce what the suite claims to send (a guard against a strategy that silently
    stopped generating, e.g. after a refactor)."""
    seen: set[str] = set()

    @settings(max_examples=200, derandomize=True, database=None)
    @given(value=json_values)
    def collect(value: Any) -> None:
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
                stack.extend(item.keys())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, str) and "\x00" in item:
                seen.add("nul")
            elif isinstance(item, str) and any("\ud800" <= char <= "\udfff" for char in item):
                seen.add("surrogate")
            elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 2**63:
                seen.add("huge")

    collect()
    assert seen == {"nul", "surrogate", "huge"}
