"""The percentile bootstrap of a million scores with 2,000 resamples: CPU time beside its target (issue 11).

    python benchmarks/bootstrap.py [--values 1000000] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from evalsi.stats import percentile_bootstrap

TARGET_S = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=1_000_000)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = {
        "numbers (lognormal)": (rng.lognormal(size=args.values), None),
        "numbers in clusters of 5": (rng.normal(size=args.values), np.arange(args.values) // 5),
        "pass/fail": ((rng.random(args.values) < 0.7).astype(float), None),
    }
    for name, (values, clusters) in cases.items():
        cpu, wall = time.process_time(), time.perf_counter()
        low, high = percentile_bootstrap(values, seed=1, resamples=args.resamples, clusters=clusters)  # type: ignore[misc]
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        verdict = "meets" if cpu <= TARGET_S else "MISSES"
        print(f"{name:<26} {args.values:,} values x {args.resamples:,} resamples: {cpu:.2f} CPU s ({wall:.2f} s wall) "
              f"[{low:.5f}, {high:.5f}]  target <= {TARGET_S:g} s: {verdict}")


if __name__ == "__main__":
    main()
