"""The insensitive MDAV clusters of rows read in passes, within a memory limit (docs/engines.md).

The partition is the one :func:`~dpfast.partitions.insensitive_mdav.insensitive_labels`
gives in memory, for reference sequences of at most
:data:`~dpfast.partitions.insensitive_mdav.FAST_PATH_MAX_POINTS` distinct points (the fast
path's: one sorted order of the rows per point). The passes, over the column source and
over scratch files in the dataflow's scratch folder:

1. **Values.** Each protected column is read batch by batch, checked, clamped to its public
   bounds (numeric) or encoded as taxonomy codes (categorical), and written at its rows'
   places (:class:`~dpfast.dataflow.cluster_files.Attributes`).
2. **Orders.** Every row's distance key to each point, then each point's order of all rows,
   sorted range by range (:mod:`dpfast.steps.point_orders`).
3. **Merge.** The orders are read back in buffers; each cluster takes the first ``k`` rows
   of its point's order not yet taken (a bitset of ``n`` bits), as the in-memory fast path
   does. The rows taken go, with their cluster, to files by row range, which then give
   every row's cluster in row order (:class:`~dpfast.dataflow.cluster_files.Partition`),
   numbered by first appearance when read, as in memory.
4. **Totals.** Exact integer sums (numeric) and records per leaf (categorical) of every
   cluster, in one pass over the scratch files (:func:`file_totals`).

The engine writes the release in output order from the partition's files (``WriteClusters``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._kernels import mdav_stream
from dpfast._validation import kernel_floats
from dpfast.dataflow.cluster_files import Attributes, ClusterLimits, Partition
from dpfast.dataflow.flow import numeric_values, taxonomy_codes
from dpfast.dataflow.scratch_files import append_array, read_rows, write_at
from dpfast.dataflow.source import Source
from dpfast.dataflow.values import CategoricalColumn, Clusters, ClusterTotals, NumericColumn
from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import ReferenceGeometry
from dpfast.steps.point_orders import distance_orders

__all__ = ["file_totals", "partition"]

Tick = Callable[[str, int, int], None]


def partition(
    source: Source,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    geometry: ReferenceGeometry,
    k: int,
    directory: Path,
    limits: ClusterLimits,
    tick: Tick,
) -> Clusters:
    """Run the values, orders and merge passes; return the clusters (by first appearance)."""
    n = source.n_rows
    values, codes, clamped = _write_values(
        source, numeric, categorical, geometry, directory, limits, tick
    )
    attributes = Attributes(values, codes, n, limits.chunk_rows)
    used = geometry.used()
    n_steps = used.sequence.shape[0]
    orders = (
        distance_orders(attributes, used, directory, limits.sorted_rows, tick) if n_steps else []
    )
    labels = directory / "clusters.bin"
    first_rows = _merge(directory, labels, orders, used.sequence, k, n, limits, tick)
    count = n_steps + 1
    rank = np.empty(count, dtype=np.int64)
    rank[np.argsort(first_rows, kind="stable")] = np.arange(count, dtype=np.int64)
    formed = np.full(count, k, dtype=np.int64)
    formed[-1] = n - k * n_steps  # the last cluster holds the rest
    sizes = np.empty(count, dtype=np.int64)
    sizes[rank] = formed
    held = Partition(labels, rank, attributes, limits, clamped)
    return Clusters(count, sizes, np.empty(0, dtype=np.int64), held)


# -- pass 1: values --------------------------------------------------------------------


@dataclass(frozen=True)
class _Clamped:
    """A batch of a numeric column clamped to its bounds, its first row, its count outside."""

    column: NumericColumn
    lower: float
    upper: float

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int]:
        values = numeric_values(array, self.column, first_row)
        lo, hi = self.lower, self.upper
        outside = int(np.count_nonzero(values < lo) + np.count_nonzero(values > hi))
        return first_row, np.clip(values, lo, hi) + 0.0, outside  # + 0.0: -0.0 is 0.0


@dataclass(frozen=True)
class _Codes:
    """A batch of a categorical column as its taxonomy's codes, with its first row."""

    column: CategoricalColumn

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int]:
        return first_row, taxonomy_codes(array, self.column), 0


def _write_values(
    source: Source,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    geometry: ReferenceGeometry,
    directory: Path,
    limits: ClusterLimits,
    tick: Tick,
) -> tuple[tuple[Path, ...], tuple[Path, ...], tuple[int, ...]]:
    """Write every protected column, clamped or encoded, at its rows' places.

    Returns the values' files, the codes' files and each numeric column's clamped count.
    The batches come back to this process to be written (a source may run them elsewhere).
    """
    values, codes, clamped = [], [], []
    total = len(numeric) + len(categorical)
    for j, column in enumerate(numeric):
        tick("values", j, total)
        path = directory / f"values-{j}.bin"
        batch = _Clamped(column, float(geometry.lower[j]), float(geometry.upper[j]))
        clamped.append(_positional(source, str(column.name), path, limits, batch))
        values.append(path)
    for j, cat in enumerate(categorical):
        tick("values", len(numeric) + j, total)
        path = directory / f"codes-{j}.bin"
        _positional(source, str(cat.name), path, limits, _Codes(cat))
        codes.append(path)
    tick("values", total, total)
    return tuple(values), tuple(codes), tuple(clamped)


