"""harbor:// datasets: Harbor task directories (Terminal-Bench 2.0's instruction.md, task.toml, environment/,
tests/test.sh, solution/) as harness tasks whose root is built from environment/Dockerfile, run by a CLI agent in a
real bubblewrap sandbox and graded by the reward file test.sh writes, as Harbor's verifier reads it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.datasets import load_dataset
from evalsi.datasets.harbor_main import mapped, read_rewards
from evalsi.errors import BadInputError
from evalsi.records import from_value

TASKS = Path(__file__).parents[2] / "examples" / "benchmarks" / "harbor"


def test_tasks_become_harness_tasks_with_a_dockerfile_root() -> None:
    dataset = load_dataset(f"harbor://{TASKS}")
    assert [r.id for r in dataset] == ["broken-oracle", "count-lines", "sum-numbers"]
    record = dataset.records[1]
    assert record.input.text == (TASKS / "count-lines" / "instruction.md").read_text()
    assert record.input.text.startswith("Count the lines of /app/data.txt")
    environment = from_value(record.metadata["environment"])
    assert environment["root"] == {"dockerfile": str((TASKS / "count-lines" / "environment" / "Dockerfile").resolve()),
                                   "context": str((TASKS / "count-lines" / "environment").resolve())}
    assert sorted(environment["files"]) == [".harbor/check.py", ".harbor/tests/test.sh",
                                            ".harbor/tests/test_outputs.py"]  # no solution: the agent must not see it
    assert environment["check"] == {"command": ["python3", ".harbor/check.py", "verify", "30"], "format": "json",
                                    "timeout": "60s"}
    assert from_value(record.metadata["harbor"]) == {
        "task": "count-lines", "version": "1.0", "author_name": "Fixtures", "author_email": "fixtures@example.com",
        "difficulty": "easy", "category": "file-operations", "tags": ["shell", "counting"],
        "expert_time_estimate_min": 1, "verifier_timeout_sec": 30, "agent_timeout_sec": 60,
        "environment": {"build_timeout_sec": 120, "cpus": 1, "memory_mb": 512, "storage_mb": 1024}}
    # one task, its task.toml, a list; terminal-bench:// finds task.toml and reads them the same way
    assert [r.id for r in load_dataset(f"harbor://{TASKS / 'sum-numbers'}")] == ["sum-numbers"]
    assert [r.id for r in load_dataset(f"harbor://{TASKS / 'sum-numbers' / 'task.toml'}")] == ["sum-numbers"]
    listed = ["count-lines", "sum-numbers", "broken-oracle"]
    assert [r.id for r in load_dataset(f"harbor://{TASKS / 'tasks.txt'}")] == listed
    assert [r.id for r in load_dataset(f"terminal-bench://{TASKS / 'tasks.txt'}")] == listed
    tbench = load_dataset(f"terminal-bench://{TASKS}").records[1]
    assert from_value(tbench.metadata["environment"]) == environment
    # the oracle's dataset adds the solution for `python3 .harbor/check.py solve`
    oracle = from_value(load_dataset(f"harbor-oracle://{TASKS / 'count-lines'}").records[0].metadata["environment"])
    assert oracle["files"][".harbor/solution/solve.sh"] == (TASKS / "count-lines/solution/solve.sh").read_text()


def _task(tmp_path: Path, toml: str | None = None) -> Path:
    task = tmp_path / "task"
    shutil.copytree(TASKS / "count-lines", task)
    if toml is not None:
        (task / "task.toml").write_text(toml)
    return task


@pytest.mark.parametrize(("toml", "refusal"), [
    ('[verifier]\ntimeout_sec = "30"\n', r"task/task.toml: verifier.timeout_sec: expected a number, got str '30'"),
    ("metadata = \"easy\"\n", r"task/task.toml: metadata: expected a table \(\[metadata\]\), got str 'easy'"),
    ("[environment]\ncpus = 1.5\n", r"task/task.toml: environment.cpus: expected an integer, got float 1.5"),
    ("[environment]\nallow_internet = 1\n", r"environment.allow_internet: expected a boolean, got int 1"),
    ("agent = 3\n", r"task/task.toml: agent: expected a table \(\[agent\]\), got int 3"),
    ("version = 1.0\n", r"task/task.toml: version: expected a string"),
    ("[verifier]\ntimeout_sec = 0\n", r"task/task.toml: verifier.timeout_sec: expected seconds over 0, got 0"),
    ('[verifier.env]\nOPENAI_API_KEY = "x"\n', r"verifier.env: the verifier's own variables are not built"),
    ("[verifier\n", r"task/task.toml: not TOML"),
])
def test_a_bad_task_toml_is_refused_naming_file_and_key(tmp_path: Path, toml: str, refusal: str) -> None:
    _task(tmp_path, toml)
    with pytest.raises(BadInputError, match=refusal):
        load_dataset(f"harbor://{tmp_path}")


def test_unknown_keys_are_tolerated_and_missing_files_refused(tmp_path: Path) -> None:
    # the shape of a Terminal-Bench 2.0 task.toml: keys this reader does not know, empty env tables, free metadata,
    # a verifier timeout of an hour (test.sh gets what the checker's hour leaves)
    task = _task(tmp_path, """schema_version = "1.1"
