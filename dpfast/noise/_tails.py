"""What discrete Laplace noise does to values clamped to a public range, in closed form.

A release's public forecast (docs/forecast.md) reads these from the noise scale and the
public width alone: the noise's standard deviation, and the share of released values that
the clamp puts on a bound when the values before the noise are spread evenly over the
range. Its forecast from the data reads, for each group's value ``q`` on the grid, the
noise's exact tail sums (:func:`discrete_laplace_at_least`) and the mean and variance of
``clamp(q + Y, 0, D)`` (:func:`clamped_moments`, docs/forecast.md#from-the-data).
"""

from __future__ import annotations

import math

import numpy as np

from dpfast._validation import check_int, quoted
from dpfast.exceptions import DPFastValueError


def _check_scale(scale: float) -> float:
    value = float(scale)
    if not (math.isfinite(value) and value >= 0):
        raise DPFastValueError(f"scale must be a finite number >= 0, got {quoted(scale)}")
    return value


def discrete_laplace_sd(scale: float) -> float:
    """Return the standard deviation of discrete Laplace noise of scale ``t``.

    ``P(Y = y) = (1 - r) / (1 + r) * r**|y|`` with ``r = exp(-1 / t)`` (the noise of
    :func:`~dpfast.noise.discrete_laplace`) has variance ``2 r / (1 - r)**2``; for large
    ``t`` the standard deviation approaches the continuous Laplace's ``sqrt(2) t``.

    Parameters
    ----------
    scale : float
        ``t >= 0`` in grid steps (``0``: no noise).

    Returns
    -------
    float
        In grid steps.

    Examples
    --------
    >>> round(discrete_laplace_sd(1.0), 4)
    1.357
    >>> round(discrete_laplace_sd(1000.0) / (2 ** 0.5 * 1000), 6)
    1.0
    """
    t = _check_scale(scale)
    if t == 0:
        return 0.0
    one_minus_r = -math.expm1(-1.0 / t)
    return math.sqrt(2.0 * math.exp(-1.0 / t)) / one_minus_r


def _below(t: float, d: int, a: int) -> float:
    """Return ``sum over q in 0..d of P(q + Y <= a)``, for ``0 <= a < d``."""
    if t == 0:
        return float(a + 1)
    one_minus_r = -math.expm1(-1.0 / t)
    r = 1.0 - one_minus_r

    def powers(n: int) -> float:  # r + r**2 + ... + r**n
        return r * -math.expm1(-n / t) / one_minus_r

    return (a + 1) + (powers(d - a) - powers(a + 1)) / (1.0 + r)


def on_bound_share(scale: float, width: int, low: int | None = 0, high: int | None = 0) -> float:
    """Return the expected share of clamped values on a bound, for values spread evenly.

    A value ``q`` uniform on the grid ``{0, 1, ..., D}`` gets discrete Laplace noise
    ``Y`` of scale ``t`` and is clamped to ``[0, D]``; it lands on a bound when
    ``q + Y <= 0`` or ``q + Y >= D``. With ``r = exp(-1/t)``, ``P(Y <= -j) =
    r**j / (1 + r)`` for every ``j >= 0``, so (docs/forecast.md#derivation)::

        share = 2 (1 - r**(D + 1)) / ((D + 1) (1 + r) (1 - r))

    which tends to the continuous ``(b / W) (1 - exp(-W / b))`` as the grid gets finer
    (``b = t * gamma``, ``W = D * gamma``, ``gamma`` the grid step). A zero-width range
    (``D = 0``) has every value on its bound; with no noise only the two end points are.

    ``low`` and ``high`` widen the bounds for rounding: the grid values ``0 .. low`` are
    released as the lower bound and ``D - high .. D`` as the upper one (an integer column
    rounds the values within half a unit of an integer bound onto it); ``None``: no grid
    value is released as that bound (an integer column's bound that is not a whole
    number).

    Parameters
    ----------
    scale : float
        ``t >= 0``, in grid steps.
    width : int
        ``D >= 0``, the range's width in grid steps.
    low, high : int or None
        Grid steps from each end released as the bound (default 0: the end only).

    Returns
    -------
    float
        In ``[0, 1]``.

    Examples
    --------
    >>> round(on_bound_share(10.0, 2), 4)  # three grid points, much noise
    0.9532
    >>> round(on_bound_share(2**30, 2**40), 6)  # b / W = 2**-10
    0.000977
    >>> on_bound_share(0.0, 9, low=1, high=2)  # no noise: 2 + 3 of the 10 grid values
    0.5
    """
    t = _check_scale(scale)
    d = check_int(width, "width", low=0)
    ends = [None if e is None else check_int(e, "low and high", low=0) for e in (low, high)]
    if d == 0:
        return 1.0
    if ends[0] is not None and ends[1] is not None and ends[0] + ends[1] >= d:
        return 1.0  # every grid value is released as one bound or the other
    count = sum(_below(t, d, a) for a in ends if a is not None)
    return min(1.0, max(0.0, count / (d + 1)))


def _rate(t: float) -> tuple[float, float]:
    """Return ``(r, 1 - r)`` for ``r = exp(-1/t)``, ``1 - r`` without cancellation."""
    one_minus_r = -math.expm1(-1.0 / t)
    return 1.0 - one_minus_r, one_minus_r


