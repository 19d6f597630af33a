"""Slow, obvious references for dpfast.intervals: convolutions done one draw at a time.

``weighted_pmf`` builds the distribution of ``Σ w η`` for discrete Laplace draws by
convolving each draw's probabilities (spread on the multiples of its weight) into the
running sum; ``continuous_probability`` integrates ``P(|Σ w L| <= h)`` for continuous
Laplace draws with scipy's adaptive quadrature, one draw per nested integral.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import integrate


def discrete_laplace_pmf(alpha: float, radius: int) -> np.ndarray:
    """``P(η = y)`` for ``y = -radius .. radius``: ``(1 - a)/(1 + a) a^|y|``, ``a = alpha``."""
    y = np.arange(-radius, radius + 1)
    return (1 - alpha) / (1 + alpha) * alpha ** np.abs(y)


def weighted_pmf(weights: tuple[tuple[int, int], ...], alpha: float, radius: int) -> np.ndarray:
    """Probabilities of ``Σ w η`` on ``-R .. R`` (``R`` the sum of ``w * radius``)."""
    one = discrete_laplace_pmf(alpha, radius)
    total = np.array([1.0])
    for w, c in weights:
        spread = np.zeros(2 * radius * w + 1)
        spread[::w] = one
        for _ in range(c):
            total = np.convolve(total, spread)
    return total


def two_sided_quantile(pmf: np.ndarray, level: float) -> int:
    """Smallest ``h`` with ``P(|S| <= h) >= level`` for ``pmf`` centred on its middle."""
    middle = pmf.size // 2
    for h in range(middle + 1):
        if pmf[middle - h : middle + h + 1].sum() >= level:
            return h
    raise AssertionError("the level is beyond the pmf's support")


def laplace_cdf(x: float, scale: float) -> float:
    if x < 0:
        return 0.5 * math.exp(x / scale)
    return 1 - 0.5 * math.exp(-x / scale)


def continuous_probability(scales: list[float], h: float) -> float:
    """``P(|Σ L_i| <= h)`` for independent Laplace ``L_i`` of the given scales."""

    def inside(low: float, high: float, rest: list[float]) -> float:
        # P(low <= Σ rest <= high)
        if len(rest) == 1:
            return laplace_cdf(high, rest[0]) - laplace_cdf(low, rest[0])
        first, others = rest[0], rest[1:]

        def density(x: float) -> float:
            return math.exp(-abs(x) / first) / (2 * first) * inside(low - x, high - x, others)

        # the integrand has kinks at 0 (the density) and at low and high (the rest's)
        reach = 40 * first + abs(low) + abs(high)
        cuts = sorted({-reach, low, 0.0, high, reach})
        return sum(
            integrate.quad(density, a, b, limit=200, epsabs=1e-13, epsrel=1e-12)[0]
            for a, b in itertools.pairwise(cuts)
        )

    return inside(-h, h, scales)
