"""The one place where ``numba.njit`` is called.

Every kernel in :mod:`dpfast._kernels` is decorated with :func:`jit`. Kernels compile
lazily on first call (no type signatures) and are cached on disk, so ``import dpfast``
compiles nothing. ``fastmath`` is off: the privacy arithmetic must follow IEEE rules.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, TypeVar

import numba
import numpy as np

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy"}


def jit(func: F) -> F:
    """Compile ``func`` lazily with dpfast's Numba options (cached, GIL released)."""
    return numba.njit(**_OPTIONS)(func)  # type: ignore[no-any-return]


def jit_inline(func: F) -> F:
    """Like :func:`jit`, for small helpers that LLVM should inline into their callers."""
    return numba.njit(inline="always", **_OPTIONS)(func)  # type: ignore[no-any-return]


def struct(typename: str, field_names: str, module: str) -> Any:
    """Return a :func:`collections.namedtuple` class to bundle a kernel's arrays.

    Numba passes an instance as a heterogeneous tuple: a field read compiles to a constant
    index, so the bundle costs nothing at run time, and unlike a jitclass it adds no
    compile time. Kernel modules import only numpy and ``dpfast._jit``, hence this helper.
    ``module`` is the defining module's ``__name__``, so that the class pickles by
    reference (Numba's on-disk cache pickles argument types).
    """
    return collections.namedtuple(typename, field_names, module=module)


@jit_inline
def count_trailing_zeros_loop(v):  # type: ignore[no-untyped-def]
    """Trailing zero bits of the ``uint64`` ``v`` (64 when ``v == 0``), one bit at a time."""
    if v == 0:
        return 64
    n = 0
    while (v & np.uint64(1)) == np.uint64(0):
        v >>= np.uint64(1)
        n += 1
    return n


try:  # LLVM's cttz intrinsic (also 64 on 0), for the bitmap scans of the samplers
    from numba.cpython.unsafe.numbers import trailing_zeros as count_trailing_zeros
except ImportError:  # pragma: no cover - a Numba without the helper: the loop
    count_trailing_zeros = count_trailing_zeros_loop  # type: ignore[assignment]
