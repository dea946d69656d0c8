"""Rows to Records: conventions, ids and trials, versions, usage and trajectory, in-memory rows, hf://."""

from __future__ import annotations

import builtins
import hashlib
import json
import sys
import types
from pathlib import Path

import pytest

from evalsi.datasets import Dataset, dataset_version, load_dataset, records_from_rows
from evalsi.errors import BadInputError
from evalsi.records import canonical_json, content_value, from_value
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_TOOL, Record


def jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def metadata(record) -> dict:
    return {key: from_value(value) for key, value in record.metadata.items()}


def one(row: dict, **kwargs) -> Record:
    return records_from_rows([row], **kwargs).records[0]


# --- conventions ------------------------------------------------------------------------------------


def test_content_conventions():
    record = one(
        {
            "input": "plain",
            "output": {
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
            },
            "reference": {"text": "t"},
        }
    )
    assert record.input.text == "plain"
    assert record.output.WhichOneof("kind") == "messages"
    assert [m.role for m in record.output.messages.messages] == ["user", "assistant"]
    assert record.reference.text == "t"
    assert one({"input": {"json": {"a": 1}}}).input.json.struct_value.fields["a"].number_value == 1
    # Anything else is JSON: lists, numbers, objects with other or several keys.
    assert content_value(one({"reference": ["a", "b"]}).reference) == ["a", "b"]
    assert content_value(one({"reference": 4}).reference) == 4
    assert content_value(one({"input": {"text": "a", "lang": "sl"}}).input) == {"text": "a", "lang": "sl"}


def test_context_string_or_list():
    assert [c.text for c in one({"context": "doc"}).context] == ["doc"]
    record = one({"context": ["d1", {"json": [1]}, {"k": "v"}]})
    assert [c.WhichOneof("kind") for c in record.context] == ["text", "json", "json"]


def test_bad_messages_content_says_what_is_accepted():
    with pytest.raises(
        BadInputError,
        match=r"<memory>: record 0: field 'input': each message needs a 'role'; "
        "accepted: a string, an object "
        "with exactly one of text/messages/json/row, or any JSON value",
    ):
        one({"input": {"messages": [{"content": "no role"}]}})


def test_other_keys_land_in_metadata():
    record = one({"input": "q", "category": "math", "tags": ["a"], "metadata": {"source": "web"}})
    assert metadata(record) == {"category": "math", "tags": ["a"], "source": "web"}


def test_a_top_level_key_equal_to_a_metadata_key_is_fine_a_different_one_is_an_error(tmp_path):
    assert metadata(one({"category": "x", "metadata": {"category": "x"}})) == {"category": "x"}
    path = jsonl(tmp_path / "d.jsonl", [{"input": "a"}, {"category": "x", "metadata": {"category": "y"}}])
    with pytest.raises(
        BadInputError, match=r"d\.jsonl:2: field 'category' differs from metadata\['category'\]"
    ):
        load_dataset(path)


@pytest.mark.parametrize(
    ("row", "pattern"),
    [
        ({"metadata": [1]}, r"field 'metadata' must be an object, got a list"),
        ({"metadata": "x"}, r"field 'metadata' must be an object \(or a string holding a JSON object\)"),
        ({"id": {"a": 1}}, r"field 'id' must be a string or a number, got an object"),
        ({"id": True}, r"field 'id' must be a string or a number, got a boolean"),
        ({"trial": -1}, r"field 'trial' must be a non-negative integer, got -1"),
        ({"trial": "first"}, r"field 'trial' must be a non-negative integer, got 'first'"),
        ({"trial": 1.5}, r"field 'trial' must be a non-negative integer"),
        ({"usage": 3}, r"field 'usage' must be an object, got a number"),
        ({"trajectory": [1]}, r"field 'trajectory' must be an object, got a list"),
    ],
)
def test_bad_field_types_name_file_line_and_field(tmp_path, row, pattern):
    path = jsonl(tmp_path / "d.jsonl", [{"input": "fine"}, row])
    with pytest.raises(BadInputError, match=rf"^{path}:2: {pattern}"):
        load_dataset(path)


# --- usage ------------------------------------------------------------------------------------------


