"""k-PRAM's intervals and replacements beyond memory (docs/engines.md#k-pram).

In memory (:func:`dpfast.k_pram`) row ``i`` of interval ``g`` is replaced, when its draw
says so, by ``pool[group_start[g] + U_i]``: the pool lists the values interval by
interval, each interval's in row order. Out of core the pool is never held. Its positions
``[0, n)`` are cut into windows that fit in memory; for each window, one pass counts the
window's intervals per batch (so that every row knows its own pool position, whatever
order the batches come in) and one more pass gathers the window's values and the rows
whose replacement falls in it (:func:`dpfast.noise.retain_draws` gives ``U_i``). The
replacements found are kept sorted by row in scratch files, which the last pass, the
one that writes the column, reads back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import mechanisms as _kernels
from dpfast.engines.outofcore._files import append_array
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.outofcore._legacy import DatasetRun, _Limits
from dpfast.methods.k_pram import search_intervals

#: Bytes of working memory per pool position of a window (its value, the positions and
#: values gathered for it, the replacements that fall in it, and slack).
_BYTES_PER_POSITION = 64


def _floats(array: pa.Array) -> np.ndarray:
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


@dataclass(frozen=True)
class Intervals:
    """A column's ``m`` equal-width intervals over ``[lo, hi]`` and their counts."""

    lo: float
    scale: float
    counts: np.ndarray

    @property
    def m(self) -> int:
        """The number of intervals."""
        return int(self.counts.shape[0])

    @property
    def starts(self) -> np.ndarray:
        """Each interval's first position in the pool."""
        starts = np.zeros(self.m, dtype=np.int64)
        np.cumsum(self.counts[:-1], out=starts[1:])
        return starts

    def of(self, values: np.ndarray) -> np.ndarray:
        """Return each value's interval, as :func:`dpfast._kernels.mechanisms.interval_index`."""
        index = ((values - self.lo) * self.scale).astype(np.int64)
        return np.minimum(index, self.m - 1)


def find_intervals(
    dataset: ColumnSource, name: str, k: int, lo: float, hi: float, limits: _Limits
) -> Intervals:
    """Return k-PRAM's intervals of a column: a histogram pass, and exact counts as needed."""
    width = hi - lo

    def bucket_starts(b: int) -> np.ndarray:
        scale = b / width

        def count(array: pa.Array, first_row: int) -> np.ndarray:
            return np.diff(_kernels.bucket_counts(_floats(array), lo, scale, b))

        total = np.zeros(b, dtype=np.int64)
        for part in dataset.map_column(name, limits.batch_rows, count):
            total += part
        starts = np.zeros(b + 1, dtype=np.int64)
        np.cumsum(total, out=starts[1:])
        return starts

    def interval_counts(m: int) -> np.ndarray:
        scale = m / width

        def count(array: pa.Array, first_row: int) -> np.ndarray:
            return _kernels.interval_counts(_floats(array), lo, scale, m)  # type: ignore[no-any-return]

        total = np.zeros(m, dtype=np.int64)
        for part in dataset.map_column(name, limits.batch_rows, count):
            total += part
        return total

    m, counts = search_intervals(dataset.n_rows, k, width == 0, bucket_starts, interval_counts)
    return Intervals(lo, m / width if width > 0 else 0.0, counts)


@dataclass(frozen=True)
class Replacements:
    """The replaced rows of a column and their new values, in files sorted by row."""

    files: tuple[tuple[Path, Path], ...]

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


def find_replacements(
    dataset: ColumnSource,
    name: str,
    intervals: Intervals,
    key: np.ndarray,
    keep: int,
    scratch: Path,
    limits: _Limits,
    run: DatasetRun,
) -> Replacements:
    """Find every replaced row's new value, window of pool positions by window."""
    n = dataset.n_rows
    size = max(1024, limits.memory // _BYTES_PER_POSITION)
    files = []
    windows = range(0, n, size)
    for w, first in enumerate(windows):
        run.tick(f"column {name}", w, len(windows))
        window = _Window(intervals, key, keep, first, min(n, first + size))
        rows, found = window.resolve(dataset, name, limits.batch_rows)
        paths = (scratch / f"pram-{w}-rows.bin", scratch / f"pram-{w}-values.bin")
        for path, values in zip(paths, (rows, found), strict=True):
            with open(path, "wb") as file:
                append_array(file, values)
        files.append(paths)
    return Replacements(tuple(files))


@dataclass(frozen=True)
class _Window:
    """Pool positions ``[first, last)``: the intervals ``g0 .. g1`` that hold them."""

    intervals: Intervals
    key: np.ndarray
    keep: int
    first: int
    last: int

    @property
    def span(self) -> tuple[int, int]:
        starts = self.intervals.starts
        g0 = int(np.searchsorted(starts, self.first, side="right")) - 1
        g1 = int(np.searchsorted(starts, self.last - 1, side="right")) - 1
        return g0, g1

    def resolve(
        self, dataset: ColumnSource, name: str, batch_rows: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Two passes: the rows replaced from this window, sorted, and their new values."""
        g0, g1 = self.span
        bases = self._bases(dataset, name, batch_rows, g0, g1)
        values = np.empty(self.last - self.first, dtype=np.float64)
        filled = 0
        rows_parts, targets_parts = [], []
        gather = self._gather(bases, g0, g1)
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
        self, dataset: ColumnSource, name: str, batch_rows: int, g0: int, g1: int
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per batch (by first row), the rows of each interval ``g0 .. g1`` before it."""

        def count(array: pa.Array, first_row: int) -> tuple[int, np.ndarray, np.ndarray]:
            groups = self.intervals.of(_floats(array))
            inside = groups[(groups >= g0) & (groups <= g1)]
            found, counts = np.unique(inside, return_counts=True)
            return first_row, found, counts

        running = np.zeros(g1 - g0 + 1, dtype=np.int64)
        bases = {}
        for first_row, found, counts in sorted(
            dataset.map_column(name, batch_rows, count), key=lambda part: part[0]
        ):
            bases[first_row] = (found, running[found - g0].copy())
            running[found - g0] += counts
        return bases

    def _gather(
        self, bases: dict[int, tuple[np.ndarray, np.ndarray]], g0: int, g1: int
    ) -> Callable[[pa.Array, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Return a batch's values at the window's positions and its rows replaced from it."""
        starts = self.intervals.starts
        counts = self.intervals.counts

        def gather(
            array: pa.Array, first_row: int
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            values = _floats(array)
            groups = self.intervals.of(values)
            rows = np.flatnonzero((groups >= g0) & (groups <= g1))
            order = rows[np.argsort(groups[rows], kind="stable")]  # by interval, then row
            ordered = groups[order]
            found, before = bases[first_row]
            first_of = np.searchsorted(ordered, found)
            within = np.arange(order.shape[0]) - np.repeat(
                first_of, np.diff(np.append(first_of, order.shape[0]))
            )
            base = np.repeat(before, np.diff(np.append(first_of, order.shape[0])))
            positions = starts[ordered] + base + within
            mine = (positions >= self.first) & (positions < self.last)
            draws = noise.retain_draws(self.key, self.keep, groups, counts, start=first_row)
            replaced = rows[draws[rows] >= 0]
            targets = starts[groups[replaced]] + draws[replaced]
            hit = (targets >= self.first) & (targets < self.last)
            return (
                positions[mine] - self.first,
                values[order[mine]],
                replaced[hit] + first_row,
                targets[hit] - self.first,
            )

        return gather
