"""The out-of-core engine: a table read in batches, within a memory limit (docs/engines.md).

The input is a Parquet file, a directory of Parquet files, a glob, a
``pyarrow.dataset.Dataset`` of Parquet files, a CSV or TSV file or a glob of them
(converted to Parquet beside the output first: :class:`CsvSource`), or any column source
(:class:`dpfast.dataflow.source.Source`); the release is written to ``output`` (a
``.parquet`` file, or a directory of ``part-NNNNN.parquet`` files) and published in one
rename. The Spark and Dask engines are this engine over their own sources, with the
passes run by their workers.
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
