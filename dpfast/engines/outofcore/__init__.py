"""The out-of-core engine: a table read in batches, within a memory limit (docs/engines.md).

The input is a Parquet file, a directory of Parquet files, a glob, a
``pyarrow.dataset.Dataset`` of Parquet files, a CSV or TSV file or a glob of them
(converted to Parquet beside the output first: :class:`CsvSource`), or any column source
(:class:`dpfast.engines.source.Source`); the release is written to ``output`` (a
``.parquet`` file, or a directory of ``part-NNNNN.parquet`` files) and published in one
rename. The Spark and Dask engines are this engine over their own sources, with the
passes run by their workers.
"""

from __future__ import annotations

from dpfast.engines.outofcore._cluster_engine import ClusterEngine
from dpfast.engines.outofcore._csv import CsvSource
from dpfast.engines.outofcore._engine import OutOfCoreEngine
from dpfast.engines.outofcore._exchange import ExchangedParts
from dpfast.engines.outofcore._frame_plans import WritePlan, plan_of, remember
from dpfast.engines.outofcore._lazy import (
    GeneratedParts,
    GroupsColumn,
    RowsBatch,
    RowsColumn,
    text_columns,
)
from dpfast.engines.outofcore._memory import SMALLEST_MEMORY_LIMIT, check_memory_limit
from dpfast.engines.outofcore._scratch import (
    process_scratch,
    worker_numba_cache,
)
from dpfast.engines.outofcore._sources import (
    ArrowSource,
    ParquetDataset,
    SchemaCheckedSource,
    batch_fields,
    column_batch,
    column_names,
    source_under,
)

__all__ = [
    "SMALLEST_MEMORY_LIMIT",
    "ArrowSource",
    "ClusterEngine",
    "CsvSource",
    "ExchangedParts",
    "GeneratedParts",
    "GroupsColumn",
    "OutOfCoreEngine",
    "ParquetDataset",
    "RowsBatch",
    "RowsColumn",
    "SchemaCheckedSource",
    "WritePlan",
    "batch_fields",
    "check_memory_limit",
    "column_batch",
    "column_names",
    "plan_of",
    "process_scratch",
    "remember",
    "source_under",
    "text_columns",
    "worker_numba_cache",
]
