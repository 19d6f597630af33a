"""Multivariate microaggregation: MDAV-generic and insensitive MDAV partitions.

:func:`mdav_labels` is standard MDAV (SPEC §5.1): k-anonymity, data-dependent, **never**
to be followed by a DP noise step. :func:`insensitive_mdav_labels` orders records by
their distance to data-independent reference points (SPEC §4.2), so one changed record
changes each cluster by at most one record, and its centroids can take DP noise.

Both take categorical attributes too: domain codes with their taxonomies
(:class:`dpfast.Taxonomy`, used through its methods only: this module sits below
:mod:`dpfast.taxonomy`), compared by semantic distance (SPEC §3.1, §4.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from dpfast._kernels import insensitive_mdav as _insensitive
from dpfast._kernels import mdav as _kernels
from dpfast._kernels import mixed_mdav as _mixed

LEAF_SIZE = 16
SHELL_SIZE = 65536
MIN_REBUILD = 4096
# The fast path keeps one int64 order of all rows per distinct reference point.
FAST_PATH_MAX_POINTS = 64
FAST_PATH_MAX_CELLS = 2**28
REFERENCES = ("corners", "cycling")


class TaxonomyLike(Protocol):
    """What the partitions use of a :class:`dpfast.Taxonomy`."""

    @property
    def domain(self) -> tuple[str, ...]: ...  # noqa: D102

    @property
    def boundary(self) -> tuple[str, str]: ...  # noqa: D102

    @property
    def max_distance(self) -> float: ...  # noqa: D102

    def code(self, label: str) -> int: ...  # noqa: D102

    def distance_matrix(self) -> np.ndarray: ...  # noqa: D102

    def normalised_distance(  # noqa: D102
        self, codes: np.ndarray, reference: int | str
    ) -> np.ndarray: ...


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


def _check_categorical(
    codes: Any, taxonomies: Sequence[TaxonomyLike] | None, n_records: int
) -> tuple[np.ndarray, list[TaxonomyLike]]:
    """Validate categorical codes: int64 ``(n, c)`` array, and the ``c`` taxonomies."""
    found = [] if taxonomies is None else list(taxonomies)
    if not found:
        if codes is not None and np.size(codes):
            raise ValueError("codes were given without taxonomies; pass taxonomies=[...] too")
        return np.zeros((n_records, 0), dtype=np.int64), []
    array = np.asarray(codes) if codes is not None else np.zeros((0, 0))
    if array.ndim == 1 and len(found) == 1:
        array = array[:, None]
    if array.shape != (n_records, len(found)):
        raise ValueError(
            f"codes must have shape ({n_records}, {len(found)}) (records x categorical "
            f"attributes, one per taxonomy), got {array.shape}"
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"codes must be integer domain codes (Taxonomy.encode(labels)), got {array.dtype}"
        )
    for j, taxonomy in enumerate(found):
        size = len(taxonomy.domain)
        if n_records and not (0 <= array[:, j].min() and array[:, j].max() < size):
            raise ValueError(
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
    taxonomies: Sequence[TaxonomyLike] | None = None,
) -> np.ndarray:
    """Partition records by standard MDAV-generic (k-anonymity; not differentially private).

    Attributes are standardised with the population variance (:func:`standardise`), then
    MDAV-generic (SPEC §5.1) forms clusters of ``k`` rows (the last holds ``k .. 2k-1``):
    while ``3k`` rows remain, around the row ``x_r`` farthest from the centroid and the
    remaining row ``x_s`` farthest from ``x_r``; with ``2k .. 3k-1`` left, one cluster
    around ``x_r``; the rest forms the last cluster (all rows when ``n < 2k``). Ties go to
    the lowest row index. For numeric data a k-d tree prunes the searches without changing
    the result.

    With categorical attributes (``codes`` and ``taxonomies``), each adds the term
    ``(δ(a, b) / Δq) ** 2`` to the squared standardised distance: the semantic distance of
    SPEC §3.1 divided by the taxonomy's largest distance ``Δq``, so it lies in ``[0, 1]``
    like a difference of about one standard deviation. The centroid's category is the
    domain value of least total distance to the remaining records' values (SPEC §3.3,
    ties to the lowest code). This path scans the remaining records for every search,
    O(n^2 (m + c) / k).

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
    matrix = _as_matrix(X)
    n = matrix.shape[0]
    k = _check_k(k, n)
    category_codes, found = _check_categorical(codes, taxonomies, n)
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


