"""Slow, obvious references for individual ranking.

See docs/design.md#ranking-partition, #ir-dp, #exact-grid.
"""

from __future__ import annotations

import math
from fractions import Fraction

#: The public transforms (docs/privacy.md#transforms) and their inverses.
FORWARD = {None: lambda x: x, "log": math.log1p, "asinh": math.asinh}


def rank_groups(values, k):
    """Groups of row indices: sort by (value, row), cut into k, remainder in the last group."""
    n = len(values)
    order = sorted(range(n), key=lambda i: (values[i], i))
    n_groups = n // k
    groups = [order[g * k : (g + 1) * k] for g in range(n_groups - 1)]
    groups.append(order[(n_groups - 1) * k :])
    return groups


def labels(values, k):
    out = [None] * len(values)
    for g, rows in enumerate(rank_groups(values, k)):
        for i in rows:
            out[i] = g
    return out


def group_means(values, k):
    out = [None] * len(values)
    for rows in rank_groups(values, k):
        mean = Fraction(sum(Fraction(values[i]) for i in rows), len(rows))
        for i in rows:
            out[i] = float(mean)
    return out


def quantise(x, lower, upper, gamma, d_int, transform=None):
    """Clamp, transform (``log1p``, ``asinh`` or none) and round to the grid, half to even."""
    clamped = min(max(x, lower), upper)
    forward = FORWARD[transform]
    q = round(Fraction(forward(clamped) - forward(lower)) / Fraction(gamma))
    return min(max(q, 0), d_int)


def released(y, lower, upper, gamma, d_int, round_values, transform=None, shift=0.0):
    """The value grid value ``y`` is released as: back through the transform, corrected.

    A transformed grid's end points are the bounds; an inner value ``z`` becomes
    ``(1 + expm1(z)) / e**shift - 1`` (``log``) or ``sinh(z) / e**shift`` (``asinh``).
    """
    if transform is None:
        value = lower + gamma * y
    elif y == 0:
        value = lower
    elif y == d_int:
        value = upper
    else:
        z = FORWARD[transform](lower) + gamma * y
        if transform == "log":
            value = math.expm1(z - shift)
        else:
            value = math.sinh(z) * math.exp(-shift)
    if round_values:
        value = float(round(value))
    return min(max(value, lower), upper)


def ir_release(
    values, lower, upper, gamma, d_int, k, noise, round_values, transform=None, shift=0.0
):
    """One column of the ir_dp pipeline on an integer grid, with given per-group noise."""
    q = [quantise(x, lower, upper, gamma, d_int, transform) for x in values]
    out = [None] * len(values)
    for g, rows in enumerate(rank_groups(q, k)):
        centroid = round(Fraction(sum(q[i] for i in rows), len(rows)))  # half to even
        y = min(max(centroid + int(noise[g]), 0), d_int)
        value = released(y, lower, upper, gamma, d_int, round_values, transform, shift)
        for i in rows:
            out[i] = value
    return out


def laplace_cells(
    values, lower, upper, gamma, d_int, noise, round_values, transform=None, shift=0.0
):
    out = []
    for x, z in zip(values, noise, strict=False):
        y = min(max(quantise(x, lower, upper, gamma, d_int, transform) + int(z), 0), d_int)
        out.append(released(y, lower, upper, gamma, d_int, round_values, transform, shift))
    return out


def dlaplace_mean_exp(t, step, reach=None):
    """``E[exp(step * Y)]`` for discrete Laplace ``Y`` of scale ``t``, by a direct sum."""
    r = math.exp(-1.0 / t)
    reach = reach or int(80 * t) + 10
    return sum(
        (1 - r) / (1 + r) * r ** abs(y) * math.exp(step * y) for y in range(-reach, reach + 1)
    )
