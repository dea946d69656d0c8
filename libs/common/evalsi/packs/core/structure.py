"""Structure evaluators: is the output JSON, and does it follow a JSON Schema."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.packs.core.matching import shorten
from evalsi.records import canonical_json, content_text, content_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

_FENCE = re.compile(r"\A\s*```[ \t]*(?:json)?[ \t]*\r?\n(.*?)\r?\n?[ \t]*```\s*\Z", re.DOTALL | re.IGNORECASE)
_MAX_ERRORS = 3


class _InvalidJSON(ValueError):
    def __init__(self, explanation: str) -> None:
        super().__init__(explanation)
        self.explanation = explanation


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_output(record: Record, allow_fences: bool) -> Any:
    """The output as a JSON value: JSON content as is, text parsed (raises _InvalidJSON with the reason)."""
    output = record.output
    if output.WhichOneof("kind") == "json":
        return content_value(output)
    text = content_text(output)
    if allow_fences:
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1)
    if not text.strip():
        raise _InvalidJSON("invalid JSON: the output is empty")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        hint = "" if allow_fences or not text.lstrip().startswith("```") else " (Markdown fence; set allow_fences)"
        raise _InvalidJSON(
            f"invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}{hint}"
        ) from None
    except ValueError as exc:  # NaN / Infinity
        raise _InvalidJSON(f"invalid JSON: {exc}") from None


@evaluator(
    "builtin/json-valid",
    version="1.0.0",
    pack="core",
    requires=["output"],
    outputs=[Output("passed", "boolean", description="The output is valid JSON.")],
    params={"allow_fences": "Strip a Markdown ```json fence around the whole output before parsing."},
)
def json_valid(record: Record, *, allow_fences: bool = False) -> Score | bool:
    """The output is valid JSON (JSON content always is; text must parse)."""
    try:
        parse_output(record, allow_fences)
    except _InvalidJSON as exc:
        return Score(passed=False, explanation=exc.explanation)
    return True


# --- json-schema ---------------------------------------------------------------------------------------------

_NAME = "evaluator builtin/json-schema"


@functools.lru_cache(maxsize=64)
def _validator_from_text(schema_text: str, where: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_text)
    if not isinstance(schema, Mapping | bool):
        raise BadInputError(f"{_NAME}: {where} must be a JSON object, got {type(schema).__name__}")
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise BadInputError(
            f"{_NAME}: {where} is not a valid JSON Schema: {shorten(exc.message, 160)} (at {exc.json_path})"
        ) from None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@functools.lru_cache(maxsize=64)
def _schema_file_text(path: str, mtime_ns: int) -> str:
    file = Path(path)
    try:
        raw = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"{_NAME}: cannot read schema_file {path!r}: {exc.strerror or exc}") from None
    try:
        if file.suffix.lower() in (".yaml", ".yml"):
            import yaml

            loaded = yaml.safe_load(raw)
        else:
            loaded = json.loads(raw)
    except Exception as exc:  # json and yaml errors alike
        raise BadInputError(f"{_NAME}: schema_file {path!r} does not parse: {exc}") from None
    try:
        return canonical_json(loaded)
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"{_NAME}: schema_file {path!r} is not JSON-compatible: {exc}") from None


def _validator(schema: Mapping[str, Any] | None, schema_file: str | None) -> jsonschema.protocols.Validator:
    if (schema is None) == (schema_file is None):
        raise BadInputError(f"{_NAME}: set exactly one of params 'schema' and 'schema_file'")
    if schema is not None:
        try:
            text = canonical_json(schema)
        except (TypeError, ValueError) as exc:
            raise BadInputError(f"{_NAME}: param 'schema' is not JSON-compatible: {exc}") from None
        return _validator_from_text(text, "param 'schema'")
    path = os.path.abspath(os.path.expanduser(schema_file or ""))
    try:
        mtime_ns = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise BadInputError(f"{_NAME}: cannot read schema_file {schema_file!r}: {exc.strerror or exc}") from None
    return _validator_from_text(_schema_file_text(path, mtime_ns), f"schema_file {schema_file!r}")


@evaluator(
    "builtin/json-schema",
    version="1.0.0",
    pack="core",
    requires=["output"],
    outputs=[Output("passed", "boolean", description="The output is JSON that follows the schema.")],
    params={
        "schema": "The JSON Schema, inline (Draft 2020-12 unless it names another $schema).",
        "schema_file": "Path to a JSON (or YAML) file holding the schema; set this or schema, not both.",
        "allow_fences": "Strip a Markdown ```json fence around the whole output before parsing.",
    },
)
def json_schema(
    record: Record,
    *,
    schema: dict[str, Any] | None = None,
    schema_file: str | None = None,
    allow_fences: bool = False,
) -> Score | bool:
    """The output is JSON that validates against a JSON Schema (formats are checked too)."""
    validator = _validator(schema, schema_file)
    try:
        instance = parse_output(record, allow_fences)
    except _InvalidJSON as exc:
        return Score(passed=False, explanation=exc.explanation)
    errors = []
    for error in validator.iter_errors(instance):
        errors.append(error)
        if len(errors) > _MAX_ERRORS:
            break
    if not errors:
        return True
    shown = "; ".join(f"{e.json_path}: {shorten(e.message, 160)}" for e in errors[:_MAX_ERRORS])
    more = " (and more)" if len(errors) > _MAX_ERRORS else ""
    return Score(passed=False, explanation=f"schema violations: {shown}{more}")


EVALUATORS = (json_valid, json_schema)
