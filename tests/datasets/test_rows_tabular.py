"""Tabular records (``Content.row``): the ``{"row": {...}}`` convention, encoded by the fast row encoder to
protobuf's own bytes, read back by ``content_text``/``content_value``, and built from CSV columns by the
``output.row.*`` mappings."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.datasets import load_dataset, parse_mapping
from evalsi.datasets.mapping import FieldMapping
from evalsi.datasets.rows import RecordBuilder, RowError
from evalsi.datasets.wire import content_bytes
from evalsi.errors import BadInputError
from evalsi.ingest import map_span
from evalsi.records import content_text, content_value, to_content
from evalsi.traces import assemble_record
from evalsi.v1alpha1.record_pb2 import Record

_keys = st.text(max_size=6)
_scalar = (st.none() | st.booleans() | st.integers(-(2**60), 2**60)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
_row = st.fixed_dictionaries({}, optional={
    "features": st.dictionaries(_keys, _scalar | st.lists(_scalar, max_size=3), max_size=6),
    "prediction": _scalar,
    "probabilities": st.dictionaries(_keys, st.floats(0, 1), max_size=4),
}).filter(bool)


@settings(max_examples=200, deadline=None)
@given(_row)
def test_a_row_content_encodes_as_protobuf_does(row: dict[str, Any]) -> None:
    value = {"row": row}
    content = to_content(value)
    assert content.WhichOneof("kind") == "row"
    assert content_bytes(value) == content.SerializeToString(deterministic=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(_row, min_size=1, max_size=5))
def test_records_with_rows_are_their_own_deterministic_serialization(rows: list[dict[str, Any]]) -> None:
    builder = RecordBuilder("rows.jsonl", FieldMapping())
    for index, row in enumerate(rows):
        data = builder.add_row({"id": str(index), "output": {"row": row}, "reference": "yes"})
        record = Record.FromString(data)
        assert record.SerializeToString(deterministic=True) == data
        assert record.output == to_content({"row": row})


def test_a_row_reads_back_as_its_prediction_and_its_plain_parts() -> None:
    content = to_content({"row": {"features": {"age": 31, "city": "Lj", "x": None}, "prediction": "yes",
                                  "probabilities": {"yes": 0.75, "no": 0.25}}})
    assert content_text(content) == "yes"
    assert content_value(content) == {"features": {"age": 31, "city": "Lj", "x": None}, "prediction": "yes",
                                      "probabilities": {"yes": 0.75, "no": 0.25}}
    assert content_text(to_content({"row": {"prediction": 2}})) == "2"
    assert content_text(to_content({"row": {"features": {"a": 1}}})) == ""
    assert content_value(to_content({"row": {"prediction": [1, 2]}})) == {"prediction": [1, 2]}


def test_another_object_under_row_stays_json_and_bad_parts_are_refused() -> None:
    assert to_content({"row": {"x": 1}}).WhichOneof("kind") == "json"
    assert to_content({"row": {}}).WhichOneof("kind") == "json"
    with pytest.raises(ValueError, match=r"row.probabilities\['yes'\] must be a number"):
        to_content({"row": {"probabilities": {"yes": "high"}}})
    with pytest.raises(ValueError, match=r"row.features must be an object"):
        to_content({"row": {"features": [1, 2]}})
    builder = RecordBuilder("rows.jsonl", FieldMapping())
    with pytest.raises(RowError, match=r"field 'output'.*must be a number"):
        builder.add_row({"output": {"row": {"probabilities": {"a": None}}}})


def test_csv_columns_become_a_row_by_the_output_row_mappings(tmp_path: Path) -> None:
    path = tmp_path / "preds.csv"
    path.write_text("id,age,income,city,label,pred,p_yes,p_no\n"
                    "a,31,52000,Ljubljana,yes,yes,0.8,0.2\n"
                    "b,45,,Maribor,no,yes,0.6,0.4\n")
    mapping = ["reference=label", "output.row.prediction=pred", "output.row.probabilities.yes=p_yes",
               "output.row.probabilities.no=p_no", "output.row.features=*"]
    records = load_dataset(path, mapping=mapping).records
    assert [r.id for r in records] == ["a", "b"]
    first = content_value(records[0].output)
    assert first == {"features": {"age": "31", "income": "52000", "city": "Ljubljana"}, "prediction": "yes",
                     "probabilities": {"yes": 0.8, "no": 0.2}}
    assert content_text(records[0].reference) == "yes"
    assert not records[0].metadata  # every leftover column went to the features
    second = content_value(records[1].output)
    assert "income" not in second["features"]  # an empty cell is a missing feature
    assert math.isclose(second["probabilities"]["no"], 0.4)
    named = load_dataset(path, mapping=["output.row.prediction=pred", "output.row.features.age=age",
                                        "reference=label"]).records
    assert content_value(named[0].output) == {"features": {"age": "31"}, "prediction": "yes"}
    assert set(named[0].metadata) == {"income", "city", "p_yes", "p_no"}  # unmapped columns stay metadata


def test_row_mappings_are_checked_when_parsed() -> None:
    with pytest.raises(BadInputError, match="not both"):
        parse_mapping(["output=pred", "output.row.prediction=pred"])
    with pytest.raises(BadInputError, match=r"unknown target 'output.row.features'"):
        parse_mapping(["output.row.features=age"])  # a whole features object comes from '*' only
    with pytest.raises(BadInputError, match=r"unknown target 'output.row.label'"):
        parse_mapping(["output.row.label=x"])
    with pytest.raises(BadInputError, match=r"unknown target 'output.row.probabilities'"):
        parse_mapping(["output.row.probabilities=x"])


def _span(attributes: dict[str, Any]) -> Span:
    """A root span (OTLP) with these string, int or double attributes."""
    values = [KeyValue(key=key, value=AnyValue(string_value=value) if isinstance(value, str)
                       else AnyValue(int_value=value) if isinstance(value, int) else AnyValue(double_value=value))
              for key, value in attributes.items()]
    return Span(trace_id=bytes.fromhex("0af7651916cd43dd8448eb211c80319c"), span_id=(1).to_bytes(8, "big"),
                name="predict", start_time_unix_nano=1_000, end_time_unix_nano=2_000, attributes=values)


def test_a_traced_prediction_becomes_the_records_output_row() -> None:
    """``evalsi.row.*`` attributes on a trace's root span: the online-policy side of tabular records."""
    root = map_span(_span({"evalsi.row.features.age": 31, "evalsi.row.features.city": "Lj",
                               "evalsi.row.prediction": "yes", "evalsi.row.probabilities.yes": 0.8,
                               "evalsi.row.probabilities.no": "0.2", "input.value": "x"}), {})
    record = assemble_record([root])
    assert content_value(record.output) == {"features": {"age": 31, "city": "Lj"}, "prediction": "yes",
                                            "probabilities": {"yes": 0.8, "no": 0.2}}
    assert content_text(record.output) == "yes"
    bad = map_span(_span({"evalsi.row.prediction": "yes", "evalsi.row.probabilities.yes": "high",
                              "openinference.span.kind": "AGENT", "output.value": "plain"}), {})
    kept = assemble_record([bad])
    assert kept.output.text == "plain"  # the trace keeps its output; the refusal is in the metadata
    assert "must be a number" in kept.metadata["row_error"].string_value
    plain = assemble_record([map_span(_span({"openinference.span.kind": "AGENT", "output.value": "out"}), {})])
    assert plain.output.text == "out" and "row_error" not in plain.metadata


def test_parquet_columns_become_a_row_by_the_same_mappings(tmp_path: Path) -> None:
    path = tmp_path / "preds.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "age": [31, 45], "city": ["Lj", None], "label": [1, 0],
                             "pred": [1, 1], "p1": [0.8, 0.6]}), path)
    records = load_dataset(path, mapping=["reference=label", "output.row.prediction=pred",
                                          "output.row.probabilities.1=p1", "output.row.features=*"]).records
    assert content_value(records[0].output) == {"features": {"age": 31, "city": "Lj"}, "prediction": 1,
                                                "probabilities": {"1": 0.8}}
    assert content_value(records[1].output)["features"] == {"age": 45}  # a null cell is a missing feature
    assert content_text(records[1].reference) == "0" and content_text(records[1].output) == "1"
