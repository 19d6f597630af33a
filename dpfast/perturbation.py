"""Per-cell perturbation of numeric columns on the exact integer grid of :mod:`dpfast.grid`."""

from __future__ import annotations

import numpy as np

from dpfast._kernels import perturb
from dpfast.grid import Grid


def laplace_column(
    values: np.ndarray, grid: Grid, noise: np.ndarray, round_values: bool
) -> tuple[np.ndarray, int]:
    """Add one discrete Laplace draw (grid steps) to every cell of a column.

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
        Never written.
    grid : Grid
    noise : ndarray of int64, shape (n,)
    round_values : bool
        Round to integers after the noise (post-processing).

    Returns
    -------
    released : ndarray of float64, shape (n,)
    n_clamped : int
        Inputs that lay outside the domain.
    """
    out = np.empty(values.shape[0], dtype=np.float64)
    n_clamped = perturb.laplace_cells(
        values, grid.lower, grid.upper, grid.gamma, grid.d_int, noise, round_values, out
    )
    return out, int(n_clamped)
