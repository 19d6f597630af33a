"""What a column's type says: numeric or not, its values' dtype, the categories it declares.

These steps read the table's types (a held table's own dtypes, a source's Arrow schema),
not its values, except :func:`declared_categories` on a source: an ordered dictionary
column's categories are in every batch, and one pass checks that they agree.
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

    Held: by NumPy dtype; a source: by Arrow schema (integers and floats). No value is read.
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

    Held: the column's own dtype, ``object`` for a pandas categorical (coded by its
    categories, as they are); a source: what its Arrow type converts to. No value is read.
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

    A pandas ordered categorical, a polars ``Enum`` and an ordered Arrow dictionary declare
    them (:meth:`dpfast.io.TableData.declared_categories`), other columns none (``None``). On
    a source, one pass checks that every batch's dictionary is the same
    (:func:`~dpfast.dataflow.flow.declared_dictionary`).
    """
    if flow.table is not None:
        return flow.table.declared_categories(name)
    return declared_dictionary(flow.source, name, flow.limits.batch_rows)
