"""Exact uniform integers, rational Bernoulli draws and uniform permutations."""

from __future__ import annotations

import numpy as np

from dpfast._kernels import uniform as _kernels
from dpfast._validation import check_int
from dpfast.noise._common import _MAX_SCALE, _check_key, _check_range


def uniform_integers(key: np.ndarray, high: int, size: int, *, start: int = 0) -> np.ndarray:
    """Draw exact uniform integers on ``{0, ..., high - 1}``.

    Element ``i`` comes from the stream ``(key, nonce = start + i)`` by rejection sampling
    on ``bit_length(high - 1)`` random bits.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    high : int
        Exclusive upper bound, in ``[1, 2**63 - 1]``.
    size : int
        Number of draws.
    start : int, optional
        Nonce of the first draw.

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
    >>> draws = uniform_integers(key, 6, 1000)
    >>> int(draws.min()), int(draws.max())
    (0, 5)
    """
    key = _check_key(key)
    high = check_int(high, "high", low=1, high=2**63 - 1)
    size, start = _check_range(size, start)
    out = np.empty(size, dtype=np.int64)
    if size > 0:
        _kernels.uniform_integers_kernel(key, high, np.uint64(start), out)
    return out


def bernoulli_rational(
    key: np.ndarray, numerator: int, denominator: int, size: int, *, start: int = 0
) -> np.ndarray:
    """Draw exact ``Bernoulli(numerator / denominator)`` booleans.

    Element ``i`` compares the bits of stream ``(key, nonce = start + i)`` with the
    binary expansion of ``numerator / denominator`` (2 random bits expected).

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    numerator : int
        In ``[0, denominator]``.
    denominator : int
        In ``[1, 2**62]``.
    size : int
        Number of draws.
    start : int, optional
        Nonce of the first draw.

    Returns
    -------
    numpy.ndarray
        ``bool`` array of shape ``(size,)``.

    Raises
    ------
    TypeError, ValueError
        On a malformed key or out-of-range integers.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> bernoulli_rational(key, 1, 1, 3)
    array([ True,  True,  True])
    """
    key = _check_key(key)
    denominator = check_int(denominator, "denominator", low=1, high=_MAX_SCALE)
    numerator = check_int(numerator, "numerator", low=0, high=denominator)
    size, start = _check_range(size, start)
    out = np.empty(size, dtype=np.bool_)
    if size > 0:
        _kernels.bernoulli_kernel(key, numerator, denominator, np.uint64(start), out)
    return out


def permutation(key: np.ndarray, n: int) -> np.ndarray:
    """Return a uniform random permutation of ``range(n)``.

    Fisher-Yates (Durstenfeld) with exact unbiased bounded integers (Lemire's method)
    from the 32-bit words of the stream ``(key, nonce = 0)``.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    n : int
        Length, ``>= 0``.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(n,)`` holding each of ``0 .. n-1`` once.

    Raises
    ------
    TypeError, ValueError
        On a malformed key or a negative ``n``.

    References
    ----------
    D. Lemire, "Fast Random Integer Generation in an Interval", ACM TOMACS 29(1), 2019.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> sorted(permutation(key, 5).tolist())
    [0, 1, 2, 3, 4]
    """
    key = _check_key(key)
    n = check_int(n, "n", low=0, high=2**62)
    out = np.empty(n, dtype=np.int64)
    if n > 0:
        _kernels.permutation_kernel(key, out)
    return out
