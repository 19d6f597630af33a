"""Slow, obvious references for the disclosure risk measures (docs/risk.md).

Python loops and full distance matrices. Distances are the sums of docs/risk.md, term by
term in the same order and in float64, so ties come out exactly as in the kernel.
"""

from __future__ import annotations

import math
from collections import Counter


def weights(columns):
    """1 / population variance of each original column (fsum); 0 for a constant column."""
    out = []
    for column in columns:
        values = [float(v) for v in column]
        if min(values) == max(values):
            out.append(0.0)
            continue
        n = len(values)
        mean = math.fsum(values) / n
        centred = [v - mean for v in values]
        out.append(1.0 / (math.fsum(c * c for c in centred) / n))
    return out


def mid_ranks(values):
    """Rank 1..n of each value; ties share the mean of their ranks."""
    out = []
    for v in values:
        below = sum(1 for u in values if u < v)
        equal = sum(1 for u in values if u == v)
        out.append(below + (equal + 1) / 2)
    return out


def semantic_costs(taxonomy):
    """(δ(a, b) / Δq)² for every pair of domain codes."""
    m = len(taxonomy.domain)
    distances = [[taxonomy.distance(a, b) for b in taxonomy.domain] for a in taxonomy.domain]
    largest = max((d for row in distances for d in row), default=0.0)
    if largest == 0:
        return [[0.0] * m for _ in range(m)]
    return [[(d / largest) * (d / largest) for d in row] for row in distances]


def distance_matrix(original, released, w, original_codes=(), released_codes=(), costs=()):
    """Squared distance from each released record (row) to each original record (column).

    ``original`` and ``released`` are lists of numeric columns; the codes lists of
    categorical columns, with their ``costs`` tables.
    """
    n = len(original[0]) if original else len(original_codes[0])
    matrix = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            d = 0.0
            for column, (x, y) in enumerate(zip(original, released, strict=True)):
                if w[column] > 0:
                    t = y[i] - x[j]
                    d += t * t * w[column]
            for cost, x, y in zip(costs, original_codes, released_codes, strict=True):
                d += cost[y[i]][x[j]]
            matrix[i][j] = d
    return matrix


def linkage_scores(matrix):
    """1/t when no original record is closer than the source and t are as close, else 0."""
    scores = []
    for i, row in enumerate(matrix):
        own = row[i]
        if any(d < own for d in row):
            scores.append(0.0)
        else:
            scores.append(1.0 / sum(1 for d in row if d == own))
    return scores


def record_linkage(original, released, method="distance", **categorical):
    """Per-record scores; ``original``/``released`` are lists of numeric columns."""
    if method == "rank":
        original = [mid_ranks(column) for column in original]
        released = [mid_ranks(column) for column in released]
    matrix = distance_matrix(original, released, weights(original), **categorical)
    return linkage_scores(matrix)


def rank_interval_hit(x, y, i, p):
    """Whether one of x_i's own (tied) ranks lies within w ranks of y_i's position."""
    ordered = sorted(x)
    n = len(x)
    w = math.floor(p * n / 100)
    below = sum(1 for v in x if v < y[i])
    at_most = sum(1 for v in x if v <= y[i])
    return any(ordered[r] == x[i] and below - w <= r <= at_most - 1 + w for r in range(n))


def interval_disclosure(x, y, p, method):
    n = len(x)
    if method == "rank":
        hits = [rank_interval_hit(x, y, i, p) for i in range(n)]
    else:
        hits = [abs(x[i] - y[i]) <= p / 100 * abs(y[i]) for i in range(n)]
    return sum(hits) / n


def neighbourhood_counts(x, y, width):
    return [sum(1 for v in x if abs(v - target) <= width) for target in y]


def class_sizes(rows):
    """Size of each record's equivalence class (records with equal tuples)."""
    counts = Counter(rows)
    return [counts[row] for row in rows]
