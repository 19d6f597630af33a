"""What bounds taken from the data (``bounds="data"``) read: numeric columns and their ranges.

:func:`numeric_names` reads the columns' types only. :func:`value_range` is one pass that
also finds the column's non-finite values, refused with their count and the first one's
row (:func:`~dpfast.engines.dataflow.column_stats`); on a table held in memory, one scan
of the column's values, which the engine checked when it read them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pyarrow as pa

from dpfast._kernels import mechanisms as mechanism_kernels
from dpfast._validation import quoted
from dpfast.engines.dataflow import Dataflow, column_stats
from dpfast.engines.values import NumericColumn
from dpfast.exceptions import DPFastValueError

__all__ = ["numeric_names", "value_range"]


def numeric_names(flow: Dataflow, names: Sequence[Hashable]) -> list[Hashable]:
    """Return the columns among ``names`` whose type holds numbers (not booleans), in order.

    A table held in memory says by its columns' NumPy dtypes; a source by its Arrow schema
    (integers and floats). No value is read.
    """
    if flow.table is not None:
        column = flow.table.column
        return [c for c in names if np.issubdtype(np.asarray(column(c)[:0]).dtype, np.number)]
    schema = flow.source.schema
    return [name for name in names if _holds_numbers(schema.field(str(name)).type)]


def _holds_numbers(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type))


def value_range(flow: Dataflow, column: NumericColumn) -> tuple[float, float]:
    """Return the smallest and the largest value of a protected numeric column.

    Raises
    ------
    DPFastValueError
        A value is NaN, missing or infinite (a pass names the first one's row).
    """
    if flow.holds:
        lo, hi = mechanism_kernels.min_max(column.values)
        return float(lo), float(hi)
    flow.tick(f"checking {column.name}", 0, 1)
    found = column_stats(flow.source, str(column.name), flow.limits.batch_rows)
    if found.non_finite:
        raise DPFastValueError(
            f"column {quoted(column.name)} has {found.non_finite} non-finite value(s) (first "
            f"at row {found.first_bad}: {found.first_kind}); drop or impute them with a "
            "public rule before the release"
        )
    return found.lo, found.hi
