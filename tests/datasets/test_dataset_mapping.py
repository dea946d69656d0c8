"""Field mapping: parsing --map values, nested and list sources, consumption, missing sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsi.datasets import FieldMapping, load_dataset, parse_mapping, records_from_rows, resolve_path
from evalsi.errors import BadInputError
from evalsi.records import content_value, from_value


def jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def metadata(record) -> dict:
    return {key: from_value(value) for key, value in record.metadata.items()}


# --- parsing ----------------------------------------------------------------------------------------


def test_parse_list_and_dict_forms_agree():
    from_list = parse_mapping(["input=question", "reference = answer.text", "metadata.slice=meta.cat"])
    from_dict = parse_mapping({"input": "question", "reference": "answer.text", "metadata.slice": "meta.cat"})
    assert [(i.target, i.source) for i in from_list.items] == [(i.target, i.source) for i in from_dict.items]
    assert [str(i) for i in from_list.items] == [
        "input=question",
        "reference=answer.text",
        "metadata.slice=meta.cat",
    ]
    assert from_list.items[1].path == ("answer", "text")
    assert from_list.items[2].kind == "metadata" and from_list.items[2].key == "slice"
    assert parse_mapping(None) == FieldMapping()
    assert not parse_mapping(None)
    assert parse_mapping("input=q").items[0].source == "q"


def test_source_may_contain_equals_signs():
    assert parse_mapping(["metadata.x=a=b"]).items[0].source == "a=b"


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        (["inputquestion"], r"--map 'inputquestion': expected target=source"),
        (["input="], r"--map 'input=': expected a source field"),
        (["answer=x"], r"--map 'answer=x': unknown target 'answer'"),
        (["usage.tokens=x"], r"--map 'usage.tokens=x': unknown target 'usage.tokens'"),
        (["metadata.=x"], r"--map 'metadata.=x': unknown target 'metadata.'"),
        (["input=a..b"], r"--map 'input=a..b': 'a..b' is not a dotted path"),
        ([3], r"--map 3: expected target=source"),
        (["input=a", "input=b"], r"--map 'input=b': target 'input' is already mapped by --map 'input=a'"),
        ({"input": 3}, r"--map 'input=3': expected a source field"),
    ],
)
def test_malformed_mappings_name_the_value_and_the_targets(spec, pattern):
    with pytest.raises(BadInputError, match=pattern) as info:
        parse_mapping(spec)
    if "already mapped" not in pattern and "dotted path" not in pattern:
        assert "accepted targets: id, input, output, reference, context, metadata, usage" in str(info.value)
        assert "metadata.<key>, usage.<field>" in str(info.value)


def test_load_dataset_checks_the_mapping_before_reading(tmp_path):
    with pytest.raises(BadInputError, match="unknown target 'question'"):
        load_dataset(tmp_path / "missing.jsonl", mapping=["question=input"])


def test_resolve_path():
    row = {"a": {"b": [10, {"c": 2}]}, "x.y": 1}
    assert resolve_path(row, "a.b.0") == (True, 10)
    assert resolve_path(row, "a.b.-1.c") == (True, 2)
    assert resolve_path(row, "a.b.5") == (False, None)
    assert resolve_path(row, "a.b.z") == (False, None)
    assert resolve_path(row, "a.b.0.c") == (False, None)
    assert resolve_path(row, "x.y") == (True, 1)  # a key spelled with a dot wins


# --- applying ---------------------------------------------------------------------------------------


def test_nested_and_list_index_sources(tmp_path):
    path = jsonl(
        tmp_path / "squad.jsonl",
        [{"question": "Who?", "answers": {"text": ["Ada", "Lovelace"], "start": [3, 9]}, "title": "T"}],
    )
    dataset = load_dataset(path, mapping=["input=question", "reference=answers.text.0"])
    record = dataset.records[0]
    assert record.input.text == "Who?"
    assert record.reference.text == "Ada"
    # What the mapping took is consumed; the rest of the value stays in metadata.
    assert metadata(record) == {"answers": {"text": ["Lovelace"], "start": [3.0, 9.0]}, "title": "T"}


def test_a_wholly_mapped_value_is_consumed(tmp_path):
    rows = [{"q": "a", "gold": {"text": "b"}, "cat": "x"}]
    record = records_from_rows(
        rows, mapping={"input": "q", "reference": "gold.text", "metadata.slice": "cat"}
    )
    only = record.records[0]
    assert only.input.text == "a" and only.reference.text == "b"
    assert metadata(only) == {"slice": "x"}


def test_one_source_may_feed_two_targets():
    dataset = records_from_rows([{"q": "a"}], mapping=["input=q", "metadata.question=q"])
    record = dataset.records[0]
    assert record.input.text == "a"
    assert metadata(record) == {"question": "a"}


def test_a_default_key_of_a_mapped_target_lands_in_metadata():
    dataset = records_from_rows([{"input": "raw", "prompt": "p"}], mapping=["input=prompt"])
    record = dataset.records[0]
    assert record.input.text == "p"
    assert metadata(record) == {"input": "raw"}


def test_metadata_and_usage_targets_merge_with_the_row_objects():
    rows = [
        {
            "q": "a",
            "metadata": {"lang": "sl", "slice": "old"},
            "usage": {"input_tokens": 3},
            "stats": {"cost": "0.25", "ms": 120},
            "cat": "new",
        }
    ]
    mapping = ["input=q", "metadata.slice=cat", "usage.cost_usd=stats.cost", "usage.latency_ms=stats.ms"]
    record = records_from_rows(rows, mapping=mapping).records[0]
    assert metadata(record) == {"lang": "sl", "slice": "new"}
    assert record.usage.input_tokens == 3
    assert record.usage.cost_usd == 0.25
    assert record.usage.latency.ToMilliseconds() == 120


def test_whole_field_targets(tmp_path):
    rows = [
        {
            "qid": 5,
            "attempt": 2,
            "docs": ["d1", "d2"],
            "info": {"k": 1},
            "cost": {"input_tokens": 1},
            "q": "x",
        }
    ]
    mapping = {
        "id": "qid",
        "trial": "attempt",
        "context": "docs",
        "metadata": "info",
        "usage": "cost",
        "input": "q",
    }
    record = records_from_rows(rows, mapping=mapping).records[0]
    assert record.id == "5" and record.provenance.trial == 2
    assert [content_value(c) for c in record.context] == ["d1", "d2"]
    assert metadata(record) == {"k": 1}
    assert record.usage.input_tokens == 1


def test_a_source_missing_from_some_rows_leaves_the_field_empty(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"q": "a", "gold": "b"}, {"q": "c"}, {"q": "d", "gold": None}])
    dataset = load_dataset(path, mapping=["input=q", "reference=gold"])
    assert [r.HasField("reference") for r in dataset.records] == [True, False, False]


def test_a_source_missing_from_every_row_is_an_error(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"question": "a", "answer": "b"}, {"question": "c"}])
    with pytest.raises(BadInputError) as info:
        load_dataset(path, mapping=["input=question", "reference=answr"])
    assert str(info.value) == (
        f"{path}: --map 'reference=answr': no row has 'answr'; the first row's fields are: question, answer"
    )


def test_all_missing_counts_only_the_rows_loaded(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"q": "a"}, {"q": "b", "gold": "c"}])
    assert len(load_dataset(path, mapping=["input=q", "reference=gold"])) == 2
    with pytest.raises(BadInputError, match="no row has 'gold'"):
        load_dataset(path, mapping=["input=q", "reference=gold"], limit=1)


def test_mapped_values_are_checked_like_default_ones(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"q": "a", "n": "many"}])
    with pytest.raises(
        BadInputError, match=r"d\.jsonl:1: field 'usage\.input_tokens' must be a non-negative number"
    ):
        load_dataset(path, mapping=["input=q", "usage.input_tokens=n"])


def test_a_mapping_does_not_apply_to_records():
    from evalsi.v1alpha1.record_pb2 import Record

    with pytest.raises(BadInputError, match="record 0: a mapping applies to rows, not to Records"):
        records_from_rows([Record(id="a")], mapping=["input=q"])


@pytest.mark.parametrize(
    ("source", "taken", "left"),
    [
        ("answers.0.text", "a", [{"start": 1}, {"text": "b"}]),
        ("answers.-1.text", "b", [{"text": "a", "start": 1}]),
        ("answers.1", "b", [{"text": "a", "start": 1}]),  # {"text": "b"} is text content
    ],
)
def test_list_elements_taken_by_a_mapping(source, taken, left):
    row = {"q": "x", "answers": [{"text": "a", "start": 1}, {"text": "b"}]}
    record = records_from_rows([row], mapping={"input": "q", "reference": source}).records[0]
    assert content_value(record.reference) == taken
    assert metadata(record) == {"answers": left}


def test_two_paths_into_one_value():
    row = {"q": "x", "gold": {"text": "a", "alt": ["b", "c"], "note": "n"}}
    mapping = ["input=q", "reference=gold.text", "metadata.alt=gold.alt.1"]
    record = records_from_rows([row], mapping=mapping).records[0]
    assert record.reference.text == "a"
    assert metadata(record) == {"alt": "c", "gold": {"alt": ["b"], "note": "n"}}
