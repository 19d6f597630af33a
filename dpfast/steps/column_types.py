"""What a column's type says: numeric or not, its values' dtype, the categories it declares.

These steps read the table's types, not its values: a table held in memory says by its
columns' own types (NumPy dtypes, a pandas categorical's dtype), a source by its Arrow
schema. The one exception is :func:`declared_categories` on a source: the categories of
an ordered dictionary column are in every batch, and one pass checks that they agree.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpfast.dataflow.flow import Dataflow, declared_dictionary

__all__ = ["declared_categories", "numeric_names", "value_dtype"]


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


def value_dtype(flow: Dataflow, name: Hashable) -> np.dtype[Any]:
    """Return the NumPy dtype of column ``name``'s values, as a release would read them.

    Held: the column's own dtype, and ``object`` for a pandas categorical (coded by its
    categories, as they are). A source: the dtype its Arrow type converts to. No value
    is read.
    """
    table = flow.table
    if table is not None:
        if table.kind == "pandas" and isinstance(table.source[name].dtype, pd.CategoricalDtype):
            return np.dtype(object)
        dtype: np.dtype[Any] = table.column(name).dtype
        return dtype
    arrow_type = flow.source.schema.field(str(name)).type
    converted: np.dtype[Any] = pa.array([], arrow_type).to_numpy(zero_copy_only=False).dtype
    return converted


def declared_categories(flow: Dataflow, name: Hashable) -> tuple[str, ...] | None:
    """Return the categories column ``name``'s type declares, in their order, if it does.

    A pandas ordered categorical, a polars ``Enum`` and an Arrow dictionary marked ordered
    declare them (:meth:`dpfast.io.TableData.declared_categories`); other columns declare
    none (``None``). On a source, one pass reads every batch's dictionary, which must be
    the same (:func:`~dpfast.dataflow.flow.declared_dictionary`).
    """
    if flow.table is not None:
        return flow.table.declared_categories(name)
    return declared_dictionary(flow.source, name, flow.limits.batch_rows)
