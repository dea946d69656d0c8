"""Inspect logs imported as records (contract tests with inspect_ai installed, offline): a real eval's log, read
back by Inspect itself, against the records the import writes, field by field; the records graded by `evalsi eval`
with trials as pass@k; two imported logs compared; damaged logs refused naming the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog, EvalSample, read_eval_log, write_eval_log
from inspect_ai.model import ChatMessage, ModelOutput
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import Tool, tool
from inspect_tasks import ANSWERS_B, run_task, text_answers, with_usage

import evalsi
from evalsi.adapters.inspect import log_rows, logs, read_header
from evalsi.cli.main import cli
from evalsi.errors import BadInputError


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(row["id"], row["trial"]): row for row in rows}


def _expected_reference(sample: EvalSample) -> Any:
    return sample.target if isinstance(sample.target, str) else list(sample.target)


def test_every_sample_and_epoch_becomes_one_record_field_by_field(capitals_log: EvalLog) -> None:
    log = read_eval_log(capitals_log.location)
    assert log.status == "success" and log.samples is not None and len(log.samples) == 9
    rows = list(log_rows(capitals_log.location))
    by_key = _by_key(rows)
    assert len(rows) == len(by_key) == 9  # one record per (sample, epoch), none repeated
    assert list(log_rows(capitals_log.location, limit=4)) == rows[:4]
    for sample in log.samples:
        row = by_key[(str(sample.id), sample.epoch - 1)]
        assert row["input"] == {"messages": [{"role": "system", "content": "Answer briefly."},
                                             {"role": "user", "content": sample.input}]}
        assert row["output"] == sample.output.completion and row["output"]
        assert "trajectory" not in row  # no tool was called
        assert row["reference"] == _expected_reference(sample)
        metadata = row["metadata"]
        for key, value in sample.metadata.items():
            assert metadata[key] == value
        assert metadata["inspect.task"] == "capitals" and metadata["inspect.model"] == "mockllm/model"
        assert metadata["inspect.sample_id"] == sample.id  # the int id 2 stays an int here; the record's id is "2"
        assert metadata["inspect.epoch"] == sample.epoch
        assert sample.scores is not None
        assert metadata["inspect.exact"] == sample.scores["exact"].value
        assert metadata["inspect.includes"] == sample.scores["includes"].value
        usage = sample.model_usage["mockllm/model"]
        assert row["usage"] == {
            "input_tokens": usage.input_tokens, "output_tokens": 3, "total_tokens": usage.input_tokens + 3,
            "cached_input_tokens": 1, "cost_usd": pytest.approx(0.003), "latency_s": sample.working_time,
        }
    header = read_header(capitals_log.location)
    assert (header.task, header.model, header.status, header.epochs, header.samples) == (
        "capitals", "mockllm/model", "success", 3, 3)


def test_a_json_log_imports_the_same_records_as_its_eval_log(capitals_log: EvalLog, tmp_path: Path) -> None:
    as_json = tmp_path / "capitals.json"
    write_eval_log(read_eval_log(capitals_log.location), str(as_json), format="json")
    assert list(log_rows(as_json)) == list(log_rows(capitals_log.location))


def test_imported_records_grade_with_intervals_and_epochs_as_trials(capitals_log: EvalLog, tmp_path: Path) -> None:
    out = tmp_path / "capitals.jsonl"
    code, _, err = _cli("import", "inspect", capitals_log.location, "--out", str(out))
    assert code == 0, err
    assert "imported 9 records" in err and "3 samples x 3 epochs" in err
    code, stdout, err = _cli("eval", "--data", str(out), "-e", "exact-match", "--format", "json")
    assert code == 0, err
    summaries = {s["metric"]: s for s in json.loads(stdout)["summaries"]}
    log = read_eval_log(capitals_log.location)
    assert log.samples is not None
    right = [s.output.completion in ([s.target] if isinstance(s.target, str) else s.target) for s in log.samples]
    graded = summaries["exact-match"]
    assert graded["n"] == "9" and graded["mean"] == pytest.approx(sum(right) / 9)
    assert graded["ci"]["low"] < graded["mean"] < graded["ci"]["high"]
    # Each sample's three epochs are its trials: pass@3 is over the 3 samples (every one right at least once).
    assert summaries["exact-match.pass@3"]["n"] == "3"
    assert summaries["exact-match.pass@3"]["mean"] == pytest.approx(1.0)


def test_two_imported_logs_compare_record_by_record(capitals_log: EvalLog, tmp_path: Path) -> None:
    better = run_task(tmp_path / "logs-b", text_answers(ANSWERS_B))
    results = []
    for name, log in (("a", capitals_log), ("b", better)):
        records, result = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
        assert _cli("import", "inspect", log.location, "-o", str(records))[0] == 0
        code, _, err = _cli("eval", "--data", str(records), "-e", "exact-match", "--output", str(result))
        assert code == 0, err
        results.append(str(result))
    code, stdout, err = _cli("compare", *results, "--format", "json")
    assert code == 0, err  # B is no worse
    (metric,) = [m for m in json.loads(stdout)["metrics"] if m["metric"] == "exact-match"]
    # Paired over the same 3 samples x 3 epochs: A got 5 of 9 right (Lyon, 5 and Milan wrong, Paris. unequal), B 8.
    assert metric["nPairs"] == "9" and metric["test"] == "cluster-paired-t"  # epochs are trials of one sample
    assert metric["meanA"] == pytest.approx(5 / 9) and metric["meanB"] == pytest.approx(8 / 9)
    assert metric["diff"] == pytest.approx(3 / 9)


@tool
def add() -> Tool:
    async def execute(x: int, y: int) -> int:
        """Add two numbers.

        Args:
            x: The first number.
            y: The second number.
        """
        return x + y

    return execute


def test_a_sample_with_tool_calls_keeps_its_generated_messages(tmp_path: Path) -> None:
    def answer(messages: list[ChatMessage], call: int) -> ModelOutput:
        if messages[-1].role == "tool":
            return with_usage(ModelOutput.from_content("mockllm/model", f"The sum is {messages[-1].text}"), 30, 4)
        return with_usage(ModelOutput.for_tool_call("mockllm/model", "add", {"x": 2, "y": 3}, tool_call_id="c1"), 20, 5)

    samples = [Sample(input="What is 2 plus 3?", target="5", id="sum")]
    log = run_task(tmp_path, answer, samples=samples, solver=[use_tools([add()]), generate()], epochs=1,
                   scorers=[includes()])
    (row,) = log_rows(log.location)
    (sample,) = read_eval_log(log.location).samples or ()
    assert row["input"] == {"messages": [{"role": "user", "content": "What is 2 plus 3?"}]}
    calling = sample.messages[1].text  # what mockllm says beside a tool call
    assert row["output"] == {"messages": [
        {"role": "assistant", "content": calling,
         "tool_calls": [{"id": "c1", "name": "add", "arguments": {"x": 2, "y": 3}}]},
        {"role": "tool", "content": "5", "tool_call_id": "c1", "name": "add"},
        {"role": "assistant", "content": "The sum is 5"},
    ]}
    steps = row["trajectory"]["steps"]
    assert [step["type"] for step in steps] == ["STEP_TYPE_LLM", "STEP_TYPE_TOOL", "STEP_TYPE_LLM"]
    assert steps[1]["toolCall"] == {"id": "c1", "name": "add", "arguments": {"x": 2, "y": 3}, "result": "5",
                                    "status": "TOOL_CALL_STATUS_OK"}
    agent = evalsi.evaluate([row], [{"ref": "tool-call-accuracy", "params": {"expected": [
        {"name": "add", "arguments": {"x": 2, "y": 3}}]}}])
    assert agent.metric("tool-call-accuracy.exact").mean == 1.0  # the agent pack grades the imported steps
    # Both generations count: the sample's usage, not its last call's.
    assert row["usage"]["input_tokens"] == 50 and row["usage"]["output_tokens"] == 9
    results = evalsi.evaluate([row], ["regex-match"], params={"regex-match": {"pattern": "sum is 5$"}})
    assert results.metric("regex-match").mean == 1.0  # graded on the final answer


def test_a_sample_that_errored_is_imported_without_output_and_skipped(tmp_path: Path) -> None:
    def answer(messages: list[ChatMessage], call: int) -> ModelOutput:
        if "Italy" in messages[-1].text:
            raise RuntimeError("provider down")
        return ModelOutput.from_content("mockllm/model", "Paris")

    samples = [Sample(input="Capital of France?", target="Paris", id="fr"),
               Sample(input="Capital of Italy?", target="Rome", id="it")]
    log = run_task(tmp_path, answer, samples=samples, epochs=1)
    assert log.status == "error"  # the eval failed on that sample: its log still holds every sample
    by_id = {row["id"]: row for row in log_rows(log.location)}
    assert "output" not in by_id["it"] and "provider down" in by_id["it"]["metadata"]["inspect.error"]
    assert by_id["fr"]["output"] == "Paris" and "inspect.error" not in by_id["fr"]["metadata"]
    results = evalsi.evaluate(list(by_id.values()), ["exact-match"])
    summary = results.metric("exact-match")
    assert (summary.n, summary.skipped, summary.mean) == (1, 1, 1.0)  # skipped, never counted as wrong
    code, _, err = _cli("import", "inspect", log.location, "-o", str(tmp_path / "records.jsonl"))
    assert code == 0 and "the log's status is error: imported the samples it holds" in err
    assert "1 samples stopped on an error or a limit" in err


def _damaged_logs(good: Path, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    data = good.read_bytes()
    cut = tmp_path / "cut.eval"
    cut.write_bytes(data[: len(data) // 2])
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"version": 2, "status": "success", "eval": ')
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"version": 2, "status": "success", "eval": {"task": 5}}))
    other = tmp_path / "records.jsonl"
    other.write_text("{}\n")
    return {
        "truncated": (cut, "truncated or damaged"),
        "bad json": (bad_json, "premature EOF"),
        "invalid fields": (wrong, "validation error"),
        "not a log": (other, "give a .eval or .json log file"),
        "missing": (tmp_path / "absent.eval", "no such file"),
    }


def test_damaged_logs_are_refused_naming_the_file_and_the_problem(capitals_log: EvalLog, tmp_path: Path) -> None:
    for case, (path, problem) in _damaged_logs(Path(capitals_log.location), tmp_path).items():
        with pytest.raises(BadInputError) as caught:
            list(log_rows(path))
        assert str(caught.value).startswith(f"{path}: "), case
        assert problem in str(caught.value), (case, str(caught.value))
        out = tmp_path / f"{path.stem}-records.jsonl"
        code, _, err = _cli("import", "inspect", str(path), "-o", str(out))
        assert code == 2 and str(path) in err and problem in err, (case, err)
        assert not out.exists() and not list(tmp_path.glob(f".{out.name}.*"))  # nothing half-written left


def test_a_json_log_over_the_size_bound_is_refused_with_the_way_out(
    capitals_log: EvalLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_json = tmp_path / "big.json"
    write_eval_log(read_eval_log(capitals_log.location), str(as_json), format="json")
    monkeypatch.setattr(logs, "MAX_JSON_LOG_BYTES", as_json.stat().st_size - 1)
    with pytest.raises(BadInputError, match=r"big\.json: a \.json log of \d+ bytes is over .*inspect log convert"):
        list(log_rows(as_json))


def test_without_inspect_ai_the_import_says_how_to_install_it(tmp_path: Path) -> None:
    script = ("import sys; sys.modules['inspect_ai'] = None; from evalsi.cli.main import main; "
              "sys.argv = ['evalsi', 'import', 'inspect', 'run.eval']; main()")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert "inspect_ai, which is not installed: pip install 'evalsi[inspect]'" in done.stderr


def test_an_out_file_in_a_missing_directory_is_refused(capitals_log: EvalLog, tmp_path: Path) -> None:
    code, _, err = _cli("import", "inspect", capitals_log.location, "--out", str(tmp_path / "absent" / "r.jsonl"))
    assert code == 2 and f"the directory {tmp_path / 'absent'} does not exist" in err


def test_importing_evalsi_does_not_import_inspect_ai() -> None:
    script = ("import sys, evalsi, evalsi.cli.main; evalsi.evaluate; from evalsi.cli import import_cmd; "
              "assert 'inspect_ai' not in sys.modules, 'inspect_ai imported'")
    subprocess.run([sys.executable, "-c", script], check=True)
