"""Rank a column's rows by (key, row) out of core: rows written to a file in rank order.

Each row has a ``uint64`` key (a grid value, or an order-preserving image of a float); ties
go to the lower row, as in a stable sort in memory. Histograms of the keys' top bits (16 at
a time, refined where a bucket holds too many rows) cut the key space into ranges that fit
the memory limit, handed on in increasing rank order: a range's pairs are collected in one
pass, sorted, given to ``on_sorted`` and written to the file (``int64`` rows). A long tie
(one key, too many rows) goes to ``on_run`` and is written by row: one pass counts it per
batch, the next writes each batch's rows after those of the batches before it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpfast._kernels import ranking
from dpfast.dataflow.flow import column_total, cut_ranges, refined_shift
from dpfast.dataflow.scratch_files import write_at
from dpfast.dataflow.source import Source

__all__ = [
    "BYTES_PER_RANKED_ROW",
    "FittedRanges",
    "Keys",
    "RankPasses",
    "float_keys",
    "float_values",
    "within",
]

#: Bytes of working memory per (key, row) pair collected for sorting: the pairs, the
#: sort's scratch and order, the rows written out, and slack.
BYTES_PER_RANKED_ROW = 40

Keys = Callable[[pa.Array, int], tuple[np.ndarray, int]]


@dataclass
class RankPasses:
    """The passes that rank one column's rows, within ``memory`` bytes.

    ``keys(batch, first_row)`` returns the batch's ``uint64`` keys and a count to add up
    (e.g. the values clamped); ``tick(n)`` is called before the ``n``-th pass, from 1.
    """

    dataset: Source
    name: str
    keys: Keys
    batch_rows: int
    memory: int
    tick: Callable[[int], None] = lambda passes: None
    counted: int = field(default=0, init=False)
    passes: int = field(default=0, init=False)

    def _tick(self) -> None:
        self.passes += 1
        self.tick(self.passes)

    @property
    def capacity(self) -> int:
        """Pairs sorted at once."""
        return max(1024, self.memory // BYTES_PER_RANKED_ROW)

    def rank(
        self,
        top: int,
        path: Path,
        on_sorted: Callable[[np.ndarray, int], None],
        on_run: Callable[[int, int, int], None],
    ) -> int:
        """Rank every row, keys in ``[0, top)``, writing rows to the file ``path`` in rank order.

        ``on_sorted(keys, first_rank)`` gets every range's sorted keys, ``on_run(key,
        count, first_rank)`` every long tie. Returns the total of the keys' counts.
        """
        n = self.dataset.n_rows
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self._on_sorted, self._on_run = on_sorted, on_run
            self._index_bits = max(1, (n - 1).bit_length())
            if n <= self.capacity:
                self._sorted(0, top, 0, count=True)
            else:
                shift = refined_shift(0, top)
                counts = self._histogram(0, top, shift, count=True)
                capacity = self.capacity
                ranges = FittedRanges(self._histogram, capacity, capacity, self._range, self._run)
                cut_ranges(counts, 0, top, shift, 0, capacity, ranges)
        finally:
            os.close(self._fd)
        return self.counted

    def _batches(self, select: Callable[[np.ndarray, int], Any], count: bool) -> Iterator[Any]:
        self._tick()
        batch = _Selected(self.keys, select)  # not self: it may be shipped to Spark's executors
        for result, counted in self.dataset.map_column(self.name, self.batch_rows, batch):
            if count:
                self.counted += counted
            yield result

    def _sorted(self, lo: int, hi: int, first_rank: int, count: bool = False) -> None:
        """Collect, sort and hand on the pairs of keys in ``[lo, hi)``."""

        def select(keys: np.ndarray, first_row: int) -> tuple[np.ndarray, np.ndarray]:
            inside = np.flatnonzero(within(keys, lo, hi))
            return keys[inside], inside + first_row

        parts = list(self._batches(select, count))
        keys = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.uint64)
        rows = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
        del parts
        span_bits = max(1, (hi - 1 - lo).bit_length())
        if span_bits + self._index_bits <= 64:  # one packed word: a radix sort
            packed = ((keys - np.uint64(lo)) << np.uint64(self._index_bits)) | rows.astype(
                np.uint64
            )
            del keys, rows
            packed = ranking.radix_sort_packed(packed, 0, span_bits + self._index_bits)
            rows = (packed & np.uint64((1 << self._index_bits) - 1)).astype(np.int64)
            keys = (packed >> np.uint64(self._index_bits)) + np.uint64(lo)
            del packed
        else:
            order = np.lexsort((rows, keys))
            keys, rows = keys[order], rows[order]
            del order
        self._on_sorted(keys, first_rank)
        write_at(self._fd, rows, first_rank * 8)

    def _range(self, lo: int, hi: int, first_rank: int, count: int) -> None:
        """Collect, sort and hand on a range of ``count`` pairs that fits."""
        self._sorted(lo, hi, first_rank)

    def _run(self, key: int, first_rank: int, count: int) -> None:
        """Rank a tie of ``key``: sorted if it fits, else a long tie by row, in two passes."""
        if count <= self.capacity:
            self._sorted(key, key + 1, first_rank)
            return
        self._on_run(key, count, first_rank)
        equal = np.uint64(key)
        sizes = sorted(self._batches(lambda k, f: (f, int(np.count_nonzero(k == equal))), False))
        offsets, rank = {}, first_rank
        for first_row, size in sizes:
            offsets[first_row] = rank
            rank += size
        for first_row, rows in self._batches(
            lambda k, f: (f, np.flatnonzero(k == equal) + f), False
        ):
            write_at(self._fd, rows.astype(np.int64), offsets[first_row] * 8)

    def _histogram(self, lo: int, hi: int, shift: int, count: bool = False) -> np.ndarray:
        size = ((hi - 1 - lo) >> shift) + 1

        def select(keys: np.ndarray, _first: int) -> np.ndarray:
            inside = keys[within(keys, lo, hi)]
            buckets = ((inside - np.uint64(lo)) >> np.uint64(shift)).astype(np.int64)
            return np.bincount(buckets, minlength=size)

        self._tick()
        start = (np.zeros(size, dtype=np.int64), 0)
        batch = _Selected(self.keys, select)
        counts, counted = column_total(self.dataset, self.name, self.batch_rows, batch, start)
        if count:
            self.counted += int(counted)
        return counts


@dataclass(frozen=True)
class FittedRanges:
    """Hand on a range of keys in ranges that fit, cut by histograms where it does not.

    Called with ``(lo, hi, first_rank, count)``, the ``count`` keys in ``[lo, hi)`` from rank
    ``first_rank`` (as :func:`~dpfast.dataflow.flow.cut_ranges` calls it): one key goes to
    ``tie(key, first_rank, count)``, at most ``fits`` keys to ``whole(lo, hi, first_rank,
    count)``; more are counted by ``histogram(lo, hi, shift)`` per bucket of ``2**shift``
    keys and cut into runs of buckets of at most ``cut`` keys, each handed on so, in order.
    """

    histogram: Callable[[int, int, int], np.ndarray]
    fits: int
    cut: int
    whole: Callable[[int, int, int, int], None]
    tie: Callable[[int, int, int], None]

    def __call__(self, lo: int, hi: int, first_rank: int, count: int) -> None:
        """Hand on the ``count`` keys in ``[lo, hi)``, from rank ``first_rank``."""
        if count == 0:
            return
        if hi - lo == 1:
            self.tie(lo, first_rank, count)
        elif count <= self.fits:
            self.whole(lo, hi, first_rank, count)
        else:
            shift = refined_shift(lo, hi)
            cut_ranges(self.histogram(lo, hi, shift), lo, hi, shift, first_rank, self.cut, self)


@dataclass(frozen=True)
class _Selected:
    """``(select(keys, first_row), count)`` of a batch's keys and count."""

    keys: Keys
    select: Callable[[np.ndarray, int], Any]

    def __call__(self, array: pa.Array, first_row: int) -> tuple[Any, int]:
        keys, counted = self.keys(array, first_row)
        return self.select(keys, first_row), counted


def within(keys: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Return a mask of the ``uint64`` keys in ``[lo, hi)`` (``hi`` may be ``2**64``)."""
    inside = keys >= np.uint64(lo)
    if hi < 2**64:
        inside &= keys < np.uint64(hi)
    return inside


def float_keys(values: np.ndarray) -> np.ndarray:
    """Map finite float64 values to ``uint64`` keys in the same order (``-0.0`` as ``0.0``)."""
    bits = (values + 0.0).view(np.uint64)  # -0.0 + 0.0 is 0.0: they tie, as in a sort
    negative = (bits >> np.uint64(63)).astype(bool)
    return np.where(negative, ~bits, bits | np.uint64(1 << 63))


def float_values(keys: np.ndarray) -> np.ndarray:
    """Invert :func:`float_keys`."""
    positive = (keys >> np.uint64(63)).astype(bool)
    bits = np.where(positive, keys & np.uint64((1 << 63) - 1), ~keys)
    return bits.view(np.float64)
