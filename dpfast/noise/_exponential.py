"""The exact exponential mechanism: a dyadic base, integer qualities, certified draws.

``Pr[c] = mult_c · b**(q_max - q_c) / Σ_j mult_j · b**(q_max - q_j)`` for integer qualities
``q`` (in *units*), positive multipliers and a base ``b = x / 2**y`` with
``b >= exp(-ε / (2 Δ))``, ``Δ`` the sensitivity in units (the base-2 exponential
mechanism of Ilvento 2020, with any dyadic base). It is ``ε'``-DP with
``ε' = 2 Δ ln(1/b) <= ε``, and the draws have exactly these probabilities
(docs/design.md#em-sampler): each draw is decided from the first word of its ChaCha20
stream with certified float bounds (:mod:`dpfast._kernels.exponential`), and the rare
undecided draws are finished in exact integer arithmetic on further words of the same
stream (:func:`dpfast.noise._em_exact._exact_choice`), so a draw depends only on ``(key, nonce)``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpfast._kernels import exponential as _em
from dpfast._kernels.groups import group_start
from dpfast._validation import check_int, check_positive
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.noise._common import _check_key, _check_range
from dpfast.noise._em_exact import (
    ExponentialBase,
    _exact_row,
    exponential_base,
    fast_path_slack,
)

EM_SAMPLER_NAME = (
    "exact exponential mechanism: integer qualities, dyadic base b = x/2**y, inverse CDF "
    "on a uniform read from a ChaCha20 keyed stream, decided by certified float bounds on "
    "the first 64-bit word or else in exact integer arithmetic on further words "
    "(docs/design.md#em-sampler)"
)
#: Float scores are rounded to multiples of ``2**-SCORE_BITS`` by :func:`quality_units`.
SCORE_BITS = 12
_MAX_QUALITY = 2**62


def quality_units(
    scores: Any, *, sensitivity: float, bits: int = SCORE_BITS
) -> tuple[np.ndarray, int]:
    """Round data-dependent float scores to integer units of ``2**-bits``; return ``Δ`` in units.

    ``round(s · 2**bits)`` moves each score by at most half a unit, so two neighbouring
    tables' rounded scores differ by less than ``Δ · 2**bits + 1 + η`` units, where ``η``
    is the float error of computing the scores (in units); being integers, they differ by
    at most ``ceil(Δ · 2**bits) + 1`` as long as ``η < 1``, i.e. the scores are computed to
    much better than ``2**-bits`` (docs/design.md#em-sampler).

    Examples
    --------
    >>> quality_units([0.5, 0.25000001], sensitivity=1.0, bits=4)
    (array([8, 4]), 17)
    """
    delta = check_positive(sensitivity, "sensitivity")
    bits = check_int(bits, "bits", low=0, high=60)
    array = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(array).all():
        raise DPFastValueError("scores must be finite")
    scaled = np.ldexp(array, bits)
    if array.size and not float(np.abs(scaled).max()) < _MAX_QUALITY:
        raise DPFastValueError(f"scores * 2**{bits} must lie in (-2**62, 2**62); use fewer bits")
    return np.rint(scaled).astype(np.int64), math.ceil(math.ldexp(delta, bits)) + 1


def _check_quality(quality: object) -> np.ndarray:
    array = np.asarray(quality)
    if array.ndim != 2 or array.shape[1] == 0:
        raise DPFastValueError(
            "quality must be a 2-D array (draws x candidates) with at least one candidate, "
            f"got shape {array.shape}"
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise DPFastTypeError(
            f"quality must hold integer units, got dtype {array.dtype}; round float scores "
            "with quality_units (or a public table with its own rounding) first"
        )
    if array.size and int(np.abs(array).max()) >= _MAX_QUALITY:
        raise DPFastValueError("qualities must lie in (-2**62, 2**62)")
    return np.ascontiguousarray(array, dtype=np.int64)


def _check_multipliers(
    multipliers: object, shape: tuple[int, int]
) -> tuple[np.ndarray, list[list[Fraction]]]:
    # Returns float64 multipliers scaled by a power of two so that the largest is in
    # [2**61, 2**62) (the kernels' tiny-weight bound needs it), and the exact values as
    # Fractions (rows, or one shared row), for the exact path.
    if multipliers is None:
        return np.ones((1, shape[1])), [[Fraction(1)] * shape[1]]
    array = np.asarray(multipliers)
    if array.ndim == 1:
        array = array[None, :]
    if array.shape not in ((1, shape[1]), shape):
        raise DPFastValueError(f"multipliers must have shape (m,) or {shape}, got {array.shape}")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise DPFastTypeError(f"multipliers must be numbers, got dtype {array.dtype}")
    floats = array.astype(np.float64)
    if not (np.isfinite(floats).all() and (array > 0).all()):
        raise DPFastValueError("multipliers must be finite and > 0")
    if float(floats.max()) > 2.0**500 * float(floats.min()):
        raise DPFastValueError("multipliers must lie within a factor 2**500 of each other")
    exact = [
        [Fraction(int(v) if isinstance(v, (int, np.integer)) else v) for v in row]
        for row in array.tolist()
    ]
    shift = 62 - math.frexp(float(floats.max()))[1]
    return np.ascontiguousarray(np.ldexp(floats, shift)), exact


def _draw_rows(
    key: np.ndarray,
    quality: np.ndarray,
    multipliers: tuple[np.ndarray, list[list[Fraction]]],
    base: ExponentialBase,
    start: int,
    slack: float,
) -> np.ndarray:
    # The fast kernel, then the exact path for its undecided rows. ``slack`` is a test
    # hook: any value >= fast_path_slack(m) gives the same draws (only more exact paths).
    floats, exact = multipliers
    out = np.empty(quality.shape[0], dtype=np.int64)
    if out.shape[0]:
        _em.em_rows(key, quality, floats, base.table(), slack, np.uint64(start), out)
    for g in np.flatnonzero(out == _em.UNDECIDED).tolist():
        row = exact[0] if len(exact) == 1 else exact[g]
        out[g] = _exact_row(key, start + g, quality[g].tolist(), row, base)
    return out


def exponential_mechanism(
    key: np.ndarray,
    quality: np.ndarray,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction,
    multipliers: np.ndarray | None = None,
    start: int = 0,
) -> np.ndarray:
    """Exact exponential mechanism: one draw per row of integer qualities.

    Row ``g`` picks column ``c`` with probability exactly
    ``mult_c b**(-q[g, c]) / Σ_j mult_j b**(-q[g, j])`` where ``b`` is the base of
    :func:`exponential_base` for ``epsilon`` and ``sensitivity`` (McSherry and Talwar 2007
    with ``exp(-ε / (2 Δ))`` replaced by the dyadic ``b`` just above it, Ilvento 2020); the
    mechanism is ``ε'``-DP, ``ε' = 2 Δ ln(1/b) <= ε``. Draw ``g`` reads only the stream
    ``(key, nonce = start + g)`` (docs/design.md#em-sampler), so chunked calls with matching
    ``start`` give the same draws.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    quality : array-like of int, shape (n, m)
        Qualities in integer units, ``|q| < 2**62`` (round float scores with
        :func:`quality_units`).
    epsilon : float or fractions.Fraction
        Budget of each draw's mechanism.
    sensitivity : float or fractions.Fraction
        ``Δ`` in quality units: the most one record can change a quality.
    multipliers : array-like of int or float, shape (m,) or (n, m), optional
        Positive weights multiplying each candidate's (e.g. interval sizes), read exactly,
        within a factor ``2**500`` of each other.
    start : int, optional
        Nonce of the first draw.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(n,)``: the chosen column of each row.

    Raises
    ------
    TypeError, ValueError
        On a malformed key, float qualities, qualities out of range, bad multipliers, or
        ``epsilon`` or ``sensitivity`` not ``> 0``.

    References
    ----------
    F. McSherry and K. Talwar, "Mechanism Design via Differential Privacy", FOCS 2007.
    C. Ilvento, "Implementing the Exponential Mechanism with Base-2 Differential
    Privacy", CCS 2020.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> exponential_mechanism(key, [[0, -1, -5]] * 6, epsilon=2.0, sensitivity=1)
    array([0, 0, 0, 0, 0, 1])
    """
    key = _check_key(key)
    base = exponential_base(epsilon=epsilon, sensitivity=sensitivity)
    array = _check_quality(quality)
    multiplier_arrays = _check_multipliers(multipliers, array.shape)
    _, start = _check_range(array.shape[0], start)
    return _draw_rows(key, array, multiplier_arrays, base, start, fast_path_slack(array.shape[1]))


def exponential_probabilities(
    quality: Any,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction,
    multipliers: Any = None,
    exact: bool = False,
) -> Any:
    """Return the probabilities of one :func:`exponential_mechanism` row.

    For tests, traces and audit: it draws nothing. The weights are computed as exact
    integers ``mult_c x**d_c 2**(y (D - d_c))`` (``b = x / 2**y``, ``D = max d``), whose size
    grows with ``y D`` bits, so rows beyond ``2**26`` such bits are refused.

    Parameters
    ----------
    quality : array-like of int, shape (m,)
    epsilon, sensitivity, multipliers
        As for :func:`exponential_mechanism`.
    exact : bool, optional
        Return ``fractions.Fraction`` values (slow for large rows: each needs a gcd)
        instead of float64 (each within ``2**-52`` relative of the exact value, 0 below
        the float range).

    Returns
    -------
    numpy.ndarray of float64, or list of fractions.Fraction

    Examples
    --------
    >>> exponential_probabilities([0, -1], epsilon=2.0, sensitivity=1).round(4)
    array([0.7311, 0.2689])
    >>> sum(exponential_probabilities([0, -1], epsilon=2.0, sensitivity=1, exact=True))
    Fraction(1, 1)
    """
    base = exponential_base(epsilon=epsilon, sensitivity=sensitivity)
    row = _check_quality(np.asarray(quality).reshape(1, -1))[0].tolist()
    _, exact_mult = _check_multipliers(multipliers, (1, len(row)))
    top, bottom = max(row), min(row)
    if base.bits * (top - bottom) > 2**26:
        raise DPFastValueError("the exact probabilities of this row are too large to compute")
    scale = math.lcm(*(f.denominator for f in exact_mult[0]))
    spread = top - bottom
    weights = [
        int(f * scale) * base.numerator ** (top - q) << (base.bits * (spread - top + q))
        for f, q in zip(exact_mult[0], row, strict=True)
    ]
    total = sum(weights)
    if exact:
        return [Fraction(w, total) for w in weights]
    out = np.empty(len(weights), dtype=np.float64)
    for c, w in enumerate(weights):
        shift = total.bit_length() - w.bit_length() + 64
        out[c] = math.ldexp(float((w << shift) // total), -shift)
    return out


def exponential_chances(
    quality: Any, *, epsilon: float | Fraction, sensitivity: float | Fraction
) -> np.ndarray:
    """Return every candidate's chance in each row of :func:`exponential_mechanism`, in float64.

    ``b**(q_max - q_c)`` normalised over the row, with the dyadic base ``b`` of
    :func:`exponential_base` (the draws' own): each within float64 rounding of the exact
    probability (:func:`exponential_probabilities` gives it as a fraction, one row at a
    time). It draws nothing: a forecast reads it (docs/forecast.md#categorical).

    Parameters
    ----------
    quality : array-like of int, shape (n, m)
        Qualities in integer units.
    epsilon, sensitivity
        As for :func:`exponential_mechanism`.

    Returns
    -------
    numpy.ndarray of float64, shape (n, m)

    Examples
    --------
    >>> exponential_chances([[0, -1]], epsilon=2.0, sensitivity=1).round(4)
    array([[0.7311, 0.2689]])
    """
    base = exponential_base(epsilon=epsilon, sensitivity=sensitivity)
    array = _check_quality(quality)
    rate = 1.0 / base.scale()  # ln(1/b)
    weights = np.exp((array - array.max(axis=1, keepdims=True)).astype(np.float64) * rate)
    return weights / weights.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


def exponential_mechanism_sorted_groups(
    key: np.ndarray,
    counts: np.ndarray,
    k: int,
    distance: np.ndarray,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction,
    start: int = 0,
    groups: tuple[int, int] | None = None,
    big: int | None = None,
) -> np.ndarray:
    """Exponential-mechanism centroid of each rank group of a sorted categorical column.

    The sorted column holds ``counts[v]`` copies of value ``v`` for ``v = 0 .. m-1``, in
    that order, and is cut into ``n // k`` groups of ``k``, group ``big`` also holding the
    ``n mod k`` values left over (:class:`~dpfast.partitions.ranking.RankGroups`). Group
    ``g`` draws candidate ``c`` with the integer quality
    ``-Σ_{x in g} distance[c, x]`` (docs/design.md#em-centroid, Algorithm 2 of Sánchez et
    al. 2016) exactly as :func:`exponential_mechanism` does for that quality row, from
    stream ``(key, start + g)``. Groups made of one value share their thresholds, so the
    cost is about one ChaCha20 block per group.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    counts : array-like of int, shape (m,)
        Copies of each value, in sorted order; their sum ``n`` must be ``>= k``.
    k : int
        Group size, ``>= 1``.
    distance : array-like of int, shape (m, m)
        ``distance[c, r] >= 0``: distance between candidate ``c`` and value ``r`` in
        quality units (e.g. :func:`dpfast.partitions.categorical.distance_units`).
    epsilon, sensitivity : float or fractions.Fraction
        As for :func:`exponential_mechanism` (``sensitivity`` in the distance's units).
    start : int, optional
        Nonce of group 0.
    groups : (int, int), optional
        ``(first, stop)``: draw only groups ``first .. stop - 1`` of the column, each as
        the whole column's draw would (so any task that knows ``counts`` can draw any
        group). Default: every group.
    big : int, optional
        The group that holds the ``n mod k`` values left over (default the last,
        ``n // k - 1``).

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(n // k,)`` (or ``stop - first``): the chosen candidate
        of each group.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(1).key("doc")
    >>> distance = np.array([[0, 4096], [4096, 0]])
    >>> exponential_mechanism_sorted_groups(key, [6, 4], 5, distance, epsilon=50.0,
    ...                                     sensitivity=4096)
    array([0, 1])
    """
    key = _check_key(key)
    base = exponential_base(epsilon=epsilon, sensitivity=sensitivity)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    distance = _check_quality(distance)
    m = counts.shape[0]
    if counts.ndim != 1 or m == 0 or distance.shape != (m, m):
        raise DPFastValueError(
            f"counts must be 1-D and non-empty and distance of shape (m, m); got "
            f"{counts.shape} and {distance.shape}"
        )
    if (counts < 0).any() or (distance < 0).any():
        raise DPFastValueError("counts and distances must be >= 0")
    k = check_int(k, "k", low=1, high=2**62)
    n = int(counts.sum())
    if n < k:
        raise DPFastValueError(f"the column has {n} values, fewer than k = {k}")
    if n * int(distance.max()) >= _MAX_QUALITY:
        raise DPFastValueError("n * max(distance) must be below 2**62; use coarser units")
    size, start = _check_range(n // k, start)
    big = size - 1 if big is None else check_int(big, "big", low=0, high=size - 1)
    layout = (k, big, n - k * size)
    if groups is not None:
        counts, size, start, layout = _group_slice(counts, layout, size, start, groups)
    out = np.empty(size, dtype=np.int64)
    slack = fast_path_slack(m)
    _em.em_sorted_groups(key, counts, *layout, distance, base.table(), slack, np.uint64(start), out)
    undecided = np.flatnonzero(out == _em.UNDECIDED).tolist()
    if undecided:
        ends = np.cumsum(counts)
        ones = [Fraction(1)] * m
        for g in undecided:
            lo, hi = group_start(g, *layout), group_start(g + 1, *layout)
            quality = -(distance @ _group_histogram(ends, lo, hi))
            out[g] = _exact_row(key, start + g, quality.tolist(), ones, base)
    return out


def _group_slice(
    counts: np.ndarray,
    layout: tuple[int, int, int],
    size: int,
    start: int,
    groups: tuple[int, int],
) -> tuple[np.ndarray, int, int, tuple[int, int, int]]:
    """Return the counts, groups, first nonce and layout of groups ``first .. stop - 1``.

    The slice of the sorted column they cover is a sorted column of its own: ``k`` values
    a group, and the remainder in its group ``big - first`` where the slice holds group
    ``big`` (else none).
    """
    k, big, r = layout
    first = check_int(groups[0], "groups[0]", low=0, high=size)
    stop = check_int(groups[1], "groups[1]", low=first, high=size)
    lo, hi = group_start(first, *layout), group_start(stop, *layout)
    inner = (k, big - first, r) if first <= big < stop else (k, 0, 0)
    return _group_histogram(np.cumsum(counts), lo, hi), stop - first, start + first, inner


def _group_histogram(ends: np.ndarray, first: int, stop: int) -> np.ndarray:
    # copies of each value among sorted positions [first, stop); ends = cumsum(counts)
    before = np.minimum(ends, first)
    upto = np.minimum(ends, stop)
    return np.diff(np.concatenate(([0], upto))) - np.diff(np.concatenate(([0], before)))
