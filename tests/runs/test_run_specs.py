"""EvalRun specs: YAML to the protobuf message, durations, and errors that name the file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsi.documents import apply_overrides
from evalsi.durations import parse_duration
from evalsi.errors import BadInputError
from evalsi.runs.spec import (
    load_eval_run,
    parse_eval_run,
    parse_eval_run_text,
    spec_hash,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "runs"

MINIMAL = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata:
  name: demo
spec:
  dataset: {path: data.jsonl}
  evaluators:
    - ref: builtin/exact-match
    - ref: builtin/fuzzy-match
      params: {threshold: 0.9}
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10m", "600s"),
        ("5s", "5s"),
        ("1h30m", "5400s"),
        ("250ms", "0.25s"),
        ("1.5s", "1.5s"),
        ("2d", "172800s"),
        ("600s", "600s"),
        (30, "30s"),
        (0.5, "0.5s"),
    ],
)
def test_human_durations_become_protobuf_durations(text: object, expected: str) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["ten minutes", "10", "-5s", "5x", "", "1h 30", True, -1])
def test_bad_durations_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_durations_in_duration_fields_are_converted_before_parsing() -> None:
    run = parse_eval_run_text(MINIMAL + "  budget: {tokens: 1000, usd: 0.5, wallClock: 1h30m}\n", source="r.yaml")
    assert run.spec.budget.wall_clock.seconds == 5400
    assert run.spec.budget.tokens == 1000 and run.spec.budget.usd == 0.5


def test_both_field_spellings_and_the_project_default() -> None:
    run = parse_eval_run_text(MINIMAL.replace("apiVersion", "api_version"), source="r.yaml")
    assert run.api_version == "evals.si/v1alpha1" and run.metadata.project == "default"
    assert [e.ref for e in run.spec.evaluators] == ["builtin/exact-match", "builtin/fuzzy-match"]
    assert run.spec.evaluators[1].params["threshold"] == 0.9


def test_project_comes_from_the_label_or_metadata_and_must_agree() -> None:
    labelled = MINIMAL.replace("  name: demo\n", "  name: demo\n  labels: {evals.si/project: support}\n")
    assert parse_eval_run_text(labelled, source="r.yaml").metadata.project == "support"
    explicit = MINIMAL.replace("  name: demo\n", "  name: demo\n  project: billing\n")
    assert parse_eval_run_text(explicit, source="r.yaml").metadata.project == "billing"
    both = labelled.replace("  name: demo\n", "  name: demo\n  project: billing\n")
    with pytest.raises(BadInputError, match=r"differs from the label evals\.si/project"):
        parse_eval_run_text(both, source="r.yaml")


def test_an_unknown_field_names_its_path_line_and_a_suggestion() -> None:
    text = MINIMAL.replace("      params: {threshold: 0.9}", "      parms: {threshold: 0.9}")
    with pytest.raises(BadInputError) as info:
        parse_eval_run_text(text, source="run.yaml")
    assert str(info.value) == "run.yaml:10: spec.evaluators[1].parms: unknown field; did you mean params?"


def test_unknown_fields_deep_and_shallow() -> None:
    with pytest.raises(BadInputError, match=r"run.yaml:11: spec.datset: unknown field; did you mean dataset\?"):
        parse_eval_run_text(MINIMAL + "  datset: {path: x}\n", source="run.yaml")
    budget = MINIMAL + "  budget:\n    wallclok: 10m\n"
    with pytest.raises(BadInputError, match=r"spec.budget.wallclok: unknown field; did you mean wallClock\?"):
        parse_eval_run_text(budget, source="run.yaml")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("  trials: three\n", "spec.trials: must be an integer, got a string 'three'"),
        ("  gates: metric('x').mean > 1\n", "spec.gates: must be a list, got a string"),
        ("  budget: {wallClock: soon}\n", "spec.budget.wallClock: expected a duration like"),
        ("  target: {outputs: {}, model: {model: m}}\n", "spec.target.model: conflicts with outputs"),
        ("  judges: {default: {model: 5}}\n", "spec.judges.default.model: must be a string"),
        ("  concurrency: 2.5\n", "spec.concurrency: must be an integer"),
    ],
)
def test_mistyped_fields_name_their_path(extra: str, message: str) -> None:
    with pytest.raises(BadInputError, match="run.yaml:[0-9]+: " + _escape(message)):
        parse_eval_run_text(MINIMAL + extra, source="run.yaml")


def _escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            MINIMAL.replace("evals.si/v1alpha1", "evals.si/v1"),
            "apiVersion: must be evals.si/v1alpha1 (got 'evals.si/v1')",
        ),
        (MINIMAL.replace("apiVersion: evals.si/v1alpha1\n", ""), "apiVersion: must be evals.si/v1alpha1 (missing)"),
        (MINIMAL.replace("kind: EvalRun", "kind: OnlineEvalPolicy"), "kind: must be EvalRun (got 'OnlineEvalPolicy')"),
    ],
)
def test_wrong_api_version_or_kind(text: str, message: str) -> None:
    with pytest.raises(BadInputError, match=_escape(message)):
        parse_eval_run_text(text, source="run.yaml")


def test_invalid_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(MINIMAL + "  gates: [metric('a').mean > 1\n  trials: 2\n")
    with pytest.raises(BadInputError, match=rf"{_escape(str(path))}:1[12]: invalid YAML"):
        load_eval_run(path)


def test_duplicate_keys_and_empty_or_missing_files(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"run.yaml:11: spec.evaluators: duplicate key"):
        parse_eval_run_text(MINIMAL + "  evaluators: []\n", source="run.yaml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(BadInputError, match="empty; expected an EvalRun document"):
        load_eval_run(empty)
    with pytest.raises(BadInputError, match="no such file"):
        load_eval_run(tmp_path / "missing.yaml")


def test_json_specs_parse_too(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(
        '{"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "spec": {"dataset": {"path": "d.jsonl"}, '
        '"evaluators": [{"ref": "exact-match"}], "budget": {"wallClock": "5m"}}}'
    )
    run = load_eval_run(path)
    assert run.spec.budget.wall_clock.seconds == 300
    tabs = tmp_path / "tabs.json"  # YAML refuses tab indentation; JSON allows it
    tabs.write_text(json.dumps(json.loads(path.read_text()), indent="\t"))
    assert load_eval_run(tabs).spec.budget.wall_clock.seconds == 300
    tabs.write_text('{\n\t"apiVersion": "evals.si/v1alpha1",\n\t"kind": }')
    with pytest.raises(BadInputError, match=r"tabs.json:3: invalid JSON"):
        load_eval_run(tabs)


def test_the_examples_parse() -> None:
    outputs = load_eval_run(EXAMPLES / "qa-outputs.yaml")
    assert outputs.spec.target.WhichOneof("kind") == "outputs" and outputs.metadata.project == "quickstart"
    model = load_eval_run(EXAMPLES / "qa-model.yaml")
    assert model.spec.trials == 3 and model.spec.target.model.base_url.startswith("http://127.0.0.1")
    assert model.spec.budget.wall_clock.seconds == 600
    assert any("passHatK(3)" in gate for gate in model.spec.gates)


def test_spec_hash_is_stable_and_changes_with_the_spec() -> None:
    a = parse_eval_run_text(MINIMAL, source="a")
    b = parse_eval_run_text(MINIMAL.replace("name: demo", "name: other"), source="b")
    c = parse_eval_run_text(MINIMAL.replace("0.9", "0.8"), source="c")
    assert spec_hash(a) == spec_hash(b)  # metadata is not the spec
    assert spec_hash(a) != spec_hash(c) and len(spec_hash(a)) == 64


def test_overrides_set_dotted_paths_and_are_validated_like_the_file() -> None:
    import yaml

    document = yaml.safe_load(MINIMAL)
    changed = apply_overrides(document, {"spec.trials": 5, "spec.evaluators.1.alias": "fuzzy", "spec.seed": 3})
    run = parse_eval_run(changed, source="run.yaml (with --set)")
    assert run.spec.trials == 5 and run.spec.seed == 3 and run.spec.evaluators[1].alias == "fuzzy"
    assert "trials" not in document["spec"]  # the original is left alone
    with pytest.raises(BadInputError, match="no such list item"):
        apply_overrides(document, {"spec.evaluators.7.alias": "x"})
    with pytest.raises(BadInputError, match=r"spec.trails: unknown field; did you mean trials\?"):
        parse_eval_run(apply_overrides(document, {"spec.trails": 2}), source="run.yaml")
