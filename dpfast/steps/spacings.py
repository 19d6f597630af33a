"""Order statistics of a column: the extremes of its ``k``-spacings (docs/engines.md).

A column that fits in memory goes to the bucketed kernel
(:func:`dpfast._kernels.mechanisms.knoise_extremes`), which never sorts it whole. Else each
value maps to a ``uint64`` key in the values' order (:func:`order_keys`: the sign bit flipped
if positive, every bit if negative), and a histogram of the top 16 bits of ``key - key(min)``
cuts the keys into ranges that fit, each collected in one pass and sorted (a bucket holding
too many values is refined by a histogram of its next 16 bits; a range of a single value is
not collected at all). The sorted ranges stream in increasing order through
:class:`RankSweep`, which carries the last ``k`` values from one range to the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from dpfast._kernels import mechanisms as mechanism_kernels
from dpfast._validation import kernel_floats
from dpfast.dataflow.flow import Dataflow, column_total, numeric_values
from dpfast.dataflow.rank_files import FittedRanges
from dpfast.dataflow.values import NumericColumn, OrderStatistics
from dpfast.exceptions import DPFastValueError

__all__ = ["RankSweep", "key_value", "order_keys", "order_statistics"]

#: Bytes of working memory per value of a sorted range (the values, the sort, the
#: differences and their errors, and slack).
_BYTES_PER_SWEPT_VALUE = 64
_SIGN = np.uint64(1 << 63)


def order_keys(values: np.ndarray) -> np.ndarray:
    """Return ``uint64`` keys in the order of the float64 ``values`` (``-0.0`` before ``0.0``)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    negative = (bits & _SIGN) != 0
    return np.where(negative, ~bits, bits | _SIGN)


def key_value(key: int) -> float:
    """Return the float64 of an :func:`order_keys` key."""
    word = np.array([key], dtype=np.uint64)
    bits = np.where((word & _SIGN) != 0, word & ~_SIGN, ~word)
    return float(bits.view(np.float64)[0])


@dataclass
class RankSweep:
    """The order statistics of :func:`order_statistics`, from the sorted values fed piece by piece.

    Keeps ``X_(k)``, ``X_(n-k+1)`` and the pair ``(X_(i), X_(i+k))`` of largest difference,
    compared exactly as :func:`dpfast._kernels.mechanisms.knoise_extremes` compares them.
    """

    n: int
    k: int
    tail: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.float64))
    rank: int = 0
    best: tuple[float, float, float, float] | None = None
    x_k: float = 0.0
    x_nk: float = 0.0

    def feed(self, piece: np.ndarray) -> None:
        """Add the next sorted values (ranks ``rank`` to ``rank + len(piece) - 1``)."""
        k = self.k
        joined = np.concatenate([self.tail, piece])
        offset = self.rank - self.tail.shape[0]
        if offset <= k - 1 < offset + joined.shape[0]:
            self.x_k = float(joined[k - 1 - offset])
        if offset <= self.n - k < offset + joined.shape[0]:
            self.x_nk = float(joined[self.n - k - offset])
        if joined.shape[0] > k:
            upper, lower = joined[k:], joined[:-k]
            d = upper - lower
            bb = d - upper
            e = (upper - (d - bb)) + (-lower - bb)
            top = d.max()
            candidates = np.flatnonzero(d == top)
            j = int(candidates[np.argmax(e[candidates])])
            found = (float(top), float(e[j]), float(lower[j]), float(upper[j]))
            if self.best is None or found[:2] > self.best[:2]:
                self.best = found
        self.rank += piece.shape[0]
        self.tail = joined[-k:].copy()

    def extremes(self, lo: float, hi: float) -> OrderStatistics:
        """Return what :func:`dpfast._kernels.mechanisms.knoise_extremes` returns."""
        if self.best is None:
            return lo, self.x_k, self.x_nk, hi, lo, lo, False
        return lo, self.x_k, self.x_nk, hi, self.best[2], self.best[3], True


