"""Failures a new user must see (issue 12): errors by kind with their first cause under the table and in JSON, exit 1
when a metric measured nothing but infrastructure errors (``--allow-errors`` accepts it), a judge evaluator without a
judge refused before anything runs, unparseable judge answers counted as evaluator errors, and ``--cluster-by`` keys
checked against the records. Driven through the CLI against a local OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.testing.threaded import ThreadedProvider

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "qa.jsonl"
ROWS = [
    {"id": "a", "input": "Capital of France?", "output": "Paris", "reference": "Paris", "topic": "geo"},
    {"id": "b", "input": "Capital of Italy?", "output": "Milan", "reference": "Rome", "topic": "geo"},
    {"id": "c", "input": "12 * 12?", "output": "144", "reference": "144"},
]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


@pytest.fixture
def refusing_judge() -> Iterator[Any]:
    """A judge endpoint that refuses every call (401, which retrying cannot fix): every judged record is an
    infrastructure error, at once."""
    with ThreadedProvider(lambda _body: ("status", 401)) as server:
        yield server


@pytest.fixture
def rambling_judge() -> Iterator[Any]:
    """A judge that answers, but never with a score."""
    with ThreadedProvider(lambda _body: "I would rate this highly.") as server:
        yield server


def judge_flags(server: Any) -> list[str]:
    return ["--judge-model", "judge-1", "--judge-base-url", server.base_url]


def summary(document: dict[str, Any], metric: str) -> dict[str, Any]:
    return next(s for s in document["summaries"] if s["metric"] == metric)


# --- a judge down: errors by kind, the first cause, exit 1 --------------------------------------------------------


def test_a_metric_of_nothing_but_infra_errors_exits_1_naming_it_and_the_cause(data: Path, refusing_judge: Any) -> None:
    args = ["eval", "--data", str(data), "-e", "llm-judge,exact-match", *judge_flags(refusing_judge)]
    code, out, err = run(*args, "--format", "json")
    assert code == 1
    document = json.loads(out)
    [tally] = summary(document, "llm-judge")["errorKinds"]
    reason = tally["firstReason"]
    assert tally["kind"] == "ERROR_KIND_INFRA" and tally["count"] == "3"
    assert reason.startswith("openai judge-1: ") and "401" in reason
    assert "errorKinds" not in summary(document, "exact-match")
    assert err == (
        f"error: metric llm-judge: every evaluation (3) is an infrastructure error; the first: {reason}\n"
        "(exit 1: nothing was measured; --allow-errors accepts it and exits 0)\n"
    )

    code, out, err = run(*args)
    assert code == 1
    [row] = [line for line in out.splitlines() if line.startswith("│ llm-judge ")]
    assert row.split("│")[2:] == [" 0 ", "     — ", "              — ", "       0 ", " 3 (3 infra) ", ""]
    note = f"errors (excluded from the metrics):\n  llm-judge: 3 infra errors, the first: {reason}"
    assert out.rstrip().endswith(note)

    code, out, err = run(*args, "--allow-errors", "--format", "md")
    assert code == 0 and err == ""
    assert "| llm-judge | 0 | — | — | 0 | 3 (3 infra) |" in out
    assert out.endswith(f"**Errors** (excluded from the metrics)\n\n- llm-judge: 3 infra errors, the first: {reason}\n")


def test_a_judge_evaluator_without_a_judge_is_refused_before_anything_runs(tmp_path: Path) -> None:
    saved = tmp_path / "r.json"
    code, out, err = run("eval", "--data", str(QUICKSTART), "-e", "exact-match,llm-judge", "-o", str(saved))
    assert code == 2 and out == ""
    assert err == (
        "error: evaluator llm-judge needs a judge and none is configured: give one with --judge-model MODEL "
        "(--judge-base-url URL for a local or other OpenAI-compatible server), or judge= in evaluate(); on a server, "
        "a run's judges are spec.judges, which name the server's evalsi.yaml `judges:` entries "
        "(spec.judges.<name>.connection)\n"
    )
    assert not saved.exists()


def test_unparseable_judge_answers_are_evaluator_errors_never_zeros(data: Path, rambling_judge: Any) -> None:
    args = ["eval", "--data", str(data), "-e", "llm-judge", *judge_flags(rambling_judge)]
    code, out, err = run(*args, "--format", "json")
    assert code == 0, err  # evaluator errors are the judge's answers, not an outage: shown, not exit 1
    judged = summary(json.loads(out), "llm-judge")
    assert "mean" not in judged and judged.get("n", "0") == "0"  # never a silent 0.0
    reason = ("UnparseableAnswer: no JSON object with a score and no 'Score:' line; the answer began: "
              "'I would rate this highly.'")
    assert judged["errorKinds"] == [{"kind": "ERROR_KIND_EVALUATOR", "count": "3", "firstReason": reason}]
    code, out, _ = run(*args)
    assert "3 (3 evaluator)" in out and f"llm-judge: 3 evaluator errors, the first: {reason}" in out


# --- --cluster-by -----------------------------------------------------------------------------------------------


def test_a_cluster_key_no_record_has_is_exit_2_with_the_keys_they_have() -> None:
    code, out, err = run("eval", "--data", str(QUICKSTART), "-e", "exact-match", "--cluster-by", "topik")
    assert code == 2 and out == ""
    assert err == (
        "error: --cluster-by 'topik': no record has this metadata key (did you mean 'topic'?); "
        "the records' metadata keys: topic\n"
    )


def test_a_cluster_key_some_records_lack_is_a_warning_with_the_count(data: Path) -> None:
    code, out, err = run("eval", "--data", str(data), "-e", "exact-match", "--cluster-by", "topic", "--format", "json")
    assert code == 0
    assert err == (
        "warning: --cluster-by 'topic': 1 of 3 records lack this metadata key; each of them is a cluster of its own\n"
    )
    assert summary(json.loads(out), "exact-match")["clusters"] == "2"


def spec_file(tmp_path: Path, data: Path, *extra: str) -> Path:
    spec = tmp_path / "run.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: failures}\nspec:\n"
        f"  dataset: {{path: {data.name}}}\n" + "".join(line + "\n" for line in extra)
    )
    return spec


def test_a_spec_cluster_key_no_record_has_is_exit_2_naming_the_field(tmp_path: Path, data: Path) -> None:
    spec = spec_file(tmp_path, data, "  evaluators: [{ref: builtin/exact-match}]", "  summary: {clusterBy: topc}")
    code, out, err = run("run", "-f", str(spec))
    assert code == 2 and out == ""
    assert err == (
        f"error: {spec}: spec.summary.clusterBy 'topc': no record has this metadata key (did you mean 'topic'?); "
        "the records' metadata keys: topic\n"
    )


def test_evalsi_run_of_a_judge_that_is_down_exits_1_whatever_the_gates_say(
    tmp_path: Path, data: Path, refusing_judge: Any
) -> None:
    spec = spec_file(
        tmp_path, data,
        "  evaluators: [{ref: builtin/exact-match}, {ref: builtin/llm-judge}]",
        f"  judges: {{default: {{model: judge-1, baseUrl: '{refusing_judge.base_url}'}}}}",
        "  gates: [\"metric('exact-match').mean >= 0.5\"]",
    )
    code, out, err = run("run", "-f", str(spec))
    assert code == 1
    assert err.startswith("error: metric llm-judge: every evaluation (3) is an infrastructure error; the first: "
                          "openai judge-1: ")
    assert "  ✓ metric('exact-match').mean >= 0.5" in out and "llm-judge: 3 infra errors, the first: " in out
    code, _, err = run("run", "-f", str(spec), "--allow-errors")
    assert code == 0 and err == ""


# --- --progress without a terminal ------------------------------------------------------------------------------


def test_progress_without_a_terminal_prints_plain_lines() -> None:
    code, _, err = run("eval", "--data", str(QUICKSTART), "-e", "exact-match", "--progress")
    assert code == 0
    [line] = err.splitlines()
    assert line.startswith("evaluated 30/30 in ") and line.endswith("s")
    code, _, err = run("eval", "--data", str(QUICKSTART), "-e", "exact-match")
    assert code == 0 and err == ""  # not a terminal, not asked: nothing


def test_a_misspelled_evaluator_is_suggested_once_not_under_both_its_names() -> None:
    code, out, err = run("eval", "--data", str(QUICKSTART), "-e", "exact-mach")
    assert code == 2 and out == ""
    assert err.startswith("error: unknown evaluator 'exact-mach'; did you mean exact-match or ")
    assert err.count("exact-match") == 1 and "builtin/" not in err


def test_a_spec_judge_evaluator_without_its_judge_is_exit_2_naming_the_keys(tmp_path: Path, data: Path) -> None:
    spec = spec_file(tmp_path, data, "  evaluators: [{ref: builtin/llm-judge}]")
    code, out, err = run("run", "-f", str(spec))
    assert code == 2 and out == ""
    assert err == (
        f"error: {spec}: spec.evaluators[0] (llm-judge): needs a judge and uses 'default', which spec.judges does "
        "not define (defined: none); define spec.judges.default: a model (model, baseUrl), or on a server "
        "connection: naming an entry of its evalsi.yaml `judges:`\n"
    )


# --- an evaluator that skipped everything says why under the table ------------------------------------------------


def test_an_evaluator_that_skipped_everything_says_why_under_the_table(tmp_path: Path) -> None:
    # A CSV whose label and prediction columns are not mapped: the dataset-scope metric skips as one result, and
    # the table alone would say only "skipped 1".
    path = tmp_path / "churn.csv"
    path.write_text("id,label,pred\n1,yes,yes\n2,no,yes\n")
    code, out, _ = run("eval", "--data", str(path), "-e", "classification,exact-match", "--map", "output=pred")
    assert code == 0
    notes = out.split("measured nothing:\n", 1)[1].splitlines()
    assert notes == [
        "  classification: nothing scored (1 skipped), the first because: no record had a class label in its "
        "reference and a predicted class in its output",
        "  exact-match: nothing scored (2 skipped), the first because: missing reference",
    ]
    code, out, _ = run("eval", "--data", str(path), "-e", "classification", "--map", "output=pred",
                       "--map", "reference=label", "--format", "md")
    assert code == 0 and "Measured nothing" not in out  # scored: no note
    code, out, _ = run("eval", "--data", str(path), "-e", "classification", "--format", "md")
    assert "**Measured nothing**\n\n- classification: nothing scored (1 skipped)" in out
