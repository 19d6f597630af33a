"""Word-stream samplers of the perturbation mechanisms.

:func:`add_uniform` (uniform float noise) and :func:`retain_or_replace` read one 64-bit
word of a keyed ChaCha20 stream per row, so rows can be drawn in threaded chunks.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from dpfast._kernels import wordstream as _ws
from dpfast._validation import check_int, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.noise._common import _check_key, _check_range, _run_chunks

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


def _by_rows(
    kernel: Callable[..., None],
    key: np.ndarray,
    start: int,
    arguments: tuple[Any, ...],
    n_threads: int,
) -> np.ndarray:
    """Run ``kernel(key, start, lo, hi, *arguments)`` over threaded chunks of the rows.

    The last of ``arguments`` is the output, one row per draw; it is returned.
    """
    out: np.ndarray = arguments[-1]
    _run_chunks(lambda lo, hi: kernel(key, start, lo, hi, *arguments), out.shape[0], n_threads)
    return out


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
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(3).key("doc")
    >>> noisy = add_uniform(key, np.zeros(1000), 2.0)
    >>> bool(np.abs(noisy).max() < 2.0), bool(abs(noisy.mean()) < 0.2)
    (True, True)
    """
    key = _check_key(key)
    values = np.ascontiguousarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise DPFastValueError(f"values must be 1-D, got shape {values.shape}")
    if not isinstance(half_width, numbers.Real) or not (
        np.isfinite(float(half_width)) and float(half_width) >= 0
    ):
        raise DPFastValueError(f"half_width must be a finite number >= 0, got {quoted(half_width)}")
    size, start = _check_range(values.shape[0], start)
    out = np.empty(size, dtype=np.float64)
    arguments = (values, float(half_width), out)
    return _by_rows(_ws.uniform_add_kernel, key, start, arguments, n_threads)


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
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(3).key("doc")
    >>> codes = np.zeros(10_000, dtype=np.int64)
    >>> out = retain_or_replace(key, 2**31, codes, np.arange(4))
    >>> 0.55 < float((out == 0).mean()) < 0.7  # 1/2 + 1/2 * 1/4
    True
    """
    key = _check_key(key)
    keep = check_int(keep_numerator, "keep_numerator", low=0, high=KEEP_DENOMINATOR)
    values = np.ascontiguousarray(values)
    pool = np.ascontiguousarray(pool, dtype=values.dtype)
    if values.ndim != 1 or pool.ndim != 1:
        raise DPFastValueError("values and pool must be 1-D")
    size, start = _check_range(values.shape[0], start)
    if groups is None:
        if pool.shape[0] < 1 or pool.shape[0] > KEEP_DENOMINATOR:
            raise DPFastValueError(f"pool must hold 1 to 2**32 values, got {pool.shape[0]}")
        groups_array = np.empty(0, dtype=np.int64)
        starts = np.zeros(1, dtype=np.int64)
        sizes = np.array([pool.shape[0]], dtype=np.int64)
    else:
        if group_start is None or group_size is None:
            raise DPFastValueError("groups needs group_start and group_size")
        groups_array = np.ascontiguousarray(groups)
        if groups_array.shape != values.shape or groups_array.dtype.kind not in "iu":
            raise DPFastValueError("groups must be an integer array of values' shape")
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
            raise DPFastValueError("group_start/group_size must describe non-empty slices of pool")
    out = np.empty(size, dtype=values.dtype)
    arguments = (np.uint64(keep), values, groups_array, starts, sizes, pool, out)
    return _by_rows(_ws.retain_or_replace_kernel, key, start, arguments, n_threads)


def retain_draws(
    key: np.ndarray,
    keep_numerator: int,
    groups: np.ndarray,
    group_size: np.ndarray,
    *,
    start: int = 0,
    n_threads: int = 1,
) -> np.ndarray:
    """Return the draws of :func:`retain_or_replace` alone: ``-1`` (kept) or ``U`` per row.

    Row ``i`` gets ``-1`` where :func:`retain_or_replace` keeps ``values[i]``, else the
    index ``U`` of its replacement within its group's slice of the pool, from the same
    words of the same stream: ``retain_or_replace(key, a, values, pool, groups=groups,
    group_start=s, group_size=group_size, start=start)`` takes ``pool[s[g] + U]``. Engines
    that cannot hold the pool find the replacements from these indices.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    keep_numerator : int
        In ``[0, 2**32]``.
    groups : numpy.ndarray of int
        1-D, each row's group: an index into ``group_size``.
    group_size : numpy.ndarray of int64
        Each group's size, in ``[1, 2**32]``.
    start : int, optional
        Global index of row 0.
    n_threads : int, optional
        Threads over row chunks; the draws do not depend on it.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of ``groups``' shape.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(3).key("doc")
    >>> groups = np.zeros(6, dtype=np.int64)
    >>> draws = retain_draws(key, 2**31, groups, np.array([4]), start=10)
    >>> pool = np.arange(4)
    >>> values = np.full(6, -1)
    >>> bool((retain_or_replace(key, 2**31, values, pool, start=10) == draws).all())
    True
    """
    key = _check_key(key)
    keep = check_int(keep_numerator, "keep_numerator", low=0, high=KEEP_DENOMINATOR)
    groups_array = np.ascontiguousarray(groups)
    sizes = np.ascontiguousarray(group_size, dtype=np.int64)
    if groups_array.ndim != 1 or groups_array.dtype.kind not in "iu":
        raise DPFastValueError("groups must be a 1-D integer array")
    if sizes.ndim != 1 or (
        sizes.shape[0] and (int(sizes.min()) < 1 or int(sizes.max()) > KEEP_DENOMINATOR)
    ):
        raise DPFastValueError("group_size must hold sizes in [1, 2**32]")
    size, start = _check_range(groups_array.shape[0], start)
    out = np.empty(size, dtype=np.int64)
    arguments = (np.uint64(keep), groups_array, sizes, out)
    return _by_rows(_ws.retain_draws_kernel, key, start, arguments, n_threads)
