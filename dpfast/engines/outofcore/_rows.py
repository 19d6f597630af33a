"""The checking pass over a numeric column: its range and its non-finite values."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dpfast.engines.outofcore._sources import ColumnSource

__all__ = ["ColumnStats", "column_stats"]


@dataclass(frozen=True)
class ColumnStats:
    """What one pass finds in a numeric column: its range and its non-finite values."""

    lo: float
    hi: float
    non_finite: int
    first_bad: int
    first_kind: str


def _float_values(array: pa.Array) -> np.ndarray:
    """One batch of a numeric column as float64 (missing values as NaN)."""
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


def _batch_stats(array: pa.Array, first_row: int) -> ColumnStats:
    values = _float_values(array)
    bad = ~np.isfinite(values)
    count = int(bad.sum())
    if count:
        first = int(np.argmax(bad))
        kind = "NaN or missing" if np.isnan(values[first]) else "infinite"
        return ColumnStats(math.inf, -math.inf, count, first_row + first, kind)
    if not values.shape[0]:
        return ColumnStats(math.inf, -math.inf, 0, -1, "")
    return ColumnStats(float(values.min()), float(values.max()), 0, -1, "")


def column_stats(dataset: ColumnSource, name: str, batch_rows: int) -> ColumnStats:
    """One pass: a numeric column's min and max, and its non-finite values."""
    lo, hi, count, first, kind = math.inf, -math.inf, 0, -1, ""
    for part in dataset.map_column(name, batch_rows, _batch_stats):
        lo, hi, count = min(lo, part.lo), max(hi, part.hi), count + part.non_finite
        if part.non_finite and (first < 0 or part.first_bad < first):
            first, kind = part.first_bad, part.first_kind
    return ColumnStats(lo, hi, count, first, kind)
