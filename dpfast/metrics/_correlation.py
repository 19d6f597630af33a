"""The error of the correlation matrix: how far a release moves the correlations."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpfast._validation import quoted
from dpfast.exceptions import DPFastValueError
from dpfast.metrics._common import as_float, columns_of
from dpfast.metrics._loss import correlation_change, covariance


def _matrix(data: Any, label: str) -> tuple[list[Any], np.ndarray]:
    names, columns, single = columns_of(data)
    if single or len(names) < 2:
        raise DPFastValueError(
            f"the {label} table has {len(names)} column(s); a correlation matrix needs at "
            "least two numeric columns"
        )
    matrix = np.column_stack([as_float(columns[name], name) for name in names])
    if matrix.shape[0] < 2:
        raise DPFastValueError(
            f"the {label} table has {matrix.shape[0]} row(s); correlations need at least two"
        )
    if not np.isfinite(matrix).all():
        raise DPFastValueError(
            f"the {label} table holds NaN or inf; the correlation error needs finite numbers"
        )
    return names, matrix


def correlation_error(original: Any, released: Any) -> float:
    """Mean absolute change of the correlations between columns (docs/metrics.md).

    With ``r_ij`` the Pearson correlation of columns ``i`` and ``j`` of the original and
    ``r'_ij`` that of the release, over the ``p (p - 1) / 2`` pairs of ``p`` columns::

        correlation_error = (2 / (p (p - 1))) Σ_{i<j} |r_ij - r'_ij|        in [0, 2]

    IL5 of :func:`information_loss`, for tables of any row counts: each table's
    correlations are its own, so the rows need not be paired, nor be as many. A pair whose
    correlation is undefined in a table (a constant column) counts 0 when the two tables'
    variances and covariance of the pair are equal, and is left out otherwise (as IL5).

    Parameters
    ----------
    original, released : DataFrame, Arrow table or 2-D NumPy array
        Numeric and finite, with the same columns (two or more), and two rows or more each.

    Returns
    -------
    float
        0 when every correlation is kept; NaN when no pair's change is defined.

    Raises
    ------
    TypeError
        A non-numeric column.
    ValueError
        Different columns, fewer than two columns or rows, NaN or inf.

    Examples
    --------
    >>> x = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 7.0]])
    >>> correlation_error(x, x)
    0.0
    >>> round(correlation_error(x, x[:, ::-1] * [1.0, -1.0]), 4)  # r' = -r
    1.9868
    """
    names, x = _matrix(original, "original")
    released_names, y = _matrix(released, "released")
    if names != released_names:
        raise DPFastValueError(
            f"original and released must have the same columns, got {quoted(names)} and "
            f"{quoted(released_names)}"
        )
    v, w = covariance(x, 0), covariance(y, 0)
    p = x.shape[1]
    changes = [correlation_change(v, w, i, j) for j in range(p) for i in range(j)]
    defined = [change for change in changes if change is not None]
    return float(np.mean(defined)) if defined else math.nan
