"""Counts of a column per public interval: k-PRAM's bins, the DP bounds' edges (docs/engines.md).

Both are one pass that adds each batch's counts (:func:`~dpfast.dataflow.flow.column_total`);
on a table held in memory, one scan of the column's values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dpfast._kernels import mechanisms as mechanism_kernels
from dpfast.dataflow.flow import Dataflow, column_total, numeric_values
from dpfast.dataflow.values import NumericColumn
from dpfast.partitions.candidates import count_between

__all__ = ["bin_counts", "edge_counts"]


def bin_counts(
    flow: Dataflow, column: NumericColumn, lo: float, scale: float, m: int
) -> np.ndarray:
    """Return how many values of a numeric column each of ``m`` equal-width bins holds.

    Value ``v`` is in bin ``min(int((v - lo) * scale), m - 1)``
    (:class:`~dpfast.dataflow.values.Bins`); int64[m].
    """
    return _counted(flow, _BinCounts(column, lo, scale, m), m)


def edge_counts(flow: Dataflow, column: NumericColumn, edges: np.ndarray) -> np.ndarray:
    """Return how many values of a numeric column lie between consecutive public edges.

    ``counts[i]`` holds the values ``v`` with ``edges[i - 1] <= v < edges[i]``
    (:func:`~dpfast.partitions.candidates.count_between`; ``edges`` strictly increasing
    float64); int64[len(edges) + 1]. One pass; every engine gives the same counts.
    """
    return _counted(flow, _EdgeCounts(column, edges), edges.shape[0] + 1)


@dataclass(frozen=True)
class _Counts:
    """A batch of a numeric column counted into ``size`` intervals (:meth:`of` its values)."""

    column: NumericColumn

    def of(self, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        return self.of(numeric_values(array, self.column, first_row))


def _counted(flow: Dataflow, counts: _Counts, size: int) -> np.ndarray:
    """Return ``counts`` of the whole column: one scan of the held values, or one pass."""
    column = counts.column
    if flow.holds:
        return counts.of(column.values)
    start = np.zeros(size, dtype=np.int64)
    total: np.ndarray = column_total(
        flow.source, str(column.name), flow.limits.batch_rows, counts, start
    )
    return total


@dataclass(frozen=True)
class _BinCounts(_Counts):
    """Counts per equal-width bin."""

    lo: float
    scale: float
    m: int

    def of(self, values: np.ndarray) -> np.ndarray:
        return mechanism_kernels.interval_counts(values, self.lo, self.scale, self.m)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _EdgeCounts(_Counts):
    """Counts between public edges."""

    edges: np.ndarray

    def of(self, values: np.ndarray) -> np.ndarray:
        return count_between(values, self.edges)
