"""Peak memory of every process of a served run, by dataset size: it must not grow with the dataset.

    python benchmarks/peak_rss.py [--sizes 10000 1000000] [--sqlite] [--workers 1]

For each size, a fresh stack (bundled NATS, evalsi-api, one evalsi-scheduler, ``--workers`` cpu workers, objects
in a local directory, Postgres unless ``--sqlite``) runs one exact-match run over a JSONL of that many records
with their outputs (written under the api's datasets directory, read there by the api: ``spec.dataset.path``).
When the run has SUCCEEDED, with every record scored, the peak RSS (``VmHWM`` of ``/proc/<pid>/status``) of each
process is read. A fresh stack per size, because a peak never goes down.

Target (issue 10): at the largest size, every process within 1.25x (+40 MiB) of its peak at the smallest size.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

from _stack import BenchStack

import evalsi
from evalsi.service.config import WorkerConfig
from evalsi.testing.services import PostgresServer
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, RunState

RATIO, SLACK_MIB = 1.25, 40.0


def write_dataset(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            reference = f"answer {i % 97}"
            output = reference if i % 5 else "something else"
            out.write(json.dumps({"id": f"r{i}", "input": f"question {i}", "output": output,
                                  "reference": reference}) + "\n")


def run_document(dataset: str) -> dict[str, object]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "peak-rss", "labels": {"evals.si/project": "bench"}},
        "spec": {"target": {"outputs": {}}, "dataset": {"path": dataset}, "evaluators": [{"ref": "exact-match"}]},
    }


@contextlib.contextmanager
def metadata_url(sqlite: bool) -> Iterator[str | None]:
    if sqlite:
        yield None  # the stack's own SQLite file
        return
    with PostgresServer() as pg:
        yield pg.dsn


def measure(records: int, *, sqlite: bool, workers: int) -> dict[str, float]:
    """Peak RSS in MiB of each process after a run over ``records`` records."""
    with metadata_url(sqlite) as url, BenchStack(metadata_url=url, workers=(WorkerConfig("cpu", workers, 16),)) \
            as stack:
        dataset = stack.datasets / "records.jsonl"
        write_dataset(dataset, records)
        started = time.perf_counter()
        with evalsi.Client(stack.grpc, timeout=600) as client:
            handle = client.runs.create(run_document(dataset.name))
            created = time.perf_counter() - started
            run = handle.wait(poll_s=1.0)
        wall = time.perf_counter() - started
        if run.state != RUN_STATE_SUCCEEDED or run.progress.scored != records:
            raise SystemExit(
                f"{records:,} records: the run ended {RunState.Name(run.state)} with {run.progress.scored:,} scored: "
                f"{run.message}\n{stack.logs()}"
            )
        peaks = {name: value for name, value in stack.peak_rss().items() if value is not None}
        print(f"{records:>10,} records: CreateRun {created:6.1f} s, run {wall:6.1f} s; peak RSS "
              + ", ".join(f"{name} {value:.0f} MiB" for name, value in sorted(peaks.items())), flush=True)
        return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--sqlite", action="store_true", help="SQLite instead of Postgres for runs and results")
    parser.add_argument("--workers", type=int, default=1, help="cpu worker processes")
    args = parser.parse_args()
    sizes = sorted(args.sizes)
    by_size = {size: measure(size, sqlite=args.sqlite, workers=args.workers) for size in sizes}
    smallest, largest = by_size[sizes[0]], by_size[sizes[-1]]
    print(f"\npeak RSS (MiB) at {sizes[-1]:,} vs {sizes[0]:,} records; target <= {RATIO}x + {SLACK_MIB:g} MiB:")
    missed = []
    for name in sorted(smallest):
        if name not in largest:
            continue
        bound = smallest[name] * RATIO + SLACK_MIB
        verdict = "meets" if largest[name] <= bound else "MISSES"
        if verdict == "MISSES":
            missed.append(name)
        print(f"  {name:<14} {smallest[name]:7.0f} -> {largest[name]:7.0f}  (bound {bound:5.0f}: {verdict})")
    print("every process meets the target" if not missed else f"over the bound: {', '.join(missed)}")


if __name__ == "__main__":
    main()
