"""Slow, obvious versions of the perturbation mechanisms' parts (docs/design.md#mechanisms)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from tests.reference.noise_reference import chacha20_block


def kth_distance(values: np.ndarray, x: float, k: int) -> float:
    """Distance from ``x`` to its k-th nearest value."""
    return float(np.sort(np.abs(values - x))[k - 1])


def d_k_on_grid(values: np.ndarray, k: int, grid: np.ndarray) -> float:
    """``max_x kth_distance(x)`` over the points of ``grid`` (a lower bound of ``D_k``)."""
    return max(kth_distance(values, float(x), k) for x in grid)


def condition_holds(values: np.ndarray, k: int, delta: float, grid: np.ndarray) -> bool:
    """k-noise's condition ``#{j : |X_j - x| < 2δ} >= k`` at every grid point."""
    return all(int(np.count_nonzero(np.abs(values - x) < 2 * delta)) >= k for x in grid)


def minimal_delta_grid(values: np.ndarray, k: int, grid: np.ndarray) -> float:
    """Smallest double ``δ`` with ``2δ`` above every grid point's k-th distance."""
    return math.nextafter(d_k_on_grid(values, k, grid) / 2, math.inf)


def minimal_delta_sorted(values: np.ndarray, k: int) -> float:
    """The formula of docs/design.md#k-noise on a full sort, with exact rationals."""
    s = np.sort(values)
    n = s.shape[0]
    d = max(Fraction(s[k - 1]) - Fraction(s[0]), Fraction(s[-1]) - Fraction(s[n - k]))
    for i in range(n - k):
        d = max(d, (Fraction(s[i + k]) - Fraction(s[i])) / 2)
    target = d / 2
    value = float(target)
    return value if Fraction(value) > target else math.nextafter(value, math.inf)


def stream_word(key, q: int) -> int:
    """64-bit word ``q`` of the stream ``(key, nonce = 0)``."""
    block = chacha20_block([int(w) for w in key], q // 8, 0)
    j = q % 8
    return block[2 * j] | (block[2 * j + 1] << 32)


def uniform_value(key, q: int, value: float, half_width: float) -> float:
    w = stream_word(key, q)
    t = float((w >> 11) * 2 + 1 - 2**53) / 2**53
    return value + half_width * t


def retain_or_replace_row(key, q: int, keep: int, value, group_pool):
    """One row of :func:`dpfast.noise.retain_or_replace`."""
    w = stream_word(key, q)
    if (w & 0xFFFFFFFF) < keep:
        return value
    size = len(group_pool)
    threshold = (2**32 - size) % size
    candidates = [w >> 32]
    counter = 0
    while True:
        for u in candidates:
            product = u * size
            if (product & 0xFFFFFFFF) >= threshold:
                return group_pool[product >> 32]
        block = chacha20_block([int(x) for x in key], counter, q + 1)
        candidates = list(block)
        counter += 1


def interval_of(value: float, lo: float, hi: float, m: int) -> int:
    return min(int((value - lo) * (m / (hi - lo))), m - 1)


def valid_split(values: np.ndarray, k: int, m: int) -> bool:
    """Whether each of ``m`` equal-width intervals holds at least ``k`` values."""
    lo, hi = float(values.min()), float(values.max())
    if hi == lo:
        return m == 1
    counts = np.zeros(m, dtype=np.int64)
    for v in values:
        counts[interval_of(float(v), lo, hi, m)] += 1
    return bool(counts.min() >= k)
