"""Secure random noise: keyed ChaCha20 streams and exact integer samplers.

All randomness in dpfast comes from here. A :class:`NoiseSource` holds a 32-byte master
key, from ``os.urandom`` (:meth:`NoiseSource.secure`, the default) or from a seed
(:meth:`NoiseSource.from_seed`, reproducible, for tests and benchmarks only). Each use of
randomness asks the source for its own key with a label (``source.key("ir_dp", "noise",
column)``), so that distinct uses get independent streams and adding a column never
changes the noise of another.

Element ``i`` of every per-element sampler reads only the ChaCha20 stream
``(key, nonce = start + i)``, so drawing in chunks gives the same values as drawing at
once. The samplers are exact: all sampling decisions use integer arithmetic on random
bits, with no floating point (SPEC A3, §8.4, §8.6).
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import Any

import numpy as np

from dpfast._kernels import dlaplace as _dl
from dpfast._kernels import exponential as _em
from dpfast._kernels import wordstream as _ws
from dpfast.exceptions import UnsafeSamplerWarning

__all__ = [
    "EM_SAMPLER_NAME",
    "KEEP_DENOMINATOR",
    "RATE_SAMPLER_NAME",
    "RETAIN_SAMPLER_NAME",
    "SAMPLER_NAME",
    "UNIFORM_SAMPLER_NAME",
    "NoiseSource",
    "add_uniform",
    "bernoulli_rational",
    "discrete_laplace",
    "discrete_laplace_rate",
    "exponential_mechanism",
    "exponential_mechanism_log_weights",
    "exponential_mechanism_sorted_groups",
    "exponential_probabilities",
    "permutation",
    "rate_at_most",
    "retain_or_replace",
    "uniform_integers",
    "unsafe_float_laplace",
]

SAMPLER_NAME = "exact discrete Laplace (Canonne-Kamath-Steinke 2020) on ChaCha20 keyed streams"

_MAX_SCALE = 2**62
_MAX_NONCE = 2**64
_SEED_DOMAIN = b"dpfast-seed-v1"
_KEY_DOMAIN = b"dpfast-key-v1"


def _encode_int(value: int) -> bytes:
    body = value.to_bytes(max(1, (value.bit_length() + 8) // 8), "big", signed=True)
    return len(body).to_bytes(8, "big") + body


def _encode_label(parts: tuple[Any, ...]) -> bytes:
    # Each part is tagged and length-prefixed, so distinct labels never share an encoding.
    chunks = []
    for part in parts:
        if isinstance(part, str):
            body = part.encode("utf-8")
            chunks.append(b"s" + len(body).to_bytes(8, "big") + body)
        elif isinstance(part, numbers.Integral) and not isinstance(part, (bool, np.bool_)):
            chunks.append(b"i" + _encode_int(int(part)))
        else:
            raise TypeError(
                f"key label parts must be str or int, got {type(part).__name__} ({part!r}); "
                "convert it with str() first"
            )
    return b"".join(chunks)


class NoiseSource:
    """An immutable source of keyed ChaCha20 streams, holding a 32-byte master key.

    Build one with :meth:`secure` (the default for private releases) or
    :meth:`from_seed` (reproducible, not for publication). The master key is never shown by
    ``repr``.

    Examples
    --------
    >>> source = NoiseSource.from_seed(7)
    >>> source
    NoiseSource(seeded=True)
    >>> source.key("example").shape
    (8,)
    """

    __slots__ = ("_master", "_seeded")

    _master: bytes
    _seeded: bool

    def __init__(self, master: bytes, *, seeded: bool) -> None:
        if not isinstance(master, bytes) or len(master) != 32:
            raise ValueError(
                "master must be 32 bytes; use NoiseSource.secure() or NoiseSource.from_seed()"
            )
        object.__setattr__(self, "_master", master)
        object.__setattr__(self, "_seeded", bool(seeded))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("NoiseSource is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("NoiseSource is immutable")

    def __repr__(self) -> str:
        return f"NoiseSource(seeded={self._seeded})"

    def __reduce__(self) -> Any:
        raise TypeError("NoiseSource holds a secret key and cannot be pickled")

    @classmethod
    def secure(cls) -> NoiseSource:
        """Return a source whose master key comes from the OS CSPRNG (``os.urandom(32)``).

        Returns
        -------
        NoiseSource
            A fresh source; two calls give independent sources.

        Examples
        --------
        >>> NoiseSource.secure().seeded
        False
        """
        return cls(os.urandom(32), seeded=False)

    @classmethod
    def from_seed(cls, seed: int) -> NoiseSource:
        """Return a reproducible source: master key ``sha256(b"dpfast-seed-v1" + enc(seed))``.

        ``enc(seed)`` is the 8-byte big-endian length of the seed's minimal two's-complement
        big-endian encoding, followed by that encoding. Output drawn from a seeded source is
        reproducible and **not for publication**.

        Parameters
        ----------
        seed : int
            Any integer.

        Returns
        -------
        NoiseSource

        Raises
        ------
        TypeError
            If ``seed`` is not an integer.

        Examples
        --------
        >>> a = NoiseSource.from_seed(1).key("x")
        >>> b = NoiseSource.from_seed(1).key("x")
        >>> bool((a == b).all())
        True
        """
        if not isinstance(seed, numbers.Integral) or isinstance(seed, (bool, np.bool_)):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        master = hashlib.sha256(_SEED_DOMAIN + _encode_int(int(seed))).digest()
        return cls(master, seeded=True)

    @property
    def seeded(self) -> bool:
        """Whether the source came from a seed (reproducible, not for publication)."""
        return self._seeded

    def key(self, *label: str | int) -> np.ndarray:
        """Derive the ChaCha20 key of one use of randomness.

        The key is ``sha256(master || b"dpfast-key-v1" || enc(label))`` read as eight
        little-endian 32-bit words, where ``enc`` tags and length-prefixes every part, so
        distinct labels give independent keys.

        Parameters
        ----------
        *label : str or int
            Names the use, e.g. ``("ir_dp", "centroid-noise", "age")``.

        Returns
        -------
        numpy.ndarray
            ``uint64`` array of shape ``(8,)``, each entry one 32-bit key word.

        Raises
        ------
        TypeError
            If a label part is not a str or an int.

        Examples
        --------
        >>> source = NoiseSource.from_seed(0)
        >>> bool((source.key("a", 1) == source.key("a", "1")).all())
        False
        """
        digest = hashlib.sha256(self._master + _KEY_DOMAIN + _encode_label(label)).digest()
        return np.frombuffer(digest, dtype="<u4").astype(np.uint64)


# Requests of at least this many draws use every core unless told otherwise. Element i
# always reads its own stream, so the split never changes a draw.
_PARALLEL_MIN_SIZE = 1 << 20


def _row_chunks(size: int, n_threads: int) -> list[tuple[int, int]]:
    # Chunk edges on multiples of 128 rows (one 16-block ChaCha20 batch); the values never
    # depend on the chunking.
    per = -(-size // max(1, n_threads))
    per = -(-per // 128) * 128
    return [(lo, min(size, lo + per)) for lo in range(0, size, max(per, 128))]


def _run_chunks(work: Callable[[int, int], None], size: int, n_threads: int) -> None:
    """Call ``work(lo, hi)`` over contiguous chunks of ``range(size)``, in threads if several."""
    chunks = _row_chunks(size, n_threads)
    if len(chunks) <= 1:
        for lo, hi in chunks:
            work(lo, hi)
        return
    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for future in [pool.submit(work, lo, hi) for lo, hi in chunks]:
            future.result()


def _threads_for(size: int, n_threads: object) -> int:
    """Return the thread count for ``size`` draws (``None``: every core if large)."""
    if n_threads is None:
        return (os.cpu_count() or 1) if size >= _PARALLEL_MIN_SIZE else 1
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise ValueError(f"n_threads must be a positive integer or None, got {n_threads!r}")
    return n_threads


def _check_key(key: object) -> np.ndarray:
    if not isinstance(key, np.ndarray):
        raise TypeError(
            f"key must be a numpy array from NoiseSource.key(...), got {type(key).__name__}"
        )
    if key.shape != (8,) or key.dtype != np.uint64 or bool((key > 0xFFFFFFFF).any()):
        raise ValueError(
            "key must be a uint64 array of shape (8,) holding 32-bit words, "
            f"got dtype {key.dtype} and shape {key.shape}; use NoiseSource.key(...)"
        )
    # A private copy: one dtype and layout for the kernels (a read-only or strided key would
    # compile new specialisations) and no aliasing with the caller's array.
    return np.array(key, dtype=np.uint64, order="C", copy=True)


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def _check_range(size: object, start: object) -> tuple[int, int]:
    size = _check_int("size", size, 0, _MAX_NONCE)
    start = _check_int("start", start, 0, _MAX_NONCE - size)
    return size, start


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
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> discrete_laplace(key, 10, 5)
    array([ -9, -10,   8,   1,  17])
    >>> discrete_laplace(key, 10, 3, start=2)
    array([ 8,  1, 17])
    """
    key = _check_key(key)
    scale = _check_int("scale", scale, 0, _MAX_SCALE - 1)
    size, start = _check_range(size, start)
    cap = _check_int("cap", cap, 1, _MAX_SCALE)
    out = np.zeros(size, dtype=np.int64)
    if scale > 0 and size > 0:
        _run_chunks(
            lambda lo, hi: _dl.discrete_laplace_kernel(
                key, scale, np.uint64(start + lo), cap, out[lo:hi]
            ),
            size,
            _threads_for(size, n_threads),
        )
    return out


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
    exact = Fraction(epsilon) / _check_int("sensitivity", sensitivity, 1, _MAX_SCALE)
    max_denominator = _check_int("max_denominator", max_denominator, 1, _MAX_SCALE - 1)
    if exact <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    if exact.denominator <= max_denominator:
        rate = exact
    else:
        rate = Fraction(math.floor(exact * max_denominator), max_denominator)
    if rate.numerator < 1:
        raise ValueError(
            f"epsilon / sensitivity = {float(exact):.3g} is below 1/{max_denominator}; "
            "use a larger epsilon"
        )
    if rate.numerator >= _MAX_SCALE:
        raise ValueError(f"epsilon / sensitivity = {float(exact):.3g} is too large")
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
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> bool((discrete_laplace_rate(key, 1, 10, 5) == discrete_laplace(key, 10, 5)).all())
    True
    >>> discrete_laplace_rate(key, 3, 7, 4).dtype
    dtype('int64')
    """
    key = _check_key(key)
    s = _check_int("s", s, 1, _MAX_SCALE - 1)
    t = _check_int("t", t, 1, _MAX_SCALE - 1)
    size, start = _check_range(size, start)
    cap = _check_int("cap", cap, 1, _MAX_SCALE)
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
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> draws = uniform_integers(key, 6, 1000)
    >>> int(draws.min()), int(draws.max())
    (0, 5)
    """
    key = _check_key(key)
    high = _check_int("high", high, 1, 2**63 - 1)
    size, start = _check_range(size, start)
    out = np.empty(size, dtype=np.int64)
    if size > 0:
        _dl.uniform_integers_kernel(key, high, np.uint64(start), out)
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
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> bernoulli_rational(key, 1, 1, 3)
    array([ True,  True,  True])
    """
    key = _check_key(key)
    denominator = _check_int("denominator", denominator, 1, _MAX_SCALE)
    numerator = _check_int("numerator", numerator, 0, denominator)
    size, start = _check_range(size, start)
    out = np.empty(size, dtype=np.bool_)
    if size > 0:
        _dl.bernoulli_kernel(key, numerator, denominator, np.uint64(start), out)
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
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> sorted(permutation(key, 5).tolist())
    [0, 1, 2, 3, 4]
    """
    key = _check_key(key)
    n = _check_int("n", n, 0, 2**62)
    out = np.empty(n, dtype=np.int64)
    if n > 0:
        _dl.permutation_kernel(key, out)
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
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    size = _check_int("size", size, 0, 2**62)
    warnings.warn(
        "unsafe_float_laplace uses numpy's floating-point Laplace sampler, which leaks "
        "through its low-order bits and is not differentially private; use "
        "discrete_laplace for releases",
        UnsafeSamplerWarning,
        stacklevel=2,
    )
    return np.random.default_rng(seed).laplace(0.0, float(scale), size)