def _positional(
    source: Source,
    name: str,
    path: Path,
    limits: ClusterLimits,
    batch: Callable[[pa.Array, int], tuple[int, np.ndarray, int]],
) -> int:
    """Write ``batch``'s values of every batch at its rows' places; return its counts' sum."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    total = 0
    try:
        for first_row, values, count in source.map_column(name, limits.batch_rows, batch):
            write_at(fd, values, first_row * 8)
            total += count
    finally:
        os.close(fd)
    return total


# -- pass 3: the merge -----------------------------------------------------------------


def _merge(
    directory: Path,
    labels_path: Path,
    orders: Sequence[Path],
    sequence: np.ndarray,
    k: int,
    n: int,
    limits: ClusterLimits,
    tick: Tick,
) -> np.ndarray:
    """Write each row's cluster (in formation order) to ``labels_path``; return their first rows."""
    n_steps = sequence.shape[0]
    first_rows = np.full(n_steps + 1, n, dtype=np.int64)
    bucket_rows = limits.bucket_rows
    n_buckets = (n + bucket_rows - 1) // bucket_rows
    buckets = [directory / f"taken-{b}.bin" for b in range(n_buckets)]
    if n_steps:
        _take(orders, sequence, k, n, buckets, limits, first_rows, tick)
    with open(labels_path, "wb") as labels_file:
        for b in range(n_buckets):
            first = b * bucket_rows
            labels = np.full(min(bucket_rows, n - first), n_steps, dtype=np.int64)
            if buckets[b].exists():
                pairs = np.fromfile(buckets[b], np.int64).reshape(-1, 2)
                labels[pairs[:, 0] - first] = pairs[:, 1]
                del pairs
                buckets[b].unlink()
            if first_rows[n_steps] == n:
                rest = np.flatnonzero(labels == n_steps)
                if rest.shape[0]:
                    first_rows[n_steps] = first + int(rest[0])
            append_array(labels_file, labels)
    return first_rows


def _take(
    orders: Sequence[Path],
    sequence: np.ndarray,
    k: int,
    n: int,
    buckets: Sequence[Path],
    limits: ClusterLimits,
    first_rows: np.ndarray,
    tick: Tick,
) -> None:
    """Run the streamed merge; file each row taken, with its cluster, by row range."""
    n_points = len(orders)
    width = limits.merge_rows
    buffers = np.zeros((n_points, width), dtype=np.int64)
    starts = np.zeros(n_points, dtype=np.int64)
    stops = np.zeros(n_points, dtype=np.int64)
    cursors = [0] * n_points
    taken = np.zeros((n + 7) // 8, dtype=np.uint8)
    out = np.empty(width, dtype=np.int64)
    state = np.zeros(3, dtype=np.int64)
    emitted = 0
    while True:
        status = mdav_stream.merge_orders(buffers, starts, stops, sequence, state, k, taken, out)
        if status < 0:
            filled = int(state[2])
            _file_taken(out[:filled], emitted, k, buckets, limits.bucket_rows, first_rows)
            emitted += filled
            state[2] = 0
            tick("clusters", int(state[0]), sequence.shape[0])
            if status == mdav_stream.MERGE_DONE:
                return
            continue
        read = read_rows(orders[status], np.int64, cursors[status], width)
        if read.shape[0] == 0:  # pragma: no cover - an order holds every row
            raise AssertionError("an order ran out of rows before its clusters were formed")
        buffers[status, : read.shape[0]] = read
        starts[status], stops[status] = 0, read.shape[0]
        cursors[status] += read.shape[0]


def _file_taken(
    rows: np.ndarray,
    emitted: int,
    k: int,
    buckets: Sequence[Path],
    bucket_rows: int,
    first_rows: np.ndarray,
) -> None:
    """Append ``(row, cluster)`` of the rows taken to the files of their row ranges."""
    if rows.shape[0] == 0:
        return
    clusters = (emitted + np.arange(rows.shape[0], dtype=np.int64)) // k
    np.minimum.at(first_rows, clusters, rows)
    which = rows // bucket_rows
    by_bucket = np.argsort(which, kind="stable")
    pairs = np.column_stack([rows[by_bucket], clusters[by_bucket]])
    edges = np.searchsorted(which[by_bucket], np.arange(len(buckets) + 1))
    for b in np.flatnonzero(edges[1:] > edges[:-1]).tolist():
        with open(buckets[b], "ab") as file:
            append_array(file, pairs[edges[b] : edges[b + 1]])


# -- pass 4: totals --------------------------------------------------------------------


def file_totals(
    clusters: Clusters,
    numeric: Sequence[NumericColumn],
    grids: Sequence[Grid],
    categorical: Sequence[CategoricalColumn],
    tick: Tick,
) -> ClusterTotals:
    """Every cluster's exact integer grid sums and records per leaf, in one pass.

    The numeric columns must be those of the partition, in its order (their values were
    clamped by its first pass, which counted the clamped ones).
    """
    held: Partition = clusters.held
    count, n = clusters.count, held.attributes.n
    sums = [np.zeros(count, dtype=np.int64) for _ in numeric]
    leaves = [len(c.taxonomy.domain) for c in categorical]
    counts = [np.zeros(count * m, dtype=np.int64) for m in leaves]
    attributes = held.attributes
    for first, rows in attributes.chunks():
        labels = held.read(first, rows)
        for j, grid in enumerate(grids):
            values = kernel_floats(read_rows(attributes.values[j], np.float64, first, rows))
            part, _, _ = mdav_kernels.cluster_grid_sums(
                values, labels, count, grid.lower, grid.upper, grid.gamma, grid.d_int, grid.warp
            )
            sums[j] += part
        for j, m in enumerate(leaves):
            codes = read_rows(attributes.codes[j], np.int64, first, rows)
            counts[j] += np.bincount(labels * m + codes, minlength=count * m)
        tick("cluster sums", first + rows, n)
    shaped = [c.reshape(count, m) for c, m in zip(counts, leaves, strict=True)]
    return ClusterTotals(sums, list(held.clamped), shaped)
