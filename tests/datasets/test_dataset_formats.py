"""Reading each file format: JSONL, JSON, CSV, Parquet; format detection; file-level errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalsi.datasets import FORMATS, detect_format, load_dataset, read_rows, to_plain
from evalsi.errors import BadInputError
from evalsi.records import content_value


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def jsonl(path: Path, rows: list) -> Path:
    return write(path, "".join(json.dumps(row) + "\n" for row in rows))


def texts(dataset, field: str = "input") -> list:
    return [content_value(getattr(record, field)) for record in dataset.records]


# --- JSONL ------------------------------------------------------------------------------------------


def test_jsonl_reads_rows_in_order_and_skips_blank_lines(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"input": "a"}\n\n   \n{"input": "b"}\n{"input": "c"}')
    dataset = load_dataset(path)
    assert texts(dataset) == ["a", "b", "c"]
    assert dataset.format == "jsonl"
    assert dataset.source == str(path)
    assert len(dataset) == 3


def test_ndjson_extension_is_jsonl(tmp_path):
    dataset = load_dataset(jsonl(tmp_path / "d.ndjson", [{"input": "a"}]))
    assert dataset.format == "jsonl"


def test_jsonl_tolerates_a_utf8_bom_and_reads_unicode(tmp_path):
    path = write(tmp_path / "d.jsonl", '\ufeff{"input": "čšž 日本"}\n')
    assert texts(load_dataset(path)) == ["čšž 日本"]


def test_jsonl_bad_json_names_file_and_line(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"input": "a"}\n\n{"input": \n')
    with pytest.raises(
        BadInputError, match=r"d\.jsonl:3: not valid JSON .*each line must hold one JSON object"
    ):
        load_dataset(path)


def test_jsonl_line_over_the_limit_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    from evalsi.datasets import formats

    monkeypatch.setattr(formats, "MAX_JSONL_LINE_BYTES", 1000)
    path = tmp_path / "d.jsonl"
    path.write_text('{"output": "ok"}\n' + json.dumps({"output": "x" * 999}) + "\n" + '{"output": "never"}\n')
    rows = read_rows(path, "jsonl", name="d.jsonl")
    assert next(rows) == (1, {"output": "ok"})
    with pytest.raises(BadInputError, match=r"d\.jsonl:2: a line over 1,000 bytes, the limit of one record"):
        next(rows)
    # A CSV file's lines are bounded the same way, before the csv module sees them.
    table = tmp_path / "d.csv"
    table.write_text("output\nok\n" + "x" * 2000 + "\n")
    rows = read_rows(table, "csv", name="d.csv")
    assert next(rows)[1] == {"output": "ok"}
    with pytest.raises(BadInputError, match=r"d\.csv:3: a line over 1,000 bytes"):
        next(rows)
    # A line of exactly the limit (its newline included) is read.
    path.write_text(json.dumps({"output": "y" * (1000 - 15)}) + "\n")
    assert [len(row["output"]) for _, row in read_rows(path, "jsonl", name="d.jsonl")] == [985]


def test_a_json_document_over_the_limit_is_refused_naming_the_formats_read_a_record_at_a_time(tmp_path, monkeypatch):
    from evalsi.datasets import formats

    monkeypatch.setattr(formats, "MAX_JSON_DATASET_BYTES", 1000)
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"output": "x" * 100}] * 8))  # 928 bytes
    assert len(list(read_rows(path, "json", name="d.json"))) == 8
    path.write_text(json.dumps([{"output": "x" * 100}] * 10))
    with pytest.raises(BadInputError, match=r"d\.json: a JSON document over 1,000 bytes .* JSON lines \(\.jsonl\)"):
        list(read_rows(path, "json", name="d.json"))


def test_jsonl_trailing_garbage_is_an_error(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"input": "a"} x\n')
    with pytest.raises(BadInputError, match=r"d\.jsonl:1: not valid JSON \(Extra data"):
        load_dataset(path)


def test_jsonl_row_that_is_not_an_object(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"input": "a"}\n[1, 2]\n')
    with pytest.raises(BadInputError, match=r"d\.jsonl:2: expected an object \(one record\), got a list"):
        load_dataset(path)


def test_jsonl_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"input": "a"}\n{"input": "\xff"}\n')
    with pytest.raises(BadInputError, match=r"d\.jsonl:2: not valid UTF-8"):
        load_dataset(path)


def test_jsonl_nan_is_null_and_infinity_is_refused(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"input": "a", "score": NaN, "reference": NaN}\n')
    record = load_dataset(path).records[0]
    assert not record.HasField("reference")
    assert "score" not in record.metadata  # a top-level null is missing
    bad = write(tmp_path / "e.jsonl", '{"input": "a", "score": Infinity}\n')
    with pytest.raises(BadInputError, match=r"e\.jsonl:1: not valid JSON \(Infinity is not a JSON number\)"):
        load_dataset(bad)


def test_jsonl_limit_stops_before_a_later_bad_line(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"input": "a"}\n{"input": "b"}\nnot json at all\n')
    dataset = load_dataset(path, limit=2)
    assert texts(dataset) == ["a", "b"]
    with pytest.raises(BadInputError, match=r"d\.jsonl:3:"):
        load_dataset(path)


def test_read_rows_is_lazy(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"input": "a"}\nnot json\n')
    rows = read_rows(path, "jsonl")
    assert next(rows) == (1, {"input": "a"})
    with pytest.raises(BadInputError, match=r":2:"):
        next(rows)


# --- JSON -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        [{"input": "a"}, {"input": "b"}],
        {"records": [{"input": "a"}, {"input": "b"}]},
        {"data": [{"input": "a"}, {"input": "b"}], "version": 3},
    ],
)
def test_json_list_or_records_or_data(tmp_path, doc):
    dataset = load_dataset(write(tmp_path / "d.json", json.dumps(doc)))
    assert texts(dataset) == ["a", "b"]
    assert dataset.format == "json"


def test_json_with_bom(tmp_path):
    path = write(tmp_path / "d.json", '\ufeff[{"input": "a"}]')
    assert texts(load_dataset(path)) == ["a"]


def test_json_wrong_shape_says_what_is_accepted(tmp_path):
    path = write(tmp_path / "d.json", '{"rows": [{"input": "a"}]}')
    with pytest.raises(
        BadInputError,
        match=r'd\.json: expected a JSON list of objects, or an object with a "records" or "data" list; '
        r"got an object with keys 'rows'",
    ):
        load_dataset(path)


def test_json_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path / "d.json", '[\n{"input": "a"},\n{"input": }\n]')
    with pytest.raises(BadInputError, match=r"d\.json:3: not valid JSON"):
        load_dataset(path)


def test_json_bad_record_names_the_index(tmp_path):
    path = write(tmp_path / "d.json", '[{"input": "a"}, "oops"]')
    with pytest.raises(
        BadInputError, match=r"d\.json: record 1: expected an object \(one record\), got a string"
    ):
        load_dataset(path)


def test_json_limit(tmp_path):
    path = write(tmp_path / "d.json", json.dumps([{"input": str(i)} for i in range(10)]))
    assert texts(load_dataset(path, limit=3)) == ["0", "1", "2"]


# --- CSV --------------------------------------------------------------------------------------------


def test_csv_values_are_strings_and_empty_cells_are_missing(tmp_path):
    path = write(tmp_path / "d.csv", "id,input,reference,difficulty\n7,What?,42,\n8,Why?,,3\n")
    dataset = load_dataset(path)
    first, second = dataset.records
    assert first.id == "7" and first.input.text == "What?" and first.reference.text == "42"
    assert "difficulty" not in first.metadata
    assert not second.HasField("reference")
    assert second.metadata["difficulty"].string_value == "3"
    assert dataset.format == "csv"


def test_csv_with_bom_quotes_and_multiline_cells(tmp_path):
    path = write(tmp_path / "d.csv", '\ufeffinput,reference\n"line one\nline two","a, b"\nq,"say ""hi"""\n')
    dataset = load_dataset(path)
    assert texts(dataset) == ["line one\nline two", "q"]
    assert texts(dataset, "reference") == ["a, b", 'say "hi"']


