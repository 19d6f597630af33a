"""Slow, obvious references for the forecast from the data (dpfast._release.expected, .choices).

Each sums the distribution it describes point by point: every noise value that matters,
every combination of group draws. Small cases only.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np


def noise_pmf(t: float, reach: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the discrete Laplace's values ``-reach .. reach`` and their chances (scale ``t``)."""
    ys = np.arange(-reach, reach + 1)
    if t == 0:
        return ys, (ys == 0).astype(float)
    r = math.exp(-1.0 / t)
    return ys, (1 - r) / (1 + r) * r ** np.abs(ys).astype(float)


def released_value(lower: float, upper: float, gamma: float, integer: bool, z: int) -> float:
    """The value grid value ``z`` is released as, written out step by step."""
    value = lower + gamma * float(z)
    if integer:
        value = float(np.rint(value))
    return min(max(value, lower), upper)


def group_moments(
    q: int, t: float, lower: float, upper: float, gamma: float, d: int, integer: bool
) -> tuple[float, float, float]:
    """Return the mean and variance of a group's released value, and its chance on a bound.

    By summing over every noise value within ``60 t + d`` steps.
    """
    ys, pmf = noise_pmf(t, int(60 * t) + d + 5)
    values = np.array(
        [released_value(lower, upper, gamma, integer, int(min(max(q + y, 0), d))) for y in ys]
    )
    mean = float((pmf * values).sum())
    variance = float((pmf * (values - mean) ** 2).sum())
    on = (values <= lower) | (values >= upper)
    return mean, variance, float(pmf[on].sum())


def expected_absolute_deviation(
    chances: np.ndarray, sizes: np.ndarray, category: int, target: float
) -> float:
    """Return ``E|N - target|``, ``N`` the rows drawing ``category``: every combination of draws."""
    total = 0.0
    groups, m = chances.shape
    for draws in itertools.product(range(m), repeat=groups):
        chance = math.prod(chances[g, c] for g, c in enumerate(draws))
        rows = sum(int(sizes[g]) for g, c in enumerate(draws) if c == category)
        total += chance * abs(rows - target)
    return total


def group_histograms(counts: np.ndarray, sizes: np.ndarray) -> list[tuple[tuple[int, ...], int]]:
    """Return each rank group's histogram and size, from the sorted column written out."""
    column = np.repeat(np.arange(len(counts)), counts)
    out = []
    start = 0
    for size in sizes.tolist():
        held = column[start : start + size]
        out.append((tuple(np.bincount(held, minlength=len(counts)).tolist()), size))
        start += size
    return out


def transformed_value(
    z: int, d: int, lower: float, upper: float, gamma: float, transform: str, shift: float
) -> float:
    """The value grid value ``z`` of a transformed grid is released as, written out.

    The ends are the bounds; inside, the transform's inverse of ``T(lower) + gamma z``,
    divided by the noise's mean factor ``e**shift`` on the data's scale; then clamped.
    """
    if z <= 0:
        return lower
    if z >= d:
        return upper
    if transform == "log":
        value = math.exp(math.log1p(lower) + gamma * z - shift) - 1.0
    else:
        value = math.sinh(math.asinh(lower) + gamma * z) / math.exp(shift)
    return min(max(value, lower), upper)


def transformed_group_moments(
    q: int, t: float, grid: Any, integer: bool
) -> tuple[float, float, float, float]:
    """Return a transformed group's released mean, variance, chance on a bound and on the upper.

    By summing over every noise value within ``60 t + D`` steps of ``q``.
    """
    d = grid.d_int
    ys, pmf = noise_pmf(t, int(60 * t) + d + 5)
    values = []
    for y in ys.tolist():
        z = min(max(q + y, 0), d)
        value = transformed_value(
            z, d, grid.lower, grid.upper, grid.gamma, grid.transform, grid.shift
        )
        values.append(float(np.rint(value)) if integer else value)
    released = np.clip(np.array(values), grid.lower, grid.upper)
    mean = float((pmf * released).sum())
    variance = float((pmf * (released - mean) ** 2).sum())
    on = (released <= grid.lower) | (released >= grid.upper)
    return mean, variance, float(pmf[on].sum()), float(pmf[released >= grid.upper].sum())
