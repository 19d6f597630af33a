"""The public grid of candidate bounds a DP quantile chooses from.

docs/privacy.md#the-candidate-grid says why this grid.

The grid depends on the outer range and the column's declared type only, never on the
data. It is geometric in the distance from an anchor (the outer lower bound when the range
is non-negative, the outer upper bound when it is non-positive, else 0): the offsets are
the numbers ``m * 2**e`` with ``m`` in ``[32, 64)``, 32 to an octave (consecutive ones
differ by at most 1/32 of their size), over the :data:`OCTAVES` octaves below the distance
from the anchor to each side's outer bound. A skewed column (incomes, revenues) whose
values sit far below a generous outer upper bound thus finds candidates within about 3 %
of any of its quantiles, where an equal-width grid of the same size would leave its bulk
between two candidates. Offsets are exact binary fractions and the sums with the anchor
are IEEE additions, so the grid is the same on every machine.
"""

from __future__ import annotations

import math

import numpy as np

from dpfast.exceptions import DPFastValueError

__all__ = [
    "OCTAVES",
    "PER_OCTAVE",
    "bound_candidates",
    "candidate_edges",
    "candidate_ranks",
    "count_between",
]

#: Candidates per octave of the distance from the anchor (``m`` in ``[PER_OCTAVE, 2 *
#: PER_OCTAVE)``).
PER_OCTAVE = 32
#: Octaves of the distance from the anchor: from the distance to a side's outer bound down
#: to ``2**-OCTAVES`` of it, below which only the anchor itself is a candidate.
OCTAVES = 32


def _offsets(span: float) -> np.ndarray:
    """Return the offsets ``m * 2**e`` in ``(0, span]``: :data:`OCTAVES` octaves, ascending."""
    _, top = math.frexp(span)  # span < 2**top
    mantissas = np.arange(PER_OCTAVE, 2 * PER_OCTAVE, dtype=np.float64)
    shift = int(math.log2(PER_OCTAVE))
    octaves = [
        np.ldexp(mantissas, e - shift) for e in range(top - OCTAVES, top)
    ]  # octave e holds [2**e, 2**(e + 1))
    offsets = np.concatenate(octaves)
    return offsets[(offsets > 0) & (offsets <= span)]


def bound_candidates(lower: float, upper: float, *, integer: bool = False) -> np.ndarray:
    """Return the sorted public candidates for a bound within ``[lower, upper]``.

    Parameters
    ----------
    lower, upper : float
        The public outer range, finite, ``lower < upper``.
    integer : bool
        The column is declared integer: every candidate but the two outer bounds is
        rounded to a whole number (duplicates dropped), so that a chosen bound is one of
        its values.

    Returns
    -------
    numpy.ndarray
        ``float64``, strictly increasing, from ``lower`` to ``upper`` (both included):
        the anchor and the anchor plus or minus each offset that lies in the range.

    Examples
    --------
    >>> grid = bound_candidates(0.0, 1e6)
    >>> float(grid[0]), float(grid[-1]), len(grid)
    (0.0, 1000000.0, 1024)
    >>> bool(np.all(grid[2:] / grid[1:-1] <= 1 + 1 / 32))
    True
    >>> bound_candidates(-2.0, 3.0, integer=True).tolist()
    [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]
    """
    lower, upper = float(lower), float(upper)
    if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
        raise DPFastValueError(
            f"the outer range must be finite with lower < upper, got ({lower}, {upper})"
        )
    if lower >= 0:
        points = lower + _offsets(upper - lower)
    elif upper <= 0:
        points = upper - _offsets(upper - lower)
    else:
        points = np.concatenate((-_offsets(-lower), [0.0], _offsets(upper)))
    if integer:
        points = np.round(points) + 0.0  # + 0.0: -0.0 becomes 0.0
    points = points[(points > lower) & (points < upper)]
    return np.unique(np.concatenate(([lower], points, [upper])))


#: Values placed at once by :func:`count_between` (bounds its scratch to 8 MiB).
_CHUNK = 1 << 20


def count_between(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Return how many values lie in each interval between consecutive ``edges``.

    ``counts[i]`` holds the values ``v`` with ``edges[i - 1] <= v < edges[i]`` (``counts[0]``
    those below ``edges[0]``, ``counts[m]`` those at or above ``edges[m - 1]``): exact
    float64 comparisons, so the counts of a column cut in batches add up to the whole
    column's. O(n log m).

    Parameters
    ----------
    values : numpy.ndarray
        ``float64`` values; never written.
    edges : numpy.ndarray
        ``float64``, strictly increasing, shape ``(m,)``.

    Returns
    -------
    numpy.ndarray
        ``int64[m + 1]``.

    Examples
    --------
    >>> count_between(np.array([0.5, 1.0, 1.5, 7.0]), np.array([1.0, 2.0])).tolist()
    [1, 2, 1]
    """
    m = edges.shape[0]
    counts = np.zeros(m + 1, dtype=np.int64)
    for first in range(0, values.shape[0], _CHUNK):
        places = np.searchsorted(edges, values[first : first + _CHUNK], side="right")
        counts += np.bincount(places, minlength=m + 1)
    return counts


def candidate_edges(candidates: np.ndarray) -> np.ndarray:
    """Return the edges whose :func:`count_between` counts give :func:`candidate_ranks`.

    Each candidate and the next float above it, sorted, without repeats.

    Examples
    --------
    >>> candidate_edges(np.array([0.0, 1.0])).tolist() == [0.0, 5e-324, 1.0, 1.0000000000000002]
    True
    """
    return np.unique(np.concatenate((candidates, np.nextafter(candidates, np.inf))))


def candidate_ranks(
    counts: np.ndarray, candidates: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return how many values of the column, clamped to the range, are under each candidate.

    The counts under the candidates, then those under or on them. ``counts`` come from
    :func:`count_between` with :func:`candidate_edges` ``(candidates)`` as edges: ``x <
    c`` for a float ``c`` is ``x`` under that edge, and ``x <= c`` is ``x`` under the next
    float. Clamping puts the values below the first candidate (the outer lower bound) on
    it, so none is under it, and those above the last (the outer upper bound) on it, so
    all ``n`` are at most it.

    Examples
    --------
    >>> candidates = np.array([0.0, 1.0, 2.0])
    >>> counts = count_between(np.array([-1.0, 1.0, 1.0, 5.0]), candidate_edges(candidates))
    >>> [a.tolist() for a in candidate_ranks(counts, candidates, 4)]
    [[0, 1, 3], [1, 3, 4]]
    """
    edges = candidate_edges(candidates)
    under = np.cumsum(counts)  # under[i]: the values below edges[i]
    below = under[np.searchsorted(edges, candidates)]
    at_most = under[np.searchsorted(edges, np.nextafter(candidates, np.inf))]
    below[0] = 0
    at_most[-1] = n
    return below, at_most
