"""Kernels for input checks that would otherwise allocate a mask per column."""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit


@jit
def non_finite(values):
    """Count non-finite values and find the first one.

    Parameters
    ----------
    values : float64[n]
        Any stride; never written.

    Returns
    -------
    count : int
    first : int
        Index of the first NaN or infinity, -1 if none.

    Complexity O(n), one pass and no temporary; ``np.isfinite(x).all()`` allocates an
    n-byte mask, which costs about as much as the check on 10M-row columns.
    """
    count = 0
    first = -1
    for i in range(values.shape[0]):
        if not np.isfinite(values[i]):
            if first < 0:
                first = i
            count += 1
    return count, first
