"""Scratch directories and publishing: where a release is written before it is visible.

A release is written into a hidden scratch directory beside its output (or, on a cluster,
into this process's scratch directory) and made visible in one rename (:func:`publish_at`).
Each scratch directory's name holds its process's id, so that the next run finds one a
killed run left (its process gone) and removes it, saying so (:func:`make_scratch`).
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["make_scratch", "process_scratch", "publish_at", "remove_tree", "scratch_beside"]


def remove_tree(path: Path, tries: int = 100) -> None:
    """Remove a directory tree; again while a writer still running adds files to it.

    A cluster's task cancelled while it writes runs on (Dask does not stop a running task)
    and may make a file as the tree is being removed; once the directory is gone, it cannot
    (Arrow does not make parent directories). Gives up after ``tries`` (5 s).
    """
    for _ in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.05)


def make_scratch(parent: Path, prefix: str) -> Path:
    """Make a scratch directory ``prefix...`` in ``parent``, readable by its owner only.

    Its name holds this process's id. A directory of the same prefix whose process is
    gone (a run that was killed) is removed first, with a warning naming it; one whose
    process may still run is left alone.
    """
    mark = f"{prefix}dpfast{os.getpid()}-"
    for stale in _stale_scratch(parent, prefix):
        remove_tree(stale)
        warnings.warn(
            f"removed {str(stale)!r}: the scratch directory of an earlier run that was "
            "killed before it could remove it",
            stacklevel=2,
        )
    return Path(tempfile.mkdtemp(prefix=mark, dir=parent))


def _stale_scratch(parent: Path, prefix: str) -> list[Path]:
    """Return the scratch directories ``prefix`` in ``parent`` whose process has ended."""
    found = []
    for path in parent.glob(f"{glob.escape(prefix)}dpfast*-*"):
        pid = path.name[len(prefix) + len("dpfast") :].split("-", 1)[0]
        if path.is_dir() and pid.isdigit() and not _running(int(pid)):
            found.append(path)
    return sorted(found)


def _running(pid: int) -> bool:
    """Return whether process ``pid`` may be running on this machine."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: running
        return True
    return True


@contextmanager
def scratch_beside(target: Path) -> Iterator[Path]:
    """Yield a hidden scratch directory beside ``target``, removed however the block ends."""
    parent = target.parent if str(target.parent) else Path(".")
    scratch = make_scratch(parent, f".{target.name}.")
    try:
        yield scratch
    finally:
        remove_tree(scratch)


_SCRATCH_LOCK = threading.Lock()

_SCRATCH: dict[tuple[str, str], Path] = {}


def process_scratch(parent: str, prefix: str) -> Path:
    """Return this process's scratch directory in ``parent`` (``""``: the temporary one).

    It is made once per ``(parent, prefix)`` (again if it was removed), readable by its
    owner only, and removed when the interpreter exits.
    """
    with _SCRATCH_LOCK:
        made = _SCRATCH.get((parent, prefix))
        if made is None or not made.is_dir():
            if parent:
                Path(parent).mkdir(parents=True, exist_ok=True)
            made = make_scratch(Path(parent or tempfile.gettempdir()), prefix)
            atexit.register(shutil.rmtree, made, True)
            _SCRATCH[(parent, prefix)] = made
    return made


def publish_at(written: Path, target: Path) -> None:
    """Move the complete output into place, replacing a file or directory there."""
    if target.exists() and target.is_dir() and not target.is_symlink():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(written, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(written, target)
