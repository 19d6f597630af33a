"""Slow, obvious references for MDAV-generic and insensitive MDAV.

See docs/design.md#mdav-generic, #imdav-order.

Python loops and full distance computations, O(n^2 / k). Distances are sums of squares
over the attributes in order, in float64, the same operations as the kernels, so ties are
resolved identically (lowest row index).
"""

from __future__ import annotations

import math


def grid_bits(n):
    return min(40, 50 - max(1, n).bit_length())


def standardise(rows):
    """Population-variance z-scores rounded to 2**-bits (constant columns: 0)."""
    n = len(rows)
    m = len(rows[0]) if n else 0
    scale = 2.0 ** grid_bits(n)
    out = [[0.0] * m for _ in range(n)]
    for j in range(m):
        column = [float(row[j]) for row in rows]
        if min(column) == max(column):
            continue
        mean = math.fsum(column) / n
        centred = [x - mean for x in column]
        sd = math.sqrt(math.fsum(d * d for d in centred) / n)
        for i in range(n):
            out[i][j] = float(round(centred[i] / sd * scale))
    return out


def squared_distance(a, b):
    d = 0.0
    for x, y in zip(a, b, strict=False):
        t = x - y
        d += t * t
    return d


def _centroid(points, remaining):
    m = len(points[0])
    count = len(remaining)
    return [float(sum(int(points[i][j]) for i in remaining)) / count for j in range(m)]


def _farthest(points, remaining, target):
    best = None
    for i in sorted(remaining):
        d = squared_distance(points[i], target)
        if best is None or d > best[0]:
            best = (d, i)
    return best[1]


def _cluster_around(points, remaining, center, k):
    others = sorted(
        (squared_distance(points[i], points[center]), i) for i in remaining if i != center
    )
    return [center] + [i for _, i in others[: k - 1]]


def mdav_groups(rows, k):
    """MDAV-generic clusters (lists of row indices) in formation order."""
    points = standardise(rows)
    remaining = set(range(len(rows)))
    groups = []
    while len(remaining) >= 3 * k:
        x_r = _farthest(points, remaining, _centroid(points, remaining))
        cluster = _cluster_around(points, remaining, x_r, k)
        remaining -= set(cluster)
        groups.append(cluster)
        x_s = _farthest(points, remaining, points[x_r])
        cluster = _cluster_around(points, remaining, x_s, k)
        remaining -= set(cluster)
        groups.append(cluster)
    if len(remaining) >= 2 * k:
        x_r = _farthest(points, remaining, _centroid(points, remaining))
        cluster = _cluster_around(points, remaining, x_r, k)
        remaining -= set(cluster)
        groups.append(cluster)
    if remaining:
        groups.append(sorted(remaining))
    return groups


def labels_by_first_appearance(groups, n):
    owner = [None] * n
    for g, rows in enumerate(groups):
        for i in rows:
            owner[i] = g
    renumber = {}
    out = []
    for g in owner:
        renumber.setdefault(g, len(renumber))
        out.append(renumber[g])
    return out


def mdav_labels(rows, k):
    return labels_by_first_appearance(mdav_groups(rows, k), len(rows))


def corner_sequence(lower, upper, n_steps, rule="corners"):
    """Reference points: alternate opposite corners, or cycle corner pairs.

    See docs/design.md#imdav-order.
    """
    m = len(lower)
    if rule == "corners" or m <= 1:
        return [list(lower) if t % 2 == 0 else list(upper) for t in range(n_steps)]
    corners = []
    for c in range(2 ** (m - 1)):
        for mask in (c, (2**m - 1) ^ c):
            corners.append([upper[j] if mask >> j & 1 else lower[j] for j in range(m)])
    return [corners[t % len(corners)] for t in range(n_steps)]


def insensitive_groups(rows, k, bounds, points_sequence):
    """Insensitive MDAV: k smallest under (normalised distance, values, row) while >= 2k."""
    lower = [float(b[0]) for b in bounds]
    upper = [float(b[1]) for b in bounds]
    values = [
        [min(max(float(x), lo), hi) + 0.0 for x, lo, hi in zip(row, lower, upper, strict=False)]
        for row in rows
    ]
    widths = [hi - lo for lo, hi in zip(lower, upper, strict=False)]

    def key(i, point):
        d = 0.0
        for x, r, w in zip(values[i], point, widths, strict=False):
            if w > 0:
                t = (x - r) / w
                d += t * t
        return (d, tuple(values[i]), i)

    remaining = list(range(len(rows)))
    groups = []
    step = 0
    while len(remaining) >= 2 * k:
        point = points_sequence[step]
        ordered = sorted(remaining, key=lambda i: key(i, point))
        groups.append(ordered[:k])
        remaining = ordered[k:]
        step += 1
    if remaining:
        groups.append(sorted(remaining))
    return groups


