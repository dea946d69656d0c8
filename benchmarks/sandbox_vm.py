"""The microVM rung (qemu, TCG): cold start to first byte, cold and from the template snapshot and the warm pool, and
one `true` execution in a running guest, printed beside the targets (issue 14: report them; DESIGN: a boot under a
few seconds).

    .venv/bin/python benchmarks/sandbox_vm.py                  # 3 cold boots, 5 restores, 5 warm, 30 `true`
    .venv/bin/python benchmarks/sandbox_vm.py --cold 1 --restores 10 --runs 50
    .venv/bin/python benchmarks/sandbox_vm.py --kernel debian   # Debian's packaged kernel instead of the small one

Cold: a guest booted from the kernel (no snapshot) until its agent sends the first byte of `echo`. Restore: a guest
restored from the template snapshot (QEMU -incoming), refreshed, then `echo`. Warm: a create served from the warm
pool (restored in the background beforehand), then `echo`. The artifacts and the template are built first (not
timed). ``--kernel`` picks the guest kernel as ``sandbox.drivers.qemu.kernel`` does (small: ``evalsi sandbox kernel
build`` first, into the same ``--cache-dir``). The machine is shared: CPU seconds (this process and its QEMU
children) and the load average are printed beside each wall-clock figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from dataclasses import replace
from pathlib import Path

from evalsi.sandbox.config import SandboxConfig, default_cache_dir
from evalsi.sandbox.model import Level, SandboxSpec
from evalsi.sandbox.vm.driver import VmDriver, VmOptions
from evalsi.sandbox.vm.session import VmSession

TARGET_COLD_S = 3.0  # "a boot under a few seconds"
TARGET_RESTORE_S = 1.0
SPEC = SandboxSpec(min_isolation=Level.VM)


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _process_cpu_s(pid: int) -> float:
    """A running child's CPU seconds (/proc/<pid>/stat): QEMU's own, which RUSAGE_CHILDREN counts only once reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _first_byte(session: VmSession) -> float:
    first: list[float] = []

    async def seen(_stream: str, _chunk: bytes) -> None:
        if not first:
            first.append(time.perf_counter())

    result = await session.exec(["echo", "x"], on_output=seen)
    if result.outcome.kind != "exit" or not first:
        raise RuntimeError(f"echo failed: {result.outcome}")
    return first[0]


async def _starts(driver: VmDriver, count: int, *, wait_warm: bool = False) -> list[float]:
    figures = []
    for _ in range(count):
        if wait_warm:
            while not driver._warm:
                await asyncio.sleep(0.05)
        started = time.perf_counter()
        session = await driver.create(SPEC)
        try:
            figures.append(await _first_byte(session) - started)
        finally:
            await session.destroy()
    return figures


def _report(name: str, figures: list[float], target: float | None, cpu: float, wall: float) -> None:
    line = (f"{name}: p50 {statistics.median(figures):.2f} s, max {max(figures):.2f} s over {len(figures)}"
            f"{f' (target <= {target:g} s)' if target else ''}; cpu {cpu:.2f} s in {wall:.2f} s wall; "
            f"load {os.getloadavg()[0]:.2f}")
    print(line, flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", type=int, default=3, help="cold boots (no snapshot)")
    parser.add_argument("--restores", type=int, default=5, help="creates restored from the template snapshot")
    parser.add_argument("--warm", type=int, default=5, help="creates served by the warm pool")
    parser.add_argument("--runs", type=int, default=30, help="`true` executions in one running guest")
    parser.add_argument("--kernel", choices=("auto", "small", "debian"), default="auto",
                        help="the guest kernel (auto: the small one when built, else Debian's)")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(), help="the sandbox cache directory")
    args = parser.parse_args()
    config = SandboxConfig(cache_dir=args.cache_dir)
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at start", flush=True)
    base = VmOptions(warm=0, kernel=args.kernel)
    setup = VmDriver(config, options=base)
    prepared = time.perf_counter()
    first = await setup.create(SPEC)  # builds the artifacts and the template when missing
    await first.destroy()
    print(f"setup (artifacts and template; cached after the first run): {time.perf_counter() - prepared:.2f} s",
          flush=True)
    print(f"guest kernel: {first.isolation.bounds['kernel']}", flush=True)

    for name, options, count, target, wait_warm in (
            ("cold boot to first byte", replace(base, snapshots=False), args.cold, TARGET_COLD_S, False),
            ("snapshot restore to first byte", base, args.restores, TARGET_RESTORE_S, False),
            ("warm pool create to first byte", replace(base, warm=1), args.warm, None, True)):
        if count <= 0:
            continue
        driver = VmDriver(config, options=options)
        if wait_warm:
            await (await driver.create(SPEC)).destroy()  # starts the pool's refill
        cpu, wall = _cpu_s(), time.perf_counter()
        figures = await _starts(driver, count, wait_warm=wait_warm)
        _report(name, figures, target, _cpu_s() - cpu, time.perf_counter() - wall)
        await driver.close()

    driver = VmDriver(config, options=base)
    session = await driver.create(SPEC)
    try:
        await session.exec(["true"])
        assert session.machine is not None
        pid = session.machine.process.pid
        cpu, wall = _cpu_s() + _process_cpu_s(pid), time.perf_counter()
        latencies = []
        for _ in range(args.runs):
            started = time.perf_counter()
            result = await session.exec(["true"])
            latencies.append((time.perf_counter() - started) * 1000)
            if result.outcome.kind != "exit" or result.outcome.code != 0:
                raise RuntimeError(f"`true` failed: {result.outcome}")
        print(f"`true` in a running guest: p50 {statistics.median(latencies):.1f} ms, p95 "
              f"{_percentile(latencies, 0.95):.1f} ms over {args.runs} (no target for vm; namespaced/confined "
              f"<= 50 ms); cpu {_cpu_s() + _process_cpu_s(pid) - cpu:.2f} s (this process and QEMU) in "
              f"{time.perf_counter() - wall:.2f} s wall; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        await session.destroy()
        await driver.close()


if __name__ == "__main__":
    asyncio.run(main())
