"""Rag pack throughput embedded: record-evaluations per second of its deterministic metric, citation-accuracy,
through ``evalsi.evaluate(...)`` (records built from rows, the run planned and driven in this process, every record
evaluated, results stored and summarized), over answers of 20 to 60 words citing three to five retrieved chunks,
one in ten citing a chunk that does not exist.

    .venv/bin/python benchmarks/pack_rag.py [--records 20000]

Prints ``metric  N rec/s  (target >= 20,000)`` (issue 16), with the CPU seconds and the load average: the machine is
shared. Two shapes: chunks and citations only (``valid``), and with ``metadata.supporting`` (precision and recall
too); exact-match over the second shape's rows shows what the engine itself spends on such records (building records
with context and metadata from dicts). The same rows are then given as Records built beforehand (``make_record``,
not timed), as a caller holding Records passes them, beside a cheap evaluator returning three constant numbers
(the runner's own cost for three outputs a record). The judged metrics (faithfulness, answer-relevance,
context-precision, context-recall) are bounded by the judge, not timed here. The first call is made on a few rows
beforehand and not timed.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from typing import Any

import evalsi
from evalsi import Output, Score, evaluator
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record

TARGET_PER_S = 20_000
_SENTENCE = ("the tower was completed in 1889 and is the most visited paid monument in the world its height is 330 "
             "metres and it was the tallest structure until 1930 when the chrysler building was finished")


def rows(count: int, *, supporting: bool, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    vocabulary = _SENTENCE.split()
    out = []
    for index in range(count):
        chunks = [" ".join(rng.choice(vocabulary) for _ in range(25)) for _ in range(rng.randint(3, 5))]
        words = [rng.choice(vocabulary) for _ in range(rng.randint(20, 60))]
        for _ in range(rng.randint(1, 3)):
            cited = rng.randint(1, len(chunks) + (3 if index % 10 == 0 else 0))
            words.insert(rng.randint(0, len(words)), f"[{cited}]")
        row: dict[str, Any] = {"id": f"r{index}", "output": " ".join(words), "reference": " ".join(words),
                               "context": chunks}
        if supporting:
            row["metadata"] = {"supporting": sorted(rng.sample(range(1, len(chunks) + 1), 2))}
        out.append(row)
    return out


@evaluator("bench/three-constants", requires=["output"], cheap=True,
           outputs=[Output("valid", "number"), Output("precision", "number"), Output("recall", "number")])
def three_constants(record: Record) -> list[Score]:
    """What the runner spends on a cheap evaluator returning three numbers, without computing anything: the floor
    under citation-accuracy's per-record path."""
    return [Score(name="valid", number=1.0), Score(name="precision", number=0.5), Score(name="recall", number=0.5)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="rows evaluated per shape")
    args = parser.parse_args()
    print(f"{args.records} records per metric; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"on {os.cpu_count()} CPUs")
    shapes: tuple[tuple[str, Any, bool, bool], ...] = (
              ("citation-accuracy", "builtin/citation-accuracy", False, False),
              ("citation-accuracy-supporting", "builtin/citation-accuracy", True, False),
              ("exact-match-same-rows", "exact-match", True, False),
              ("citation-accuracy-records", "builtin/citation-accuracy", True, True),
              ("exact-match-same-records", "exact-match", True, True),
              ("three-constant-scores-records", three_constants, True, True))
    for label, metric, supporting, as_records in shapes:
        data: list[Any] = rows(args.records, supporting=supporting)
        if as_records:
            data = [make_record(**row) for row in data]
        evalsi.evaluate(data[:50], [metric])
        wall, cpu = time.perf_counter(), time.process_time()
        results = evalsi.evaluate(data, [metric])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        means = " ".join(f"{name} {summary.mean:.4f}" for name, summary in results.summaries.items())
        print(f"{label:<29} {args.records / wall:>9,.0f} rec/s  (target >= {TARGET_PER_S:,})  "
              f"{args.records / cpu:>9,.0f} rec/CPU-s  cpu {cpu:.2f} s  wall {wall:.2f} s  mean {means}")


if __name__ == "__main__":
    main()
