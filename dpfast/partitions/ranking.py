"""Individual ranking: the rank groups of one column (docs/design.md#ranking-partition).

Rows are ordered by value (ties by row index) and cut into groups of ``k`` consecutive
ranks, the remainder joining the last group. The grouping depends on the ranks alone, so
one changed value moves each group's mean by a telescoping amount (Lemma 1 of Sánchez et
al. 2016). The DP release of these groups, on an exact integer grid, is
:func:`dpfast.ir_dp`.
"""

from __future__ import annotations

import numpy as np

from dpfast._kernels import ranking

__all__ = ["group_means", "ranking_labels"]


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
