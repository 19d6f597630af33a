"""The rows sorted by their distance to each reference point, range by range (docs/engines.md).

The insensitive MDAV clusters of rows read in passes (:mod:`dpfast.steps.cluster_passes`)
take each cluster's rows from the order of its reference point. Every row's distance key to
each distinct point (:func:`dpfast._kernels.insensitive_mdav.reference_keys`, as an
order-preserving uint64 word) is written, range of rows by range, to one scratch file per
point; histograms of their top bits (refined while a bucket is too large) then cut each
point's keys into ranges that fit the memory limit, each collected, sorted by (key, values,
codes, row) as in memory, and appended to the point's order file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._kernels import mdav_stream
from dpfast.dataflow.cluster_files import Attributes
from dpfast.dataflow.flow import cut_ranges, refined_shift
from dpfast.dataflow.rank_files import within
from dpfast.dataflow.scratch_files import append_array, read_rows
from dpfast.partitions.insensitive_mdav import ReferenceGeometry

__all__ = ["distance_orders"]

Tick = Callable[[str, int, int], None]

#: Distance keys are uint64 words: the whole key space.
_KEY_SPACE = 1 << 64


def distance_orders(
    attributes: Attributes,
    geometry: ReferenceGeometry,
    directory: Path,
    capacity: int,
    tick: Tick,
) -> list[Path]:
    """Write every row's key to each point of ``geometry``, then each point's order of all rows.

    ``capacity``: the rows a sorted range may hold. Returns one order file (int64 rows) per point.
    """
    n, n_points = attributes.n, geometry.points.shape[0]
    keys = [directory / f"keys-{p}.bin" for p in range(n_points)]
    files = [open(path, "wb") for path in keys]
    try:
        widths = geometry.widths
        for first, count in attributes.chunks():
            values, codes = attributes.read(first, count)
            for p in range(n_points):
                distances = mdav_kernels.reference_keys(
                    values, geometry.points[p], widths, codes, geometry.terms[p]
                )
                append_array(files[p], mdav_stream.orderable_bits(distances))
            tick("distance keys", first + count, n)
    finally:
        for file in files:
            file.close()
    orders = []
    for p in range(n_points):
        order = directory / f"order-{p}.bin"
        with open(order, "wb") as out:
            _sort_point(_Components(attributes, keys[p]), out, capacity, _Ticks(tick, p, n))
        keys[p].unlink()
        orders.append(order)
    return orders


@dataclass(frozen=True)
class _Ticks:
    """The progress of point ``point``'s order: rows sorted of ``n``."""

    tick: Tick
    point: int
    n: int

    def __call__(self, done: int) -> None:
        self.tick(f"order {self.point + 1}", done, self.n)


@dataclass(frozen=True)
class _Components:
    """The sort's components as uint64 words in order: the key, the values, the codes."""

    attributes: Attributes
    keys: Path

    @property
    def count(self) -> int:
        return 1 + len(self.attributes.values) + len(self.attributes.codes)

    def words(self, level: int, first: int, count: int) -> np.ndarray:
        """Return component ``level`` of rows ``[first, first + count)`` as ordered words."""
        if level == 0:
            return read_rows(self.keys, np.uint64, first, count)
        values = self.attributes.values
        if level <= len(values):
            floats = read_rows(values[level - 1], np.float64, first, count)
            words: np.ndarray = mdav_stream.orderable_bits(floats)
            return words
        codes = read_rows(self.attributes.codes[level - 1 - len(values)], np.int64, first, count)
        return codes.view(np.uint64) ^ np.uint64(1 << 63)

    def select(
        self, prefix: Sequence[int], lo: int, hi: int, first: int, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return the chunk's rows of ``prefix``, next word in ``[lo, hi)``: positions, words."""
        level = len(prefix)
        bits = self.words(level, first, count)
        inside = within(bits, lo, hi)
        for j, word in enumerate(prefix):
            inside &= self.words(j, first, count) == np.uint64(word)
        where = np.flatnonzero(inside)
        return where, bits[where]


def _sort_point(
    components: _Components, order: Any, capacity: int, tick: Callable[[int], None]
) -> None:
    """Append the rows sorted by (key, values, codes, row) to the point's ``order`` file.

    Key ranges that fit are sorted in memory; a key held by more rows than fit is cut the same
    way by the next component (values, then codes); rows equal in every one go in row order.
    """
    attributes = components.attributes
    done = [0]

    def histogram(prefix: Sequence[int], lo: int, hi: int, shift: int) -> np.ndarray:
        counts = np.zeros(((hi - 1 - lo) >> shift) + 1, dtype=np.int64)
        for first, count in attributes.chunks():
            _, inside = components.select(prefix, lo, hi, first, count)
            buckets = ((inside - np.uint64(lo)) >> np.uint64(shift)).astype(np.int64)
            counts += np.bincount(buckets, minlength=counts.shape[0])
        return counts

    def sorted_rows(held: int) -> None:
        done[0] += held
        tick(done[0])

    def level(prefix: list[int]) -> Callable[[int, int, int], None]:
        def ranked(lo: int, hi: int, first_rank: int, held: int) -> None:
            process(lo, hi, held)

        def process(lo: int, hi: int, held: int) -> None:
            if held <= capacity:
                _sort_range(components, prefix, order, lo, hi)
                sorted_rows(held)
            elif hi - lo > 1:
                shift = refined_shift(lo, hi)
                cut_ranges(histogram(prefix, lo, hi, shift), lo, hi, shift, 0, capacity, ranked)
            elif len(prefix) + 1 < components.count:  # one word: cut by the next component
                level([*prefix, lo])(0, _KEY_SPACE, held)
            else:  # equal in every component: row order
                for first, count in attributes.chunks():
                    where, _ = components.select(prefix, lo, hi, first, count)
                    append_array(order, where + first)
                sorted_rows(held)

        return process

    level([])(0, _KEY_SPACE, attributes.n)


def _sort_range(
    components: _Components, prefix: Sequence[int], order: Any, lo: int, hi: int
) -> None:
    """Collect the rows of ``prefix`` whose next word lies in ``[lo, hi)``; sort; append them."""
    words_parts, row_parts = [], []
    for first, count in components.attributes.chunks():
        where, words = components.select(prefix, lo, hi, first, count)
        words_parts.append(words)
        row_parts.append(where + first)
    rows = np.concatenate(row_parts)  # ascending
    keys = (
        np.concatenate(words_parts) if not prefix else np.full(rows.shape[0], np.uint64(prefix[0]))
    )
    del words_parts, row_parts
    by_key = np.argsort(keys)  # distinct keys have one order; ties are sorted again below
    ordered = keys[by_key]
    if rows.shape[0] > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        # ties: values, then codes, lexicographically, then the row (lexsort is stable)
        del ordered, by_key
        values, codes = components.attributes.gather(rows)
        lexicographic = [codes[:, j] for j in range(codes.shape[1] - 1, -1, -1)]
        lexicographic += [values[:, j] for j in range(values.shape[1] - 1, -1, -1)]
        by_key = np.lexsort([*lexicographic, keys])
    append_array(order, rows[by_key])
