"""Shared input handling of the metrics: columns, pairing, bounds and aggregation.

A single column (1-D NumPy array, pandas Series, Arrow array or chunked array, list)
is named ``0``; a table (DataFrame, Arrow table, 2-D NumPy array) keeps its column names.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from dpfast._validation import quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.io import as_table_data

Columns = dict[Hashable, np.ndarray]


def columns_of(data: Any) -> tuple[list[Hashable], Columns, bool]:
    """Return ``(names, {name: values}, is_single_column)``."""
    if isinstance(data, np.ndarray) and data.ndim == 1:
        return [0], {0: data}, True
    if hasattr(data, "to_numpy") and getattr(data, "ndim", 2) == 1:  # pandas Series
        return [0], {0: np.asarray(data.to_numpy())}, True
    if type(data).__module__.startswith("pyarrow") and not hasattr(data, "column_names"):
        return [0], {0: np.asarray(data.to_numpy(zero_copy_only=False))}, True
    if isinstance(data, (list, tuple)):
        return [0], {0: np.asarray(data)}, True
    table = as_table_data(data)
    return list(table.names), {n: table.column(n) for n in table.names}, False


def paired(original: Any, released: Any) -> tuple[list[Hashable], Columns, Columns, bool]:
    """Columns of two tables that must have the same names and shapes (and a row or more)."""
    names_o, cols_o, single_o = columns_of(original)
    names_r, cols_r, single_r = columns_of(released)
    if single_o != single_r or names_o != names_r:
        raise DPFastValueError(
            f"original and released must have the same columns, got {names_o} and {names_r}"
        )
    for name in names_o:
        if cols_o[name].shape != cols_r[name].shape:
            raise DPFastValueError(
                f"column {quoted(name)} has {cols_o[name].shape[0]} original and "
                f"{cols_r[name].shape[0]} released rows; pass tables of the same shape"
            )
        if cols_o[name].shape[0] == 0:
            raise DPFastValueError(f"column {quoted(name)} is empty; metrics need at least one row")
    return names_o, cols_o, cols_r, single_o


def bounds_for(bounds: Any, name: Hashable, single: bool) -> tuple[float, float] | None:
    """Return the ``(lower, upper)`` pair of one column, or None without bounds."""
    if bounds is None:
        return None
    if single and not isinstance(bounds, Mapping):
        pair = bounds
    else:
        if name not in bounds:
            raise DPFastValueError(f"no bounds for column {quoted(name)}; add it to bounds")
        pair = bounds[name]
    lower, upper = float(pair[0]), float(pair[1])
    if not lower <= upper:
        raise DPFastValueError(f"bounds for column {quoted(name)} are inverted: ({lower}, {upper})")
    return lower, upper


def aggregate(
    values: dict[Hashable, float], single: bool, per_column: bool
) -> float | dict[Hashable, float]:
    """Return a single column's float, the mapping, or the mean over columns."""
    if single:
        return next(iter(values.values()))
    if per_column:
        return values
    return float(np.mean(list(values.values())))


def column_metric(value: float | dict[Hashable, float]) -> float:
    """Return the float of a single column's metric (narrows the return type).

    The metrics return ``float | dict``; this turns a single column's result into a plain
    ``float`` (for callers and type checkers) and refuses a per-column mapping.

    Parameters
    ----------
    value : float or dict
        What a metric returned: a float for one column (or the mean over columns), a
        ``{column: value}`` mapping with ``per_column=True``.

    Returns
    -------
    float
        ``value`` as a Python float.

    Raises
    ------
    TypeError
        ``value`` is a per-column mapping (``dpfast.exceptions.DPFastTypeError``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpfast import metrics
    >>> metrics.column_metric(metrics.jensen_shannon(np.array([1, 1]), np.array([2, 2])))
    1.0
    >>> metrics.column_metric({"age": 0.5})
    Traceback (most recent call last):
    ...
    dpfast.exceptions.DPFastTypeError: expected a single column's metric, got a per-column mapping
    """
    if isinstance(value, dict):
        raise DPFastTypeError("expected a single column's metric, got a per-column mapping")
    return float(value)


def finite(values: np.ndarray, name: Hashable) -> np.ndarray:
    """Return the column as float64, refusing NaN and infinities with a message naming it."""
    result = as_float(values, name)
    if not np.isfinite(result).all():
        raise DPFastValueError(f"column {quoted(name)} holds NaN or inf; pass finite numbers")
    return result


def as_float(values: np.ndarray, name: Hashable) -> np.ndarray:
    """Return the column as float64, or raise a TypeError naming it."""
    try:
        result = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DPFastTypeError(
            f"column {quoted(name)} is not numeric (dtype {np.asarray(values).dtype}); this metric "
            "needs numbers"
        ) from exc
    return result


def per_column_metric(
    original: Any,
    released: Any,
    per_column: bool,
    metric: Callable[[Hashable, np.ndarray, np.ndarray, bool], float],
) -> float | dict[Hashable, float]:
    """Apply ``metric(name, x, y, single)`` to each pair of columns and aggregate."""
    names, cols_o, cols_r, single = paired(original, released)
    values = {name: metric(name, cols_o[name], cols_r[name], single) for name in names}
    return aggregate(values, single, per_column)


def ratio_or_zero(numerator: float, denominator: float) -> float | None:
    """``numerator / |denominator|``; 0 for 0/0; None (undefined) for x/0 with x != 0."""
    if denominator != 0:
        return numerator / abs(denominator)
    return 0.0 if numerator == 0 else None
