"""Tables in and out: pandas, Arrow, polars, NumPy; Parquet, CSV and TSV (plain or gzip).

Together with the engines, the only place that imports pyarrow (and polars, lazily: only
when the input is a polars object, so polars stays an optional extra). Release functions
see every input in memory through :class:`TableData` (:mod:`._tables`); files are read
whole and written atomically (:mod:`._files`), or read batch by batch with the types a
whole read gives them (:mod:`._csv`).
"""

from __future__ import annotations

from dpfast.io._categories import (
    arrow_labels,
    check_declared,
    is_declared_dictionary,
    released_categories,
    same_dictionaries,
)
from dpfast.io._csv import KINDS, CsvFiles, LooserType, is_text_path, text_files
from dpfast.io._files import (
    WRITE_ROWS,
    column_kinds,
    output_format,
    parquet_shape,
    read_table,
    write_json_atomic,
    write_table_atomic,
    write_text_atomic,
)
from dpfast.io._tables import Kind, TableData, as_table_data, build_table, repeat_rows

__all__ = [
    "KINDS",
    "WRITE_ROWS",
    "CsvFiles",
    "Kind",
    "LooserType",
    "TableData",
    "arrow_labels",
    "as_table_data",
    "build_table",
    "check_declared",
    "column_kinds",
    "is_declared_dictionary",
    "is_text_path",
    "output_format",
    "parquet_shape",
    "read_table",
    "released_categories",
    "repeat_rows",
    "same_dictionaries",
    "text_files",
    "write_json_atomic",
    "write_table_atomic",
    "write_text_atomic",
]
