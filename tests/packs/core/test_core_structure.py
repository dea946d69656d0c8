"""builtin/json-valid and builtin/json-schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalsi.errors import BadInputError
from evalsi.evaluators import Evaluator, normalize_scores
from evalsi.packs.core.structure import json_schema, json_valid
from evalsi.records import make_record
from evalsi.v1alpha1.score_pb2 import Score

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
}


def run(ev: Evaluator, record: Any, **params: Any) -> Score:
    bound = ev.bind(params)
    defaults = {p.name: p.default for p in ev.params if not p.required}
    (score,) = normalize_scores(ev, ev(record, **{**defaults, **bound.params}))
    assert score.name == "passed"
    return score


# --- json-valid ---


@pytest.mark.parametrize("text", ['{"a": 1}', "[1, 2]", "3", '"s"', "null", ' \n{"nested": {"x": [true]}}\n'])
def test_json_valid_passes(text: str) -> None:
    assert run(json_valid, make_record(output=text)).passed


def test_json_valid_json_content_is_valid() -> None:
    assert run(json_valid, make_record(output={"a": [1, 2]})).passed


def test_json_valid_reports_line_and_column() -> None:
    score = run(json_valid, make_record(output='{\n  "a": 1,\n  "b": }'))
    assert not score.passed
    assert "line 3, column 8" in score.explanation


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "empty"), ("   ", "empty"), ("{'a': 1}", "property name"), ("[NaN]", "NaN"), ("hello", "line 1")],
)
def test_json_valid_fails(text: str, reason: str) -> None:
    score = run(json_valid, make_record(output=text))
    assert not score.passed
    assert reason in score.explanation


def test_json_valid_fences() -> None:
    fenced = '```json\n{"a": 1}\n```'
    score = run(json_valid, make_record(output=fenced))
    assert not score.passed and "allow_fences" in score.explanation
    assert run(json_valid, make_record(output=fenced), allow_fences=True).passed
    assert run(json_valid, make_record(output='\n```\n[1]\n```\n'), allow_fences=True).passed
    # only a fence around the whole output is stripped
    assert not run(json_valid, make_record(output='Here:\n```json\n{"a": 1}\n```'), allow_fences=True).passed


def test_json_valid_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'allow_fences' must be bool"):
        json_valid.bind({"allow_fences": 1})
    with pytest.raises(BadInputError, match=r"unknown param.*strict"):
        json_valid.bind({"strict": True})


# --- json-schema ---


def test_json_schema_passes() -> None:
    assert run(json_schema, make_record(output='{"name": "Ada", "age": 36}'), schema=SCHEMA).passed
    assert run(json_schema, make_record(output={"name": "Ada"}), schema=SCHEMA).passed


def test_json_schema_lists_violations_with_paths() -> None:
    score = run(json_schema, make_record(output='{"age": -1}'), schema=SCHEMA)
    assert not score.passed
    assert "$.age" in score.explanation and "minimum" in score.explanation
    assert "'name' is a required property" in score.explanation


def test_json_schema_caps_the_listed_violations() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    score = run(json_schema, make_record(output="[1, 2, 3, 4, 5, 6]"), schema=schema)
    assert not score.passed
    assert score.explanation.count("is not of type") == 3 and "and more" in score.explanation


def test_json_schema_invalid_json_fails() -> None:
    score = run(json_schema, make_record(output="{oops"), schema=SCHEMA)
    assert not score.passed and "invalid JSON" in score.explanation
    fenced = '```json\n{"name": "Ada"}\n```'
    assert run(json_schema, make_record(output=fenced), schema=SCHEMA, allow_fences=True).passed


def test_json_schema_checks_formats() -> None:
    schema = {"type": "string", "format": "email"}
    assert run(json_schema, make_record(output='"ada@example.com"'), schema=schema).passed
    assert not run(json_schema, make_record(output='"not an email"'), schema=schema).passed


def test_json_schema_from_file(tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    assert run(json_schema, make_record(output='{"name": "Ada"}'), schema_file=str(path)).passed
    assert not run(json_schema, make_record(output='{"age": 3}'), schema_file=str(path)).passed
    yaml_path = tmp_path / "schema.yaml"
    yaml_path.write_text("type: object\nrequired: [id]\n")
    assert not run(json_schema, make_record(output="{}"), schema_file=str(yaml_path)).passed


def test_json_schema_needs_exactly_one_schema(tmp_path: Path) -> None:
    record = make_record(output="{}")
    with pytest.raises(BadInputError, match=r"exactly one of params 'schema' and 'schema_file'"):
        run(json_schema, record)
    with pytest.raises(BadInputError, match=r"exactly one of params 'schema' and 'schema_file'"):
        run(json_schema, record, schema=SCHEMA, schema_file="schema.json")


def test_json_schema_bad_schema_is_bad_input(tmp_path: Path) -> None:
    record = make_record(output="{}")
    with pytest.raises(BadInputError, match=r"not a valid JSON Schema"):
        run(json_schema, record, schema={"type": "strnig"})
    with pytest.raises(BadInputError, match=r"cannot read schema_file"):
        run(json_schema, record, schema_file=str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    with pytest.raises(BadInputError, match=r"does not parse"):
        run(json_schema, record, schema_file=str(broken))


def test_json_schema_params_validation() -> None:
    with pytest.raises(BadInputError, match=r"'schema' must be dict"):
        json_schema.bind({"schema": "{}"})
    with pytest.raises(BadInputError, match=r"'schema_file' must be str"):
        json_schema.bind({"schema_file": 3})
