"""A Dask DataFrame as a column source of the out-of-core engine (docs/engines.md, "Dask").

:class:`DaskSource` runs each pass on Dask's workers, one task per partition; the client
combines the results with order-free operations, so a task lost with its worker is
recomputed from its partition by the scheduler and only one attempt's result is kept.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpfast._kernels import ranking
from dpfast.dataflow.flow import FAN
from dpfast.dataflow.sorted_ranges import Ranges, keys_by_range
from dpfast.dataflow.source import Columns, Source, column_batch, column_names, source_under
from dpfast.engines.partial_totals import batch_results, combined, partials_of, totals
from dpfast.exceptions import DPFastValueError

__all__ = ["DaskSource", "Piece"]

T = TypeVar("T")


@dataclass(frozen=True)
class Piece:
    """One row group of one Parquet file: a partition of :meth:`DaskSource.from_parquet`."""

    path: str
    row_group: int
    first_row: int
    rows: int

    def read(self, names: Sequence[str] | None = None) -> pa.Table:
        """Read the row group's columns ``names`` (all when None)."""
        with pq.ParquetFile(self.path) as file:
            table = file.read_row_group(self.row_group, columns=list(names) if names else None)
        return table.replace_schema_metadata(None)

    def pandas(self, names: Sequence[str] | None = None) -> Any:
        """Read the row group as a pandas DataFrame (a partition of the source's frame)."""
        return self.read(names).to_pandas()

    def batches(self, names: Sequence[str], batch_rows: int) -> Iterator[pa.Table]:
        """Yield the row group's columns ``names``, ``batch_rows`` rows at a time, as read."""
        with pq.ParquetFile(self.path) as file:
            read = file.iter_batches(batch_rows, row_groups=[self.row_group], columns=list(names))
            for batch in read:
                yield pa.Table.from_batches([batch]).replace_schema_metadata(None)


