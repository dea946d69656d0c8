"""Supervision of a plugin process: a death mid-batch, a hang past the deadline, and malformed answers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import evalsi
from evalsi.errors import InfraError
from evalsi.evaluators import Registry
from evalsi.plugins import PluginHost, PluginSet, read_manifest
from evalsi.plugins.process import PluginProcess
from evalsi.plugins.venv import ensure_venv
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_EVALUATOR, ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_plugin_killed_mid_batch_is_restarted_and_the_batch_counted_once(
    plugins: tuple[Registry, PluginSet], tmp_path: Path
) -> None:
    registry, started = plugins
    host = started.hosts[0]
    first_pid = host.pid
    log, marker = tmp_path / "evaluated.log", tmp_path / "crashed"
    rows = [{"id": f"r{i}", "output": "CRASH" if i == 5 else "fine"} for i in range(12)]
    spec = {"ref": "acme/crashy", "params": {"marker": str(marker), "log": str(log)}}
    with evalsi.evaluate(rows, [spec], registry=registry, concurrency=4) as results:
        outcomes = sorted((r.record_id, r.outcome) for r in results.results)
        summary = results.metric("crashy")
    assert marker.exists() and host.restarts == 1 and host.pid != first_pid
    # Every record scored exactly once: the dead process's partial batch was dropped, its retry counted.
    assert outcomes == sorted((f"r{i}", OUTCOME_SCORED) for i in range(12))
    assert summary.n == 12 and summary.errors == 0
    by_pid: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        record_id, pid = line.split()
        by_pid.setdefault(pid, set()).add(record_id)
    assert str(first_pid) in by_pid and str(host.pid) in by_pid  # the crashed batch ran again on the new process
    assert "r5" in by_pid[str(first_pid)] and "r5" in by_pid[str(host.pid)]


def test_a_plugin_dying_twice_on_a_batch_is_an_infra_error_with_its_stderr(
    plugins: tuple[Registry, PluginSet], tmp_path: Path
) -> None:
    registry, started = plugins
    log = tmp_path / "evaluated.log"
    spec = {"ref": "acme/crashy", "params": {"log": str(log)}}  # no marker: it dies on CRASH every time
    with evalsi.evaluate([{"id": "x", "output": "CRASH"}], [spec], registry=registry) as results:
        [result] = results.results
        summary = results.metric("crashy")
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_INFRA
    assert "died on a batch of 1 records twice" in result.reason
    assert summary.n == 0 and summary.infra_errors == 1
    assert started.hosts[0].restarts == 2
    assert "crashing on purpose" in result.reason  # the dead process's stderr, carried in the error
    assert len(log.read_text().splitlines()) == 2  # tried once, retried once, then given up


def test_a_plugin_hanging_past_its_deadline_is_replaced(plugins: tuple[Registry, PluginSet]) -> None:
    registry, started = plugins
    host = started.hosts[0]
    hung_pid = host.pid
    spec = {"ref": "acme/slow", "params": {"sleep_s": 60.0}}
    with evalsi.evaluate([{"id": "h", "output": "x"}], [spec], registry=registry) as results:
        [result] = results.results
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_INFRA
    assert "did not answer within 5s (limits.timeout)" in result.reason
    assert host.pid != hung_pid and host.restarts == 1
    # The fresh process serves the next call.
    with evalsi.evaluate([{"id": "q", "output": "x"}], ["acme/slow"], registry=registry) as results:
        assert [r.outcome for r in results.results] == [OUTCOME_SCORED]


@pytest.mark.parametrize(("mode", "problem"), [
    ("short", "0 results for a batch of 1 records"),
    ("wrong-id", "result 0 is for record 'ax', expected 'a'"),
    ("wrong-batch", "results for batch 2, expected batch 1"),
    ("empty", "the Evaluate stream ended without the batch's results"),
    ("judge-loop", "over 32 judge calls a record"),
])
async def test_malformed_answers_are_infra_errors(mode: str, problem: str, tmp_path: Path) -> None:
    manifest = replace(read_manifest(FIXTURES / "acme_plugin" / "evalsi-plugin.yaml"), entrypoint=f"{mode}:x")
    command = [sys.executable, str(FIXTURES / "bad_plugin.py")]
    host = PluginHost(manifest, lambda: PluginProcess(manifest, command))
    try:
        with pytest.raises(InfraError) as raised:
            await host.evaluate("bad/any@1.0.0", {}, Record(id="a"), None)
        assert problem in str(raised.value) and "answered a malformed message" in str(raised.value)
        assert host.restarts == 0  # a malformed answer is not retried: the same plugin would answer the same
    finally:
        host.close()


async def test_a_batch_the_plugin_refuses_is_each_records_error(plugins: tuple[Registry, PluginSet]) -> None:
    _, started = plugins
    host = started.hosts[0]
    result = await host.evaluate("acme/nope@1.0.0", {}, Record(id="a"), None)
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_EVALUATOR
    assert result.reason.startswith("plugin: this plugin hosts no evaluator 'acme/nope@1.0.0'; it hosts acme/boom")
    refused = await host.evaluate("acme/has-word@1.0.0", {"word": 3}, Record(id="b"), None)
    assert "param 'word' must be str, got int 3" in refused.reason and host.restarts == 0


def test_a_plugin_ends_when_its_host_is_killed(plugins_dir: Path, venv_cache: Path, tmp_path: Path) -> None:
    host_script = (
        "import time\n"
        "from pathlib import Path\n"
        "from evalsi.evaluators import Registry\n"
        "from evalsi.plugins import load_plugins\n"
        f"plugins = load_plugins(Registry(), {str(plugins_dir)!r}, cache_dir=Path({str(venv_cache)!r}))\n"
        "print(plugins.hosts[0].pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    host = subprocess.Popen([sys.executable, "-c", host_script], stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout is not None
        plugin_pid = int(host.stdout.readline())
        assert Path(f"/proc/{plugin_pid}").exists()
    finally:
        host.kill()  # SIGKILL: the host stops nothing itself
        host.wait()
    deadline = time.monotonic() + 10
    while _running(plugin_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(plugin_pid)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_a_message_over_the_limit_is_an_infra_error_naming_it(plugins_dir: Path, venv_cache: Path) -> None:
    manifest = replace(read_manifest(plugins_dir / "acme" / "evalsi-plugin.yaml"), max_message_bytes=1 << 20)
    python = ensure_venv(manifest, venv_cache) / "bin" / "python"
    host = PluginHost(manifest, lambda: PluginProcess(manifest, [str(python), "-m", "evalsi.plugins.main"]))
    try:
        big = Record(id="big")
        big.output.text = "ok" * (1 << 20)  # 2 MiB
        with pytest.raises(InfraError, match=r"a message over 1 MiB \(limits.max_message_mb\)"):
            await host.evaluate("acme/has-word@1.0.0", {}, big, None)
        small = Record(id="small")
        small.output.text = "ok"
        assert (await host.evaluate("acme/has-word@1.0.0", {}, small, None)).scores[0].passed
    finally:
        host.close()


async def test_a_call_its_caller_abandons_leaves_the_host_serving(plugins: tuple[Registry, PluginSet]) -> None:
    _, started = plugins
    host = started.hosts[0]
    slow = Record(id="slow")
    slow.output.text = "x"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(host.evaluate("acme/slow@1.0.0", {"sleep_s": 1.0}, slow, None), 0.2)
    await asyncio.sleep(1.2)  # its answer arrives for nobody
    fine = Record(id="fine")
    fine.output.text = "ok"
    result = await asyncio.wait_for(host.evaluate("acme/has-word@1.0.0", {}, fine, None), 10)
    assert result.outcome == OUTCOME_SCORED and host.restarts == 0
