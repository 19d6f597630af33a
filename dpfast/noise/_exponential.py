"""The exact exponential mechanism: a dyadic base, integer qualities, certified draws.

``Pr[c] = mult_c · b**(q_max - q_c) / Σ_j mult_j · b**(q_max - q_j)`` for integer qualities
``q`` (in *units*), positive multipliers and a base ``b = x / 2**y`` with
``b >= exp(-ε / (2 Δ))``, ``Δ`` the sensitivity in units (the base-2 exponential
mechanism of Ilvento 2020, with any dyadic base). It is ``ε'``-DP with
``ε' = 2 Δ ln(1/b) <= ε``, and the draws have exactly these probabilities
(docs/design.md#em-sampler): each draw is decided from the first word of its ChaCha20
stream with certified float bounds (:mod:`dpfast._kernels.exponential`), and the rare
undecided draws are finished in exact integer arithmetic on further words of the same
stream (:func:`_exact_choice`), so a draw depends only on ``(key, nonce)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from dpfast._kernels import chacha as _chacha
from dpfast._kernels import exponential as _em
from dpfast._validation import check_int, check_positive
from dpfast.noise._common import _check_key, _check_range

EM_SAMPLER_NAME = (
    "exact exponential mechanism: integer qualities, dyadic base b = x/2**y, inverse CDF "
    "on a uniform read from a ChaCha20 keyed stream, decided by certified float bounds on "
    "the first 64-bit word or else in exact integer arithmetic on further words "
    "(docs/design.md#em-sampler)"
)
#: Float scores are rounded to multiples of ``2**-SCORE_BITS`` by :func:`quality_units`.
SCORE_BITS = 12
#: Significant bits of the base's numerator, and of ``ln(1/b)`` against the budget.
BASE_BITS = 48
#: Above this rate ``ε / (2 Δ)`` the base is the one of this rate (less privacy is spent).
MAX_RATE = 512
_MAX_QUALITY = 2**62
_MAX_MULTIPLIER_RANGE = 2**500
_TABLE_BITS = 192  # mantissa bits of the power table's directed-rounding squarings


@dataclass(frozen=True)
class ExponentialBase:
    """The base ``b = numerator / 2**bits`` of an exponential mechanism and its guarantee.

    Attributes
    ----------
    numerator, bits : int
        ``b = numerator / 2**bits`` with ``exp(-rate) <= b < 1``.
    rate : fractions.Fraction
        ``ε / (2 Δ)`` (capped at :data:`MAX_RATE`), exactly.
    epsilon : float
        The budget ``ε`` asked for.
    sensitivity : fractions.Fraction
        ``Δ``, in quality units.
    effective_epsilon : float
        ``ε' = 2 Δ ln(1/b)``: what the mechanism spends, never above ``epsilon``
        (rounded to float, then capped at ``epsilon``).
    """

    numerator: int
    bits: int
    rate: Fraction
    epsilon: float
    sensitivity: Fraction
    effective_epsilon: float

    @property
    def parameter(self) -> str:
        """``"b = x/2**y"``, for the ledger."""
        return f"b = {self.numerator}/2**{self.bits}"

    def scale(self, unit: float = 1.0) -> float:
        """Return ``unit / ln(1/b)``: ``Pr[c] ∝ exp(q_c / scale)``, ``q`` in the data's units."""
        return unit / _log_inverse(self.numerator, self.bits)

    def details(self, unit: float = 1.0) -> dict[str, Any]:
        """Return what a ledger entry states about the mechanism (quality units of ``unit``)."""
        return {
            "base": self.parameter,
            "quality_unit": unit,
            "sensitivity_units": float(self.sensitivity),
            "mechanism_epsilon": self.epsilon,
            "effective_epsilon": self.effective_epsilon,
            "effective_epsilon_meaning": "2 * sensitivity_units * ln(1/b) <= mechanism_epsilon: "
            "what the draws spend; the ledger charges mechanism_epsilon",
        }

    def table(self) -> np.ndarray:
        """``float64[8, 256]``: ``b**(v 256**j)`` within ``2**-52`` relative, 0 if tiny."""
        return _power_table(self.numerator, self.bits)


def _exp_lower(rate: Fraction, bits: int) -> int:
    # L <= exp(rate) * 2**bits: Taylor partial sum at floor(rate * 2**bits) / 2**bits with
    # every term rounded down, so each step only lowers the value.
    num = math.floor(rate * (1 << bits))
    term = 1 << bits
    total = 0
    n = 0
    while term > 0:
        total += term
        n += 1
        term = term * num // (n << bits)
    return total


