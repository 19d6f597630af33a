"""Microaggregation: individual ranking on an exact integer grid.

The public partition function :func:`ranking_labels` gives the rank groups of SPEC §1.3
(stable order, groups of ``k``, the remainder in the last group). :func:`ir_column`
runs the whole per-column pipeline of individual-ranking DP on a :class:`~dpfast.grid.Grid`.
The multivariate partitions :func:`mdav_labels` and :func:`insensitive_mdav_labels` live in
:mod:`dpfast.mdav` and are re-exported here.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpfast._kernels import ranking
from dpfast.grid import Grid
from dpfast.mdav import insensitive_mdav_labels, mdav_labels

__all__ = [
    "centroid_sensitivity",
    "group_means",
    "insensitive_mdav_labels",
    "ir_column",
    "mdav_labels",
    "noise_scale_steps",
    "ranking_labels",
]


def ranking_labels(values: np.ndarray, k: int) -> np.ndarray:
    """Rank groups of individual ranking for one column.

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
    k : int
        Minimum group size, ``1 <= k <= n``.

    Returns
    -------
    ndarray of int64, shape (n,)
        Group of each row, numbered ``0 .. n // k - 1`` in increasing value order. Rows are
        ordered by value, ties by row index; groups have ``k`` rows, the last ``k .. 2k-1``.

    Examples
    --------
    >>> ranking_labels(np.array([5.0, 1.0, 3.0, 2.0, 4.0]), 2).tolist()
    [1, 0, 1, 0, 1]
    """
    order = np.argsort(values, kind="stable")
    _, labels = ranking.float_group_means(values, order, k, values.shape[0] // k)
    return labels  # type: ignore[no-any-return]


def group_means(values: np.ndarray, k: int) -> np.ndarray:
    """Replace each value of a column by the mean of its rank group (no noise, not DP).

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
    k : int

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    order = np.argsort(values, kind="stable")
    means, labels = ranking.float_group_means(values, order, k, values.shape[0] // k)
    return means[labels]  # type: ignore[no-any-return]


def centroid_sensitivity(grid: Grid, n_records: int, k: int) -> Fraction:
    """L1 sensitivity, in grid steps, of one column's rounded centroid list.

    Lemma 1 of Sánchez et al. (2016) bounds the exact centroids' change by ``d_int / k``
    (SPEC §1.4). Rounding each centroid to the grid adds at most one step per group that
    changes, hence ``d_int / k + n_groups`` (SPEC §2.4).
    """
    return Fraction(grid.d_int, k) + (n_records // k)


def noise_scale_steps(sensitivity: Fraction, epsilon: float) -> int:
    """Smallest integer discrete-Laplace scale ``t >= sensitivity / epsilon``."""
    exact = sensitivity / Fraction(epsilon)
    return math.ceil(exact)


def ir_column(
    values: np.ndarray,
    grid: Grid,
    k: int,
    noise: np.ndarray,
    destination: np.ndarray,
    round_values: bool,
    out: np.ndarray,
) -> int:
    """Individual-ranking release of one column on ``grid``; returns the clamped count.

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
        Never written.
    grid : Grid
    k : int
    noise : ndarray of int64, shape (n // k,)
        One draw per rank group, in grid steps.
    destination : ndarray of int64, shape (n,) or (0,)
        Output position of each input row (empty: input order). Ranking ties still go to
        the lower input row.
    round_values : bool
        Round released values to integers (post-processing).
    out : ndarray of float64, shape (n,)
        Receives the released column.
    """
    packed, n_clamped = ranking.pack_quantised(
        values, grid.lower, grid.upper, grid.gamma, grid.d_int, grid.index_bits, destination
    )
    key_bits = max(1, grid.d_int.bit_length())
    packed = ranking.radix_sort_packed(packed, grid.index_bits, key_bits)
    ranking.release_groups(
        packed,
        grid.index_bits,
        k,
        noise,
        grid.d_int,
        grid.lower,
        grid.upper,
        grid.gamma,
        round_values,
        out,
    )
    return int(n_clamped)
