"""A numeric column's grid values cut into ranges that fit, by histogram passes.

Rank groups need a column's rows in order of their grid values (values clamped to the
public grid's domain and quantised to its steps). A column larger than a sort's memory is
sorted range by range: a histogram pass over the top bits of the grid values
(:func:`histogram`) cuts the grid into ranges that fit
(:func:`~dpfast.dataflow.flow.cut_ranges`), each then collected in one more pass
(:func:`quantised_in`) or, on a cluster, sorted by the workers (:func:`plan_ranks`,
:func:`sorted_on_workers`). The ``group_sums`` step (:mod:`dpfast.steps.ranks`) and the
cluster engine's exchange of ranks are written over these.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa

from dpfast._kernels import outofcore as outofcore_kernels
from dpfast._kernels import ranking
from dpfast.dataflow.flow import (
    HISTOGRAM_BITS,
    Limits,
    column_total,
    cut_ranges,
    numeric_values,
)
from dpfast.dataflow.rank_files import FittedRanges
from dpfast.dataflow.sorted_ranges import GroupSums, Ranges
from dpfast.dataflow.source import Source
from dpfast.dataflow.values import NumericColumn
from dpfast.partitions.grid import Grid

__all__ = [
    "CHANGED_BETWEEN_PASSES",
    "QuantisedKeys",
    "RankPlan",
    "histogram",
    "plan_ranks",
    "quantised_in",
    "quantised_keys",
    "sorted_on_workers",
    "whole_column",
]


@dataclass(frozen=True)
class QuantisedKeys:
    """A batch of a numeric column as grid values (``flagged``: ``q << 1 | clamped``)."""

    column: NumericColumn
    grid: Grid
    flagged: bool = False

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        """Return the batch's grid values (uint64), checked as the release checks them."""
        if not self.flagged:
            return self.counted(array, first_row)[0]
        values = numeric_values(array, self.column, first_row)
        g = self.grid
        return cast(
            np.ndarray, ranking.quantise_flagged(values, g.lower, g.upper, g.gamma, g.d_int, g.warp)
        )

    def counted(self, array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        """Return the batch's grid values (uint64, never flagged) and its clamped count."""
        values = numeric_values(array, self.column, first_row)
        g = self.grid
        q, clamped = ranking.quantise_column(values, g.lower, g.upper, g.gamma, g.d_int, g.warp)
        return q, int(clamped)


def quantised_keys(column: NumericColumn, grid: Grid) -> Callable[[pa.Array, int], np.ndarray]:
    """Return the function mapping a batch of a numeric column to its grid values."""
    return QuantisedKeys(column, grid)


@dataclass(frozen=True)
class _QuantisedBatch:
    """``(select(grid values), clamped count)`` of a batch of a numeric column."""

    column: NumericColumn
    grid: Grid
    select: Callable[[np.ndarray], Any]

    def __call__(self, array: pa.Array, first_row: int) -> tuple[Any, int]:
        q, clamped = QuantisedKeys(self.column, self.grid).counted(array, first_row)
        return self.select(q), clamped


@dataclass(frozen=True)
class _InRange:
    """Select the grid values in ``[lo, hi)``."""

    lo: int
    hi: int

    def __call__(self, q: np.ndarray) -> np.ndarray:
        return q[(q >= np.uint64(self.lo)) & (q < np.uint64(self.hi))]


@dataclass(frozen=True)
class _BucketCounts:
    """Count the grid values in ``[lo, hi)`` per bucket of ``2**shift`` values from ``lo``."""

    lo: int
    hi: int
    shift: int
    size: int

    def __call__(self, q: np.ndarray) -> np.ndarray:
        counts = np.zeros(self.size, dtype=np.int64)
        outofcore_kernels.count_in_buckets(
            q, np.uint64(self.lo), np.uint64(self.hi), np.uint64(self.shift), counts
        )
        return counts


def histogram(
    dataset: Source,
    column: NumericColumn,
    grid: Grid,
    limits: Limits,
    lo: int,
    hi: int,
    shift: int,
) -> tuple[np.ndarray, int]:
    """Count the grid values in ``[lo, hi)`` per bucket of ``2**shift``; and the clamped.

    Added up where the batches are read (:func:`column_total`): on a cluster the workers add
    them, and only a few come to the driver.
    """
    size = ((hi - 1 - lo) >> shift) + 1
    batch = _QuantisedBatch(column, grid, _BucketCounts(lo, hi, shift, size))
    start = (np.zeros(size, dtype=np.int64), 0)
    counts, clamped = column_total(dataset, str(column.name), limits.batch_rows, batch, start)
    return counts, int(clamped)


def quantised_in(
    dataset: Source, column: NumericColumn, grid: Grid, limits: Limits, lo: int, hi: int
) -> Iterator[tuple[np.ndarray, int]]:
    """Yield every batch's grid values in ``[lo, hi)``, with the batch's clamped count."""
    batch = _QuantisedBatch(column, grid, _InRange(lo, hi))
    return dataset.map_column(str(column.name), limits.batch_rows, batch)


@dataclass(frozen=True)
class RankPlan:
    """How a cluster sorts a column: ranges of grid values, each with its first rank.

    The workers sort ``ranges`` (``counts`` from the histograms), range ``i`` holding ranks
    ``first_ranks[i] ..``; each of ``runs``, ``(grid value, first rank, count)``, is a tie,
    which needs no sort. ``clamped``: the column's clamped count from its first histogram
    (0 where the sort counts it from flagged keys: :func:`whole_column`).
    """

    ranges: Ranges
    first_ranks: np.ndarray
    runs: tuple[tuple[int, int, int], ...]
    clamped: int
    key_bits: int


def plan_ranks(
    dataset: Any, column: NumericColumn, grid: Grid, limits: Limits, tick: Callable[[], None]
) -> RankPlan:
    """Cut a column's grid values into ranges the workers sort, by histogram passes.

    Ranges of balanced counts: about ``n / (2 * tasks)`` values, never more than the memory
    limit's sorted values, narrowed by more histogram passes where a bucket holds more
    (docs/engines.md, "Ranks on a cluster").
    """
    n = dataset.n_rows
    key_bits = max(1, grid.d_int.bit_length())
    top = grid.d_int + 1
    tasks = max(1, int(dataset.sort_tasks))
    balanced = max(1, min(limits.sorted_values, -(-n // (2 * tasks))))
    planned: list[tuple[int, int, int, int]] = []
    runs: list[tuple[int, int, int]] = []

    def counted(lo: int, hi: int, shift: int) -> np.ndarray:
        tick()
        return histogram(dataset, column, grid, limits, lo, hi, shift)[0]

    def whole(lo: int, hi: int, first_rank: int, count: int) -> None:
        planned.append((lo, hi, first_rank, count))

    def tie(value: int, first_rank: int, count: int) -> None:
        runs.append((value, first_rank, count))

    # cut to the balanced size; a range above it (one bucket alone) is sorted if it fits
    plan = FittedRanges(counted, limits.sorted_values, balanced, whole, tie)
    shift = max(0, key_bits - HISTOGRAM_BITS)
    tick()
    counts, clamped = histogram(dataset, column, grid, limits, 0, top, shift)
    cut_ranges(counts, 0, top, shift, 0, balanced, plan)
    table = np.array(planned, dtype=np.int64).reshape(-1, 4)
    ranges = Ranges(table[:, 0].astype(np.uint64), table[:, 1].astype(np.uint64), table[:, 3])
    return RankPlan(ranges, table[:, 2].copy(), tuple(runs), int(clamped), key_bits)


def whole_column(n: int, grid: Grid) -> RankPlan:
    """Return the plan of a column sorted whole, in one range of ``n`` flagged keys.

    Keys are ``q << 1 | clamped``: the sort counts the clamped values, so the plan's is 0.
    """
    ranges = Ranges(
        np.array([0], dtype=np.uint64),
        np.array([(grid.d_int + 1) << 1], dtype=np.uint64),
        np.array([n], dtype=np.int64),
    )
    key_bits = max(1, grid.d_int.bit_length()) + 1
    return RankPlan(ranges, np.zeros(1, dtype=np.int64), (), 0, key_bits)


def sorted_on_workers(
    dataset: Any,
    name: str,
    batch_rows: int,
    keys: Callable[[pa.Array, int], np.ndarray],
    ranges: Ranges,
    key_bits: int,
    reduce: GroupSums,
) -> list[Any]:
    """Return ``dataset.sort_ranges(...)``; a bad value's error names its row, as in memory.

    The sort's tasks run at once and may not number rows (Spark over files), and an engine
    may not give back a task's own exception (Spark raises its traceback), so a failed sort
    is followed by one checking pass in row order (:meth:`map_column`, collecting only the
    refused values) that raises the table's first bad value's error. An interrupt goes through.
    """
    try:
        return cast(
            list[Any], dataset.sort_ranges(name, batch_rows, keys, ranges, key_bits, reduce)
        )
    except Exception:
        for _ in dataset.map_column(name, batch_rows, functools.partial(_checked, fn=keys)):
            pass
        raise  # the checking pass found nothing: the sort's own error


def _checked(array: pa.Array, first_row: int, fn: Callable[[pa.Array, int], Any]) -> None:
    """Run ``fn`` on a batch for its errors only."""
    fn(array, first_row)


#: Why a range's count differs between the histogram and the sort.
CHANGED_BETWEEN_PASSES = (
    "the data gave other values than in the previous pass; a release reads it several "
    "times, so make it deterministic (cache or persist the frame, avoid unseeded sampling)"
)