def exponential_base(
    *, epsilon: float | Fraction, sensitivity: float | Fraction
) -> ExponentialBase:
    """Return the smallest dyadic base whose exponential mechanism is at most ``ε``-DP.

    The privacy map: with qualities of sensitivity ``Δ`` (in units), weights ``b**(-q)``
    give ``2 Δ ln(1/b)``-DP, so this returns ``b = x / 2**y >= exp(-ε / (2 Δ))``,
    checked against an exact lower bound of ``exp(ε / (2 Δ))`` (never in floating point).
    ``y`` gives ``x`` at least :data:`BASE_BITS` significant bits and ``ln(1/b)`` a
    relative resolution of ``2**-BASE_BITS``, so ``ε'`` is within about ``2**-47`` of ``ε``.

    Parameters
    ----------
    epsilon : float or fractions.Fraction
        ``ε > 0`` (read exactly).
    sensitivity : float or fractions.Fraction
        ``Δ > 0``: the most one record changes a quality, in quality units.

    Returns
    -------
    ExponentialBase

    Examples
    --------
    >>> base = exponential_base(epsilon=1.0, sensitivity=2)
    >>> base.effective_epsilon <= 1.0, round(base.effective_epsilon, 9)
    (True, 1.0)
    """
    eps = Fraction(check_positive(epsilon, "epsilon")) if isinstance(epsilon, float) else None
    eps = Fraction(epsilon) if eps is None else eps
    delta = Fraction(sensitivity) if isinstance(sensitivity, Fraction) else None
    if delta is None:
        delta = Fraction(check_positive(sensitivity, "sensitivity"))
    if eps <= 0 or delta <= 0:
        raise ValueError(
            f"epsilon and sensitivity must be > 0, got {epsilon!r} and {sensitivity!r}"
        )
    rate = min(eps / (2 * delta), Fraction(MAX_RATE))
    numerator, bits = _base_of_rate(rate)
    effective = min(float(2 * delta) * _log_inverse(numerator, bits), float(eps))
    return ExponentialBase(numerator, bits, rate, float(eps), delta, effective)


def _log_inverse(numerator: int, bits: int) -> float:
    # ln(1/b) for b = numerator / 2**bits, to float precision (log1p when b is near 1)
    if 2 * numerator < (1 << bits):
        return bits * math.log(2.0) - math.log(numerator)
    return -math.log1p(-float(Fraction((1 << bits) - numerator, 1 << bits)))


