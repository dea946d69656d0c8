"""terminal-bench:// datasets: Terminal-Bench task directories (task.yaml, Dockerfile, run-tests.sh, tests/) as
harness tasks whose root is built from the Dockerfile, run by a CLI agent in a real bubblewrap sandbox, graded by
run-tests.sh's pytest summary as Terminal-Bench's parser reads it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.datasets.terminal_bench_main import parse_pytest
from evalsi.errors import BadInputError
from evalsi.records import from_value

TASKS = Path(__file__).parent / "fixtures" / "terminal-bench"


def test_tasks_become_harness_tasks_with_a_dockerfile_root() -> None:
    dataset = load_dataset(f"terminal-bench://{TASKS}")
    assert [r.id for r in dataset] == ["count-lines", "sum-numbers"]
    record = dataset.records[0]
    assert record.input.text.startswith("Count the lines of /app/data.txt")
    environment = from_value(record.metadata["environment"])
    assert environment["root"] == {"dockerfile": str((TASKS / "count-lines" / "Dockerfile").resolve()),
                                   "context": str((TASKS / "count-lines").resolve())}
    assert "def test_count_is_right" in environment["files"][".tbench/tests/test_outputs.py"]
    assert environment["check"] == {"command": ["python3", ".tbench/check.py", "30"], "format": "json",
                                    "timeout": "60s"}
    assert from_value(record.metadata["terminal_bench"]) == {
        "task": "count-lines", "difficulty": "easy", "category": "file-operations", "tags": ["coding", "shell"],
        "max_agent_timeout_sec": 60, "max_test_timeout_sec": 30}
    # one task directory, or its task.yaml, or a list of them
    assert [r.id for r in load_dataset(f"terminal-bench://{TASKS / 'sum-numbers'}")] == ["sum-numbers"]
    assert [r.id for r in load_dataset(f"terminal-bench://{TASKS / 'sum-numbers' / 'task.yaml'}")] == ["sum-numbers"]
    assert [r.id for r in load_dataset(f"terminal-bench://{TASKS / 'tasks.txt'}")] == ["count-lines", "sum-numbers"]


def test_a_task_missing_its_files_is_refused(tmp_path: Path) -> None:
    shutil.copytree(TASKS / "count-lines", tmp_path / "broken")
    (tmp_path / "broken" / "run-tests.sh").unlink()
    with pytest.raises(BadInputError, match=r"broken/run-tests.sh: missing"):
        load_dataset(f"terminal-bench://{tmp_path}")
    (tmp_path / "tasks.txt").write_text("broken\n")
    with pytest.raises(BadInputError, match=r"/broken/run-tests.sh: missing"):  # named as the list's sibling
        load_dataset(f"terminal-bench://{tmp_path}/tasks.txt")
    (tmp_path / "tasks.txt").write_text("../elsewhere\n")
    with pytest.raises(BadInputError, match="'elsewhere': not a task directory"):
        load_dataset(f"terminal-bench://{tmp_path}/tasks.txt")
    with pytest.raises(BadInputError, match="no such file or directory"):
        load_dataset(f"terminal-bench://{tmp_path}/nowhere")


def test_the_parser_reads_real_pytest_output(tmp_path: Path) -> None:
    (tmp_path / "test_outputs.py").write_text("def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 == 2\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-o", "addopts=",
                           str(tmp_path / "test_outputs.py")], capture_output=True, text=True, cwd=tmp_path)
    assert parse_pytest(done.stdout) == {"test_ok": "PASSED", "test_bad": "FAILED"}, done.stdout
    # as Terminal-Bench reads them: the name after the first "::", a FAILED line's last " - description" dropped,
    # lines that are not "STATUS name" skipped; no summary at all is its parse error (None)
    summary = ("== short test summary info ==\nSKIPPED [1] tests/t.py:4: env\nXPASS t.py::test_x - a - b\n"
               "FAILED t.py::T::test_y - AssertionError - x\nnot a result\n")
    assert parse_pytest(summary) == {"[1] tests/t.py:4: env": "SKIPPED", "test_x - a - b": "XPASS",
                                     "T::test_y - AssertionError": "FAILED"}
    assert parse_pytest("4 passed in 0.1s") is None


def test_a_cli_agent_graded_by_the_tasks_tests(tmp_path: Path) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    # the agent counts lines wherever it is: it solves count-lines and not sum-numbers
    spec = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "tbench"}, "spec": {
        "target": {"agent": {"cli": {"command": ["sh", "-c", "wc -l < data.txt | tr -d ' ' > count.txt"],
                                     "timeout": "60s"}}},
        "dataset": {"path": str(TASKS / "tasks.txt"), "format": "terminal-bench"},
        "evaluators": [{"ref": "builtin/task-success"}]}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "-f", str(tmp_path / "run.yaml"), "--output", str(out)])
    assert done.exit_code == 0, done.output
    results = {r["recordId"]: r["scores"][0] for r in json.loads(out.read_text())["results"]}
    assert {key: score.get("passed", False) for key, score in results.items()} == {
        "count-lines": True, "sum-numbers": False}, results
    assert results["count-lines"]["explanation"] == "2/2 tests passed"
    assert "0/1 tests passed; failed: test_sum_is_right" in results["sum-numbers"]["explanation"]
