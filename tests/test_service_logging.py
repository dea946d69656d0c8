"""Service logs are JSON lines on stderr: the shared ``configure_logging`` and a real service process."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from evalsi.errors import BadInputError
from evalsi.service.logging import configure_logging, ids


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging is process-wide: put back what pytest had, so later tests' logging is untouched."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.reset_defaults()


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.usefixtures("restore_logging")
def test_standard_library_records_are_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")
    logging.getLogger("evalsi.x").warning("a %s", "b")
    captured = capsys.readouterr()
    (line,) = _lines(captured.err)
    assert line["event"] == "a b" and line["level"] == "warning" and line["logger"] == "evalsi.x"
    assert line["timestamp"].endswith("Z")  # ISO 8601 in UTC
    assert captured.out == ""  # stdout stays the services' own (their one "listening"/"ready" line)


@pytest.mark.usefixtures("restore_logging")
def test_structlog_records_and_exceptions_are_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")
    structlog.get_logger("evalsi.y").info("hello", run_id="r1")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("evalsi.y").exception("failed")
    hello, failed = _lines(capsys.readouterr().err)
    assert hello["event"] == "hello" and hello["level"] == "info" and hello["run_id"] == "r1"
    # One line, the traceback a list of dicts, so a collector never splits an exception across records.
    assert failed["level"] == "error" and failed["exception"][0]["exc_type"] == "ValueError"


@pytest.mark.usefixtures("restore_logging")
def test_the_level_filters_both_kinds_of_logger(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("warning")
    logging.getLogger("evalsi.x").info("hidden")
    structlog.get_logger("evalsi.y").info("hidden too")
    logging.getLogger("evalsi.x").error("shown")
    assert [line["event"] for line in _lines(capsys.readouterr().err)] == ["shown"]


def test_an_unknown_level_is_bad_input_and_a_service_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BadInputError, match="--log-level loud"):
        configure_logging("loud")
    from evalsi_ingest.main import main

    assert main(["--http-port", "0", "--grpc-port", "0", "--log-level", "loud"]) == 2
    assert "--log-level loud: use debug, info, warning, error" in capsys.readouterr().err


@pytest.mark.usefixtures("restore_logging")
def test_the_scheduler_and_worker_take_a_log_level(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from evalsi_scheduler.main import main as scheduler
    from evalsi_worker.main import main as worker

    assert scheduler(["--log-level", "loud"]) == 2
    assert "evalsi-scheduler: --log-level loud: use debug" in capsys.readouterr().err
    monkeypatch.setenv("EVALSI_LOG_LEVEL", "loud")  # the shared variable, read by every service
    assert worker([]) == 2
    assert "evalsi-worker: --log-level loud: use debug" in capsys.readouterr().err
    monkeypatch.delenv("EVALSI_LOG_LEVEL")
    with pytest.raises(SystemExit) as refused:  # argparse's choices
        worker(["--log-format", "xml"])
    assert refused.value.code == 2 and "invalid choice: 'xml'" in capsys.readouterr().err


@pytest.mark.usefixtures("restore_logging")
def test_ids_are_fields_of_the_line_not_words_of_its_text(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")
    logging.getLogger("evalsi.worker").info("task cancelled with its run", extra=ids(run_id="r1", task_key="k",
                                                                                     project=None))
    (line,) = _lines(capsys.readouterr().err)
    assert line["event"] == "task cancelled with its run"
    assert (line["run_id"], line["task_key"]) == ("r1", "k") and "project" not in line


@pytest.mark.usefixtures("restore_logging")
def test_the_text_format_is_one_plain_line_per_record(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "text")
    logging.getLogger("evalsi.x").warning("run %s slow", "r1", extra=ids(run_id="r1"))
    (line,) = capsys.readouterr().err.splitlines()
    assert not line.startswith("{") and "run r1 slow" in line and "run_id=r1" in line and "warning" in line
    with pytest.raises(BadInputError, match="--log-format xml: use json, text"):
        configure_logging("info", "xml")


def test_the_ingest_process_logs_json_lines_on_stderr(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "evalsi_ingest.main", "--http-port", "0", "--grpc-port", "0",
         "--traces-url", f"sqlite:///{tmp_path / 'traces.db'}", "--grace", "0", "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = process.stdout.readline() if process.stdout else ""
        if not first:
            pytest.fail(f"evalsi-ingest did not start: {process.stderr.read() if process.stderr else ''}")
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert json.loads(first)["event"] == "listening" and out == ""  # stdout: the one line, unchanged
    lines = _lines(err)  # every stderr line parses: no plain-text line is left
    assert lines and all({"level", "timestamp", "event"} <= line.keys() for line in lines)
    stopped = [line for line in lines if line["event"].startswith("stopped: ")]
    assert stopped == [{**stopped[0], "event": "stopped: 0 spans accepted, 0 rejected", "level": "info",
                        "logger": "evalsi.ingest"}]
