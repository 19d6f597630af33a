"""Argument checks, row chunking and exact arithmetic shared by :mod:`dpfast.noise`.

Every sampler validates its key with :func:`_check_key` and its integers with
:func:`dpfast._validation.check_int` / :func:`_check_range`. Threaded samplers split their rows with
:func:`_run_chunks`; element ``i`` always reads its own stream, so the split never changes
a draw. The privacy maps check their bases against :func:`_exp_lower_bound`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np

from dpfast._validation import check_int, check_threads
from dpfast.exceptions import DPFastTypeError, DPFastValueError

_MAX_SCALE = 2**62
_MAX_NONCE = 2**64


# Requests of at least this many draws use every core unless told otherwise. Element i
# always reads its own stream, so the split never changes a draw.
_PARALLEL_MIN_SIZE = 1 << 20


def _row_chunks(size: int, n_threads: int, unit: int = 128) -> list[tuple[int, int]]:
    # Chunk edges on multiples of `unit` (128 rows: one 16-block ChaCha20 batch); the values
    # never depend on the chunking.
    per = -(-size // max(1, n_threads))
    per = -(-per // unit) * unit
    return [(lo, min(size, lo + per)) for lo in range(0, size, max(per, unit))]


def _run_chunks(
    work: Callable[[int, int], None], size: int, n_threads: int, unit: int = 128
) -> None:
    """Call ``work(lo, hi)`` over contiguous chunks of ``range(size)``, in threads if several.

    Chunk edges are multiples of ``unit``.
    """
    chunks = _row_chunks(size, n_threads, unit)
    if len(chunks) <= 1:
        for lo, hi in chunks:
            work(lo, hi)
        return
    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for future in [pool.submit(work, lo, hi) for lo, hi in chunks]:
            future.result()


def _threads_for(size: int, n_threads: object) -> int:
    """Return the thread count for ``size`` draws (``None``: every core if large)."""
    return check_threads(n_threads, (os.cpu_count() or 1) if size >= _PARALLEL_MIN_SIZE else 1)


def _check_key(key: object) -> np.ndarray:
    if not isinstance(key, np.ndarray):
        raise DPFastTypeError(
            f"key must be a numpy array from NoiseSource.key(...), got {type(key).__name__}"
        )
    if key.shape != (8,) or key.dtype != np.uint64 or bool((key > 0xFFFFFFFF).any()):
        raise DPFastValueError(
            "key must be a uint64 array of shape (8,) holding 32-bit words, "
            f"got dtype {key.dtype} and shape {key.shape}; use NoiseSource.key(...)"
        )
    # A private copy: one dtype and layout for the kernels (a read-only or strided key would
    # compile new specialisations) and no aliasing with the caller's array.
    return np.array(key, dtype=np.uint64, order="C", copy=True)


def _check_range(size: object, start: object) -> tuple[int, int]:
    size = check_int(size, "size", low=0, high=_MAX_NONCE)
    start = check_int(start, "start", low=0, high=_MAX_NONCE - size)
    return size, start


def _exp_lower_bound(x: Fraction, bits: int, point_bits: int) -> int:
    """Return an integer ``L <= exp(x) * 2**bits``, for ``x >= 0``, in integer arithmetic.

    The Taylor partial sum of ``exp`` at ``x`` rounded down to a multiple of
    ``2**-point_bits``, in units of ``2**-bits``, every term rounded down: each step only
    lowers the value, so ``L`` is a lower bound.
    """
    num = math.floor(x * (1 << point_bits))
    term = 1 << bits
    total = 0
    n = 0
    while term > 0:
        total += term
        n += 1
        term = term * num // (n << point_bits)
    return total