artifacts = []
[task]
name = "terminal-bench/task"
[[task.authors]]
name = "Ada"
[metadata]
author_name = ["Ada", "Alan"]
expert_time_estimate_min = 5.0
when = 2025-10-31
[verifier]
timeout_sec = 3600.0
[environment]
docker_image = "alexgshaw/task:20251031"
mcp_servers = []
[verifier.env]
[environment.env]
[solution.env]
X = "y"
""")
    record = load_dataset(f"harbor://{task}").records[0]
    assert from_value(record.metadata["harbor"]) == {
        "task": "task", "author_name": ["Ada", "Alan"], "expert_time_estimate_min": 5, "verifier_timeout_sec": 3600,
        "environment": {"docker_image": "alexgshaw/task:20251031"}}
    assert from_value(record.metadata["environment"])["check"] == {
        "command": ["python3", ".harbor/check.py", "verify", "3570"], "format": "json", "timeout": "3600s"}
    (task / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    with pytest.raises(BadInputError, match=r"task/environment/docker-compose.yaml: several containers \(docker "
                                             r"compose\) are not built"):
        load_dataset(f"harbor://{task}")
    # a Dockerfile is built here; without one, the prebuilt docker_image is the root
    assert from_value(record.metadata["environment"])["root"]["dockerfile"].endswith("task/environment/Dockerfile")
    shutil.rmtree(task / "environment")
    environment = from_value(load_dataset(f"harbor://{task}").records[0].metadata["environment"])
    assert environment["root"] == {"oci": "alexgshaw/task:20251031"}
    (task / "task.toml").write_text('version = "1.0"\n')
    with pytest.raises(BadInputError, match=r"environment/Dockerfile: missing, and task.toml sets no "
                                            r"\[environment\] docker_image"):
        load_dataset(f"harbor://{task}")
    (task / "tests" / "test.sh").unlink()
    with pytest.raises(BadInputError, match=r"task/tests/test.sh: missing"):
        load_dataset(f"harbor://{tmp_path}")


def test_the_reward_files_read_as_harbor_reads_them(tmp_path: Path) -> None:
    def verdict(**files: str) -> dict[str, object]:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        for name, text in files.items():
            (folder / f"reward.{name}").write_text(text)
        return read_rewards(str(folder))

    assert verdict(txt="1\n") == {"success": True, "reason": "reward 1", "score": 1.0}
    assert verdict(txt="0.5") == {"success": False, "reason": "reward 0.5", "score": 0.5}
    # reward.txt is the reward when both are there; reward.json's numbers are shown beside it
    assert verdict(txt="0", json='{"reward": 1, "lint": 0.5}') == {
        "success": False, "reason": "reward 0 (reward.json: lint=0.5, reward=1)", "score": 0.0}
    assert verdict(json='{"reward": 1, "tests": 1}')["success"] is True
    assert verdict(json='{"accuracy": 1}') == {"success": True, "reason": "reward 1 (reward.json: accuracy=1)",
                                               "score": 1.0}
    failures = {
        "RewardFileNotFoundError: No reward file found at /logs/verifier/reward.txt or": verdict(),
        "RewardFileEmptyError: Reward file is empty at /logs/verifier/reward.txt": verdict(txt=""),
        "RewardFileEmptyError: Reward file is empty at /logs/verifier/reward.json": verdict(json=""),
        "VerifierOutputParseError: Failed to parse rewards from text file": verdict(txt="passed"),
        "VerifierOutputParseError: Failed to parse rewards from JSON file": verdict(json='{"reward": "1"}'),
        "VerifierOutputParseError: /logs/verifier/reward.json has no 'reward' key and 2 keys": verdict(
            json='{"a": 1, "b": 0}'),
        "VerifierOutputParseError: the reward 2.0 is not a finite number between 0.0 and 1.0": verdict(txt="2"),
    }
    for reason, got in failures.items():
        assert got["success"] is False and str(got["reason"]).startswith(reason), got


def test_absolute_paths_lead_into_the_workspace() -> None:
    script = 'python3 /tests/t.py > /logs/verifier/x "/solution/s.sh" /tests\ncat /app/tests $HOME/tests /testsuite'
    assert mapped(script, "/app/.harbor") == (
        'python3 /app/.harbor/tests/t.py > /app/.harbor/logs/verifier/x "/app/.harbor/solution/s.sh" '
        '/app/.harbor/tests\ncat /app/tests $HOME/tests /testsuite')
    assert mapped(mapped(script, "/app/.harbor"), "/app/.harbor") == mapped(script, "/app/.harbor")


def test_the_oracle_run_through_the_harness(tmp_path: Path) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    # the fixtures, and one whose test.sh writes no reward: Harbor's RewardFileNotFoundError, a failed verification
    shutil.copytree(TASKS, tmp_path / "tasks")
    silent = tmp_path / "tasks" / "no-reward"
    shutil.copytree(TASKS / "count-lines", silent)
    (silent / "tests" / "test.sh").write_text("echo graded nothing\nexit 3\n")
    # its oracle plants a reward where test.sh would write one: only test.sh's own counts
    (silent / "solution" / "solve.sh").write_text("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n")
    (tmp_path / "tasks" / "tasks.txt").write_text("count-lines\nsum-numbers\nbroken-oracle\nno-reward\n")
    spec = yaml.safe_load((TASKS / "run.yaml").read_text())
    spec["spec"]["dataset"]["path"] = str(tmp_path / "tasks" / "tasks.txt")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "-f", str(tmp_path / "run.yaml"), "--output", str(out)])
    assert done.exit_code == 0, done.output
    results = {r["recordId"]: r["scores"][0] for r in json.loads(out.read_text())["results"]}
    assert {key: score.get("passed", False) for key, score in results.items()} == {
        "count-lines": True, "sum-numbers": True, "broken-oracle": False, "no-reward": False}, results
    assert results["count-lines"]["explanation"] == "reward 1"
    assert results["sum-numbers"]["explanation"] == "reward 1 (reward.json: file_exists=1, reward=1, sum_correct=1)"
    assert results["broken-oracle"]["explanation"].startswith("reward 0; test.sh exited 0: reversed.txt: one")
    assert results["no-reward"]["explanation"] == (
        "RewardFileNotFoundError: No reward file found at /logs/verifier/reward.txt or /logs/verifier/reward.json; "
        "test.sh exited 3: graded nothing")