def test_csv_object_fields_accept_json_cells(tmp_path):
    path = write(
        tmp_path / "d.csv",
        "input,metadata,usage,trial\n"
        'q,"{""slice"": ""x""}","{""input_tokens"": 5, ""cost_usd"": ""0.5""}",2\n',
    )
    record = load_dataset(path).records[0]
    assert record.metadata["slice"].string_value == "x"
    assert record.usage.input_tokens == 5 and record.usage.cost_usd == 0.5
    assert record.provenance.trial == 2


def test_csv_error_names_the_row_line(tmp_path):
    path = write(tmp_path / "d.csv", 'input,metadata\na,\n"multi\nline",not json\n')
    with pytest.raises(BadInputError, match=r"d\.csv:3: field 'metadata' must be an object"):
        load_dataset(path)


def test_csv_too_many_cells(tmp_path):
    path = write(tmp_path / "d.csv", "input,reference\na,b\nc,d,e\n")
    with pytest.raises(BadInputError, match=r"d\.csv:3: the row has 3 cells but the header has 2 columns"):
        load_dataset(path)


def test_csv_duplicate_header(tmp_path):
    path = write(tmp_path / "d.csv", "input,input\na,b\n")
    with pytest.raises(BadInputError, match=r"d\.csv:1: the header names column 'input' twice"):
        load_dataset(path)