def test_usage_fields():
    usage = one(
        {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5.0,
                "total_tokens": "15",
                "cached_input_tokens": 2,
                "reasoning_tokens": 1,
                "cost_usd": 0.0125,
                "latency_s": 1.25,
                "ttft_s": 0.2,
            }
        }
    ).usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (10, 5, 15)
    assert (usage.cached_input_tokens, usage.reasoning_tokens) == (2, 1)
    assert usage.cost_usd == 0.0125
    assert usage.latency.ToNanoseconds() == 1_250_000_000
    assert usage.time_to_first_token.ToMilliseconds() == 200
    assert one({"usage": {"latency_ms": 1500, "ttft_ms": 30}}).usage.latency.ToMilliseconds() == 1500
    assert not one({"usage": {"input_tokens": None}}).usage.input_tokens


@pytest.mark.parametrize(
    ("usage", "pattern"),
    [
        (
            {"prompt_tokens": 3},
            r"field 'usage': unknown key 'prompt_tokens'; accepted: input_tokens, output_tokens",
        ),
        ({"latency_s": 1, "latency_ms": 1000}, r"field 'usage': give latency_s or latency_ms, not both"),
        ({"input_tokens": -1}, r"field 'usage\.input_tokens' must be a non-negative number, got -1"),
        ({"input_tokens": 1.5}, r"field 'usage\.input_tokens' must be a non-negative integer, got 1\.5"),
        ({"cost_usd": "free"}, r"field 'usage\.cost_usd' must be a non-negative number, got 'free'"),
        ({"latency_s": True}, r"field 'usage\.latency_s' must be a non-negative number, got True"),
    ],
)
def test_bad_usage(tmp_path, usage, pattern):
    path = jsonl(tmp_path / "d.jsonl", [{"input": "a", "usage": usage}])
    with pytest.raises(BadInputError, match=rf"^{path}:1: {pattern}"):
        load_dataset(path)


# --- trajectory -------------------------------------------------------------------------------------


def test_trajectory_uses_the_protobuf_json_form():
    trajectory = {
        "session_id": "s1",
        "steps": [
            {"id": "1", "type": "STEP_TYPE_TOOL", "name": "search", "duration": "0.5s"},
            {"id": "2", "parentId": "1", "toolCall": {"name": "search", "arguments": {"q": "x"}}},
        ],
    }
    record = one({"input": "q", "trajectory": trajectory})
    steps = record.trajectory.steps
    assert record.trajectory.session_id == "s1"
    assert steps[0].type == STEP_TYPE_TOOL and steps[0].duration.ToMilliseconds() == 500
    assert (
        steps[1].parent_id == "1"
        and steps[1].tool_call.arguments.struct_value.fields["q"].string_value == "x"
    )


def test_bad_trajectory_names_file_line_and_field(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"input": "a", "trajectory": {"steps": [{"nmae": "x"}]}}])
    with pytest.raises(BadInputError) as info:
        load_dataset(path)
    message = str(info.value)
    assert message.startswith(f"{path}:1: field 'trajectory': ")
    assert "nmae" in message
    assert "accepted: the protobuf JSON form of evalsi.v1alpha1.Trajectory" in message


# --- ids and trials ---------------------------------------------------------------------------------


def test_ids_become_strings():
    ids = [r.id for r in records_from_rows([{"id": 7}, {"id": "a"}, {"id": 3.0}, {"id": 2.5}]).records]
    assert ids == ["7", "a", "3", "2.5"]


def test_rows_without_id_get_a_stable_content_id(tmp_path):
    rows = [{"input": "q", "reference": "a"}, {"input": "other"}]
    path = jsonl(tmp_path / "d.jsonl", rows)
    first = [r.id for r in load_dataset(path).records]
    expected = "r-" + hashlib.sha256(canonical_json(rows[0]).encode()).hexdigest()[:16]
    assert first[0] == expected
    assert [r.id for r in load_dataset(path).records] == first
    # The same content from another format or from memory gets the same id; key order does not matter.
    (tmp_path / "d.json").write_text(json.dumps([{"reference": "a", "input": "q"}, {"input": "other"}]))
    assert [r.id for r in load_dataset(tmp_path / "d.json").records] == first
    assert [r.id for r in records_from_rows(rows).records] == first


def test_repeated_content_without_id_gets_numbered_ids():
    dataset = records_from_rows([{"input": "q"}, {"input": "x"}, {"input": "q"}, {"input": "q"}])
    base = dataset.records[0].id
    assert [r.id for r in dataset.records] == [base, dataset.records[1].id, f"{base}-1", f"{base}-2"]
    assert [r.provenance.trial for r in dataset.records] == [0, 0, 0, 0]
    assert len({r.id for r in dataset.records}) == 4


