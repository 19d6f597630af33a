"""The mean and variance of a transformed column's released value, in closed form.

A column released with a transform (docs/privacy.md#transforms) has its group value ``q``
noised on the transformed scale and mapped back: ``R = f(clamp(q + Y, 0, D))`` with
``f`` the grid's own mapping (:meth:`dpfast.partitions.grid.Grid.values`). ``f`` is not
linear, so ``E[R]`` is not ``f(E[clamp])``. Inside the grid's bound steps ``a < z < D - b``
(:func:`~dpfast._release.forecast.bound_steps`), ``f(z)`` is a sum of exponentials of
``z``: ``expm1(u + gamma y - s)`` for ``log``, ``e^-s sinh(u + gamma y)`` for ``asinh``
(``u = T(lower) + gamma q``, ``y = z - q``, ``s`` the correction). Against the discrete
Laplace's chances ``c r^|y|`` (``c = (1 - r)/(1 + r)``, ``r = e^(-1/t)``) each
exponential sums over the interior as two geometric series, so the moments are the
exact sums over the noise's whole distribution, in closed form (docs/forecast.md#transformed).
"""

from __future__ import annotations

import math

import numpy as np

from dpfast import noise
from dpfast._release.forecast import bound_steps
from dpfast.partitions.grid import Grid

__all__ = ["exp_sums", "transformed_moments"]


def _log_geometric(lam: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Return ``log Σ_{j=lo..hi} e^(lam j)`` per pair, ``-inf`` where ``lo > hi``.

    With ``n = hi - lo + 1``: ``lam lo + log((1 - e^(lam n)) / (1 - e^lam))`` for ``lam <
    0``, the mirror image from ``hi`` for ``lam > 0`` (no term overflows before its
    logarithm is taken), ``log n`` for ``lam = 0``.
    """
    lo = lo.astype(np.float64)
    hi = hi.astype(np.float64)
    n = hi - lo + 1
    empty = n < 1
    n = np.where(empty, 1.0, n)
    with np.errstate(divide="ignore"):
        if lam < 0:
            out = lam * lo + np.log(-np.expm1(lam * n)) - math.log(-math.expm1(lam))
        elif lam > 0:
            out = lam * hi + np.log(-np.expm1(-lam * n)) - math.log(-math.expm1(-lam))
        else:
            out = np.log(n)
    return np.where(empty, -np.inf, out)


def exp_sums(t: float, beta: float, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Return ``log Σ_{y=low..high} P(Y = y) e^(beta y)`` per pair (``-inf``: no term).

    ``Y`` is discrete Laplace of scale ``t > 0`` grid steps: ``P(Y = y) = c r^|y|``. The
    terms with ``y >= 0`` are ``c e^((beta - 1/t) y)``, those with ``y < 0`` are ``c
    e^((-beta - 1/t) j)`` with ``j = -y``: two geometric series.

    Examples
    --------
    >>> got = np.exp(exp_sums(2.0, 0.0, np.array([-10**6]), np.array([10**6])))
    >>> round(float(got[0]), 12)  # every chance: 1
    1.0
    """
    log_c = math.log(math.tanh(0.5 / t))
    positive = _log_geometric(beta - 1.0 / t, np.maximum(low, 0), high)
    negative = _log_geometric(-beta - 1.0 / t, np.maximum(-high, 1), -low)
    return log_c + np.logaddexp(positive, negative)  # type: ignore[no-any-return]


def _scaled(log_scale: np.ndarray, log_sum: np.ndarray) -> np.ndarray:
    """``e^log_scale · e^log_sum``, 0 where the sum is empty."""
    with np.errstate(over="ignore"):
        return np.where(np.isneginf(log_sum), 0.0, np.exp(log_scale + log_sum))


def _centred_interior(
    q: np.ndarray, t: float, grid: Grid, low: np.ndarray, high: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return ``f(q)`` unclamped and ``Σ P(y) (f(q+y) - f(q))^p``, ``p = 1, 2``, over the interior.

    ``low .. high`` are the noise values ``y`` that land strictly inside the bound steps.
    Centring on ``f(q)`` keeps the sums at the size of the noise's effect.
    """
    gamma, s = grid.gamma, grid.shift
    u = grid.origin + gamma * q.astype(np.float64)

    def sums(beta: float) -> np.ndarray:
        return exp_sums(t, beta, low, high)

    s0, s1, s2 = sums(0.0), sums(gamma), sums(2 * gamma)
    one = _scaled(np.zeros_like(u), s0)
    if grid.transform == "log":
        centre = np.expm1(u - s)
        first = _scaled(u - s, s1) - _scaled(u - s, s0)
        second = _scaled(2 * (u - s), s2) - 2 * _scaled(2 * (u - s), s1) + _scaled(2 * (u - s), s0)
        return centre, first, second
    m1, m2 = sums(-gamma), sums(-2 * gamma)
    half = -s - math.log(2.0)
    centre = np.sinh(u) * math.exp(-s)
    first = (_scaled(u + half, s1) - _scaled(u + half, s0)) - (
        _scaled(-u + half, m1) - _scaled(-u + half, s0)
    )
    quarter = 2 * half
    second = np.zeros_like(u)
    for sign, twice, once in ((1.0, s2, s1), (-1.0, m2, m1)):
        scale = sign * 2 * u + quarter
        second += _scaled(scale, twice) - 2 * _scaled(scale, once) + _scaled(scale, s0)
    second -= 2 * math.exp(quarter) * (2 * one - np.exp(s1) - np.exp(m1))
    return centre, first, second


def transformed_moments(q: np.ndarray, t: float, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """Return the mean and variance of each group's released value on a transformed grid.

    ``q`` (int64) are the groups' grid values before the noise, ``t`` the noise scale in
    grid steps; the column is a float one (an integer column's rounding is added by the
    caller). The grid values ``0 .. a`` are released as ``lower`` and ``D - b .. D`` as
    ``upper`` (:func:`~dpfast._release.forecast.bound_steps`), with chances from the
    exact tails; the values between as ``f``, summed in closed form (module docstring).
    Exact up to float64 rounding: the variance is a difference of sums of the size of
    ``(value - f(q))²``, so the standard error is within about ``1e-8`` of ``|f(q)|``.

    Examples
    --------
    >>> grid = Grid.for_column(0.0, 1000.0, 100, transform="log")
    >>> mean, variance = transformed_moments(np.array([grid.d_int // 2]), 0.0, grid)
    >>> round(float(mean[0]), 3), float(variance[0])
    (30.639, 0.0)
    """
    q = np.asarray(q, dtype=np.int64)
    if t == 0 or grid.d_int == 0:
        return grid.values(q), np.zeros(q.shape[0])
    d = grid.d_int
    a, b = bound_steps(grid, False)
    a, b = (-1 if a is None else a), (-1 if b is None else b)
    p_low = noise.discrete_laplace_at_least(t, q - a) if a >= 0 else np.zeros(q.shape[0])
    p_high = noise.discrete_laplace_at_least(t, d - b - q) if b >= 0 else np.zeros(q.shape[0])
    centre, first, second = _centred_interior(q, t, grid, a + 1 - q, d - b - 1 - q)
    below, above = grid.lower - centre, grid.upper - centre
    shift = first + below * p_low + above * p_high
    square = second + below**2 * p_low + above**2 * p_high
    variance = np.maximum(square - shift**2, 0.0)
    return centre + shift, variance
