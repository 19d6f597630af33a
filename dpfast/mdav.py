"""Multivariate microaggregation: MDAV-generic and insensitive MDAV partitions.

:func:`mdav_labels` is standard MDAV (SPEC §5.1): k-anonymity, data-dependent, **never**
to be followed by a DP noise step. :func:`insensitive_mdav_labels` orders records by
their distance to data-independent reference points (SPEC §4.2), so one changed record
changes each cluster by at most one record, and its centroids can take DP noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpfast._kernels import insensitive_mdav as _insensitive
from dpfast._kernels import mdav as _kernels

LEAF_SIZE = 16
SHELL_SIZE = 65536
MIN_REBUILD = 4096
# The fast path keeps one int64 order of all rows per distinct reference point.
FAST_PATH_MAX_POINTS = 64
FAST_PATH_MAX_CELLS = 2**28
REFERENCES = ("corners", "cycling")


def grid_bits(n_records: int) -> int:
    """Bits of the grid that standardised values are rounded to (``2**-bits`` std units).

    Standardised values satisfy ``sum_i |z_i| <= n``, so with ``bits = 50 - bitlen(n)``
    every column sum stays below ``2**53`` and is exact in float64 and int64.
    """
    return min(40, 50 - max(1, n_records).bit_length())


def standardise(values: np.ndarray) -> np.ndarray:
    """Standardise columns with the population variance and round them to a fine grid.

    Parameters
    ----------
    values : ndarray of float64, shape (n, m)

    Returns
    -------
    ndarray of float64, shape (n, m)
        ``rint((x - mean) / sd * 2**bits)`` per column (whole numbers), with ``mean`` and
        the population variance from correctly rounded sums (:func:`math.fsum`), and
        ``bits`` from :func:`grid_bits`. Constant columns become 0 (sdcMicro's weight 1:
        they add nothing to any distance).

    Examples
    --------
    >>> standardise(np.array([[1.0, 5.0], [3.0, 5.0]])) / 2.0 ** grid_bits(2)
    array([[-1.,  0.],
           [ 1.,  0.]])
    """
    n, m = values.shape
    scale = 2.0 ** grid_bits(n)
    out = np.zeros((n, m), dtype=np.float64)
    for j in range(m):
        column = np.ascontiguousarray(values[:, j], dtype=np.float64)
        if n == 0 or column.min() == column.max():
            continue
        mean = math.fsum(column.tolist()) / n
        centred = column - mean
        sd = math.sqrt(math.fsum((centred * centred).tolist()) / n)
        out[:, j] = np.rint(centred / sd * scale)
    return out


def first_appearance(labels: np.ndarray) -> np.ndarray:
    """Renumber cluster labels ``0, 1, ...`` in the order they first appear by row.

    Examples
    --------
    >>> first_appearance(np.array([4, 2, 4, 0])).tolist()
    [0, 1, 0, 2]
    """
    if labels.shape[0] == 0:
        return labels.astype(np.int64)
    _, first = np.unique(labels, return_index=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0], dtype=np.int64)
    return rank[np.searchsorted(np.unique(labels), labels)]


def _as_matrix(values: Any) -> np.ndarray:
    matrix = np.asarray(values)
    if matrix.ndim != 2:
        raise ValueError(f"X must be a 2-D array (records x attributes), got shape {matrix.shape}")
    if not np.issubdtype(matrix.dtype, np.number) or np.issubdtype(
        matrix.dtype, np.complexfloating
    ):
        raise TypeError(f"X must hold real numbers, got dtype {matrix.dtype}")
    matrix = matrix.astype(np.float64, copy=False)
    if not np.isfinite(matrix).all():
        raise ValueError("X holds NaN or infinite values; drop or impute them first")
    return matrix


def _check_k(k: Any, n_records: int) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer, got {k!r}")
    if not 1 <= int(k) <= max(n_records, 1) or n_records == 0:
        raise ValueError(
            f"k must be in [1, {n_records}] (the number of records), got {k}; choose a "
            "smaller k or use more records"
        )
    return int(k)


def mdav_labels(X: Any, k: int) -> np.ndarray:
    """Partition records by standard MDAV-generic (k-anonymity; not differentially private).

    Attributes are standardised with the population variance (:func:`standardise`), then
    MDAV-generic (SPEC §5.1) forms clusters of ``k`` rows (the last holds ``k .. 2k-1``):
    while ``3k`` rows remain, around the row ``x_r`` farthest from the centroid and the
    remaining row ``x_s`` farthest from ``x_r``; with ``2k .. 3k-1`` left, one cluster
    around ``x_r``; the rest forms the last cluster (all rows when ``n < 2k``). Ties go to
    the lowest row index. A k-d tree prunes the searches without changing the result.

    Parameters
    ----------
    X : array_like of float, shape (n, m)
    k : int
        Minimum cluster size, ``1 <= k <= n``.

    Returns
    -------
    ndarray of int64, shape (n,)
        Cluster of each row, numbered by first appearance in row order.

    Raises
    ------
    TypeError
        ``X`` not numeric, ``k`` not an integer.
    ValueError
        ``X`` not 2-D, NaN or infinite values, ``k`` outside ``[1, n]``.

    Notes
    -----
    Standard MDAV is data-dependent: one changed record may change every cluster, so its
    centroids must never receive DP noise (use :func:`insensitive_mdav_labels`).

    References
    ----------
    Domingo-Ferrer and Torra, Ordinal, continuous and heterogeneous k-anonymity through
    microaggregation, DMKD 11(2), 2005.

    Examples
    --------
    >>> X = np.array([[2, 1], [3, 2], [3, 2], [20, 19], [21, 20]])
    >>> mdav_labels(X, 2).tolist()
    [0, 0, 0, 1, 1]
    """
    matrix = _as_matrix(X)
    k = _check_k(k, matrix.shape[0])
    if matrix.shape[1] == 0:
        matrix = np.zeros((matrix.shape[0], 1))
    labels, _ = _kernels.mdav_partition(standardise(matrix), k, LEAF_SIZE, SHELL_SIZE,
                                       MIN_REBUILD)
    return first_appearance(labels)


def _check_domain(bounds: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    pairs = np.asarray(bounds, dtype=np.float64)
    if pairs.shape != (m, 2):
        raise ValueError(
            f"bounds must give (lower, upper) for each of the {m} attributes, got shape "
            f"{pairs.shape}"
        )
    if not np.isfinite(pairs).all() or (pairs[:, 0] > pairs[:, 1]).any():
        raise ValueError(f"bounds must be finite with lower <= upper, got {pairs.tolist()}")
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def reference_sequence(
    reference: Any, lower: np.ndarray, upper: np.ndarray, n_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct reference points and which one each of ``n_steps`` clusters uses.

    Parameters
    ----------
    reference : {"corners", "cycling"} or array_like of shape (p, m)
        ``"corners"``: the all-lower corner, then the all-upper corner, alternating.
        ``"cycling"``: pairs of opposite corners, corner ``c`` (bit ``j`` set: attribute
        ``j`` at its upper bound) then its complement, for ``c = 0, 1, ...,
        2**(m-1) - 1``, cycling. An array: these points, cycling. All are data-independent.
    lower, upper : ndarray of float64, shape (m,)
    n_steps : int

    Returns
    -------
    points : ndarray of float64, shape (p, m)
    sequence : ndarray of int64, shape (n_steps,)

    Examples
    --------
    >>> points, sequence = reference_sequence("cycling", np.zeros(2), np.ones(2), 5)
    >>> points[sequence].tolist()
    [[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    """
    m = lower.shape[0]
    steps = np.arange(n_steps, dtype=np.int64)
    if isinstance(reference, str):
        if reference not in REFERENCES:
            raise ValueError(
                f"reference must be one of {list(REFERENCES)} or an array of points, got "
                f"{reference!r}"
            )
        if reference == "corners" or m <= 1:
            return np.stack([lower, upper]), steps % 2
        period = 2**m
        used = min(period, n_steps)
        sequence = np.arange(used, dtype=np.int64)
        corner = sequence // 2
        corner = np.where(sequence % 2 == 1, (period - 1) ^ corner, corner)
        bits = (corner[:, None] >> np.arange(m)) & 1
        points = np.where(bits == 1, upper, lower).astype(np.float64)
        return points, steps % used if used else steps
    points = np.asarray(reference, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != m or points.shape[0] == 0:
        raise ValueError(
            f"reference points must have shape (p, {m}) with p >= 1, got {points.shape}"
        )
    if not np.isfinite(points).all():
        raise ValueError("reference points must be finite")
    return points, steps % points.shape[0]


def _fast_orders(values: np.ndarray, points: np.ndarray, widths: np.ndarray) -> np.ndarray:
    n, m = values.shape
    orders = np.empty((points.shape[0], n), dtype=np.int64)
    lexicographic = [values[:, j] for j in range(m - 1, -1, -1)]
    for p in range(points.shape[0]):
        keys = _insensitive.reference_keys(values, points[p], widths)
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        if n > 1 and bool((ordered[1:] == ordered[:-1]).any()):
            order = np.lexsort([*lexicographic, keys])
        orders[p] = order
    return orders


def insensitive_mdav_labels(
    X: Any,
    k: int,
    bounds: Sequence[tuple[float, float]] | np.ndarray,
    reference: Any = "corners",
    *,
    path: str = "auto",
) -> np.ndarray:
    """Insensitive MDAV partition (SPEC §4.2): clusters whose centroids can take DP noise.

    Values are clamped to their public bounds. While at least ``2k`` rows remain, the next
    cluster is the ``k`` rows smallest under the strict order of the current reference
    point ``R``: normalised distance ``sum_j ((x_j - R_j) / (U_j - L_j)) ** 2``
    (zero-width attributes left out), then the values lexicographically, then the row
    index. The remaining ``k .. 2k-1`` rows form the last cluster.

    Parameters
    ----------
    X : array_like of float, shape (n, m)
    k : int
        Minimum cluster size, ``1 <= k <= n``.
    bounds : array_like, shape (m, 2)
        Public ``(lower, upper)`` of each attribute.
    reference : {"corners", "cycling"} or array_like of shape (p, m)
        The data-independent reference sequence; see :func:`reference_sequence`.
    path : {"auto", "general", "fast"}
        ``"general"`` rescans the remaining rows for every cluster, O(n^2 m / k);
        ``"fast"`` sorts the rows once per distinct reference point and takes the next
        ``k`` unused rows (SPEC §4.3). Both give the same partition; ``"auto"`` takes the
        fast path when there are at most 64 distinct points.

    Returns
    -------
    ndarray of int64, shape (n,)
        Cluster of each row, numbered by first appearance in row order.

    Raises
    ------
    TypeError, ValueError
        Bad ``X``, ``k``, ``bounds``, ``reference`` or ``path``.

    References
    ----------
    Soria-Comas, Domingo-Ferrer, Sánchez, Martínez. Enhancing data utility in differential
    privacy via microaggregation-based k-anonymity. VLDB J 23(5), 2014.

    Examples
    --------
    >>> X = np.array([[1.0, 1.0], [9.0, 8.0], [2.0, 1.0], [8.0, 9.0], [5.0, 5.0]])
    >>> insensitive_mdav_labels(X, 2, [(0, 10), (0, 10)]).tolist()
    [0, 1, 0, 1, 1]
    """
    matrix = _as_matrix(X)
    n, m = matrix.shape
    k = _check_k(k, n)
    if path not in ("auto", "general", "fast"):
        raise ValueError(f"path must be 'auto', 'general' or 'fast', got {path!r}")
    lower, upper = _check_domain(bounds, m)
    values = np.clip(matrix, lower, upper) + 0.0  # + 0.0 turns -0.0 into 0.0
    widths = upper - lower
    n_steps = max(n // k - 1, 0)
    points, sequence = reference_sequence(reference, lower, upper, n_steps)
    if path == "auto":
        small = points.shape[0] <= FAST_PATH_MAX_POINTS
        path = "fast" if small and points.shape[0] * n <= FAST_PATH_MAX_CELLS else "general"
    if path == "fast":
        used = np.unique(sequence)
        remap = np.zeros(points.shape[0], dtype=np.int64)
        remap[used] = np.arange(used.shape[0], dtype=np.int64)
        orders = _fast_orders(values, points[used], widths)
        labels = _insensitive.take_in_order(orders, remap[sequence], k)
    else:
        labels = _insensitive.insensitive_general(values, k, points, sequence, widths)
    return first_appearance(labels)
