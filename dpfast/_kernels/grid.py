"""Inline helpers for the integer grid of :mod:`dpfast.partitions.grid`, for numeric kernels.

A value ``x`` is clamped to ``[lower, upper]`` and quantised to ``q = rint((x - lower) /
gamma)`` in ``[0, d_int]``; a group of grid values is summed exactly in int64, its mean is
rounded half to even, noise is added and the result clamped to ``[0, d_int]``; a grid value
``y`` maps back to ``lower + gamma * y`` (rounded for integer columns, clamped to the
domain). Keeping the three steps here makes every mechanism use the same arithmetic.

A grid may apply a public monotone transform ``T`` (docs/privacy.md#transforms): its
``warp`` is then the tuple ``(code, origin, shift)``, with ``code`` :data:`LOG1P` or
:data:`ASINH`, ``origin = T(lower)`` and ``shift`` the logarithm of the noise's mean
factor ``E[e^Y]`` (0 for no correction). The clamped value is quantised as
``rint((T(x) - origin) / gamma)``, and a grid value ``y`` strictly inside ``(0, d_int)``
maps back to ``T^-1(origin + gamma * y)`` divided by that factor on the data's scale:
``expm1(z - shift)`` for ``log1p``, ``sinh(z) * exp(-shift)`` for ``asinh``; the grid's
end points map to the bounds themselves. Without a transform ``warp`` is ``None``: Numba
prunes the ``warp is None`` branches when it compiles a kernel for that type, so the
untransformed kernels are the arithmetic above, bit for bit and as fast as before (a
kernel is compiled once more, lazily, for a transformed grid).
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit_inline

#: The transform codes of a grid's ``warp`` (``dpfast.partitions.grid.TRANSFORM_CODES``).
LOG1P = 1
ASINH = 2


@jit_inline
def forward(x, code):
    """Return ``T(x)`` for transform ``code``: ``x``, ``log1p(x)`` or ``asinh(x)``."""
    if code == LOG1P:
        return np.log1p(x)
    if code == ASINH:
        return np.arcsinh(x)
    return x


@jit_inline
def quantise(x, lower, upper, gamma, d_int, warp):
    """Return ``(q, clamped)``: ``x``'s grid value and whether it lay outside the domain."""
    clamped = False
    if x < lower:
        x = lower
        clamped = True
    elif x > upper:
        x = upper
        clamped = True
    if warp is None:
        q = np.int64(np.rint((x - lower) / gamma))
    else:
        q = np.int64(np.rint((forward(x, warp[0]) - warp[1]) / gamma))
        if q < 0:
            q = np.int64(0)
    if q > d_int:
        q = d_int
    return q, clamped


@jit_inline
def noisy_mean(total, size, noise, d_int):
    """``round_half_even(total / size) + noise``, clamped to ``[0, d_int]`` (int64)."""
    quotient = total // size
    twice_rest = 2 * (total - quotient * size)
    if twice_rest > size or (twice_rest == size and quotient % 2 == 1):
        quotient += 1
    value = quotient + noise
    if value < 0:
        return np.int64(0)
    if value > d_int:
        return np.int64(d_int)
    return np.int64(value)


@jit_inline
def grid_value(y, lower, upper, gamma, round_values, d_int, warp):
    """Map grid value ``y`` back to the data's units, rounded if asked, within the domain."""
    if warp is None:
        value = lower + gamma * y
    elif y <= 0:
        value = lower
    elif y >= d_int:
        value = upper
    else:
        z = warp[1] + gamma * y
        if warp[0] == LOG1P:
            value = np.expm1(z - warp[2])
        else:
            value = np.sinh(z) * np.exp(-warp[2])
    if round_values:
        value = np.rint(value)
    if value > upper:
        return upper
    if value < lower:
        return lower
    return value
