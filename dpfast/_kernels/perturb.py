"""Kernels for per-cell perturbation on an integer grid."""

from __future__ import annotations

from dpfast._jit import jit
from dpfast._kernels.grid import grid_value, quantise


@jit
def laplace_cells(values, lower, upper, gamma, d_int, noise, round_values, out, warp):
    """Clamp, quantise, add one noise draw per cell, clamp again and map back.

    Parameters
    ----------
    values : float64[n]
        Never written.
    lower, upper, gamma : float
        Public domain and grid step (a power of two).
    d_int : int
        Domain width in grid steps.
    noise : int64[n]
        Discrete Laplace draws in grid steps, one per cell.
    round_values : bool
        Round to integers after the noise (post-processing).
    out : float64[n]
        Receives the released values.
    warp : tuple or None
        The grid's transform, ``(code, origin, shift)``, or ``None`` (:mod:`dpfast._kernels.grid`).

    Returns
    -------
    int
        Number of inputs outside ``[lower, upper]``.

    Complexity O(n). Fused in one pass, this beats the NumPy chain of clip, rint, add, clip
    and multiply, which makes five passes with temporaries (``benchmarks/bench_ir_dp.py``).
    """
    n = values.shape[0]
    n_clamped = 0
    for i in range(n):
        q, clamped = quantise(values[i], lower, upper, gamma, d_int, warp)
        n_clamped += clamped
        y = min(max(q + noise[i], 0), d_int)
        out[i] = grid_value(y, lower, upper, gamma, round_values, d_int, warp)
    return n_clamped
