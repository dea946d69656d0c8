"""bfcl:// datasets: BFCL's question and possible-answer files as records, graded by builtin/bfcl-ast through
evalsi.evaluate; the served form (format bfcl, confined to the datasets directory)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import evalsi
from evalsi.api.run_dataset import load_run_dataset
from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.datasets.bfcl_prompt import PROMPT
from evalsi.errors import BadInputError
from evalsi.records import to_content
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.run_pb2 import EvalRun

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"

# Outputs a model could give, in BFCL's prompting format, and whether BFCL's checker passes each.
OUTPUTS = {
    "simple_0": ('[geometry.triangle_area(base=10, height=5, unit="units")]', True),
    "simple_1": ("[convert_weights(values=[2.5, 3.0], from_unit='Kilograms', to_unit='lb', "
                 "options={'strict': True})]", True),
    "multiple_0": ('[weather.current(city="Maribor")]', False),
    "parallel_0": ('[weather.current(city="rome"), weather.current(city="Paris, France")]', True),
    "parallel_multiple_0": ("[weather.current(city='Piran'), restaurant.book(city='Piran', people=4, "
                            "time='19:30', guests=[{'name': 'Ana'}])]", True),
}


def _records() -> list:
    records = []
    for category in ("simple", "multiple", "parallel", "parallel_multiple"):
        records.extend(load_dataset(f"bfcl://{FIXTURES}/{category}").records)
    return records


def test_questions_become_records_with_tools_and_reference() -> None:
    dataset = load_dataset(f"bfcl://{FIXTURES / 'BFCL_v3_simple.json'}")
    assert dataset.format == "bfcl" and [r.id for r in dataset] == ["simple_0", "simple_1"]
    record = dataset.records[0]
    system, user = record.input.messages.messages
    assert system.role == "system" and "geometry.triangle_area" in system.content and "[func_name1(" in system.content
    assert (user.role, user.content) == ("user", "What is the area of a triangle whose base is 10 units and height 5 "
                                                 "units?")
    reference = json.loads(record.reference.text)
    assert reference["category"] == "simple"
    assert reference["ground_truth"] == [{"geometry.triangle_area": {"base": [10], "height": [5],
                                                                     "unit": ["units", ""]}}]
    # a float in the possible answers stays a float (the reference is JSON text)
    weights = json.loads(dataset.records[1].reference.text)["ground_truth"][0]["convert_weights"]
    assert weights["values"] == [[2.5, 3.0]] and isinstance(weights["values"][0][1], float)
    (tool,) = evalsi.records.from_value(record.metadata["tools"])
    assert tool["function"]["name"] == "geometry_triangle_area"  # OpenAI-style tools refuse dots
    assert tool["function"]["parameters"]["type"] == "object"
    assert tool["function"]["parameters"]["required"] == ["base", "height"]
    assert record.metadata["bfcl_category"].string_value == "simple"
    # bfcl://<dir>/<category> finds BFCL_v*_<category>.json, never a longer category ending the same
    assert [r.id for r in load_dataset(f"bfcl://{FIXTURES}/multiple")] == ["multiple_0"]


def test_graded_by_bfcl_ast_through_evaluate() -> None:
    records = _records()
    for record in records:
        record.output.CopyFrom(to_content(OUTPUTS[record.id][0]))
    results = evalsi.evaluate(records, ["bfcl-ast"])
    verdicts = {r.record_id: r.scores[0] for r in results.results}
    assert {key: score.passed for key, score in verdicts.items()} == {key: ok for key, (_o, ok) in OUTPUTS.items()}
    assert verdicts["multiple_0"].explanation.startswith("simple_function_checker:wrong_func_name")
    assert results.metric("bfcl-ast").mean == pytest.approx(4 / 5)


def test_tool_call_outputs_and_undecodable_text() -> None:
    record = load_dataset(f"bfcl://{FIXTURES}/parallel").records[0]
    record.output.CopyFrom(to_content({"messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "function": {"name": "weather_current", "arguments": '{"city": "Paris"}'}},
        {"id": "2", "function": {"name": "weather_current", "arguments": '{"city": "Rome", "celsius": true}'}},
    ]}]}))
    other = load_dataset(f"bfcl://{FIXTURES}/simple").records[0]
    other.output.CopyFrom(to_content("Sorry, I need to know the unit first."))
    results = evalsi.evaluate([record, other], [{"ref": "bfcl-ast", "params": {"dots_as_underscores": True}}])
    verdicts = {r.record_id: r.scores[0] for r in results.results}
    assert verdicts["parallel_0"].passed
    assert not verdicts["simple_0"].passed and "decoder_failed" in verdicts["simple_0"].explanation


def _copy(tmp_path: Path, *names: str) -> Path:
    (tmp_path / "possible_answer").mkdir()
    for name in names:
        shutil.copy(FIXTURES / name, tmp_path / name)
        shutil.copy(FIXTURES / "possible_answer" / name, tmp_path / "possible_answer" / name)
    return tmp_path


def test_bad_files_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file, nor a BFCL category file"):
        load_dataset(f"bfcl://{tmp_path}/simple")
    root = _copy(tmp_path, "BFCL_v3_simple.json")
    (root / "possible_answer" / "BFCL_v3_simple.json").write_text(
        '{"id": "simple_0", "ground_truth": [{"geometry.triangle_area": {"base": [10]}}]}\n')
    with pytest.raises(BadInputError, match=r"BFCL_v3_simple.json:2: id 'simple_1' has no possible answer"):
        load_dataset(f"bfcl://{root}/simple")
    multi = root / "BFCL_v4_multi_turn_composite.json"  # a multi-turn category not imported
    multi.write_text('{"id": "multi_turn_composite_0", "question": [[{"role": "user", "content": "a"}]], "function": '
                     '[{"name": "f"}]}\n')
    (root / "possible_answer" / multi.name).write_text('{"id": "multi_turn_composite_0", "ground_truth": []}\n')
    with pytest.raises(BadInputError, match="category 'multi_turn_composite' is not one the AST checker grades"):
        load_dataset(f"bfcl://{multi}")


def test_served_runs_read_format_bfcl_under_the_datasets_dir(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    root.mkdir()
    _copy(root, "BFCL_v3_parallel.json")
    run = EvalRun()
    run.spec.dataset.path = "BFCL_v3_parallel.json"
    run.spec.dataset.format = "bfcl"
    assert [r.id for r in load_run_dataset(run, datasets_dir=root)] == ["parallel_0"]
    # the scheme names any local path, so a served spec cannot use it
    run.spec.dataset.path = f"bfcl://{FIXTURES}/simple"
    with pytest.raises(BadInputError):
        list(load_run_dataset(run, datasets_dir=root))
    # possible answers beside the file that lead outside its directory are refused
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(FIXTURES / "possible_answer" / "BFCL_v3_parallel.json", outside / "BFCL_v3_parallel.json")
    (root / "possible_answer" / "BFCL_v3_parallel.json").unlink()
    (root / "possible_answer" / "BFCL_v3_parallel.json").symlink_to(outside / "BFCL_v3_parallel.json")
    run.spec.dataset.path = "BFCL_v3_parallel.json"
    with pytest.raises(BadInputError, match="leads outside the question file's directory"):
        list(load_run_dataset(run, datasets_dir=root))


def test_a_run_on_a_model_target(tmp_path: Path) -> None:
    """evalsi run: the BFCL file as the spec's dataset (format bfcl), a model answering in BFCL's format."""
    seen: list[str] = []

    def reply(body: dict) -> str:
        system, question = body["messages"][0]["content"], body["messages"][-1]["content"]
        seen.append(system)
        if "triangle" in question:
            return "[geometry.triangle_area(base=10, height=5)]"
        return "[convert_weights(values=[2.5, 3.0], from_unit='kg', to_unit='pounds', precision=3)]"

    shutil.copytree(FIXTURES, tmp_path / "bfcl")
    with ThreadedProvider(reply) as server:
        (tmp_path / "run.yaml").write_text(json.dumps({
            "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "bfcl"}, "spec": {
                "target": {"model": {"connector": "openai-compatible", "model": "m", "baseUrl": server.base_url}},
                "dataset": {"path": "bfcl/BFCL_v3_simple.json", "format": "bfcl"},
                "evaluators": [{"ref": "builtin/bfcl-ast"}]}}))
        done = CliRunner().invoke(cli, ["run", "-f", str(tmp_path / "run.yaml"), "--output", str(tmp_path / "o.json")])
    assert done.exit_code == 0, done.output
    results = {r["recordId"]: r["scores"][0] for r in json.loads((tmp_path / "o.json").read_text())["results"]}
    assert results["simple_0"].get("passed") is True
    # precision=3 is not among its possible values (2, or left out)
    assert results["simple_1"].get("passed", False) is False
    assert results["simple_1"]["explanation"].startswith("value_error:others")
    assert all(system.startswith(PROMPT.partition("{functions}")[0]) for system in seen) and len(seen) == 2
