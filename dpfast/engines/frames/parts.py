"""What a cluster's workers need to compute released columns lazily, from small keyed state.

* :class:`GroupsColumn`: a column whose output row ``r`` holds the value of rank
  ``order[r]``'s group (``order`` a keyed bucketed permutation, docs/engines.md#permutations;
  the groups the method's :class:`~dpfast.partitions.ranking.RankGroups`), which any task
  computes from the column's key, bucket starts and group values alone
  (:func:`dpfast.noise.permutation_part_groups`), part by part (:class:`GeneratedParts`);
* :class:`RowsColumn`: a column released row by row from its input values and keyed draws
  (:class:`~dpfast.engines.base.Cells`), a batch at a time (:class:`RowsBatch`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import outofcore as outofcore_kernels
from dpfast.dataflow.row_outputs import released_batch
from dpfast.dataflow.sorted_ranges import WORKER_BUFFERS
from dpfast.dataflow.values import Cells, NumericColumn, ProtectedColumn
from dpfast.io import arrow_labels
from dpfast.partitions.ranking import RankGroups

__all__ = [
    "PART_BYTES",
    "PART_ROWS",
    "GeneratedParts",
    "GroupsColumn",
    "RowsBatch",
    "RowsColumn",
    "RowsCounts",
    "bucket_pieces",
    "bucket_span",
    "bucket_starts",
    "output_part_rows",
    "text_columns",
]

#: The fewest output rows per task of an ``ir_dp`` release frame.
PART_ROWS = 1 << 20


#: The most bytes of released values (8 per cell) one task of the frame computes, unless
#: a quarter of the memory limit is more (:func:`output_part_rows`).
PART_BYTES = 1 << 29


def output_part_rows(n: int, columns: int, tasks: int, memory_limit: int = 0) -> int:
    """Return the output rows per task of an ``ir_dp`` release frame of ``n`` rows.

    Each task reads every column's whole bucket stream to find its part's rows
    (:func:`dpfast.noise.permutation_part_groups`, O(n)), so the frame has as few parts as keep
    every task slot busy (four each, so that slots finish together), of at least
    :data:`PART_ROWS` rows and at most ``max(PART_BYTES, memory_limit / 4)`` bytes of released
    values. Where the byte cap decides, parts are rounded up to a multiple of ``tasks``: no
    slot waits alone for the last one.
    """
    tasks = max(1, tasks)
    cap = max(PART_BYTES, int(memory_limit) // 4)
    most = max(PART_ROWS, cap // (8 * max(1, columns)))
    rows = max(PART_ROWS, min(most, -(-n // (4 * tasks))))
    parts = -(-n // rows)
    if parts > tasks and parts % tasks:
        rows = max(PART_ROWS, -(-n // (parts + tasks - parts % tasks)))
    return rows


def text_columns(schema: pa.Schema) -> list[str]:
    """Return the columns of a release part that Parquet writes with a dictionary.

    Its text (labels, copied strings): released numbers are near-random, so a
    dictionary costs time and saves nothing.
    """
    return [
        f.name for f in schema if not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    ]


def bucket_starts(key: np.ndarray, n: int) -> np.ndarray:
    """Return the first output row of every bucket of ``permutation(key, n)``, and ``n``."""
    sizes = noise.permutation_bucket_sizes(key, n)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def bucket_order(buckets: np.ndarray, n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Return a stable order of items by bucket, and where each bucket starts in it.

    One counting sort (:func:`dpfast._kernels.outofcore.order_by_bucket`): ``order``
    lists the items' places by bucket, places increasing within one; bucket ``b``'s items
    are ``order[at[b] : at[b + 1]]`` (``at``: ``n_buckets + 1`` offsets).
    """
    order, counts = outofcore_kernels.order_by_bucket(buckets, int(n_buckets))
    return order, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def bucket_run(at: np.ndarray, first: int, last: int, kind: Any) -> np.ndarray:
    """Return the buckets of the items of buckets ``[first, last)`` in :func:`bucket_order`."""
    sizes = np.diff(at[first : last + 1])
    return np.repeat(np.arange(first, last, dtype=kind), sizes)


def bucket_span(starts: np.ndarray, lo: Any, hi: Any) -> tuple[Any, Any]:
    """Return the buckets ``[first, last)`` of a permutation covering output rows ``[lo, hi)``.

    ``starts``: the buckets' first output rows, and ``n``; ``lo`` and ``hi`` may be arrays.
    """
    first = np.searchsorted(starts, lo, side="right") - 1
    last = np.searchsorted(starts, hi, side="left")
    return first, last


