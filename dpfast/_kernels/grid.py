"""Inline helpers for the integer grid of :mod:`dpfast.partitions.grid`, for numeric kernels.

A value ``x`` is clamped to ``[lower, upper]`` and quantised to ``q = rint((x - lower) /
gamma)`` in ``[0, d_int]``; a group of grid values is summed exactly in int64, its mean is
rounded half to even, noise is added and the result clamped to ``[0, d_int]``; a grid value
``y`` maps back to ``lower + gamma * y`` (rounded for integer columns, clamped to the
domain). Keeping the three steps here makes every mechanism use the same arithmetic.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit_inline


@jit_inline
def quantise(x, lower, upper, gamma, d_int):
    """Return ``(q, clamped)``: ``x``'s grid value and whether it lay outside the domain."""
    clamped = False
    if x < lower:
        x = lower
        clamped = True
    elif x > upper:
        x = upper
        clamped = True
    q = np.int64(np.rint((x - lower) / gamma))
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
def grid_value(y, lower, upper, gamma, round_values):
    """Map grid value ``y`` back to the data's units, rounded if asked, within the domain."""
    value = lower + gamma * y
    if round_values:
        value = np.rint(value)
    if value > upper:
        return upper
    if value < lower:
        return lower
    return value
