"""What discrete Laplace noise does to values clamped to a public range, in closed form.

A release's forecast (docs/forecast.md) reads these from the noise scale and the public
width alone: the noise's standard deviation, and the share of released values that the
clamp puts on a bound when the values before the noise are spread evenly over the range.
"""

from __future__ import annotations

import math

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
