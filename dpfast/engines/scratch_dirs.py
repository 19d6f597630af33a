"""Scratch directories and publishing: where a release is written before it is visible.

A release is written into a hidden scratch directory beside its output (on a cluster, into
this process's scratch directory) and made visible in one rename (:func:`publish_at`). The
directory's name (:mod:`dpfast._staging`) lets the next run find and remove, saying so, one a
killed run left (:func:`make_scratch`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dpfast._staging import (
    directory_beside,
    leftovers,
    process_directory,
    process_leftovers,
    publish,
    remove_gone,
    remove_path,
)

__all__ = [
    "make_scratch",
    "process_scratch",
    "publish_at",
    "remove_tree",
    "scratch_beside",
    "worker_numba_cache",
]


def remove_tree(path: Path, tries: int = 100) -> None:
    """Remove a directory tree; again while a writer still running adds files to it.

    A cluster's task cancelled while it writes runs on (Dask does not stop a running task)
    and may make a file as the tree is being removed; once the directory is gone, it cannot
    (Arrow does not make parent directories). Gives up after ``tries`` (5 s).
    """
    remove_path(path, tries)


def make_scratch(target: Path) -> Path:
    """Make a hidden scratch directory beside ``target``, readable by its owner only.

    Its name holds ``target``'s name, this process's id and its host. What a killed run to
    the same ``target`` (its process gone) left beside it is removed first, with a warning
    naming it; what a process that may still run made is left alone.
    """
    remove_gone(leftovers(target), warn=True)
    return directory_beside(target)


@contextmanager
def scratch_beside(target: Path) -> Iterator[Path]:
    """Yield a hidden scratch directory beside ``target``, removed however the block ends."""
    scratch = make_scratch(target)
    try:
        yield scratch
    finally:
        remove_tree(scratch)


_SCRATCH_LOCK = threading.Lock()

_SCRATCH: dict[tuple[str, str], Path] = {}


def process_scratch(parent: str, prefix: str) -> Path:
    """Return this process's scratch directory in ``parent`` (``""``: the temporary one).

    It is made once per ``(parent, prefix)`` (again if it was removed), readable by its
    owner only, and removed when the interpreter exits. Those of the same prefix whose
    process is gone are removed first, with a warning naming each.
    """
    with _SCRATCH_LOCK:
        made = _SCRATCH.get((parent, prefix))
        if made is None or not made.is_dir():
            if parent:
                Path(parent).mkdir(parents=True, exist_ok=True)
            where = Path(parent or tempfile.gettempdir())
            remove_gone(process_leftovers(where, [prefix]), warn=True)
            made = process_directory(where, prefix)
            atexit.register(shutil.rmtree, made, True)
            _SCRATCH[(parent, prefix)] = made
    return made


def publish_at(written: Path, target: Path) -> None:
    """Move the complete output into place, replacing a file or directory there.

    An existing directory is first moved into ``written``'s directory (the scratch
    directory, removed with it); if the rename then fails, it is put back.
    """
    publish([(written, target)], aside=written.parent)


def worker_numba_cache(directory: str | os.PathLike[str] | None, *, local: bool) -> str | None:
    """Return the Numba cache directory to give worker processes, made; None for Numba's own.

    ``directory``, else ``NUMBA_CACHE_DIR`` if set, is made and set in this process's
    environment if unset, for local workers to inherit. Otherwise ``local`` workers get
    ``None`` (nothing set): this process's cache, Numba's default (beside dpfast's code, where
    ``dpfast warm-up`` caches the kernels, or its per-user folder); workers elsewhere get
    ``dpfast-numba`` in the temporary directory, writable even where dpfast is installed read-only.
    """
    given = directory or os.environ.get("NUMBA_CACHE_DIR")
    if given:
        cache = os.fspath(given)
        os.makedirs(cache, exist_ok=True)
        os.environ.setdefault("NUMBA_CACHE_DIR", cache)
        return cache
    return None if local else os.path.join(tempfile.gettempdir(), "dpfast-numba")
