"""lm-eval sample logs imported without lm-eval installed (it is not in the dev environment): lines in lm-eval's
logged format (as test_lm_eval_model.py's real runs write them) become records by the documented rules; a bad line,
an oversized line, a file that is not a samples log, an ambiguous filter or directory is refused naming the file and
line, and nothing is written; ``--model_args`` and generation settings are checked as documented."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalsi.adapters.lm_eval import find_run, run_rows, samples
from evalsi.adapters.lm_eval.config import cut, generation, lm_args
from evalsi.cli.main import cli
from evalsi.errors import BadInputError

DATE = "2026-12-03T09-35-37.564067"


def _sample(doc_id: int, answer: str, *, target: str = "Paris", filter_name: str = "none", repeats: int = 1,
            filtered: Any = None, context: Any = "Q: capital of France?\nA:") -> dict[str, Any]:
    """One generate_until sample as lm-eval 0.4.13 logs it."""
    resps = [[answer] * repeats]
    return {
        "doc_id": doc_id, "doc": {"question": "capital of France?", "answer": target}, "target": target,
        "arguments": {"gen_args_0": {"arg_0": context, "arg_1": {"until": ["\n"], "do_sample": False}}},
        "resps": resps, "filtered_resps": [answer if filtered is None else filtered], "filter": filter_name,
        "metrics": ["exact_match"], "doc_hash": "d", "prompt_hash": "p", "target_hash": "t",
        "exact_match": float(answer == target),
    }


def _write(directory: Path, task: str, lines: list[Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"samples_{task}_{DATE}.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_repeats_kept_by_the_filter_are_trials_and_a_reducing_filter_keeps_the_raw_ones(tmp_path: Path) -> None:
    kept = _sample(0, "Paris", repeats=3, filter_name="take_all", filtered=["Paris", "Lyon", "Paris"])
    voted = _sample(0, "Paris", repeats=3, filter_name="maj@3")
    voted["resps"] = [["Paris", "Lyon", "Paris"]]
    default = _sample(0, "Paris", repeats=2)
    default["resps"] = [["Paris", "Nice"]]
    outputs = {}
    for name, sample in (("kept", kept), ("voted", voted), ("default", default)):
        rows = [row for _, row in run_rows(find_run(_write(tmp_path / name, "capitals", [sample])))]
        outputs[name] = [(row["trial"], row["output"]) for row in rows]
        if name == "voted":
            assert rows[0]["metadata"]["lm_eval.resps"] == [["Paris", "Lyon", "Paris"]]
    assert outputs == {"kept": [(0, "Paris"), (1, "Lyon"), (2, "Paris")], "voted": [(0, "Paris")],
                       "default": [(0, "Paris"), (1, "Nice")]}


def test_a_chat_prompt_is_its_messages(tmp_path: Path) -> None:
    chat = [json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital?"}])]
    (row,) = [row for _, row in run_rows(find_run(_write(tmp_path, "capitals", [_sample(0, "Paris", context=chat)])))]
    assert row["input"] == {"messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Capital?"}]}


def test_several_tasks_prefix_ids_and_task_picks_one(tmp_path: Path) -> None:
    output_path = tmp_path
    tmp_path = output_path / "my-model"
    _write(tmp_path, "capitals", [_sample(0, "Paris")])
    _write(tmp_path, "rivers", [_sample(0, "Seine", target="Seine")])
    (tmp_path / f"results_{DATE}.json").write_text(json.dumps({"model_name": "my-model", "config": {}}))
    rows = [row for _, row in run_rows(find_run(tmp_path))]
    assert [(row["id"], row["metadata"]["lm_eval.model"]) for row in rows] == [
        ("capitals/0", "my-model"), ("rivers/0", "my-model")]
    (row,) = [row for _, row in run_rows(find_run(tmp_path, task="rivers"))]
    assert row["id"] == "0" and row["output"] == "Seine"
    with pytest.raises(BadInputError, match=r"--task 'lakes': no samples of it; this run has capitals, rivers"):
        find_run(tmp_path, task="lakes")
    # lm-eval's --output_path holds a directory per model: the one there is found, several are refused.
    assert find_run(output_path).files == find_run(tmp_path).files
    twin = output_path / "other-model"
    _write(twin, "capitals", [_sample(0, "Paris")])
    (twin / f"results_{DATE}.json").write_text("{}")
    with pytest.raises(BadInputError, match="holds several models' runs"):
        find_run(output_path)


def test_several_filters_need_one_chosen(tmp_path: Path) -> None:
    path = _write(tmp_path, "capitals", [_sample(0, "Paris", filter_name="strict"),
                                        _sample(0, "paris", filter_name="flexible")])
    with pytest.raises(BadInputError, match=r":2: the task capitals logs several filters \(strict, flexible\)"):
        list(run_rows(find_run(path)))
    (row,) = [row for _, row in run_rows(find_run(path), filter_name="flexible")]
    assert row["output"] == "paris" and row["metadata"]["lm_eval.filter"] == "flexible"
    with pytest.raises(BadInputError, match=r"--filter 'loose': no sample of this run has it; its filters: "
                                            r"flexible, strict"):
        list(run_rows(find_run(path), filter_name="loose"))


def test_bad_files_are_refused_naming_the_file_and_line_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _sample(0, "Paris")
    cases = {
        "not json": ([good, '{"doc_id": 1,'], ":2: not JSON"),
        "not a sample": ([good, {"doc_id": "x"}], ":2: doc_id 'x' is not an integer"),
        "no arguments": ([{**good, "arguments": {}}], ":1: arguments must be lm-eval's"),
        "a list": ([[1, 2]], ":1: a list, not an lm-eval sample object"),
        "too long": ([good, {**good, "doc": {"text": "x" * 2000}}], ":2: a line over 1000 bytes"),
    }
    monkeypatch.setattr(samples, "MAX_JSONL_LINE_BYTES", 1000)
    for case, (lines, problem) in cases.items():
        path = _write(tmp_path / case.replace(" ", "-"), "capitals", lines)
        out = tmp_path / f"{case}.jsonl"
        code, _, err = _cli("import", "lm-eval", str(path), "-o", str(out))
        assert code == 2 and f"{path}{problem}" in err, (case, err)
        assert not out.exists() and not list(tmp_path.glob(f".{out.name}.*"))  # nothing half-written left
    other = tmp_path / "records.jsonl"
    other.write_text("{}\n")
    for path, problem in ((other, "not an lm-eval samples file"), (tmp_path / "absent", "no such file")):
        code, _, err = _cli("import", "lm-eval", str(path))
        assert code == 2 and f"{path}: {problem}" in err


def test_model_args_are_checked_naming_the_argument() -> None:
    args = lm_args({"model": "gpt-4o-mini", "provider": "anthropic", "base_url": "http://127.0.0.1:1",
                    "api_key_env": "MY_KEY", "price_per_1k_input": "0.5", "max_retries": 2, "batch_size": "auto"})
    assert (args.target.connector, args.target.model, args.target.api_key_env) == ("anthropic", "gpt-4o-mini",
                                                                                   "MY_KEY")
    assert dict(args.target.params) == {"price_per_1k_input": 0.5, "max_retries": 2}
    assert args.concurrency == 4 and args.usage_log == ""
    refused = {
        "unknown argument(s) api_key; accepted: provider, model": {"model": "m", "api_key": "sk-..."},
        "model= is required": {"provider": "openai"},
        "provider='vertex'; accepted: openai, openai-compatible, anthropic": {"model": "m", "provider": "vertex"},
        "concurrency=0; accepted: an integer from 1 to 64": {"model": "m", "concurrency": "0"},
        "price_per_1k_output=": {"model": "m", "price_per_1k_output": "cheap"},
    }
    for problem, given in refused.items():
        with pytest.raises(BadInputError) as caught:
            lm_args(given)
        assert problem in str(caught.value), (problem, str(caught.value))


def test_generation_settings_follow_lm_evals_conventions() -> None:
    greedy = generation({"until": ["\n", "Q:", "A:", "###", "END"], "max_new_tokens": 32, "do_sample": False},
                        "openai")
    assert greedy.params == {"temperature": 0.0, "max_tokens": 32, "stop": ["\n", "Q:", "A:", "###"]}
    assert greedy.until == ("\n", "Q:", "A:", "###", "END")  # all five cut here, OpenAI taking only four
    sampled = generation({"until": "\n\n", "do_sample": True, "temperature": 0.7, "top_p": 0.9}, "anthropic")
    assert sampled.params == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 256}  # no whitespace-only stop
    assert cut("Rome\nQ: next END", ("END", "\n")) == "Rome" and cut("Rome", ()) == "Rome"
    with pytest.raises(BadInputError, match="max_gen_toks=0; accepted: an integer from 1"):
        generation({"max_gen_toks": 0}, "openai")


def test_importing_evalsi_and_the_import_command_needs_no_lm_eval(tmp_path: Path) -> None:
    path = _write(tmp_path, "capitals", [_sample(0, "Paris")])
    script = ("import sys; sys.modules['lm_eval'] = None; from evalsi.cli.main import main; "
              f"sys.argv = ['evalsi', 'import', 'lm-eval', {str(path)!r}]; main()")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "Paris"
