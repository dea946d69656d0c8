"""evalsi-sandboxd's overhead: a sandbox's Create, one `true` Exec and the first byte of output through the service
(gRPC over its Unix socket), and Snapshot + Restore, beside the in-process targets (issue 14: bwrap cold start to
first byte p95 <= 50 ms; a warm lease from a snapshot p95 < 250 ms in the plan's §23).

    .venv/bin/python benchmarks/sandboxd_exec.py              # 50 rounds, the bwrap rung
    .venv/bin/python benchmarks/sandboxd_exec.py --runs 200 --ab # also the same executions in-process, alternating

The machine is shared: CPU seconds of sandboxd (its own and its reaped children's, from /proc/<pid>/stat) and of
this client are printed beside each wall-clock figure, with the load average. ``--ab`` alternates rounds through
sandboxd and in-process (the ladder's session directly), so both see the same minutes of load: the difference is
sandboxd's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This process forks bwrap (the in-process rounds) beside a gRPC channel: gRPC's fork handlers off, as in sandboxd.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

from evalsi.sandbox.client import SandboxClient
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import Level, SandboxSpec

TARGET_FIRST_BYTE_P95_MS = 50.0
TARGET_RESTORE_P95_MS = 250.0
SPEC = SandboxSpec(min_isolation=Level.NAMESPACED, ladder=("bwrap",))


def _process_cpu_s(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` (its reaped children included), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _ms(values: list[float]) -> str:
    return f"p50 {statistics.median(values) * 1000:.1f} / p95 {_p95(values) * 1000:.1f} ms"


async def _through_sandboxd(client: SandboxClient, timings: dict[str, list[float]]) -> None:
    started = time.perf_counter()
    session = await client.create(SPEC)
    timings["create"].append(time.perf_counter() - started)
    started = time.perf_counter()
    await session.exec(["true"])
    timings["true"].append(time.perf_counter() - started)
    first: list[float] = []
    started = time.perf_counter()

    async def sink(stream: str, data: bytes) -> None:
        if not first:
            first.append(time.perf_counter() - started)

    await session.exec(["echo", "x"], on_output=sink)
    timings["first byte"].append(first[0])
    started = time.perf_counter()
    snapshot = await session.snapshot()
    restored = await client.restore(snapshot)
    timings["snapshot+restore"].append(time.perf_counter() - started)
    await session.destroy()
    await restored.destroy()


async def _in_process(ladder: Ladder, timings: dict[str, list[float]]) -> None:
    started = time.perf_counter()
    session = await ladder.create(SPEC)
    timings["create"].append(time.perf_counter() - started)
    started = time.perf_counter()
    await session.exec(["true"])
    timings["true"].append(time.perf_counter() - started)
    first: list[float] = []
    started = time.perf_counter()

    async def sink(stream: str, data: bytes) -> None:
        if not first:
            first.append(time.perf_counter() - started)

    await session.exec(["echo", "x"], on_output=sink)
    timings["first byte"].append(first[0])
    await session.destroy()


async def main(runs: int, ab: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="sbxd-bench-") as tmp:
        daemon = subprocess.Popen(
            [str(Path(sys.executable).with_name("evalsi-sandboxd")), "--listen", f"unix:{tmp}/s.sock",
             "--state-dir", f"{tmp}/state", "--log-level", "warning"], stdout=subprocess.PIPE, text=True, cwd=tmp)
        try:
            assert daemon.stdout is not None
            address = json.loads(daemon.stdout.readline())["sandboxd"]
            ladder = Ladder(SandboxConfig(ladder=("bwrap",)))
            served = {name: [] for name in ("create", "true", "first byte", "snapshot+restore")}
            local: dict[str, list[float]] = {name: [] for name in ("create", "true", "first byte")}
            async with SandboxClient(address, project="bench") as client:
                await _through_sandboxd(client, {name: [] for name in served})  # warm both sides up
                if ab:
                    await _in_process(ladder, {name: [] for name in local})
                cpu_daemon, cpu_self, wall = _process_cpu_s(daemon.pid), _own_cpu_s(), time.perf_counter()
                for _ in range(runs):
                    await _through_sandboxd(client, served)
                    if ab:
                        await _in_process(ladder, local)
                cpu_daemon = _process_cpu_s(daemon.pid) - cpu_daemon
                cpu_self, wall = _own_cpu_s() - cpu_self, time.perf_counter() - wall
            load = os.getloadavg()
            print(f"evalsi-sandboxd, bwrap rung, {runs} rounds; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
                  f"on {os.cpu_count()} cores")
            for name, values in served.items():
                print(f"  through sandboxd  {name:<17} {_ms(values)}")
            for name, values in local.items():
                print(f"  in-process        {name:<17} {_ms(values)}")
            verdict = "meets" if _p95(served["first byte"]) * 1000 <= TARGET_FIRST_BYTE_P95_MS else "misses"
            print(f"  first byte through sandboxd p95 {_p95(served['first byte']) * 1000:.1f} ms; target <= "
                  f"{TARGET_FIRST_BYTE_P95_MS:.0f} ms: {verdict}")
            verdict = "meets" if _p95(served["snapshot+restore"]) * 1000 < TARGET_RESTORE_P95_MS else "misses"
            print(f"  snapshot+restore p95 {_p95(served['snapshot+restore']) * 1000:.1f} ms; target (a warm lease) "
                  f"< {TARGET_RESTORE_P95_MS:.0f} ms: {verdict}")
            print(f"  CPU: sandboxd (with its sandboxes) {cpu_daemon:.2f} s, this client {cpu_self:.2f} s, over "
                  f"{wall:.1f} s wall")
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--ab", action="store_true", help="alternate with in-process executions (same minutes)")
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.ab))
