"""Every problem of a spec in one pass: structure (unknown and mistyped fields, each with its file and line) and,
where the caller can check them, everything else; for run specs and policies."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.documents import SpecProblems, problems_of
from evalsi.errors import BadInputError
from evalsi.policy import parse_policy_text
from evalsi.runs.spec import parse_eval_run_text

OUTPUTS = Path(__file__).resolve().parents[2] / "examples" / "runs" / "qa-outputs.yaml"

RUN = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata:
  name: demo
spec:
  dataset: {path: data.jsonl}
  evaluators:
    - ref: builtin/exact-match
      parms: {x: 1}
    - ref: builtin/fuzzy-match
  trials: five
  budget: {wallClock: soon}
  gates: ["metric('exact-match').mean >= 0.5"]
"""


def test_every_structural_problem_of_a_run_spec_is_listed_with_its_line() -> None:
    with pytest.raises(SpecProblems) as info:
        parse_eval_run_text(RUN, source="run.yaml")
    assert str(info.value) == (
        "3 problems in the run spec:\n"
        "  - run.yaml:9: spec.evaluators[0].parms: unknown field; did you mean params?\n"
        "  - run.yaml:11: spec.trials: must be an integer, got a string 'five'\n"
        "  - run.yaml:12: spec.budget.wallClock: expected a duration like 30s, 10m, 1h30m or 250ms (or a number of "
        "seconds), got 'soon'"
    )
    assert len(problems_of(info.value)) == 3


def test_one_structural_problem_reads_as_before() -> None:
    with pytest.raises(BadInputError) as info:
        parse_eval_run_text(RUN.replace("      parms: {x: 1}\n", "").replace("five", "3").replace("soon", "1m")
                            .replace("apiVersion: evals.si/v1alpha1", "apiVersion: v2"), source="run.yaml")
    assert str(info.value) == "run.yaml:1: apiVersion: must be evals.si/v1alpha1 (got 'v2')"


POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: p}
spec:
  selector: 'span.type == "agent"'
  sampling: {rtae: 0.5, always: [trace.error]}
  cascade:
    - {ref: test/pii-leak, alais: pii}
  window: later
"""


def test_every_structural_problem_of_a_policy_is_listed_with_its_line() -> None:
    with pytest.raises(SpecProblems) as info:
        parse_policy_text(POLICY, source="policy.yaml")
    lines = str(info.value).splitlines()
    assert lines[0] == "3 problems in the policy:"
    assert lines[1] == "  - policy.yaml:6: spec.sampling.rtae: unknown field; did you mean rate?"
    assert lines[2] == "  - policy.yaml:8: spec.cascade[0].alais: unknown field; did you mean alias?"
    assert lines[3].startswith("  - policy.yaml:9: spec.window: expected a duration") and "got 'later'" in lines[3]


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


BROKEN = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata: {name: broken}
spec:
  dataset: {path: qa.jsonl}
  trials: one
  evaluators:
    - ref: builtin/exact-match
    - reff: builtin/numeric-match
    - ref: builtin/latensy
  gates:
    - "metric('exact-match').n >= 0.5"
    - "metric('exact-match').mean == 'high'"
"""


def test_evalsi_run_lists_a_specs_every_problem_in_one_pass_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "qa.jsonl").write_text('{"id": "a", "output": "x", "reference": "x"}\n')
    spec = tmp_path / "run.yaml"
    spec.write_text(BROKEN)
    code, out, err = run_cli("-f", str(spec))
    assert code == 2 and out == ""
    # The structure's problems and the rest's, each with its line; nothing repeated about the misspelt
    # evaluator (its missing ref), and the gate comparing a count with a fraction is valid.
    lines = err.strip().splitlines()
    assert lines[:3] == [
        "error: 4 problems in the run spec:",
        f"  - {spec}:6: spec.trials: must be an integer, got a string 'one'",
        f"  - {spec}:9: spec.evaluators[1].reff: unknown field; did you mean ref?",
    ]
    assert lines[3].startswith(  # the registry's suggestions follow the first
        f"  - {spec}:10: spec.evaluators[2] (builtin/latensy): unknown evaluator 'builtin/latensy'; did you mean "
        "builtin/latency"
    )
    assert lines[4:] == [
        f"  - {spec}:13: spec.gates[1]: == compares double with string, which are never equal "
        "(in \"metric('exact-match').mean == 'high'\" at column 28)",
    ]


def test_a_gate_comparing_a_count_with_a_fraction_runs_and_passes(tmp_path: Path) -> None:
    code, out, err = run_cli("-f", str(OUTPUTS), "--set", "spec.gates.2=metric('exact-match').n >= 0.5")
    assert code == 0, err
    assert "✓ metric('exact-match').n >= 0.5  (metric('exact-match').n = 30 >= 0.5)" in out
