"""The passes of the out-of-core engine over a column source (docs/engines.md).

A protected column's batches are checked as the in-memory release checks its values
(:func:`numeric_values`, :class:`NonFiniteValue`); the rank groups' exact integer sums
come from sorting the column's grid values range by range (:func:`group_sums`): when it
holds more values than fit in the memory limit, a histogram pass over the top bits of the
grid values cuts the grid into ranges that fit, each range is collected in one more pass,
sorted and added to the groups' sums from its first global rank (a range holding a single
grid value is added without sorting). Integer sums do not depend on how the column was
cut. On a cluster (a source that ``sorts_in_place``) the workers sort the ranges and return
their groups' sums. A categorical column's count per taxonomy rank is the
:func:`dpfast.steps.rank_counts` step's.
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
from dpfast.engines.dataflow import (
    HISTOGRAM_BITS,
    Limits,
    column_total,
    cut_ranges,
    numeric_values,
    refined_shift,
    taxonomy_codes,
)
from dpfast.engines.outofcore._rank_files import RankPasses, float_keys, float_values
from dpfast.engines.outofcore._sorted import GroupSums, Ranges, add_parts
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.values import CategoricalColumn, NumericColumn
from dpfast.exceptions import DPFastValueError
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups

__all__ = [
    "BATCH_ROWS",
    "RankPlan",
    "category_ranks",
    "group_sums",
    "plan_ranks",
    "quantised_keys",
]

#: Rows per batch read from Parquet.
BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class _QuantisedKeys:
    """A batch of a numeric column as grid values (``flagged``: ``q << 1 | clamped``)."""

    column: NumericColumn
    grid: Grid
    flagged: bool = False

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        values = numeric_values(array, self.column, first_row)
        g = self.grid
        if self.flagged:
            return cast(
                np.ndarray,
                ranking.quantise_flagged(values, g.lower, g.upper, g.gamma, g.d_int, g.warp),
            )
        q, _ = ranking.quantise_column(values, g.lower, g.upper, g.gamma, g.d_int, g.warp)
        return cast(np.ndarray, q)


def quantised_keys(column: NumericColumn, grid: Grid) -> Callable[[pa.Array, int], np.ndarray]:
    """Return the function mapping a batch of a numeric column to its grid values."""
    return _QuantisedKeys(column, grid)


@dataclass(frozen=True)
class _QuantisedBatch:
    """``(select(grid values), clamped count)`` of a batch of a numeric column."""

    column: NumericColumn
    grid: Grid
    select: Callable[[np.ndarray], Any]

    def __call__(self, array: pa.Array, first_row: int) -> tuple[Any, int]:
        values = numeric_values(array, self.column, first_row)
        g = self.grid
        q, clamped = ranking.quantise_column(values, g.lower, g.upper, g.gamma, g.d_int, g.warp)
        return self.select(q), int(clamped)


def group_sums(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    limits: Limits,
    tick: Callable[[int], None],
    sort_limits: Limits | None = None,
) -> tuple[np.ndarray, int]:
    """Every rank group's exact integer sum of a numeric column, and its clamped count.

    The groups are ``layout``'s. ``tick(passes)`` is called before each pass over the
    column.

    ``limits`` bound this process's memory; ``sort_limits`` (default ``limits``) bound
    each sort task of a cluster (a source that ``sorts_in_place``), which runs on a worker.
    """
    n = dataset.n_rows
    key_bits = max(1, grid.d_int.bit_length())
    sums = np.zeros(layout.n_groups, dtype=np.int64)
    passes = [0]

    def step() -> None:
        passes[0] += 1
        tick(passes[0])

    def collect(lo: int, hi: int) -> np.ndarray:
        step()
        select = _InRange(lo, hi)
        parts = [part for part, _ in _quantised(dataset, column, grid, limits, select)]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)  # parts freed

    def histogram(lo: int, hi: int, shift: int) -> np.ndarray:
        step()
        return _histogram(dataset, column, grid, limits, lo, hi, shift)[0]

    def add_sorted(words: np.ndarray, first_rank: int) -> None:
        ordered = ranking.radix_sort_packed(words, 0, key_bits)
        ranking.add_group_sums(ordered, 0, first_rank, *layout.scalars, sums)

    def process(lo: int, hi: int, first_rank: int, count: int) -> None:
        if count == 0:
            return
        if hi - lo == 1:
            ranking.add_group_run(lo, count, first_rank, *layout.scalars, sums)
        elif count <= limits.sorted_values:
            add_sorted(collect(lo, hi), first_rank)
        else:
            shift = refined_shift(lo, hi)
            counts = histogram(lo, hi, shift)
            cut_ranges(counts, lo, hi, shift, first_rank, limits.sorted_values, process)

    # the first pass also counts the clamped values
    clamped = 0
    top = grid.d_int + 1
    if dataset.sorts_in_place and (n > limits.sorted_values or key_bits < 63):
        # a cluster: the workers sort and add the groups in one job, instead of the
        # driver sorting the collected column or one pass over the data per range
        sorts = sort_limits or limits
        clamped = _cluster_group_sums(dataset, column, grid, layout, sorts, step, sums)
    elif n <= limits.sorted_values:
        step()
        parts = []
        for part, count in _quantised(dataset, column, grid, limits, _InRange(0, top)):
            parts.append(part)
            clamped += count
        whole = np.concatenate(parts)
        parts.clear()  # the pieces go before the sort's scratch comes
        add_sorted(whole, 0)
    else:
        shift = max(0, key_bits - HISTOGRAM_BITS)
        step()
        counts, clamped = _histogram(dataset, column, grid, limits, 0, top, shift)
        cut_ranges(counts, 0, top, shift, 0, limits.sorted_values, process)
    return sums, clamped


@dataclass(frozen=True)
class RankPlan:
    """How a cluster sorts a column: ranges of grid values, each with its first rank.

    ``ranges`` (their ``counts`` from the histograms) are sorted by the workers, range
    ``i`` holding ranks ``first_ranks[i] ..``; each of ``runs`` is ``(grid value, first
    rank, count)``, a range of one grid value (a tie), which needs no sort. ``clamped`` is
    the column's clamped count, from its first histogram (0 where the sort counts it from
    flagged keys: :func:`_whole_column`).
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

    The first pass over the top bits of the grid values cuts the grid into ranges of
    balanced counts (about ``n / (2 * tasks)`` values, and never more than the memory
    limit's sorted values, narrowed by more histogram passes where a bucket holds more).
    See docs/engines.md, "Ranks on a cluster".
    """
    n = dataset.n_rows
    key_bits = max(1, grid.d_int.bit_length())
    top = grid.d_int + 1
    tasks = max(1, int(dataset.sort_tasks))
    balanced = max(1, min(limits.sorted_values, -(-n // (2 * tasks))))
    planned: list[tuple[int, int, int, int]] = []
    runs: list[tuple[int, int, int]] = []

    def histogram(lo: int, hi: int, shift: int) -> tuple[np.ndarray, int]:
        tick()
        return _histogram(dataset, column, grid, limits, lo, hi, shift)

    def plan(lo: int, hi: int, first_rank: int, count: int) -> None:
        if count == 0:
            return
        if hi - lo == 1:
            runs.append((lo, first_rank, count))
        elif count <= limits.sorted_values:  # above the balanced size: one bucket alone
            planned.append((lo, hi, first_rank, count))
        else:
            shift = refined_shift(lo, hi)
            cut_ranges(histogram(lo, hi, shift)[0], lo, hi, shift, first_rank, balanced, plan)

    shift = max(0, key_bits - HISTOGRAM_BITS)
    counts, clamped = histogram(0, top, shift)
    cut_ranges(counts, 0, top, shift, 0, balanced, plan)
    table = np.array(planned, dtype=np.int64).reshape(-1, 4)
    ranges = Ranges(table[:, 0].astype(np.uint64), table[:, 1].astype(np.uint64), table[:, 3])
    return RankPlan(ranges, table[:, 2].copy(), tuple(runs), int(clamped), key_bits)


def _cluster_group_sums(
    dataset: Any,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    limits: Limits,
    tick: Callable[[], None],
    sums: np.ndarray,
) -> int:
    """Add a column's rank group sums on a cluster's workers; return its clamped count.

    A column of at most the memory limit's sorted values is sorted whole by one task of
    one ``sort_ranges`` job, its keys flagged with whether they were clamped (no pass
    before it, :func:`_whole_column`). A larger one is cut first (:func:`plan_ranks`); one
    ``sort_ranges`` job sorts each range on a worker and returns its groups' sums. A range
    of one grid value (a tie) is added here.
    """
    n = dataset.n_rows
    whole = n <= limits.sorted_values and grid.d_int.bit_length() < 63
    planned = _whole_column(n, grid) if whole else plan_ranks(dataset, column, grid, limits, tick)
    for value, first_rank, count in planned.runs:
        ranking.add_group_run(value, count, first_rank, *layout.scalars, sums)
    ranges = planned.ranges
    if not len(ranges):
        return planned.clamped
    reduce = GroupSums(planned.first_ranks, layout, flagged=whole)
    tick()
    keys = _QuantisedKeys(column, grid, flagged=whole)
    name, rows = str(column.name), limits.batch_rows
    results = _sorted_on_workers(dataset, name, rows, keys, ranges, planned.key_bits, reduce)
    assert ranges.counts is not None
    changed = _CHANGED_BETWEEN_PASSES
    flagged = add_parts(results, sums, ranges.counts, lambda: DPFastValueError(changed))
    return planned.clamped + flagged


def _whole_column(n: int, grid: Grid) -> RankPlan:
    """Return the plan of a column sorted whole, in one range of ``n`` flagged keys.

    Each key carries its clamped flag in its low bit (``q << 1 | clamped``): the sort
    counts the clamped values, so the plan's own count is 0.
    """
    ranges = Ranges(
        np.array([0], dtype=np.uint64),
        np.array([(grid.d_int + 1) << 1], dtype=np.uint64),
        np.array([n], dtype=np.int64),
    )
    key_bits = max(1, grid.d_int.bit_length()) + 1
    return RankPlan(ranges, np.zeros(1, dtype=np.int64), (), 0, key_bits)


def _sorted_on_workers(
    dataset: Any,
    name: str,
    batch_rows: int,
    keys: Callable[[pa.Array, int], np.ndarray],
    ranges: Ranges,
    key_bits: int,
    reduce: GroupSums,
) -> list[Any]:
    """Return ``dataset.sort_ranges(...)``; a bad value's error names its row, as in memory.

    The sort's tasks run at once and may not number rows (Spark over files), and an
    engine may not give back a task's own exception (Spark raises its traceback), so on a
    failed sort one checking pass in row order (:meth:`map_column`, which sends refused
    values back, nothing else collected) raises the error of the table's first bad value
    instead. An interrupt is not a failure: it goes through.
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
_CHANGED_BETWEEN_PASSES = (
    "the data gave other values than in the previous pass; a release reads it several "
    "times, so make it deterministic (cache or persist the frame, avoid unseeded sampling)"
)


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


def _histogram(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    limits: Limits,
    lo: int,
    hi: int,
    shift: int,
) -> tuple[np.ndarray, int]:
    """Count the grid values in ``[lo, hi)`` per bucket of ``2**shift``; and the clamped.

    Added up where the batches are read (:func:`column_total`): on a cluster, the workers
    add the histograms, and only a few come to the driver.
    """
    size = ((hi - 1 - lo) >> shift) + 1
    batch = _QuantisedBatch(column, grid, _BucketCounts(lo, hi, shift, size))
    start = (np.zeros(size, dtype=np.int64), 0)
    counts, clamped = column_total(dataset, str(column.name), limits.batch_rows, batch, start)
    return counts, int(clamped)


def _quantised(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    limits: Limits,
    select: Callable[[np.ndarray], Any],
) -> Iterator[tuple[Any, int]]:
    """Yield ``select(grid values)`` of every batch of the column, with its clamped count."""
    batch = _QuantisedBatch(column, grid, select)
    return dataset.map_column(str(column.name), limits.batch_rows, batch)


def rank_numeric(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    limits: Limits,
    fd: int,
    tick: Callable[[int], None],
) -> tuple[np.ndarray, int]:
    """Rank a column's rows by (grid value, row): write the rows in rank order to ``fd``.

    Returns the exact integer sum of every rank group (``layout``'s) of grid values, and
    the clamped count.
    """
    sums = np.zeros(layout.n_groups, dtype=np.int64)
    passes = [0]

    def step() -> None:
        passes[0] += 1
        tick(passes[0])

    def keys(array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        values = numeric_values(array, column, first_row)
        g = grid
        q, clamped = ranking.quantise_column(values, g.lower, g.upper, g.gamma, g.d_int, g.warp)
        return q, int(clamped)

    def on_sorted(sorted_keys: np.ndarray, first_rank: int) -> None:
        ranking.add_group_sums(sorted_keys, 0, first_rank, *layout.scalars, sums)

    def on_run(key: int, count: int, first_rank: int) -> None:
        ranking.add_group_run(key, count, first_rank, *layout.scalars, sums)

    passes_ = RankPasses(dataset, str(column.name), keys, limits.batch_rows, limits.memory, step)
    clamped = passes_.rank(grid.d_int + 1, fd, on_sorted, on_run)
    return sums, clamped


def category_ranks(array: pa.Array, cat: CategoricalColumn) -> np.ndarray:
    """One batch of a categorical column as taxonomy ranks, refusing values not in it."""
    ranks: np.ndarray = np.asarray(cat.taxonomy.rank, dtype=np.int64)[taxonomy_codes(array, cat)]
    return ranks


def rank_floats(
    dataset: ColumnSource,
    column: NumericColumn,
    layout: RankGroups,
    limits: Limits,
    fd: int,
    tick: Callable[[int], None],
) -> np.ndarray:
    """Rank a column's rows by (value, row), writing them to ``fd`` in rank order.

    Returns every rank group's (``layout``'s) float sum, its values added one by one in
    rank order.
    """
    sums = np.zeros(layout.n_groups, dtype=np.float64)
    passes = [0]

    def step() -> None:
        passes[0] += 1
        tick(passes[0])

    def on_sorted(sorted_keys: np.ndarray, first_rank: int) -> None:
        outofcore_kernels.add_float_group_sums(
            float_values(sorted_keys), first_rank, *layout.scalars, sums
        )

    def on_run(key: int, count: int, first_rank: int) -> None:
        value = float(float_values(np.array([key], dtype=np.uint64))[0])
        outofcore_kernels.add_float_run(value, count, first_rank, *layout.scalars, sums)

    keys = _FloatKeys(column)
    ranks = RankPasses(dataset, str(column.name), keys, limits.batch_rows, limits.memory, step)
    ranks.rank(2**64, fd, on_sorted, on_run)
    return sums


@dataclass(frozen=True)
class _FloatKeys:
    """A batch of a numeric column as order-preserving ``uint64`` keys (nothing counted)."""

    column: NumericColumn

    def __call__(self, array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        return float_keys(numeric_values(array, self.column, first_row)), 0
