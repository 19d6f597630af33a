"""Rank groups' totals: ``ir_dp``'s numeric group sums and categorical rank counts.

* :func:`group_sums`: held in memory, one radix sort of the column's grid values. Elsewhere
  the column is sorted whole if it fits the memory limit, else range by range
  (:mod:`dpfast.dataflow.rank_plans`), a range of one grid value (a tie) added without a
  sort; on a cluster (a source that sorts in place) the workers sort the ranges and send
  back only their groups' sums. Integer sums do not depend on how the column was cut.
* :func:`rank_counts`: individual ranking sorts a categorical column by its categories'
  taxonomy ranks, so the counts per rank give every rank group's members without a sort.
  Held, the column's codes are counted at once; elsewhere one pass counts each batch's,
  added up where the batches are read (:func:`~dpfast.dataflow.flow.column_total`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpfast._kernels import ranking
from dpfast.dataflow.flow import (
    HISTOGRAM_BITS,
    Dataflow,
    Limits,
    column_total,
    cut_ranges,
)
from dpfast.dataflow.rank_files import FittedRanges
from dpfast.dataflow.rank_plans import (
    CHANGED_BETWEEN_PASSES,
    QuantisedKeys,
    histogram,
    plan_ranks,
    quantised_in,
    sorted_on_workers,
    whole_column,
)
from dpfast.dataflow.ranked_rows import RankCounts
from dpfast.dataflow.sorted_ranges import GroupSums, add_parts
from dpfast.dataflow.source import Source
from dpfast.dataflow.values import CategoricalColumn, NumericColumn
from dpfast.exceptions import DPFastValueError
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups

__all__ = ["group_sums", "rank_counts"]


def group_sums(
    flow: Dataflow, column: NumericColumn, grid: Grid, layout: RankGroups
) -> tuple[np.ndarray, int]:
    """Return the exact integer sums of a column's rank groups, and its clamped count.

    Each value is clamped to ``grid``'s domain and quantised to its grid steps; the rows are
    sorted by grid value (ties in row order) and cut into the rank groups of ``layout``
    (:class:`~dpfast.partitions.ranking.RankGroups`: the method chose which holds the
    remainder). Where the dataflow keeps rank orders (``flow.keep_order``: the in-memory
    engine, for its metrics), it is given the held column's rows in rank order.

    Raises
    ------
    DPFastValueError
        Read in passes: a value that is not finite, or not whole in a column declared
        integer (the row is named); values that changed between two passes.
    """
    if flow.table is None:
        tick = flow.passes(column.name)
        return _in_passes(flow.source, column, grid, layout, flow.limits, tick, flow.task_limits)
    g = grid
    quantised, clamped = ranking.quantise_column(
        column.values, g.lower, g.upper, g.gamma, g.d_int, g.warp
    )
    if flow.keep_order is not None:
        flow.keep_order(column.name, np.argsort(quantised, kind="stable").astype(np.int64))
    ordered = ranking.radix_sort_packed(quantised, 0, max(1, g.d_int.bit_length()))
    del quantised
    sums = np.zeros(layout.n_groups, dtype=np.int64)
    ranking.add_group_sums(ordered, 0, 0, *layout.scalars, sums)
    return sums, int(clamped)


def _in_passes(
    dataset: Source,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    limits: Limits,
    tick: Callable[[int], None],
    sort_limits: Limits | None,
) -> tuple[np.ndarray, int]:
    """Every rank group's exact integer sum of a numeric column, and its clamped count.

    ``tick(passes)`` is called before each pass over the column. ``limits`` bound this
    process's memory; ``sort_limits`` (default ``limits``) bound each sort task of a
    cluster (a source that ``sorts_in_place``), which runs on a worker.
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
        parts = [part for part, _ in quantised_in(dataset, column, grid, limits, lo, hi)]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)  # parts freed

    def counted(lo: int, hi: int, shift: int) -> np.ndarray:
        step()
        return histogram(dataset, column, grid, limits, lo, hi, shift)[0]

    def add_sorted(words: np.ndarray, first_rank: int) -> None:
        ordered = ranking.radix_sort_packed(words, 0, key_bits)
        ranking.add_group_sums(ordered, 0, first_rank, *layout.scalars, sums)

    def add_range(lo: int, hi: int, first_rank: int, count: int) -> None:
        add_sorted(collect(lo, hi), first_rank)

    def add_run(value: int, first_rank: int, count: int) -> None:
        ranking.add_group_run(value, count, first_rank, *layout.scalars, sums)

    fits = limits.sorted_values
    process = FittedRanges(counted, fits, fits, add_range, add_run)

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
        for part, count in quantised_in(dataset, column, grid, limits, 0, top):
            parts.append(part)
            clamped += count
        whole = np.concatenate(parts)
        parts.clear()  # the pieces go before the sort's scratch comes
        add_sorted(whole, 0)
    else:
        shift = max(0, key_bits - HISTOGRAM_BITS)
        step()
        counts, clamped = histogram(dataset, column, grid, limits, 0, top, shift)
        cut_ranges(counts, 0, top, shift, 0, limits.sorted_values, process)
    return sums, clamped


def _cluster_group_sums(
    dataset: Source,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    limits: Limits,
    tick: Callable[[], None],
    sums: np.ndarray,
) -> int:
    """Add a column's rank group sums on a cluster's workers; return its clamped count.

    A column of at most the memory limit's sorted values is sorted whole by one task of one
    ``sort_ranges`` job, its keys flagged when clamped (no pass before it:
    :func:`~dpfast.dataflow.rank_plans.whole_column`); a larger one is cut first
    (:func:`~dpfast.dataflow.rank_plans.plan_ranks`) and one job sorts each range on a
    worker, returning its groups' sums. Ties (ranges of one grid value) are added here.
    """
    n = dataset.n_rows
    whole = n <= limits.sorted_values and grid.d_int.bit_length() < 63
    planned = whole_column(n, grid) if whole else plan_ranks(dataset, column, grid, limits, tick)
    for value, first_rank, count in planned.runs:
        ranking.add_group_run(value, count, first_rank, *layout.scalars, sums)
    ranges = planned.ranges
    if not len(ranges):
        return planned.clamped
    reduce = GroupSums(planned.first_ranks, layout, flagged=whole)
    tick()
    keys = QuantisedKeys(column, grid, flagged=whole)
    name, rows = str(column.name), limits.batch_rows
    results = sorted_on_workers(dataset, name, rows, keys, ranges, planned.key_bits, reduce)
    assert ranges.counts is not None
    changed = CHANGED_BETWEEN_PASSES
    flagged = add_parts(results, sums, ranges.counts, lambda: DPFastValueError(changed))
    return planned.clamped + flagged


def rank_counts(flow: Dataflow, column: CategoricalColumn) -> np.ndarray:
    """Return the column's records per rank of its taxonomy (int64, one per leaf).

    Raises
    ------
    DPFastValueError
        A value is missing or outside the taxonomy (read by a pass; held, the engine
        refused it when it read the column).
    """
    if flow.holds:
        return np.asarray(column.taxonomy.rank_counts(column.codes), dtype=np.int64)
    flow.tick(f"column {column.name}", 0, 1)
    start = np.zeros(len(column.taxonomy.domain), dtype=np.int64)
    batch_rows = flow.limits.batch_rows
    counts: np.ndarray = column_total(
        flow.source, str(column.name), batch_rows, RankCounts(column), start
    )
    return counts
