"""Scratch and staging files: named for their output and their process, found again later.

Every file or directory dpfast writes before an output is complete (an engine's scratch
directory, a file written whole then renamed over its target, the command line's staging
directory, a CSV input converted to Parquet) lies hidden beside that output, named::

    .OUTPUT.dpfast<pid>h<host>-<random><suffix>

``OUTPUT`` is the output's own name, ``<pid>`` the process that made it and ``<host>``
eight hex digits of a digest of its host's name. A scratch directory of a process rather
than of one output (a cluster's, in a temporary directory) is ``<prefix>dpfast<pid>h<host>-
<random>``. A run killed outright (SIGKILL, a lost machine) removes nothing; the next run
to the same output finds what it left (:func:`leftovers`) and removes what a process
gone from this host made (:func:`remove_gone`), never what a running process or another
host made (docs/engines.md, "Faults").

:func:`publish` renames several complete files into place as one step: all of them, or
none (the reports first, the data last).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLUSTER_PREFIXES",
    "Leftover",
    "directory_beside",
    "file_beside",
    "leftovers",
    "process_directory",
    "process_leftovers",
    "publish",
    "remove_gone",
    "remove_path",
]

#: The prefixes of the scratch directories the cluster engines make once per process in
#: their scratch directory (by default the temporary one): Dask's client, Spark's driver.
CLUSTER_PREFIXES = ("dpfast-dask-", "dpfast-spark-")

_HOST = hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]
#: The mark in a name: the process id, and (since the host was added) the host's digest.
_MARK = r"dpfast(?P<pid>\d+)(?:h(?P<host>[0-9a-f]{8}))?-"


def _owner() -> str:
    return f"dpfast{os.getpid()}h{_HOST}-"


def _parent(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def file_beside(target: str | os.PathLike[str], suffix: str = ".tmp") -> tuple[int, str]:
    """Make a hidden file beside ``target`` named for it and this process; return (fd, path).

    The file is new, open for writing and readable by its owner only (``mkstemp``).
    """
    path = Path(target)
    prefix = f".{path.name}.{_owner()}"
    return tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=_parent(path))


def directory_beside(target: str | os.PathLike[str]) -> Path:
    """Make a hidden directory beside ``target`` named for it and this process.

    Readable by its owner only (``mkdtemp``).
    """
    path = Path(target)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.{_owner()}", dir=_parent(path)))


def process_directory(parent: str | os.PathLike[str], prefix: str) -> Path:
    """Make a directory ``prefix...`` in ``parent`` named for this process (owner only)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{_owner()}", dir=parent))


@dataclass(frozen=True)
class Leftover:
    """A scratch or staging file (or directory) a dpfast process made, found by its name.

    ``state`` is ``"gone"`` when its process no longer runs on this host (it was killed:
    nothing will ever use the file), ``"running"`` when that process (or one given its
    id since) runs, ``"elsewhere"`` when it ran on another host, which this one cannot
    check.
    """

    path: Path
    pid: int
    state: str


def _found(parent: Path, pattern: re.Pattern[str]) -> list[Leftover]:
    parent = parent.absolute()  # named in full in messages
    try:
        names = sorted(os.listdir(parent))
    except OSError:  # the directory is gone or unreadable: nothing to find there
        return []
    found = []
    for name in names:
        match = pattern.match(name)
        if match is not None:
            pid, host = int(match.group("pid")), match.group("host")
            if host is not None and host != _HOST:
                state = "elsewhere"
            else:
                state = "running" if _running(pid) else "gone"
            found.append(Leftover(parent / name, pid, state))
    return found


def leftovers(target: str | os.PathLike[str]) -> list[Leftover]:
    """Return the scratch and staging files beside ``target`` that dpfast runs made for it."""
    path = Path(target)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.{_MARK}")
    return _found(_parent(path), pattern)


def process_leftovers(
    parent: str | os.PathLike[str] | None = None, prefixes: Sequence[str] = CLUSTER_PREFIXES
) -> list[Leftover]:
    """Return the process scratch directories ``prefix...`` in ``parent`` (default: temp)."""
    where = Path(tempfile.gettempdir() if parent is None else parent)
    alternatives = "|".join(re.escape(prefix) for prefix in prefixes)
    return _found(where, re.compile(rf"(?:{alternatives}){_MARK}"))


def _running(pid: int) -> bool:
    """Return whether process ``pid`` may be running on this machine."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)  # signal 0: no signal, only the check that it exists
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: running
        return True
    return True


def remove_path(path: Path, tries: int = 100) -> None:
    """Remove a file or a directory tree; again while a writer still running adds files.

    A cluster's task cancelled while it writes runs on (Dask does not stop a running
    task) and may make a file as the tree is being removed; once the directory is gone, it
    cannot (Arrow does not make parent directories). Gives up after ``tries`` (5 s).
    """
    for _ in range(tries):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                path.unlink()
            except FileNotFoundError:
                return
            except OSError:
                pass
        if not os.path.lexists(path):
            return
        time.sleep(0.05)


def remove_gone(found: Sequence[Leftover], *, warn: bool = True) -> list[Path]:
    """Remove the leftovers whose process is gone, each with a warning naming it.

    Returns the paths removed; those of a process still running, or of another host, are
    left alone.
    """
    removed = []
    for leftover in found:
        if leftover.state != "gone":
            continue
        remove_path(leftover.path)
        removed.append(leftover.path)
        if warn:
            warnings.warn(
                f"removed {str(leftover.path)!r}: scratch left by an earlier run (process "
                f"{leftover.pid}) that was killed before it could remove it",
                stacklevel=2,
            )
    return removed


def publish(pairs: Sequence[tuple[Path, Path]], aside: Path) -> None:
    """Rename each complete ``staged`` file or directory to its ``final`` path, in order.

    All of them, or none: the last rename makes the publication (put the data last). An
    existing ``final`` of an earlier pair is moved into the directory ``aside`` first, to
    be put back if a later rename fails (a directory there is not replaced: the rename
    fails); the last pair's is replaced in one rename, or, a directory (which a rename
    cannot replace), moved aside first. If anything stops the
    renames before the last is done (an error, ``KeyboardInterrupt``, the command line's
    SIGTERM), the finals already renamed are removed and what was moved aside is put
    back. What is moved aside stays in ``aside``, for the caller to remove.
    """
    moved: list[tuple[Path, Path]] = []
    last_staged = pairs[-1][0]
    try:
        for i, (staged, final) in enumerate(pairs):
            directory = final.is_dir() and not final.is_symlink()
            if os.path.lexists(final) and (directory if i == len(pairs) - 1 else not directory):
                kept = aside / f"replaced-{i}"
                os.replace(final, kept)
                moved.append((kept, final))
            os.replace(staged, final)
    except BaseException:
        if os.path.lexists(last_staged):  # not published: undo what was renamed
            for staged, final in pairs:
                if not os.path.lexists(staged) and os.path.lexists(final):
                    remove_path(final)
            for kept, final in moved:
                if os.path.lexists(kept):
                    os.replace(kept, final)
        raise
