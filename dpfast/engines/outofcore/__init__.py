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
from dpfast.engines.outofcore._output import Output
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
from dpfast.engines.outofcore._totals import (
    Partial,
    batch_results,
    combined,
    partials_of,
    totals,
)
from dpfast.engines.sorted_ranges import (
    WORKER_BUFFERS,
    Ranges,
    keys_by_range,
    sorted_runs,
)
from dpfast.engines.source import Columns

__all__ = [
    "PART_BYTES",
    "PART_ROWS",
    "SMALLEST_MEMORY_LIMIT",
    "WORKER_BUFFERS",
    "ArrowSource",
    "ClusterEngine",
    "Columns",
    "CsvSource",
    "ExchangedParts",
    "GeneratedParts",
    "GroupsColumn",
    "OutOfCoreEngine",
    "Output",
    "ParquetDataset",
    "Partial",
    "Ranges",
    "RowsBatch",
    "RowsColumn",
    "SchemaCheckedSource",
    "WritePlan",
    "batch_fields",
    "batch_results",
    "check_memory_limit",
    "column_batch",
    "column_names",
    "combined",
    "keys_by_range",
    "output_part_rows",
    "partials_of",
    "plan_of",
    "process_scratch",
    "remember",
    "sorted_runs",
    "source_under",
    "text_columns",
    "totals",
    "worker_numba_cache",
]
