"""Interval disclosure: how often a released value's interval holds the original value.

See docs/risk.md#interval-disclosure.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable
from typing import Any

import numpy as np

from dpfast._validation import check_choice, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.risk._common import dpfast_errors, numeric_values, paired

_HINT = "interval disclosure needs numbers; leave it out of columns"


def check_percent(p: Any) -> float:
    """Return ``p`` as a float in ``[0, 100]`` (a percentage)."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise DPFastTypeError(f"p must be a percentage (a number in [0, 100]), got {quoted(p)}")
    value = float(p)
    if not (math.isfinite(value) and 0 <= value <= 100):
        raise DPFastValueError(
            f"p must be a percentage in [0, 100], got {quoted(p)}; e.g. p=10 for ±10%"
        )
    return value


def value_interval_hits(x: np.ndarray, y: np.ndarray, p: float) -> np.ndarray:
    """Whether ``x_i`` lies in ``[y_i - p% |y_i|, y_i + p% |y_i|]`` (bool per record)."""
    hits: np.ndarray = np.abs(x - y) <= (p / 100.0) * np.abs(y)
    return hits


def rank_interval_hits(x: np.ndarray, y: np.ndarray, p: float) -> np.ndarray:
    """Whether ``x_i`` lies in the rank interval around ``y_i`` (bool per record).

    With the original's values sorted, ``x_(0) <= ... <= x_(n-1)``, ``y`` falls at positions
    ``[lo, hi)`` (``lo = #{x < y}``, ``hi = #{x <= y}``). Its interval runs from the order
    statistic ``w = floor(p n / 100)`` ranks below ``lo`` to the one ``w`` ranks above
    ``hi - 1`` (clipped to the ends): ``[x_(lo - w), x_(hi - 1 + w)]``, empty when
    ``lo - w > hi - 1 + w``.
    """
    n = x.shape[0]
    ordered = np.sort(x)
    w = math.floor(p * n / 100)
    low = np.maximum(np.searchsorted(ordered, y, side="left") - w, 0)
    high = np.minimum(np.searchsorted(ordered, y, side="right") - 1 + w, n - 1)
    nonempty = low <= high
    hits: np.ndarray = (
        nonempty & (ordered[np.minimum(low, n - 1)] <= x) & (x <= ordered[np.maximum(high, 0)])
    )
    return hits


def interval_disclosure(
    original: Any, released: Any, *, columns: Any = None, p: float = 10.0, method: str = "rank"
) -> dict[Hashable, float]:
    """Per column, the share of released values whose ±p% interval holds the original value.

    Interval disclosure (Domingo-Ferrer, Mateo-Sanz and Torra 2001): an intruder who sees
    the released value ``y_i`` guesses that the original value ``x_i`` lies in an interval
    around it; the measure is how often that guess is right. See
    docs/risk.md#interval-disclosure.

    - ``method="rank"`` (the standard one): the interval around ``y_i`` spans ``p`` percent
      of the records on either side in the original's order: from the order statistic
      ``⌊p n / 100⌋`` ranks below the position of ``y_i`` among the original values to the
      one as many ranks above it. It does not depend on the column's scale.
    - ``method="value"``: ``[y_i - (p/100)|y_i|, y_i + (p/100)|y_i|]``, ±p% of the value.

    Parameters
    ----------
    original, released : table
        Row-aligned tables (or a :class:`dpfast.Release` that keeps the row order), as for
        :func:`record_linkage`.
    columns : list, optional
        Numeric columns; default: every column of the release.
    p : float
        The interval's half-width in percent, in ``[0, 100]``.
    method : {"rank", "value"}

    Returns
    -------
    dict
        ``{column: share}``, each share in ``[0, 1]``.

    Raises
    ------
    ValueError
        Tables of different lengths, a shuffled Release, unknown columns, NaN or infinite
        values, ``p`` out of range (all also ``dpfast.exceptions.DPFastError``).
    TypeError
        A column that is not numeric.

    References
    ----------
    Domingo-Ferrer, J., Mateo-Sanz, J. M. and Torra, V. (2001). Comparing SDC methods for
    microdata on the basis of information loss and disclosure risk. NTTS-ETK 2001.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfast import risk
    >>> x = np.array([100.0, 200.0, 300.0, 400.0])
    >>> y = np.array([105.0, 150.0, 310.0, 390.0])
    >>> risk.interval_disclosure(x, y, p=10, method="value")
    {0: 0.75}
    >>> risk.interval_disclosure(x, y, p=25, method="rank")  # one rank on either side
    {0: 1.0}
    """
    p = check_percent(p)
    with dpfast_errors():
        method = check_choice(method, "method", ("rank", "value"))
    pair = paired(original, released, columns, "interval_disclosure")
    hits = rank_interval_hits if method == "rank" else value_interval_hits
    shares = {}
    for name in pair.names:
        x = numeric_values(pair.original, name, "original", _HINT)
        y = numeric_values(pair.released, name, "released", _HINT)
        shares[name] = float(np.mean(hits(x, y, p)))
    return shares
