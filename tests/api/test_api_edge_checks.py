"""evalsi.edge_checks: what every request body is refused for, and the path each refusal names."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import json_format

from evalsi.api import load_run_dataset
from evalsi.api.transcoding import parse_json_into
from evalsi.edge_checks import MAX_MESSAGE_DEPTH, check_message, load_json
from evalsi.errors import BadInputError
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.monitor_service_pb2 import ApplyPolicyRequest
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"a": NaN}', "a: NaN is not a JSON number"),
        (b'{"a": [1, {"b": Infinity}]}', "a[1].b: Infinity is not a JSON number"),
        (b'{"a": "x\\u0000"}', "a: contains a NUL character (U+0000)"),
        (b'{"a\\u0000": 1}', '["a\\u0000"]: a key contains a NUL character'),
        (b'{"a": ["ok", "\\ud800"]}', "a[1]: contains a lone UTF-16 surrogate (U+D800) at character 0"),
        (b'{"a b": {"c": "\\udfff"}}', '["a b"].c: contains a lone UTF-16 surrogate (U+DFFF)'),
        (b"[" * 100_000, "request body: JSON nested deeper than the limit of 64 levels"),
        (b'{"a":' * 65 + b"1" + b"}" * 65, "a.a.a.a"),
    ],
)
def test_load_json_refuses_naming_the_path(body: bytes, message: str) -> None:
    with pytest.raises(BadInputError) as raised:
        load_json(body)
    assert message in str(raised.value)


def test_load_json_accepts_what_is_storable() -> None:
    body = b'{"emoji": "\\ud83d\\ude00", "deep": ' + b"[" * 63 + b"]" * 63 + b', "n": 1e308, "s": "a\\\\u0000"}'
    document = load_json(body)
    assert document["emoji"] == "😀" and document["n"] == 1e308 and document["s"] == "a\\u0000"


def test_load_json_names_the_body_field_and_can_leave_text_alone() -> None:
    with pytest.raises(BadInputError, match=r"^policy\.metadata\.name: contains a NUL"):
        load_json(b'{"metadata": {"name": "p\\u0000"}}', root=("policy",))
    assert load_json(b'{"name": "p\\u0000"}', check_text=False) == {"name": "p\x00"}


def test_load_json_keeps_bytes_from_being_read_as_utf16() -> None:
    with pytest.raises(UnicodeDecodeError):
        load_json(b'\xff\xfe{\x00}\x00')


def _nested_struct(depth: int) -> dict[str, object]:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[return-value]


@pytest.mark.parametrize("depth", [31, 32, 33, 34])
def test_check_message_refuses_exactly_what_protobuf_could_not_decode(depth: int) -> None:
    request = EvaluateRequest()
    json_format.ParseDict({"records": [{"id": "r", "output": {"json": _nested_struct(depth)}}]}, request)
    try:
        EvaluateRequest.FromString(request.SerializeToString())
        decodes = True
    except Exception:
        decodes = False
    if decodes:
        check_message(request)
    else:
        with pytest.raises(BadInputError, match=f"limit of {MAX_MESSAGE_DEPTH} protobuf message levels"):
            check_message(request)


def _request(record: dict[str, object]) -> EvaluateRequest:
    return json_format.ParseDict({"records": [{"id": "r", **record}]}, EvaluateRequest())


def test_check_message_names_json_paths_through_structs_and_lists() -> None:
    request = _request({"output": {"json": {"a": [1, {"b": "x\x00"}]}}})
    with pytest.raises(BadInputError, match=r"^records\[0\]\.output\.json\.a\[1\]\.b: contains a NUL"):
        check_message(request)
    with pytest.raises(BadInputError, match=r'^records\[0\]\.metadata\["k\\u0000"\]: a key contains a NUL'):
        check_message(_request({"metadata": {"k\x00": 1}}))


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_check_message_refuses_non_finite_numbers(number: float) -> None:
    request = _request({"metadata": {"x": 1}})
    request.records[0].metadata["x"].number_value = number
    with pytest.raises(BadInputError, match=r"^records\[0\]\.metadata\.x: .* a finite number is expected"):
        check_message(request)


def test_check_message_leaves_bytes_and_ordinary_text_alone() -> None:
    record = Record(id="r ✓")
    record.input.text = "line\nTab\t💥"
    check_message(EvaluateRequest(records=[record]))


def test_http_bodies_get_the_checks_with_the_body_field_in_the_path() -> None:
    with pytest.raises(BadInputError, match=r"^policy\.metadata\.name: contains a NUL"):
        parse_json_into(b'{"metadata": {"name": "p\\u0000"}}', ApplyPolicyRequest().policy, where="policy")


def test_a_dataset_record_id_the_store_cannot_key_is_refused_at_create(tmp_path: Path) -> None:
    (tmp_path / "qa.jsonl").write_text('{"id": "ok", "output": "a"}\n{"id": "b\\u0000d", "output": "b"}\n')
    run = json_format.ParseDict(
        {"metadata": {"name": "n"}, "spec": {"dataset": {"path": "qa.jsonl"}, "evaluators": [{"ref": "exact-match"}]}},
        EvalRun(),
    )
    records = iter(load_run_dataset(run, datasets_dir=tmp_path))
    assert next(records).id == "ok"
    with pytest.raises(BadInputError, match=r"^qa\.jsonl:2: its id contains a NUL"):
        next(records)
