"""The runner under every rung: real processes for the timeout, caps and streaming; the classification's order."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from evalsi.sandbox.cgroups import CgroupPool, ExecutionCgroups, discover_layout
from evalsi.sandbox.process import COMMON_DENIALS, Command, Dialect, Finished, classify, run_command

NO_FAILURE = Dialect(lambda finished: "", COMMON_DENIALS)
ALWAYS_FAILED = Dialect(lambda finished: "wrapper: setup failed", COMMON_DENIALS)


def _command(code: str, **fields: object) -> Command:
    base: dict[str, object] = {"argv": [sys.executable, "-c", code], "env": {}, "timeout_s": 10.0,
                               "output_bytes": 1 << 20}
    base.update(fields)
    return Command(**base)  # type: ignore[arg-type]


async def test_output_streams_in_order_and_stdin_arrives() -> None:
    seen: list[tuple[str, bytes]] = []

    async def sink(stream: str, chunk: bytes) -> None:
        seen.append((stream, chunk))

    code = "import sys\ndata = sys.stdin.read()\nprint(data.upper(), flush=True)\nprint('e', file=sys.stderr)\n"
    finished = await run_command(_command(code, stdin=b"hello"), sink)
    assert finished.returncode == 0 and finished.stdout == b"HELLO\n" and finished.stderr == b"e\n"
    assert b"".join(chunk for stream, chunk in seen if stream == "stdout") == b"HELLO\n"


async def test_the_timeout_kills_the_whole_process_group() -> None:
    code = "import subprocess, time\nsubprocess.Popen(['sleep', '60'])\ntime.sleep(60)\n"
    finished = await run_command(_command(code, timeout_s=0.5))
    assert finished.timed_out and finished.duration_s < 5
    assert classify(finished, NO_FAILURE).kind == "timeout"


async def test_output_past_the_cap_is_cut_and_stops_the_program() -> None:
    finished = await run_command(_command("import sys\nwhile True: sys.stdout.write('x' * 4096)\n",
                                          output_bytes=10_000, timeout_s=20.0))
    assert finished.output_capped and not finished.timed_out and len(finished.stdout) == 10_000
    outcome = classify(finished, NO_FAILURE)
    assert (outcome.kind, outcome.effect) == ("denied", "output cap")


async def test_a_missing_binary_is_a_runner_failure() -> None:
    finished = await run_command(Command(argv=["/nonexistent/wrapper"], env={}, timeout_s=1, output_bytes=10))
    outcome = classify(finished, NO_FAILURE)
    assert outcome.kind == "runner_failure" and "nonexistent" in outcome.signature


async def test_cgroups_bound_and_report_an_execution() -> None:
    layout = discover_layout("auto")
    if layout.limits == "none":
        pytest.fail(f"no writable cgroup hierarchy for the sandbox tests: {layout}")
    groups = ExecutionCgroups.create(layout, memory_bytes=64 << 20, pids=8)
    try:
        code = "import os\nfor _ in range(20):\n    os.fork() or os._exit(0)\n"
        finished = await run_command(_command(code, cgroup_procs=groups.join_paths))
        assert finished.returncode != 0 and groups.pids_exhausted()
        assert classify(finished, NO_FAILURE, pids_exhausted=True).effect == "pids limit"
    finally:
        await groups.close()
    assert groups.dirs == [] and set(groups.bounds) == {"memory", "pids"}


@pytest.mark.parametrize(("finished", "kwargs"), [
    (Finished(returncode=1, stderr=b"Permission denied"), {}),
    (Finished(returncode=137), {"oom_killed": True}),
])
def test_a_runner_failure_is_never_a_denial(finished: Finished, kwargs: dict[str, bool]) -> None:
    outcome = classify(finished, ALWAYS_FAILED, **kwargs)
    assert (outcome.kind, outcome.signature) == ("runner_failure", "wrapper: setup failed")


@pytest.mark.parametrize(("finished", "kwargs", "kind", "effect", "code"), [
    (Finished(returncode=0), {}, "exit", "", 0),
    (Finished(returncode=3, stderr=b"assertion failed"), {}, "exit", "", 3),
    (Finished(returncode=137), {"oom_killed": True}, "denied", "oom-kill", None),
    (Finished(returncode=128 + signal.SIGSYS), {}, "denied", "seccomp: a forbidden system call", None),
    (Finished(returncode=-signal.SIGXCPU), {}, "denied", "cpu time limit", None),
    (Finished(returncode=1, stderr=b"sh: can't create /x: Read-only file system"), {}, "denied",
     "write to a read-only path", 1),
    (Finished(returncode=1, stderr=b"ConnectionRefusedError: [Errno 111] Connection refused"), {}, "denied",
     "network denied", 1),
    (Finished(returncode=2), {"pids_exhausted": True}, "denied", "pids limit", 2),
    (Finished(returncode=0, stderr=b"Permission denied"), {}, "exit", "", 0),
    (Finished(returncode=-signal.SIGKILL), {}, "exit", "", 128 + signal.SIGKILL),
])
def test_classification(finished: Finished, kwargs: dict[str, bool], kind: str, effect: str,
                        code: int | None) -> None:
    outcome = classify(finished, NO_FAILURE, **kwargs)
    assert (outcome.kind, outcome.effect, outcome.code) == (kind, effect, code)


async def test_pooled_groups_are_reused_with_fresh_limits_and_counters() -> None:
    layout = discover_layout("auto")
    pool = CgroupPool(layout)
    try:
        first = pool.acquire(memory_bytes=64 << 20, pids=4)
        fork_past = "import os\nfor _ in range(10):\n    os.fork() or os._exit(0)\n"
        refused = await run_command(_command(fork_past, cgroup_procs=first.join_paths))
        assert refused.returncode != 0 and first.pids_exhausted()
        dirs = list(first.dirs)
        await pool.release(first)
        second = pool.acquire(memory_bytes=128 << 20, pids=64)
        assert second.dirs == dirs, "an emptied group is reused"
        assert not second.pids_exhausted() and not second.oom_killed(), "counters start again at reuse"
        assert "pids.max=64" in second.bounds["pids"] and str(128 << 20) in second.bounds["memory"]
        fine = await run_command(_command(fork_past, cgroup_procs=second.join_paths))
        assert fine.returncode == 0 and not second.pids_exhausted()
        await pool.release(second)
    finally:
        pool.close()
    assert all(not path.exists() for path in dirs)


async def test_groups_left_by_a_dead_process_are_swept() -> None:
    layout = discover_layout("auto")
    parent = layout.v1_pids or layout.v2_plain or layout.v1_memory
    assert parent is not None
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    stale = parent / f"evalsi-sbx-{dead.pid}-leftover"
    stale.mkdir()
    pool = CgroupPool(layout)
    try:
        pool.acquire(memory_bytes=64 << 20, pids=8)._remove_dirs()
    finally:
        pool.close()
    assert not stale.exists()
