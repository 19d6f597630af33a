"""A Spark DataFrame as a column source of the out-of-core engine (docs/engines.md, "Spark").

Passes run on the executors (``mapInArrow``: Arrow batches, never Python rows), results pickled
back to the driver, where the engine combines them with sums or concatenations it then sorts:
the release depends neither on the frame's partitions nor on the number of executors. A failed
task is recomputed from its partition; only one attempt's results are collected.
"""

from __future__ import annotations

import functools
import os
import pickle
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import pyarrow as pa

from dpfast._validation import quoted
from dpfast.dataflow.flow import FAN, dumps_error
from dpfast.dataflow.sorted_ranges import Ranges
from dpfast.dataflow.source import (
    CastColumns,
    Columns,
    Source,
    column_batch,
    column_names,
    source_under,
)
from dpfast.engines.frames import ExchangedParts
from dpfast.engines.partial_totals import Partial, batch_results, combined, partials_of, totals
from dpfast.engines.spark._exchange import assembled, exchange_pieces
from dpfast.engines.spark._rows import (
    ROW_COLUMN,
    FileRows,
    FileTasks,
    Numbering,
    PartitionRows,
    TaskRows,
    collected,
    count_partitions,
    file_key,
    job_errors,
    partition_index,
    quietly,
    regroup,
)
from dpfast.engines.spark._sort import (
    SORTED_SCHEMA,
    SPLIT_SCHEMA,
    dumped_result,
    dumps,
    read_sorted,
    sort_range,
    split_by_range,
)
from dpfast.exceptions import DPFastImportError, DPFastTypeError, DPFastValueError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkSource"]

T = TypeVar("T")

#: The schema of ``map_column``'s results: where a batch starts, and its pickled result
#: or exception.
_RESULTS = "partition int, first_row long, failed boolean, payload binary"
_ARROW_TYPES: dict[str, pa.DataType] = {
    "ByteType": pa.int8(),
    "ShortType": pa.int16(),
    "IntegerType": pa.int32(),
    "LongType": pa.int64(),
    "FloatType": pa.float32(),
    "DoubleType": pa.float64(),
    "BooleanType": pa.bool_(),
    "StringType": pa.string(),
    "CharType": pa.string(),
    "VarcharType": pa.string(),
    "BinaryType": pa.binary(),
    "DateType": pa.date32(),
    "TimestampType": pa.timestamp("us", tz="UTC"),
    "TimestampNTZType": pa.timestamp("us"),
    "NullType": pa.null(),
}