def test_csv_value_under_an_unnamed_column(tmp_path):
    path = write(tmp_path / "d.csv", "input,\na,\nb,c\n")
    with pytest.raises(BadInputError, match=r"d\.csv:3: a value \('c'\) in a column with no name"):
        load_dataset(path)


def test_csv_header_only_has_no_records(tmp_path):
    with pytest.raises(BadInputError, match=r"d\.csv: no records"):
        load_dataset(write(tmp_path / "d.csv", "input,reference\n"))


# --- Parquet ----------------------------------------------------------------------------------------


def parquet(path: Path, table: pa.Table, **kwargs) -> Path:
    pq.write_table(table, path, **kwargs)
    return path


def test_parquet_rows_become_python_values(tmp_path):
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "input": ["a", "b"],
            "reference": pa.array([["x", "y"], None], pa.list_(pa.string())),
            "score": pa.array([0.5, None], pa.float64()),
            "info": pa.array([{"k": 1}, {"k": 2}], pa.struct([("k", pa.int32())])),
        }
    )
    dataset = load_dataset(parquet(tmp_path / "d.parquet", table))
    first, second = dataset.records
    assert (first.id, second.id) == ("1", "2")
    assert content_value(first.reference) == ["x", "y"]
    assert not second.HasField("reference")
    assert first.metadata["score"].number_value == 0.5
    assert "score" not in second.metadata
    assert first.metadata["info"].struct_value.fields["k"].number_value == 1
    assert dataset.format == "parquet"


def test_parquet_limit_reads_only_the_first_batch(tmp_path, monkeypatch):
    table = pa.table({"input": [f"q{i}" for i in range(5000)]})
    path = parquet(tmp_path / "d.pq", table, row_group_size=1000)
    sizes: list[int] = []
    original = pq.ParquetFile.iter_batches

    def iter_batches(self, batch_size=65536, **kwargs):
        for batch in original(self, batch_size=batch_size, **kwargs):
            sizes.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", iter_batches)
    dataset = load_dataset(path, limit=3)
    assert texts(dataset) == ["q0", "q1", "q2"]
    assert sizes == [3]


def test_parquet_that_is_not_parquet(tmp_path):
    path = write(tmp_path / "d.parquet", "not parquet")
    with pytest.raises(BadInputError, match=r"d\.parquet: not a readable Parquet file"):
        load_dataset(path)


def test_parquet_bad_field_names_the_record(tmp_path):
    table = pa.table({"input": ["a", "b"], "id": pa.array([True, False])})
    with pytest.raises(BadInputError, match=r"d\.parquet: record 0: field 'id' must be a string or a number"):
        load_dataset(parquet(tmp_path / "d.parquet", table))


def test_to_plain_converts_non_json_values():
    import datetime as dt
    import decimal

    assert to_plain({"d": dt.date(2024, 1, 2), "t": dt.timedelta(seconds=1.5)}) == {
        "d": "2024-01-02",
        "t": 1.5,
    }
    assert to_plain([decimal.Decimal("1.25"), b"abc", b"\xff", float("nan"), (1, 2)]) == [
        1.25,
        "abc",
        "/w==",
        None,
        [1, 2],
    ]
    with pytest.raises(ValueError, match="inf"):
        to_plain(float("inf"))
    with pytest.raises(TypeError, match="cannot store a object"):
        to_plain(object())


