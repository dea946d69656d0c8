"""Rows to records: in-memory rows, a JSONL file, and a served run's dataset stored as shards (what CreateRun does).

    python benchmarks/dataset_records.py [--records 100000] [--repeat 3]

Prints, for each path, the best of ``--repeat`` runs as wall time and this process's CPU seconds (user + system),
and the load average, since on a shared machine CPU time is the steadier figure:
- ``records_from_rows``: run_million-shaped rows (id, input, output, reference) from memory, as embedded
  ``evaluate()`` builds them;
- ``load_dataset``: the same rows from a JSONL file;
- ``store (CreateRun)``: the file streamed into content-addressed shards and a manifest in a local object
  directory, as the api stores a run's dataset (``api.run_dataset.store_run_dataset``'s work).

Targets (issue 10): records cost at most a few microseconds each, so that embedded exact-match reaches
>= 100,000 record-evaluations/s including records and summaries; CreateRun of 100,000 records <= 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _rows import benchmark_rows

from evalsi.datasets import load_dataset, records_from_rows, stream_dataset
from evalsi.datasets.shards import put_manifest, write_dataset
from evalsi.stores.objects import LocalObjectStore

CREATE_RUN_TARGET_S = 1.0



def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _best(repeat: int, call: Callable[[int], Any]) -> tuple[float, float]:
    walls, cpus = [], []
    for attempt in range(repeat):
        cpu, started = _cpu(), time.perf_counter()
        call(attempt)
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
    return min(walls), min(cpus)


async def _store(path: Path, objects_dir: Path) -> None:
    objects = LocalObjectStore(objects_dir)
    manifest = await write_dataset(objects, stream_dataset(path), source=path.name, format="jsonl")
    await put_manifest(objects, manifest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = benchmark_rows(args.records)
    with tempfile.TemporaryDirectory(prefix="evalsi-bench-") as tmp:
        data = Path(tmp) / "records.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows))
        figures = {
            "records_from_rows": _best(args.repeat, lambda _: records_from_rows(rows)),
            "load_dataset (JSONL)": _best(args.repeat, lambda _: load_dataset(data)),
            "store (CreateRun)": _best(args.repeat, lambda n: asyncio.run(_store(data, Path(tmp) / f"objects-{n}"))),
        }
    for label, (wall, cpu) in figures.items():
        print(f"{label + ':':<22} {args.records:>9,} records in {wall:6.2f} s wall, {cpu:6.2f} s CPU "
              f"= {cpu / args.records * 1e6:5.1f} us CPU a record")
    wall = figures["store (CreateRun)"][0] * 100_000 / args.records
    verdict = "meets" if wall <= CREATE_RUN_TARGET_S else "MISSES"
    print(f"store per 100,000 records: {wall:.2f} s wall (target <= {CREATE_RUN_TARGET_S:.0f} s: {verdict})")
    print("load average: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))


if __name__ == "__main__":
    main()