def order_statistics(
    flow: Dataflow, column: NumericColumn, k: int, value_range: tuple[float, float]
) -> OrderStatistics:
    """Return the order statistics that bound the spacings of every ``k`` ranks of a column.

    ``(X_(1), X_(k), X_(n-k+1), X_(n), X_(i), X_(i+k), inner)``, 1-based ranks of the
    column sorted: ``(X_(i), X_(i+k))`` is the pair of largest ``X_(i+k) - X_(i)`` over
    ``i = 1 .. n - k``, compared exactly (the rounded difference, then its TwoSum error;
    ties go to the lowest ``i``), and ``inner`` is false when ``n == k`` (the pair is then
    ``(X_(1), X_(1))``). ``value_range`` is the column's ``(min, max)``
    (``Engine.value_range``), with ``min < max``; ``1 <= k <= n``.

    Those of :func:`dpfast._kernels.mechanisms.knoise_extremes`, found by that kernel when
    the column fits in memory (held, or collected in one pass), else by sorted ranges of
    keys swept in order (module docstring); the column's tick is called before each pass.
    """
    lo, hi = value_range
    if flow.holds:
        return _extremes(column.values, k)
    dataset, limits, tick = flow.source, flow.limits, flow.passes(column.name)
    n = dataset.n_rows
    name = str(column.name)
    capacity = max(1024, limits.memory // _BYTES_PER_SWEPT_VALUE)
    passes = [0]

    def step() -> None:
        passes[0] += 1
        tick(passes[0])

    if n <= capacity:
        step()
        parts = list(dataset.map_column(name, limits.batch_rows, _Values(column)))
        values = np.concatenate(parts)
        parts.clear()
        return _extremes(values, k)
    if 2 * k > capacity:
        raise DPFastValueError(
            f"the order statistics out of core carry the {k:,} largest values seen from one "
            f"sorted range to the next, which needs about {2 * k * _BYTES_PER_SWEPT_VALUE:,} "
            "bytes, more than the memory limit; raise the memory limit or lower k"
        )
    base = int(order_keys(np.array([lo]))[0])
    span = int(order_keys(np.array([hi]))[0]) - base
    sweep = RankSweep(n, k)
    room = capacity - k

    def collect(range_lo: int, range_hi: int) -> np.ndarray:
        step()
        select = _InKeys(column, base, range_lo, range_hi)
        parts = list(dataset.map_column(name, limits.batch_rows, select))
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.float64)

    def histogram(range_lo: int, range_hi: int, shift: int) -> np.ndarray:
        step()
        start = np.zeros(((range_hi - 1 - range_lo) >> shift) + 1, dtype=np.int64)
        keys = _InKeys(column, base, range_lo, range_hi)
        select = _KeyBuckets(keys, shift, start.shape[0])
        counts: np.ndarray = column_total(dataset, name, limits.batch_rows, select, start)
        return counts

    def whole(range_lo: int, range_hi: int, first_rank: int, count: int) -> None:
        sweep.feed(np.sort(collect(range_lo, range_hi)))

    def tie(key: int, first_rank: int, count: int) -> None:  # no pass needed
        value = key_value(base + key)
        for size in _pieces(count, room):
            sweep.feed(np.full(size, value))

    FittedRanges(histogram, room, room, whole, tie)(0, span + 1, 0, n)
    assert sweep.rank == n
    return sweep.extremes(lo, hi)


def _extremes(values: np.ndarray, k: int) -> OrderStatistics:
    """Return the order statistics of values held in memory, by the bucketed kernel."""
    n = values.shape[0]
    n_buckets = max(1, min(n, max(1024, n // 16)))
    found = mechanism_kernels.knoise_extremes(kernel_floats(values), k, n_buckets)
    return (*(float(v) for v in found[:6]), bool(found[6]))  # type: ignore[return-value]


def _pieces(count: int, size: int) -> Iterator[int]:
    while count > 0:
        yield min(count, size)
        count -= size


@dataclass(frozen=True)
class _Values:
    """A batch of a numeric column as float64."""

    column: NumericColumn

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        return numeric_values(array, self.column, first_row)


@dataclass(frozen=True)
class _InKeys:
    """Select the values whose key minus ``base`` is in ``[lo, hi)``."""

    column: NumericColumn
    base: int
    lo: int
    hi: int

    def inside(self, array: pa.Array, first_row: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the batch's values in the range, and their keys minus ``base``."""
        values = numeric_values(array, self.column, first_row)
        relative = order_keys(values) - np.uint64(self.base)
        selected = (relative >= np.uint64(self.lo)) & (relative < np.uint64(self.hi))
        return values[selected], relative[selected]

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        return self.inside(array, first_row)[0]


@dataclass(frozen=True)
class _KeyBuckets:
    """Count the values of a key range (:class:`_InKeys`) per ``2**shift`` keys."""

    keys: _InKeys
    shift: int
    size: int

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        _, relative = self.keys.inside(array, first_row)
        buckets = ((relative - np.uint64(self.keys.lo)) >> np.uint64(self.shift)).astype(np.int64)
        return np.bincount(buckets, minlength=self.size)
