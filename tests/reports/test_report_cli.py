"""`evalsi report` on the command line: where it writes, the format it picks, and exit 2 naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import evalsi


@pytest.fixture
def no_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No server configured anywhere: a source that is not a file cannot be a run id either."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALSI_SERVER", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))


def test_stdout_by_default_markdown_unless_the_output_says_html(saved: dict[str, Path], tmp_path: Path) -> None:
    to_stdout = evalsi("report", str(saved["baseline"]))
    assert to_stdout.returncode == 0 and to_stdout.stdout.startswith("## ✅ Evals.si report: baseline")
    written = evalsi("report", str(saved["baseline"]), "--output", str(tmp_path / "r.md"), "--title", "Nightly")
    assert written.returncode == 0 and written.stdout == ""
    assert (tmp_path / "r.md").read_text().startswith("## ✅ Nightly")
    assert evalsi("report", str(saved["baseline"]), "-o", str(tmp_path / "r.HTML")).returncode == 0
    assert (tmp_path / "r.HTML").read_text().startswith("<!doctype html>")


@pytest.mark.usefixtures("no_server")
def test_a_missing_source_is_exit_2_naming_it(saved: dict[str, Path]) -> None:
    done = evalsi("report", "nope.json", "--format", "md")
    assert done.returncode == 2
    assert "nope.json: no such saved result file here, so it would be a run on a server" in done.stderr
    baseline_missing = evalsi("report", str(saved["baseline"]), "--compare", "base.json")
    assert baseline_missing.returncode == 2 and "base.json: no such saved result file here" in baseline_missing.stderr


def test_a_document_that_is_not_a_result_is_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"summaries": [')
    done = evalsi("report", str(broken))
    assert done.returncode == 2 and f"{broken}:1: not a saved result (invalid JSON" in done.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"summaries": "many"}))
    done = evalsi("report", str(wrong))
    assert done.returncode == 2 and "not a saved result (an evalsi.v1alpha1.Run document)" in done.stderr


def test_bad_flags_are_exit_2(saved: dict[str, Path], tmp_path: Path) -> None:
    unwritable = evalsi("report", str(saved["baseline"]), "-o", str(tmp_path / "no" / "such" / "dir.md"))
    assert unwritable.returncode == 2 and "--output" in unwritable.stderr and "cannot write" in unwritable.stderr
    bad_format = evalsi("report", str(saved["baseline"]), "--format", "pdf")
    assert bad_format.returncode == 2 and "'pdf' is not one of 'html', 'md'" in bad_format.stderr
    too_many = evalsi("report", str(saved["baseline"]), "--max-records", "1000001")
    assert too_many.returncode == 2 and "--max-records" in too_many.stderr
    missing_data = evalsi("report", str(saved["baseline"]), "--data", str(tmp_path / "none.jsonl"))
    assert missing_data.returncode == 2 and "none.jsonl: no such file" in missing_data.stderr


def test_a_failed_gate_does_not_change_the_exit_code(saved: dict[str, Path], tmp_path: Path) -> None:
    document = json.loads(saved["baseline"].read_text())
    document["gates"] = [{"expression": "metric('exact-match').mean >= 0.99"}]
    gated = tmp_path / "gated.json"
    gated.write_text(json.dumps(document))
    for fmt in ("md", "html"):
        done = evalsi("report", str(gated), "--format", fmt)
        assert done.returncode == 0 and "1 of 1 gates failed" in done.stdout


def test_help_explains_the_contract() -> None:
    done = evalsi("report", "--help")
    assert done.returncode == 0
    for flag in ("--compare", "--format", "--output", "--server", "--project", "--title", "--max-records", "--data"):
        assert flag in done.stdout
    assert "The report never gates" in done.stdout
    assert "analyze" in evalsi("--help").stdout and "slice" in evalsi("analyze", "--help").stdout
