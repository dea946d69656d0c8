"""Embedded evaluate() throughput end to end, its parts, and the time to summarize a million scores.

    python benchmarks/embedded_evaluate.py [--records 100000] [--scores 1000000]
    python benchmarks/embedded_evaluate.py --memory [--sizes 100000,1000000]

``evalsi.evaluate(rows, ["exact-match"])`` is timed as a user calls it: records built from the rows, the run planned
and driven on the run engine in this process (driver, in-process bus and store, executor), every record evaluated,
the results stored and summarized. Its parts are then timed alone on the same rows (records from rows, the
evaluator loop writing results as columns, the summaries folded from them); what the total spends beyond them is
the engine's own cost.

Targets (DESIGN.md and issue 10, this 2-core machine): >= 100,000 record-evaluations/s for exact-match including
records and summaries; the summary of 1,000,000 scores is reported (no target; a small fraction of the run).

``--memory`` prints the peak RSS of ``evaluate()`` over each size of ``--sizes``, in memory (a budget no run
reaches) and beyond a budget of 0 MiB (results in a local SQLite store, ``runs.local.run_locally``), each in a fresh
process: the peak before the call (the rows and the interpreter) and during it, with its wall and CPU time. Then the
same for ``evalsi run``'s engine (``runs.embedded.execute_run``) over the rows as a JSONL file: the dataset streams
in as ``evaluate()``'s rows do, so beyond the budget neither the records nor the results are all held.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _rows import benchmark_rows

import evalsi
from evalsi import stats
from evalsi.datasets import stream_rows
from evalsi.evaluators import EvalContext, Registry
from evalsi.evaluators.runner import ColumnLists, run_evaluators
from evalsi.runs.collector import collector_paused
from evalsi.runs.intake import take_records
from evalsi.runs.result_columns import fold_columns
from evalsi.runs.summary import SummaryBuilder
from evalsi.sdk import EVALUATE_SHARD_SIZE
from evalsi.v1alpha1.run_pb2 import EvalRun

TARGET_PER_S = 100_000
DEEPEVAL_FACTOR = 5  # issue 10: at least five times DeepEval's bare measure() loop over the same rows
DEEPEVAL_ROWS = 10_000  # its loop is timed on a prefix of the rows (per CPU-second, so the sizes need not match)


def _deepeval(python: str | None, rows: int) -> dict[str, float] | None:
    """DeepEval's ExactMatchMetric ``measure()`` in a bare loop over the first ``rows`` rows (``_deepeval_loop.py``,
    run by ``python``, an interpreter whose environment has deepeval; by this one when it has it): its calls, wall
    and CPU seconds. None when no interpreter here has deepeval (it is no dependency of this project, and this
    script installs nothing)."""
    if python is None:
        if importlib.util.find_spec("deepeval") is None:
            return None
        python = sys.executable
    loop = Path(__file__).with_name("_deepeval_loop.py")
    done = subprocess.run([python, str(loop), str(rows)], check=True, capture_output=True, text=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _timed(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """(what ``call`` returned, wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = call()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def _peak_mib() -> float:
    """This process's peak resident set so far (VmHWM), MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _measure_once(records: int, budget: float) -> None:
    """One evaluate() in this process; prints its peak RSS before and during the call, its wall and CPU time."""
    rows = benchmark_rows(records)
    before = _peak_mib()
    results, wall_s, cpu_s = _timed(lambda: evalsi.evaluate(rows, ["exact-match"], memory_budget=budget))
    during = _peak_mib()
    where = "SQLite store" if results.stored is not None else "in memory"
    mean = results.metric("exact-match").mean
    n = sum(1 for _ in results)  # read back, from the store when there is one
    print(f"{records:>9,} records, results {where:<12}: peak RSS {before:7.0f} MiB before, {during:7.0f} MiB during "
          f"(+{during - before:5.0f}); {wall_s:6.1f} s ({cpu_s:5.1f} CPU s); {n:,} results read back, mean {mean:.3f}")
    results.close()


def _measure_run_once(records: int, budget: float) -> None:
    """``evalsi run``'s engine (``runs.embedded.execute_run``) over a JSONL file of the rows, exact-match, in this
    process; prints its peak RSS before and during the run, its wall and CPU time. The file is written by a child
    process first, so that writing it leaves nothing in this one."""
    from evalsi.runs.embedded import execute_run
    from evalsi.runs.spec import parse_eval_run

    with tempfile.TemporaryDirectory(prefix="evalsi-bench-") as directory:
        data = Path(directory) / "rows.jsonl"
        subprocess.run([sys.executable, __file__, "--write-rows", str(records), str(data)], check=True)
        spec = {"dataset": {"path": str(data)}, "evaluators": [{"ref": "exact-match"}]}
        run = parse_eval_run({"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "bench"},
                              "spec": spec}, source="bench.yaml")
        before = _peak_mib()
        outcome, wall_s, cpu_s = _timed(lambda: asyncio.run(execute_run(
            run, memory_budget=budget, cache=False, collect_records=False)))
        during = _peak_mib()
        with outcome.results as results:
            where = "SQLite store" if results.stored is not None else "in memory"
            mean = results.metric("exact-match").mean
            print(f"{records:>9,} records, evalsi run, {where:<12}: peak RSS {before:7.0f} MiB before, {during:7.0f} "
                  f"MiB during (+{during - before:5.0f}); {wall_s:6.1f} s ({cpu_s:5.1f} CPU s); mean {mean:.3f}")


def _write_rows(records: int, path: str) -> None:
    with open(path, "w") as out:
        for row in benchmark_rows(records):
            out.write(json.dumps(row) + "\n")


def _memory(sizes: list[int]) -> None:
    print(f"load average {os.getloadavg()[0]:.2f}; each line a fresh process")
    for records in sizes:
        for budget in (1e9, 0.0):
            subprocess.run([sys.executable, __file__, "--measure-once", str(records), str(budget)], check=True)
        for budget in (1e9, 0.0):
            subprocess.run([sys.executable, __file__, "--measure-run-once", str(records), str(budget)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--scores", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=3, help="evaluate() calls timed; the first is the figure")
    parser.add_argument("--deepeval-python", metavar="PATH",
                        help="an interpreter whose environment has deepeval, for the side-by-side loop")
    parser.add_argument("--memory", action="store_true", help="peak RSS with and without a memory budget")
    parser.add_argument("--sizes", default="100000,1000000", help="record counts of --memory")
    parser.add_argument("--measure-once", nargs=2, metavar=("RECORDS", "BUDGET_MB"), help=argparse.SUPPRESS)
    parser.add_argument("--measure-run-once", nargs=2, metavar=("RECORDS", "BUDGET_MB"), help=argparse.SUPPRESS)
    parser.add_argument("--write-rows", nargs=2, metavar=("RECORDS", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_once:
        _measure_once(int(args.measure_once[0]), float(args.measure_once[1]))
        return
    if args.measure_run_once:
        _measure_run_once(int(args.measure_run_once[0]), float(args.measure_run_once[1]))
        return
    if args.write_rows:
        _write_rows(int(args.write_rows[0]), args.write_rows[1])
        return
    if args.memory:
        _memory([int(size) for size in args.sizes.split(",")])
        return
    rows = benchmark_rows(args.records)
    bound = [Registry.from_entry_points().resolve("exact-match").bind()]
    evalsi.evaluate(rows[:100], ["exact-match"])  # imports and first-call costs out of the figures

    # The first full call is the figure (as a user's first evaluate() of this size: its memory is new to the
    # process, so it pays the page faults); later calls are printed beside it.
    calls: list[tuple[float, float, float, float]] = []  # wall s, CPU s, user s, system s
    results: Any = None
    for _ in range(args.calls):
        results = None  # the previous call's results go first, as a user's would
        before = resource.getrusage(resource.RUSAGE_SELF)
        results, total_s, total_cpu = _timed(lambda: evalsi.evaluate(rows, ["exact-match"]))
        after = resource.getrusage(resource.RUSAGE_SELF)
        calls.append((total_s, total_cpu, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
        if len(calls) == 1:
            everything, read_s, read_cpu = _timed(lambda held=results: list(held))  # every result as a message
    total_s, total_cpu, user_s, system_s = calls[0]
    n = len(everything)
    with collector_paused():  # as evaluate() runs them (runs.collector), so that the parts add up
        # The records as evaluate() takes them in: a stream of the rows, held within the budget (runs.intake).
        document = EvalRun()
        document.spec.target.outputs.SetInParent()
        document.spec.evaluators.add().CopyFrom(bound[0].to_ref())
        taken, load_s, load_cpu = _timed(lambda: asyncio.run(
            take_records(stream_rows(rows), document, budget_mb=1e9, shard_size=EVALUATE_SHARD_SIZE)
        ))
        records = taken.records or []
        # As an in-process evaluation task runs them: results written as columns (a row without a message for a
        # bool verdict, the columns as Python lists, runs.local), then folded a column at a time into the summaries.
        columns = ColumnLists()
        _, evaluate_s, evaluate_cpu = _timed(
            lambda: asyncio.run(run_evaluators(records, bound, lambda b: EvalContext(), columns=columns))
        )
        scored = columns.data

        def summarize() -> None:
            builder = SummaryBuilder(bound)
            fold_columns(builder, columns)
            builder.summaries()

        _, summary_s, summary_cpu = _timed(summarize)
    engine_s = total_s - load_s - evaluate_s - summary_s
    engine_cpu = total_cpu - load_cpu - evaluate_cpu - summary_cpu
    rate = n / total_s
    verdict = "meets" if rate >= TARGET_PER_S else "MISSES"
    summary = results.metric("exact-match")
    print(f"load average {os.getloadavg()[0]:.2f}; wall s (CPU s of this process)")
    print(f"evalsi.evaluate() end to end:      {n:>9,} evaluations in {total_s:6.2f} s ({total_cpu:5.2f}) "
          f"= {rate:>9,.0f}/s  (target >= {TARGET_PER_S:,}/s: {verdict}); mean {summary.mean:.3f}, n {summary.n}")
    print(f"  its CPU: user {user_s:.2f} s, system {system_s:.2f} s; = {n / total_cpu:,.0f} per CPU-second")
    print(f"  then every result read:          {n:>9,} results in {read_s:6.2f} s ({read_cpu:5.2f})")
    if len(calls) > 1:
        later = ", ".join(f"{wall:.2f} s ({cpu:.2f}; user {user:.2f}, system {system:.2f})"
                          for wall, cpu, user, system in calls[1:])
        print(f"  later calls in this process:     {later}")
    print(f"  records taken in from rows:      {args.records:>9,} in {load_s:6.2f} s ({load_cpu:5.2f})")
    print(f"  exact-match evaluator loop:      {len(scored):>9,} in {evaluate_s:6.2f} s ({evaluate_cpu:5.2f})")
    print(f"  summaries of those results:      {summary_s:>19.2f} s ({summary_cpu:5.2f})")
    if engine_cpu >= 0:
        print(f"  the run engine (the rest):       {engine_s:>19.2f} s ({engine_cpu:5.2f})")
    else:  # timed apart, the parts cost more than inside evaluate() (warmer caches, records parsed as they run)
        print(f"  the run engine (the rest):       the parts timed apart add up to more than the whole "
              f"({total_cpu - engine_cpu:.2f} CPU s); no remainder to attribute")
    deepeval = _deepeval(args.deepeval_python, DEEPEVAL_ROWS)
    if deepeval is None:
        print("DeepEval side by side: not run, deepeval is not installed (--deepeval-python PATH: an interpreter "
              "that has it)")
    else:
        # Per CPU-second on both sides: on a shared machine wall seconds depend on the other processes.
        theirs = deepeval["calls"] / deepeval["cpu_s"]
        ours = n / total_cpu
        verdict = "meets" if ours >= DEEPEVAL_FACTOR * theirs else "MISSES"
        print(f"DeepEval ExactMatchMetric.measure() bare loop: {deepeval['calls']:,.0f} calls in "
              f"{deepeval['wall_s']:.2f} s ({deepeval['cpu_s']:.2f}) = {theirs:,.0f} per CPU-second; evaluate() "
              f"{ours:,.0f} per CPU-second is {ours / theirs:.1f}x (target >= {DEEPEVAL_FACTOR}x: {verdict})")

    rng = np.random.default_rng(0)
    values = rng.random(args.scores)
    passes = (values > 0.3).astype(np.float64)
    clusters = rng.integers(0, args.scores // 4, args.scores)
    for label, call in (
        ("t interval", lambda: stats.summarize(values, binary=False)),
        ("Wilson interval", lambda: stats.summarize(passes, binary=True)),
        ("cluster-robust t", lambda: stats.summarize(values, binary=False, clusters=clusters)),
        ("bootstrap (2,000 resamples)", lambda: stats.summarize(values, binary=False, method="bootstrap")),
    ):
        started = time.perf_counter()
        call()
        print(f"summarize {args.scores:,} scores, {label + ':':<28} {time.perf_counter() - started:6.3f} s")


if __name__ == "__main__":
    main()
