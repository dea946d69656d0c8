"""How long `evalsi serve` takes from its start to answering, and where the time goes.

    python benchmarks/serve_ready.py [--runs 3] [--exec]

Target: the api answers ``/readyz`` with 200 within 5 s of `evalsi serve` starting (DESIGN.md). Each run starts
`evalsi serve` afresh (a new state directory: new SQLite databases, migrated on start; a new NATS store) on free
ports, and prints:

- wall seconds from the start to the api's ``/readyz`` 200 (polled every 20 ms) and to serve's "ready" line (every
  service answering its ``/readyz``), beside the target;
- the CPU seconds (user + system) each process had used when the "ready" line came (the supervisor's is the CLI
  and the imports it preloads for its forks), and the CPU of the whole tree once it stopped;
- the wall second at which each service logged that it was ready.

Then, once, the parts in isolation: each service's imports in a fresh interpreter (what every service paid before
the services were forked from a supervisor that imports them once), the imports a supervisor preloads, the
bundled nats-server's start, and opening (migrating) new SQLite metadata and trace stores.

``--exec`` also runs the old way, each service a fresh interpreter (``Supervisor(fork_services=False)``), for a
comparison at the same load. Times on a shared machine vary with its load (printed); CPU seconds far less.
Bytecode is cached in a scratch ``PYTHONPYCACHEPREFIX`` even where PYTHONDONTWRITEBYTECODE is set, as an installed
package would have it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from evalsi.ports import free_ports

TARGET_S = 5.0
SERVICES = ("evalsi_api.main", "evalsi_ingest.main", "evalsi_policy.main", "evalsi_scheduler.main",
            "evalsi_worker.main")
# The old way, for --exec: the supervisor `evalsi serve` builds, with its services exec'd rather than forked.
_EXEC_SERVE = """
import sys
from dataclasses import replace
from pathlib import Path
from evalsi.service.config import ApiConfig, Config, IngestConfig
from evalsi.service.supervisor import Supervisor
state = Path(sys.argv[1])
http, grpc, otlp_http, otlp_grpc = map(int, sys.argv[2:6])
config = Config(metadata_url=f"sqlite:///{state / 'evalsi.db'}", objects_url=str(state / "objects"),
                api=ApiConfig(http_port=http, grpc_port=grpc), ingest=IngestConfig(http_port=otlp_http,
                grpc_port=otlp_grpc))
Supervisor(config, state, echo=lambda line: print(line, file=sys.stderr, flush=True), fork_services=False).run()
"""


@dataclass
class Run:
    api_ready_s: float = float("nan")
    all_ready_s: float = float("nan")
    cpu_at_ready: dict[str, float] = field(default_factory=dict)
    tree_cpu_s: float = 0.0
    service_ready_s: dict[str, float] = field(default_factory=dict)


def evalsi_bin() -> str:
    beside = Path(sys.executable).parent / "evalsi"
    return str(beside) if beside.exists() else shutil.which("evalsi") or "evalsi"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _label(pid: int) -> str:
    """A forked service carries its name as its process name; an exec'd one says it in its command line."""
    comm = Path(f"/proc/{pid}/comm").read_text().strip()
    if comm not in ("python", "python3", "evalsi"):
        return comm
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    module = next((a for a in argv if a.startswith("evalsi_")), comm)
    label = module.removesuffix(".main").removeprefix("evalsi_")
    return f"worker-{argv[argv.index('--pool') + 1]}" if "--pool" in argv else label