def test_rows_sharing_an_explicit_id_are_trials():
    dataset = records_from_rows(
        [{"id": "a", "output": "1"}, {"id": "b", "output": "x"}, {"id": "a", "output": "2"}, {"id": "a"}]
    )
    assert [(r.id, r.provenance.trial) for r in dataset.records] == [("a", 0), ("b", 0), ("a", 1), ("a", 2)]


def test_the_trial_field_sets_the_trial():
    dataset = records_from_rows([{"id": "a", "trial": 3}, {"id": "a", "trial": 1}, {"id": "b", "trial": "2"}])
    assert [(r.id, r.provenance.trial) for r in dataset.records] == [("a", 3), ("a", 1), ("b", 2)]
    assert "trial" not in dataset.records[0].metadata


def test_the_same_id_and_trial_twice_is_an_error(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"id": "a", "trial": 1}, {"id": "a"}, {"id": "a"}])
    with pytest.raises(BadInputError, match=rf"^{path}:3: id 'a' with trial 1 appears twice"):
        load_dataset(path)


def test_provenance_names_sample_and_dataset(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"id": "a", "input": "q"}, {"input": "r"}])
    for record in load_dataset(path).records:
        assert record.provenance.sample_id == record.id
        assert record.provenance.dataset == str(path)


# --- version ----------------------------------------------------------------------------------------


def test_version_is_stable_and_tracks_content(tmp_path):
    rows = [{"id": "1", "input": "q", "reference": "a", "k": 1}, {"id": "2", "input": "r"}]
    path = jsonl(tmp_path / "d.jsonl", rows)
    version = load_dataset(path).version
    assert len(version) == 64 and int(version, 16) >= 0
    assert load_dataset(path).version == version
    assert dataset_version(load_dataset(path).records) == version
    # The same records from elsewhere (another path, another format, memory) have the same version.
    copy = jsonl(tmp_path / "copy.jsonl", rows)
    assert load_dataset(copy).version == version
    (tmp_path / "d.json").write_text(json.dumps({"records": rows}))
    assert load_dataset(tmp_path / "d.json").version == version
    assert records_from_rows(rows).version == version
    # Any change to a record, or to the order, changes it.
    changed = [dict(rows[0], k=2), rows[1]]
    assert load_dataset(jsonl(tmp_path / "e.jsonl", changed)).version != version
    assert load_dataset(jsonl(tmp_path / "f.jsonl", rows[::-1])).version != version
    assert load_dataset(path, limit=1).version != version
    assert load_dataset(path, mapping=["output=input"]).version != version


def test_version_ignores_the_metadata_key_order():
    assert (
        records_from_rows([{"input": "q", "a": 1, "b": 2}]).records[0].metadata
        == records_from_rows([{"b": 2, "input": "q", "a": 1}]).records[0].metadata
    )
    assert (
        records_from_rows([{"id": "x", "a": 1, "b": 2}]).version
        == records_from_rows([{"b": 2, "id": "x", "a": 1}]).version
    )


# --- in-memory rows ---------------------------------------------------------------------------------


def test_records_from_rows_dicts():
    dataset = records_from_rows([{"input": "a"}, {"input": "b"}], source="mine")
    assert isinstance(dataset, Dataset)
    assert (dataset.source, dataset.format, len(dataset)) == ("mine", "memory", 2)
    assert [r.provenance.dataset for r in dataset] == ["mine", "mine"]
    assert records_from_rows([]).records == []


def test_records_from_rows_records_are_copied_and_completed():
    given = [Record(id="a"), Record(id="a"), Record()]
    given[2].input.text = "q"
    given[0].provenance.dataset = "origin.jsonl"
    dataset = records_from_rows(given)
    assert [r.provenance.trial for r in dataset.records] == [0, 1, 0]
    assert dataset.records[2].id.startswith("r-")
    assert [r.provenance.sample_id for r in dataset.records] == [r.id for r in dataset.records]
    assert [r.provenance.dataset for r in dataset.records] == ["origin.jsonl", "<memory>", "<memory>"]
    assert not given[1].provenance.dataset and not given[2].id  # the caller's Records are untouched
    assert dataset_version(dataset.records) == dataset.version


def test_records_and_rows_of_the_same_content_share_a_version():
    rows = [{"id": "a", "input": "q", "k": "v"}]
    from_rows = records_from_rows(rows)
    assert records_from_rows(from_rows.records).version == from_rows.version


