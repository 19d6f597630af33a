"""Exact discrete Laplace samplers of integer scale and of rational rate.

Also the privacy map :func:`rate_at_most` and :func:`unsafe_float_laplace`, the naive
floating-point sampler kept for comparison only.
"""

from __future__ import annotations

import math
import numbers
import warnings
from fractions import Fraction

import numpy as np

from dpfast._kernels import dlaplace as _dl
from dpfast._validation import check_int, quoted
from dpfast.exceptions import DPFastValueError, UnsafeSamplerWarning
from dpfast.noise._common import (
    _MAX_SCALE,
    _check_key,
    _check_range,
    _run_chunks,
    _threads_for,
)

SAMPLER_NAME = "exact discrete Laplace (Canonne-Kamath-Steinke 2020) on ChaCha20 keyed streams"


def discrete_laplace(
    key: np.ndarray,
    scale: int,
    size: int,
    *,
    start: int = 0,
    cap: int = 2**62,
    n_threads: int | None = None,
) -> np.ndarray:
    """Draw exact discrete Laplace (two-sided geometric) noise of integer scale.

    Element ``i`` has ``P(Y = y) = tanh(1 / (2 scale)) * exp(-|y| / scale)`` and is drawn
    from the stream ``(key, nonce = start + i)`` only, so chunked calls with matching
    ``start`` give the same values as one call. Sampling is CKS20's exact algorithm with
    integer arithmetic only. Adding it to an integer query of sensitivity ``d`` is
    ``d / scale``-differentially private.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    scale : int
        Scale ``t`` in ``[0, 2**62)``; ``0`` gives zeros.
    size : int
        Number of draws.
    start : int, optional
        Nonce of the first draw.
    cap : int, optional
        ``|Y|`` is saturated at ``cap`` (in ``[1, 2**62]``), which keeps ``int64`` safe;
        callers clamp to their domain anyway. ``P(|Y| >= cap)`` is ``exp(-cap / scale)``
        up to a factor of 2.
    n_threads : int, optional
        Threads for requests of a million draws or more (default: one per core). The draws
        do not depend on it.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(size,)``.

    Raises
    ------
    TypeError, ValueError
        On a malformed key or out-of-range integers.

    References
    ----------
    C. L. Canonne, G. Kamath and T. Steinke, "The Discrete Gaussian for Differential
    Privacy", NeurIPS 2020. A. Ghosh, T. Roughgarden and M. Sundararajan, "Universally
    Utility-Maximizing Privacy Mechanisms", STOC 2009.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> discrete_laplace(key, 10, 5)
    array([ -9, -10,   8,   1,  17])
    >>> discrete_laplace(key, 10, 3, start=2)
    array([ 8,  1, 17])
    """
    key = _check_key(key)
    scale = check_int(scale, "scale", low=0, high=_MAX_SCALE - 1)
    size, start = _check_range(size, start)
    cap = check_int(cap, "cap", low=1, high=_MAX_SCALE)
    if scale == 0:
        return np.zeros(size, dtype=np.int64)
    return _rate_draws(key, 1, scale, size, start, cap, n_threads)


RATE_SAMPLER_NAME = (
    "exact discrete Laplace of rational rate s/t (Canonne-Kamath-Steinke 2020, "
    "Algorithm 2) on ChaCha20 keyed streams"
)


def rate_at_most(
    epsilon: float | Fraction, sensitivity: int = 1, *, max_denominator: int = 2**32
) -> tuple[int, int]:
    """Return the largest rate ``s/t <= epsilon / sensitivity`` with ``t <= max_denominator``.

    The privacy map of :func:`discrete_laplace_rate`: noise with ``P(y) ∝ exp(-|y| s/t)``
    added to an integer query of sensitivity ``sensitivity`` is ``sensitivity * s/t``-DP,
    which never exceeds ``epsilon``. ``epsilon`` is read exactly (a float is the binary
    fraction it holds); when that fraction's denominator is small enough it is used as is,
    otherwise the rate is rounded down on the grid ``1/max_denominator``.

    Parameters
    ----------
    epsilon : float or fractions.Fraction
        Budget, ``> 0``.
    sensitivity : int
        L1 sensitivity of the integer query, ``>= 1``.
    max_denominator : int
        Largest ``t``, in ``[1, 2**62)``.

    Returns
    -------
    (int, int)
        ``(s, t)`` with ``s >= 1`` and ``gcd(s, t) = 1``.

    Raises
    ------
    ValueError
        If ``epsilon / sensitivity < 1 / max_denominator``.

    Examples
    --------
    >>> rate_at_most(0.5)
    (1, 2)
    >>> s, t = rate_at_most(0.05)
    >>> t <= 2**32, s / t <= 0.05, 0.05 - s / t < 2**-32
    (True, True, True)
    """
    exact = Fraction(epsilon) / check_int(sensitivity, "sensitivity", low=1, high=_MAX_SCALE)
    max_denominator = check_int(max_denominator, "max_denominator", low=1, high=_MAX_SCALE - 1)
    if exact <= 0:
        raise DPFastValueError(f"epsilon must be > 0, got {quoted(epsilon)}")
    if exact.denominator <= max_denominator:
        rate = exact
    else:
        rate = Fraction(math.floor(exact * max_denominator), max_denominator)
    if rate.numerator < 1:
        raise DPFastValueError(
            f"epsilon / sensitivity = {float(exact):.3g} is below 1/{max_denominator}; "
            "use a larger epsilon"
        )
    if rate.numerator >= _MAX_SCALE:
        raise DPFastValueError(f"epsilon / sensitivity = {float(exact):.3g} is too large")
    return rate.numerator, rate.denominator