@lru_cache(maxsize=256)
def _base_of_rate(rate: Fraction) -> tuple[int, int]:
    # y: 48 significant bits in x (b >= exp(-rate)) and a 2**-48 resolution of ln(1/b)
    small = max(0, -math.floor(math.log2(rate)))
    bits = BASE_BITS + small + math.ceil(float(rate) * 1.4426950408889634) + 1
    extra = bits + 64
    lower = _exp_lower(rate, extra)  # <= exp(rate) * 2**extra
    numerator = -(-(1 << (bits + extra)) // lower)  # x / 2**y >= 2**extra / lower >= e**-rate
    if not 0 < numerator < (1 << bits):
        raise AssertionError("no dyadic base below 1")  # pragma: no cover - y is ample
    return numerator, bits


@lru_cache(maxsize=256)
def _power_table(numerator: int, bits: int) -> np.ndarray:
    # table[j, v] = b**(v * 256**j): b**(256**j) by squaring a 192-bit mantissa with
    # truncation, its powers by products with truncation (relative error below
    # 2**(8 j + 9 - 190) <= 2**-125), then rounded to the nearest float: within
    # u + 2**-125 <= 2 u of the exact power. Entries below 2**-1000 become 0.0 (and the
    # kernel treats the weight as tiny).
    table = np.zeros((8, 256), dtype=np.float64)
    mantissa, exponent = numerator, bits  # b**(256**j) = mantissa * 2**-exponent
    for j in range(8):
        if mantissa.bit_length() - exponent < -1000:
            break
        power, shift_total = 1, 0  # b**(v 256**j) = power * 2**-shift_total
        for v in range(256):
            if power.bit_length() - shift_total < -1000:
                break
            table[j, v] = float(Fraction(power, 1 << shift_total))
            power, shift_total = _truncate(power * mantissa, shift_total + exponent)
        mantissa, exponent = _truncate(mantissa, exponent)
        for _ in range(8):
            mantissa, exponent = _truncate(mantissa * mantissa, 2 * exponent)
    table[table < 2.0**-1000] = 0.0
    table.setflags(write=False)
    return table


def _truncate(mantissa: int, exponent: int) -> tuple[int, int]:
    # mantissa * 2**-exponent rounded down to _TABLE_BITS significant bits
    shift = mantissa.bit_length() - _TABLE_BITS
    if shift > 0:
        return mantissa >> shift, exponent - shift
    return mantissa, exponent


def fast_path_slack(m: int) -> float:
    """Absolute bound of the float error of ``C_c / S`` for ``m`` candidates.

    Each weight is a product of at most 8 table entries (``2u`` each, one per byte of
    ``d``) and 8 products, times a multiplier rounded to float (two more roundings); each
    running sum adds one rounding and the division one: ``|t~ - t| <= g(2N+1)`` with
    ``N = 32 + m``,
    ``g(n) = n u / (1 - n u)``, ``u = 2**-53``. The slack doubles that, which also covers
    the rounding of ``t~ ± slack``.
    """
    n = 32 + m
    return (4 * n + 16) * 2.0**-53


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
        raise ValueError("scores must be finite")
    scaled = np.ldexp(array, bits)
    if array.size and not float(np.abs(scaled).max()) < _MAX_QUALITY:
        raise ValueError(f"scores * 2**{bits} must lie in (-2**62, 2**62); use fewer bits")
    return np.rint(scaled).astype(np.int64), math.ceil(math.ldexp(delta, bits)) + 1


def _check_quality(quality: object) -> np.ndarray:
    array = np.asarray(quality)
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(
            "quality must be a 2-D array (draws x candidates) with at least one candidate, "
            f"got shape {array.shape}"
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"quality must hold integer units, got dtype {array.dtype}; round float scores "
            "with quality_units (or a public table with its own rounding) first"
        )
    if array.size and int(np.abs(array).max()) >= _MAX_QUALITY:
        raise ValueError("qualities must lie in (-2**62, 2**62)")
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
        raise ValueError(f"multipliers must have shape (m,) or {shape}, got {array.shape}")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"multipliers must be numbers, got dtype {array.dtype}")
    floats = array.astype(np.float64)
    if not (np.isfinite(floats).all() and (array > 0).all()):
        raise ValueError("multipliers must be finite and > 0")
    if float(floats.max()) > 2.0**500 * float(floats.min()):
        raise ValueError("multipliers must lie within a factor 2**500 of each other")
    exact = [
        [Fraction(int(v) if isinstance(v, (int, np.integer)) else v) for v in row]
        for row in array.tolist()
    ]
    shift = 62 - math.frexp(float(floats.max()))[1]
    return np.ascontiguousarray(np.ldexp(floats, shift)), exact


