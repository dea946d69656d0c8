"""Coverage of the intervals near 0 and 1: how often a 95% interval holds the truth, over a grid of samples,
trials and per-sample pass probabilities drawn from Beta distributions (means 0.02 to 0.98).

For each cell it simulates ``--reps`` evaluations and summarizes each with the library's own functions: pass/fail
over trials (clustered by sample), pass@k and pass^k (k = trials). Beside each method in use it prints the
Student-t interval those summaries used before 2026-12-02, for comparison. The target is >= 93% in every cell.

    python benchmarks/coverage.py              # the full grid (a few minutes)
    python benchmarks/coverage.py --quick      # fewer cells and repetitions
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import special

from evalsi.stats import cluster_robust_t, summarize, summarize_pass_at_k, summarize_pass_hat_k, t_interval
from evalsi.stats.passk import pass_at_k_array, pass_hat_k_array

TARGET = 0.93
BETAS = [(1, 49), (1, 9), (1, 3), (1, 1), (3, 1), (5, 1), (9, 1), (49, 1), (0.5, 0.5)]


def _truth(kind: str, a: float, b: float, k: int) -> float:
    """The population value of the metric when each sample's pass probability is Beta(a, b)."""
    if kind == "pass/fail":
        return a / (a + b)
    if kind == "pass@k":  # 1 - E[(1 - p)^k]
        return 1.0 - float(np.exp(special.betaln(a, b + k) - special.betaln(a, b)))
    return float(np.exp(special.betaln(a + k, b) - special.betaln(a, b)))  # E[p^k]


def _cell(rng: np.random.Generator, samples: int, trials: int, a: float, b: float, reps: int,
          kind: str) -> tuple[float, float]:
    """(coverage of the method in use, coverage of the old Student-t method) over ``reps`` evaluations."""
    truth = _truth(kind, a, b, trials)
    hits_new = hits_old = 0
    clusters = np.repeat(np.arange(samples), trials)
    n = np.full(samples, trials)
    for _ in range(reps):
        p = rng.beta(a, b, samples)
        if kind == "pass/fail":
            x = (rng.random((samples, trials)) < p[:, None]).astype(float).reshape(-1)
            new = summarize(x, binary=True, clusters=clusters)
            new_interval = (new.ci_low, new.ci_high)
            old_interval = cluster_robust_t(x, clusters, bounds=(0.0, 1.0))
        else:
            c = rng.binomial(trials, p)
            summary = summarize_pass_at_k if kind == "pass@k" else summarize_pass_hat_k
            estimates = (pass_at_k_array if kind == "pass@k" else pass_hat_k_array)(n, c, trials)
            new = summary(n, c, trials)
            new_interval = (new.ci_low, new.ci_high)
            old_interval = t_interval(estimates, bounds=(0.0, 1.0))
        hits_new += new_interval[0] is not None and new_interval[0] <= truth <= new_interval[1]
        hits_old += old_interval is not None and old_interval[0] <= truth <= old_interval[1]
    return hits_new / reps, hits_old / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="10 and 30 samples, 3 and 5 trials, 300 repetitions")
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args()
    sample_sizes, trial_counts, reps = ([10, 30], [3, 5], 300) if args.quick else ([10, 30, 100, 200], [2, 3, 5, 10],
                                                                                 args.reps)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    worst: dict[str, tuple[float, str]] = {}
    print(f"coverage of 95% intervals over {reps} repetitions a cell (target >= {TARGET:.0%})")
    print(f"{'metric':<10} {'samples':>7} {'trials':>6} {'Beta':>10} {'truth':>6} {'in use':>7} {'old t':>7}")
    for kind in ("pass/fail", "pass@k", "pass^k"):
        for samples in sample_sizes:
            for trials in trial_counts:
                for a, b in BETAS:
                    new, old = _cell(rng, samples, trials, a, b, reps, kind)
                    truth = _truth(kind, a, b, trials)
                    where = f"{samples} samples x {trials} trials, Beta({a:g},{b:g})"
                    if kind not in worst or new < worst[kind][0]:
                        worst[kind] = (new, where)
                    flag = "" if new >= TARGET else "  < target"
                    print(f"{kind:<10} {samples:>7} {trials:>6} {f'({a:g},{b:g})':>10} {truth:>6.3f} {new:>7.1%} "
                          f"{old:>7.1%}{flag}")
    print()
    for kind, (coverage, where) in worst.items():
        verdict = "meets" if coverage >= TARGET else "MISSES"
        print(f"lowest coverage, {kind}: {coverage:.1%} at {where} (target >= {TARGET:.0%}: {verdict})")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
