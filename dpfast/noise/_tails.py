"""What discrete Laplace noise does to values clamped to a public range, in closed form.

A release's forecast (docs/forecast.md) reads these from the noise scale and the public
width alone: the noise's standard deviation, and the share of released values that the
clamp puts on a bound when the values before the noise are spread evenly over the range.
"""

from __future__ import annotations

import math

from dpfast._validation import check_int
from dpfast.exceptions import DPFastValueError


def _check_scale(scale: float) -> float:
    value = float(scale)
    if not (math.isfinite(value) and value >= 0):
        raise DPFastValueError(f"scale must be a finite number >= 0, got {scale!r}")
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


def on_bound_share(scale: float, width: int) -> float:
    """Return the expected share of clamped values on a bound, for values spread evenly.

    A value ``q`` uniform on the grid ``{0, 1, ..., D}`` gets discrete Laplace noise
    ``Y`` of scale ``t`` and is clamped to ``[0, D]``; it lands on a bound when
    ``q + Y <= 0`` or ``q + Y >= D``. With ``r = exp(-1/t)``, ``P(Y <= -j) =
    r**j / (1 + r)`` for every ``j >= 0``, so (docs/forecast.md#derivation)::

        share = 2 (1 - r**(D + 1)) / ((D + 1) (1 + r) (1 - r))

    which tends to the continuous ``(b / W) (1 - exp(-W / b))`` as the grid gets finer
    (``b = t * gamma``, ``W = D * gamma``, ``gamma`` the grid step). A zero-width range
    (``D = 0``) has every value on its bound; with no noise only the two end points are.

    Parameters
    ----------
    scale : float
        ``t >= 0``, in grid steps.
    width : int
        ``D >= 0``, the range's width in grid steps.

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
    """
    t = _check_scale(scale)
    d = check_int(width, "width", low=0)
    if d == 0:
        return 1.0
    if t == 0:
        return min(1.0, 2.0 / (d + 1))
    one_minus_r = -math.expm1(-1.0 / t)
    one_minus_power = -math.expm1(-(d + 1) / t)
    share = 2.0 * one_minus_power / ((d + 1) * (2.0 - one_minus_r) * one_minus_r)
    return min(1.0, share)
