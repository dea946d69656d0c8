"""Embedded evaluate() throughput, and the time to summarize a million scores with intervals.

    python benchmarks/embedded_evaluate.py [--records 100000] [--scores 1000000]

Targets (DESIGN.md, this 2-core machine): >= 100,000 record-evaluations/s for exact-match; the summary of
1,000,000 scores is reported (no target given; it should stay a small fraction of the run).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from evalsi import stats
from evalsi.datasets import records_from_rows
from evalsi.evaluators import EvalContext, Registry
from evalsi.evaluators.runner import run_evaluators
from evalsi.runs.summary import summarize_results

TARGET_PER_S = 100_000


def _rows(n: int) -> list[dict[str, str]]:
    answers = ["Paris", "144", "Jane Austen", "Au", "Jupiter", "1989", "Tokyo", "Mars"]
    rows = []
    for i in range(n):
        reference = answers[i % len(answers)]
        output = reference if i % 5 else reference.lower() + " ."
        rows.append({"id": f"r{i}", "input": f"question {i}", "output": output, "reference": reference})
    return rows


async def _evaluate(records, bound):
    return await run_evaluators(records, bound, lambda b: EvalContext())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--scores", type=int, default=1_000_000)
    args = parser.parse_args()

    started = time.perf_counter()
    dataset = records_from_rows(_rows(args.records))
    load_s = time.perf_counter() - started

    bound = [Registry.from_entry_points().resolve("exact-match").bind()]
    started = time.perf_counter()
    results = asyncio.run(_evaluate(dataset.records, bound))
    evaluate_s = time.perf_counter() - started
    started = time.perf_counter()
    summaries = summarize_results(results, bound, records=dataset.records)
    summary_s = time.perf_counter() - started
    rate = len(results) / evaluate_s
    verdict = "meets" if rate >= TARGET_PER_S else "MISSES"
    print(f"records built from rows:           {args.records:>9,} in {load_s:6.2f} s")
    print(f"exact-match evaluations:           {len(results):>9,} in {evaluate_s:6.2f} s "
          f"= {rate:>9,.0f}/s  (target >= {TARGET_PER_S:,}/s: {verdict})")
    print(f"summary of those results:          {summary_s:6.3f} s  (mean {summaries[0].mean:.3f}, n {summaries[0].n})")

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
