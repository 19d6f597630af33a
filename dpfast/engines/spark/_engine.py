"""The Spark engine: the out-of-core engine over a Spark DataFrame, its passes on the executors.

The driver runs the passes through :class:`SparkSource` (``mapInArrow``: the executors
read the data), keeps the small global state (the ledger, a column's group values and
keys) and builds the reports. The release is a lazy Spark DataFrame computed on the
executors from that state where every column allows it (``session.range(parts)`` with
one output part per task, or the input's batches mapped row by row), else the file the
driver wrote from the passes, read by Spark in row order
(:class:`~dpfast.engines.outofcore.ClusterEngine`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpfast._validation import option
from dpfast.engines.base import Progress, PublishHook, column_threads
from dpfast.engines.outofcore import (
    BATCH_ROWS,
    PARTS_ATTRIBUTE,
    ClusterEngine,
    GeneratedParts,
    RowsBatch,
    RowsColumn,
)
from dpfast.engines.spark._methods import memory_limit as configured_memory
from dpfast.engines.spark._methods import read_in_order, scratch_directory
from dpfast.engines.spark._rows import quietly
from dpfast.engines.spark._source import SparkSource, spark_of
from dpfast.engines.spark._write import write_release
from dpfast.exceptions import DPFastValueError, interrupt_in

__all__ = ["SparkEngine"]


class SparkEngine(ClusterEngine):
    """A Spark DataFrame (or :class:`SparkSource`) released on the executors."""

    name = "spark"

    @classmethod
    def open(
        cls,
        data: Any,
        *,
        method: str,
        output: str | os.PathLike[str] | None = None,
        memory_limit: int | None = None,
        progress: Progress | None = None,
        metrics: bool = False,
        risk: bool = False,
        batch_rows: int = BATCH_ROWS,
        part_rows: int | None = None,
    ) -> SparkEngine:
        """Open a release of a Spark DataFrame; ``memory_limit`` defaults to the session's."""
        if metrics:
            raise DPFastValueError(
                f"{method} on a Spark DataFrame does not support {option('metrics', True)}; "
                "drop it (the Spark engine computes no metrics), or release "
                "frame.toPandas() in memory"
            )
        if risk:
            raise DPFastValueError(
                f"{option('risk', True)} needs the original and the release in memory, and "
                f"{method} on a Spark DataFrame holds them on the cluster; drop it, or release "
                "frame.toPandas() in memory"
            )
        source = data if hasattr(data, "map_column") else SparkSource(data)
        session = spark_of(source).session
        memory = configured_memory(session) if memory_limit is None else memory_limit
        return cls(
            source,
            output,
            scratch_directory(session),
            memory_limit=memory,
            batch_rows=batch_rows,
            part_rows=part_rows,
            progress=progress,
        )

    @property
    def cluster(self) -> SparkSource:
        """The Spark source under this engine's source."""
        return spark_of(self.source)

    @property
    def tasks(self) -> int:
        return self.cluster.sort_tasks

    def column_workers(self, n_columns: int, n_threads: int | None, held_bytes: int) -> int:
        """``n_threads``, else one column per task slot plus one, as the memory holds.

        A column that fits a task is one sort task, so the cluster's slots are used only
        if that many columns are in flight; the one more keeps a slot busy while the
        driver adds up a column that has just finished (docs/engines.md, "Ranks on a
        cluster"). The driver holds each column in flight's group values.
        """
        if n_threads is not None:
            return column_threads(n_threads, n_columns or 1)
        held = max(1, self.limits.memory // max(1, held_bytes))
        return max(1, min(n_columns or 1, self.tasks + 1, held))

    def groups_frame(self, parts: GeneratedParts) -> Any:
        session = self.cluster.session
        schema = ", ".join(f"`{c.name.replace('`', '``')}` {c.spark_type}" for c in parts.columns)
        generate = functools.partial(_generate, parts=parts, batch_rows=self.limits.batch_rows)
        with quietly():
            frame = session.range(parts.count, numPartitions=parts.count).mapInArrow(
                generate, schema
            )
        setattr(frame, PARTS_ATTRIBUTE, parts)  # a transformed frame does not carry it
        return frame

    def rows_frame(self, columns: Sequence[RowsColumn]) -> Any:
        schema = ", ".join(
            f"`{c.name.replace('`', '``')}` {'long' if c.column.integer else 'double'}"
            for c in columns
        )
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

    def write_frame(
        self, frame: Any, output: Path, report: Any, before: PublishHook | None
    ) -> None:
        write_release(frame, output, report, progress=self.progress, before_publish=before)

    def explain(self, error: Exception) -> BaseException:
        """Give an interrupt that Spark reported as a cancelled job back as the interrupt."""
        interrupt = interrupt_in(error)
        if interrupt is not None:
            return interrupt
        return super().explain(error)


def _generate(
    batches: Iterable[pa.RecordBatch], parts: GeneratedParts, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Yield the output rows of this task's parts, in order, a batch at a time."""
    for batch in batches:
        for part in batch.column(0).to_pylist():
            yield from parts.table(part).to_batches(max_chunksize=batch_rows)