class SparkSource(Source):
    """A Spark DataFrame read column by column on the executors, for the out-of-core engine.

    Parameters
    ----------
    frame : pyspark.sql.DataFrame
        The table, read once per pass (several per column), so it must give the same rows
        in the same partitions and order every time: cache it (``frame.cache()``) when it
        is costly to compute, and avoid unseeded sampling.

    Notes
    -----
    Rows are numbered across the table, so that messages and noise keyed by row are the
    whole table's: by partition, then position (the order of ``frame.toPandas()``), from
    every partition's row count (one job, kept); a task whose partition then holds another
    number fails rather than number rows twice. :meth:`from_parquet` numbers rows as
    :class:`~dpfast.engines.outofcore._sources.ParquetDataset` does (files in sorted path
    order, then row within the file). Results are collected on the driver per pass, about
    the number of batches times one result: keep ``batch_rows`` large on large data.
    """

    def __init__(self, frame: DataFrame) -> None:
        self._setup(frame, None)

    def _setup(self, frame: DataFrame | None, session: SparkSession | None) -> None:
        check_pyspark()
        self._frame = frame
        self._session = session
        self._n_rows: int | None = None
        self._schema: pa.Schema | None = None
        self._numbering: Numbering | None = None
        self._file_types: dict[str, pa.DataType] = {}

    @property
    def frame(self) -> DataFrame:
        """The table as a Spark DataFrame (for files read by pyarrow, made when first used)."""
        if self._frame is None:
            assert isinstance(self._numbering, FileTasks)
            self._frame = self.session.read.parquet(*self._numbering.files)
        return self._frame

    @frame.setter
    def frame(self, frame: DataFrame) -> None:
        self._frame = frame

    @property
    def session(self) -> SparkSession:
        """The Spark session that runs the passes."""
        if self._session is None:
            self._session = self.frame.sparkSession
        return self._session

    @classmethod
    def from_parquet(
        cls,
        session: SparkSession,
        path: str | os.PathLike[str],
        reader: Literal["pyarrow", "spark"] = "pyarrow",
        tasks: int | None = None,
    ) -> SparkSource:
        """Read Parquet files on the executors, numbering rows as :class:`ParquetDataset` does.

        ``path`` is as for :meth:`ParquetDataset.open` (a ``.parquet`` file, a directory or a
        glob; its footers give the row counts), so row-keyed methods (``laplace_dp``) give the
        in-memory release of the files, with their own Arrow types. The executors need the files
        at the driver's paths. ``reader="pyarrow"`` (the default): each task of a pass reads
        consecutive row groups with pyarrow, far faster than Spark's reader
        (:class:`~dpfast.engines.spark._rows.FileTasks`); ``tasks`` sets how many a pass has (at
        most one per row group; by default about 4M rows each, a multiple of the task slots).
        ``reader="spark"`` reads through ``session.read.parquet``, rows numbered from
        ``_metadata.row_index``, split by ``spark.sql.files.maxPartitionBytes``, not ``tasks``.
        """
        from dpfast.engines.outofcore import ParquetDataset

        if reader not in ("pyarrow", "spark"):
            raise DPFastValueError(f"reader must be 'pyarrow' or 'spark', got {quoted(reader)}")
        if reader == "spark" and tasks is not None:
            raise DPFastValueError("tasks applies to reader='pyarrow' only; Spark splits the files")
        dataset = ParquetDataset.open(path)
        if reader == "pyarrow":  # Spark reads no file: no frame until one is asked for
            source = cls.__new__(cls)
            source._setup(None, session)
            parallelism = int(session.sparkContext.defaultParallelism)
            source._numbering = FileTasks.plan(dataset, parallelism, tasks)
        else:
            source = cls(session.read.parquet(*dataset.files))
            starts = np.cumsum([0, *dataset.rows[:-1]]).tolist()
            source._numbering = FileRows(
                {file_key(name): int(s) for name, s in zip(dataset.files, starts, strict=True)}
            )
            # batches read by Spark are cast back to the files' own Arrow types (large
            # strings, dictionaries), so that a release copies columns as it would read them
            source._file_types = {f.name: f.type for f in dataset.schema}
        source._n_rows = dataset.n_rows
        source._schema = dataset.schema
        return source

    @property
    def names(self) -> list[str]:
        """The columns' names, in order."""
        return list(self._schema.names) if self._schema is not None else list(self.frame.columns)

    @property
    def schema(self) -> pa.Schema:
        """The columns' Arrow types, converted from the frame's Spark types."""
        if self._schema is None:
            fields = self.frame.schema.fields
            self._schema = pa.schema(
                [pa.field(f.name, _arrow_type(f.name, f.dataType), f.nullable) for f in fields]
            )
        return self._schema

    @property
    def n_rows(self) -> int:
        """The number of rows (counted once, per partition; from the footers for Parquet)."""
        if self._n_rows is None:
            counted = self.numbering()
            assert isinstance(counted, PartitionRows), "a Parquet source knows its row count"
            self._n_rows = int(sum(counted.counts))
        return self._n_rows

    def numbering(self) -> Numbering:
        """Return how rows are numbered: the partitions' first rows, or the files' ones."""
        if self._numbering is None:
            self._numbering = count_partitions(self.frame)
        return self._numbering

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)``, on the executors, for ``name``'s batches in any order.

        Raises
        ------
        ValueError, TypeError
            What ``fn`` raised on an executor (of the first failing batch, in row order).
        Exception
            A built-in exception that failed a task more times than Spark retries it, with
            its type and the last line of its message; any other failure as Spark raised it.
        """
        frame, apply = self._batch_task(name, batch_rows, fn, _results)
        with quietly():
            planned = frame.mapInArrow(apply, _RESULTS)
        with job_errors():
            rows = collected(planned)
        failed = sorted((first, payload) for _, first, bad, payload in rows if bad)
        if failed:
            raise pickle.loads(failed[0][1])
        return (pickle.loads(payload) for _, _, _, payload in rows)

    def map_batches(
        self,
        names: Sequence[str],
        batch_rows: int,
        fn: Callable[[pa.RecordBatch, int], pa.RecordBatch],
        schema: str,
    ) -> DataFrame:
        """Return the lazy frame of ``fn(batch, first_row)`` over the rows, in row order.

        ``fn`` maps a batch of columns ``names`` (as in :meth:`map_column`) to one of the
        same rows in Spark's DDL ``schema``; the frame is computed, the same, whenever used.
        Files that Spark reads, in an order of its own, are sorted by row number (one shuffle).
        """
        frame, numbering = self.pass_frame(names, batch_rows)
        transform = functools.partial(
            _transform, fn=fn, batch_rows=int(batch_rows), numbering=numbering
        )
        ordered = isinstance(numbering, FileRows)
        out_schema = f"{schema}, {ROW_COLUMN} long" if ordered else schema
        with quietly():
            data = frame.mapInArrow(transform, out_schema)
        return data.orderBy(ROW_COLUMN).drop(ROW_COLUMN) if ordered else data

    def add_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T], most: int = FAN
    ) -> list[tuple[T, int]]:
        """Return ``fn``'s results over column ``name``'s batches, added on the executors.

        One job: each task adds its batches' results into one partial; while more than
        ``most`` remain, a shuffle into ``partials /`` :data:`~dpfast.dataflow.flow.FAN`
        tasks adds them again (:func:`dpfast.engines.partial_totals.totals`).
        """
        frame, apply = self._batch_task(name, batch_rows, fn, _partial)
        with quietly():
            planned = frame.mapInArrow(apply, _PARTIALS)
            partials = frame.rdd.getNumPartitions()
            while partials > max(1, most):
                partials = -(-partials // FAN)
                planned = planned.repartition(partials).mapInArrow(_added, _PARTIALS)
        return totals(pickle.loads(payload) for payload in self._payloads(planned))

    def exchange(self, parts: ExchangedParts, batch_rows: int, schema: str) -> DataFrame:
        """Return the lazy frame of ``parts`` (:mod:`dpfast.engines.spark._exchange`)."""
        assemble = functools.partial(assembled, parts=parts, batch_rows=int(batch_rows))
        with quietly():
            return exchange_pieces(self, parts, batch_rows).mapInArrow(assemble, schema)

    @property
    def sorts_in_place(self) -> bool:
        """True: :meth:`sort_ranges` sorts each range in a task of the executors."""
        return True

    @property
    def sort_tasks(self) -> int:
        """How many tasks run at once (the context's default parallelism)."""
        return int(self.session.sparkContext.defaultParallelism)

    def sort_ranges(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Ranges,
        key_bits: int,
        reduce: Callable[[int, np.ndarray], T],
    ) -> list[T]:
        """Sort the keys of column ``name`` by range on the executors; return the reductions.

        One shuffle (:mod:`dpfast.engines.spark._sort`), except for one range over files the
        executors read (:class:`FileTasks`): one task reads and sorts the column, sparing a
        shuffle whose JVM copies cost several times the sort (docs/engines.md, "Ranks on a
        cluster"). Over files read by Spark, ``first_row`` is the batch's position within its
        task (:class:`~dpfast.engines.spark._rows.TaskRows`): a caller citing a row in an
        error re-runs a numbered pass (:meth:`map_column`).
        """
        _check_batch_rows(batch_rows)
        if len(ranges) == 0:
            return []
        files = self.numbering()
        if isinstance(files, FileTasks) and len(ranges) == 1:
            # one range: its one task reads the column itself, no shuffle (docs/engines.md)
            whole = files.whole().reading([name], batch_rows)
            read = functools.partial(
                read_sorted, keys=keys, ranges=ranges, key_bits=int(key_bits),
                reduce=reduce, batch_rows=int(batch_rows), numbering=whole,
            )  # fmt: skip
            with quietly():
                planned = whole.frame(self.session).mapInArrow(read, SORTED_SCHEMA)
            return self._reductions(planned)
        sort = functools.partial(sort_range, ranges=ranges, key_bits=int(key_bits), reduce=reduce)
        with quietly():
            shuffled = self.range_split(name, batch_rows, keys, ranges)
            planned = shuffled.mapInArrow(sort, SORTED_SCHEMA)
        return self._reductions(planned)

    def range_split(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Ranges,
    ) -> DataFrame:
        """Return column ``name``'s keys split by range, range ``i``'s in partition ``i``."""
        frame, numbered = self.pass_frame([name], batch_rows)
        numbering: Numbering | TaskRows = numbered
        if isinstance(numbered, FileRows):
            numbering = TaskRows()
            frame = self.frame.select(name)
        keys = CastColumns(name, self._file_types, keys) if self._file_types else keys
        split = functools.partial(
            split_by_range, keys=keys, ranges=ranges, batch_rows=int(batch_rows),
            numbering=numbering,
        )  # fmt: skip
        with quietly():
            return frame.mapInArrow(split, SPLIT_SCHEMA).repartitionById(len(ranges), "range")

    @classmethod
    def _reductions(cls, planned: DataFrame) -> list[Any]:
        """Collect a sort job's pickled reductions, in range order, unwrapping errors."""
        return [pickle.loads(payload) for payload in cls._payloads(planned)]

    @staticmethod
    def _payloads(planned: DataFrame) -> list[bytes]:
        """Collect a job's column ``payload``, in order, unwrapping errors."""
        with job_errors():
            return [payload for (payload,) in collected(planned, ("payload",))]

    def _batch_task(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], Any], task: Any
    ) -> tuple[DataFrame, Any]:
        """Return the frame of ``name``'s pass, and ``task`` of ``fn`` given the files' types."""
        _check_batch_rows(batch_rows)
        frame, numbering = self.pass_frame(column_names(name), batch_rows)
        fn = CastColumns(name, self._file_types, fn) if self._file_types else fn
        return frame, functools.partial(
            _on_batches,
            task=task,
            fn=fn,
            name=name,
            batch_rows=int(batch_rows),
            numbering=numbering,
        )

    def pass_frame(self, names: Sequence[str], batch_rows: int) -> tuple[DataFrame, Numbering]:
        """Return the frame a pass over columns ``names`` maps, and how it numbers rows."""
        numbering = self.numbering()
        if isinstance(numbering, FileTasks):
            return numbering.frame(self.session), numbering.reading(names, batch_rows)
        return self.frame.select(*names, *numbering.columns), numbering


