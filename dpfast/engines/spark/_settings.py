"""The Spark engine's settings, and a release file read back as a Spark DataFrame.

A release the executors cannot compute from small state is one Parquet file that the driver writes
from their passes, published by rename and read back by Spark in row order (:func:`read_in_order`):
the in-memory release, rows in the same order. Its scratch directory (:func:`scratch_directory`), a
``dpfast-*`` directory per process in ``spark.dpfast.scratchDir`` or else the driver's temporary
directory, is removed at exit: write a release frame elsewhere to keep it. On a cluster, set
``spark.dpfast.scratchDir`` to a shared file system that the driver and every executor see at the
same path. ``spark.dpfast.memoryLimit`` (default ``1GiB``) is the driver's working memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dpfast.engines.scratch_dirs import process_scratch
from dpfast.engines.spark._rows import ROW_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MEMORY_KEY", "SCRATCH_KEY", "memory_limit", "read_in_order", "scratch_directory"]

#: The Spark setting naming the directory of release files (shared with the executors).
SCRATCH_KEY = "spark.dpfast.scratchDir"
#: The Spark setting of the driver's working memory for the passes (e.g. ``2GiB``).
MEMORY_KEY = "spark.dpfast.memoryLimit"
_DEFAULT_MEMORY = "1GiB"
#: The column of a release file's path while its rows are put in order.
_FILE_COLUMN = "__dpfast_file"


def scratch_directory(session: SparkSession) -> Path:
    """Return this process's directory of release files, made once and removed at exit."""
    return process_scratch(session.conf.get(SCRATCH_KEY, None) or "", "dpfast-spark-")


def memory_limit(session: SparkSession) -> int:
    """Return the driver's working memory for the passes (``spark.dpfast.memoryLimit``)."""
    from dpfast.engines import parse_memory

    return parse_memory(session.conf.get(MEMORY_KEY, None) or _DEFAULT_MEMORY)


def read_in_order(session: SparkSession, path: str | Path) -> DataFrame:
    """Return a Parquet file read by Spark, its rows in the file's order.

    Spark reads row groups in an order of its own (largest splits first), so one shuffle
    sorts the rows by file (a directory's ``part-NNNNN.parquet`` in name order), then index.
    """
    from pyspark.sql import functions

    frame = session.read.parquet(str(Path(path).absolute()))
    numbered = frame.select(
        "*",
        functions.col("_metadata.file_path").alias(_FILE_COLUMN),
        functions.col("_metadata.row_index").alias(ROW_COLUMN),
    )
    return numbered.orderBy(_FILE_COLUMN, ROW_COLUMN).drop(_FILE_COLUMN, ROW_COLUMN)
