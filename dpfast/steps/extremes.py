"""What bounds taken from the data (``bounds="data"``) read: a numeric column's range.

:func:`value_range` is one pass that also refuses the column's non-finite values with their
count and the first one's row (:func:`~dpfast.dataflow.flow.column_stats`); held, one scan
of the values, which the engine checked when it read them.
"""

from __future__ import annotations

from dpfast._kernels import mechanisms as mechanism_kernels
from dpfast._validation import quoted
from dpfast.dataflow.flow import Dataflow, column_stats
from dpfast.dataflow.values import NumericColumn
from dpfast.exceptions import DPFastValueError

__all__ = ["value_range"]


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
