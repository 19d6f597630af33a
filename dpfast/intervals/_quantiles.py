"""Quantiles of weighted sums of independent Laplace draws (docs/accuracy.md#formulas).

A released mean's noise is ``Σ_j w_j η_j``: ``c_j`` draws shared by ``w_j`` rows each
(``weights``: pairs ``(w_j, c_j)``). :func:`laplace_sum_quantile` gives the exact
two-sided quantile of that sum for continuous Laplace draws of scale 1, from the
characteristic function (Gil-Pelaez inversion, trapezoid rule with a bounded tail);
:func:`lattice_quantile` gives it for discrete Laplace draws of base ``alpha`` from the
exact probabilities on the integers (inverse FFT of the characteristic function), where the
sum's support is small enough. :func:`normal_quantile` is the standard normal's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

__all__ = [
    "Weights",
    "greedy_weights",
    "laplace_sum_quantile",
    "lattice_quantile",
    "normal_quantile",
    "total_weight",
]

#: ``(w, c)`` pairs: ``c`` draws, each shared by ``w`` rows (both positive integers).
Weights = tuple[tuple[int, int], ...]

# Probability mass the integral's truncation may leave out (a bound, not an estimate).
_TAIL = 1e-9
# The lattice method's largest FFT: 2**20 points (16 MiB of float64).
_MAX_LATTICE = 1 << 20


def total_weight(weights: Weights) -> int:
    """Return ``Σ w c``: the rows the draws cover."""
    return sum(w * c for w, c in weights)


def _log_phi(theta: np.ndarray, weights: Weights) -> np.ndarray:
    """Log characteristic function of ``Σ w L`` at ``theta`` (L ~ Laplace(1))."""
    out = np.zeros_like(theta)
    for w, c in weights:
        out -= c * np.log1p((w * theta) ** 2)
    return out


def _tail_bound(theta: float, weights: Weights) -> float:
    """Bound ``∫_theta^∞ φ(u)/u du`` (φ decreasing on ``u > 0``).

    Over ``[x, 2x]`` the integral is at most ``φ(x) ln 2``; from ``x`` on it is at most
    ``Π_j (w_j x)^(-2 c_j) / (2 Σ c_j)``, since ``1 + (w u)^2 > (w u)^2``.
    """
    draws = sum(c for _, c in weights)
    total, x = 0.0, theta
    for _ in range(200):
        power = -2.0 * sum(c * math.log(w * x) for w, c in weights)
        if power < math.log(_TAIL / 4):
            return total + math.exp(power) / (2 * draws)
        total += math.exp(float(_log_phi(np.array([x]), weights)[0])) * math.log(2)
        x *= 2
    return math.inf


def _chernoff_radius(log_mgf: Callable[[float], float], limit: float, tail: float) -> float:
    """Smallest ``R`` over a grid of ``λ < limit`` with ``exp(log_mgf(λ) - λR) <= tail / 2``."""
    lams = limit * np.linspace(0.02, 0.98, 49)
    values = np.array([log_mgf(float(lam)) for lam in lams])
    return float(np.min((values - math.log(tail / 2)) / lams))


def _continuous_mgf(weights: Weights) -> Callable[[float], float]:
    return lambda lam: -sum(c * math.log1p(-((w * lam) ** 2)) for w, c in weights)


@lru_cache(maxsize=256)
def laplace_sum_quantile(weights: Weights, level: float) -> float:
    """Smallest ``h`` with ``P(|Σ_j w_j L_j| <= h) >= level``, ``L_j`` i.i.d. Laplace(1).

    Never below the exact quantile, and above it by about ``1e-9`` relative at most: the
    integral's truncation is bounded by ``1e-9`` in probability, and the level is raised by
    that much. One draw has the closed form ``w ln(1 / (1 - level))``.

    Parameters
    ----------
    weights : tuple of (int, int)
        ``(w, c)``: ``c`` draws of weight ``w``.
    level : float
        In ``(0, 1)``.

    Examples
    --------
    >>> round(laplace_sum_quantile(((1, 1),), 0.95), 6)  # ln 20
    2.995732
    >>> round(laplace_sum_quantile(((1, 2),), 0.95), 6)  # two draws: (h + 2) e^-h = 0.1
    4.113003
    """
    weights = tuple((w, c) for w, c in weights if c > 0)
    if len(weights) == 1 and weights[0][1] == 1:
        return weights[0][0] * math.log(1 / (1 - level))
    w_max = max(w for w, _ in weights)
    sd = math.sqrt(2 * sum(c * w * w for w, c in weights))
    high = _chernoff_radius(_continuous_mgf(weights), 1 / w_max, 1 - level)
    step = 1 / (10 * max(sd, 2 * w_max, high))
    end = 8 / sd
    while _tail_bound(end, weights) > _TAIL:
        end *= 2
    theta = np.arange(step, end + step, step)
    phi = np.exp(_log_phi(theta, weights)) * step
    weighted = phi / theta

    def probability(h: float) -> tuple[float, float]:
        """Gil-Pelaez: ``P(|S| <= h) = (2/π) ∫ sin(hθ)/θ φ(θ) dθ``, and its derivative."""
        # sums, not BLAS dot products: no threads, and the same summation order everywhere
        inside = float(np.sum(np.sin(h * theta) * weighted)) + h * step / 2
        density = float(np.sum(np.cos(h * theta) * phi)) + step / 2
        return float(2 / math.pi * inside), float(2 / math.pi * density)

    # the computed probability is within _TAIL of the true one: aim that much higher
    return _solve(probability, level + _TAIL, min(high, 1.96 * sd), high)


def _solve(
    probability: Callable[[float], tuple[float, float]], level: float, start: float, high: float
) -> float:
    """Root of ``probability(h)[0] = level`` in ``[0, high]``: Newton's steps, kept bracketed.

    Newton's steps go on until they move ``h`` by less than ``1e-13`` of it, so the root
    is found to the precision of the floats (the same on every machine to far more digits
    than :func:`~dpfast.intervals._models.round_up` keeps); returns a value at most
    ``1e-12`` relative above it, never below.
    """
    low, h = 0.0, start
    for _ in range(200):
        value, slope = probability(h)
        if value >= level:
            high = h
        else:
            low = h
        if high - low <= 1e-12 * high:
            return high
        guess = h - (value - level) / slope if slope > 0 else low
        if not low < guess < high:
            guess = (low + high) / 2
        if abs(guess - h) <= 1e-13 * h:
            return max(guess, h) * (1 + 1e-12)
        h = guess
    return high


def _lattice_log_mgf(weights: Weights, alpha: float) -> Callable[[float], float]:
    log1m = math.log1p(-alpha)

    def log_mgf(lam: float) -> float:
        total = 0.0
        for w, c in weights:
            up, down = alpha * math.exp(w * lam), alpha * math.exp(-w * lam)
            total += c * (2 * log1m - math.log1p(-up) - math.log1p(-down))
        return total

    return log_mgf


def lattice_quantile(weights: Weights, alpha: float, level: float) -> int | None:
    """Smallest integer ``h`` with ``P(|Σ_j w_j η_j| <= h) >= level``, or None if too wide.

    ``η_j`` are i.i.d. discrete Laplace on the integers, ``P(η = y) ∝ alpha**|y|``. The
    probabilities come from the inverse FFT of the exact characteristic function
    ``Π_j ((1 - a)^2 / (1 - 2a cos(w_j θ) + a^2))^(c_j)`` (``a = alpha``) on ``N`` points; the mass
    beyond ``N/2`` that folds back is below ``1e-12`` (Chernoff bound), and the level is
    met with ``1e-9`` to spare. None when ``N`` would pass ``2**20`` points.

    Examples
    --------
    >>> lattice_quantile(((1, 1),), 0.5, 0.95)  # P(|η| <= h) = 1 - 2 alpha^(h+1) / (1 + alpha)
    4
    """
    weights = tuple((w, c) for w, c in weights if c > 0)
    if alpha == 0:
        return 0
    if alpha >= 1.0:  # a scale of more than about 2**53 steps: far too wide for the FFT
        return None
    spread = math.sqrt(2 * alpha * sum(c * w * w for w, c in weights)) / -math.expm1(
        math.log(alpha)
    )
    if spread > _MAX_LATTICE / 32:  # far too wide for the FFT: skip the Chernoff bound
        return None
    w_max = max(w for w, _ in weights)
    radius = _chernoff_radius(_lattice_log_mgf(weights, alpha), -math.log(alpha) / w_max, 1e-12)
    if not radius < _MAX_LATTICE / 2 - 1:
        return None
    size = 1 << max(4, math.ceil(radius + 1).bit_length() + 1)
    theta = 2 * math.pi * np.arange(size // 2 + 1) / size
    ratio = 4 * alpha / (1 - alpha) ** 2
    log_phi = np.zeros_like(theta)
    for w, c in weights:
        log_phi -= c * np.log1p(ratio * np.sin(w * theta / 2) ** 2)
    pmf = np.fft.irfft(np.exp(log_phi), n=size)
    inside = np.concatenate(([pmf[0]], pmf[0] + 2 * np.cumsum(pmf[1 : size // 2])))
    reached = np.flatnonzero(inside >= level + 1e-9)  # inside[h] = P(|S| <= h)
    return int(reached[0]) if reached.size else None


def normal_quantile(level: float) -> float:
    """Return the two-sided standard normal quantile ``z`` with ``P(|Z| <= z) = level``.

    Examples
    --------
    >>> round(normal_quantile(0.95), 6)
    1.959964
    """
    low, high = 0.0, 40.0
    while high - low > 1e-13:
        middle = (low + high) / 2
        if math.erf(middle / math.sqrt(2)) >= level:
            high = middle
        else:
            low = middle
    return high


def greedy_weights(groups: Weights, rows: int) -> Weights:
    """Return the draws' weights when ``rows`` rows fill whole groups, the largest first.

    ``groups`` are ``(size, count)`` pairs. Every other way ``rows`` rows can fall in the
    groups is majorised by this one, so its weighted sum of i.i.d. Laplace draws is the
    least peaked (Proschan 1965): its quantiles are the largest.

    Examples
    --------
    >>> greedy_weights(((10, 9), (13, 1)), 35)  # 13 + 10 + 10 + 2 rows
    ((2, 1), (10, 2), (13, 1))
    """
    left, counted = rows, dict[int, int]()
    for size, count in sorted(groups, reverse=True):
        full = min(count, left // size)
        if full:
            counted[size] = counted.get(size, 0) + full
            left -= full * size
        if left and full < count:
            counted[left] = counted.get(left, 0) + 1
            left = 0
    return tuple(sorted(counted.items()))
