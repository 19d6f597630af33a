"""The one place where ``numba.njit`` is called.

Every kernel in :mod:`dpfast._kernels` is decorated with :func:`jit`. Kernels compile
lazily on first call (no type signatures) and are cached on disk, so ``import dpfast``
compiles nothing. ``fastmath`` is off: the privacy arithmetic must follow IEEE rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy"}


def jit(func: F) -> F:
    """Compile ``func`` lazily with dpfast's Numba options (cached, GIL released)."""
    return numba.njit(**_OPTIONS)(func)  # type: ignore[no-any-return]


def jit_inline(func: F) -> F:
    """Like :func:`jit`, for small helpers that LLVM should inline into their callers."""
    return numba.njit(inline="always", **_OPTIONS)(func)  # type: ignore[no-any-return]
