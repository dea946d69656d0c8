"""Per-record pass@k and pass^k estimators from ``n`` trials with ``c`` successes, and their summaries.

- pass@k, the chance that at least one of k trials drawn without replacement passes, estimated without
  bias as ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").
- pass^k, the chance that all k drawn trials pass, estimated as ``C(c, k) / C(n, k)`` (Yao et al. 2024,
  "tau-bench").

Both need ``k <= n``: with fewer trials than k there is no unbiased estimate, so ``k > n`` raises
``ValueError`` naming k and n (and the record index for arrays) instead of returning a guess. Drop or
re-run such records before summarising.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from evalsi.stats.intervals import _as_values, _check_level, _mean, _std, clopper_pearson
from evalsi.stats.summary import Aggregate


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one record with ``n`` trials and ``c`` successes."""
    trials, successes = _check_counts(n, c, k, scalar=True)
    return float(_pass_at_k(trials, successes, k)[0])


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k (all of k trials pass) for one record with ``n`` trials and ``c`` successes."""
    trials, successes = _check_counts(n, c, k, scalar=True)
    return float(_pass_hat_k(trials, successes, k)[0])


def pass_at_k_array(n: ArrayLike, c: ArrayLike, k: int) -> NDArray[np.float64]:
    """Unbiased pass@k for each record; ``n`` and ``c`` are aligned arrays of trials and successes."""
    return _pass_at_k(*_check_counts(n, c, k, scalar=False), k)


def pass_hat_k_array(n: ArrayLike, c: ArrayLike, k: int) -> NDArray[np.float64]:
    """pass^k for each record; ``n`` and ``c`` are aligned arrays of trials and successes."""
    return _pass_hat_k(*_check_counts(n, c, k, scalar=False), k)


def summarize_pass_at_k(n: ArrayLike, c: ArrayLike, k: int, *, level: float = 0.95) -> Aggregate:
    """Mean pass@k over records, with Clopper-Pearson's interval over the records
    (``_summarize_estimates``)."""
    trials, successes = _check_counts(n, c, k, scalar=False)
    return _summarize_estimates(_pass_at_k(trials, successes, k), level)


def summarize_pass_hat_k(n: ArrayLike, c: ArrayLike, k: int, *, level: float = 0.95) -> Aggregate:
    """Mean pass^k over records, with Clopper-Pearson's interval over the records
    (``_summarize_estimates``)."""
    trials, successes = _check_counts(n, c, k, scalar=False)
    return _summarize_estimates(_pass_hat_k(trials, successes, k), level)


def _summarize_estimates(estimates: NDArray[np.float64], level: float) -> Aggregate:
    """Mean of per-record pass@k or pass^k estimates (each in [0, 1]) with Clopper-Pearson's interval for that
    mean out of the records: ``korn_graubard`` at its floor of one unit a record. No design effect is sized from
    the estimates' own spread: with few non-zero estimates it is too noisy (coverage fell to 83% for pass^5 near
    0.02), and a mean of values in [0, 1] varies at most as a proportion does. A Student-t interval over the
    estimates collapsed to [1, 1] when every record passed and covered far below 95% near 0 and 1
    (benchmarks/coverage.py)."""
    level = _check_level(level)
    x = _as_values(estimates)
    if x.size == 0:
        return Aggregate(0, None, None, None, None, level, None)
    mean = float(np.clip(_mean(x) or 0.0, 0.0, 1.0))
    low, high = clopper_pearson(mean * x.size, float(x.size), level)
    return Aggregate(int(x.size), _mean(x), _std(x), low, high, level, "korn-graubard")


def _pass_at_k(n: NDArray[np.int64], c: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    # C(n-c, k) / C(n, k) = prod_{j<k} (n-c-j) / (n-j): k factors in [0, 1], so no huge binomials and no
    # overflow. A factor hits 0 once j reaches n-c (fewer failures than k), making pass@k exactly 1.
    # The loop runs over k, not over records; each step is vectorised across records.
    fails = (n - c).astype(np.float64)
    trials = n.astype(np.float64)
    miss_all = np.ones(n.shape, dtype=np.float64)
    for j in range(k):
        miss_all *= np.maximum(fails - j, 0.0) / (trials - j)
    return 1.0 - miss_all


def _pass_hat_k(n: NDArray[np.int64], c: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    # C(c, k) / C(n, k) = prod_{j<k} (c-j) / (n-j), zero once j reaches c (fewer successes than k).
    successes = c.astype(np.float64)
    trials = n.astype(np.float64)
    pass_all = np.ones(n.shape, dtype=np.float64)
    for j in range(k):
        pass_all *= np.maximum(successes - j, 0.0) / (trials - j)
    return pass_all


def _check_counts(
    n: ArrayLike, c: ArrayLike, k: int, *, scalar: bool
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    trials = _as_counts(n, "n", scalar=scalar)
    successes = _as_counts(c, "c", scalar=scalar)
    if trials.shape != successes.shape:
        raise ValueError(f"n and c must be aligned by record: got {trials.size} and {successes.size} values")
    where = "" if scalar else " for record {i}"
    bad = (successes < 0) | (successes > trials)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"need 0 <= c <= n, got c={successes[i]}, n={trials[i]}" + where.format(i=i))
    too_few = trials < k
    if too_few.any():
        i = int(np.argmax(too_few))
        raise ValueError(
            f"k={k} exceeds n={trials[i]} trials" + where.format(i=i) + "; the estimate needs n >= k"
        )
    return trials, successes


def _as_counts(values: ArrayLike, name: str, *, scalar: bool) -> NDArray[np.int64]:
    raw = np.asarray(values)
    if scalar and raw.ndim != 0:
        raise ValueError(f"{name} must be a single count, got shape {raw.shape}")
    if not scalar and raw.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {raw.shape}")
    flat = raw.reshape(-1)
    if flat.dtype == np.bool_ or not (np.issubdtype(flat.dtype, np.integer) or flat.dtype.kind == "f"):
        raise ValueError(f"{name} must hold integer counts, got dtype {flat.dtype}")
    if flat.dtype.kind == "f":
        # Float input is fine when integral; 2.5 trials is a caller bug, not something to round away.
        integral = np.isfinite(flat) & (flat == np.round(flat))
        if not integral.all():
            raise ValueError(f"{name} must hold integer counts, got {flat[np.argmin(integral)]}")
    return flat.astype(np.int64)
