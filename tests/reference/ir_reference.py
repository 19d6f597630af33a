"""Slow, obvious references for individual ranking.

See docs/design.md#ranking-partition, #ir-dp, #exact-grid.
"""

from __future__ import annotations

from fractions import Fraction


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


def quantise(x, lower, upper, gamma, d_int):
    clamped = min(max(x, lower), upper)
    q = round(Fraction(clamped - lower) / Fraction(gamma))  # half to even
    return min(max(q, 0), d_int)


def ir_release(values, lower, upper, gamma, d_int, k, noise, round_values):
    """One column of the ir_dp pipeline on an integer grid, with given per-group noise."""
    q = [quantise(x, lower, upper, gamma, d_int) for x in values]
    out = [None] * len(values)
    for g, rows in enumerate(rank_groups(q, k)):
        centroid = round(Fraction(sum(q[i] for i in rows), len(rows)))  # half to even
        y = min(max(centroid + int(noise[g]), 0), d_int)
        value = lower + gamma * y
        if round_values:
            value = float(round(value))
        value = min(max(value, lower), upper)
        for i in rows:
            out[i] = value
    return out


def laplace_cells(values, lower, upper, gamma, d_int, noise, round_values):
    out = []
    for x, z in zip(values, noise, strict=False):
        y = min(max(quantise(x, lower, upper, gamma, d_int) + int(z), 0), d_int)
        value = lower + gamma * y
        if round_values:
            value = float(round(value))
        out.append(min(max(value, lower), upper))
    return out
