"""Row numbers of a Spark frame's batches: in the frame's own order, or from Parquet files.

Executors number the rows they read so that a batch's ``first_row`` is its row number in
the whole table (docs/engines.md, "Spark").
"""

from __future__ import annotations

import builtins
import itertools
import os
import re
import threading
import urllib.parse
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dpfast.exceptions import DPFastValueError, interrupt_in

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dpfast.engines.outofcore import ParquetDataset

__all__ = [
    "CHANGED",
    "ROW_COLUMN",
    "FileRows",
    "FileTasks",
    "Numbering",
    "PartitionRows",
    "TaskRows",
    "collected",
    "count_partitions",
    "file_key",
    "job_errors",
    "partition_index",
    "piece_rows",
    "quietly",
    "regroup",
]

#: pyspark warns of pandas >= 3 whenever ``mapInArrow`` is planned; the Arrow path does
#: not use pandas.
_PANDAS_WARNING = "PySpark does not yet fully support pandas"
#: Held while a filter for it is in place: ``warnings.catch_warnings`` swaps process-wide
#: state, so two threads inside it at once could drop each other's filter.
_PLANNING = threading.RLock()  # reentrant: a plan may be made of plans


@contextmanager
def quietly() -> Iterator[None]:
    """Plan Spark work without pyspark's pandas warning, one thread at a time."""
    with _PLANNING, warnings.catch_warnings():
        warnings.filterwarnings("ignore", _PANDAS_WARNING, FutureWarning)
        yield


