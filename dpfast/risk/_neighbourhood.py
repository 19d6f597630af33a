"""The k-noise paper's neighbourhood counts (docs/risk.md#neighbourhood-counts)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._validation import check_int, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.risk._common import dpfast_errors, json_name, numeric_values, paired

_HINT = "neighbourhood counts need numbers; choose a numeric column"


@dataclass(frozen=True)
class NeighbourhoodCounts:
    """For each released value, the original records within ``±width`` of it.

    Attributes
    ----------
    column : hashable
        The measured column.
    width : float
        The half-width of each neighbourhood, in the column's units (inclusive).
    k : int or None
        The count a value should reach, as given (None: not given).
    counts : ndarray of int64, shape (n,)
        ``#{j : |x_j - y_i| <= width}`` for each released value ``y_i``.
    minimum : int
        The smallest of ``counts``.
    median : float
        The median of ``counts``.
    share_below_k : float or None
        Share of released values with fewer than ``k`` original records within ``±width``
        (None without ``k``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpfast import risk
    >>> got = risk.neighbourhood_counts(np.array([1.0, 2.0, 9.0]), np.array([1.2, 2.2, 9.5]),
    ...                                 0, width=1.0)
    >>> got.counts.tolist(), got.share_below_k
    ([2, 1, 1], None)
    >>> got.as_dict()["minimum"]
    1
    """

    column: Hashable
    width: float
    k: int | None
    counts: np.ndarray
    minimum: int
    median: float
    share_below_k: float | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-record counts)."""
        return {
            "column": json_name(self.column),
            "width": self.width,
            "k": self.k,
            "minimum": self.minimum,
            "median": self.median,
            "share_below_k": self.share_below_k,
        }


def _partition_point(
    n: int, size: int, past: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """Per query ``q``, the first index ``i`` in ``[0, n]`` with ``past(i, q)`` True.

    ``past`` must be False then True along ``i`` (a vectorised binary search).
    """
    low = np.zeros(size, dtype=np.int64)
    high = np.full(size, n, dtype=np.int64)
    queries = np.arange(size)
    while queries.size:
        middle = (low[queries] + high[queries]) // 2
        move = past(middle, queries)
        high[queries[move]] = middle[move]
        low[queries[~move]] = middle[~move] + 1
        queries = queries[low[queries] < high[queries]]
    return low


def count_within(x: np.ndarray, y: np.ndarray, width: float) -> np.ndarray:
    """``#{j : |x_j - y_i| <= width}`` for each ``y_i``, exactly as the float test reads.

    In sorted order the records that pass form one run (``x - y`` and ``y - x`` round
    monotonically), whose ends two binary searches find.
    """
    ordered = np.sort(x)

    def first_in(i: np.ndarray, q: np.ndarray) -> np.ndarray:
        v = ordered[i]
        result: np.ndarray = (v >= y[q]) | (y[q] - v <= width)
        return result

    def first_beyond(i: np.ndarray, q: np.ndarray) -> np.ndarray:
        v = ordered[i]
        result: np.ndarray = (v > y[q]) & (v - y[q] > width)
        return result

    n, size = ordered.shape[0], y.shape[0]
    counts: np.ndarray = _partition_point(n, size, first_beyond) - _partition_point(
        n, size, first_in
    )
    return counts


def check_width(width: Any) -> float:
    """Return ``width`` as a finite float >= 0."""
    if isinstance(width, (bool, np.bool_)) or not isinstance(width, numbers.Real):
        raise DPFastTypeError(f"width must be a number >= 0, got {quoted(width)}")
    value = float(width)
    if not (math.isfinite(value) and value >= 0):
        raise DPFastValueError(
            f"width must be a finite number >= 0 (in the column's units), got {quoted(width)}"
        )
    return value


def neighbourhood_counts(
    original: Any, released: Any, column: Hashable, *, width: float, k: int | None = None
) -> NeighbourhoodCounts:
    """Count, for each released value, the original records within ``±width`` of it.

    Biswal, Arbuckle and Kulik's measure for k-noise: a released value ``y_i`` hides its
    source among the original records it could have come from. The count includes the
    record's own source when it lies within ``width``. For a k-noise release, ``width =
    2δ`` (twice the private report's ``deltas``) is the range of their Theorem 1. See
    docs/risk.md#neighbourhood-counts.

    Parameters
    ----------
    original, released : table
        Row-aligned tables (or a :class:`dpfast.Release` that keeps the row order).
    column : hashable
        The numeric column to measure.
    width : float
        Half-width of the neighbourhood, in the column's units (>= 0); inclusive.
    k : int, optional
        The count a value should reach; gives :attr:`NeighbourhoodCounts.share_below_k`.

    Returns
    -------
    NeighbourhoodCounts

    Raises
    ------
    ValueError
        Tables of different lengths, a shuffled Release, an unknown column, NaN or infinite
        values, a negative ``width`` or ``k < 1`` (all also ``dpfast.exceptions.DPFastError``).
    TypeError
        A column that is not numeric.

    References
    ----------
    Biswal, Arbuckle and Kulik. Disclosure metrics born from statistical evaluations of
    data utility (k-noise, Theorem 1).

    Examples
    --------
    >>> import numpy as np
    >>> from dpfast import risk
    >>> x = np.array([1.0, 2.0, 3.0, 10.0])
    >>> y = np.array([1.5, 2.5, 3.5, 12.0])
    >>> got = risk.neighbourhood_counts(x, y, 0, width=1.0, k=2)
    >>> got.counts.tolist(), got.minimum, got.median, got.share_below_k
    ([2, 2, 1, 0], 0, 1.5, 0.5)
    """
    width = check_width(width)
    if k is not None:
        with dpfast_errors():
            k = check_int(k, "k", low=1)
    pair = paired(original, released, [column], "neighbourhood_counts")
    x = numeric_values(pair.original, column, "original", _HINT)
    y = numeric_values(pair.released, column, "released", _HINT)
    counts = count_within(x, y, width)
    share = None if k is None else float(np.mean(counts < k))
    return NeighbourhoodCounts(
        column, width, k, counts, int(counts.min()), float(np.median(counts)), share
    )