def _check_batch_rows(batch_rows: int) -> None:
    """Refuse batches of fewer than one row."""
    if batch_rows < 1:
        raise DPFastValueError(f"batch_rows must be at least 1, got {batch_rows}")


def _arrow_type(name: str, spark_type: Any) -> pa.DataType:
    """Return the Arrow type of a Spark type: atomic types here, nested ones by pyspark."""
    kind = type(spark_type).__name__
    if kind in _ARROW_TYPES:
        return _ARROW_TYPES[kind]
    if kind == "DecimalType":
        return pa.decimal128(spark_type.precision, spark_type.scale)
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(spark_type)
    except Exception as exc:
        raise DPFastTypeError(
            f"column {quoted(name)} has Spark type {spark_type.simpleString()}, which has no Arrow "
            "type; select the columns to release (frame.select(...)) before releasing"
        ) from exc


def _on_batches(
    batches: Iterable[pa.RecordBatch],
    task: Callable[[Iterator[tuple[pa.Array, int]], Callable[[pa.Array, int], Any]], Any],
    fn: Callable[[pa.Array, int], Any],
    name: Columns,
    batch_rows: int,
    numbering: Numbering,
) -> Iterator[pa.RecordBatch]:
    """Yield ``task(batches, fn)`` over one partition's ``(batch of name, first_row)`` pairs."""
    pieces = regroup(numbering.pieces(batches, partition_index()), batch_rows)
    yield from task(((column_batch(name, batch.columns), first) for batch, first in pieces), fn)


