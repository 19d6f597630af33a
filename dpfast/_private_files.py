"""Files for the data holder only: readable by their owner alone, written atomically.

Private reports, compare pages and budget files hold exact facts about the private data
or its releases. They are created with permissions ``0600`` whatever the process's umask
(``mkstemp`` makes the temporary file owner-only; ``fchmod`` says so again, explicitly),
and renamed into place only once complete and flushed to disk.
"""

from __future__ import annotations

import os
from pathlib import Path

from dpfast._staging import file_beside, leftovers, remove_gone

#: Read and write for the file's owner, nothing for anyone else.
OWNER_ONLY = 0o600


def write_private_text(text: str, path: str | os.PathLike[str], *, mode: int = OWNER_ONLY) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, with permissions ``mode``.

    The text goes to a temporary file beside ``path`` (named for it and this process,
    :mod:`dpfast._staging`; those that killed runs left are removed first), made with
    ``mode`` whatever the umask, flushed to disk, then renamed over ``path``; the
    directory is synced, so the rename outlives a crash. On any exception
    (``KeyboardInterrupt`` included) the temporary file is removed and ``path`` is left as
    it was.

    Parameters
    ----------
    text : str
    path : str or os.PathLike
        The file to write; a symbolic link is replaced, not followed (resolve it first to
        write through it).
    mode : int, default 0o600
        The new file's permission bits.

    Examples
    --------
    >>> import os, stat, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "page.html")
    >>> write_private_text("<p>private</p>", path)
    >>> oct(stat.S_IMODE(os.stat(path).st_mode))
    '0o600'
    >>> import shutil; shutil.rmtree(folder)
    """
    target = Path(path)
    directory = target.parent
    remove_gone(leftovers(target))  # what runs killed while writing it left
    descriptor, tmp = file_beside(target, ".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_directory(directory)


def _sync_directory(directory: Path) -> None:
    """Flush a directory's entries (a rename in it) to disk, where the system allows it."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - not a directory one may open (not on Linux/macOS)
        return
    try:
        os.fsync(descriptor)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a directory
        pass
    finally:
        os.close(descriptor)
