"""The one place where ``numba.njit`` is called.

Every kernel in :mod:`dpfast._kernels` is decorated with :func:`jit`. Kernels compile
lazily on first call (no type signatures) and are cached on disk, so ``import dpfast``
compiles nothing. ``fastmath`` is off: the privacy arithmetic must follow IEEE rules.
:func:`watch_compiles` reports a compile as it happens (the command line shows it).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, TypeVar

import numba
import numba.core.event
import numpy as np

F = TypeVar("F", bound=Callable[..., Any])

#: Numba's event around the compilation of one signature of a kernel: emitted only when the
#: signature is neither compiled in this process nor found in the on-disk cache.
_COMPILE_EVENT = "numba:compile"

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


class _CompileListener(numba.core.event.Listener):
    """Call ``started`` when an outermost compile begins and ``ended`` when it ends.

    A kernel that calls another compiles the callee inside its own compile: the nested
    events are not reported. Numba compiles under one global lock, so one depth counter
    serves every thread.
    """

    def __init__(self, started: Callable[[], None], ended: Callable[[], None]) -> None:
        self._started = started
        self._ended = ended
        self._depth = 0

    def on_start(self, event: Any) -> None:
        self._depth += 1
        if self._depth == 1:
            self._started()

    def on_end(self, event: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._ended()


def watch_compiles(started: Callable[[], None], ended: Callable[[], None]) -> Callable[[], None]:
    """Call ``started()`` when a kernel begins to compile and ``ended()`` once it has.

    A compile happens on a kernel's first call with a type signature that is neither
    compiled in this process nor cached on disk (Numba's ``numba:compile`` event, which a
    cache hit does not emit), so this reports compiles as they happen, never a guess from
    the time a call takes. Returns the function that stops the watching.
    """
    listener = _CompileListener(started, ended)
    numba.core.event.register(_COMPILE_EVENT, listener)
    return lambda: numba.core.event.unregister(_COMPILE_EVENT, listener)


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