def bucket_pieces(
    key: np.ndarray,
    n: int,
    starts: np.ndarray,
    bounds: np.ndarray,
    first: int,
    count: int,
    also: Sequence[int] = (),
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield what items ``first ..`` (``count``) of ``permutation(key, n)``'s stream send by part.

    For each output part (rows ``bounds[p] ..``) holding some of them, or listed in ``also``:
    ``(part, places, buckets)``, the places of its items by bucket and their buckets.
    """
    order, at = bucket_order(noise.permutation_buckets(key, n, first, count), starts.shape[0] - 1)
    firsts, lasts = bucket_span(starts, bounds[:-1], bounds[1:])
    kind = np.int32 if starts.shape[0] <= 2**31 else np.int64
    held = (at[lasts] > at[firsts]) | np.isin(np.arange(len(firsts)), also)
    for part in np.flatnonzero(held).tolist():
        a, b = int(firsts[part]), int(lasts[part])
        yield part, order[at[a] : at[b]], bucket_run(at, a, b, kind)


@dataclass(frozen=True)
class GroupsColumn:
    """What a task needs to compute rows of one released ``ir_dp`` column."""

    name: str
    key: np.ndarray
    starts: np.ndarray  # the permutation's bucket starts, and n
    values: np.ndarray  # every rank group's value (float64) or code (int64)
    kind: str  # "float", "int" or "labels"
    labels: tuple[str, ...] = ()
    numeric: NumericColumn | None = None  # a numeric column's, for its output type
    # a categorical column's input type if a dictionary, and the categories it declares
    dictionary: pa.DataType | None = None
    declared: tuple[str, ...] | None = None

    @classmethod
    def of(
        cls,
        key: np.ndarray,
        n: int,
        values: np.ndarray,
        column: ProtectedColumn,
        original: pa.DataType,
    ) -> GroupsColumn:
        """Return the state of ``column`` (input type ``original``) in ``permutation(key, n)``."""
        starts = bucket_starts(key, n)
        name = str(column.name)
        if isinstance(column, NumericColumn):
            kind = "int" if column.integer else "float"
            return cls(name, key, starts, values, kind, numeric=column)
        labels = tuple(str(label) for label in column.taxonomy.domain)
        if not pa.types.is_dictionary(original):
            return cls(name, key, starts, values, "labels", labels)
        return cls(name, key, starts, values, "labels", labels, None, original, column.categories)

    @property
    def arrow_type(self) -> pa.DataType:
        """The released column's Arrow type: the numeric column's own, a dictionary, or text."""
        if self.numeric is not None:
            return pa.from_numpy_dtype(self.numeric.dtype)
        if self.dictionary is not None:
            return self.labels_of(np.empty(0, dtype=np.int64)).type
        return pa.string()

    def labels_of(self, codes: np.ndarray) -> pa.Array:
        """Return a categorical column's codes as its labels (a dictionary, or text)."""
        if self.dictionary is not None:
            return arrow_labels(codes, self.labels, self.dictionary, self.declared)
        return pa.array(self.labels, pa.string()).take(pa.array(codes))

    def buckets(self, lo: int, hi: int) -> tuple[int, int]:
        """Return the permutation buckets ``[first, last)`` covering output rows ``[lo, hi)``."""
        first, last = bucket_span(self.starts, lo, hi)
        return int(first), int(last)

    def bucket_items(self, lo: int, hi: int) -> int:
        """Return how many items the buckets covering output rows ``[lo, hi)`` hold."""
        first, last = self.buckets(lo, hi)
        return int(self.starts[last] - self.starts[first])

    def rows(
        self, layout: RankGroups, lo: int, hi: int, buffer: np.ndarray | None = None
    ) -> pa.Array:
        """Return output rows ``[lo, hi)`` of the column, whose groups are ``layout``'s.

        ``buffer`` (``uint64``, :meth:`bucket_items` words), if given, holds a float
        column's values: the array returned is a view of it.
        """
        first, last = self.buckets(lo, hi)
        sizes = np.diff(self.starts)
        out = None if buffer is None else buffer.view(np.float64)
        part = noise.permutation_part_groups(
            self.key, layout.n, first, last, self.values, layout.k, sizes, out=out, big=layout.big
        )
        out = part[lo - int(self.starts[first]) : hi - int(self.starts[first])]
        return self.array(out)

    def array(self, values: np.ndarray) -> pa.Array:
        """Return released values (float64, or a categorical column's codes) as the output."""
        if self.numeric is None:
            return self.labels_of(np.asarray(values, dtype=np.int64))
        return pa.array(self.numeric.restore_dtype(values))


@dataclass(frozen=True)
class GeneratedParts:
    """A lazy frame of rank groups: what its tasks compute, and a writer can too.

    Part ``p`` holds output rows ``[p * part_rows, (p + 1) * part_rows)`` of every column,
    whose rank groups are ``layout``'s (:meth:`ClusterEngine.groups_frame`). In a frame's
    write plan (:func:`~dpfast.engines.outofcore.plan_of`), :meth:`ClusterEngine.write_release`
    has the workers write each part with pyarrow, not through the cluster's own writer.
    """

    columns: tuple[GroupsColumn, ...]
    n: int
    layout: RankGroups
    part_rows: int

    @property
    def count(self) -> int:
        """The number of parts."""
        return max(1, math.ceil(self.n / self.part_rows))

    def span(self, part: int) -> tuple[int, int]:
        """Return the output rows ``[lo, hi)`` of part ``part``."""
        return part * self.part_rows, min(self.n, (part + 1) * self.part_rows)

    def table(self, part: int, buffer: np.ndarray | None = None) -> pa.Table:
        """Return part ``part`` of every column.

        Without ``buffer``, the worker's kept sort buffers are freed first: the passes are
        over once the output is computed (:class:`~dpfast.dataflow.sorted_ranges.KeyBuffers`).
        With one (``uint64``, at least :meth:`words` ``(part)``), the float columns' values
        are written into it, the table's arrays viewing it: reuse it only after the table.
        """
        lo, hi = self.span(part)
        if buffer is None:
            WORKER_BUFFERS.clear()
        arrays, used = [], 0
        for c in self.columns:
            piece = None
            if buffer is not None and c.kind == "float":
                size = c.bucket_items(lo, hi)
                piece, used = buffer[used : used + size], used + size
            arrays.append(c.rows(self.layout, lo, hi, piece))
        return pa.Table.from_arrays(arrays, names=[c.name for c in self.columns])

    def scanned(self, part: int) -> tuple[int, int]:
        """Return the bucket-stream items part ``part``'s task scans, and the items it writes.

        Each column's :meth:`GroupsColumn.rows` reads its permutation's whole stream (``n``).
        """
        lo, hi = self.span(part)
        return self.n * len(self.columns), (hi - lo) * len(self.columns)

    def words(self, part: int) -> int:
        """Return the ``uint64`` words of a buffer for :meth:`table` ``(part, buffer)``."""
        lo, hi = self.span(part)
        return sum(c.bucket_items(lo, hi) for c in self.columns if c.kind == "float")

    def most_words(self) -> int:
        """Return the most :meth:`words` of any part, so that one buffer serves them all."""
        return max(self.words(part) for part in range(self.count))


@dataclass(frozen=True)
class RowsColumn:
    """A column released row by row: ``cells`` of its checked values, in row order."""

    column: NumericColumn
    cells: Cells

    @property
    def name(self) -> str:
        """The column's name."""
        return str(self.column.name)

    @property
    def arrow_type(self) -> pa.DataType:
        """The released column's Arrow type (the column's own)."""
        return pa.from_numpy_dtype(self.column.dtype)

    def released(self, array: pa.Array, first_row: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the released values of rows ``first_row ...`` and their counts."""
        return released_batch(self.column, self.cells, array, first_row)


@dataclass(frozen=True)
class RowsCounts:
    """A batch's counts only (the private report's): the pass before a lazy frame."""

    rows: RowsColumn

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        """Return the counts of the batch ``array`` starting at ``first_row``."""
        return self.rows.released(array, first_row)[1]


@dataclass(frozen=True)
class RowsBatch:
    """The workers' function of a lazy frame of row-wise columns: a batch, released."""

    columns: tuple[RowsColumn, ...]

    def __call__(self, batch: pa.RecordBatch, first_row: int) -> pa.RecordBatch:
        """Return the released columns of the input ``batch`` starting at ``first_row``."""
        arrays = []
        for i, rows in enumerate(self.columns):
            out, _ = rows.released(batch.column(i), first_row)
            arrays.append(pa.array(rows.column.restore_dtype(out)))
        return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in self.columns])
