"""A worker's own CPU per evaluation result: ``Executor.execute`` over tasks shaped like run_million's.

    python benchmarks/worker_executor.py [--tasks 200] [--records 50] [--evaluators 10] [--repeat 3]

No bus, no store: each task (``--records`` records with outputs, four in five matching, ``--evaluators``
exact-match evaluators under distinct aliases) is parsed from its serialized bytes, executed with the worker's
default call deadline (so sync evaluators run in deadline-watched lanes, as in evalsi-worker), its results made
columns (``move_results_to_columns``: a no-op where the runner wrote them as columns) and its TaskResult serialized,
as the worker does between taking a task from the bus and publishing its result. The figure is the
best of ``--repeat`` passes, in process CPU seconds (all threads) per result, so other load on the machine
inflates it less than wall time would. It isolates what issue 10 calls the worker's overhead around the evaluator.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_EVALUATE, Task
from evalsi.evaluators import Registry
from evalsi.judges.panel import JudgeSet
from evalsi.limits import DEFAULT_CALL_TIMEOUT_S
from evalsi.runs.execute import Executor
from evalsi.runs.result_columns import move_results_to_columns
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.record_pb2 import Content, Record

_ANSWERS = ["Paris", "144", "Jane Austen", "Au", "Jupiter", "1989", "Tokyo", "Mars"]


def _record(i: int) -> Record:
    reference = _ANSWERS[i % len(_ANSWERS)]
    output = reference if i % 5 else reference.lower() + " ."
    return Record(id=f"r{i}", input=Content(text=f"question {i}"), output=Content(text=output),
                  reference=Content(text=reference))


def build_tasks(tasks: int, records: int, evaluators: int) -> list[bytes]:
    bodies = []
    for n in range(tasks):
        task = Task(key=f"task-{n}", run_id="bench", project="bench", stage=STAGE_EVALUATE, shard=n)
        task.records.extend(_record(n * records + i) for i in range(records))
        task.evaluators.extend(EvaluatorRef(ref="builtin/exact-match", alias=f"em{i}") for i in range(evaluators))
        bodies.append(task.SerializeToString())
    return bodies


async def cpu_per_pass(bodies: list[bytes], repeat: int) -> float:
    async with JudgeSet({}) as judges:
        executor = Executor(Registry.from_entry_points(), judges, call_timeout_s=DEFAULT_CALL_TIMEOUT_S)
        await executor.execute(Task.FromString(bodies[0]))  # warm-up: imports, first thread
        best = float("inf")
        for _ in range(repeat):
            started = time.process_time()
            for body in bodies:
                result = await executor.execute(Task.FromString(body))
                move_results_to_columns(result)
                result.SerializeToString()
            best = min(best, time.process_time() - started)
        return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--records", type=int, default=50, help="records per task (run_million's shards hold 50)")
    parser.add_argument("--evaluators", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = args.tasks * args.records * args.evaluators
    best = asyncio.run(cpu_per_pass(build_tasks(args.tasks, args.records, args.evaluators), args.repeat))
    print(f"{args.tasks} tasks of {args.records} records x {args.evaluators} exact-match = {results:,} results: "
          f"best pass {best:.2f} s CPU = {best / results * 1e6:.1f} us per result "
          f"({results / best:,.0f} results per CPU-second)")


if __name__ == "__main__":
    main()
