"""A run of 1,000,000 evaluation tasks (record x evaluator x trial) on the distributed stack, on Postgres.

    python benchmarks/run_million.py [--records 100000 | --tasks 1000000] [--evaluators 10] [--workers 2]
        [--profile DIR]

Starts a real PostgreSQL 15 (``evalsi.testing.services.PostgresServer``), then the stack: bundled NATS,
one evalsi-api, one evalsi-scheduler and ``--workers`` cpu evalsi-workers, objects in a local directory.
Writes ``--records`` records with their outputs to a JSONL under the api's datasets directory and submits
one run with ``--evaluators`` exact-match evaluators under distinct aliases (outputs given, one trial).

The figure is the wall time from the CreateRun call to the run's SUCCEEDED (followed with WatchRun, then
GetRun), after checking that every evaluation was scored. Also printed: the progress timeline, peak RSS
(VmHWM) of the scheduler and each worker, and the CPU seconds each process used (user + system), which on
this 2-core machine says where the time goes. ``--profile DIR`` attaches ``py-spy record`` to the api,
the scheduler and the workers for the run and writes flame graphs there (``pip install py-spy``).

``--tasks N`` sizes the run by evaluation tasks instead (``N / --evaluators`` records): ``--tasks 10000000`` is the
ten-million variant (1,000,000 records x 10 evaluators).

Target (issue 10, this 2-core machine): 1,000,000 tasks in <= 20 s end to end (pro rata for other sizes: 200 s for
ten million), every task scored, the scheduler's memory bounded. Quick check: ``--tasks 100000``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _stack import BenchStack

import evalsi
from evalsi.service.config import WorkerConfig
from evalsi.testing.services import PostgresServer
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, RunState

TARGET_S_PER_MILLION = 20.0  # seconds for 1,000,000 evaluation tasks, end to end
TERMINAL = {"RUN_STATE_SUCCEEDED", "RUN_STATE_FAILED", "RUN_STATE_CANCELLED", "RUN_STATE_BUDGET_EXCEEDED"}
_TICKS = os.sysconf("SC_CLK_TCK")
_SUFFIX = {"flamegraph": "svg", "raw": "txt", "speedscope": "json"}


def write_dataset(path: Path, n: int) -> None:
    """``n`` records with outputs; four in five match their reference exactly."""
    answers = ["Paris", "144", "Jane Austen", "Au", "Jupiter", "1989", "Tokyo", "Mars"]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            reference = answers[i % len(answers)]
            output = reference if i % 5 else reference.lower() + " ."
            out.write(
                json.dumps({"id": f"r{i}", "input": f"question {i}", "output": output, "reference": reference}) + "\n"
            )


def run_document(dataset: str, evaluators: int) -> dict:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "run-million", "labels": {"evals.si/project": "bench"}},
        "spec": {
            "target": {"outputs": {}},
            "dataset": {"path": dataset},
            "trials": 1,
            "evaluators": [{"ref": "builtin/exact-match", "alias": f"em{i}"} for i in range(evaluators)],
        },
    }


def cpu_seconds(pid: int, *, with_children: bool = False) -> float:
    """User + system CPU of ``pid`` (and, when asked, of its live and reaped children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    # After the command: state is fields[0]; utime, stime, cutime, cstime are stat fields 14-17.
    ticks = int(fields[11]) + int(fields[12])
    if with_children:
        ticks += int(fields[13]) + int(fields[14])
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                child = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(child[1]) == pid:
                ticks += int(child[11]) + int(child[12])
    return ticks / _TICKS


def cpu_table(stack: BenchStack, pg: PostgresServer) -> dict[str, float]:
    table = {c.name: cpu_seconds(c.process.pid) for c in stack.supervisor.children if c.process}
    nats = stack.supervisor.nats
    if nats is not None and nats.pid is not None:
        table["nats-server"] = cpu_seconds(nats.pid)
    if pg.pid is not None:
        table["postgres (all backends)"] = cpu_seconds(pg.pid, with_children=True)
    return table


async def _phases(dsn: str, nats_url: str, run_id: str, options: dict[str, object]) -> dict[str, float]:
    """Wall-clock instants (s since the epoch) of the run's phases, from the store and the streams."""
    import asyncpg
    import nats

    out: dict[str, float] = {}
    conn = await asyncpg.connect(dsn)
    try:
        first, last = await conn.fetchrow(
            "SELECT min(update_us), max(update_us) FROM tasks WHERE run_id = $1 AND state = 'done'", run_id
        )
        out["first task done"], out["last task done"] = first / 1e6, last / 1e6
    finally:
        await conn.close()
    nc = await nats.connect(nats_url, **options)
    try:
        for stream, label in (("WORK", "last task published"), ("RESULTS", "last result published")):
            reply = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)).data)
            stamp = reply.get("state", {}).get("last_ts", "")
            if stamp and not stamp.startswith("0001"):
                from datetime import datetime

                whole, _, fraction = stamp.rstrip("Z").partition(".")
                at = datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (fraction or "0"))
                out[label] = at
    finally:
        await nc.close()
    return out


