"""Insensitive MDAV: clusters from a data-independent order, fit for DP centroids.

:func:`insensitive_mdav_labels` orders records by their distance to data-independent
reference points on the domain's boundary (docs/design.md#imdav-order), so one changed record
changes each cluster by at most one record (docs/design.md#imdav-insensitivity) and the clusters'
centroids can take DP noise (:func:`dpfast.mdav_dp`). Categorical attributes are compared by
semantic distance normalised by the taxonomy's boundary pair (docs/design.md#semantic-distance,
#imdav-order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dpfast._kernels import insensitive_mdav as _insensitive
from dpfast._validation import check_k, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.partitions.mdav import as_matrix, check_categorical, first_appearance
from dpfast.taxonomy import Taxonomy

__all__ = [
    "FAST_PATH_MAX_POINTS",
    "REFERENCES",
    "ReferenceGeometry",
    "insensitive_labels",
    "insensitive_mdav_labels",
    "reference_geometry",
    "reference_sequence",
]

# The fast path keeps one int64 order of all rows per distinct reference point.
FAST_PATH_MAX_POINTS = 64
FAST_PATH_MAX_CELLS = 2**28
REFERENCES = ("corners", "cycling")
#: A named reference sequence, or explicit points of shape ``(p, m + c)``.
Reference = Literal["corners", "cycling"] | np.ndarray | Sequence[Sequence[float]]
Path = Literal["auto", "general", "fast"]


def _check_domain(bounds: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    if m == 0 and (bounds is None or len(bounds) == 0):
        return np.empty(0), np.empty(0)
    pairs = np.asarray(bounds, dtype=np.float64)
    if pairs.shape != (m, 2):
        raise DPFastValueError(
            f"bounds must give (lower, upper) for each of the {m} attributes, got shape "
            f"{pairs.shape}"
        )
    if not np.isfinite(pairs).all() or (pairs[:, 0] > pairs[:, 1]).any():
        raise DPFastValueError(f"bounds must be finite with lower <= upper, got {pairs.tolist()}")
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def reference_sequence(
    reference: Reference, lower: np.ndarray, upper: np.ndarray, n_steps: int
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
            raise DPFastValueError(
                f"reference must be one of {list(REFERENCES)} or an array of points, got "
                f"{quoted(reference)}"
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
        raise DPFastValueError(
            f"reference points must have shape (p, {m}) with p >= 1, got {points.shape}"
        )
    if not np.isfinite(points).all():
        raise DPFastValueError("reference points must be finite")
    return points, steps % points.shape[0]


@dataclass(frozen=True)
class ReferenceGeometry:
    """A reference sequence as the partition's kernels take it (docs/design.md#imdav-order).

    Attributes
    ----------
    points : ndarray of float64, shape (p, m)
        The numeric coordinates of every distinct reference point.
    terms : ndarray of float64, shape (p, c, size)
        ``terms[p, j, x]``: the categorical term of domain code ``x`` of attribute ``j``
        at point ``p`` (``(δ(x, R) / δ(v*, t*)) ** 2``).
    sequence : ndarray of int64, shape (n_steps,)
        The point each cluster but the last is formed from.
    lower, upper : ndarray of float64, shape (m,)
        The public domain of the numeric attributes: values are clamped to it.
    """

    points: np.ndarray
    terms: np.ndarray
    sequence: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def widths(self) -> np.ndarray:
        """The width of every numeric attribute's domain (the distance's scale)."""
        return self.upper - self.lower  # type: ignore[no-any-return]

    def used(self) -> ReferenceGeometry:
        """Return the distinct points the sequence uses, renumbered (the fast path's)."""
        used = np.unique(self.sequence)
        remap = np.zeros(self.points.shape[0], dtype=np.int64)
        remap[used] = np.arange(used.shape[0], dtype=np.int64)
        return ReferenceGeometry(
            np.ascontiguousarray(self.points[used]),
            np.ascontiguousarray(self.terms[used]),
            remap[self.sequence],
            self.lower,
            self.upper,
        )


def reference_geometry(
    reference: Reference,
    lower: np.ndarray,
    upper: np.ndarray,
    taxonomies: Sequence[Taxonomy],
    n_steps: int,
) -> ReferenceGeometry:
    """Resolve ``reference`` for ``n_steps`` clusters over a public domain.

    ``lower`` and ``upper`` bound the numeric attributes; each categorical attribute's
    corners are its taxonomy's boundary ``(v*, t*)`` (see :func:`reference_sequence`).

    Raises
    ------
    ValueError
        An unknown named sequence, or explicit points of the wrong shape, not finite, or
        not domain codes for a categorical attribute.
    """
    m = lower.shape[0]
    corners = np.array(
        [[t.code(label) for label in t.boundary] for t in taxonomies], dtype=np.float64
    ).reshape(-1, 2)
    points, sequence = reference_sequence(
        reference,
        np.concatenate([lower, corners[:, 0]]),
        np.concatenate([upper, corners[:, 1]]),
        n_steps,
    )
    terms = _category_terms(points[:, m:], taxonomies)
    return ReferenceGeometry(np.ascontiguousarray(points[:, :m]), terms, sequence, lower, upper)


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
    reference: Reference = "corners",
    *,
    path: Path = "auto",
    codes: Any = None,
    taxonomies: Sequence[Taxonomy] | None = None,
) -> np.ndarray:
    """Insensitive MDAV partition: clusters whose centroids can take DP noise.

    See docs/design.md#imdav-order.

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
        Numeric attributes, clamped to ``bounds`` (``m`` may be 0 with categorical ones).
    k : int
        Cluster size, ``1 <= k <= n``.
    bounds : array_like, shape (m, 2)
        Public ``(lower, upper)`` of each numeric attribute: the reference corners and
        the distance's scale.
    reference : {"corners", "cycling"} or array_like of shape (p, m + c)
        The data-independent reference sequence; see :func:`reference_sequence`. Numeric
        attributes come first; a categorical attribute's lower and upper corners are its
        taxonomy's ``v*`` and ``t*``, and explicit points give domain codes for it.
    path : {"auto", "general", "fast"}
        ``"general"`` rescans the remaining rows for every cluster, O(n^2 m / k);
        ``"fast"`` sorts the rows once per distinct reference point and takes the next
        ``k`` unused rows (docs/design.md#imdav-fast-path). Both give the same partition; ``"auto"``
        takes the fast path when there are at most 64 distinct points.
    codes, taxonomies : optional
        Categorical attributes, as for :func:`~dpfast.partitions.mdav.mdav_labels`.

    Returns
    -------
    ndarray of int64, shape (n,)
        Cluster of each row (``n // k`` clusters, the last with ``k .. 2k-1`` rows),
        numbered by first appearance in row order.

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
    matrix = as_matrix(X)
    n, m = matrix.shape
    k = check_k(k, n)
    if path not in ("auto", "general", "fast"):
        raise DPFastValueError(f"path must be 'auto', 'general' or 'fast', got {path!r}")
    category_codes, found = check_categorical(codes, taxonomies, n)
    lower, upper = _check_domain(bounds, m)
    values = np.clip(matrix, lower, upper) + 0.0  # + 0.0 turns -0.0 into 0.0
    geometry = reference_geometry(reference, lower, upper, found, max(n // k - 1, 0))
    return insensitive_labels(values, category_codes, geometry, k, path)


def insensitive_labels(
    values: np.ndarray, codes: np.ndarray, geometry: ReferenceGeometry, k: int, path: Path = "auto"
) -> np.ndarray:
    """Return the insensitive MDAV partition of checked inputs (:func:`insensitive_mdav_labels`).

    ``values`` (float64, shape ``(n, m)``) are clamped to ``geometry``'s domain already;
    ``codes`` (int64, shape ``(n, c)``) are domain codes of the categorical attributes;
    ``path`` is ``"auto"``, ``"general"`` or ``"fast"``. Returns each row's cluster,
    numbered by first appearance in row order.
    """
    n = values.shape[0]
    points, widths = geometry.points, geometry.widths
    if path == "auto":
        small = points.shape[0] <= FAST_PATH_MAX_POINTS
        path = "fast" if small and points.shape[0] * n <= FAST_PATH_MAX_CELLS else "general"
    if path == "fast":
        used = geometry.used()
        orders = _fast_orders(values, used.points, widths, codes, used.terms)
        labels = _insensitive.take_in_order(orders, used.sequence, k)
    else:
        labels = _insensitive.insensitive_general(
            values, k, points, geometry.sequence, widths, codes, geometry.terms
        )
    return first_appearance(labels)


def _category_terms(points: np.ndarray, taxonomies: Sequence[Taxonomy]) -> np.ndarray:
    """``terms[p, j, x] = (δ(x, point_pj) / δ(v*_j, t*_j)) ** 2`` for every domain code x."""
    size = max((len(t.domain) for t in taxonomies), default=1)
    terms = np.zeros((points.shape[0], len(taxonomies), size), dtype=np.float64)
    for j, taxonomy in enumerate(taxonomies):
        column = points[:, j]
        n_values = len(taxonomy.domain)
        if column.size and not (
            np.all(column == np.rint(column)) and column.min() >= 0 and column.max() < n_values
        ):
            raise DPFastValueError(
                f"reference points must give a domain code in [0, {n_values}) for "
                f"categorical attribute {j}, got {column.tolist()}"
            )
        every = np.arange(n_values, dtype=np.int64)
        for p in range(points.shape[0]):
            terms[p, j, :n_values] = taxonomy.normalised_distance(every, int(column[p])) ** 2
    return terms
