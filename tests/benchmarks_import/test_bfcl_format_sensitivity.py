"""``bfcl://DIR/format_sensitivity`` against bfcl-eval 2026.3.23: the same records, in the same order, with the
same ids (``format_sensitivity_<n>:<configuration>:<question id>``) and first turn as its
``load_dataset_entry("format_sensitivity")`` and ``system_prompt_pre_processing_chat_model``; graded by
builtin/bfcl-ast in each record's return format with bfcl-eval's verdict; summarised per configuration as
bfcl-eval's ``format_sensitivity_runner`` does."""

from __future__ import annotations

import copy
import json
import random
import shutil
import statistics
import types
from pathlib import Path
from typing import Any

import pytest

import evalsi
from benchmarks_import.test_bfcl_format_decode import _answer, _bfcl_verdict, _perturbed, _written
from benchmarks_import.test_bfcl_multi_reference import DATA
from benchmarks_import.test_bfcl_prompt import bfcl, theirs
from benchmarks_import.test_bfcl_reference import reference
from evalsi.datasets import bfcl_formats, load_dataset
from evalsi.datasets.bfcl_format_sensitivity import CONFIG_KEY, config_summary
from evalsi.errors import BadInputError
from evalsi.records import content_value, from_value, to_content

__all__ = ["bfcl", "reference", "theirs"]


@pytest.fixture(scope="module")
def records() -> list[Any]:
    return list(load_dataset(f"bfcl://{DATA}/format_sensitivity").records)


def test_the_records_are_bfcl_evals_questions(theirs: types.SimpleNamespace, records: list[Any]) -> None:
    entries = theirs.load("format_sensitivity")
    assert [record.id for record in records] == [entry["id"] for entry in entries]
    for record, entry in zip(records, entries, strict=True):
        assert content_value(record.input)["messages"] == theirs.utils.system_prompt_pre_processing_chat_model(
            copy.deepcopy(entry["question"][0]), entry["function"], entry["id"]), entry["id"]
        config, question_id = entry["id"].split(":")[1:]
        assert from_value(record.metadata[CONFIG_KEY]) == config
        assert from_value(record.metadata["bfcl_question_id"]) == question_id


def test_bfcl_ast_grades_each_record_in_its_format(theirs: types.SimpleNamespace, reference: Any,
                                                   records: list[Any]) -> None:
    from bfcl_eval.utils import load_ground_truth_entry  # type: ignore[import-untyped]

    rng = random.Random(11)
    truths = [entry["ground_truth"] for entry in load_ground_truth_entry("format_sensitivity")]
    picked = rng.sample(range(len(records)), 600)
    expected, pairs = {}, []
    for position in picked:
        record = records[position]
        config = bfcl_formats.parse(from_value(record.metadata[CONFIG_KEY]))
        reference_json = json.loads(content_value(record.reference))
        right = _answer(truths[position], rng)
        calls = right if rng.random() < 0.5 else _perturbed(right, rng)
        text = _written(calls, config.return_format, rng)
        text = f"<TOOLCALL>{text}</TOOLCALL>" if config.tool_call_tag and rng.random() < 0.9 else text
        record.output.CopyFrom(to_content(text))
        expected[record.id] = _bfcl_verdict(theirs, reference, text, config, reference_json["function"],
                                            truths[position], reference_json["category"])
    results = evalsi.evaluate([records[p] for p in picked], ["bfcl-ast"]).results
    for result in results:
        assert result.scores[0].passed == expected[result.record_id], result.record_id
        pairs.append((result.record_id.split(":")[1], result.scores[0].passed))
    assert 150 < sum(expected.values()) < 450
    summary = config_summary(pairs)
    accuracies = [entry["accuracy"] for entry in summary["by_config"].values()]
    assert len(accuracies) == 26 and sum(e["total_count"] for e in summary["by_config"].values()) == 600
    assert summary["accuracy_std"] == round(statistics.stdev(accuracies) * 100, 2)
    assert summary["accuracy_max_delta"] == round((max(accuracies) - min(accuracies)) * 100, 2)


def test_config_summary_of_one_configuration() -> None:
    summary = config_summary([("c", True), ("c", False), ("c", True), ("c", True)])
    assert summary == {"by_config": {"c": {"accuracy": 0.75, "correct_count": 3, "total_count": 4}},
                       "accuracy_variance": 0.0, "accuracy_std": 0.0, "accuracy_max_delta": 0.0}
    two = config_summary([("a", True), ("b", False)])
    assert (two["accuracy_variance"], two["accuracy_std"], two["accuracy_max_delta"]) == (5000.0, 70.71, 100.0)


def _copied(tmp_path: Path, ids: dict[str, list[str]]) -> Path:
    for name in ("BFCL_v4_simple_python.json", "BFCL_v4_multiple.json"):
        shutil.copy(DATA / name, tmp_path / name)
        (tmp_path / "possible_answer").mkdir(exist_ok=True)
        shutil.copy(DATA / "possible_answer" / name, tmp_path / "possible_answer" / name)
    (tmp_path / "BFCL_v4_format_sensitivity.json").write_text(json.dumps(ids))
    return tmp_path


def test_an_id_file_of_ones_own(tmp_path: Path) -> None:
    folder = _copied(tmp_path, {"multiple": ["multiple_3"], "simple_python": ["simple_python_2", "simple_python_1"],
                                "parallel": []})
    ids = [record.id for record in load_dataset(f"bfcl://{folder}/format_sensitivity").records]
    assert len(ids) == 3 * 26
    assert [i.split(":")[2] for i in ids[::26]] == ["multiple_3", "simple_python_1", "simple_python_2"]
    assert ids[27] == f"format_sensitivity_27:{bfcl_formats.CONFIGS[1]}:simple_python_1"
    assert len(list(load_dataset(f"bfcl://{folder}/BFCL_v4_format_sensitivity.json").records)) == 3 * 26


@pytest.mark.parametrize(("ids", "message"), [
    ({"simple_python": ["simple_python_99999"]}, "not in .*simple_python's questions"),
    ({"multi_turn_base": ["multi_turn_base_0"]}, "single-turn AST"),
    ({"simple_python": "simple_python_1"}, "expected an object"),
])
def test_a_bad_id_file_is_refused(tmp_path: Path, ids: dict[str, Any], message: str) -> None:
    folder = _copied(tmp_path, ids)
    with pytest.raises(BadInputError, match=message):
        list(load_dataset(f"bfcl://{folder}/format_sensitivity").records)