class DaskSource(Source):
    """A Dask DataFrame read column by column on Dask's workers, for the out-of-core engine.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        The table, read once per pass (several per column): it must give the same rows in
        the same partitions every time (persist a costly one; avoid unseeded sampling).

    Notes
    -----
    Rows are numbered by partition, then position in it (the order of ``frame.compute()``),
    from every partition's rows, counted once (a task each) by the first pass; a task whose
    partition then holds another number fails, saying the frame is not deterministic.
    :meth:`from_parquet` numbers rows as :class:`~dpfast.engines.outofcore.ParquetDataset`
    does. Tasks run on the ``distributed.Client`` made current last (or the one given to the
    release functions' callers), else on Dask's local threads.
    """

    def __init__(self, frame: Any, pieces: Sequence[Piece] | None = None) -> None:
        self.frame = frame
        self._pieces = tuple(pieces) if pieces is not None else None
        self._counts: tuple[int, ...] | None = None
        self._schema: pa.Schema | None = None
        self._delayed: tuple[Any, dict[tuple[str, ...], list[Any]]] = (None, {})

    @classmethod
    def from_parquet(cls, path: str | os.PathLike[str]) -> DaskSource:
        """Read a Parquet file, directory or glob as :class:`ParquetDataset` numbers it.

        One partition per row group of the files in sorted path order, first rows from the
        footers (all that is read here); each task reads the columns it needs.
        """
        import dask.dataframe as dd

        from dpfast.engines.outofcore import ParquetDataset

        dataset = ParquetDataset.open(path)
        pieces, first = [], 0
        for name, groups in zip(dataset.files, dataset.groups, strict=True):
            for group, rows in enumerate(groups):
                pieces.append(Piece(name, group, first, rows))
                first += rows
        meta = dataset.schema.empty_table().to_pandas()
        frame = dd.from_map(
            Piece.pandas, pieces, meta=meta, enforce_metadata=False, label="read-parquet-pieces"
        )
        source = cls(frame, pieces)
        source._schema = dataset.schema
        source._counts = tuple(p.rows for p in pieces)
        return source

    @property
    def names(self) -> list[str]:
        """The columns' names, in order."""
        return [str(name) for name in self.frame.columns]

    @property
    def schema(self) -> pa.Schema:
        """The columns' Arrow types, from the frame's metadata."""
        if self._schema is None:
            found = pa.Schema.from_pandas(self.frame._meta, preserve_index=False)
            # pandas' text columns are large strings in Arrow: read them as Parquet's strings
            self._schema = pa.schema(
                [
                    f.with_type(pa.string()) if pa.types.is_large_string(f.type) else f
                    for f in found.remove_metadata()
                ]
            )
        return self._schema

    @property
    def n_rows(self) -> int:
        """The number of rows (counted once, per partition)."""
        return int(sum(self.counts()))

    def counts(self) -> tuple[int, ...]:
        """Return the rows of every partition (counted on the workers once, then kept)."""
        if self._counts is None:
            lengths = self.frame.map_partitions(len, meta=(None, "int64")).compute()
            self._counts = tuple(int(n) for n in lengths)
        return self._counts

    def parts(self, names: Sequence[str], pieces: bool = False) -> list[tuple[Any, int, int]]:
        """Return ``(delayed partition, first row, rows)`` of columns ``names`` per partition.

        For the releases' lazy frames; a partition is pandas or Arrow, or with ``pieces`` a
        :class:`Piece` itself where the source has them. Built once per columns
        (``to_delayed`` optimises the whole graph, longer the more partitions) and kept: a
        Dask frame is immutable, so they are the same tasks every time.
        """
        from dask.delayed import delayed

        counts = self.counts()
        if self._pieces is not None:
            read = delayed(Piece.read, pure=True)  # Arrow as stored: no pandas round trip
            return [
                (p if pieces else read(p, list(names)), p.first_row, p.rows) for p in self._pieces
            ]
        frame, built = self._delayed
        if frame is not self.frame:  # a frame set since: its own partitions
            built = {}
            self._delayed = (self.frame, built)
        key = tuple(names)
        if key not in built:
            built[key] = self.frame[list(names)].to_delayed()
        partitions = built[key]
        if len(partitions) != len(counts):
            raise DPFastValueError(CHANGED)
        firsts = itertools.accumulate(counts[:-1], initial=0)
        return list(zip(partitions, firsts, counts, strict=True))

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)`` for the batches of column ``name``, in any order.

        Raises
        ------
        ValueError, TypeError
            What ``fn`` raised on a worker (of the first failing batch, in row order).
        """
        from dask.base import compute

        results = compute(*self._batch_tasks(name, batch_rows, fn, _results))
        failed = sorted((r[0], r[2]) for part in results for r in part if r[1])
        if failed:
            raise failed[0][1]
        return (r[2] for part in results for r in part)

    def add_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T], most: int = FAN
    ) -> list[tuple[T, int]]:
        """Return ``fn``'s results over the batches of column ``name``, added on the workers.

        One graph: a task per partition adds its batches' results, then tasks add
        :data:`~dpfast.engines.partial_totals.FAN` partials at a time until at most ``most``
        remain, which alone come back (:func:`dpfast.engines.partial_totals.totals`).
        """
        from dask.base import compute
        from dask.delayed import delayed

        partials = self._batch_tasks(name, batch_rows, fn, partials_of)
        add = delayed(combined, pure=False)
        while len(partials) > max(1, most):
            partials = [add(partials[i : i + FAN]) for i in range(0, len(partials), FAN)]
        return totals(compute(*partials))

    def _batch_tasks(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], Any], task: Any
    ) -> list[Any]:
        """Return a delayed ``task(batches, fn)`` per partition, of its batches of ``name``."""
        from dask.delayed import delayed

        batch_rows = _checked(batch_rows)
        names = column_names(name)
        kinds = tuple(self.schema.field(c).type for c in names)
        apply = delayed(_on_batches, pure=False)
        return [  # a Piece's task reads its row group batch by batch
            apply(part, first, rows, name, kinds, batch_rows, task, fn)
            for part, first, rows in self.parts(names, pieces=True)
        ]

    @property
    def sorts_in_place(self) -> bool:
        """True: :meth:`sort_ranges` sorts each range in a task of Dask's workers."""
        return True

    @property
    def sort_tasks(self) -> int:
        """How many tasks run at once: the current client's worker threads (else 1)."""
        try:
            from distributed import get_client

            threads = get_client().nthreads()
        except (ImportError, ValueError):
            return 1
        return max(1, int(sum(threads.values())))

    def sort_ranges(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Ranges,
        key_bits: int,
        reduce: Callable[[int, np.ndarray], T],
    ) -> list[T]:
        """Sort the keys of column ``name`` by range on the workers; return the reductions.

        One graph: a task per partition splits its batches' keys (as :meth:`map_column`) by range;
        a task per range sorts its pieces and returns ``reduce(i, sorted keys)``, which alone
        comes back. Not Dask's own sort: :mod:`dpfast.dataflow.sorted_ranges`.
        """
        from dask.base import compute
        from dask.delayed import delayed

        batch_rows = _checked(batch_rows)
        count = len(ranges)
        if count == 0:
            return []
        kind = self.schema.field(name).type
        split = delayed(split_by_range, pure=False, nout=count)
        pieces = [
            split(part, first, rows, name, kind, keys, ranges, batch_rows)
            for part, first, rows in self.parts([name])
        ]
        sort = delayed(sort_range, pure=False)
        tasks = [
            sort([piece[i] for piece in pieces], i, int(key_bits), reduce) for i in range(count)
        ]
        return list(compute(*tasks))