def _ready_events(logs: Path, started_at: float) -> dict[str, float]:
    """Seconds from the start to each service's "evalsi-<service> ready" log line."""
    found = {}
    for log in sorted(logs.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and str(event.get("event", "")).startswith("evalsi-") \
                    and str(event.get("event")).endswith(" ready") and "timestamp" in event:
                stamp = datetime.datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
                found[log.stem] = stamp.timestamp() - started_at
                break
    return found


def serve_once(env: dict[str, str], forked: bool, timeout_s: float) -> Run:
    state = Path(tempfile.mkdtemp(prefix="evalsi-serve-ready-"))
    http, grpc, otlp_http, otlp_grpc = free_ports(4)
    if forked:
        argv = [evalsi_bin(), "serve", "--state-dir", str(state), "--http-port", str(http), "--grpc-port", str(grpc),
                "--otlp-http-port", str(otlp_http), "--otlp-grpc-port", str(otlp_grpc)]
    else:
        argv = [sys.executable, "-c", _EXEC_SERVE, str(state), str(http), str(grpc), str(otlp_http), str(otlp_grpc)]
    run = Run()
    lines: list[str] = []
    ready_line = threading.Event()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_at = time.time()
    started = time.monotonic()
    serve = subprocess.Popen(argv, env=env, cwd=state, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def read_console() -> None:
        assert serve.stderr is not None
        for line in serve.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith("ready in"):
                ready_line.set()

    reader = threading.Thread(target=read_console, daemon=True)
    reader.start()
    try:
        deadline = started + timeout_s
        while time.monotonic() < deadline and serve.poll() is None and not ready_line.is_set():
            if run.api_ready_s != run.api_ready_s:  # nan: not answered yet
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=1) as answer:
                        if answer.status == 200:
                            run.api_ready_s = time.monotonic() - started
                except OSError:
                    pass
            time.sleep(0.02)
        if ready_line.is_set():
            run.all_ready_s = time.monotonic() - started
            if run.api_ready_s != run.api_ready_s:
                run.api_ready_s = run.all_ready_s  # answered between two polls, just before the line
            run.cpu_at_ready["supervisor"] = _cpu_s(serve.pid)
            for pid in _children(serve.pid):
                run.cpu_at_ready[_label(pid)] = _cpu_s(pid)
        else:
            print("  not ready within the timeout; console:\n  " + "\n  ".join(lines[-20:]), file=sys.stderr)
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
        reader.join(timeout=5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.tree_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run.service_ready_s = _ready_events(state / "logs", started_at)
    shutil.rmtree(state, ignore_errors=True)
    return run


def _python_cpu(code: str, env: dict[str, str]) -> float:
    """CPU seconds of a fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def parts_in_isolation(env: dict[str, str]) -> None:
    print("\nparts in isolation (CPU s of a fresh interpreter, median of 3; python -c pass subtracted):")
    base = statistics.median(_python_cpu("pass", env) for _ in range(3))
    imports = {module: statistics.median(_python_cpu(f"import {module}", env) for _ in range(3)) - base
               for module in SERVICES}
    for module, cpu in imports.items():
        print(f"  import {module:<24} {cpu:6.2f}")
    print(f"  {'sum (exec: each service pays its own)':<31} {sum(imports.values()):6.2f}")
    preload = ("from evalsi.service.forked import preload, service_imports\n"
               f"for m in {SERVICES!r}: preload(service_imports(m))")
    preloaded = statistics.median(_python_cpu(preload, env) for _ in range(3)) - base
    print(f"  {'supervisor preload (fork: once)':<31} {preloaded:6.2f}")
    print(f"  {'nats-server start (wall s)':<31} {_nats_start_s():6.2f}")
    print(f"  {'new SQLite stores (wall s)':<31} {asyncio.run(_open_new_stores()):6.2f}  (metadata + traces, migrated)")


def _nats_start_s() -> float:
    from evalsi.bus.natsserver import NatsServer

    started = time.monotonic()
    with NatsServer():
        return time.monotonic() - started


async def _open_new_stores() -> float:
    from evalsi.stores import open_metadata_store
    from evalsi.stores.traces import open_trace_store

    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        metadata = await open_metadata_store(f"sqlite:///{tmp}/evalsi.db")
        traces = await open_trace_store(f"sqlite:///{tmp}/traces.db")
        elapsed = time.monotonic() - started
        await metadata.close()
        await traces.close()
    return elapsed


def report(label: str, runs: list[Run]) -> None:
    ok = [r for r in runs if r.all_ready_s == r.all_ready_s]
    if not ok:
        print(f"{label}: never ready")
        return
    api = statistics.median(r.api_ready_s for r in ok)
    ready = statistics.median(r.all_ready_s for r in ok)
    verdict = "met" if api <= TARGET_S else "NOT met"
    print(f"{label}: api /readyz 200 in {api:.2f} s (target {TARGET_S:.0f} s: {verdict}); every service ready in "
          f"{ready:.2f} s; whole tree {statistics.median(r.tree_cpu_s for r in runs):.2f} CPU s  "
          f"(median of {len(ok)}; each: {', '.join(f'{r.api_ready_s:.2f}/{r.all_ready_s:.2f}' for r in ok)})")
    last = ok[-1]
    cpu = ", ".join(f"{name} {seconds:.2f}" for name, seconds in sorted(last.cpu_at_ready.items()))
    print(f"  CPU s at ready (last run): {cpu}")
    # The api can answer no sooner than the supervisor's work before its fork plus its own: on an idle machine, with
    # a core each, about that long. A loaded one shares its cores (by session, under autogroup scheduling) and
    # stretches every process's share of the tree's CPU.
    critical = statistics.median(r.cpu_at_ready.get("supervisor", 0.0) + r.cpu_at_ready.get("api", 0.0) for r in ok)
    print(f"  the api's critical path (supervisor + api CPU s): {critical:.2f}, a lower bound on its start to ready "
          "(about what an idle machine gives when the rest needs little CPU)")
    ready_at = ", ".join(f"{name} {seconds:.2f}" for name, seconds in sorted(last.service_ready_s.items(),
                                                                               key=lambda item: item[1]))
    print(f"  ready at s (last run, from their logs): {ready_at}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--exec", action="store_true", help="also run every service as a fresh interpreter")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for ready, per run")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="evalsi-serve-ready-pyc-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch)
    print(f"evalsi serve, start to ready; {args.runs} runs; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    serve_once(env, forked=True, timeout_s=args.timeout)  # writes the bytecode, warms the file cache
    modes = [("forked (evalsi serve)", True)] + ([("exec'd (each a fresh interpreter)", False)] if args.exec else [])
    results: dict[str, list[Run]] = {label: [] for label, _ in modes}
    for _ in range(args.runs):  # interleaved, so both modes meet the same load
        for label, forked in modes:
            results[label].append(serve_once(env, forked, args.timeout))
    for label, runs in results.items():
        report(label, runs)
    parts_in_isolation(env)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
