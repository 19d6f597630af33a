"""A Spark DataFrame as a column source of the out-of-core engine (docs/engines.md).

:class:`SparkSource` runs the engine's one primitive, ``map_column``, on the executors:
``frame.select(name).mapInArrow(...)`` hands each task Arrow record batches of the column
(the Arrow path, never Python rows), which are regrouped into batches of at most
``batch_rows`` rows and given to the engine's function; each result is pickled into one
binary cell, collected and unpickled on the driver. The engine combines the results with
sums, or concatenations that it sorts next, so the release does not depend on how the
frame is partitioned, on the order of its rows, or on the number of executors; a task that
fails and is retried is recomputed from its partition, and only one attempt's results are
collected.

Executors must run the same dpfast (and Python) as the driver, and Numba in the worker
processes needs a writable cache directory, or every worker compiles dpfast's kernels
again. :func:`local_session` sets both for a local session: ``PYSPARK_PYTHON`` (and
``spark.pyspark.python``) to this interpreter, and ``NUMBA_CACHE_DIR`` in the environment
the workers inherit and in ``spark.executorEnv.NUMBA_CACHE_DIR``. On a cluster, set
``spark.executorEnv.NUMBA_CACHE_DIR`` to a writable directory of the executors' hosts.

pyspark is an optional dependency (``pip install dpfast[spark]``), imported only when a
function here needs it.
"""

from __future__ import annotations

import builtins
import functools
import os
import pickle
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from dpfast.accounting import PrivateReport, Report
from dpfast.engines.outofcore import BATCH_ROWS, Progress, ir_dp_dataset

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkSource", "ir_dp_spark", "local_session"]

T = TypeVar("T")

#: Exceptions of the engine's function that are sent back to the driver as they are: the
#: refusals of bad data (a NaN in a protected column, a category outside the taxonomy).
#: They are not worth a retry; other exceptions fail the task, which Spark retries.
_SENT_BACK = (ValueError, TypeError)
#: The schema of ``map_column``'s results: where a batch starts, and its pickled result
#: or exception.
_RESULTS = "partition int, first_row long, failed boolean, payload binary"
#: pyspark warns of pandas >= 3 whenever ``mapInArrow`` is planned; the Arrow path does
#: not use pandas.
_PANDAS_WARNING = "PySpark does not yet fully support pandas"
#: Held while a filter for it is in place: ``warnings.catch_warnings`` swaps process-wide
#: state, so two threads inside it at once could drop each other's filter.
_PLANNING = threading.Lock()

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


class SparkSource:
    """A Spark DataFrame read column by column on the executors, for the out-of-core engine.

    Parameters
    ----------
    frame : pyspark.sql.DataFrame
        The table. It is read once per pass of the engine (several per column), so it
        must give the same rows every time: cache it (``frame.cache()``) when it is costly
        to compute, and avoid unseeded sampling.

    Notes
    -----
    ``n_rows`` is one ``count()``, made once. Results are collected on the driver per
    pass: their size is about the number of batches times the size of one result, so
    keep ``batch_rows`` large on large data.
    """

    def __init__(self, frame: DataFrame) -> None:
        self.frame = frame
        self._n_rows: int | None = None
        self._schema: pa.Schema | None = None

    @property
    def names(self) -> list[str]:
        """The columns' names, in order."""
        return list(self.frame.columns)

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
        """The number of rows (one ``count()`` of the frame, cached)."""
        if self._n_rows is None:
            self._n_rows = int(self.frame.count())
        return self._n_rows

    def map_column(
        self, name: str, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)`` for the batches of column ``name``, in any order.

        ``fn`` runs on the executors, on batches of at most ``batch_rows`` rows of one
        partition. ``first_row`` is the batch's first row **within its partition**, not a
        row number of the frame: a message citing it names a row of some partition.

        Raises
        ------
        ValueError, TypeError
            What ``fn`` raised on an executor, with its type and message (of the first
            failing batch, in partition order).
        Exception
            A built-in exception that failed a task more times than Spark retries it, with
            its type and the last line of its message; any other failure as Spark raised it.
        """
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
        apply = functools.partial(_apply, fn=fn, batch_rows=int(batch_rows))
        # catch_warnings changes process-wide state: the engine's column threads plan
        # their jobs one at a time, so that one thread's exit cannot drop another's filter
        with _PLANNING, warnings.catch_warnings():
            warnings.filterwarnings("ignore", _PANDAS_WARNING, FutureWarning)
            planned = self.frame.select(name).mapInArrow(apply, _RESULTS)
        try:
            rows = _collect(planned)
        except Exception as exc:
            error = _unwrapped(exc)
            if error is exc:
                raise
            raise error from exc
        failed = sorted((p, first, payload) for p, first, bad, payload in rows if bad)
        if failed:
            raise pickle.loads(failed[0][2])
        return (pickle.loads(payload) for _, _, _, payload in rows)


def _collect(results: DataFrame) -> list[tuple[int, int, bool, bytes]]:
    """Collect the results' rows, through Arrow where pyspark can (``toArrow``, 4.0+)."""
    if not hasattr(results, "toArrow"):
        return [tuple(row) for row in results.collect()]
    table = results.toArrow()
    return list(zip(*(table.column(i).to_pylist() for i in range(4)), strict=True))