def _results(
    batches: Iterator[tuple[pa.Array, int]], fn: Callable[[pa.Array, int], Any]
) -> Iterator[pa.RecordBatch]:
    """Yield one record batch of :data:`_RESULTS` per batch: ``map_column``'s task.

    A :data:`~dpfast.dataflow.flow.SENT_BACK` exception (bad data: no retry) is a failed result
    ending the partition (:func:`~dpfast.engines.partial_totals.batch_results`); others fail
    the task, which Spark retries.
    """
    partition = partition_index()
    dumped = functools.partial(dumped_result, fn=fn)
    for first, failed, payload in batch_results(batches, dumped):
        yield _result(partition, first, failed, dumps_error(payload) if failed else payload)


#: The schema of ``add_column``'s partial totals.
_PARTIALS = "payload binary"


def _partial(
    batches: Iterator[tuple[pa.Array, int]], fn: Callable[[pa.Array, int], Any]
) -> Iterator[pa.RecordBatch]:
    """Yield one partition's batches' results of ``fn``, added up (on an executor)."""
    yield _payload(partials_of(batches, fn))


def _added(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Yield the partials this task received, added up (on an executor)."""
    partials: list[Partial] = [
        pickle.loads(payload) for batch in batches for payload in batch.column(0).to_pylist()
    ]
    yield _payload(combined(partials))


def _payload(partial: Partial) -> pa.RecordBatch:
    """Return a partial total as the one row of :data:`_PARTIALS`."""
    return pa.RecordBatch.from_arrays([pa.array([dumps(partial)], pa.binary())], ["payload"])


def _result(partition: int, first: int, failed: bool, payload: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([partition], pa.int32()),
            pa.array([first], pa.int64()),
            pa.array([failed], pa.bool_()),
            pa.array([payload], pa.binary()),
        ],
        names=["partition", "first_row", "failed", "payload"],
    )


def _transform(
    batches: Iterable[pa.RecordBatch],
    fn: Callable[[pa.RecordBatch, int], pa.RecordBatch],
    batch_rows: int,
    numbering: Numbering,
) -> Iterator[pa.RecordBatch]:
    """Yield ``fn(batch, first_row)`` for one partition's rows (and their numbers if files)."""
    ordered = isinstance(numbering, FileRows)
    for batch, first in regroup(numbering.pieces(batches, partition_index()), batch_rows):
        out = fn(batch, first)
        if ordered:
            rows = pa.array(np.arange(first, first + out.num_rows, dtype=np.int64))
            out = pa.RecordBatch.from_arrays([*out.columns, rows], [*out.schema.names, ROW_COLUMN])
        yield out


#: The oldest pyspark with ``DataFrame.repartitionById``, which places the sort's ranges and
#: an exchange's parts.
OLDEST_PYSPARK = (4, 1)


def check_pyspark(version: str | None = None) -> None:
    """Refuse a pyspark older than :data:`OLDEST_PYSPARK`, saying how to upgrade.

    >>> check_pyspark("4.1.0"), check_pyspark("4.3.0.dev1")
    (None, None)
    >>> check_pyspark("3.5.4")
    Traceback (most recent call last):
    ...
    dpfast.exceptions.DPFastImportError: the Spark engine needs pyspark 4.1 or later ...
    """
    if version is None:
        import pyspark

        version = pyspark.__version__
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < OLDEST_PYSPARK:
        raise DPFastImportError(
            f"the Spark engine needs pyspark 4.1 or later (DataFrame.repartitionById), and "
            f"this is pyspark {version}: pip install 'dpfast[spark]' upgrades it"
        )


def spark_of(source: Any) -> SparkSource:
    """Return the :class:`SparkSource` under ``source`` (itself, or a checked wrapper's)."""
    reads = "a Spark release reads a pyspark DataFrame or a SparkSource"
    return source_under(source, SparkSource, reads)
