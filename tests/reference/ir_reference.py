"""Slow, obvious references for individual ranking.

See docs/design.md#ranking-partition, #ir-dp, #exact-grid.
"""

from __future__ import annotations

import math
from fractions import Fraction

#: The public transforms (docs/privacy.md#transforms) and their inverses.
FORWARD = {None: lambda x: x, "log": math.log1p, "asinh": math.asinh}


def group_sizes(n, k, remainder="middle"):
    """Sizes of the n // k rank groups: k each, and the n mod k left over in one of them.

    "middle": group (n // k) // 2; "last": the last group (sdcMicro's rule).
    """
    n_groups = n // k
    sizes = [k] * n_groups
    big = n_groups // 2 if remainder == "middle" else n_groups - 1
    sizes[big] += n - n_groups * k
    return sizes


def rank_groups(values, k, remainder="middle"):
    """Groups of row indices: sort by (value, row), cut into groups of group_sizes."""
    n = len(values)
    order = sorted(range(n), key=lambda i: (values[i], i))
    groups = []
    start = 0
    for size in group_sizes(n, k, remainder):
        groups.append(order[start : start + size])
        start += size
    return groups


def labels(values, k, remainder="middle"):
    out = [None] * len(values)
    for g, rows in enumerate(rank_groups(values, k, remainder)):
        for i in rows:
            out[i] = g
    return out


def group_means(values, k, remainder="middle"):
    out = [None] * len(values)
    for rows in rank_groups(values, k, remainder):
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
    values, lower, upper, gamma, d_int, k, noise, round_values, remainder="middle", transform=None,
    shift=0.0,
):  # fmt: skip
    """One column of the ir_dp pipeline on an integer grid, with given per-group noise."""
    q = [quantise(x, lower, upper, gamma, d_int, transform) for x in values]
    out = [None] * len(values)
    for g, rows in enumerate(rank_groups(q, k, remainder)):
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


def optimal_univariate(values, k):
    """The exact optimal univariate microaggregation: ``(minimum SSE, group sizes)``.

    Groups of consecutive sorted values, each of ``k`` to ``2k - 1`` values (an optimal
    partition of one variable has consecutive groups, and a group of ``2k`` or more can be
    split without raising the SSE: Hansen and Mukherjee 2003), minimising the sum of
    squared distances to the group means. A dynamic programme over the sorted values:
    ``best[j]`` is the least SSE of the first ``j`` values; the last group of a partition
    of them holds values ``j - s .. j - 1`` for a size ``s`` in ``[k, 2k - 1]``, its SSE
    found by extending the group one value at a time (Welford's update). O(n k).
    """
    v = sorted(float(x) for x in values)
    n = len(v)
    if n < k:
        raise ValueError(f"need at least k = {k} values, got {n}")
    inf = float("inf")
    best = [inf] * (n + 1)
    size_of = [0] * (n + 1)
    best[0] = 0.0
    for j in range(k, n + 1):
        mean, sse = 0.0, 0.0  # of the group v[j - s : j], grown backwards
        for s in range(1, min(2 * k - 1, j) + 1):
            x = v[j - s]
            delta = x - mean
            mean += delta / s
            sse += delta * (x - mean)
            if s >= k and best[j - s] + sse < best[j]:
                best[j] = best[j - s] + sse
                size_of[j] = s
    sizes = []
    j = n
    while j > 0:
        sizes.append(size_of[j])
        j -= size_of[j]
    return best[n], sizes[::-1]


def partition_sse(values, sizes):
    """SSE of the sorted values cut into consecutive groups of ``sizes``, each about its mean."""
    v = sorted(float(x) for x in values)
    total, start = 0.0, 0
    for size in sizes:
        group = v[start : start + size]
        mean = sum(group) / size
        total += sum((x - mean) ** 2 for x in group)
        start += size
    return total
