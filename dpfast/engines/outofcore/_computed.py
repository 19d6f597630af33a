"""A table a method computed in memory, as scratch columns: whole, or rows repeated by counts.

Such a table holds a row per cell, not per record, so it fits in memory; its expansion
into records (each row repeated its count's times) may not, so it is read row range by
row range (:class:`~._output.Output` stitches both into Parquet).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dpfast.engines.outofcore._output import ScratchColumn
from dpfast.io import as_table_data, build_table

__all__ = ["repeated_columns", "table_columns"]


def table_columns(table: pa.Table) -> tuple[list[ScratchColumn], int]:
    """Return the table's columns, read by row range, and its row count."""

    def column(name: str) -> ScratchColumn:
        data = table.column(name)

        def read(first: int, count: int) -> pa.Array:
            return data.slice(first, count).combine_chunks()

        dictionary = pa.types.is_dictionary(data.type)
        return ScratchColumn(name, data.type, read, dictionary)

    return [column(str(name)) for name in table.column_names], int(table.num_rows)


def repeated_columns(table: pa.Table, repeat: str) -> tuple[list[ScratchColumn], int]:
    """Return every row repeated ``repeat``'s times (without it), read by row range.

    The other columns come back as dictionary columns (:func:`dpfast.io.repeat_rows`
    gives the same table whole). Returns the columns and the records' count.
    """
    data = as_table_data(table)
    ends = np.cumsum(np.asarray(data.column(repeat), dtype=np.int64))
    n_out = int(ends[-1]) if ends.size else 0

    def column(name: str) -> ScratchColumn:
        codes, labels = data.category_codes(name)
        ordered = data.declared_categories(name) is not None

        def build(rows: np.ndarray) -> pa.Array:
            built = build_table("arrow", {name: (codes[rows], labels, ordered)})
            return built.column(0).combine_chunks()

        def read(first: int, count: int) -> pa.Array:
            wanted = np.arange(first, first + count, dtype=np.int64)
            return build(np.searchsorted(ends, wanted, side="right"))

        return ScratchColumn(name, build(np.empty(0, dtype=np.int64)).type, read, True)

    names = [str(n) for n in table.column_names if n != repeat]
    return [column(name) for name in names], n_out
