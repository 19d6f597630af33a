"""The out-of-core engine: a table read in batches, within a memory limit (docs/engines.md).

The input is a Parquet file, a directory of Parquet files, a glob, a
``pyarrow.dataset.Dataset`` of Parquet files, a CSV or TSV file or a glob of them
(converted to Parquet beside the output first: :class:`CsvSource`), or any column source
(:class:`ColumnSource`); the release is written to ``output`` (a ``.parquet`` file, or a
directory of ``part-NNNNN.parquet`` files) and published in one rename. The Spark and Dask
engines are this engine over their own sources, with the passes run by their workers.
"""

from __future__ import annotations

from dpfast.engines.outofcore._cluster_engine import ClusterEngine
from dpfast.engines.outofcore._csv import CsvSource
from dpfast.engines.outofcore._engine import DEFAULT_MEMORY, OutOfCoreEngine, source_of
from dpfast.engines.outofcore._exchange import ExchangedParts
from dpfast.engines.outofcore._frame_plans import WritePlan, plan_of, remember
from dpfast.engines.outofcore._lazy import (
    PART_BYTES,
    PART_ROWS,
    GeneratedParts,
    GroupsColumn,
    RowsBatch,
    RowsColumn,
    output_part_rows,
    text_columns,
)
from dpfast.engines.outofcore._memory import SMALLEST_MEMORY_LIMIT, check_memory_limit
from dpfast.engines.outofcore._output import FILE_ROWS, Output, ScratchColumn
from dpfast.engines.outofcore._passes import (
    BATCH_ROWS,
    Limits,
    NonFiniteValue,
    category_ranks,
    numeric_values,
)
from dpfast.engines.outofcore._scratch import (
    make_scratch,
    process_scratch,
    publish_at,
    scratch_beside,
    worker_numba_cache,
)
from dpfast.engines.outofcore._sorted import (
    WORKER_BUFFERS,
    GroupSums,
    KeyBuffers,
    Ranges,
    add_parts,
    keys_by_range,
    sorted_runs,
)
from dpfast.engines.outofcore._sources import (
    ArrowSource,
    ColumnSource,
    ParquetDataset,
    SchemaCheckedSource,
    batch_fields,
    column_batch,
    column_names,
    source_under,
)
from dpfast.engines.outofcore._totals import (
    FAN,
    Partial,
    batch_results,
    column_total,
    combined,
    dumps_error,
    partials_of,
    totals,
)
from dpfast.engines.source import Columns

__all__ = [
    "BATCH_ROWS",
    "DEFAULT_MEMORY",
    "FAN",
    "FILE_ROWS",
    "PART_BYTES",
    "PART_ROWS",
    "SMALLEST_MEMORY_LIMIT",
    "WORKER_BUFFERS",
    "ArrowSource",
    "ClusterEngine",
    "ColumnSource",
    "Columns",
    "CsvSource",
    "ExchangedParts",
    "GeneratedParts",
    "GroupSums",
    "GroupsColumn",
    "KeyBuffers",
    "Limits",
    "NonFiniteValue",
    "OutOfCoreEngine",
    "Output",
    "ParquetDataset",
    "Partial",
    "Ranges",
    "RowsBatch",
    "RowsColumn",
    "SchemaCheckedSource",
    "ScratchColumn",
    "WritePlan",
    "add_parts",
    "batch_fields",
    "batch_results",
    "category_ranks",
    "check_memory_limit",
    "column_batch",
    "column_names",
    "column_total",
    "combined",
    "dumps_error",
    "keys_by_range",
    "make_scratch",
    "numeric_values",
    "output_part_rows",
    "partials_of",
    "plan_of",
    "process_scratch",
    "publish_at",
    "remember",
    "scratch_beside",
    "sorted_runs",
    "source_of",
    "source_under",
    "text_columns",
    "totals",
    "worker_numba_cache",
]