def test_records_from_rows_dataframe():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "id": [1, 2],
            "input": ["a", "b"],
            "score": [0.5, float("nan")],
            "when": pd.to_datetime(["2024-01-02"] * 2),
        }
    )
    dataset = records_from_rows(frame)
    first, second = dataset.records
    assert (first.id, first.input.text) == ("1", "a")
    assert metadata(first) == {"score": 0.5, "when": "2024-01-02T00:00:00"}
    assert "score" not in second.metadata  # NaN is missing


def test_records_from_rows_errors():
    with pytest.raises(
        BadInputError, match=r"<memory>: expected an iterable of rows \(objects or Records\), got an object"
    ):
        records_from_rows({"input": "a"})
    with pytest.raises(
        BadInputError, match=r"<memory>: record 1: expected an object \(one record\), got a string"
    ):
        records_from_rows([{"input": "a"}, "b"])
    with pytest.raises(BadInputError, match=r"<memory>: record 0: cannot store a object as JSON"):
        records_from_rows([{"input": object()}])


# --- hf:// ------------------------------------------------------------------------------------------


def test_hf_without_the_datasets_package(monkeypatch):
    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets" or name.startswith("datasets."):
            raise ImportError("No module named 'datasets'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "datasets", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(BadInputError) as info:
        load_dataset("hf://owner/name")
    assert str(info.value) == (
        "hf://owner/name: loading from the Hugging Face Hub needs the `datasets` package: "
        "pip install 'evalsi[hf]'"
    )


@pytest.mark.parametrize("source", ["hf://name", "hf://a/b/c/d", "hf://a//b"])
def test_hf_source_shape(source):
    with pytest.raises(BadInputError, match="expected hf://owner/name or hf://owner/name/config"):
        load_dataset(source)


def fake_datasets(monkeypatch, rows, calls):
    module = types.ModuleType("datasets")

    def load(path, name=None, *, split, streaming):
        calls.append((path, name, split, streaming))
        if split == "missing":
            raise ValueError('Unknown split "missing"')
        return iter(rows)

    module.load_dataset = load
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_hf_rows_through_the_datasets_package(monkeypatch):
    calls: list = []
    fake_datasets(
        monkeypatch, [{"question": "q1", "answer": "a1"}, {"question": "q2", "answer": "a2"}], calls
    )
    dataset = load_dataset("hf://org/qa/main", mapping=["input=question", "reference=answer"], split="test")
    assert calls == [("org/qa", "main", "test", False)]
    assert (dataset.format, dataset.source) == ("hf", "hf://org/qa/main")
    assert [r.input.text for r in dataset] == ["q1", "q2"]
    assert dataset.records[0].provenance.dataset == "hf://org/qa/main"
    load_dataset("hf://org/qa", limit=1)
    assert calls[-1] == ("org/qa", None, "train", True)


def test_hf_errors(monkeypatch):
    fake_datasets(monkeypatch, [{"input": "a"}, 3], [])
    with pytest.raises(BadInputError, match=r"^hf://org/qa: record 1: expected an object"):
        load_dataset("hf://org/qa")
    with pytest.raises(BadInputError, match=r"^hf://org/qa: cannot load split 'missing': Unknown split"):
        load_dataset("hf://org/qa", split="missing")
    with pytest.raises(BadInputError, match="format 'csv' does not apply to hf:// sources"):
        load_dataset("hf://org/qa", format="csv")


def test_loaded_records_equal_make_record():
    from evalsi.records import make_record

    row = {
        "id": "x",
        "input": {"messages": [{"role": "user", "content": "hi"}]},
        "output": [1, {"a": None, "b": [True, 2.5, "s", {}, []]}],
        "reference": {"json": "s"},
        "context": ["c", {"k": {}}],
        "metadata": {"n": 1, "nested": {"l": [None, {"x": "y"}], "e": {}}},
    }
    loaded = one(row)
    expected = make_record(**row)
    loaded.ClearField("provenance")
    assert loaded == expected


def test_dataset_version_leaves_the_records_alone():
    dataset = records_from_rows([{"id": "a"}, {"id": "b"}], source="src")
    before = [r.SerializeToString(deterministic=True) for r in dataset.records]
    assert dataset_version(dataset.records) == dataset.version
    assert [r.SerializeToString(deterministic=True) for r in dataset.records] == before