def insensitive_labels(rows, k, bounds, rule="corners"):
    lower = [b[0] for b in bounds]
    upper = [b[1] for b in bounds]
    sequence = corner_sequence(lower, upper, len(rows) // k, rule)
    return labels_by_first_appearance(insensitive_groups(rows, k, bounds, sequence), len(rows))


# --- mixed numeric and categorical records -------------------------------------------------
#
# Categorical attributes are given as domain codes with each taxonomy's distance matrix
# (lists of floats). Terms are added after the numeric ones, attribute by attribute, with
# the same float operations as the kernels, so ties resolve identically.


def boundary(matrix):
    """(v*, t*): the most marginal code (exact sums) and the code farthest from it."""
    marginality = [math.fsum(row) for row in matrix]
    v = max(range(len(matrix)), key=lambda a: (marginality[a], -a))
    t = max(range(len(matrix)), key=lambda b: (matrix[v][b], -b))
    return v, t


def mixed_mdav_groups(rows, codes, matrices, k):
    """MDAV-generic on mixed records: numeric z-scores plus (semantic distance / Δq)**2."""
    n = len(rows)
    points = standardise(rows)
    scale = 2.0 ** grid_bits(n)
    largest = [max(max(row) for row in matrix) for matrix in matrices]

    def term(j, a, b):
        return matrices[j][a][b] / largest[j] * scale if largest[j] > 0 else 0.0

    def distance(i, numeric, categories):
        d = squared_distance(points[i], numeric)
        for j, c in enumerate(categories):
            t = term(j, codes[i][j], c)
            d += t * t
        return d

    def centroid(remaining):
        numeric = _centroid(points, remaining)
        categories = []
        for j, matrix in enumerate(matrices):
            counts = [0] * len(matrix)
            for i in remaining:
                counts[codes[i][j]] += 1
            # Σ_{x in R} δ(c, x), summed over the values b in code order (as the kernel)
            totals = []
            for c in range(len(matrix)):
                s = 0.0
                for b in range(len(matrix)):
                    s += counts[b] * matrix[c][b]
                totals.append(s)
            categories.append(min(range(len(matrix)), key=lambda c: (totals[c], c)))
        return numeric, categories

    def farthest(remaining, numeric, categories):
        best = None
        for i in sorted(remaining):
            d = distance(i, numeric, categories)
            if best is None or d > best[0]:
                best = (d, i)
        return best[1]

    def around(remaining, center):
        others = sorted(
            (distance(i, points[center], codes[center]), i) for i in remaining if i != center
        )
        return [center] + [i for _, i in others[: k - 1]]

    remaining = set(range(n))
    groups = []
    while len(remaining) >= 3 * k:
        x_r = farthest(remaining, *centroid(remaining))
        cluster = around(remaining, x_r)
        remaining -= set(cluster)
        groups.append(cluster)
        x_s = farthest(remaining, points[x_r], codes[x_r])
        cluster = around(remaining, x_s)
        remaining -= set(cluster)
        groups.append(cluster)
    if len(remaining) >= 2 * k:
        x_r = farthest(remaining, *centroid(remaining))
        cluster = around(remaining, x_r)
        remaining -= set(cluster)
        groups.append(cluster)
    if remaining:
        groups.append(sorted(remaining))
    return groups


def mixed_mdav_labels(rows, codes, matrices, k):
    return labels_by_first_appearance(mixed_mdav_groups(rows, codes, matrices, k), len(rows))


def mixed_insensitive_labels(rows, codes, bounds, matrices, k, rule="corners"):
    """Insensitive MDAV on mixed records: categorical corners are (v*, t*).

    See docs/design.md#imdav-order.
    """
    n = len(rows)
    m = len(bounds)
    corners = [boundary(matrix) for matrix in matrices]
    lower = [float(b[0]) for b in bounds] + [v for v, _ in corners]
    upper = [float(b[1]) for b in bounds] + [t for _, t in corners]
    sequence = corner_sequence(lower, upper, n // k, rule)
    values = [
        [min(max(float(x), lo), hi) + 0.0 for x, lo, hi in zip(row, lower, upper, strict=False)]
        for row in rows
    ]
    widths = [upper[j] - lower[j] for j in range(m)]
    spans = [matrix[v][t] for matrix, (v, t) in zip(matrices, corners, strict=True)]

    def key(i, point):
        d = 0.0
        for j in range(m):
            if widths[j] > 0:
                t = (values[i][j] - point[j]) / widths[j]
                d += t * t
        for j, matrix in enumerate(matrices):
            t = matrix[codes[i][j]][int(point[m + j])] / spans[j] if spans[j] > 0 else 0.0
            d += t * t
        return (d, tuple(values[i]) + tuple(codes[i]), i)

    remaining = list(range(n))
    groups = []
    step = 0
    while len(remaining) >= 2 * k:
        ordered = sorted(remaining, key=lambda i: key(i, sequence[step]))
        groups.append(ordered[:k])
        remaining = ordered[k:]
        step += 1
    if remaining:
        groups.append(sorted(remaining))
    return labels_by_first_appearance(groups, n)
