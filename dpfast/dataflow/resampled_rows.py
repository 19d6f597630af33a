"""Rows replaced by draws from their bins, written once for every engine (docs/engines.md).

Row ``i`` of bin ``g`` is replaced, when its draw says so, by ``pool[start[g] + U_i]``, the
pool listing the column's values bin by bin, each bin's in row order
(:func:`dpfast.noise.retain_or_replace`). Held (``flow.holds``), the pool is built whole and
every row drawn at once. In passes it is never held: per window of pool positions that fits
in memory, one pass counts the window's bins per batch (so every row knows its pool
position, whatever order the batches come in) and one more gathers the window's values and
the rows replaced from it (:func:`dpfast.noise.retain_draws` gives ``U_i``). Those
replacements are kept sorted by row in the dataflow's scratch files until the last pass puts
the column's rows (:mod:`dpfast.dataflow.row_outputs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import mechanisms as mechanism_kernels
from dpfast.dataflow.flow import Dataflow, numeric_values
from dpfast.dataflow.row_outputs import Rows
from dpfast.dataflow.scratch_files import append_array, scratch_name
from dpfast.dataflow.source import Source
from dpfast.dataflow.values import Bins, NumericColumn

__all__ = ["resampled_rows"]

#: Bytes of working memory per pool position of a window (its value, the positions and
#: values gathered for it, the replacements that fall in it, and slack).
_BYTES_PER_POSITION = 64


def resampled_rows(
    flow: Dataflow,
    column: NumericColumn,
    bins: Bins,
    key: np.ndarray,
    keep: int,
    into: Rows,
    *,
    n_threads: int = 1,
) -> None:
    """Put every row's value, or its replacement from its bin, as float64 into ``into``.

    ``keep / 2**32`` is each row's probability of keeping its value; ``n_threads`` the
    threads of the draws held in memory (the values do not depend on it).
    """
    if flow.holds:
        into.put(0, _held(column.values, bins, key, keep, n_threads))
        return
    found = _replacements(flow, column, bins, key, keep)
    try:
        for first_row, values in flow.source.map_column(
            str(column.name), flow.limits.batch_rows, _RowValues(column)
        ):
            into.put(first_row, found.apply(values, first_row))
    finally:
        found.remove()


def _held(values: np.ndarray, bins: Bins, key: np.ndarray, keep: int, n_threads: int) -> np.ndarray:
    """Hold the pool (the values bin by bin) and draw every row from it at once."""
    groups = np.empty(values.shape[0], dtype=np.int64)
    pool = np.empty(values.shape[0], dtype=np.float64)
    starts = bins.starts
    mechanism_kernels.group_by_interval(values, bins.lo, bins.scale, bins.m, starts, groups, pool)
    return noise.retain_or_replace(
        key,
        keep,
        values,
        pool,
        groups=groups,
        group_start=starts,
        group_size=bins.counts,
        n_threads=n_threads,
    )


@dataclass(frozen=True)
class Replacements:
    """The replaced rows of a column and their new values, in files sorted by row."""

    files: tuple[tuple[Path, Path], ...]

    def remove(self) -> None:
        """Remove the files, once the column is written."""
        for pair in self.files:
            for path in pair:
                path.unlink(missing_ok=True)

    def apply(self, values: np.ndarray, first_row: int) -> np.ndarray:
        """Return a batch's values with the replacements of its rows."""
        out = values.copy()
        last = first_row + values.shape[0]
        for rows_path, values_path in self.files:
            if rows_path.stat().st_size == 0:
                continue
            rows = np.memmap(rows_path, dtype=np.int64, mode="r")
            a, b = np.searchsorted(rows, [first_row, last])
            if b > a:
                found = np.fromfile(values_path, np.float64, b - a, offset=8 * int(a))
                out[np.asarray(rows[a:b]) - first_row] = found
            del rows
        return out


def _replacements(
    flow: Dataflow, column: NumericColumn, bins: Bins, key: np.ndarray, keep: int
) -> Replacements:
    """Find every replaced row's new value, window of pool positions by window."""
    source, limits = flow.source, flow.limits
    n = source.n_rows
    size = max(1024, limits.memory // _BYTES_PER_POSITION)
    files = []
    windows = range(0, n, size)
    for w, first in enumerate(windows):
        flow.tick(f"column {column.name}", w, len(windows))
        window = _Window(column, bins, key, keep, first, min(n, first + size))
        rows, found = window.resolve(source, limits.batch_rows)
        directory = flow.scratch()
        paths = (
            directory / scratch_name(column.name, f"resampled-{w}-rows"),
            directory / scratch_name(column.name, f"resampled-{w}-values"),
        )
        for path, values in zip(paths, (rows, found), strict=True):
            with open(path, "wb") as file:
                append_array(file, values)
        files.append(paths)
    return Replacements(tuple(files))


@dataclass(frozen=True)
class _RowValues:
    """A batch of a numeric column as float64, with its first row."""

    column: NumericColumn

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray]:
        return first_row, numeric_values(array, self.column, first_row)


