"""The scalar paths for one count or one value (an Evaluate of one record) give the array paths' bits exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalsi.stats.intervals import _centre, _mean, _wilson_arrays, wilson

LEVELS = (0.5, 0.8, 0.9, 0.95, 0.975, 0.99, 0.999)


@pytest.mark.parametrize("n", [*range(1, 40), 100, 999, 12345, 10**6])
def test_wilson_of_one_count_equals_the_vectorised_bounds_bit_for_bit(n: int) -> None:
    for successes in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        for level in LEVELS:
            low, high = _wilson_arrays(np.asarray([successes], dtype=np.float64), float(n), level)
            assert wilson(successes, n, level) == (float(low[0]), float(high[0])), (successes, n, level)


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, 0.3, -2.5, 1e300, 5e-324])
def test_the_mean_of_one_value_is_what_centring_gives_sign_of_zero_included(value: float) -> None:
    centred = _centre(np.array([value]))[0]
    mean = _mean(np.array([value]))
    assert mean == centred and math.copysign(1.0, mean) == math.copysign(1.0, centred)
