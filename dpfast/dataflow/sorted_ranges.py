"""Ranges of a column sorted on a cluster's workers: the pieces the engines share.

A cluster source (:class:`~dpfast.engines.spark.SparkSource`,
:class:`~dpfast.engines.dask.DaskSource`) overrides ``sort_ranges`` and ``sort_tasks``
(:class:`~dpfast.dataflow.source.Source`): the workers map column ``name``'s values to
``uint64`` keys of ``key_bits`` bits; the keys inside range ``i`` (``ranges.lo[i] <= key <
ranges.hi[i]``) are brought to one task, sorted there and given to ``reduce(i,
sorted_keys)``, whose small result alone returns to the driver. ``ir_dp`` adds its rank
groups' sums so (:class:`GroupSums`): the driver receives ``n / k`` sums, not the ``n``
values (docs/engines.md, "Ranks on a cluster"). The ranges are cut from a public
histogram and every range's count is known before the sort, so a task's result does not
depend on which task sorts which range, on how the data is partitioned, or on retries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._kernels import outofcore, ranking
from dpfast.exceptions import DPFastRuntimeError, DPFastValueError
from dpfast.partitions.ranking import RankGroups

__all__ = [
    "WORKER_BUFFERS",
    "GroupSums",
    "KeyBuffers",
    "Ranges",
    "add_parts",
    "keys_by_range",
    "sorted_runs",
]


@dataclass(frozen=True)
class Ranges:
    """Disjoint key ranges ``[lo[i], hi[i])`` in increasing order (``uint64`` bounds).

    ``counts``, if given, is each range's number of keys (from the histogram that cut them):
    a sorting task reads their keys into one array of that size, not pieces joined. A size
    only: the driver still checks every range's count in the results (:func:`add_parts`).
    """

    lo: np.ndarray
    hi: np.ndarray
    counts: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.lo.shape != self.hi.shape or np.any(self.lo >= self.hi):
            raise DPFastValueError("every range needs lo < hi")
        if self.lo.shape[0] > 1 and np.any(self.lo[1:] < self.hi[:-1]):
            raise DPFastValueError("the ranges must be disjoint and in increasing order")
        if self.counts is not None and (
            self.counts.shape != self.lo.shape or np.any(self.counts < 0)
        ):
            raise DPFastValueError("counts must give every range a count of at least 0")

    def __len__(self) -> int:
        return int(self.lo.shape[0])

    def index(self, keys: np.ndarray) -> np.ndarray:
        """Return each key's range (``-1`` for a key in none), as ``int64``."""
        found = np.searchsorted(self.lo, keys, side="right").astype(np.int64) - 1
        inside = found >= 0
        inside[inside] = keys[inside] < self.hi[found[inside]]
        found[~inside] = -1
        return found


def keys_by_range(keys: np.ndarray, ranges: Ranges) -> list[np.ndarray]:
    """Return the keys inside each range, in their input order; keys in none are dropped.

    One kernel (:func:`dpfast._kernels.outofcore.group_by_ranges`): the ranges' pieces
    are consecutive slices of one array.
    """
    count = len(ranges)
    if count == 1 and keys.shape[0]:  # one range, often holding every key
        if keys.min() >= ranges.lo[0] and keys.max() < ranges.hi[0]:
            return [keys]
    grouped, starts = outofcore.group_by_ranges(keys, ranges.lo, ranges.hi)
    return [grouped[starts[i] : starts[i + 1]] for i in range(count)]


def sorted_runs(
    keys: np.ndarray, key_bits: int, ranges: Ranges, scratch: np.ndarray | None = None
) -> Iterator[tuple[int, np.ndarray]]:
    """Sort one task's keys and yield ``(range, its sorted keys)`` for each range present.

    The ranges are disjoint intervals of keys, so sorting the keys sorts them by range
    too. ``keys`` is used as scratch, and so is ``scratch`` (as many words) if given.
    """
    if keys.shape[0] == 0:
        return
    ordered = ranking.radix_sort_packed(keys, 0, max(1, key_bits), scratch)
    index = ranges.index(ordered[[0, -1]])
    first, last = int(index[0]), int(index[-1])
    bounds = np.searchsorted(ordered, ranges.lo[first : last + 1], side="left")
    bounds = np.append(bounds, ordered.shape[0])
    for i in range(first, last + 1):
        lo, hi = int(bounds[i - first]), int(bounds[i - first + 1])
        if hi > lo:
            yield i, ordered[lo:hi]


