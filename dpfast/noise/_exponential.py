"""The exponential mechanism: per-row draws, log-weight draws and sorted rank groups."""

from __future__ import annotations

import numpy as np

from dpfast._kernels import exponential as _em
from dpfast._validation import check_int, check_positive
from dpfast.noise._common import _check_key, _check_range

EM_SAMPLER_NAME = (
    "exponential mechanism: float64 log-sum-exp weights, inverse CDF on a 2**63-scaled "
    "integer CDF, one 63-bit word of a ChaCha20 keyed stream per draw (the small float "
    "approximation of docs/design.md#em-sampler)"
)


def _em_scale(epsilon: object, sensitivity: object) -> float:
    return check_positive(epsilon, "epsilon") / (2.0 * check_positive(sensitivity, "sensitivity"))


def _check_quality(quality: object, scale: float) -> np.ndarray:
    array = np.asarray(quality, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(
            "quality must be a 2-D array (draws x candidates) with at least one candidate, "
            f"got shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError("quality must be finite")
    if array.size and not float(np.abs(array).max()) * scale < 1e300:
        raise ValueError(
            "epsilon * quality / (2 * sensitivity) overflows float64; rescale the qualities"
        )
    return np.ascontiguousarray(array)


def exponential_probabilities(
    quality: np.ndarray, *, epsilon: float, sensitivity: float
) -> np.ndarray:
    """Return the target probabilities of :func:`exponential_mechanism` (float64, per row).

    ``Pr[c] = exp(ε q_c / (2 Δq)) / Σ_j exp(ε q_j / (2 Δq))``, computed with the
    log-sum-exp shift. For tests and for reporting; it draws nothing.

    Parameters
    ----------
    quality : array-like of float, shape (n, m)
    epsilon, sensitivity : float
        ``ε`` and ``Δq``, both ``> 0``.

    Returns
    -------
    ndarray of float64, shape (n, m)

    Examples
    --------
    >>> exponential_probabilities([[0.0, -1.0]], epsilon=2.0, sensitivity=1.0).round(4)
    array([[0.7311, 0.2689]])
    """
    scale = _em_scale(epsilon, sensitivity)
    weights = scale * _check_quality(quality, scale)
    weights = np.exp(weights - weights.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


def exponential_mechanism(
    key: np.ndarray,
    quality: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    start: int = 0,
) -> np.ndarray:
    """Exponential mechanism: one draw per row of ``quality``.

    Row ``g`` picks column ``c`` with probability ``∝ exp(ε q[g, c] / (2 Δq))`` (McSherry
    and Talwar 2007). Weights are computed in float64 with the log-sum-exp shift, then
    turned into an integer CDF scaled to ``2**63``; the draw is the first column whose
    threshold exceeds a 63-bit uniform taken from the first word of the stream
    ``(key, nonce = start + g)``. This is the small, documented float approximation of
    docs/design.md#em-sampler (:data:`EM_SAMPLER_NAME`), not an exact sampler. Draw ``g`` reads
    only its own stream, so chunked calls with matching ``start`` give the same draws.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    quality : array-like of float, shape (n, m)
        Quality of each candidate in each draw (e.g. from
        :func:`dpfast.partitions.categorical.cluster_quality`).
    epsilon : float
        Budget of each draw's mechanism.
    sensitivity : float
        ``Δq``, the most one record can change a quality.
    start : int, optional
        Nonce of the first draw.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(n,)``: the chosen column of each row.

    Raises
    ------
    TypeError, ValueError
        On a malformed key, a non-finite quality, or ``epsilon`` or ``sensitivity``
        not ``> 0``.

    References
    ----------
    F. McSherry and K. Talwar, "Mechanism Design via Differential Privacy", FOCS 2007.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> exponential_mechanism(key, [[0.0, -1.0, -5.0]] * 6, epsilon=2.0, sensitivity=1.0)
    array([0, 0, 0, 0, 0, 1])
    """
    key = _check_key(key)
    scale = _em_scale(epsilon, sensitivity)
    array = _check_quality(quality, scale)
    size, start = _check_range(array.shape[0], start)
    out = np.empty(size, dtype=np.int64)
    if size > 0:
        _em.em_rows(key, array, scale, np.uint64(start), out)
    return out


def exponential_mechanism_log_weights(
    key: np.ndarray, log_weights: np.ndarray, *, start: int = 0
) -> int:
    """Draw one index ``i`` with probability ``exp(log_weights[i]) / Σ_j exp(log_weights[j])``.

    The same sampler as :func:`exponential_mechanism` (log-sum-exp shift, integer CDF,
    the first 63-bit word of the stream ``(key, nonce = start)``), for mechanisms whose
    weights are not ``exp(scale * quality)`` alone, such as the interval exponential
    mechanism of DiffGen's split values (weights ``exp(ε u / (2 Δu)) * |interval|``).

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    log_weights : array-like of float, shape (m,)
        Finite natural logarithms of the (unnormalised) weights, ``m >= 1``.
    start : int, optional
        Nonce of the draw.

    Returns
    -------
    int

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> exponential_mechanism_log_weights(key, np.log([1.0, 0.0 + 1e-300, 1e-300]))
    0
    """
    key = _check_key(key)
    row = _check_quality(np.asarray(log_weights, dtype=np.float64).reshape(1, -1), 1.0)
    _, start = _check_range(1, start)
    out = np.empty(1, dtype=np.int64)
    _em.em_rows(key, row, 1.0, np.uint64(start), out)
    return int(out[0])


def exponential_mechanism_sorted_groups(
    key: np.ndarray,
    counts: np.ndarray,
    k: int,
    distance: np.ndarray,
    *,
    epsilon: float,
    sensitivity: float,
    start: int = 0,
) -> np.ndarray:
    """Exponential-mechanism centroid of each rank group of a sorted categorical column.

    The sorted column holds ``counts[r]`` copies of value ``r`` for ``r = 0 .. m-1``, in
    that order, and is cut into ``n // k`` groups of ``k`` (the remainder joins the last
    group). Group ``g`` draws candidate ``c`` with quality ``-Σ_{x in g} distance[c, x]``
    (docs/design.md#em-centroid, Algorithm 2 of Sánchez et al. 2016) exactly as
    :func:`exponential_mechanism` does for that quality row, from stream
    ``(key, start + g)``. Groups made of one value share their CDF, so the cost is about
    one ChaCha20 block per group.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    counts : array-like of int, shape (m,)
        Copies of each value, in sorted order; their sum ``n`` must be ``>= k``.
    k : int
        Group size, ``>= 1``.
    distance : array-like of float, shape (m, m)
        ``distance[c, r]``: distance between candidate ``c`` and value ``r``.
    epsilon, sensitivity : float
        As for :func:`exponential_mechanism`.
    start : int, optional
        Nonce of group 0.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(n // k,)``: the chosen candidate of each group.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(1).key("doc")
    >>> distance = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> exponential_mechanism_sorted_groups(key, [6, 4], 5, distance, epsilon=50.0,
    ...                                     sensitivity=1.0)
    array([0, 1])
    """
    key = _check_key(key)
    scale = _em_scale(epsilon, sensitivity)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    distance = np.ascontiguousarray(distance, dtype=np.float64)
    m = counts.shape[0]
    if counts.ndim != 1 or m == 0 or distance.shape != (m, m):
        raise ValueError(
            f"counts must be 1-D and non-empty and distance of shape (m, m); got "
            f"{counts.shape} and {distance.shape}"
        )
    if (counts < 0).any():
        raise ValueError("counts must be >= 0")
    k = check_int(k, "k", low=1, high=2**62)
    n = int(counts.sum())
    if n < k:
        raise ValueError(f"the column has {n} values, fewer than k = {k}")
    size, start = _check_range(n // k, start)
    out = np.empty(size, dtype=np.int64)
    _em.em_sorted_groups(key, counts, k, distance, scale, np.uint64(start), out)
    return out
