"""Each row given its rank group's value, written once for every engine (docs/engines.md).

The rank-placement outputs, put into the engine's :class:`~dpfast.dataflow.row_outputs.Rows`.
:func:`grouped_rows` puts the rank groups' values in a keyed order of the rows
(:class:`~dpfast.dataflow.writes.WriteGroups`). The others rank a column's rows, cut them
into the method's rank groups (``layout``), draw each group's value from its sum (``values``)
and give every row its group's value at its own place or, with ``key``, at its place in the
keyed order (record linkage): :func:`linked_rows` and :func:`linked_codes` for ``ir_dp``
(:class:`~dpfast.dataflow.writes.WriteLinked`), :func:`ranked_rows` for
``individual_ranking`` (:class:`~dpfast.dataflow.writes.WriteRanked`).

Held (``flow.holds``): one permutation or sort of the held values, and one scatter. In
passes: the rows are written in rank order to a scratch file range by range within the
memory limit (:class:`~dpfast.dataflow.rank_files.RankPasses`), then read back in parts and
placed at their output rows through spill files (:class:`~dpfast.dataflow.placement.Placer`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import outofcore as outofcore_kernels
from dpfast._kernels import ranking
from dpfast.dataflow.flow import (
    Dataflow,
    Limits,
    bucket_runs,
    numeric_values,
    taxonomy_codes,
)
from dpfast.dataflow.placement import Placer
from dpfast.dataflow.rank_files import RankPasses, float_keys, float_values
from dpfast.dataflow.rank_plans import QuantisedKeys
from dpfast.dataflow.row_outputs import Rows, held_array
from dpfast.dataflow.scratch_files import column_digest, scratch_name
from dpfast.dataflow.source import Source
from dpfast.dataflow.values import (
    CategoricalColumn,
    GroupValues,
    NumericColumn,
    inverse_permutation,
)
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups

__all__ = ["Linked", "RankCounts", "grouped_rows", "linked_codes", "linked_rows", "ranked_rows"]

#: Bytes of working memory per row of a part scattered to a placer's ranges: the rows,
#: their values and groups, the ranges, their order, and the pieces cut from them.
_BYTES_PER_SCATTERED_ROW = 96


@dataclass(frozen=True)
class Linked:
    """What a linked output gives: the groups' values, the clamped count, the rows' places.

    ``destination[i]``: input row ``i``'s output row if the table is held and the rows keyed
    (the in-memory engine's metrics pair values and sources by it); else ``None``.
    """

    values: np.ndarray
    clamped: int
    destination: np.ndarray | None = None


def _destination(key: np.ndarray | None, n: int) -> np.ndarray | None:
    return None if key is None else inverse_permutation(noise.permutation(key, n))


# -- rank groups in a keyed order --------------------------------------------------------


def grouped_rows(
    flow: Dataflow, values: np.ndarray, layout: RankGroups, key: np.ndarray, into: Rows
) -> np.ndarray | None:
    """Put ``values[layout.group_of(permutation(key)[r])]`` at every output row ``r``.

    The groups' values (float64, or int64 codes) follow the keyed permutation of ``0 .. n-1``
    (:func:`dpfast.noise.permutation`), no row linked to its input row. Held: returns the
    whole permutation (the in-memory engine's metrics pair values and sources by it). In
    passes: each bucket range of the permutation is put as it is drawn; returns ``None``.
    """
    n = flow.source.n_rows
    if flow.holds:
        order = noise.permutation(key, n)
        if values.dtype == np.float64:
            out = held_array(into, n, np.float64)
            ranking.take_groups(values, order, *layout.scalars, out)
        else:
            out = values[layout.group_of(order)]
        into.put(0, out)
        return order
    sizes = noise.permutation_bucket_sizes(key, n)
    runs, first = bucket_runs(sizes, flow.limits.ordered_rows), 0
    for lo, hi in itertools.pairwise(runs):
        part = noise.permutation_part_groups(
            key, n, lo, hi, values, layout.k, sizes, big=layout.big
        )
        into.put(first, part)
        first += part.shape[0]
    return None


# -- a numeric column, by (grid value, row) ----------------------------------------------


def linked_rows(
    flow: Dataflow,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    key: np.ndarray | None,
    values: GroupValues,
    into: Rows,
) -> Linked:
    """Put each row's rank group's value (float64) at its output place into ``into``.

    Ranked by (grid value, row); ``values(sums)`` gives the groups' values from their exact
    integer sums of grid values. Returns them and the clamped count.
    """
    n = flow.source.n_rows
    if not flow.holds:
        ranked = flow.scratch() / scratch_name(column.name, "ranked")
        tick = flow.passes(column.name)
        sums, clamped = _rank_numeric(flow.source, column, grid, layout, flow.limits, ranked, tick)
        group_values = values(sums)
        _place(flow, column.name, ranked, group_values, layout, key, into)
        return Linked(group_values, clamped)
    destination = _destination(key, n)
    packed, clamped = ranking.pack_quantised(
        column.values,
        grid.lower,
        grid.upper,
        grid.gamma,
        grid.d_int,
        grid.index_bits,
        np.empty(0, dtype=np.int64) if destination is None else destination,
        grid.warp,
    )
    key_bits = max(1, grid.d_int.bit_length())
    packed = ranking.radix_sort_packed(packed, grid.index_bits, key_bits)
    sums = np.zeros(layout.n_groups, dtype=np.int64)
    ranking.add_group_sums(packed, grid.index_bits, 0, *layout.scalars, sums)
    group_values = values(sums)
    out = held_array(into, n, np.float64)
    ranking.scatter_groups(packed, grid.index_bits, *layout.scalars, group_values, out)
    into.put(0, out)
    return Linked(group_values, int(clamped), destination)


def _rank_numeric(
    dataset: Source,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    limits: Limits,
    ranked: Path,
    tick: Callable[[int], None],
) -> tuple[np.ndarray, int]:
    """Write a column's rows to ``ranked`` by (grid value, row); return group sums, clamped."""
    sums = np.zeros(layout.n_groups, dtype=np.int64)

    def on_sorted(sorted_keys: np.ndarray, first_rank: int) -> None:
        ranking.add_group_sums(sorted_keys, 0, first_rank, *layout.scalars, sums)

    def on_run(key: int, count: int, first_rank: int) -> None:
        ranking.add_group_run(key, count, first_rank, *layout.scalars, sums)

    keys = QuantisedKeys(column, grid).counted
    passes = RankPasses(dataset, str(column.name), keys, limits.batch_rows, limits.memory, tick)
    clamped = passes.rank(grid.d_int + 1, ranked, on_sorted, on_run)
    return sums, clamped


# -- a numeric column, by (value, row) ---------------------------------------------------


def ranked_rows(
    flow: Dataflow, column: NumericColumn, layout: RankGroups, values: GroupValues, into: Rows
) -> None:
    """Put each row's rank group's value (float64) at its own row into ``into``.

    Ranked by (value, row); each group's sum is added in rank order, one value at a time,
    held and in passes (there on order-preserving ``uint64`` images of the floats: the same
    additions in the same order, so the same sums bit for bit).
    """
    n = flow.source.n_rows
    if flow.holds:
        order = np.argsort(column.values, kind="stable")
        sums = np.zeros(layout.n_groups, dtype=np.float64)
        outofcore_kernels.add_float_group_sums(column.values[order], 0, *layout.scalars, sums)
        out = held_array(into, n, np.float64)
        out[order] = np.repeat(values(sums), layout.sizes)
        into.put(0, out)
        return
    ranked = flow.scratch() / scratch_name(column.name, "ranked")
    sums = _rank_floats(flow.source, column, layout, flow.limits, ranked, flow.passes(column.name))
    _place(flow, column.name, ranked, values(sums), layout, None, into)


def _rank_floats(
    dataset: Source,
    column: NumericColumn,
    layout: RankGroups,
    limits: Limits,
    ranked: Path,
    tick: Callable[[int], None],
) -> np.ndarray:
    """Write a column's rows to ``ranked`` in (value, row) order; return each group's float sum."""
    sums = np.zeros(layout.n_groups, dtype=np.float64)

    def on_sorted(sorted_keys: np.ndarray, first_rank: int) -> None:
        outofcore_kernels.add_float_group_sums(
            float_values(sorted_keys), first_rank, *layout.scalars, sums
        )

    def on_run(key: int, count: int, first_rank: int) -> None:
        value = float(float_values(np.array([key], dtype=np.uint64))[0])
        outofcore_kernels.add_float_run(value, count, first_rank, *layout.scalars, sums)

    keys = _FloatKeys(column)
    ranks = RankPasses(dataset, str(column.name), keys, limits.batch_rows, limits.memory, tick)
    ranks.rank(2**64, ranked, on_sorted, on_run)
    return sums


@dataclass(frozen=True)
class _FloatKeys:
    """A batch of a numeric column as order-preserving ``uint64`` keys (nothing counted)."""

    column: NumericColumn

    def __call__(self, array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        return float_keys(numeric_values(array, self.column, first_row)), 0


def _place(
    flow: Dataflow,
    name: object,
    ranked: Path,
    group_values: np.ndarray,
    layout: RankGroups,
    key: np.ndarray | None,
    into: Rows,
) -> None:
    """Give every row its rank group's value, in output order, into ``into``.

    ``ranked`` (the rows in rank order) is read back in parts and removed. With ``key`` the
    values go through input order into the permutation's order.
    """
    n, memory, directory = flow.source.n_rows, flow.limits.memory, flow.scratch()
    tag = column_digest(name)
    by_row = Placer(directory, tag + "-by-row", n, None, pa.float64(), 8, memory)
    shuffled = None
    if key is not None:
        shuffled = Placer(directory, tag + "-shuffled", n, key, pa.float64(), 8, memory)
    step = max(1024, memory // _BYTES_PER_SCATTERED_ROW)
    put = _Put(into, np.float64)
    try:
        for first in range(0, n, step):
            count = min(step, n - first)
            rows = np.fromfile(ranked, np.int64, count, offset=first * 8)
            groups = layout.group_of(np.arange(first, first + count, dtype=np.int64))
            by_row.add(pa.array(group_values[groups]), rows=rows)
            del rows, groups
        ranked.unlink()
        if shuffled is None:
            by_row.finish(put)
        else:
            by_row.finish(lambda values, first: shuffled.add(values, first=first))
            shuffled.finish(put)
    finally:
        by_row.close()
        if shuffled is not None:
            shuffled.close()


@dataclass(frozen=True)
class _Put:
    """A placer's sink: its values (Arrow) put into ``into`` as ``dtype``."""

    into: Rows
    dtype: type

    def __call__(self, values: pa.Array | pa.ChunkedArray, first: int) -> None:
        self.into.put(first, np.ascontiguousarray(np.asarray(values), dtype=self.dtype))


# -- a categorical column, by taxonomy rank ----------------------------------------------


def linked_codes(
    flow: Dataflow,
    column: CategoricalColumn,
    layout: RankGroups,
    key: np.ndarray | None,
    values: GroupValues,
    into: Rows,
) -> Linked:
    """Put each row's rank group's code (int64) at its output place into ``into``.

    Ranked by (taxonomy rank, row); ``values(counts)`` gives the groups' codes from the
    records per rank. Returns the codes (nothing is clamped). In passes, one pass counts
    each batch's ranks, so that each batch then places its own rows.
    """
    n, m = flow.source.n_rows, len(column.taxonomy.domain)
    taxonomy = column.taxonomy
    if flow.holds:
        destination = _destination(key, n)
        codes = values(np.asarray(taxonomy.rank_counts(column.codes), dtype=np.int64))
        out = taxonomy.broadcast_rank_groups(
            column.codes, layout.k, codes, destination, big=layout.big
        )
        into.put(0, np.asarray(out, dtype=np.int64))
        return Linked(codes, 0, destination)
    name, batch_rows = str(column.name), flow.limits.batch_rows
    per_batch = sorted(
        flow.source.map_column(name, batch_rows, RankCounts(column).numbered),
        key=lambda part: part[0],
    )
    totals = np.zeros(m, dtype=np.int64)
    for _, part in per_batch:
        totals += part
    codes = values(totals)
    offsets = {}
    running = np.concatenate(([0], np.cumsum(totals)[:-1])).astype(np.int64)
    for first_row, part in per_batch:
        offsets[first_row] = running.copy()
        running += part
    del per_batch
    tag = column_digest(name) + "-placed"
    placer = Placer(flow.scratch(), tag, n, key, pa.int64(), 8, flow.limits.memory)
    released = _LinkedCodes(column, codes, offsets, layout)
    try:
        for first_row, out in flow.source.map_column(name, batch_rows, released):
            placer.add(pa.array(out), first=first_row)
        placer.finish(_Put(into, np.int64))
    finally:
        placer.close()
    return Linked(codes, 0)


def _category_ranks(array: pa.Array, cat: CategoricalColumn) -> np.ndarray:
    """One batch of a categorical column as taxonomy ranks, refusing values not in it."""
    ranks: np.ndarray = np.asarray(cat.taxonomy.rank, dtype=np.int64)[taxonomy_codes(array, cat)]
    return ranks


@dataclass(frozen=True)
class RankCounts:
    """A batch of a categorical column's records counted per taxonomy rank (int64)."""

    column: CategoricalColumn

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        """Return the batch's records per rank, refusing values not in the taxonomy."""
        codes = taxonomy_codes(array, self.column)
        return np.asarray(self.column.taxonomy.rank_counts(codes), dtype=np.int64)

    def numbered(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray]:
        """Return the batch's first row and its records per rank."""
        return first_row, self(array, first_row)


@dataclass(frozen=True)
class _LinkedCodes:
    """A batch of a categorical column released as its rows' rank groups' codes."""

    column: CategoricalColumn
    codes: np.ndarray
    offsets: dict[int, np.ndarray]
    layout: RankGroups

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray]:
        ranks = _category_ranks(array, self.column)
        by_rank = np.argsort(ranks, kind="stable")
        ordered = ranks[by_rank]
        within = np.arange(ordered.shape[0]) - np.searchsorted(ordered, ordered, side="left")
        position = np.empty(ranks.shape[0], dtype=np.int64)
        position[by_rank] = self.offsets[first_row][ordered] + within
        return first_row, self.codes[self.layout.group_of(position)]