def discrete_laplace_at_least(scale: float, y: np.ndarray) -> np.ndarray:
    """Return ``P(Y >= y)`` for discrete Laplace noise ``Y`` of scale ``t``, per ``y``.

    ``P(Y >= j) = r**j / (1 + r)`` for ``j >= 0`` and, by symmetry, ``P(Y >= y) = 1 -
    r**(1 - y) / (1 + r)`` for ``y <= 0``, with ``r = exp(-1/t)`` (docs/forecast.md#derivation).

    Parameters
    ----------
    scale : float
        ``t >= 0`` in grid steps (``0``: no noise, ``Y = 0``).
    y : array of int
        Thresholds in grid steps.

    Returns
    -------
    numpy.ndarray of float64

    Examples
    --------
    >>> discrete_laplace_at_least(1.0, np.array([-1, 0, 1, 2])).round(4)
    array([0.9011, 0.7311, 0.2689, 0.0989])
    """
    t = _check_scale(scale)
    y = np.asarray(y, dtype=np.float64)
    if t == 0:
        return (y <= 0).astype(np.float64)
    r, _ = _rate(t)
    upper = np.exp(-np.maximum(y, 0.0) / t) / (1.0 + r)
    lower = 1.0 - np.exp(-np.maximum(1.0 - y, 0.0) / t) / (1.0 + r)
    return np.where(y >= 0, upper, lower)


def clamped_moments(scale: float, width: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the mean shift and the variance of ``clamp(q + Y, 0, D)``, per grid value ``q``.

    ``Y`` is discrete Laplace noise of scale ``t``; ``q`` lies in ``[0, D]``. Write
    ``clamp(q + Y, 0, D) = q + Y - U + L`` with ``U = (Y - (D - q))⁺`` and ``L = (-Y - q)⁺``
    (at most one of them is not 0). With ``r = exp(-1/t)`` and, for ``m >= 0``,
    ``B(m) = E[(Y - m)⁺] = r**(m+1) / ((1 + r)(1 - r))`` and ``C(m) = E[((Y - m)⁺)²] =
    r**(m+1) / (1 - r)²`` (``L`` has the law of ``(Y - q)⁺``)::

        E[clamp] - q = B(q) - B(D - q)
        E[(clamp - q)²] = 2 r / (1 - r)² - C(q) - C(D - q) - 2 q B(q) - 2 (D - q) B(D - q)

    (docs/forecast.md#from-the-data). The variance is exact up to float64 rounding, which
    it loses only where the noise is a million times the width or more (then every value
    is on a bound); it is kept in ``[0, D²/4]``, the most any value in ``[0, D]`` can have.

    Parameters
    ----------
    scale : float
        ``t >= 0`` in grid steps.
    width : int
        ``D >= 0``.
    q : array of int
        Grid values in ``[0, D]``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``E[clamp(q + Y, 0, D)] - q`` and ``Var[clamp(q + Y, 0, D)]``, float64, in grid
        steps.

    Examples
    --------
    >>> shift, variance = clamped_moments(2.0, 10, np.array([0, 5, 10]))
    >>> shift.round(4), variance.round(4)
    (array([ 0.9531,  0.    , -0.9531]), array([2.8537, 5.617 , 2.8537]))
    """
    t = _check_scale(scale)
    d = check_int(width, "width", low=0)
    q = np.asarray(q, dtype=np.float64)
    if t == 0 or d == 0:
        return np.zeros(q.shape), np.zeros(q.shape)
    r, one_minus_r = _rate(t)
    far = d - q

    def b(m: np.ndarray) -> np.ndarray:
        return np.exp(-(m + 1.0) / t) / ((1.0 + r) * one_minus_r)

    def c(m: np.ndarray) -> np.ndarray:
        return np.exp(-(m + 1.0) / t) / one_minus_r**2

    shift = b(q) - b(far)
    second = 2.0 * r / one_minus_r**2 - c(q) - c(far) - 2.0 * q * b(q) - 2.0 * far * b(far)
    variance = np.clip(second - shift**2, 0.0, d * d / 4.0)
    return shift, variance


def log_mean_exp(scale: float, step: float) -> float:
    """Return ``log E[exp(step * Y)]`` for discrete Laplace ``Y`` of scale ``t`` (grid steps).

    The noise of a transformed column is ``step * Y`` on its transformed scale
    (docs/privacy.md#transforms); ``E[exp(step * Y)]`` is the factor by which it inflates
    the mean of ``exp`` of the value, and (``Y`` being symmetric) also ``E[cosh(step *
    Y)]``. With ``r = exp(-1 / t)``, summing the two geometric tails gives::

        E[exp(step * Y)] = (1 - r)**2 / ((1 - r e**step) (1 - r e**-step))
                         = 1 / (1 - 4 r sinh(step / 2)**2 / (1 - r)**2)

    finite while ``r e**step < 1``, that is while the scale ``b = t * step`` is below 1 on
    the transformed scale; it tends to the continuous Laplace's ``1 / (1 - b**2)`` as the
    grid gets finer.

    Parameters
    ----------
    scale : float
        ``t >= 0``, in grid steps (``0``: no noise).
    step : float
        The grid step ``> 0`` on the transformed scale.

    Returns
    -------
    float
        ``>= 0``; ``inf`` where the mean is infinite (``b >= 1``).

    Examples
    --------
    >>> round(log_mean_exp(2**20, 2**-22), 6) == round(-math.log1p(-0.25**2), 6)  # b = 1/4
    True
    >>> log_mean_exp(2**22, 2**-22), log_mean_exp(0, 1.0)  # b = 1; no noise
    (inf, 0.0)
    """
    t = _check_scale(scale)
    if not (math.isfinite(step) and step > 0):
        raise DPFastValueError(f"step must be a finite number > 0, got {quoted(step)}")
    if t == 0:
        return 0.0
    one_minus_r = -math.expm1(-1.0 / t)
    ratio = 4.0 * math.exp(-1.0 / t) * math.sinh(step / 2.0) ** 2 / one_minus_r**2
    if not ratio < 1.0:
        return math.inf
    return -math.log1p(-ratio)