EM_SAMPLER_NAME = (
    "exponential mechanism: float64 log-sum-exp weights, inverse CDF on a 2**63-scaled "
    "integer CDF, one 63-bit word of a ChaCha20 keyed stream per draw (the small float "
    "approximation of SPEC §8.6 item 4)"
)


def _em_scale(epsilon: object, sensitivity: object) -> float:
    for name, value in (("epsilon", epsilon), ("sensitivity", sensitivity)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a number, got {value!r}")
        if not (np.isfinite(float(value)) and float(value) > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(epsilon) / (2.0 * float(sensitivity))  # type: ignore[arg-type]


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
    SPEC §8.6 item 4 (:data:`EM_SAMPLER_NAME`), not an exact sampler. Draw ``g`` reads
    only its own stream, so chunked calls with matching ``start`` give the same draws.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    quality : array-like of float, shape (n, m)
        Quality of each candidate in each draw (e.g. from
        :meth:`dpfast.taxonomy.Taxonomy.cluster_quality`).
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
    (SPEC §3.4, Algorithm 2 of Sánchez et al. 2016) exactly as
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
    k = _check_int("k", k, 1, 2**62)
    n = int(counts.sum())
    if n < k:
        raise ValueError(f"the column has {n} values, fewer than k = {k}")
    size, start = _check_range(n // k, start)
    out = np.empty(size, dtype=np.int64)
    _em.em_sorted_groups(key, counts, k, distance, scale, np.uint64(start), out)
    return out


UNIFORM_SAMPLER_NAME = (
    "uniform float noise: one 64-bit word of a ChaCha20 keyed stream per value, 53 bits "
    "mapped to the 2**53 odd multiples of 2**-53 in (-1, 1), times the half-width (one "
    "rounding); not a differential-privacy sampler"
)
RETAIN_SAMPLER_NAME = (
    "exact retain-or-replace: Bernoulli(a / 2**32) from 32 bits and Lemire's exact bounded "
    "uniform from the other 32 bits of one 64-bit word of a ChaCha20 keyed stream per row "
    "(a rejected draw continues on the row's own stream)"
)
#: Denominator of the keep probability of :func:`retain_or_replace`.
KEEP_DENOMINATOR = 2**32


def add_uniform(
    key: np.ndarray,
    values: np.ndarray,
    half_width: float,
    *,
    start: int = 0,
    n_threads: int = 1,
) -> np.ndarray:
    """Return ``values + half_width * T`` with ``T`` uniform on ``(-1, 1)``, one per value.

    ``T_i = (2 W + 1 - 2**53) / 2**53`` where ``W`` is the top 53 bits of the 64-bit word
    ``start + i`` of the stream ``(key, nonce = 0)``: the 2**53 odd multiples of ``2**-53``
    in ``(-1, 1)``, equally likely, symmetric about 0. The product is rounded once. This is
    a floating-point approximation of the continuous uniform distribution, for the
    perturbation mechanisms that are not differential privacy (k-noise); it must not be
    used for DP noise. Values do not depend on ``n_threads`` or on chunking.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    values : numpy.ndarray
        1-D float64 array; never written.
    half_width : float
        Finite, ``>= 0``.
    start : int, optional
        Global index of ``values[0]`` (word offset in the stream).
    n_threads : int, optional
        Threads over row chunks.

    Returns
    -------
    numpy.ndarray
        float64 array of ``values``' shape.

    Examples
    --------
    >>> key = NoiseSource.from_seed(3).key("doc")
    >>> noisy = add_uniform(key, np.zeros(1000), 2.0)
    >>> bool(np.abs(noisy).max() < 2.0), bool(abs(noisy.mean()) < 0.2)
    (True, True)
    """
    key = _check_key(key)
    values = np.ascontiguousarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {values.shape}")
    if not isinstance(half_width, numbers.Real) or not (
        np.isfinite(float(half_width)) and float(half_width) >= 0
    ):
        raise ValueError(f"half_width must be a finite number >= 0, got {half_width!r}")
    size, start = _check_range(values.shape[0], start)
    out = np.empty(size, dtype=np.float64)
    width = float(half_width)

    def work(lo: int, hi: int) -> None:
        _ws.uniform_add_kernel(key, start, lo, hi, values, width, out)

    _run_chunks(work, size, n_threads)
    return out


def retain_or_replace(
    key: np.ndarray,
    keep_numerator: int,
    values: np.ndarray,
    pool: np.ndarray,
    *,
    groups: np.ndarray | None = None,
    group_start: np.ndarray | None = None,
    group_size: np.ndarray | None = None,
    start: int = 0,
    n_threads: int = 1,
) -> np.ndarray:
    """Keep each value with probability ``keep_numerator / 2**32``, else draw from its group.

    The replacement is a uniformly drawn element of the group's slice of ``pool``.
    Row ``i`` keeps ``values[i]`` or takes ``pool[group_start[g] + U]`` with ``U`` uniform
    on ``{0, ..., group_size[g] - 1}`` and ``g = groups[i]``. Without ``groups`` every row
    draws from the whole ``pool``. Both draws are exact (integer arithmetic on random
    bits) and use the 64-bit word ``start + i`` of the stream ``(key, nonce = 0)``; a
    rejected uniform draw (probability below ``group_size / 2**32``) continues on the row's
    own stream ``(key, nonce = start + i + 1)``. Values do not depend on ``n_threads``.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    keep_numerator : int
        In ``[0, 2**32]``.
    values : numpy.ndarray
        1-D; never written.
    pool : numpy.ndarray
        1-D, the replacement values, of ``values``' dtype.
    groups : numpy.ndarray of int, optional
        Group of each row (``len(values)``), indices into ``group_start``/``group_size``.
    group_start, group_size : numpy.ndarray of int64, optional
        Each group's slice of ``pool``; sizes in ``[1, 2**32]``. Default: one group, the
        whole pool. The caller guarantees they are consistent.
    start : int, optional
        Global index of ``values[0]``.
    n_threads : int, optional
        Threads over row chunks.

    Returns
    -------
    numpy.ndarray
        Of ``values``' shape and dtype.

    Examples
    --------
    >>> key = NoiseSource.from_seed(3).key("doc")
    >>> codes = np.zeros(10_000, dtype=np.int64)
    >>> out = retain_or_replace(key, 2**31, codes, np.arange(4))
    >>> 0.55 < float((out == 0).mean()) < 0.7  # 1/2 + 1/2 * 1/4
    True
    """
    key = _check_key(key)
    keep = _check_int("keep_numerator", keep_numerator, 0, KEEP_DENOMINATOR)
    values = np.ascontiguousarray(values)
    pool = np.ascontiguousarray(pool, dtype=values.dtype)
    if values.ndim != 1 or pool.ndim != 1:
        raise ValueError("values and pool must be 1-D")
    size, start = _check_range(values.shape[0], start)
    if groups is None:
        if pool.shape[0] < 1 or pool.shape[0] > KEEP_DENOMINATOR:
            raise ValueError(f"pool must hold 1 to 2**32 values, got {pool.shape[0]}")
        groups_array = np.empty(0, dtype=np.int64)
        starts = np.zeros(1, dtype=np.int64)
        sizes = np.array([pool.shape[0]], dtype=np.int64)
    else:
        if group_start is None or group_size is None:
            raise ValueError("groups needs group_start and group_size")
        groups_array = np.ascontiguousarray(groups)
        if groups_array.shape != values.shape or groups_array.dtype.kind not in "iu":
            raise ValueError("groups must be an integer array of values' shape")
        starts = np.ascontiguousarray(group_start, dtype=np.int64)
        sizes = np.ascontiguousarray(group_size, dtype=np.int64)
        if starts.shape != sizes.shape or (
            sizes.shape[0]
            and (
                int(sizes.min()) < 1
                or int(sizes.max()) > KEEP_DENOMINATOR
                or int(starts.min()) < 0
                or int((starts + sizes).max()) > pool.shape[0]
            )
        ):
            raise ValueError("group_start/group_size must describe non-empty slices of pool")
    out = np.empty(size, dtype=values.dtype)
    keep_word = np.uint64(keep)

    def work(lo: int, hi: int) -> None:
        _ws.retain_or_replace_kernel(
            key, start, lo, hi, keep_word, values, groups_array, starts, sizes, pool, out
        )

    _run_chunks(work, size, n_threads)
    return out
