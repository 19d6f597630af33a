"""The ranking passes of the out-of-core engine's record-linked and ranked outputs.

A column's rows are ranked by (grid value, row) (:func:`rank_numeric`, also giving the
rank groups' exact integer sums) or by (value, row) (:func:`rank_floats`, with the groups'
float sums added in rank order) and written in rank order to a scratch file, range by
range within the memory limit (:mod:`._rank_files`); a categorical column's batches are
its taxonomy ranks (:func:`category_ranks`). The rank groups' sums alone are the
``group_sums`` step's (:mod:`dpfast.steps.ranks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dpfast._kernels import outofcore as outofcore_kernels
from dpfast._kernels import ranking
from dpfast.engines.dataflow import (
    Limits,
    numeric_values,
    taxonomy_codes,
)
from dpfast.engines.outofcore._rank_files import RankPasses, float_keys, float_values
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.values import CategoricalColumn, NumericColumn
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups

__all__ = ["BATCH_ROWS", "category_ranks", "rank_floats", "rank_numeric"]

#: Rows per batch read from Parquet.
BATCH_ROWS = 1 << 20


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
