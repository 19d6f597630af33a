"""The Spark engine: the out-of-core engine over a Spark DataFrame, its passes on the executors.

The driver runs the passes through :class:`SparkSource`, keeps the small global state (the
ledger, a column's group values and keys) and builds the reports; the release is a lazy
frame the executors compute from that state where every column allows it, else a file the
driver wrote (:class:`~dpfast.engines.outofcore.ClusterEngine`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpfast.dataflow.values import column_threads
from dpfast.engines.frames import (
    ExchangedParts,
    GeneratedParts,
    RowsBatch,
    RowsColumn,
    WritePlan,
    remember,
)
from dpfast.engines.outofcore import ClusterEngine
from dpfast.engines.spark._exchange import exchange_pieces
from dpfast.engines.spark._rows import quietly
from dpfast.engines.spark._settings import memory_limit as configured_memory
from dpfast.engines.spark._settings import read_in_order, scratch_directory
from dpfast.engines.spark._source import SparkSource, spark_of
from dpfast.engines.spark._write import write_dataset
from dpfast.exceptions import interrupt_in

__all__ = ["SparkEngine"]


class SparkEngine(ClusterEngine):
    """A Spark DataFrame (or :class:`SparkSource`) released on the executors."""

    name = "spark"

    frame = "a Spark DataFrame"
    frame_module = "pyspark.sql"
    in_memory = "frame.toPandas()"

    source_type = SparkSource
    cluster_of = staticmethod(spark_of)
    ranks_exchanged = True

    @classmethod
    def settings(cls, source: Any) -> tuple[int, Path]:
        """Return ``spark.dpfast.memoryLimit`` and the scratch of the source's session."""
        session = spark_of(source).session
        return configured_memory(session), scratch_directory(session)

    def column_workers(self, n_columns: int, n_threads: int | None, held_bytes: int) -> int:
        """``n_threads``, else one column per task slot plus one, as the memory holds.

        A column that fits a task is one sort task, so only that many columns in flight use
        every slot; the one more keeps a slot busy while the driver adds up a finished one
        (docs/engines.md, "Ranks on a cluster"). The driver holds each one's group values.
        """
        if n_threads is not None:
            return column_threads(n_threads, n_columns or 1)
        held = max(1, self.limits.memory // max(1, held_bytes))
        return max(1, min(n_columns or 1, self.tasks + 1, held))

    def groups_frame(self, parts: GeneratedParts) -> Any:
        session = self.cluster.session
        schema = _spark_schema((c.name, c.arrow_type) for c in parts.columns)
        generate = functools.partial(_generate, parts=parts, batch_rows=self.limits.batch_rows)
        with quietly():
            frame = session.range(parts.count, numPartitions=parts.count).mapInArrow(
                generate, schema
            )
        return remember(frame, WritePlan(generated=parts))

    def exchange_frame(self, parts: ExchangedParts) -> Any:
        schema = _spark_schema(zip(parts.names, parts.types, strict=True))
        frame = self.cluster.exchange(parts, self.limits.batch_rows, schema)
        pieces = functools.partial(exchange_pieces, self.cluster, parts, self.limits.batch_rows)
        return remember(frame, WritePlan(exchanged=parts, tasks=pieces))

    def exchangeable(self, kind: pa.DataType) -> bool:
        """Hold the types of :data:`_SPARK_TYPES` (a Spark frame's released columns)."""
        return kind in _SPARK_TYPES

    def rows_frame(self, columns: Sequence[RowsColumn]) -> Any:
        schema = _spark_schema((c.name, c.arrow_type) for c in columns)
        return self.cluster.map_batches(
            [c.name for c in columns], self.limits.batch_rows, RowsBatch(tuple(columns)), schema
        )

    def file_frame(self, path: Path) -> Any:
        return read_in_order(self.cluster.session, path)

    def table_frame(self, table: pa.Table) -> Any:
        """Return the table as a frame of the session, dictionaries as their values (text)."""
        plain = [
            column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column
            for column in table.columns
        ]
        return self.cluster.session.createDataFrame(
            pa.Table.from_arrays(plain, names=table.column_names)
        )

    @classmethod
    def write_dataset(cls, frame: Any, directory: Path, target: Path, progress: Any) -> Any:
        return write_dataset(frame, directory, target, progress)

    def explain(self, error: Exception) -> BaseException:
        """Give an interrupt that Spark reported as a cancelled job back as the interrupt."""
        interrupt = interrupt_in(error)
        if interrupt is not None:
            return interrupt
        return super().explain(error)


#: The Spark SQL type of each Arrow type a released column of a lazy frame has: a Spark
#: input's numeric types (Spark has no unsigned ones), and text.
_SPARK_TYPES = {
    pa.int8(): "byte",
    pa.int16(): "short",
    pa.int32(): "int",
    pa.int64(): "long",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.string(): "string",
}


def _spark_schema(columns: Iterable[tuple[str, pa.DataType]]) -> str:
    """Return the DDL schema of a lazy frame's released columns, each of its own type."""
    return ", ".join(f"`{name.replace('`', '``')}` {_SPARK_TYPES[kind]}" for name, kind in columns)


def _generate(
    batches: Iterable[pa.RecordBatch], parts: GeneratedParts, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Yield the output rows of this task's parts, in order, a batch at a time."""
    for batch in batches:
        for part in batch.column(0).to_pylist():
            yield from parts.table(part).to_batches(max_chunksize=batch_rows)