#: Why a partition's rows no longer match their count.
CHANGED = (
    "the Dask frame gave other rows than when its partitions were counted; a release reads "
    "it several times, so make it deterministic: persist it (frame.persist()) and avoid "
    "unseeded sampling"
)


def _checked(batch_rows: int) -> int:
    """Return ``batch_rows`` as an int, refused below 1."""
    if batch_rows < 1:
        raise DPFastValueError(f"batch_rows must be at least 1, got {batch_rows}")
    return int(batch_rows)


def arrow_column(part: Any, name: str, kind: pa.DataType, rows: int) -> pa.Array:
    """Return column ``name`` of a partition (pandas or Arrow) as an array of type ``kind``."""
    if len(part) != rows:
        raise DPFastValueError(CHANGED)
    if isinstance(part, pa.Table):
        array = part.column(name)
    else:
        array = pa.Array.from_pandas(part[name])
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array if array.type == kind or kind == pa.null() else array.cast(kind)


def _on_batches(
    part: Any,
    first: int,
    rows: int,
    name: Columns,
    kinds: tuple[pa.DataType, ...],
    batch_rows: int,
    task: Callable[[Iterator[tuple[pa.Array, int]], Callable[[pa.Array, int], Any]], T],
    fn: Callable[[pa.Array, int], Any],
) -> T:
    """Return ``task(batches, fn)`` over a partition's ``(array, first_row)`` batches of ``name``.

    On a worker. A :class:`Piece` (:meth:`DaskSource.from_parquet`) is read batch by batch:
    the task holds one batch of the columns, not the row group.
    """
    if isinstance(part, Piece):
        return task(_piece_batches(part, first, rows, name, kinds, batch_rows), fn)
    arrays = [
        arrow_column(part, c, kind, rows) for c, kind in zip(column_names(name), kinds, strict=True)
    ]
    array = column_batch(name, arrays)
    batches = ((array.slice(lo, batch_rows), first + lo) for lo in range(0, rows, batch_rows))
    return task(batches, fn)


def _piece_batches(
    piece: Piece,
    first: int,
    rows: int,
    name: Columns,
    kinds: tuple[pa.DataType, ...],
    batch_rows: int,
) -> Iterator[tuple[pa.Array, int]]:
    """Yield a row group's batches of ``name`` and their first rows, read as they are needed."""
    names = column_names(name)
    done = 0
    for table in piece.batches(names, batch_rows):
        count = table.num_rows
        arrays = [arrow_column(table, c, kind, count) for c, kind in zip(names, kinds, strict=True)]
        yield column_batch(name, arrays), first + done
        done += count
    if done != rows:
        raise DPFastValueError(CHANGED)


def _results(
    batches: Iterator[tuple[pa.Array, int]], fn: Callable[[pa.Array, int], Any]
) -> list[tuple[int, bool, Any]]:
    """Return ``(first_row, failed, result)`` per batch of a partition: ``map_column``'s task.

    The first exception of :data:`~dpfast.dataflow.flow.SENT_BACK` is returned as a
    failed result and ends the partition (:func:`~dpfast.engines.partial_totals.batch_results`).
    """
    return list(batch_results(batches, fn))


def split_by_range(
    part: Any,
    first: int,
    rows: int,
    name: str,
    kind: pa.DataType,
    keys: Callable[[pa.Array, int], np.ndarray],
    ranges: Ranges,
    batch_rows: int,
) -> tuple[np.ndarray, ...]:
    """Return one partition's keys inside each range (a sorted task's piece per range)."""
    array = arrow_column(part, name, kind, rows)
    found = [
        keys_by_range(keys(array.slice(lo, batch_rows), first + lo), ranges)
        for lo in range(0, len(array), batch_rows)
    ]
    if not found:
        return tuple(np.empty(0, dtype=np.uint64) for _ in range(len(ranges)))
    if len(found) == 1 and len(ranges) > 1:
        # the pieces are slices of one array: copied, each is freed when its sort has it
        return tuple(piece.copy() for piece in found[0])
    return tuple(np.concatenate(pieces) for pieces in zip(*found, strict=True))


def sort_range(
    pieces: Sequence[np.ndarray], index: int, key_bits: int, reduce: Callable[[int, np.ndarray], T]
) -> T:
    """Sort range ``index``'s keys from every partition; return ``reduce`` of them."""
    keys = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint64)
    ordered = ranking.radix_sort_packed(keys, 0, max(1, key_bits))
    return reduce(index, ordered)


def dask_of(source: Any) -> DaskSource:
    """Return the :class:`DaskSource` under ``source`` (itself, or a checked wrapper's)."""
    return source_under(source, DaskSource, "a Dask release reads a Dask DataFrame or a DaskSource")