def _stream_words(key: np.ndarray, nonce: int) -> Callable[[int], int]:
    """Word ``j`` of the stream ``(key, nonce)`` (little-endian ``uint64``), blocks on demand."""
    words: list[int] = []

    def word(j: int) -> int:
        if j >= len(words):
            n_blocks = max(2 * (len(words) // 8), j // 8 + 1)
            out = np.empty(n_blocks * 8, dtype=np.uint64)
            _chacha.chacha20_words(key, np.uint64(nonce), n_blocks, out)
            words[:] = [int(w) for w in out]
        return words[j]

    return word


def _power_bounds(numerator: int, bits: int, precision: int, n: int) -> tuple[list[int], list[int]]:
    # floor and ceil of b**(2**i) * 2**precision for i < n, squaring with directed rounding
    low = [(numerator << precision) >> bits]
    high = [-(-(numerator << precision) >> bits)]
    for _ in range(1, n):
        low.append((low[-1] * low[-1]) >> precision)
        high.append(-(-(high[-1] * high[-1]) >> precision))
    return low, high


def _weight_bounds(
    distance: list[int], mult: list[int], numerator: int, bits: int, precision: int
) -> tuple[list[int], list[int]]:
    # integer bounds of mult_c * b**d_c * 2**precision, by floor / ceil at every product
    n = max(1, max(d.bit_length() for d in distance))
    pow_low, pow_high = _power_bounds(numerator, bits, precision, n)
    one = 1 << precision
    lows, highs = [], []
    for d, factor in zip(distance, mult, strict=True):
        low = high = one
        for i in range(d.bit_length()):
            if (d >> i) & 1:
                low = (low * pow_low[i]) >> precision
                high = -(-(high * pow_high[i]) >> precision)
        lows.append(factor * low)
        highs.append(factor * high)
    return lows, highs


def _exact_choice(
    distance: list[int], mult: list[int], numerator: int, bits: int, word: Callable[[int], int]
) -> int:
    """Return the first ``c`` with ``U < C_c / S``, decided exactly (the slow path).

    ``distance`` are the ``d_c >= 0``, ``mult`` positive integers, ``word(j)`` word ``j``
    of the draw's stream: ``U``'s bits are those of ``word(0), word(1), ...``, most
    significant first. Each round bounds every threshold with ``precision``-bit directed
    rounding and compares with the interval ``[u, u + 1) / 2**k`` of ``U``'s first ``k``
    bits; undecided rounds double both. Since ``U`` is uniform the chance of another round
    halves each time, and once the precision reaches ``bits * max d`` the bounds are exact.
    """
    m = len(distance)
    if m == 1:
        return 0
    u, k, precision = word(0), 64, 128
    while True:
        lows, highs = _weight_bounds(distance, mult, numerator, bits, precision)
        cum_low, cum_high = [], []
        total_low = total_high = 0
        for low, high in zip(lows, highs, strict=True):
            total_low += low
            total_high += high
            cum_low.append(total_low)
            cum_high.append(total_high)
        # U < (u + 1) / 2**k <= C_c^low / S^high <= C_c / S
        c = next((i for i in range(m - 1) if (u + 1) * total_high <= cum_low[i] << k), m - 1)
        # U >= u / 2**k >= C_{c-1}^high / S^low >= C_{c-1} / S
        if c == 0 or u * total_low >= cum_high[c - 1] << k:
            return c
        for j in range(k // 64, k // 32):
            u = (u << 64) | word(j)
        k *= 2
        precision *= 2


def _exact_row(
    key: np.ndarray, nonce: int, quality: list[int], mult: list[Fraction], base: ExponentialBase
) -> int:
    top = max(quality)
    scale = math.lcm(*(f.denominator for f in mult))
    ints = [int(f * scale) for f in mult]
    return _exact_choice(
        [top - q for q in quality], ints, base.numerator, base.bits, _stream_words(key, nonce)
    )


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
        raise ValueError("the exact probabilities of this row are too large to compute")
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


def exponential_mechanism_sorted_groups(
    key: np.ndarray,
    counts: np.ndarray,
    k: int,
    distance: np.ndarray,
    *,
    epsilon: float | Fraction,
    sensitivity: float | Fraction,
    start: int = 0,
) -> np.ndarray:
    """Exponential-mechanism centroid of each rank group of a sorted categorical column.

    The sorted column holds ``counts[r]`` copies of value ``r`` for ``r = 0 .. m-1``, in
    that order, and is cut into ``n // k`` groups of ``k`` (the remainder joins the last
    group). Group ``g`` draws candidate ``c`` with the integer quality
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

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(n // k,)``: the chosen candidate of each group.

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
        raise ValueError(
            f"counts must be 1-D and non-empty and distance of shape (m, m); got "
            f"{counts.shape} and {distance.shape}"
        )
    if (counts < 0).any() or (distance < 0).any():
        raise ValueError("counts and distances must be >= 0")
    k = check_int(k, "k", low=1, high=2**62)
    n = int(counts.sum())
    if n < k:
        raise ValueError(f"the column has {n} values, fewer than k = {k}")
    if n * int(distance.max()) >= _MAX_QUALITY:
        raise ValueError("n * max(distance) must be below 2**62; use coarser units")
    size, start = _check_range(n // k, start)
    out = np.empty(size, dtype=np.int64)
    slack = fast_path_slack(m)
    _em.em_sorted_groups(key, counts, k, distance, base.table(), slack, np.uint64(start), out)
    undecided = np.flatnonzero(out == _em.UNDECIDED).tolist()
    if undecided:
        ends = np.cumsum(counts)
        ones = [Fraction(1)] * m
        for g in undecided:
            quality = -(distance @ _group_histogram(ends, g * k, n if g == size - 1 else g * k + k))
            out[g] = _exact_row(key, start + g, quality.tolist(), ones, base)
    return out


def _group_histogram(ends: np.ndarray, first: int, stop: int) -> np.ndarray:
    # copies of each value among sorted positions [first, stop); ends = cumsum(counts)
    before = np.minimum(ends, first)
    upto = np.minimum(ends, stop)
    return np.diff(np.concatenate(([0], upto))) - np.diff(np.concatenate(([0], before)))