def discrete_laplace_rate(
    key: np.ndarray,
    s: int,
    t: int,
    size: int,
    *,
    start: int = 0,
    cap: int = 2**62,
    n_threads: int | None = None,
) -> np.ndarray:
    """Draw exact discrete Laplace noise of rational rate ``s/t``.

    Element ``i`` has ``P(Y = y) = tanh(s / (2 t)) * exp(-|y| s / t)`` and is drawn from
    the stream ``(key, nonce = start + i)`` only (CKS20 Algorithm 2, integer arithmetic
    only). Adding it to an integer query of sensitivity ``d`` is ``d s / t``-DP; choose
    ``(s, t)`` with :func:`rate_at_most`. With ``s = 1`` the draws equal
    :func:`discrete_laplace` of scale ``t``.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    s, t : int
        Rate numerator and denominator, each in ``[1, 2**62)``.
    size : int
        Number of draws.
    start : int, optional
        Nonce of the first draw.
    cap : int, optional
        ``|Y|`` is saturated at ``cap`` (in ``[1, 2**62]``); ``P(|Y| >= cap)`` is about
        ``exp(-cap s / t)``.
    n_threads : int, optional
        Threads for requests of a million draws or more (default: one per core). The draws
        do not depend on it.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(size,)``.

    Raises
    ------
    TypeError, ValueError
        On a malformed key or out-of-range integers.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> bool((discrete_laplace_rate(key, 1, 10, 5) == discrete_laplace(key, 10, 5)).all())
    True
    >>> discrete_laplace_rate(key, 3, 7, 4).dtype
    dtype('int64')
    """
    key = _check_key(key)
    s = check_int(s, "s", low=1, high=_MAX_SCALE - 1)
    t = check_int(t, "t", low=1, high=_MAX_SCALE - 1)
    size, start = _check_range(size, start)
    cap = check_int(cap, "cap", low=1, high=_MAX_SCALE)
    return _rate_draws(key, s, t, size, start, cap, n_threads)


def _rate_draws(
    key: np.ndarray, s: int, t: int, size: int, start: int, cap: int, n_threads: int | None
) -> np.ndarray:
    # The draws of discrete_laplace_rate, from checked arguments, in threaded chunks.
    out = np.zeros(size, dtype=np.int64)
    if size > 0:
        _run_chunks(
            lambda lo, hi: _dl.discrete_laplace_rate_kernel(
                key, s, t, np.uint64(start + lo), cap, out[lo:hi]
            ),
            size,
            _threads_for(size, n_threads),
        )
    return out


def unsafe_float_laplace(scale: float, size: int, seed: int | None = None) -> np.ndarray:
    """Naive floating-point Laplace noise from numpy. NOT SAFE: for comparison only.

    Uses ``numpy.random.Generator.laplace`` (PCG64, not a CSPRNG; inverse CDF in floating
    point), whose outputs leak the true value through their low-order bits (Mironov 2012).
    Always emits :class:`~dpfast.exceptions.UnsafeSamplerWarning`.

    Parameters
    ----------
    scale : float
        Laplace scale ``b > 0``.
    size : int
        Number of draws.
    seed : int, optional
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    numpy.ndarray
        ``float64`` array of shape ``(size,)``.

    Warns
    -----
    UnsafeSamplerWarning
        Always.

    References
    ----------
    I. Mironov, "On Significance of the Least Significant Bits for Differential Privacy",
    CCS 2012.

    Examples
    --------
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", UnsafeSamplerWarning)
    ...     unsafe_float_laplace(1.0, 3, seed=0).shape
    (3,)
    """
    if not isinstance(scale, numbers.Real) or not float(scale) > 0:
        raise DPFastValueError(f"scale must be a positive number, got {quoted(scale)}")
    size = check_int(size, "size", low=0, high=2**62)
    warnings.warn(
        "unsafe_float_laplace uses numpy's floating-point Laplace sampler, which leaks "
        "through its low-order bits and is not differentially private; use "
        "discrete_laplace for releases",
        UnsafeSamplerWarning,
        stacklevel=2,
    )
    return np.random.default_rng(seed).laplace(0.0, float(scale), size)
