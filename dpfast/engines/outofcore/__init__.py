"""The out-of-core engine: a table read in batches, within a memory limit (docs/engines.md).

The input is Parquet (a file, a directory, a glob or a ``pyarrow.dataset.Dataset``), CSV or
TSV (a file or a glob, converted to Parquet beside the output first: :class:`CsvSource`) or
any column source (:class:`dpfast.dataflow.source.Source`). The release is written to
``output``, a ``.parquet`` file or a directory of ``part-NNNNN.parquet`` files. The Spark and
Dask engines are this engine over their own sources (:class:`ClusterEngine`).
"""

from __future__ import annotations

from dpfast.engines.outofcore._cluster_engine import ClusterEngine
from dpfast.engines.outofcore._csv import CsvSource
from dpfast.engines.outofcore._engine import OutOfCoreEngine
from dpfast.engines.outofcore._memory import SMALLEST_MEMORY_LIMIT, check_memory_limit
from dpfast.engines.outofcore._sources import (
    ArrowSource,
    ParquetDataset,
    SchemaCheckedSource,
)

__all__ = [
    "SMALLEST_MEMORY_LIMIT",
    "ArrowSource",
    "ClusterEngine",
    "CsvSource",
    "OutOfCoreEngine",
    "ParquetDataset",
    "SchemaCheckedSource",
    "check_memory_limit",
]