@dataclass(frozen=True)
class GroupSums:
    """The ``reduce`` of ``ir_dp``: a sorted range's part of its rank groups' sums.

    Range ``i`` holds ranks ``first_ranks[i] ..`` of the column; its result is ``(i, g0,
    sums, count, flagged)``: the sums of ``layout``'s groups ``g0, g0 + 1, ..`` over its keys
    (the grid values), exact integers, so the driver adds the parts in any order. With
    ``flagged``, a key is ``grid value << 1 | flag``
    (:func:`dpfast._kernels.ranking.quantise_flagged`): the flags are counted into
    ``flagged`` and dropped before the sums; without, ``flagged`` is 0.
    """

    first_ranks: np.ndarray
    layout: RankGroups
    flagged: bool = False

    def __call__(self, index: int, ordered: np.ndarray) -> tuple[int, int, np.ndarray, int, int]:
        """Return range ``index``'s part of the sums from its sorted keys ``ordered``."""
        first = int(self.first_ranks[index])
        count = int(ordered.shape[0])
        if count == 0:  # no keys (the data changed since the histogram: add_parts says so)
            return index, 0, np.zeros(0, dtype=np.int64), 0, 0
        flags = 0
        if self.flagged:  # ordered is the sort's own array: shifted in place
            flags = int(ranking.drop_flags(ordered))
        g0, g1 = self.layout.group(first), self.layout.group(first + count - 1)
        local = np.zeros(g1 - g0 + 1, dtype=np.int64)
        ranking.add_group_sums(ordered, 0, first, *self.layout.scalars, local, g0)
        return index, g0, local, count, flags


def add_parts(
    results: Any, sums: np.ndarray, expected: np.ndarray, changed: Callable[[], Exception]
) -> int:
    """Add :class:`GroupSums` results into ``sums``; check each range's count.

    A range whose count differs from the histogram's means the data changed between
    passes: ``changed()`` is raised. Returns the flags counted over every range.
    """
    seen = np.full(expected.shape[0], -1, dtype=np.int64)
    flagged = 0
    for index, g0, local, count, flags in results:
        if seen[index] >= 0:  # one task sorts a whole range, and one attempt is kept
            raise DPFastRuntimeError(f"range {index} of a column was sorted by two tasks")
        seen[index] = count
        flagged += flags
        sums[g0 : g0 + local.shape[0]] += local
    if not np.array_equal(np.maximum(seen, 0), expected):
        raise changed()
    return flagged


class KeyBuffers:
    """The ``uint64`` buffers a worker process keeps from one sort task to the next.

    A sort task needs two buffers as large as its keys (the keys, the radix sort's scratch).
    Fresh memory costs the kernel a page fault per 4 KiB page (or a compaction for a huge
    page): on the machine measured, as much CPU as the sort itself (docs/engines.md, "Memory
    pages"), so a worker sorting one column after another reuses its last sort's buffers. It
    keeps at most :attr:`most`, never more bytes than its largest sort held at once, until
    :meth:`clear`. An output task frees them too, or takes one for its part's values and
    frees the rest (``_write_part`` in :mod:`dpfast.engines.spark._write`), giving it back
    for its next part. Safe for threads: a buffer is held by one task at a time.
    """

    def __init__(self, most: int = 2) -> None:
        import threading

        self.most = int(most)
        self._kept: list[np.ndarray] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[KeyBuffers], tuple[int]]:
        """Pickle as an empty pool: the buffers belong to the process that took them."""
        return KeyBuffers, (self.most,)

    def take(self, n: int) -> np.ndarray:
        """Return ``uint64[n]`` (contents undefined): a kept buffer's start, else a new one.

        The smallest kept buffer of at least ``n`` words is taken; if none fits, every kept
        buffer is freed first, so that old and new are never held together.
        """
        with self._lock:
            fits = [b for b in self._kept if b.shape[0] >= n]
            if fits:
                chosen = min(fits, key=lambda b: b.shape[0])
                self._kept = [b for b in self._kept if b is not chosen]
                return chosen[:n]
            self._kept.clear()
        words: np.ndarray = outofcore.new_words(int(n))
        return words

    def give(self, *buffers: np.ndarray) -> None:
        """Keep buffers that :meth:`take` returned (the largest :attr:`most` of them)."""
        with self._lock:
            for buffer in buffers:
                # a view's base is the buffer taken (whose own base is the compiled
                # code's memory, not an array)
                whole = buffer.base if isinstance(buffer.base, np.ndarray) else buffer
                if whole.dtype == np.uint64 and whole.ndim == 1 and whole.shape[0]:
                    if not any(kept is whole for kept in self._kept):
                        self._kept.append(whole)
            self._kept.sort(key=lambda b: b.shape[0], reverse=True)
            del self._kept[self.most :]

    def clear(self) -> None:
        """Free every kept buffer."""
        with self._lock:
            self._kept.clear()

    @property
    def kept_bytes(self) -> int:
        """The bytes of the buffers kept."""
        with self._lock:
            return sum(b.nbytes for b in self._kept)


#: This process's kept buffers (a Spark worker's, between its sort or output tasks).
WORKER_BUFFERS = KeyBuffers()
