"""The one place where ``numba.njit`` is called.

Every kernel in :mod:`dpfast._kernels` is decorated with :func:`jit`. Kernels compile
lazily on first call (no type signatures) and are cached on disk, so ``import dpfast``
compiles nothing. ``fastmath`` is off: the privacy arithmetic must follow IEEE rules.
:func:`watch_compiles` reports a compile as it happens (the command line shows it).

Several processes share one cache: Spark's and Dask's workers on a machine, the processes
of ``dpfast warm-up``. Numba writes a kernel's cache as an index (signature to data file)
and a data file per signature, and chooses the data file's name from the index it read:
two processes saving two signatures of one kernel at once can both choose the same name,
and the index then names the other process's code for a signature, which a later run
would load and call with the wrong types (numba/numba#10128 reports such crashes). Each
kernel's cache here saves under an exclusive lock of its cache folder and loads under a
shared one (``flock``, where the platform has it), so a save reads the index, chooses a
name and writes both files while no other process saves or loads.
"""

from __future__ import annotations

import collections
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numba
import numba.core.caching
import numba.core.event
import numba.core.registry
import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: Numba's own cache, unlocked
    fcntl = None  # type: ignore[assignment]

F = TypeVar("F", bound=Callable[..., Any])

#: Numba's event around the compilation of one signature of a kernel: emitted only when the
#: signature is neither compiled in this process nor found in the on-disk cache.
_COMPILE_EVENT = "numba:compile"

#: Numba's options for every kernel; the on-disk cache is :class:`_LockedCache`, set by
#: :func:`_cached` (``cache=True`` would give Numba's own).
_OPTIONS: dict[str, Any] = {"nogil": True, "fastmath": False, "error_model": "numpy"}

#: The lock file in each of the cache's folders.
LOCK_NAME = "dpfast-cache.lock"


@contextlib.contextmanager
def _cache_lock(folder: str, exclusive: bool) -> Iterator[None]:
    """Hold ``folder``'s cache lock, exclusive or shared, across processes.

    Without ``flock``, where the lock file cannot be opened (a read-only folder, whose
    cache Numba cannot write either) or where the file system refuses locks (ENOLCK on
    some network file systems), the block runs unlocked, as Numba's own cache does.
    """
    handle = None
    if fcntl is not None:
        try:
            handle = os.open(os.path.join(folder, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            pass  # no lock file, or no locks on this file system: unlocked
    try:
        yield
    finally:
        if handle is not None:
            os.close(handle)  # closing the file releases the lock


class _LockedCacheFile(numba.core.caching.IndexDataCacheFile):
    """A kernel's index and data files, saved and loaded under its folder's lock."""

    def save(self, key: Any, data: Any) -> None:
        with _cache_lock(self._cache_path, exclusive=True):
            super().save(key, data)

    def load(self, key: Any) -> Any:
        with _cache_lock(self._cache_path, exclusive=False):
            return super().load(key)


class _LockedCache(numba.core.caching.FunctionCache):
    """Numba's on-disk cache of one kernel, its files written under a lock."""

    def __init__(self, py_func: Callable[..., Any]) -> None:
        super().__init__(py_func)
        self._cache_file = _LockedCacheFile(
            cache_path=self._cache_path,
            filename_base=self._impl.filename_base,
            source_stamp=self._impl.locator.get_source_stamp(),
        )


def _cached(dispatcher: Any) -> Any:
    """Give a kernel's dispatcher the locked on-disk cache (under NUMBA_DISABLE_JIT, none)."""
    if isinstance(dispatcher, numba.core.registry.CPUDispatcher):
        dispatcher._cache = _LockedCache(dispatcher.py_func)  # type: ignore[attr-defined]
    return dispatcher


def jit(func: F) -> F:
    """Compile ``func`` lazily with dpfast's Numba options (cached, GIL released)."""
    return _cached(numba.njit(**_OPTIONS)(func))  # type: ignore[no-any-return]


def jit_inline(func: F) -> F:
    """Like :func:`jit`, for small helpers that LLVM should inline into their callers."""
    return _cached(numba.njit(inline="always", **_OPTIONS)(func))  # type: ignore[no-any-return]


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

    def __init__(
        self,
        started: Callable[[], None],
        ended: Callable[[], None],
        named: Callable[[str], None] | None = None,
    ) -> None:
        self._started = started
        self._ended = ended
        self._named = named
        self._depth = 0

    def on_start(self, event: Any) -> None:
        self._depth += 1
        if self._depth == 1:
            self._started()
            if self._named is not None:
                kernel = event.data["dispatcher"].py_func
                self._named(f"{kernel.__module__}.{kernel.__qualname__}{event.data['args']}")

    def on_end(self, event: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._ended()


def watch_compiles(
    started: Callable[[], None],
    ended: Callable[[], None],
    named: Callable[[str], None] | None = None,
) -> Callable[[], None]:
    """Call ``started()`` when a kernel begins to compile and ``ended()`` once it has.

    ``named``, if given, is called with the kernel's signature (module, name and argument
    types) as the compile begins.

    A compile happens on a kernel's first call with a type signature that is neither
    compiled in this process nor cached on disk (Numba's ``numba:compile`` event, which a
    cache hit does not emit), so this reports compiles as they happen, never a guess from
    the time a call takes. Returns the function that stops the watching.
    """
    listener = _CompileListener(started, ended, named)
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
