"""Insensitive MDAV's clusters and their totals: ``mdav_dp``'s partition, written once.

:func:`insensitive_clusters` partitions the rows under a data-independent reference sequence
(Soria-Comas et al. 2014; docs/design.md); :func:`cluster_totals` gives each cluster's exact
totals (numeric grid sums, records per taxonomy leaf), from which the method draws its DP
centroids. Held (``flow.holds``), the clusters are every row's label in memory, and the
totals one kernel call (or ``bincount``) per column. Elsewhere passes over the column source
and scratch files make the partition (:mod:`dpfast.steps.cluster_passes`) within the
dataflow's memory limit, and the clusters stay in those files
(:class:`~dpfast.dataflow.cluster_files.Partition`), which the totals read and the engine
writes a ``WriteClusters`` release from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpfast._kernels import insensitive_mdav as cluster_kernels
from dpfast.dataflow.cluster_files import cluster_limits
from dpfast.dataflow.flow import Dataflow
from dpfast.dataflow.values import (
    CategoricalColumn,
    Clusters,
    ClusterTotals,
    NumericColumn,
    partition_inputs,
)
from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import ReferenceGeometry, insensitive_labels
from dpfast.steps.cluster_passes import file_totals, partition

__all__ = ["cluster_totals", "insensitive_clusters"]


def insensitive_clusters(
    flow: Dataflow,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    geometry: ReferenceGeometry,
    k: int,
) -> Clusters:
    """Partition the rows by insensitive MDAV under ``geometry`` (docs/design.md#imdav-order).

    Numeric values are clamped to ``geometry``'s domain (in the order of ``numeric``),
    categorical ones are their taxonomies' codes. While at least ``2k`` rows remain, the next
    cluster takes the ``k`` untaken rows first in its reference point's order (distance, then
    the values, the codes, the row); the rest form the last cluster. Clusters are numbered by
    first appearance. Held, the in-memory kernels
    (:func:`~dpfast.partitions.insensitive_mdav.insensitive_labels`: the fast path, or the
    general one) label every row; elsewhere passes give the same partition within the limit.

    Raises
    ------
    DPFastValueError
        Read in passes: a reference sequence of more than 64 distinct points, or
        per-cluster arrays that take more than half of the memory limit (refused before
        any pass); a protected value that is not finite, or outside its taxonomy.
    """
    if flow.holds:
        n_rows = flow.source.n_rows
        matrix, codes, _ = partition_inputs(numeric, categorical, n_rows)
        values = np.clip(matrix, geometry.lower, geometry.upper) + 0.0  # -0.0 becomes 0.0
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        return Clusters.of(insensitive_labels(values, codes, geometry, k))
    leaves = sum(len(c.taxonomy.domain) for c in categorical)
    attributes = len(numeric) + len(categorical)
    n, memory = flow.source.n_rows, flow.limits.memory
    limits = cluster_limits(n, k, attributes, leaves, geometry, memory, flow.limits.batch_rows)
    directory = flow.scratch()
    return partition(flow.source, numeric, categorical, geometry, k, directory, limits, flow.tick)


def cluster_totals(
    flow: Dataflow,
    clusters: Clusters,
    numeric: Sequence[NumericColumn],
    grids: Sequence[Grid],
    categorical: Sequence[CategoricalColumn],
) -> ClusterTotals:
    """Return every cluster's exact integer grid sums and records per leaf.

    ``clusters`` come from :func:`insensitive_clusters` on the same dataflow, ``numeric`` are
    its numeric columns in its order (read in passes, its first pass clamped their values and
    counted the clamped ones), and ``numeric[j]`` is clamped to ``grids[j]``'s domain and
    quantised to its steps, as the rank groups' sums are.
    """
    if clusters.held is not None:
        return file_totals(clusters, numeric, grids, categorical, flow.tick)
    labels, count = clusters.labels, clusters.count
    sums, clamped = [], []
    for column, grid in zip(numeric, grids, strict=True):
        found, _, outside = cluster_kernels.cluster_grid_sums(
            column.values,
            labels,
            count,
            grid.lower,
            grid.upper,
            grid.gamma,
            grid.d_int,
            grid.warp,
        )
        sums.append(found)
        clamped.append(int(outside))
    counts = []
    for cat in categorical:
        m = len(cat.taxonomy.domain)
        flat = labels * m + cat.codes
        counts.append(np.bincount(flat, minlength=count * m).reshape(count, m))
    return ClusterTotals(sums, clamped, counts)
