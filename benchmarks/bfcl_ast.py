"""builtin/bfcl-ast throughput embedded: record-evaluations per second through ``evalsi.evaluate(...)`` over the
records of ``bfcl://examples/benchmarks/bfcl`` (simple, multiple, parallel, parallel_multiple, and the relevance
categories irrelevance and live_relevance), each with a model's answer in BFCL's prompting format
(``[f(a=1), g(b="x")]``, decoded as Python per record), half right and half wrong.

    .venv/bin/python benchmarks/bfcl_ast.py [--records 20000]

Prints ``bfcl-ast  N rec/s  (target >= 20,000)`` (issue 16's figure for deterministic metrics), with records per
CPU-second, the CPU seconds and the load average: the machine is shared. Beside it, a cheap evaluator that needs the
reference and returns a pass without computing anything (``pass-on-reference``): the runner's own cost for such an
evaluator, under bfcl-ast's. A first call on a few records is not timed.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import evalsi
from evalsi import Score, evaluator
from evalsi.datasets import load_dataset
from evalsi.records import to_content
from evalsi.v1alpha1.record_pb2 import Record

TARGET_PER_S = 20_000
DATA = Path(__file__).resolve().parents[1] / "examples" / "benchmarks" / "bfcl"
ANSWERS = {  # record id -> (a right answer, a wrong one)
    "simple_0": ("[geometry.triangle_area(base=10, height=5, unit='units')]", "[geometry.triangle_area(base=10)]"),
    "simple_1": ("[convert_weights(values=[2.5, 3.0], from_unit='kg', to_unit='lb', options={'strict': True})]",
                 "[convert_weights(values=[2.5, 3], from_unit='kg', to_unit='lb')]"),
    "multiple_0": ("[maps.distance(origin='Ljubljana', destination='Maribor', unit='km')]",
                   "[weather.current(city='Maribor')]"),
    "parallel_0": ("[weather.current(city='Rome'), weather.current(city='Paris')]",
                   "[weather.current(city='Rome'), weather.current(city='Rome')]"),
    "parallel_multiple_0": ("[weather.current(city='Piran'), restaurant.book(city='Piran', people=4, time='19:30')]",
                            "[restaurant.book(city='Piran', people='4', time='19:30'), weather.current(city='Piran')]"),
    "irrelevance_0": ("None of the functions can tell who wrote a novel.",
                      "[geometry.triangle_area(base=1, height=1)]"),
    "irrelevance_1": ("[]", "[weather.current(city='Ljubljana')]"),
    "live_relevance_0-0-0": ("[search_engine.query(prompt='Ljubljana marathon news')]", "I can't search the web."),
}
CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_relevance")


@evaluator("bench/pass-on-reference", requires=["reference"], cheap=True)
def pass_on_reference(record: Record) -> Score:
    """What the runner spends on a cheap evaluator that needs the reference and has no batch form, as bfcl-ast,
    without computing anything: the floor under bfcl-ast's per-record path."""
    return Score(passed=True)


def records(count: int) -> list[Record]:
    questions = [r for category in CATEGORIES for r in load_dataset(f"bfcl://{DATA}/{category}")]
    out = []
    for index in range(count):
        record = Record()
        record.CopyFrom(questions[index % len(questions)])
        record.id = f"{record.id}-{index}"
        right, wrong = ANSWERS[questions[index % len(questions)].id]
        record.output.CopyFrom(to_content(right if (index // len(questions)) % 2 == 0 else wrong))
        out.append(record)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="records evaluated")
    args = parser.parse_args()
    data = records(args.records)
    print(f"{args.records} records; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"on {os.cpu_count()} CPUs")
    for label, metric in (("bfcl-ast", "bfcl-ast"), ("pass-on-reference", pass_on_reference)):
        evalsi.evaluate(data[:50], [metric])
        wall, cpu = time.perf_counter(), time.process_time()
        results = evalsi.evaluate(data, [metric])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        mean = next(iter(results.summaries.values())).mean
        print(f"{label:<17} {args.records / wall:>9,.0f} rec/s  (target >= {TARGET_PER_S:,})  "
              f"{args.records / cpu:>9,.0f} rec/CPU-s  cpu {cpu:.2f} s  wall {wall:.2f} s  mean {mean:.4f}")


if __name__ == "__main__":
    main()
