"""The insensitive MDAV clusters of rows read in passes, within a memory limit (docs/engines.md).

The partition is the one :func:`~dpfast.partitions.insensitive_mdav.insensitive_labels`
gives in memory, for reference sequences of at most
:data:`~dpfast.partitions.insensitive_mdav.FAST_PATH_MAX_POINTS` distinct points (the
fast path's: one sorted order of the rows per point). The passes:

1. **Values.** Each protected column is read batch by batch, checked, clamped to its
   public bounds (numeric) or encoded as taxonomy codes (categorical), and written at
   its rows' places in a scratch file.
2. **Orders.** Every row's distance key to each point, then each point's order of all
   rows, sorted range by range (:mod:`._point_orders`).
3. **Merge.** The orders are read back in buffers; each cluster takes the first ``k``
   rows of its point's order not yet taken (a bitset of ``n`` bits), as the in-memory
   fast path does. The rows taken go, with their cluster, to files by row range, which
   then give every row's cluster in row order. Clusters are numbered by first
   appearance, as in memory, when they are read.
4. **Totals.** Exact integer sums (numeric) and records per leaf (categorical) of every
   cluster, in one pass over the scratch files (:func:`cluster_totals`).
5. **Output.** The rows' permutation, part by part, gives each output row's cluster;
   the released columns are written in output order (:func:`write_clustered`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._kernels import mdav_stream
from dpfast._validation import kernel_floats, option
from dpfast.engines.dataflow import cut_ranges, numeric_values, taxonomy_codes
from dpfast.engines.outofcore._files import append_array, write_at
from dpfast.engines.outofcore._point_orders import Attributes, chunks, distance_orders, read_rows
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.outofcore._work import Work
from dpfast.engines.values import CategoricalColumn, Clusters, ClusterTotals, NumericColumn
from dpfast.exceptions import DPFastValueError
from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import FAST_PATH_MAX_POINTS, ReferenceGeometry

__all__ = ["ClusterLimits", "Partition", "cluster_totals", "partition", "write_clustered"]

Tick = Callable[[str, int, int], None]

#: Bytes of working memory per collected row of a sorted range, beside 16 per attribute
#: (the key, the row, the sort's scratch and the values that break ties).
_BYTES_PER_SORTED_ROW = 64
#: Bytes per row of a part of the output order (the rows, their sort, their clusters).
_BYTES_PER_ORDERED_ROW = 40
#: Rows of a sequential pass over the scratch files, at most.
_CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class ClusterLimits:
    """How the memory limit is cut: working memory beside the per-cluster arrays."""

    work: int
    batch_rows: int
    attributes: int
    merge_rows: int

    @property
    def sorted_rows(self) -> int:
        return max(1024, self.work // (_BYTES_PER_SORTED_ROW + 16 * self.attributes))

    @property
    def ordered_rows(self) -> int:
        return max(1024, self.work // _BYTES_PER_ORDERED_ROW)

    @property
    def chunk_rows(self) -> int:
        return max(1024, min(_CHUNK_ROWS, self.work // (8 * (self.attributes + 4))))

    @property
    def bucket_rows(self) -> int:
        """Rows of a row range of the merge's output (its pairs and its labels)."""
        return max(1024, self.work // 32)


def cluster_limits(
    n: int,
    k: int,
    attributes: int,
    leaves: int,
    geometry: ReferenceGeometry,
    memory: int,
    batch_rows: int,
) -> ClusterLimits:
    """Cut the memory limit, refusing a sequence or clusters that cannot fit in it.

    ``leaves`` counts the categorical columns' leaves, added up. Refuses more than
    :data:`FAST_PATH_MAX_POINTS` distinct points, and per-cluster arrays (``n // k``
    clusters) with a bitset of the rows that take more than half of ``memory``.
    """
    n_points = geometry.points.shape[0]
    if n_points > FAST_PATH_MAX_POINTS:
        raise DPFastValueError(
            f"this reference sequence has {n_points} distinct points; out of core, the "
            f"clusters take at most {FAST_PATH_MAX_POINTS} (one sorted order of the rows per "
            "point): use reference 'corners' (or 'cycling' with at most 6 protected "
            f"columns), or release in memory without {option('memory_limit')}"
        )
    used = np.unique(geometry.sequence).shape[0]
    n_clusters = n // k
    merge_rows = max(1024, min(_CHUNK_ROWS, memory // (64 * (used + 1))))
    fixed = (
        (n + 7) // 8  # the bitset of taken rows
        + n_clusters * 8 * (6 + attributes)  # sequence, first rows, ranks, sums, values
        + n_clusters * 16 * leaves  # categorical counts and qualities
        + (used + 1) * 8 * merge_rows  # the merge's buffers
    )
    if 2 * fixed > memory:
        raise DPFastValueError(
            f"{n:,} rows with k={k} make {n_clusters:,} clusters, whose arrays (and the "
            f"bitset of the rows) need about {fixed:,} bytes, more than half the memory "
            "limit; raise the memory limit or k"
        )
    return ClusterLimits(memory - fixed, batch_rows, attributes, merge_rows)


@dataclass(frozen=True)
class Partition:
    """Every row's cluster in a file in row order, numbered as the merge formed them.

    ``rank[c]`` is the number by first appearance of the cluster formed ``c``-th;
    ``clamped[j]`` counts numeric column ``j``'s values outside its bounds.
    """

    labels: Path
    rank: np.ndarray
    attributes: Attributes
    limits: ClusterLimits
    clamped: tuple[int, ...]

    def read(self, first: int, count: int) -> np.ndarray:
        """Return the clusters (by first appearance) of rows ``[first, first + count)``."""
        return self.rank[read_rows(self.labels, np.int64, first, count)]  # type: ignore[no-any-return]

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """Return the clusters of ``rows`` (distinct, any order), read chunk by chunk."""
        by_row = np.argsort(rows)
        ordered = rows[by_row]
        out = np.empty(rows.shape[0], dtype=np.int64)
        for first, count in self.attributes.chunks():
            a, b = np.searchsorted(ordered, [first, first + count])
            if a < b:
                out[by_row[a:b]] = self.read(first, count)[ordered[a:b] - first]
        return out


def partition(
    source: ColumnSource,
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
    """A batch of a numeric column clamped to its bounds, with its first row.

    Also counts the values outside the bounds.
    """

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
    source: ColumnSource,
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
    source: ColumnSource,
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
    """Form the clusters; write each row's cluster (in formation order) to ``labels_path``.

    Returns the first row of every cluster, in formation order.
    """
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


def cluster_totals(
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


# -- pass 5: output order --------------------------------------------------------------


def write_clustered(
    clusters: Clusters,
    paths: Sequence[Path],
    values: Sequence[np.ndarray],
    key: np.ndarray | None,
    tick: Tick,
    work: Work,
) -> None:
    """Write each column's cluster values in output order: row ``r`` of input row ``order[r]``.

    ``paths[j]`` receives ``values[j]`` of every output row's cluster (8-byte values);
    ``work`` counts the passes over the permutation's bucket stream.
    """
    held: Partition = clusters.held
    n, limits = held.attributes.n, held.limits
    files = [open(path, "wb") for path in paths]
    try:
        done = 0
        for labels in _output_labels(held, key, n, limits, work):
            for file, cluster_values in zip(files, values, strict=True):
                append_array(file, cluster_values[labels])
            done += labels.shape[0]
            tick("output order", done, n)
    finally:
        for file in files:
            file.close()


def _output_labels(
    held: Partition, key: np.ndarray | None, n: int, limits: ClusterLimits, work: Work
) -> Iterator[np.ndarray]:
    """Yield the clusters of the output rows, part by part of the permutation (or in order)."""
    if key is None:
        for first, count in chunks(n, limits.ordered_rows):
            yield held.read(first, count)
        return
    sizes = noise.permutation_bucket_sizes(key, n)
    whole = held.read(0, n) if n * 8 <= limits.work // 4 else None
    parts: list[tuple[int, int]] = []  # runs of buckets of at most ordered_rows rows
    cut_ranges(sizes, 0, sizes.shape[0], 0, 0, limits.ordered_rows, _Parts(parts))
    for lo, hi in parts:
        rows = noise.permutation_part(key, n, lo, hi, sizes)
        work.output_pass(n, rows.shape[0])
        yield whole[rows] if whole is not None else held.gather(rows)


@dataclass(frozen=True)
class _Parts:
    """Collect the ``(lo, hi)`` of each run of buckets :func:`cut_ranges` gives."""

    parts: list[tuple[int, int]]

    def __call__(self, lo: int, hi: int, first_rank: int, count: int) -> None:
        self.parts.append((lo, hi))
