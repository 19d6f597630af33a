"""Standard MDAV-generic microaggregation: k-anonymity, **never** followed by DP noise.

:func:`mdav_labels` partitions records by MDAV-generic (docs/design.md#mdav-generic): the clusters
depend on every record, so one changed record may change all of them, and their centroids must never
receive DP noise (the insensitive variant, :mod:`dpfast.partitions.insensitive_mdav`, is
the one for that). Categorical attributes are compared by semantic distance
(docs/design.md#semantic-distance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpfast._kernels import mdav as _kernels
from dpfast._kernels import mixed_mdav as _mixed
from dpfast._validation import check_k
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.taxonomy import Taxonomy

__all__ = ["first_appearance", "grid_bits", "mdav_labels", "standardise"]

LEAF_SIZE = 16
SHELL_SIZE = 65536
MIN_REBUILD = 4096


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


def as_matrix(values: Any) -> np.ndarray:
    matrix = np.asarray(values)
    if matrix.ndim != 2:
        raise DPFastValueError(
            f"X must be a 2-D array (records x attributes), got shape {matrix.shape}"
        )
    if (
        not np.issubdtype(matrix.dtype, np.number)
        or np.issubdtype(matrix.dtype, np.complexfloating)
        or matrix.dtype.kind == "m"  # durations: not numbers (their unit is arbitrary)
    ):
        raise DPFastTypeError(f"X must hold real numbers, got dtype {matrix.dtype}")
    matrix = matrix.astype(np.float64, copy=False)
    if not np.isfinite(matrix).all():
        raise DPFastValueError("X holds NaN or infinite values; drop or impute them first")
    return matrix


def check_categorical(
    codes: Any, taxonomies: Sequence[Taxonomy] | None, n_records: int
) -> tuple[np.ndarray, list[Taxonomy]]:
    """Validate categorical codes: int64 ``(n, c)`` array, and the ``c`` taxonomies."""
    found = [] if taxonomies is None else list(taxonomies)
    if not found:
        if codes is not None and np.size(codes):
            raise DPFastValueError("codes were given without taxonomies; pass taxonomies=[...] too")
        return np.zeros((n_records, 0), dtype=np.int64), []
    array = np.asarray(codes) if codes is not None else np.zeros((0, 0))
    if array.ndim == 1 and len(found) == 1:
        array = array[:, None]
    if array.shape != (n_records, len(found)):
        raise DPFastValueError(
            f"codes must have shape ({n_records}, {len(found)}) (records x categorical "
            f"attributes, one per taxonomy), got {array.shape}"
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise DPFastTypeError(
            f"codes must be integer domain codes (Taxonomy.encode(labels)), got {array.dtype}"
        )
    for j, taxonomy in enumerate(found):
        size = len(taxonomy.domain)
        if n_records and not (0 <= array[:, j].min() and array[:, j].max() < size):
            raise DPFastValueError(
                f"codes of categorical attribute {j} must be in [0, {size}) (its taxonomy's "
                "leaves); encode labels with Taxonomy.encode"
            )
    return np.ascontiguousarray(array, dtype=np.int64), found


def _padded(matrices: Sequence[np.ndarray]) -> np.ndarray:
    """Stack square matrices of different sizes into ``float64[c, d, d]`` (zero padding)."""
    size = max((matrix.shape[0] for matrix in matrices), default=1)
    out = np.zeros((len(matrices), size, size), dtype=np.float64)
    for j, matrix in enumerate(matrices):
        out[j, : matrix.shape[0], : matrix.shape[1]] = matrix
    return out


def mdav_labels(
    X: Any,
    k: int,
    *,
    codes: Any = None,
    taxonomies: Sequence[Taxonomy] | None = None,
) -> np.ndarray:
    """Partition records by standard MDAV-generic (k-anonymity; not differentially private).

    Attributes are standardised with the population variance (:func:`standardise`), then
    MDAV-generic (docs/design.md#mdav-generic) forms clusters of ``k`` rows (the last holds
    ``k .. 2k-1``): while ``3k`` rows remain, around the row ``x_r`` farthest from the centroid and
    the remaining row ``x_s`` farthest from ``x_r``; with ``2k .. 3k-1`` left, one cluster
    around ``x_r``; the rest forms the last cluster (all rows when ``n < 2k``). Ties go to
    the lowest row index. For numeric data a k-d tree prunes the searches without changing
    the result.

    With categorical attributes (``codes`` and ``taxonomies``), each adds the term
    ``(δ(a, b) / Δq) ** 2`` to the squared standardised distance: the semantic distance of
    docs/design.md#semantic-distance divided by the taxonomy's largest distance ``Δq``, so it lies
    in ``[0, 1]`` like a difference of about one standard deviation. The centroid's category is the
    domain value of least total distance to the remaining records' values
    (docs/design.md#semantic-centroid, ties to the lowest code). This path scans the remaining
    records for every search, O(n^2 (m + c) / k).

    Parameters
    ----------
    X : array_like of float, shape (n, m)
        Numeric attributes (``m`` may be 0 when there are categorical ones).
    k : int
        Minimum cluster size, ``1 <= k <= n``.
    codes : array_like of int, shape (n, c), optional
        Domain codes of the categorical attributes (:meth:`dpfast.Taxonomy.encode`).
    taxonomies : sequence of Taxonomy, optional
        The taxonomy of each categorical attribute, in the order of ``codes``' columns.

    Returns
    -------
    ndarray of int64, shape (n,)
        Cluster of each row, numbered by first appearance in row order.

    Raises
    ------
    TypeError
        ``X`` not numeric, ``k`` not an integer, ``codes`` not integers.
    ValueError
        ``X`` not 2-D, NaN or infinite values, ``k`` outside ``[1, n]``, ``codes`` of the
        wrong shape or outside their domains.

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
    matrix = as_matrix(X)
    n = matrix.shape[0]
    k = check_k(k, n)
    category_codes, found = check_categorical(codes, taxonomies, n)
    if found:
        distances = [np.asarray(t.distance_matrix(), dtype=np.float64) for t in found]
        scale = 2.0 ** grid_bits(n)  # categorical terms in the numeric grid's units
        table = _padded(
            [
                d / t.max_distance * scale if t.max_distance > 0 else np.zeros_like(d)
                for d, t in zip(distances, found, strict=True)
            ]
        )
        labels = _mixed.mixed_mdav_partition(
            standardise(matrix),
            category_codes,
            table,
            _padded(distances),
            np.array([len(t.domain) for t in found], dtype=np.int64),
            k,
        )
        return first_appearance(labels)
    if matrix.shape[1] == 0:
        matrix = np.zeros((n, 1))
    labels, _ = _kernels.mdav_partition(standardise(matrix), k, LEAF_SIZE, SHELL_SIZE, MIN_REBUILD)
    return first_appearance(labels)