@dataclass(frozen=True)
class PartitionRows:
    """Rows numbered by partition, then position: each partition's row count."""

    counts: tuple[int, ...]
    columns: tuple[str, ...] = ()

    def pieces(
        self, batches: Iterable[pa.RecordBatch], partition: int
    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Yield the batches with their first rows, checking the count (0 if not counted)."""
        first = sum(self.counts[:partition])
        end = first + (self.counts[partition] if partition < len(self.counts) else 0)
        for batch in batches:
            if first + batch.num_rows > end:
                raise DPFastValueError(CHANGED)
            yield batch, first
            first += batch.num_rows
        if first != end:
            raise DPFastValueError(CHANGED)


@dataclass(frozen=True)
class FileRows:
    """Rows numbered as :class:`ParquetDataset` does: each file's first row number."""

    offsets: Mapping[str, int]
    columns: tuple[str, ...] = ("_metadata.file_path", "_metadata.row_index")

    def pieces(
        self, batches: Iterable[pa.RecordBatch], partition: int
    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Yield runs of consecutive rows, less the (path, row index) columns, with first rows."""
        for batch in batches:
            if batch.num_rows == 0:
                continue
            paths = batch.column(batch.num_columns - 2).dictionary_encode()
            starts = np.array([self._offset(p) for p in paths.dictionary.to_pylist()])
            index = batch.column(batch.num_columns - 1).to_numpy(zero_copy_only=False)
            rows = starts[paths.indices.to_numpy(zero_copy_only=False)] + index
            cuts = [0, *(np.flatnonzero(np.diff(rows) != 1) + 1).tolist(), batch.num_rows]
            values = batch.select(range(batch.num_columns - 2))
            for lo, hi in itertools.pairwise(cuts):
                yield values.slice(lo, hi - lo), int(rows[lo])

    def _offset(self, path: str) -> int:
        found = self.offsets.get(file_key(path))
        if found is None:
            raise DPFastValueError(
                f"Spark read rows of {path!r}, which is not one of the source's files; "
                "build the source with SparkSource.from_parquet from the same files"
            )
        return found


@dataclass(frozen=True)
class TaskRows:
    """Rows not numbered: each batch's first row is its position within its task.

    For a sort (its result ignores row numbers) over files read by Spark, where numbering
    reads every row's file path, a string a row: about twice a one-column pass's cost.
    """

    columns: tuple[str, ...] = ()

    def pieces(
        self, batches: Iterable[pa.RecordBatch], partition: int
    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Yield the task's batches with their positions within the task."""
        first = 0
        for batch in batches:
            yield batch, first
            first += batch.num_rows


#: Rows a task of :class:`FileTasks` aims to read per pass (a column of float64: 32 MB).
TASK_ROWS = 1 << 22


@dataclass(frozen=True)
class FileTasks:
    """Parquet files read by the executors themselves, with pyarrow, a row group at a time.

    Spark's reader turns every value into a row before the Arrow path sends it to Python
    (several CPU seconds per 10M values, most of a pass); pyarrow takes a fraction of that.
    Task ``t`` of :meth:`frame` reads ``groups[bounds[t]:bounds[t + 1]]`` (file, row group,
    first row) in row order, so tasks hold consecutive rows and follow each other; rows are
    numbered as :class:`ParquetDataset` does, and values keep the files' Arrow types.
    """

    files: tuple[str, ...]
    groups: tuple[tuple[int, int, int], ...]
    bounds: tuple[int, ...]
    names: tuple[str, ...] = ()
    batch_rows: int = 1 << 16

    @classmethod
    def plan(cls, dataset: ParquetDataset, parallelism: int, tasks: int | None = None) -> FileTasks:
        """Cut the dataset's row groups into tasks of consecutive row groups and similar rows.

        ``tasks`` (at most one per row group) defaults to enough of about :data:`TASK_ROWS`
        rows (by the footers), rounded up to a multiple of ``parallelism`` to fill every slot.
        """
        groups: list[tuple[int, int, int]] = []
        sizes: list[int] = []
        first = 0
        for index, file_groups in enumerate(dataset.groups):
            for group, rows in enumerate(file_groups):
                if rows:
                    groups.append((index, group, first))
                    sizes.append(rows)
                first += rows
        if tasks is None:
            slots = max(1, parallelism)
            needed = max(1, -(-first // TASK_ROWS))
            tasks = slots * -(-needed // slots)
        if tasks < 1:
            raise DPFastValueError(f"tasks must be at least 1, got {tasks}")
        tasks = max(1, min(tasks, len(groups)))
        # cut where the rows read so far pass each task's share, keeping at least one
        # row group per task (files of a few rows would otherwise merge tasks)
        ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
        shares = np.arange(1, tasks, dtype=np.float64) * (first / tasks)
        bounds = [0]
        for i, cut in enumerate(np.searchsorted(ends, shares, side="left") + 1, start=1):
            bounds.append(min(max(int(cut), bounds[-1] + 1), len(groups) - (tasks - i)))
        bounds.append(len(groups))  # (0, 0): one task reading nothing
        return cls(dataset.files, tuple(groups), tuple(bounds))

    @property
    def tasks(self) -> int:
        """The number of tasks of a pass."""
        return len(self.bounds) - 1

    def frame(self, session: SparkSession) -> DataFrame:
        """Return the frame whose task ``t`` (partition ``t``) holds the one row ``t``."""
        return session.range(self.tasks, numPartitions=self.tasks)

    def whole(self) -> FileTasks:
        """Return the plan of one task reading every row group, in row order."""
        return replace(self, bounds=(0, len(self.groups)))

    def reading(self, names: Iterable[str], batch_rows: int) -> FileTasks:
        """Return the plan reading columns ``names`` in batches of at most ``batch_rows`` rows."""
        return replace(self, names=tuple(names), batch_rows=int(batch_rows))

    def pieces(
        self, batches: Iterable[pa.RecordBatch], partition: int
    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Yield the batches of the row groups of the tasks in ``batches``, with first rows."""
        import pyarrow.parquet as pq

        columns = list(self.names)
        for batch in batches:
            for task in batch.column(0).to_pylist():
                run = self.groups[self.bounds[task] : self.bounds[task + 1]]
                for index, in_file in itertools.groupby(run, key=lambda group: group[0]):
                    with pq.ParquetFile(self.files[index]) as file:
                        for _, group, first in in_file:
                            for piece in file.iter_batches(
                                batch_size=self.batch_rows, row_groups=[group], columns=columns
                            ):
                                yield piece.select(columns), first
                                first += piece.num_rows


Numbering = PartitionRows | FileRows | FileTasks
#: Why a partition's rows no longer match their count.
CHANGED = (
    "the Spark frame gave other rows than when its partitions were counted; a release "
    "reads it several times, so make it deterministic: cache it (frame.cache()) and avoid "
    "unseeded sampling"
)
#: The hidden column of row numbers that orders a frame numbered from Parquet files.
ROW_COLUMN = "__dpfast_row"


def file_key(path: str) -> str:
    """Return a path or URI as Spark's ``_metadata.file_path`` and the driver both reduce it."""
    parts = urllib.parse.urlsplit(path)
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # a Windows drive
        local = urllib.parse.unquote(parts.path) if parts.scheme == "file" else path
        return os.path.normpath(os.path.abspath(local))
    return f"{parts.scheme}://{parts.netloc}{os.path.normpath(urllib.parse.unquote(parts.path))}"


def count_partitions(frame: DataFrame) -> PartitionRows:
    """Count the rows of every partition of ``frame`` (one job)."""
    with quietly():
        counted = frame.select(frame.columns[0]).mapInArrow(_count, "partition int, n long")
    try:
        found = {int(partition): int(n) for partition, n in collected(counted)}
    except Exception as exc:  # Ctrl-C, which pyspark turns into the cancelled job's error
        if interrupt_in(exc) is not None:
            raise KeyboardInterrupt from exc
        raise
    last = max(found, default=-1)  # no RDD needed: Spark Connect frames have none
    return PartitionRows(tuple(int(found.get(p, 0)) for p in range(last + 1)))


def _count(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Yield one row: this task's partition and its number of rows."""
    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_arrays(
        [pa.array([partition_index()], pa.int32()), pa.array([rows], pa.int64())],
        names=["partition", "n"],
    )


def collected(results: DataFrame, names: tuple[str, ...] | None = None) -> list[tuple[Any, ...]]:
    """Return a small result frame's rows (``names``' cells, default all) as tuples, in order."""
    table = results.toArrow()
    if names:
        table = table.select(list(names))
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


def partition_index() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def regroup(
    pieces: Iterable[tuple[pa.RecordBatch, int]], rows: int
) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Join ``(batch, first_row)`` pieces into batches of at most ``rows`` consecutive rows."""
    held: list[pa.RecordBatch] = []
    start = count = 0
    for batch, first in pieces:
        if batch.num_rows == 0:
            continue
        if held and first != start + count:  # the rows jump: what is held ends here
            yield _joined(held), start
            held, count = [], 0
        if not held:
            start = first
        held.append(batch)
        count += batch.num_rows
        while count >= rows:
            whole = _joined(held)
            yield whole.slice(0, rows), start
            rest = whole.slice(rows)
            held, count, start = ([rest] if rest.num_rows else []), rest.num_rows, start + rows
    if count:
        yield _joined(held), start


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def piece_rows(sent: list[tuple[int, bytes]]) -> Iterator[pa.RecordBatch]:
    """Yield pieces ``(part, payload)`` as one batch of rows ``(part, payload)``."""
    if sent:
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([part for part, _ in sent], pa.int32()),
                pa.array([payload for _, payload in sent], pa.binary()),
            ],
            names=["part", "payload"],
        )


@contextmanager
def job_errors() -> Iterator[None]:
    """Raise, in place of a failed job's error, Ctrl-C's interrupt, else the task's exception.

    pyspark makes Ctrl-C the cancelled job's error, with the interrupt as its context
    (:func:`dpfast.exceptions.interrupt_in`); the task's own exception is :func:`_unwrapped`.
    """
    try:
        yield
    except Exception as exc:
        error = KeyboardInterrupt() if interrupt_in(exc) is not None else _unwrapped(exc)
        if error is exc:
            raise
        raise error from exc


def _unwrapped(exc: Exception) -> Exception:
    """Return the built-in exception that failed a Python task, else ``exc`` itself.

    Spark wraps it in a ``PythonException`` of the worker's traceback, last line ``Type: message``.
    """
    from pyspark.errors import PythonException

    if not isinstance(exc, PythonException):
        return exc
    for line in reversed(str(exc).splitlines()):
        match = re.fullmatch(r"([A-Za-z_]\w*): (.*)", line.strip())
        kind = getattr(builtins, match.group(1), None) if match else None
        if match and isinstance(kind, type) and issubclass(kind, Exception):
            try:
                return kind(match.group(2))
            except Exception:
                return exc
    return exc
