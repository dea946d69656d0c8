"""What stamping records with their scoring's isolation costs at a run's end (runs.record_isolation).

A run whose code evaluators ran reads its results once more for their isolation reports, copies each scored record
with the weakest report in its provenance and stores the copies (here: serialized, as the object store gets them).
Prints microseconds of CPU per record beside the cost of one sandboxed execution (~30-40 ms wall on bubblewrap,
docs/sandbox.md), with the load average: the stamping should be noise beside the executions it records.

    .venv/bin/python benchmarks/record_isolation.py --records 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from collections.abc import AsyncIterator

from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.records import to_value
from evalsi.runs.record_isolation import isolation_by_record, stamp
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import EvaluationResult, Score

ISOLATION = {"driver": "bwrap", "level": "namespaced", "enforcement": "full", "requested": "namespaced",
             "bounds": {"memory": "cgroup v1 memory.limit_in_bytes=268435456", "pids": "rlimit NPROC=64",
                        "network": "unshared (loopback only)", "syscalls": "seccomp-bpf"}, "not_enforced": []}
PROGRAM = "def add(a, b):\n    return a + b\n" * 10  # a 20-line candidate


def _inputs(n: int) -> tuple[list[Record], list[EvaluationResult]]:
    records = [Record(id=f"r{i}") for i in range(n)]
    for record in records:
        record.output.text = PROGRAM
    results = []
    for evaluator in ("unit-tests", "code-exec-tests"):
        for record in records:
            score = Score(name="passed", passed=True)
            score.metadata["isolation"].CopyFrom(to_value(ISOLATION))
            results.append(EvaluationResult(record_id=record.id, evaluator=evaluator, scores=[score]))
    return records, results


async def _batches(results: list[EvaluationResult]) -> AsyncIterator[list[EvaluationResult]]:
    for start in range(0, len(results), 5000):
        yield results[start : start + 5000]


async def _once(records: list[Record], results: list[EvaluationResult]) -> int:
    found = await isolation_by_record(_batches(results))
    size = 0
    for start in range(0, len(records), 1000):
        size += len(TaskRecords(records=stamp(records[start : start + 1000], found)).SerializeToString())
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    records, results = _inputs(args.records)
    for round_ in range(args.rounds):
        cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        size = asyncio.run(_once(records, results))
        cpu1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall0
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        print(f"round {round_}: {args.records} records (2 sandboxed results each): {cpu / args.records * 1e6:.1f} us "
              f"CPU/record, {wall / args.records * 1e6:.1f} us wall/record, {size / args.records:.0f} bytes/record "
              f"stored; target: noise beside one sandboxed execution (~35,000 us); load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
