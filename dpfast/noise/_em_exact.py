"""The exact arithmetic of the exponential mechanism: the dyadic base and the slow path.

:func:`exponential_base` is the privacy map (the base ``b = x / 2**y`` just above
``exp(-ε / (2 Δ))``, checked in integer arithmetic), :meth:`ExponentialBase.table` the
kernels' float table of its powers, :func:`fast_path_slack` the certified bound of their
float error, and :func:`_exact_choice` the exact integer decision of the draws the float
bounds leave open (docs/design.md#em-sampler).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from dpfast._kernels import chacha as _chacha
from dpfast._validation import check_positive, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.noise._common import _exp_lower_bound

#: Significant bits of the base's numerator, and of ``ln(1/b)`` against the budget.
BASE_BITS = 48
#: Above this rate ``ε / (2 Δ)`` the base is the one of this rate (less privacy is spent).
MAX_RATE = 512
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
    eps = _exact_positive(epsilon, "epsilon")
    delta = _exact_positive(sensitivity, "sensitivity")
    rate = min(eps / (2 * delta), Fraction(MAX_RATE))
    numerator, bits = _base_of_rate(rate)
    effective = min(float(2 * delta) * _log_inverse(numerator, bits), float(eps))
    return ExponentialBase(numerator, bits, rate, float(eps), delta, effective)


def _exact_positive(value: Any, name: str) -> Fraction:
    # integers and Fractions read exactly, floats through check_positive (finite, > 0)
    if isinstance(value, numbers.Rational) and not isinstance(value, (bool, np.bool_)):
        exact = Fraction(int(value.numerator), int(value.denominator))
        if exact <= 0:
            raise DPFastValueError(f"{name} must be a finite number > 0, got {quoted(value)}")
        return exact
    return Fraction(check_positive(value, name))


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
    lower = _exp_lower_bound(rate, extra, extra)  # <= exp(rate) * 2**extra
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
