"""What an egress allowlist costs on the vm rung (QEMU microVM under TCG): a sandbox's create + `true` + destroy with
the network denied (base) and with an allowlist (the host's proxy, the egress port's bridge, the guest's relay),
alternating in the same minutes; then `true` and a busybox `wget` through the relay in one running guest. CPU
seconds of this process and its reaped children (QEMU included) and the load average beside each figure.

    .venv/bin/python benchmarks/sandbox_vm_egress.py --rounds 10

Target: the allowlist adds at most 1 s to a create (the vm rung's create is a snapshot restore of about a second
under TCG), and a GET through the relay costs at most 200 ms more than `true`. Needs qemu-system-x86_64 and
busybox-static; the guest's artifacts are cached where the vm tests keep theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import resource
import statistics
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.model import Endpoint, Level, NetworkPolicy, SandboxSpec
from evalsi.sandbox.vm.driver import VmDriver, VmOptions

CREATE_TARGET_MS = 1000.0
GET_TARGET_MS = 200.0
CACHE = Path(os.environ.get("EVALSI_TEST_VM_CACHE", Path(tempfile.gettempdir()) / "evalsi-test-vm-cache"))


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


async def run(rounds: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    driver = VmDriver(SandboxConfig(cache_dir=CACHE), options=VmOptions(warm=0))
    base = SandboxSpec(min_isolation=Level.VM)
    specs = {"deny": base, "allow": replace(base, network=NetworkPolicy((Endpoint("127.0.0.1", port),)))}
    await (await driver.create(base)).destroy()  # the template, built once
    walls: dict[str, list[float]] = {"deny": [], "allow": []}
    cpus: dict[str, list[float]] = {"deny": [], "allow": []}
    for index in range(rounds):
        for name in ("deny", "allow") if index % 2 == 0 else ("allow", "deny"):
            cpu, started = _cpu(), time.monotonic()
            session = await driver.create(specs[name])
            await session.exec(["true"])
            await session.destroy()
            walls[name].append(time.monotonic() - started)
            cpus[name].append(_cpu() - cpu)
    session = await driver.create(specs["allow"])
    nothing: list[float] = []
    gets: list[float] = []
    for _ in range(rounds):
        started = time.monotonic()
        await session.exec(["true"])
        nothing.append(time.monotonic() - started)
        started = time.monotonic()
        result = await session.exec(["wget", "-q", "-O", "-", f"http://127.0.0.1:{port}/"])
        gets.append(time.monotonic() - started)
        assert result.stdout == b"ok", result
    await session.destroy()
    await driver.close()
    server.shutdown()
    load = os.getloadavg()
    print(f"rounds {rounds}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for name in ("deny", "allow"):
        print(f"{name:5} create+true+destroy p50 {_p(walls[name], 0.5):7.1f} ms  p95 {_p(walls[name], 0.95):7.1f} ms  "
              f"CPU p50 {statistics.median(cpus[name]) * 1000:6.1f} ms")
    added = _p(walls["allow"], 0.5) - _p(walls["deny"], 0.5)
    print(f"the allowlist adds p50 {added:7.1f} ms to a create (target <= {CREATE_TARGET_MS:g} ms)")
    extra = _p(gets, 0.5) - _p(nothing, 0.5)
    print(f"true p50 {_p(nothing, 0.5):7.1f} ms; wget through the relay p50 {_p(gets, 0.5):7.1f} ms  "
          f"p95 {_p(gets, 0.95):7.1f} ms: {extra:6.1f} ms more (target <= {GET_TARGET_MS:g} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="pairs of creates, and GETs (default 10)")
    args = parser.parse_args()
    asyncio.run(run(args.rounds))


if __name__ == "__main__":
    main()
