"""Kernel for MDAV-generic on mixed numeric and categorical records.

See docs/design.md#mdav-generic, #semantic-centroid.

The squared distance between two records is ``sum_j (a_j - b_j) ** 2`` over the numeric
attributes (standardised grid units), then ``sum_j table[j, a_j, b_j] ** 2`` over the
categorical ones, in that order, in float64. ``table[j]`` holds the semantic distance of
attribute ``j`` already scaled to grid units. The k-d tree of :mod:`dpfast._kernels.mdav`
needs a Euclidean space, which semantic distances are not, so this kernel scans the
remaining records for every search: O(n^2 (m + c) / k) time, O(n (m + c)) memory. There is
no NumPy version to beat here: it is the only mixed path. Kernels never write their inputs.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.mdav import integer_sums


@jit_inline
def _to_row(points, codes, table, a, b):
    d = 0.0
    for j in range(points.shape[1]):
        t = points[a, j] - points[b, j]
        d += t * t
    for j in range(codes.shape[1]):
        t = table[j, codes[a, j], codes[b, j]]
        d += t * t
    return d


@jit_inline
def _to_centre(points, codes, table, a, means, centre_codes):
    d = 0.0
    for j in range(points.shape[1]):
        t = points[a, j] - means[j]
        d += t * t
    for j in range(codes.shape[1]):
        t = table[j, codes[a, j], centre_codes[j]]
        d += t * t
    return d


@jit_inline
def _nearest(points, codes, table, rows, n_rows, center, k, heap_d, heap_row):
    """Find the ``k`` rows of ``rows[:n_rows]`` (ascending) nearest ``center``, itself included.

    Strict order (distance, row): a bounded max-heap keeps the ``k`` smallest.
    """
    size = 0
    for r in range(n_rows):
        row = rows[r]
        # the center is always taken: it sorts before every distance
        d = -1.0 if row == center else _to_row(points, codes, table, row, center)
        if size < k:
            i = size
            size += 1
            while i > 0:
                parent = (i - 1) // 2
                if heap_d[parent] < d or (heap_d[parent] == d and heap_row[parent] < row):
                    heap_d[i] = heap_d[parent]
                    heap_row[i] = heap_row[parent]
                    i = parent
                else:
                    break
            heap_d[i] = d
            heap_row[i] = row
        elif d < heap_d[0] or (d == heap_d[0] and row < heap_row[0]):
            i = 0
            while True:
                child = 2 * i + 1
                if child >= size:
                    break
                right = child + 1
                if right < size and (
                    heap_d[child] < heap_d[right]
                    or (heap_d[child] == heap_d[right] and heap_row[child] < heap_row[right])
                ):
                    child = right
                if d < heap_d[child] or (d == heap_d[child] and row < heap_row[child]):
                    heap_d[i] = heap_d[child]
                    heap_row[i] = heap_row[child]
                    i = child
                else:
                    break
            heap_d[i] = d
            heap_row[i] = row
    return size


@jit_inline
def _code_counts(codes, width):
    """Count of each code (int64[c, width]) per categorical attribute. O(n c)."""
    n, c = codes.shape
    counts = np.zeros((c, width), dtype=np.int64)
    for i in range(n):
        for j in range(c):
            counts[j, codes[i, j]] += 1
    return counts


@jit_inline
def _centre(sums, n_rows, counts, distance, domain_sizes, means, centre_codes):
    """Write the centroid of the ``n_rows`` remaining rows into ``means`` and ``centre_codes``.

    Numeric attributes: ``float(S_j) / n_rows``; categorical: the code of least
    ``sum_b counts[j, b] * distance[j, code, b]``, ties to the lowest code.
    """
    for j in range(means.shape[0]):
        means[j] = np.float64(sums[j]) / n_rows
    for j in range(centre_codes.shape[0]):
        best = np.inf
        for candidate in range(domain_sizes[j]):
            s = 0.0
            for b in range(domain_sizes[j]):
                s += counts[j, b] * distance[j, candidate, b]
            if s < best:
                best = s
                centre_codes[j] = candidate


@jit_inline
def _farthest_from_centre(points, codes, table, rows, n_rows, means, centre_codes):
    """Return the row of ``rows[:n_rows]`` farthest from the centroid; ties to the first."""
    center = rows[0]
    best = -1.0
    for r in range(n_rows):
        d = _to_centre(points, codes, table, rows[r], means, centre_codes)
        if d > best:
            best = d
            center = rows[r]
    return center


@jit_inline
def _farthest_from_row(points, codes, table, rows, n_rows, x_r):
    """Return the row of ``rows[:n_rows]`` farthest from row ``x_r``; ties to the first."""
    center = rows[0]
    best = -1.0
    for r in range(n_rows):
        d = _to_row(points, codes, table, rows[r], x_r)
        if d > best:
            best = d
            center = rows[r]
    return center


@jit_inline
def _remove_cluster(points, codes, members, size, cluster, labels, sums, counts, rows, n_rows):
    """Label ``members[:size]`` with ``cluster`` and take them out of the running state.

    Updates ``sums`` and ``counts`` and drops the members from ``rows[:n_rows]``, keeping
    the order of the others. Returns the new ``n_rows``.
    """
    for i in range(size):
        row = members[i]
        labels[row] = cluster
        for j in range(points.shape[1]):
            sums[j] -= np.int64(points[row, j])
        for j in range(codes.shape[1]):
            counts[j, codes[row, j]] -= 1
    kept = 0
    for r in range(n_rows):
        if labels[rows[r]] < 0:
            rows[kept] = rows[r]
            kept += 1
    return kept


@jit
def mixed_mdav_partition(points, codes, table, distance, domain_sizes, k):
    """MDAV-generic clusters of mixed records, in formation order (docs/design.md#mdav-generic).

    Parameters
    ----------
    points : float64[n, m]
        Standardised numeric attributes in integer grid units (``m`` may be 0), so the
        centroid sums are exact. Never written.
    codes : int64[n, c]
        Domain codes of the categorical attributes. Never written.
    table : float64[c, d, d]
        Scaled semantic distance of each categorical attribute (``d`` >= every domain size).
    distance : float64[c, d, d]
        Unscaled semantic distance, for the centroid.
    domain_sizes : int64[c]
    k : int
        Cluster size, ``1 <= k <= n``.

    Returns
    -------
    int64[n]
        Cluster of each row, numbered in formation order.

    Notes
    -----
    The centroid of the remaining rows is the mean of each numeric attribute
    (``float(S_j) / count`` with ``S_j`` the exact integer sum) and, for each categorical
    attribute, the domain value ``c`` of least ``sum_b count_b * distance[c, b]`` (``b``
    ascending; ties to the lowest code), the marginality-based centroid of
    docs/design.md#semantic-centroid over the domain. While at least ``3k`` rows remain: ``x_r`` is
    the row farthest from the centroid, with its ``k - 1`` nearest rows; then ``x_s``, the remaining
    row farthest from ``x_r``, with its ``k - 1`` nearest. With ``2k .. 3k-1`` left, one more
    cluster around the farthest row from the centroid; the rest is the last cluster. Every tie
    goes to the lowest row index. Complexity O(n^2 (m + c) / k + (n / k) c d^2).
    """
    n, m = points.shape
    c = codes.shape[1]
    labels = np.full(n, -1, dtype=np.int64)
    rows = np.arange(n)
    n_rows = n
    sums = integer_sums(points)
    counts = _code_counts(codes, max(table.shape[1], 1))
    means = np.empty(m, dtype=np.float64)
    centre_codes = np.zeros(c, dtype=np.int64)
    heap_d = np.empty(k, dtype=np.float64)
    heap_row = np.empty(k, dtype=np.int64)
    cluster = 0
    while n_rows >= 2 * k:
        _centre(sums, n_rows, counts, distance, domain_sizes, means, centre_codes)
        center = _farthest_from_centre(points, codes, table, rows, n_rows, means, centre_codes)
        n_rounds = 2 if n_rows >= 3 * k else 1
        for round_ in range(n_rounds):
            if round_ == 1:  # x_s: the remaining row farthest from x_r
                center = _farthest_from_row(points, codes, table, rows, n_rows, center)
            size = _nearest(points, codes, table, rows, n_rows, center, k, heap_d, heap_row)
            n_rows = _remove_cluster(
                points, codes, heap_row, size, cluster, labels, sums, counts, rows, n_rows
            )
            cluster += 1
    for r in range(n_rows):
        labels[rows[r]] = cluster
    return labels