# --- detection and file errors ----------------------------------------------------------------------


def test_format_argument_overrides_the_extension(tmp_path):
    path = jsonl(tmp_path / "d.txt", [{"input": "a"}])
    dataset = load_dataset(path, format="jsonl")
    assert dataset.format == "jsonl"
    assert texts(dataset) == ["a"]
    assert detect_format("x.data", "NDJSON") == "jsonl"


def test_unknown_extension_lists_the_accepted_formats(tmp_path):
    path = write(tmp_path / "d.txt", "{}")
    with pytest.raises(BadInputError) as info:
        load_dataset(path)
    message = str(info.value)
    assert message.startswith(f"{path}: cannot tell the format from extension '.txt'; accepted: ")
    for fmt in FORMATS:
        assert fmt in message
    assert ".jsonl" in message and ".parquet" in message


def test_unknown_format_argument(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"input": "a"}])
    with pytest.raises(BadInputError, match=r"unknown format 'yaml'; accepted: jsonl, json, csv, parquet"):
        load_dataset(path, format="yaml")


def test_missing_file_names_the_path(tmp_path):
    path = tmp_path / "nope.jsonl"
    with pytest.raises(BadInputError, match=rf"^{path}: no such file$"):
        load_dataset(path)


def test_missing_file_is_reported_before_the_extension(tmp_path):
    with pytest.raises(BadInputError, match=r"nope\.txt: no such file"):
        load_dataset(tmp_path / "nope.txt")


def test_a_directory_is_not_a_dataset(tmp_path):
    folder = tmp_path / "d.jsonl"
    folder.mkdir()
    with pytest.raises(BadInputError, match=r"d\.jsonl: is a directory"):
        load_dataset(folder)


@pytest.mark.parametrize(
    ("name", "text"),
    [("d.jsonl", ""), ("d.jsonl", "\n\n  \n"), ("d.json", ""), ("d.json", "[]"), ("d.csv", "")],
)
def test_empty_files_have_no_records(tmp_path, name, text):
    path = write(tmp_path / name, text)
    with pytest.raises(BadInputError, match=rf"^{path}: no records$"):
        load_dataset(path)


def test_empty_parquet_has_no_records(tmp_path):
    path = parquet(tmp_path / "d.parquet", pa.table({"input": pa.array([], pa.string())}))
    with pytest.raises(BadInputError, match=r"d\.parquet: no records"):
        load_dataset(path)


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
def test_limit_must_be_a_positive_integer(tmp_path, limit):
    path = jsonl(tmp_path / "d.jsonl", [{"input": "a"}])
    with pytest.raises(BadInputError, match="limit must be a positive integer"):
        load_dataset(path, limit=limit)


def test_split_applies_to_hub_sources_only(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"input": "a"}])
    with pytest.raises(BadInputError, match="split='test' applies to hf:// sources only"):
        load_dataset(path, split="test")


def test_loading_writes_nothing(tmp_path):
    jsonl(tmp_path / "d.jsonl", [{"input": "a"}])
    write(tmp_path / "d.csv", "input\nb\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    load_dataset(tmp_path / "d.jsonl")
    load_dataset(tmp_path / "d.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    ("name", "data", "line"),
    [
        ("d.csv", b"input\na\nb\n\xff\n", 4),
        ("d.json", b'[\n{"input": "a"},\n{"input": "\xff"}\n]', 3),
    ],
)
def test_invalid_utf8_names_the_line(tmp_path, name, data, line):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(BadInputError, match=rf"^{path}:{line}: not valid UTF-8; files must be UTF-8 text$"):
        load_dataset(path)


def test_csv_crlf_line_endings(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b'input,reference\r\na,"x\r\ny"\r\nb,c\r\n')
    dataset = load_dataset(path)
    assert texts(dataset) == ["a", "b"]
    assert texts(dataset, "reference") == ["x\r\ny", "c"]