def start_profilers(stack: BenchStack, directory: Path, fmt: str) -> list[subprocess.Popen[bytes]]:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    directory.mkdir(parents=True, exist_ok=True)
    profilers = []
    for child in stack.supervisor.children:
        if child.process is None:
            continue
        out = directory / f"{child.name}.{_SUFFIX[fmt]}"
        profilers.append(
            subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(child.process.pid),
                    "--rate",
                    "100",
                    "--nonblocking",
                    "--format",
                    fmt,
                    "-o",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=(directory / f"{child.name}.py-spy.log").open("wb"),
            )
        )
    time.sleep(1.0)  # let them attach before the clock starts
    return profilers


def stop_profilers(profilers: list[subprocess.Popen[bytes]]) -> None:
    for profiler in profilers:
        profiler.send_signal(signal.SIGINT)
    for profiler in profilers:
        try:
            profiler.wait(timeout=60)
        except subprocess.TimeoutExpired:
            profiler.kill()


def follow(client: evalsi.Client, run_id: str, project: str, started: float) -> list[tuple[float, str, int]]:
    """The run's events until it ends (then GetRun until terminal): (seconds since start, state, completed)."""
    timeline: list[tuple[float, str, int]] = []
    try:
        for event in client.runs.watch(run_id, project=project):
            timeline.append((time.perf_counter() - started, RunState.Name(event.state), event.progress.completed))
            if RunState.Name(event.state) in TERMINAL:
                break
    except Exception as exc:  # the stream may end early; polling below still sees the end
        print(f"(watch ended early: {exc}; polling)")
    while True:
        run = client.runs.get(run_id, project=project)
        if RunState.Name(run.state) in TERMINAL:
            if not timeline or timeline[-1][1] not in TERMINAL:
                timeline.append((time.perf_counter() - started, RunState.Name(run.state), run.progress.completed))
            return timeline
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=None,
                        help="evaluation tasks in all (records x evaluators): sets --records to TASKS / --evaluators")
    parser.add_argument("--evaluators", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2, help="cpu worker processes")
    parser.add_argument("--profile", type=Path, default=None, help="write py-spy profiles to this directory")
    parser.add_argument(
        "--profile-format",
        choices=("flamegraph", "raw", "speedscope"),
        default="flamegraph",
        help="py-spy output: flame graph SVG, collapsed stacks (raw) or speedscope JSON",
    )
    args = parser.parse_args()
    if args.tasks is not None:
        if args.tasks % args.evaluators:
            parser.error(f"--tasks {args.tasks} is not a multiple of --evaluators {args.evaluators}")
        args.records = args.tasks // args.evaluators
    expected = args.records * args.evaluators
    target_s = TARGET_S_PER_MILLION * expected / 1_000_000

    with (
        PostgresServer() as pg,
        BenchStack(metadata_url=pg.dsn, workers=(WorkerConfig("cpu", args.workers, 16),)) as stack,
    ):
        dataset = stack.datasets / "million.jsonl"
        started = time.perf_counter()
        write_dataset(dataset, args.records)
        print(
            f"dataset: {args.records:,} records x {args.evaluators} exact-match evaluators = {expected:,} tasks "
            f"({dataset.stat().st_size / 2**20:.1f} MiB JSONL, written in {time.perf_counter() - started:.1f} s)"
        )
        print(f"stack: api, 1 scheduler, {args.workers} cpu workers, bundled NATS; Postgres {pg.dsn}; local objects")
        profilers = start_profilers(stack, args.profile, args.profile_format) if args.profile else []
        cpu_before = cpu_table(stack, pg)
        with evalsi.Client(stack.grpc, timeout=300) as client:
            origin = time.time()
            started = time.perf_counter()
            handle = client.runs.create(run_document(dataset.name, args.evaluators))
            created_s = time.perf_counter() - started
            timeline = follow(client, handle.id, handle.run.project, started)
            wall_s = time.perf_counter() - started
            run = client.runs.get(handle.id, project=handle.run.project)
        nats_url = stack.supervisor.nats.url if stack.supervisor.nats else stack.config.nats_url
        phases = asyncio.run(_phases(pg.dsn, nats_url, run.id, stack.bus_options()))
        phases["scheduler started the run (RUNNING)"] = run.start_time.ToMicroseconds() / 1e6
        phases["SUCCEEDED (summaries written)"] = run.end_time.ToMicroseconds() / 1e6
        cpu_after = cpu_table(stack, pg)
        rss = stack.peak_rss()
        stop_profilers(profilers)
        restarts = stack.restarts()

        print(f"CreateRun answered in {created_s:.2f} s (run {run.id}); timeline (s, state, completed bus tasks):")
        spacing = max(1.0, timeline[-1][0] / 20)
        last_shown = -spacing
        for at, state, completed in timeline:
            if at - last_shown >= spacing or state in TERMINAL:
                print(f"  {at:7.2f}  {state:<22} {completed:>8,}")
                last_shown = at
        print("phases (s after the CreateRun call):")
        phases["CreateRun stored the run"] = run.create_time.ToMicroseconds() / 1e6
        for label, at in sorted(phases.items(), key=lambda item: item[1]):
            print(f"  {at - origin:7.2f}  {label}")
        print(
            f"planned tasks (bus messages): {run.progress.total_tasks:,}; evaluations scored "
            f"{run.progress.scored:,}, skipped {run.progress.skipped:,}, errors {run.progress.errors:,}"
        )
        print(
            "CPU seconds during the run:  "
            + ", ".join(f"{name} {cpu_after[name] - cpu_before.get(name, 0.0):.1f}" for name in cpu_after)
        )
        print(
            "peak RSS (VmHWM):            "
            + ", ".join(f"{name} {value:.0f} MiB" for name, value in rss.items() if value is not None and name != "api")
            + (f", api {rss['api']:.0f} MiB" if rss.get("api") else "")
        )
        if restarts:
            print(f"WARNING: children restarted during the run: {restarts}")
        if args.profile:
            print(f"profiles: {args.profile}/*.{_SUFFIX[args.profile_format]}")
        if run.state != RUN_STATE_SUCCEEDED:
            raise SystemExit(f"the run ended {RunState.Name(run.state)}: {run.message}\n{stack.logs()}")
        if run.progress.scored != expected:
            raise SystemExit(f"expected {expected:,} scored evaluations, the run reports {run.progress.scored:,}")
        verdict = "meets" if wall_s <= target_s else "MISSES"
        print(
            f"{expected:,} evaluation tasks, CreateRun to SUCCEEDED: {wall_s:7.1f} s  "
            f"= {expected / wall_s:>9,.0f}/s  (target <= {target_s:g} s: {verdict})"
        )


if __name__ == "__main__":
    main()