def _check_domain(bounds: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    if m == 0 and (bounds is None or len(bounds) == 0):
        return np.empty(0), np.empty(0)
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
        The domain corners. A categorical attribute's corners are the domain codes of
        its taxonomy's boundary ``(v*, t*)`` (:attr:`dpfast.Taxonomy.boundary`).
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


def _fast_orders(
    values: np.ndarray,
    points: np.ndarray,
    widths: np.ndarray,
    codes: np.ndarray,
    terms: np.ndarray,
) -> np.ndarray:
    n, m = values.shape
    orders = np.empty((points.shape[0], n), dtype=np.int64)
    lexicographic = [codes[:, j] for j in range(codes.shape[1] - 1, -1, -1)]
    lexicographic += [values[:, j] for j in range(m - 1, -1, -1)]
    for p in range(points.shape[0]):
        keys = _insensitive.reference_keys(values, points[p], widths, codes, terms[p])
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
    codes: Any = None,
    taxonomies: Sequence[TaxonomyLike] | None = None,
) -> np.ndarray:
    """Insensitive MDAV partition (SPEC §4.2): clusters whose centroids can take DP noise.

    Values are clamped to their public bounds. While at least ``2k`` rows remain, the next
    cluster is the ``k`` rows smallest under the strict order of the current reference
    point ``R``: normalised distance ``sum_j ((x_j - R_j) / (U_j - L_j)) ** 2``
    (zero-width attributes left out) plus, for each categorical attribute,
    ``(δ(x_j, R_j) / δ(v*_j, t*_j)) ** 2``
    (:meth:`dpfast.Taxonomy.normalised_distance`); then the numeric values and the
    categorical codes lexicographically, then the row index. The remaining
    ``k .. 2k-1`` rows form the last cluster.

    Parameters
    ----------
    X : array_like of float, shape (n, m)
        Numeric attributes (``m`` may be 0 when there are categorical ones).
    k : int
        Minimum cluster size, ``1 <= k <= n``.
    bounds : array_like, shape (m, 2)
        Public ``(lower, upper)`` of each numeric attribute.
    reference : {"corners", "cycling"} or array_like of shape (p, m + c)
        The data-independent reference sequence; see :func:`reference_sequence`. Numeric
        attributes come first; a categorical attribute's lower and upper corners are its
        taxonomy's ``v*`` and ``t*``, and explicit points give domain codes for it.
    path : {"auto", "general", "fast"}
        ``"general"`` rescans the remaining rows for every cluster, O(n^2 m / k);
        ``"fast"`` sorts the rows once per distinct reference point and takes the next
        ``k`` unused rows (SPEC §4.3). Both give the same partition; ``"auto"`` takes the
        fast path when there are at most 64 distinct points.
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
    category_codes, found = _check_categorical(codes, taxonomies, n)
    lower, upper = _check_domain(bounds, m)
    values = np.clip(matrix, lower, upper) + 0.0  # + 0.0 turns -0.0 into 0.0
    widths = upper - lower
    n_steps = max(n // k - 1, 0)
    corners = np.array(
        [[t.code(label) for label in t.boundary] for t in found], dtype=np.float64
    ).reshape(-1, 2)
    points, sequence = reference_sequence(
        reference,
        np.concatenate([lower, corners[:, 0]]),
        np.concatenate([upper, corners[:, 1]]),
        n_steps,
    )
    terms = _category_terms(points[:, m:], found)
    points = np.ascontiguousarray(points[:, :m])
    if path == "auto":
        small = points.shape[0] <= FAST_PATH_MAX_POINTS
        path = "fast" if small and points.shape[0] * n <= FAST_PATH_MAX_CELLS else "general"
    if path == "fast":
        used = np.unique(sequence)
        remap = np.zeros(points.shape[0], dtype=np.int64)
        remap[used] = np.arange(used.shape[0], dtype=np.int64)
        orders = _fast_orders(values, points[used], widths, category_codes, terms[used])
        labels = _insensitive.take_in_order(orders, remap[sequence], k)
    else:
        labels = _insensitive.insensitive_general(
            values, k, points, sequence, widths, category_codes, terms
        )
    return first_appearance(labels)


def _category_terms(points: np.ndarray, taxonomies: Sequence[TaxonomyLike]) -> np.ndarray:
    """``terms[p, j, x] = (δ(x, point_pj) / δ(v*_j, t*_j)) ** 2`` for every domain code x."""
    size = max((len(t.domain) for t in taxonomies), default=1)
    terms = np.zeros((points.shape[0], len(taxonomies), size), dtype=np.float64)
    for j, taxonomy in enumerate(taxonomies):
        column = points[:, j]
        n_values = len(taxonomy.domain)
        if column.size and not (
            np.all(column == np.rint(column)) and column.min() >= 0 and column.max() < n_values
        ):
            raise ValueError(
                f"reference points must give a domain code in [0, {n_values}) for "
                f"categorical attribute {j}, got {column.tolist()}"
            )
        every = np.arange(n_values, dtype=np.int64)
        for p in range(points.shape[0]):
            terms[p, j, :n_values] = taxonomy.normalised_distance(every, int(column[p])) ** 2
    return terms
