"""What an egress allowlist costs on the bwrap rung: a sandbox's create + `true` + destroy, and `true` alone in a
running sandbox, with the network denied (base) and with an allowlist (its two network namespaces, veth pair and
proxy), alternating in the same minutes; plus one HTTP GET through the proxy. CPU seconds of this process (the
proxy and namespace setup run here) and of its children, and the load average, beside each figure.

    .venv/bin/python benchmarks/sandbox_egress.py --rounds 20

Target: `true` inside a sandbox p95 <= 50 ms (the bwrap target; the allowlist must not add to an execution).
Needs root (network namespaces) and bwrap.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import resource
import statistics
import threading
import time

from evalsi.sandbox.bwrap import BwrapDriver
from evalsi.sandbox.model import Endpoint, NetworkPolicy, SandboxSpec

TARGET_MS = 50.0


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


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


async def main(rounds: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    driver = BwrapDriver()
    specs = {"deny": SandboxSpec(), "allow": SandboxSpec(network=NetworkPolicy((Endpoint("127.0.0.1", port),)))}
    lifecycle: dict[str, list[float]] = {"deny": [], "allow": []}
    execs: dict[str, list[float]] = {"deny": [], "allow": []}
    cpu: dict[str, list[float]] = {"deny": [0.0, 0.0], "allow": [0.0, 0.0]}
    gets: list[float] = []
    for _ in range(rounds):
        for name, spec in specs.items():  # alternating: base and change in the same minutes
            own, children = _cpu()
            started = time.perf_counter()
            session = await driver.create(spec)
            result = await session.exec(["true"])
            await session.destroy()
            lifecycle[name].append(time.perf_counter() - started)
            assert result.outcome.kind == "exit" and result.outcome.code == 0, result
            own2, children2 = _cpu()
            cpu[name][0] += own2 - own
            cpu[name][1] += children2 - children
    sessions = {name: await driver.create(spec) for name, spec in specs.items()}
    try:
        for _ in range(rounds):
            for name, session in sessions.items():  # alternating again
                started = time.perf_counter()
                await session.exec(["true"])
                execs[name].append(time.perf_counter() - started)
        for _ in range(rounds):
            started = time.perf_counter()
            got = await sessions["allow"].exec(["curl", "-sS", f"http://127.0.0.1:{port}/"])
            gets.append(time.perf_counter() - started)
            assert got.stdout == b"ok", got
    finally:
        for session in sessions.values():
            await session.destroy()
    server.shutdown()
    load = os.getloadavg()
    print(f"rounds {rounds}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for name in specs:
        print(f"{name:5} create+true+destroy p50 {_p(lifecycle[name], 0.5):7.1f} ms  "
              f"p95 {_p(lifecycle[name], 0.95):7.1f} ms  "
              f"CPU per round: this process {cpu[name][0] / rounds * 1000:6.1f} ms, children "
              f"{cpu[name][1] / rounds * 1000:6.1f} ms")
    for name in specs:
        print(f"{name:5} true in a running sandbox  p50 {_p(execs[name], 0.5):7.1f} ms  "
              f"p95 {_p(execs[name], 0.95):7.1f} ms  (target p95 <= {TARGET_MS:g} ms)")
    print(f"allow curl GET through the proxy  p50 {_p(gets, 0.5):7.1f} ms  p95 {_p(gets, 0.95):7.1f} ms  "
          f"(mean {statistics.mean(gets) * 1000:.1f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    asyncio.run(main(parser.parse_args().rounds))
