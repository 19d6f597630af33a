"""An exact DP quantile: the exponential mechanism over public candidates, from counts.

Candidate ``c_j`` holds the ranks ``[below_j, at_most_j]`` (the numbers of values under
it and at most it); its quality is minus the distance from the target rank ``q n`` to
that interval, in integer units of ``2**-QUANTILE_BITS`` record: ``-max(0, below_j 2**b -
t, t - at_most_j 2**b)`` with ``t = round(q n 2**b)``. Where no value sits on a candidate
the interval is one point and the quality is Smith's ``-|below_j - q n|``; a value held by
many records (an integer column) puts its candidate at distance 0 of every rank it covers.
Changing one record's value (bounded DP, ``n`` public) changes each count by at most one
and leaves ``t`` as it is, and the distance to an interval moves by at most the most either
end moves, so every quality moves by at most ``2**b`` units: the sensitivity, exactly
(docs/privacy.md#bounds-chosen-with-dp). The draw is
:func:`~dpfast.noise.exponential_mechanism`'s, exact.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from dpfast._validation import check_int, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.noise._exponential import exponential_mechanism

#: The target rank ``q n`` is rounded to a multiple of ``2**-QUANTILE_BITS`` record.
QUANTILE_BITS = 12
#: The sensitivity of the qualities, in their units: one record.
QUANTILE_SENSITIVITY = 1 << QUANTILE_BITS
_MAX_RECORDS = 2**50  # n 2**b stays below the qualities' limit of 2**62


def _counts(values: Any, name: str, n: int) -> np.ndarray:
    counts = np.asarray(values)
    if counts.ndim != 1 or not np.issubdtype(counts.dtype, np.integer):
        raise DPFastTypeError(
            f"{name} must be a 1-D integer array, got {counts.dtype} {counts.shape}"
        )
    if counts.size and (int(counts.min()) < 0 or int(counts.max()) > n):
        raise DPFastValueError(f"{name} must lie in [0, n = {n}]")
    return counts.astype(np.int64) * QUANTILE_SENSITIVITY


def quantile_quality(below: Any, at_most: Any, *, quantile: float, n: int) -> np.ndarray:
    """Return the integer qualities of the candidates: minus the target's distance to their ranks.

    ``-max(0, below 2**b - t, t - at_most 2**b)``, ``t = round(q n 2**b)`` (half to even,
    exactly), ``b`` = :data:`QUANTILE_BITS`.

    Parameters
    ----------
    below : array-like of int, shape (m,)
        How many of the ``n`` values lie under each candidate, in ``[0, n]``.
    at_most : array-like of int, shape (m,)
        How many lie under it or on it, ``>= below``.
    quantile : float
        ``q`` in ``[0, 1]``, read exactly.
    n : int
        The number of values (public under bounded DP).

    Returns
    -------
    numpy.ndarray
        ``int64`` qualities in units of ``2**-QUANTILE_BITS`` record, ``<= 0``.

    Examples
    --------
    >>> quantile_quality([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], quantile=0.5, n=4).tolist()
    [-8192, -4096, 0, -4096, -8192]
    >>> quantile_quality([0, 1, 3], [1, 3, 4], quantile=0.5, n=4).tolist()  # ties
    [-4096, 0, -4096]
    """
    n = check_int(n, "n", low=0, high=_MAX_RECORDS)
    low, high = _counts(below, "below", n), _counts(at_most, "at_most", n)
    if low.shape != high.shape or (low > high).any():
        raise DPFastValueError("below and at_most must have one shape, and below <= at_most")
    exact = Fraction(float(quantile))
    if not 0 <= exact <= 1:
        raise DPFastValueError(f"quantile must be in [0, 1], got {quoted(quantile)}")
    target = round(exact * n * QUANTILE_SENSITIVITY)  # half to even, exactly
    quality: np.ndarray = -np.maximum(np.maximum(low - target, target - high), 0)
    return quality


def exponential_quantile(
    key: np.ndarray,
    below: Any,
    at_most: Any,
    *,
    quantile: float,
    n: int,
    epsilon: float | Fraction,
    start: int = 0,
) -> int:
    """Draw the index of a candidate near the ``quantile`` of ``n`` values; exact, ``ε``-DP.

    Candidate ``j`` is drawn with probability proportional to ``b**(-quality_j)``
    (:func:`quantile_quality`), ``b`` the dyadic base of ``epsilon`` and the sensitivity of
    one record (:func:`~dpfast.noise.exponential_base`): ``Pr[j] ∝ exp(ε' u_j / 2)``, with
    ``u_j`` the distance from ``q n`` to ``[below_j, at_most_j]`` in records, negated, and
    ``ε' <= ε``: the exponential mechanism of McSherry and Talwar (2007) on the utility of
    Smith (2011) over a public candidate set. It reads the stream ``(key, start)`` only.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    below, at_most : array-like of int, shape (m,)
        How many of the values lie under each candidate, and under it or on it
        (:func:`quantile_quality`).
    quantile : float
        ``q`` in ``[0, 1]``.
    n : int
        The number of values.
    epsilon : float or fractions.Fraction
        The draw's budget, ``> 0``.
    start : int, optional
        The draw's nonce.

    Returns
    -------
    int
        The chosen candidate's index in ``below``.

    References
    ----------
    F. McSherry and K. Talwar, "Mechanism Design via Differential Privacy", FOCS 2007.
    A. Smith, "Privacy-preserving statistical estimation with optimal convergence rates",
    STOC 2011.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(3).key("doc")
    >>> below = np.array([0, 10, 450, 900, 990, 1000])  # 1,000 values under 6 candidates
    >>> exponential_quantile(key, below, below, quantile=0.99, n=1000, epsilon=1.0)
    4
    """
    quality = quantile_quality(below, at_most, quantile=quantile, n=n)
    if quality.size == 0:
        raise DPFastValueError("there must be at least one candidate")
    chosen = exponential_mechanism(
        key, quality[None, :], epsilon=epsilon, sensitivity=QUANTILE_SENSITIVITY, start=start
    )
    return int(chosen[0])
