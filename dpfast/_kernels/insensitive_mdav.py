"""Kernels for insensitive MDAV and the mdav_dp release.

See docs/design.md#imdav-order, #imdav-fast-path.

Records are ordered, for each data-independent reference point, by the normalised squared
distance ``sum_j ((x_j - R_j) / w_j) ** 2`` (``j`` ascending, zero widths skipped) plus,
for categorical attributes, ``sum_j terms[j, code_j]`` (the squared normalised semantic
distance to the point's category, precomputed per domain value), then by their values and
codes, then by row. The general path rescans the remaining rows per cluster; the
fast path walks one precomputed order per distinct point. Kernels never write their inputs.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.grid import grid_value, noisy_mean, quantise


@jit_inline
def _reference_key(values, row, point, widths, codes, terms):
    d = 0.0
    for j in range(values.shape[1]):
        if widths[j] > 0.0:
            t = (values[row, j] - point[j]) / widths[j]
            d += t * t
    for j in range(codes.shape[1]):
        d += terms[j, codes[row, j]]
    return d


@jit
def reference_keys(values, point, widths, codes, terms):
    """Normalised squared distance of every row to one reference point (docs/design.md#imdav-order).

    Parameters
    ----------
    values : float64[n, m]
        Clamped records. Never written.
    point : float64[m]
    widths : float64[m]
        Domain widths; zero-width attributes are left out of the distance.
    codes : int64[n, c]
        Domain codes of the categorical attributes (``c`` may be 0). Never written.
    terms : float64[c, d]
        ``terms[j, x]``: squared normalised semantic distance of code ``x`` to the point's
        category of attribute ``j`` (docs/design.md#imdav-order).

    Returns
    -------
    float64[n]
        ``sum_j ((x_j - point_j) / width_j) ** 2`` (``j`` ascending), then
        ``+ terms[j, code_j]`` (``j`` ascending). Complexity O(n (m + c)).
    """
    n = values.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = _reference_key(values, i, point, widths, codes, terms)
    return out


@jit_inline
def _before(key_a, a, key_b, b, values, codes):
    """Strict total order: key, then values and codes lexicographically, row.

    See docs/design.md#imdav-order.
    """
    if key_a != key_b:
        return key_a < key_b
    for j in range(values.shape[1]):
        if values[a, j] != values[b, j]:
            return values[a, j] < values[b, j]
    for j in range(codes.shape[1]):
        if codes[a, j] != codes[b, j]:
            return codes[a, j] < codes[b, j]
    return a < b


@jit_inline
def _label_rest(labels, cluster):
    """Put every row not labelled yet in the last cluster, ``cluster``; return ``labels``."""
    for row in range(labels.shape[0]):
        if labels[row] < 0:
            labels[row] = cluster
    return labels


@jit
def insensitive_general(values, k, points, sequence, widths, codes, terms):
    """Insensitive MDAV with any reference sequence: O(n^2 m / k).

    See docs/design.md#imdav-order, #imdav-fast-path.

    Parameters
    ----------
    values : float64[n, m]
        Clamped records. Never written.
    k : int
    points : float64[p, m]
        Distinct reference points.
    sequence : int64[n // k - 1] (or longer)
        Reference point used by each cluster taken while ``>= 2k`` rows remain.
    widths : float64[m]
    codes : int64[n, c]
        Categorical domain codes (``c`` may be 0). Never written.
    terms : float64[p, c, d]
        Categorical key terms of each distinct point (see :func:`reference_keys`).

    Returns
    -------
    int64[n]
        Cluster of each row in formation order; the last cluster holds the rest.

    Each step scans every remaining row and keeps the ``k`` smallest under the strict order
    (key, values, codes, row) in a bounded max-heap.
    """
    n = values.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    heap_key = np.empty(k, dtype=np.float64)
    heap_row = np.empty(k, dtype=np.int64)
    remaining = n
    cluster = 0
    while remaining >= 2 * k:
        point = points[sequence[cluster]]
        point_terms = terms[sequence[cluster]]
        size = 0
        for row in range(n):
            if labels[row] >= 0:
                continue
            key = _reference_key(values, row, point, widths, codes, point_terms)
            if size < k:
                i = size
                size += 1
                while i > 0:
                    parent = (i - 1) // 2
                    if _before(heap_key[parent], heap_row[parent], key, row, values, codes):
                        heap_key[i] = heap_key[parent]
                        heap_row[i] = heap_row[parent]
                        i = parent
                    else:
                        break
                heap_key[i] = key
                heap_row[i] = row
            elif _before(key, row, heap_key[0], heap_row[0], values, codes):
                i = 0
                while True:
                    child = 2 * i + 1
                    if child >= size:
                        break
                    if child + 1 < size and _before(
                        heap_key[child],
                        heap_row[child],
                        heap_key[child + 1],
                        heap_row[child + 1],
                        values,
                        codes,
                    ):
                        child += 1
                    if _before(key, row, heap_key[child], heap_row[child], values, codes):
                        heap_key[i] = heap_key[child]
                        heap_row[i] = heap_row[child]
                        i = child
                    else:
                        break
                heap_key[i] = key
                heap_row[i] = row
        for i in range(size):
            labels[heap_row[i]] = cluster
        remaining -= size
        cluster += 1
    return _label_rest(labels, cluster)


@jit
def take_in_order(orders, sequence, k):
    """Insensitive MDAV fast path: each cluster takes the first ``k`` unused rows of its order.

    Parameters
    ----------
    orders : int64[p, n]
        For each distinct reference point, all rows sorted by (key, values, codes, row).
    sequence : int64[n // k - 1] (or longer)
    k : int

    Returns
    -------
    int64[n]
        The same labels as :func:`insensitive_general`. Complexity O(p n + n).
    """
    p, n = orders.shape
    labels = np.full(n, -1, dtype=np.int64)
    cursor = np.zeros(p, dtype=np.int64)
    remaining = n
    cluster = 0
    while remaining >= 2 * k:
        which = sequence[cluster]
        taken = 0
        c = cursor[which]
        while taken < k:
            row = orders[which, c]
            c += 1
            if labels[row] < 0:
                labels[row] = cluster
                taken += 1
        cursor[which] = c
        remaining -= k
        cluster += 1
    return _label_rest(labels, cluster)


# -- release -----------------------------------------------------------------------------


@jit
def cluster_grid_sums(values, labels, n_clusters, lower, upper, gamma, d_int, warp):
    """Clamp and quantise a column to its grid; exact integer sums per cluster.

    Parameters
    ----------
    values : float64[n]
        Never written.
    labels : int64[n]
    n_clusters : int
    lower, upper, gamma : float
    d_int : int
    warp : tuple or None
        The grid's transform, ``(code, origin, shift)``, or ``None`` (:mod:`dpfast._kernels.grid`).

    Returns
    -------
    sums, sizes : int64[n_clusters]
    n_clamped : int
        Values outside ``[lower, upper]``.

    Quantisation is ``rint((clamp(x) - lower) / gamma)`` as in individual ranking. O(n).
    """
    sums = np.zeros(n_clusters, dtype=np.int64)
    sizes = np.zeros(n_clusters, dtype=np.int64)
    n_clamped = 0
    for i in range(values.shape[0]):
        q, clamped = quantise(values[i], lower, upper, gamma, d_int, warp)
        n_clamped += clamped
        sums[labels[i]] += q
        sizes[labels[i]] += 1
    return sums, sizes, n_clamped


@jit
def noisy_cluster_values(sums, sizes, noise, d_int):
    """Round each cluster mean to the grid (half to even), add its noise, clamp to the grid.

    Parameters
    ----------
    sums, sizes : int64[n_clusters]
    noise : int64[n_clusters]
        One discrete Laplace draw per cluster, in grid steps.
    d_int : int

    Returns
    -------
    int64[n_clusters]
        Values in ``[0, d_int]``. O(n_clusters).
    """
    n_clusters = sums.shape[0]
    out = np.empty(n_clusters, dtype=np.int64)
    for g in range(n_clusters):
        out[g] = noisy_mean(sums[g], sizes[g], noise[g], d_int)
    return out


@jit
def broadcast_clusters(
    labels,
    cluster_values,
    lower,
    upper,
    gamma,
    round_values,
    destination,
    out,
    d_int,
    warp,
):
    """Write ``lower + gamma * cluster_values[label]`` of each row to ``out[destination[row]]``.

    ``destination`` empty means the input order; ``round_values`` rounds to integers;
    ``d_int`` and ``warp`` are the grid's width and transform (a transformed grid maps
    its values back through the transform, :mod:`dpfast._kernels.grid`). O(n).
    """
    n = labels.shape[0]
    shuffled = destination.shape[0] == n
    for row in range(n):
        value = grid_value(
            cluster_values[labels[row]], lower, upper, gamma, round_values, d_int, warp
        )
        if shuffled:
            out[destination[row]] = value
        else:
            out[row] = value


@jit
def scatter_clusters(labels, cluster_values, destination, out):
    """Write ``cluster_values[label]`` of each row to ``out[destination[row]]``.

    ``destination`` empty means the input order. O(n).
    """
    n = labels.shape[0]
    shuffled = destination.shape[0] == n
    for row in range(n):
        if shuffled:
            out[destination[row]] = cluster_values[labels[row]]
        else:
            out[row] = cluster_values[labels[row]]