@dataclass(frozen=True)
class _Window:
    """Pool positions ``[first, last)``: the bins ``g0 .. g1`` that hold them."""

    column: NumericColumn
    bins: Bins
    key: np.ndarray
    keep: int
    first: int
    last: int

    @property
    def span(self) -> tuple[int, int]:
        starts = self.bins.starts
        g0 = int(np.searchsorted(starts, self.first, side="right")) - 1
        g1 = int(np.searchsorted(starts, self.last - 1, side="right")) - 1
        return g0, g1

    def resolve(self, dataset: Source, batch_rows: int) -> tuple[np.ndarray, np.ndarray]:
        """Two passes: the rows replaced from this window, sorted, and their new values."""
        g0, g1 = self.span
        name = str(self.column.name)
        bases = self._bases(dataset, batch_rows, g0, g1)
        values = np.empty(self.last - self.first, dtype=np.float64)
        filled = 0
        rows_parts, targets_parts = [], []
        gather = _Gather(self, bases, g0, g1)
        for positions, held, rows, targets in dataset.map_column(name, batch_rows, gather):
            values[positions] = held
            filled += positions.shape[0]
            rows_parts.append(rows)
            targets_parts.append(targets)
        assert filled == values.shape[0]
        rows = np.concatenate(rows_parts) if rows_parts else np.empty(0, dtype=np.int64)
        targets = np.concatenate(targets_parts) if targets_parts else np.empty(0, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        return rows[order], values[targets[order]]

    def _bases(
        self, dataset: Source, batch_rows: int, g0: int, g1: int
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per batch (by first row), the rows of each bin ``g0 .. g1`` before it."""
        running = np.zeros(g1 - g0 + 1, dtype=np.int64)
        bases = {}
        count = _WindowCounts(self.column, self.bins, g0, g1)
        for first_row, found, counts in sorted(
            dataset.map_column(str(self.column.name), batch_rows, count), key=lambda part: part[0]
        ):
            bases[first_row] = (found, running[found - g0].copy())
            running[found - g0] += counts
        return bases


@dataclass(frozen=True)
class _WindowCounts:
    """A batch's rows in each bin ``g0 .. g1``, with its first row."""

    column: NumericColumn
    bins: Bins
    g0: int
    g1: int

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray, np.ndarray]:
        groups = self.bins.of(numeric_values(array, self.column, first_row))
        inside = groups[(groups >= self.g0) & (groups <= self.g1)]
        found, counts = np.unique(inside, return_counts=True)
        return first_row, found, counts


@dataclass(frozen=True)
class _Gather:
    """A batch's values at a window's positions, and its rows replaced from the window."""

    window: _Window
    bases: dict[int, tuple[np.ndarray, np.ndarray]]
    g0: int
    g1: int

    def __call__(
        self, array: pa.Array, first_row: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        window, bins = self.window, self.window.bins
        starts, counts = bins.starts, bins.counts
        values = numeric_values(array, window.column, first_row)
        groups = bins.of(values)
        rows = np.flatnonzero((groups >= self.g0) & (groups <= self.g1))
        order = rows[np.argsort(groups[rows], kind="stable")]  # by bin, then row
        ordered = groups[order]
        found, before = self.bases[first_row]
        first_of = np.searchsorted(ordered, found)
        runs = np.diff(np.append(first_of, order.shape[0]))
        within = np.arange(order.shape[0]) - np.repeat(first_of, runs)
        positions = starts[ordered] + np.repeat(before, runs) + within
        mine = (positions >= window.first) & (positions < window.last)
        draws = noise.retain_draws(window.key, window.keep, groups, counts, start=first_row)
        replaced = rows[draws[rows] >= 0]
        targets = starts[groups[replaced]] + draws[replaced]
        hit = (targets >= window.first) & (targets < window.last)
        return (
            positions[mine] - window.first,
            values[order[mine]],
            replaced[hit] + first_row,
            targets[hit] - window.first,
        )