def _unwrapped(exc: Exception) -> Exception:
    """Return the built-in exception that failed a Python task, else ``exc`` itself.

    Spark raises a task's Python exception as a ``PythonException`` holding the worker's
    traceback, whose last line is ``Type: message``.
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
        raise TypeError(
            f"column {name!r} has Spark type {spark_type.simpleString()}, which has no Arrow "
            "type; select the columns to release (frame.select(...)) before releasing"
        ) from exc


def _apply(
    batches: Iterable[pa.RecordBatch], fn: Callable[[pa.Array, int], Any], batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Run ``fn`` on one partition's batches of a column, on an executor.

    Yields one record batch of :data:`_RESULTS` per batch; the first exception of
    :data:`_SENT_BACK` is yielded as a failed result and ends the partition.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    first = 0
    for array in _regroup(batches, batch_rows):
        try:
            payload, failed = _dumps(fn(array, first)), False
        except _SENT_BACK as exc:
            payload, failed = _dumps_error(exc), True
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([partition], pa.int32()),
                pa.array([first], pa.int64()),
                pa.array([failed], pa.bool_()),
                pa.array([payload], pa.binary()),
            ],
            names=["partition", "first_row", "failed", "payload"],
        )
        if failed:
            return
        first += len(array)


def _regroup(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Array]:
    """Yield the first column of ``batches`` in arrays of ``rows`` rows (the last: fewer)."""
    held: list[pa.Array] = []
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        held.append(batch.column(0))
        count += batch.num_rows
        while count >= rows:
            whole = held[0] if len(held) == 1 else pa.concat_arrays(held)
            yield whole.slice(0, rows)
            rest = whole.slice(rows)
            held, count = ([rest] if len(rest) else []), len(rest)
    if count:
        yield held[0] if len(held) == 1 else pa.concat_arrays(held)


def _dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _dumps_error(exc: BaseException) -> bytes:
    """Pickle an exception, or a RuntimeError with its type and message if it cannot be."""
    try:
        payload = _dumps(exc)
        pickle.loads(payload)
    except Exception:
        payload = _dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
    return payload


def local_session(
    master: str = "local[*]",
    *,
    app_name: str = "dpfast",
    shuffle_partitions: int = 8,
    numba_cache_dir: str | os.PathLike[str] | None = None,
    config: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return a SparkSession configured for dpfast (or the running one, reconfigured).

    Parameters
    ----------
    master : str
        ``"local[*]"`` (all cores), ``"local[N]"``, ``"local[N,F]"`` (``F`` attempts per
        task) or a cluster's URL.
    app_name : str
        The application's name in Spark's UI.
    shuffle_partitions : int
        ``spark.sql.shuffle.partitions``: few, since dpfast's passes shuffle nothing.
    numba_cache_dir : path, optional
        Numba's cache directory for the Python workers; default: ``NUMBA_CACHE_DIR`` if
        set, else ``dpfast-numba`` in the temporary directory.
    config : mapping, optional
        More Spark settings, applied last.

    Returns
    -------
    pyspark.sql.SparkSession

    Notes
    -----
    For a local master, the workers run this Python (``PYSPARK_PYTHON`` is set in this
    process's environment, if unset, and ``spark.pyspark.python``), so they import the
    same dpfast. ``NUMBA_CACHE_DIR`` is set in this process's environment if unset (local
    workers inherit it) and in ``spark.executorEnv.NUMBA_CACHE_DIR``.
    """
    from pyspark.sql import SparkSession

    cache = os.fspath(
        numba_cache_dir
        or os.environ.get("NUMBA_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "dpfast-numba")
    )
    os.makedirs(cache, exist_ok=True)
    os.environ.setdefault("NUMBA_CACHE_DIR", cache)
    settings = {
        "spark.app.name": app_name,
        "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.NUMBA_CACHE_DIR": cache,
    }
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings["spark.pyspark.python"] = sys.executable
    settings.update(config or {})
    builder = SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _PLANNING, warnings.catch_warnings():
        warnings.filterwarnings("ignore", _PANDAS_WARNING, FutureWarning)
        return builder.getOrCreate()


def ir_dp_spark(
    frame: DataFrame,
    output: str | os.PathLike[str],
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    columns: Sequence[Hashable] | None = None,
    seed: int | None = None,
    memory_limit: int = 2**30,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> tuple[DataFrame, Report, PrivateReport]:
    """Release a Spark DataFrame with ``ir_dp``, out of core, into Parquet at ``output``.

    The passes over the data run on the executors (:class:`SparkSource`); the driver
    combines their results, draws the noise and writes the output within
    ``memory_limit`` bytes (:func:`dpfast.engines.outofcore.ir_dp_dataset`, whose
    parameters these are). A seeded release is the one :func:`dpfast.ir_dp` gives for the
    same table (``linkage="columns"``, unprotected columns dropped), whatever the frame's
    partitioning.

    Parameters
    ----------
    frame : pyspark.sql.DataFrame
        The table to release.
    output : path
        Where the driver writes the release: a ``.parquet`` file, or else a dataset
        directory. Executors read it back, so on a cluster it must be a path they share.
    k, epsilon, bounds, integer, taxonomies, columns, seed
        As for :func:`dpfast.ir_dp`.
    memory_limit : int
        Bytes of working memory of the driver.
    batch_rows : int
        Rows per batch given to an executor's function.
    progress : callable, optional
        ``progress(phase, done, total)``, called as the passes and writing progress.

    Returns
    -------
    data : pyspark.sql.DataFrame
        The release, read from ``output``, in the frame's session.
    report : Report
        The public report.
    private : PrivateReport
        The private report.

    Raises
    ------
    ValueError, TypeError
        As :func:`dpfast.ir_dp` does for the same table, with row numbers within a
        partition.
    """
    report, private = ir_dp_dataset(
        SparkSource(frame),
        output,
        k=k,
        epsilon=epsilon,
        bounds=bounds,
        integer=integer,
        taxonomies=taxonomies,
        columns=columns,
        seed=seed,
        memory_limit=memory_limit,
        batch_rows=batch_rows,
        progress=progress,
    )
    data = frame.sparkSession.read.parquet(os.fspath(output))
    return data, report, private
