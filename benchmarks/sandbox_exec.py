"""Sandbox latency and throughput per rung, printed beside the targets (DESIGN.md, issue 14).

    .venv/bin/python benchmarks/sandbox_exec.py                    # bwrap: `true` latency, first byte, throughput
    .venv/bin/python benchmarks/sandbox_exec.py --rungs bwrap,landlock --runs 100 --root host

For each rung: one `true` execution's wall time (p50/p95 over --runs, session reused, each a fresh sandbox: the cold
start of the process sandbox), cold start to first byte of `echo` output, and code-evaluation throughput (a 20-line
Python unit test, --concurrency at once). Targets: bwrap p95 <= 50 ms to first byte; >= 40 executions/s of the
20-line test with bwrap. The machine is shared: CPU seconds (this process and its children) and the load average
are printed beside each wall-clock figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time

from evalsi.sandbox.config import SandboxConfig, root_from_path
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import Level, SandboxSession, SandboxSpec

TARGET_FIRST_BYTE_P95_MS = 50.0
TARGET_THROUGHPUT = 40.0
# A 20-line Python test: what a code evaluator runs per candidate.
TWENTY_LINE_TEST = """\
def candidate(values):
    total = 0
    for value in values:
        if value % 2 == 0:
            total += value
    return total


def test_empty():
    assert candidate([]) == 0


def test_evens():
    assert candidate([1, 2, 3, 4]) == 6


def test_negative():
    assert candidate([-2, -3]) == -2


for test in (test_empty, test_evens, test_negative):
    test()
print("3 passed")
"""


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _first_byte(session: SandboxSession) -> float:
    started = time.perf_counter()
    first: list[float] = []

    async def seen(_stream: str, _chunk: bytes) -> None:
        if not first:
            first.append(time.perf_counter())

    result = await session.exec(["echo", "x"], on_output=seen)
    if result.outcome.kind != "exit" or not first:
        raise RuntimeError(f"echo failed: {result.outcome}")
    return (first[0] - started) * 1000


async def _rung(ladder: Ladder, name: str, runs: int, concurrency: int, samples: int) -> None:
    verdict = await ladder.probe(name)
    if not verdict.available:
        print(f"{name}: unavailable ({verdict.reason})")
        return
    session = await ladder.create(SandboxSpec(min_isolation=Level.NONE, ladder=(name,), root=ladder.config.root))
    try:
        await session.exec(["true"])  # warm caches (the image root, the seccomp program)
        cpu, wall = _cpu_s(), time.perf_counter()
        latencies = []
        for _ in range(runs):
            started = time.perf_counter()
            result = await session.exec(["true"])
            latencies.append((time.perf_counter() - started) * 1000)
            if result.outcome.kind != "exit" or result.outcome.code != 0:
                raise RuntimeError(f"`true` failed on {name}: {result.outcome}")
        first_bytes = [await _first_byte(session) for _ in range(runs)]
        cpu_used, wall_used = _cpu_s() - cpu, time.perf_counter() - wall
        load = os.getloadavg()[0]
        print(f"{name} ({verdict.level.label}): `true` p50 {statistics.median(latencies):.1f} ms, "
              f"p95 {_percentile(latencies, 0.95):.1f} ms; first byte p50 {statistics.median(first_bytes):.1f} ms, "
              f"p95 {_percentile(first_bytes, 0.95):.1f} ms (target <= {TARGET_FIRST_BYTE_P95_MS:.0f} ms for "
              f"namespaced/confined) over {runs} runs; cpu {cpu_used:.2f} s in {wall_used:.2f} s wall; load {load:.2f}")
        await session.write_files({"/workspace/test_candidate.py": TWENTY_LINE_TEST.encode()})
        cpu, wall = _cpu_s(), time.perf_counter()
        passed = 0
        semaphore = asyncio.Semaphore(concurrency)

        async def one() -> None:
            nonlocal passed
            async with semaphore:
                result = await session.exec(["python3", "test_candidate.py"])
                passed += result.outcome.kind == "exit" and result.stdout == b"3 passed\n"

        await asyncio.gather(*(one() for _ in range(samples)))
        elapsed = time.perf_counter() - wall
        print(f"{name}: {samples / elapsed:.1f} executions/s of a 20-line Python test (target >= "
              f"{TARGET_THROUGHPUT:.0f}/s with bwrap), {passed}/{samples} passed, concurrency {concurrency}; "
              f"cpu {_cpu_s() - cpu:.2f} s in {elapsed:.2f} s wall; load {os.getloadavg()[0]:.2f}")
    finally:
        await session.destroy()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rungs", default="bwrap", help="comma-separated driver names (default: bwrap)")
    parser.add_argument("--runs", type=int, default=50, help="`true` executions per rung for the latency figures")
    parser.add_argument("--samples", type=int, default=200, help="20-line tests for the throughput figure")
    # Twice the cores: each execution also waits on the kernel (namespaces, the block-fd handshake), so one per core
    # leaves them idle part of the time (paired runs at load 5-7: 34/20 per s at 2 against 42/29 at 4).
    parser.add_argument("--concurrency", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("--root", default="runtime",
                        help="runtime (the default root: the runtime image), host (the host's /usr; Landlock runs only "
                             "with it) or an image directory or tarball")
    args = parser.parse_args()
    names = tuple(name.strip() for name in args.rungs.split(",") if name.strip())
    ladder = Ladder(SandboxConfig(ladder=names, root=root_from_path(args.root, "--root")))
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at start; root {args.root}")
    for name in names:
        await _rung(ladder, name, args.runs, args.concurrency, args.samples)


if __name__ == "__main__":
    asyncio.run(main())
