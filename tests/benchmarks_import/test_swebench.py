"""swebench:// datasets: a tiny Python repository (a local git repo made here, no network) with a bug, its instance
(test_patch adding the failing test, FAIL_TO_PASS and PASS_TO_PASS), predictions applied by a CLI agent in a real
bubblewrap sandbox, and the checker grading as SWE-bench does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.datasets import load_dataset, swebench_main, swebench_specs
from evalsi.errors import BadInputError
from evalsi.records import from_value

SCRIPT = Path(swebench_main.__file__)
SPECS = Path(swebench_specs.__file__)
CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin",
                               "HOME": str(repo)}).stdout


def _diff(repo: Path, path: str, text: str) -> str:
    """The diff that writes ``text`` to ``path`` (then undone), as git prints it."""
    target = repo / path
    before = target.read_text() if target.exists() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    _git(repo, "add", "-N", path)
    diff = _git(repo, "diff", "--", path)
    if before is None:
        _git(repo, "rm", "-q", "--cached", path)
        target.unlink()
    else:
        target.write_text(before)
    return diff


def _instances(root: Path) -> Path:
    """root/instances.jsonl and root/repos/evals__calc at its base commit: sub() is wrong; the test patch adds the
    test that shows it."""
    repo = root / "repos" / "evals__calc"
    (repo / "tests").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc.py").write_text(CALC + "# a later commit the instance must not see\n")
    _git(repo, "commit", "-q", "-am", "later")
    _git(repo, "checkout", "-q", base)
    test_patch = _diff(repo, "tests/test_calc.py", TESTS + "\n\ndef test_sub():\n    from calc import sub\n"
                                                           "    assert sub(5, 3) == 2\n")
    gold = _diff(repo, "calc.py", CALC.replace("return a + b\n", "return a - b\n").replace(
        "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b"))
    wrong = _diff(repo, "calc.py", CALC.replace("def add(a, b):\n    return a + b", "def add(a, b):\n    return 0"))
    instance = {"instance_id": "evals__calc-1", "repo": "evals/calc", "base_commit": base,
                "problem_statement": "sub(5, 3) returns 8; it should subtract.", "test_patch": test_patch,
                "patch": gold, "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_sub"]),
                "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]), "version": "0.1"}
    rows = [{**instance, "instance_id": "gold", "model_patch": gold},
            {**instance, "instance_id": "wrong", "model_patch": wrong},
            {**instance, "instance_id": "empty", "model_patch": "diff --git a/x b/x\n"}]
    path = root / "instances.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_instances_become_harness_tasks(tmp_path: Path) -> None:
    path = _instances(tmp_path)
    dataset = load_dataset(f"swebench://{path}")
    assert [r.id for r in dataset] == ["gold", "wrong", "empty"]
    record = dataset.records[0]
    assert record.input.text == "sub(5, 3) returns 8; it should subtract."
    environment = from_value(record.metadata["environment"])
    files = environment["files"]
    assert files["calc.py"] == CALC  # the base commit's files, not the later commit's
    assert "test_sub" not in files["tests/test_calc.py"] and "test_sub" in files[".swebench/test.patch"]
    assert json.loads(files[".swebench/tests.json"]) == {"FAIL_TO_PASS": ["tests/test_calc.py::test_sub"],
                                                         "PASS_TO_PASS": ["tests/test_calc.py::test_add"]}
    assert environment["check"]["format"] == "json"
    assert from_value(record.metadata["swebench"])["repo"] == "evals/calc"
    # a repository SWE-bench does not know gets no spec: its tests are the ids themselves, under pytest
    assert ".swebench/spec.json" not in files and "spec" not in from_value(record.metadata["swebench"])
    assert files[".swebench/swebench_specs.py"] == SPECS.read_text()


def test_bad_instances_are_refused_by_name(tmp_path: Path) -> None:
    path = _instances(tmp_path)
    row = json.loads(path.read_text().splitlines()[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**row, "repo": "evals/missing"}) + "\n")
    with pytest.raises(BadInputError, match=r"bad.jsonl:1: repo evals/missing: no git repository"):
        load_dataset(f"swebench://{bad}")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    escaped = outside / "bad.jsonl"
    escaped.write_text(json.dumps(row) + "\n")
    (outside / "repos").symlink_to(tmp_path / "repos")  # its repos/ leads out of the file's directory
    with pytest.raises(BadInputError, match="leads outside the instances file's directory"):
        load_dataset(f"swebench://{escaped}")
    bad.write_text(json.dumps({**row, "base_commit": "--output=/tmp/x"}) + "\n")
    with pytest.raises(BadInputError, match="base_commit: expected a commit hash"):
        load_dataset(f"swebench://{bad}")
    bad.write_text(json.dumps({**row, "version": ["3.0"]}) + "\n")
    with pytest.raises(BadInputError, match=r"bad.jsonl:1: version: expected a string"):
        load_dataset(f"swebench://{bad}")
    bad.write_text(json.dumps({**row, "FAIL_TO_PASS": "not json"}) + "\n")
    with pytest.raises(BadInputError, match="FAIL_TO_PASS: expected a list of test ids"):
        load_dataset(f"swebench://{bad}")


def test_predictions_graded_by_fail_to_pass_and_pass_to_pass(tmp_path: Path) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    _instances(tmp_path)
    spec = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "swebench"}, "spec": {
        "target": {"agent": {"cli": {"command": ["python3", ".swebench/swebench.py", "apply", ".swebench/model.patch"],
                                     "timeout": "60s"}}},
        "dataset": {"path": "instances.jsonl", "format": "swebench"},
        "evaluators": [{"ref": "builtin/task-success"}]}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "-f", str(tmp_path / "run.yaml"), "--output", str(out)])
    assert done.exit_code == 0, done.output
    run = json.loads(out.read_text())
    verdicts = {r["recordId"]: r for r in run["results"]}
    reasons = {key: result["scores"][0].get("explanation", "") for key, result in verdicts.items()}
    assert {key: result["scores"][0].get("passed", False) for key, result in verdicts.items()} == {
        "gold": True, "wrong": False, "empty": False}, reasons
    assert "FAIL_TO_PASS 1/1, PASS_TO_PASS 1/1" in reasons["gold"]
    # the wrong patch breaks add (PASS_TO_PASS) and leaves sub wrong (FAIL_TO_PASS)
    assert "FAIL_TO_PASS 0/1, PASS_TO_PASS 0/1" in reasons["wrong"]
    assert "FAIL_TO_PASS 0/1, PASS_TO_PASS 1/1" in reasons["empty"]


def _check(workspace: Path, f2p: list[str], p2p: list[str]) -> dict:
    """The checker run here (the script is standard library only), with this interpreter's pytest."""
    (workspace / ".swebench" / "tests.json").write_text(json.dumps({"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}))
    done = subprocess.run([sys.executable, ".swebench/swebench.py", "check"], cwd=workspace, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_grading_follows_swebench_test_passed_and_test_failed(tmp_path: Path) -> None:
    (tmp_path / ".swebench").mkdir()
    shutil.copy(SCRIPT, tmp_path / ".swebench" / "swebench.py")
    shutil.copy(SPECS, tmp_path / ".swebench" / "swebench_specs.py")
    (tmp_path / ".swebench" / "test.patch").write_text("")
    (tmp_path / "test_x.py").write_text("import pytest\n\n\ndef test_ok():\n    pass\n\n\n"
                                        "@pytest.mark.skip(reason='env')\ndef test_skipped():\n    pass\n\n\n"
                                        "def test_bad():\n    assert False\n")
    assert _check(tmp_path, ["test_x.py::test_ok"], []) == {
        "success": True, "reason": "FAIL_TO_PASS 1/1, PASS_TO_PASS 0/0", "score": 1.0}
    # pytest -rA's summary line for a skipped test ("SKIPPED [1] test_x.py:9: env") names no test id, so SWE-bench's
    # pytest parser never sees it: it did not run, and fails
    assert _check(tmp_path, ["test_x.py::test_ok"], ["test_x.py::test_skipped"]) == {
        "success": False, "reason": "FAIL_TO_PASS 1/1, PASS_TO_PASS 0/1; failing: test_x.py::test_skipped",
        "score": 0.5}
    # a failing test fails it
    verdict = _check(tmp_path, ["test_x.py::test_ok", "test_x.py::test_bad"], [])
    assert verdict == {"success": False, "reason": "FAIL_TO_PASS 1/2, PASS_TO_PASS 0/0; failing: test_x.py::test_bad",
                       "score": 0.5}


# A stand-in for django's tests/runtests.py: it takes exactly the arguments SWE-bench's django command gives (else it
# exits 2), imports each dotted test module from tests/, and reports at verbosity 2 on stderr as django's runner
# does: "name (module.Class) ... ok|FAIL|ERROR", a test's own stderr output between "..." and its "ok", then the
# FAIL:/ERROR: traceback blocks.
RUNTESTS = '''\
#!/usr/bin/env python
import argparse, importlib, os, sys, traceback, unittest

parser = argparse.ArgumentParser()
parser.add_argument("modules", nargs="+")
parser.add_argument("--verbosity", type=int, required=True)
parser.add_argument("--settings", required=True)
parser.add_argument("--parallel", type=int, required=True)
args = parser.parse_args()
if (args.verbosity, args.settings, args.parallel) != (2, "test_sqlite", 1):
    sys.exit(f"unexpected arguments: {sys.argv[1:]}")
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.dirname(here)]
importlib.import_module(args.settings)
out = sys.stderr
out.write(f"Testing against Django installed in '{os.path.dirname(here)}'\\nSystem check identified no issues "
          "(0 silenced).\\n")
blocks, ran = [], 0
for name in args.modules:
    module = importlib.import_module(name)
    for case in [value for value in vars(module).values() if isinstance(value, type)
                 and issubclass(value, unittest.TestCase)]:
        for method in sorted(m for m in vars(case) if m.startswith("test")):
            label = f"{method} ({name}.{case.__name__})"
            out.write(f"{label} ... ")
            out.flush()
            ran += 1
            try:
                getattr(case(method), method)()
                out.write("ok\\n")
            except Exception as exc:
                kind = "FAIL" if isinstance(exc, AssertionError) else "ERROR"
                out.write(kind + "\\n")
                blocks.append(f"{'=' * 70}\\n{kind}: {label}\\n{'-' * 70}\\n{traceback.format_exc()}")
out.write("\\n" + "\\n".join(blocks) + f"\\n{'-' * 70}\\nRan {ran} tests in 0.001s\\n\\n")
out.write(f"FAILED (failures={len(blocks)})\\n" if blocks else "OK\\n")
sys.exit(1 if blocks else 0)
'''
DJANGO_TESTS = '''\
import sys
from unittest import TestCase

from calc import add


class CalcTests(TestCase):
    def test_add(self):
        sys.stderr.write("add() called with ünïcode on the way\\n")  # output between "..." and "ok"
        self.assertEqual(add(2, 3), 5)

    def test_naïve(self):
        self.assertEqual(len("naïve"), 5)
'''


def _django_instances(root: Path) -> Path:
    """root/instances.jsonl and root/repos/django__django: a repository with django's runner layout (a fake
    tests/runtests.py, tests/test_sqlite.py, a test package) whose sub() is wrong."""
    repo = root / "repos" / "django__django"
    (repo / "tests" / "calc_tests").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "runtests.py").write_text(RUNTESTS)
    (repo / "tests" / "test_sqlite.py").write_text("DATABASES = {'default': {'ENGINE': 'sqlite3'}}\n")
    (repo / "tests" / "calc_tests" / "__init__.py").write_text("")
    (repo / "tests" / "calc_tests" / "tests.py").write_text(DJANGO_TESTS)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    test_patch = _diff(repo, "tests/calc_tests/tests.py", DJANGO_TESTS + "\n    def test_sub(self):\n"
                                                                         "        from calc import sub\n"
                                                                         "        self.assertEqual(sub(5, 3), 2)\n")
    gold = _diff(repo, "calc.py", CALC.replace("def sub(a, b):\n    return a + b", "def sub(a, b):\n    return a - b"))
    wrong = _diff(repo, "calc.py", CALC.replace("def add(a, b):\n    return a + b", "def add(a, b):\n    return 0"))
    label = "(calc_tests.tests.CalcTests)"
    instance = {"repo": "django/django", "version": "3.0", "base_commit": base, "test_patch": test_patch,
                "problem_statement": "sub(5, 3) returns 8; it should subtract.",
                "FAIL_TO_PASS": json.dumps([f"test_sub {label}"]),
                "PASS_TO_PASS": json.dumps([f"test_add {label}", f"test_naïve {label}"])}
    path = root / "instances.jsonl"
    path.write_text("".join(json.dumps({**instance, "instance_id": key, "model_patch": patch}) + "\n" for key, patch
                            in (("gold", gold), ("wrong", wrong), ("empty", "diff --git a/x b/x\n"))))
    return path


def test_a_django_style_instance_runs_its_runner_and_is_graded_by_its_log(tmp_path: Path) -> None:
    assert shutil.which("bwrap"), "bubblewrap is not installed: run scripts/test.sh"
    path = _django_instances(tmp_path)
    record = load_dataset(f"swebench://{path}").records[0]
    files = from_value(record.metadata["environment"])["files"]
    # SWE-bench's django command on the test patch's dotted module
    assert json.loads(files[".swebench/spec.json"]) == {
        "test_command": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
        "log_parser": "django", "directives": ["calc_tests.tests"]}
    assert from_value(record.metadata["swebench"])["spec"] == {
        "python": "3.6", "install": "python -m pip install -e .", "pre_install": [],
        "test_command": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
        "log_parser": "django"}
    spec = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "swebench-django"}, "spec": {
        "target": {"agent": {"cli": {"command": ["python3", ".swebench/swebench.py", "apply", ".swebench/model.patch"],
                                     "timeout": "60s"}}},
        "dataset": {"path": "instances.jsonl", "format": "swebench"},
        "evaluators": [{"ref": "builtin/task-success"}]}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "run.json"
    done = CliRunner().invoke(cli, ["run", "-f", str(tmp_path / "run.yaml"), "--output", str(out)])
    assert done.exit_code == 0, done.output
    verdicts = {r["recordId"]: r["scores"][0] for r in json.loads(out.read_text())["results"]}
    reasons = {key: score.get("explanation", "") for key, score in verdicts.items()}
    assert {key: score.get("passed", False) for key, score in verdicts.items()} == {
        "gold": True, "wrong": False, "empty": False}, reasons
    assert reasons["gold"].startswith("FAIL_TO_PASS 1/1, PASS_TO_PASS 2/2"), reasons
    # the wrong patch breaks add(); the unicode-named test still passes
    assert reasons["wrong"].startswith("FAIL_TO_PASS 0/1, PASS_TO_PASS 1/2; failing: test_sub (calc_tests.tests."
                                       "CalcTests), test_add (calc_tests.tests.CalcTests)"), reasons
    assert reasons["empty"].startswith("FAIL_TO_PASS 0/1, PASS_TO_PASS 2/2; failing: test_sub"), reasons


def _oldest_python() -> str | None:
    """A Python 3.6 here, the oldest a SWE-bench image's environment runs the checker with (django 3.x's)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    installed = next((str(path) for path in sorted(pyenv.glob("versions/3.6*/bin/python3.6"))), None)
    found = shutil.which("python3.6")
    return installed or (found if found and "/shims/" not in found else None)  # a pyenv shim may lead nowhere


def test_the_checker_runs_on_the_oldest_python_of_swebench_environments(tmp_path: Path) -> None:
    python = _oldest_python()
    if python is None:
        pytest.skip("no Python 3.6 on this machine (the shipped modules' 3.6 syntax is checked in test_swebench_specs)")
    records = {r.id: r for r in load_dataset(f"swebench://{_django_instances(tmp_path)}")}
    verdicts = {}
    for key in ("gold", "wrong"):
        workspace = tmp_path / key
        for name, text in from_value(records[key].metadata["environment"])["files"].items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text, encoding="utf-8")
        env = {"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8"}  # django's harness sets a UTF-8 locale
        subprocess.run([python, ".swebench/swebench.py", "apply", ".swebench/model.patch"], cwd=workspace, env=env,
                       check=True)
        done = subprocess.run([python, ".swebench/swebench.py", "check"], cwd=workspace, env=env,
                              capture_output=True, text=True, check=True)
        verdicts[key] = json.loads(done.stdout)
    assert verdicts["gold"] == {"success": True, "reason": "FAIL_TO_PASS 1/1, PASS_TO_PASS 2/2", "score": 1.0}
    assert verdicts["wrong"]["success"] is False
    assert verdicts["wrong"]["reason"].startswith("FAIL_TO_PASS 0/1, PASS_TO_PASS 1/2"), verdicts
