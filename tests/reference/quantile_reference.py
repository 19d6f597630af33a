"""Slow, obvious DP quantile of a column: the candidate grid, the ranks and the draw.

Everything from the definitions (docs/privacy.md#bounds-chosen-with-dp), with Python
loops, exact rationals and the exact exponential mechanism of ``exponential_reference``:

- the candidates: the anchor, the anchor plus or minus ``m * 2**e`` (``m`` in ``[32,
  64)``, over the 32 octaves below the distance from the anchor to that side's outer
  bound) inside the range, and the two outer bounds;
- a candidate's ranks: how many values, clamped to the range, are below it and at most it;
- its utility: minus the distance from ``q n`` to those ranks, in records;
- ``Pr[c] ∝ exp(ε u(c) / 2)``, and the draw from ``(key, nonce)``.
"""

from __future__ import annotations

import math
from fractions import Fraction

from tests.reference import exponential_reference as eref


def _offsets(span: float) -> list[float]:
    """``m * 2**(e - 5)``, ``m`` in ``[32, 64)``, ``e`` the 32 octaves below ``span``, up to it."""
    top = 0
    while 2.0**top <= span:  # span < 2**top
        top += 1
    while 2.0 ** (top - 1) > span:
        top -= 1
    return [
        m * 2.0 ** (e - 5)
        for e in range(top - 32, top)
        for m in range(32, 64)
        if m * 2.0 ** (e - 5) <= span
    ]


def candidates(lower: float, upper: float, integer: bool = False) -> list[float]:
    """The public candidates, sorted, each once."""
    if lower >= 0:
        anchor, sides = lower, [(1, upper - lower)]
    elif upper <= 0:
        anchor, sides = upper, [(-1, upper - lower)]
    else:
        anchor, sides = 0.0, [(1, upper), (-1, -lower)]
    found = {lower, upper, anchor}
    for sign, span in sides:
        for offset in _offsets(span):
            value = anchor + sign * offset
            if integer:
                value = float(round(value)) + 0.0
            if lower < value < upper:
                found.add(value)
    return sorted(found)


def ranks(values, cands: list[float]) -> tuple[list[int], list[int]]:
    """``(#{x < c}, #{x <= c})`` per candidate, ``x`` the values clamped to the range."""
    lower, upper = cands[0], cands[-1]
    clamped = [min(max(float(v), lower), upper) for v in values]
    below = [sum(1 for x in clamped if x < c) for c in cands]
    at_most = [sum(1 for x in clamped if x <= c) for c in cands]
    return below, at_most


def utility(below: int, at_most: int, quantile: float, n: int) -> Fraction:
    """Minus the distance from ``q n`` (to the nearest 2**-12 record) to ``[below, at_most]``."""
    target = Fraction(round(Fraction(quantile) * n * 4096), 4096)
    return -max(Fraction(0), below - target, target - at_most)


def probabilities(values, cands, quantile: float, epsilon: float) -> list[float]:
    """``Pr[c] ∝ exp(ε u(c) / 2)`` over ``cands``, in float (the textbook mechanism)."""
    n = len(values)
    below, at_most = ranks(values, cands)
    u = [float(utility(b, a, quantile, n)) for b, a in zip(below, at_most, strict=True)]
    top = max(u)
    weights = [math.exp(epsilon * (x - top) / 2) for x in u]
    return [w / sum(weights) for w in weights]


def quality(below, at_most, quantile: float, n: int) -> list[int]:
    """The utilities in integer units of ``2**-12`` record."""
    return [int(utility(b, a, quantile, n) * 4096) for b, a in zip(below, at_most, strict=True)]


def draw(key, nonce: int, below, at_most, quantile: float, n: int, base) -> int:
    """The exact draw: the exponential mechanism of ``base`` over integer qualities.

    Its weights are exact integers of about ``bits * n * 4096`` bits: small tables only.
    """
    return eref.draw(quality(below, at_most, quantile, n), base.numerator, base.bits, key, nonce)


def bounds(values, outer, integer, lower_q, upper_q, choose) -> tuple[float, float]:
    """The bounds a release chooses: lower from nonce 0, upper above it from nonce 1.

    ``choose(qualities, nonce)`` draws a candidate's index (:func:`draw` for small tables).
    """
    cands = candidates(*outer, integer)
    below, at_most = ranks(values, cands)
    n, low, high = len(values), 0, len(cands) - 1
    if lower_q is not None:
        low = choose(quality(below[:-1], at_most[:-1], lower_q, n), 0)
    if upper_q is not None:
        high = low + 1 + choose(quality(below[low + 1 :], at_most[low + 1 :], upper_q, n), 1)
    return cands[low], cands[high]
