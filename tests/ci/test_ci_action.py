"""action.yml and the Dockerfile's ci stage, checked against ``evalsi ci run`` itself: every input used, every
flag the action passes a flag the command has, and the action's main step run as GitHub runs it (bash -eo
pipefail, inputs through the step's env), with the real evalsi."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from ci_env import CI_VARIABLES
from click.testing import CliRunner

from evalsi.cli.ci_cmd import ci_run_command
from evalsi.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS: list[dict[str, Any]] = ACTION["runs"]["steps"]
_INPUT = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def step(id_: str) -> dict[str, Any]:
    (found,) = [s for s in STEPS if s.get("id") == id_]
    return found


def command_flags() -> set[str]:
    return {opt for param in ci_run_command.params if isinstance(param, click.Option)
            for opt in (*param.opts, *param.secondary_opts)}


def test_the_action_is_composite_and_uses_only_official_actions() -> None:
    assert ACTION["runs"]["using"] == "composite"
    used = [s["uses"] for s in STEPS if "uses" in s]
    assert used == ["actions/setup-python@v5", "actions/upload-artifact@v4"]
    upload = next(s for s in STEPS if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "${{ inputs.output-dir }}" and upload["if"].startswith("always()")
    assert step("evalsi")["shell"] == "bash"


def test_every_input_is_used_and_every_expression_names_a_real_input() -> None:
    text = json.dumps(STEPS)
    declared = set(ACTION["inputs"])
    named = set(_INPUT.findall(text))
    assert declared == named, f"unused inputs {declared - named}, undeclared {named - declared}"
    for output in ACTION["outputs"].values():
        assert output["value"].startswith("${{ steps.evalsi.outputs.")


def test_no_expression_is_pasted_into_a_script() -> None:
    # ${{ }} in a run: script is text substitution: a gate or branch name could inject shell. Inputs go by env.
    for s in STEPS:
        assert "${{" not in s.get("run", ""), f"step {s.get('name')!r} pastes an expression into its script"


def test_every_flag_the_action_passes_is_a_flag_of_evalsi_ci_run() -> None:
    script = step("evalsi")["run"]
    assert 'evalsi "${args[@]}"' in script and "args=(ci run " in script
    passed = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", script))
    assert passed, "the step passes no flags"
    unknown = passed - command_flags()
    assert not unknown, f"action.yml passes {unknown}, which `evalsi ci run` does not take"
    # The inputs that select the suite reach the flags that do.
    for flag in ("--spec", "--data", "--evaluators", "--gate", "--baseline", "--server", "--project",
                 "--output-dir", "--no-comment", "--fail-on-regression", "--name"):
        assert flag in passed, f"no input reaches {flag}"


def _step_env(values: dict[str, str], found_baseline: str = "") -> dict[str, str]:
    """The step's env as GitHub evaluates it: inputs (given, else their defaults), the base step's output."""
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs.update(values)

    def evaluate(expression: str) -> str:
        match = _EXPRESSION.fullmatch(expression)
        assert match, f"an env value that is not one expression: {expression!r}"
        name = match.group(1)
        if name.startswith("inputs."):
            return inputs[name.removeprefix("inputs.")]
        assert name == "steps.base.outputs.path", name
        return found_baseline

    return {key: evaluate(str(value)) for key, value in step("evalsi")["env"].items()}


def _run_step(tmp_path: Path, values: dict[str, str], found_baseline: str = "") -> tuple[int, dict[str, str], str]:
    output = tmp_path / "github_output"
    output.touch()
    env = {key: value for key, value in os.environ.items() if key not in CI_VARIABLES}
    env.update(_step_env(values, found_baseline))
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", GITHUB_OUTPUT=str(output))
    script = tmp_path / "step.sh"
    script.write_text(step("evalsi")["run"])
    # What `shell: bash` runs on GitHub's runners.
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if line)
    return done.returncode, outputs, done.stdout + done.stderr


def test_the_main_step_runs_the_suite_and_keeps_its_exit_code_for_the_last_step(tmp_path: Path) -> None:
    data = ROOT / "examples/quickstart/qa.jsonl"
    gates = "metric('exact-match').mean >= 0.5\n\nmetric('exact-match').mean >= 0.9\n"
    code, outputs, said = _run_step(tmp_path, {"data": str(data), "evaluators": "exact-match", "gates": gates,
                                               "comment": "false", "github-token": "ghs_unused"})
    assert code == 0, said  # the step itself succeeds, so the upload runs; the last step exits with the code
    assert outputs == {"exit-code": "3", "report": "evalsi-ci/report.html"}, said
    saved = json.loads((tmp_path / "evalsi-ci" / "results.json").read_text())
    assert [g.get("passed", False) for g in saved["gates"]] == [True, False]  # JSON omits a false
    assert (tmp_path / "evalsi-ci" / "report.html").is_file()

    last = STEPS[-1]
    assert last["env"]["CODE"] == "${{ steps.evalsi.outputs.exit-code }}" and last["run"].strip() == 'exit "$CODE"'


def test_the_found_base_artifact_is_the_baseline_unless_one_is_given(tmp_path: Path) -> None:
    env = _step_env({"data": "d.jsonl", "evaluators": "exact-match"}, found_baseline="/tmp/base/results.json")
    assert env["INPUT_FOUND_BASELINE"] == "/tmp/base/results.json" and env["INPUT_BASELINE"] == ""
    script = step("evalsi")["run"]
    assert 'baseline="${INPUT_BASELINE:-$INPUT_FOUND_BASELINE}"' in script
    base = step("base")
    assert "inputs.baseline == ''" in base["if"] and "inputs.server == ''" in base["if"]
    assert "results.json" in base["run"] and "$GITHUB_OUTPUT" in base["run"]


# --- the ci container ---------------------------------------------------------------------------------------


def _stages() -> dict[str, list[tuple[str, str]]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines()):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else f"#{number}"
            current = stages.setdefault(name, [])
        current.append((keyword.upper(), rest.strip()))
    return stages


def test_the_dockerfiles_ci_stage_runs_evalsi_ci_run() -> None:
    stages = _stages()
    assert stages["ci"][0] == ("FROM", "server AS ci")
    (entrypoint,) = [rest for keyword, rest in stages["ci"] if keyword == "ENTRYPOINT"]
    argv = json.loads(entrypoint)  # the exec form: arguments of `docker run` are appended
    assert argv == ["evalsi", "ci", "run"]
    result = CliRunner().invoke(cli, [*argv[1:], "--help"])
    assert result.exit_code == 0, result.output
    assert "--spec" in result.output and "Exit codes" in result.output
    # The default target (a plain `docker build .`, compose.yaml) stays the server image, not the ci one.
    last = list(stages)[-1]
    assert last != "ci" and stages[last][0] == ("FROM", "server")
