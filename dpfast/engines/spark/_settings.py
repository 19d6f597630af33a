"""The Spark engine's settings, and a release file read back as a Spark DataFrame.

A release the executors cannot compute from small state is written by the driver, from
passes run on the executors, as one Parquet file into the Spark scratch directory
(:func:`scratch_directory`), published there by rename; its data is that file read by
Spark, in the file's row order (:func:`read_in_order`), so it is the in-memory release,
rows in the same order.

The scratch directory is ``spark.dpfast.scratchDir`` of the session's configuration (a
``dpfast-*`` directory is made in it per process), or a new directory of the driver's
temporary directory; either is removed when the interpreter exits, so a release frame is
readable until then (write it elsewhere to keep it). The driver writes it and the
executors read it: on a cluster, set ``spark.dpfast.scratchDir`` to a directory that the
driver and every executor see at the same path (a shared file system), or the frame
cannot be read. ``spark.dpfast.memoryLimit`` (default ``1GiB``) is the driver's working
memory for the passes.
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

    Spark reads a file's row groups in an order of its own (largest splits first), so the
    rows are sorted by their index in the file (one shuffle); a directory's files (a
    release written as ``part-NNNNN.parquet`` files) in name order.
    """
    from pyspark.sql import functions

    frame = session.read.parquet(str(Path(path).absolute()))
    numbered = frame.select(
        "*",
        functions.col("_metadata.file_path").alias(_FILE_COLUMN),
        functions.col("_metadata.row_index").alias(ROW_COLUMN),
    )
    return numbered.orderBy(_FILE_COLUMN, ROW_COLUMN).drop(_FILE_COLUMN, ROW_COLUMN)
