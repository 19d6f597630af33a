"""Categorical clusters: each candidate's quality, and the marginality-based centroid.

A cluster of categorical values (codes of a taxonomy's leaves) is summarised by the
domain value of least total semantic distance to its members (Eq. 5 of Sánchez et al.
2016, after Martínez, Valls and Sánchez 2012). The same sums, negated, are the quality
of every candidate in the exponential mechanism of the DP releases (Eq. 6). The
candidates are every leaf of the taxonomy, a data-independent set (docs/design.md#semantic-centroid,
#em-centroid).
"""

from __future__ import annotations

import numpy as np

from dpfast.exceptions import DPFastValueError
from dpfast.taxonomy import Taxonomy

__all__ = [
    "DISTANCE_BITS",
    "cluster_centroids",
    "cluster_quality",
    "cluster_quality_units",
    "distance_units",
]

#: The exponential mechanism's distance unit is ``2**-DISTANCE_BITS`` (docs/design.md#em-centroid).
DISTANCE_BITS = 12


def distance_units(distance: np.ndarray, bits: int = DISTANCE_BITS) -> np.ndarray:
    """Round a public distance table to integer units of ``2**-bits`` (``int64``).

    The exact exponential mechanism needs integer qualities (docs/design.md#em-centroid):
    the rounded table is a fixed function of the public taxonomy, so the quality
    ``-Σ units[c, x]`` is exactly what the mechanism scores, and its sensitivity is the
    table's largest entry (no rounding term). Semantic distances lie in ``[0, 1]``, so
    rounding moves each by at most ``2**-(bits + 1)``.

    Examples
    --------
    >>> distance_units(np.array([[0.0, 0.847997], [0.847997, 0.0]]))
    array([[   0, 3473],
           [3473,    0]])
    """
    table = np.asarray(distance, dtype=np.float64)
    if not (np.isfinite(table).all() and (table >= 0).all()):
        raise DPFastValueError("distances must be finite and >= 0")
    return np.rint(np.ldexp(table, bits)).astype(np.int64)


def cluster_quality(
    taxonomy: Taxonomy, codes: np.ndarray, labels: np.ndarray, n_clusters: int
) -> np.ndarray:
    """Exponential-mechanism quality ``q(C, c) = -Σ_{x in C} δ(c, x)`` per cluster.

    Parameters
    ----------
    taxonomy : Taxonomy
    codes : ndarray of int64, shape (n,)
        Domain codes of the records.
    labels : ndarray of int64, shape (n,)
        Cluster of each record, in ``[0, n_clusters)``.
    n_clusters : int

    Returns
    -------
    ndarray of float64, shape (n_clusters, m)
        Row ``g``, column ``c``: the quality of candidate ``c`` (every domain value,
        a data-independent candidate set) for cluster ``g`` (docs/design.md#semantic-centroid,
        #em-centroid, #imdav-categorical). The DP releases draw from its integer version,
        :func:`cluster_quality_units`.

    Examples
    --------
    >>> jobs = Taxonomy.from_mapping({"*": {"Care": ["nurse", "doctor"], "Air": ["pilot"]}})
    >>> q = cluster_quality(jobs, jobs.encode(["nurse", "nurse"]), np.zeros(2, np.int64), 1)
    >>> int(np.argmax(q[0])) == jobs.code("nurse")
    True
    """
    m = len(taxonomy.domain)
    flat = np.asarray(labels, np.int64) * m + np.asarray(codes, np.int64)
    histogram = np.bincount(flat, minlength=n_clusters * m).reshape(n_clusters, m)
    quality: np.ndarray = -(histogram.astype(np.float64) @ taxonomy.distance_matrix())
    return quality  # the matrix is symmetric: row c of (H @ D) sums δ(x, c)


def cluster_quality_units(
    taxonomy: Taxonomy, codes: np.ndarray, labels: np.ndarray, n_clusters: int
) -> np.ndarray:
    """:func:`cluster_quality` in integer units: ``-Σ_{x in C} units(c, x)`` (``int64``).

    ``units`` is :func:`distance_units` of the taxonomy's distance matrix; the
    sensitivity of a cluster's row is its largest entry (docs/design.md#em-centroid).

    Examples
    --------
    >>> jobs = Taxonomy.from_mapping({"*": {"Care": ["nurse", "doctor"], "Air": ["pilot"]}})
    >>> codes = jobs.encode(["nurse", "pilot"])
    >>> cluster_quality_units(jobs, codes, np.zeros(2, np.int64), 1).dtype
    dtype('int64')
    """
    m = len(taxonomy.domain)
    flat = np.asarray(labels, np.int64) * m + np.asarray(codes, np.int64)
    histogram = np.bincount(flat, minlength=n_clusters * m).reshape(n_clusters, m)
    units = distance_units(taxonomy.distance_matrix())
    return -(histogram @ units)  # type: ignore[no-any-return]


def cluster_centroids(
    taxonomy: Taxonomy, codes: np.ndarray, labels: np.ndarray, n_clusters: int
) -> np.ndarray:
    """Marginality-based centroid of each cluster (Eq. 5): NOT private.

    See docs/design.md#semantic-centroid.

    The domain value minimising ``Σ_{x in C} δ(c, x)``; ties go to the lowest code.

    Returns
    -------
    ndarray of int64, shape (n_clusters,)
        Domain codes.
    """
    best: np.ndarray = np.argmax(cluster_quality(taxonomy, codes, labels, n_clusters), axis=1)
    return best.astype(np.int64)
