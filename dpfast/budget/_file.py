"""A budget file: its lock, its reading and writing, and what may change in it."""

from __future__ import annotations

import errno
import math
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpfast._private_files import OWNER_ONLY, write_private_text
from dpfast._validation import check_epsilon, in_cli, option, quoted
from dpfast.budget._format import (
    RETURNED,
    BudgetEntry,
    Contents,
    create_hint,
    reserved_entry,
    spelled,
    switch,
)
from dpfast.budget._reservation import Reservation
from dpfast.exceptions import (
    BudgetExceededError,
    BudgetFileError,
    DPFastError,
    DPFastOSError,
)


class BudgetFile:
    """A dataset's budget file: the total ε allowed, and one entry per release.

    Every path to one file (a symbolic link, a relative path) is the same budget: the
    path is resolved, the lock sits beside the real file, and writes go through to it (a
    link stays a link). Every change happens under that lock (``fcntl.flock``, Linux and
    macOS) and is written atomically and durably; the file and its lock are created
    readable by their owner only.

    Parameters
    ----------
    path : str or os.PathLike
        A file made by :meth:`create` (or ``dpfast budget init``).

    Raises
    ------
    BudgetFileError
        The file does not exist.

    See Also
    --------
    Reservation : one release's hold on the budget, committed before it publishes.

    Examples
    --------
    >>> import os, shutil, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> budget = BudgetFile.create(os.path.join(folder, "people.budget.json"), 3.0)
    >>> same = BudgetFile(budget.path)
    >>> same.total_epsilon, same.spent(), same.remaining()
    (3.0, 0.0, 3.0)
    >>> shutil.rmtree(folder)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        #: The file itself, symbolic links resolved: every path to it shares its lock.
        self.real_path = Path(os.path.realpath(self.path))
        if not self.real_path.is_file():
            raise BudgetFileError(
                f"budget file {str(self.path)!r} does not exist; create it with {create_hint()}"
            )

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], total_epsilon: float, *, force: bool = False
    ) -> BudgetFile:
        """Write a new budget file allowing ``total_epsilon`` in all, with no entry.

        The file is readable and writable by its owner only (``0600``), whatever the
        umask; a symbolic link at ``path`` is written through.

        Parameters
        ----------
        path : str or os.PathLike
        total_epsilon : float
            The most the dataset may spend, over all its releases: finite, > 0.
        force : bool, default False
            Replace an existing file (its record of earlier releases is lost).

        Returns
        -------
        BudgetFile

        Raises
        ------
        BudgetFileError
            ``total_epsilon`` is not a finite number > 0, or the file exists and not
            ``force``.

        Examples
        --------
        >>> import os, shutil, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> path = os.path.join(folder, "people.budget.json")
        >>> BudgetFile.create(path, 2).remaining()
        2.0
        >>> BudgetFile.create(path, 5)
        Traceback (most recent call last):
        ...
        dpfast.exceptions.BudgetFileError: budget file '...' exists; ...
        >>> shutil.rmtree(folder)
        """
        total = _total(total_epsilon)
        if os.path.lexists(path) and not force:
            raise BudgetFileError(
                f"budget file {os.fspath(path)!r} exists; it holds the spend of earlier "
                f"releases, so it is not replaced unless {switch('force')}"
            )
        real = Path(os.path.realpath(path))
        with _lock_of(real):  # a release running on a file replaced with force: one order
            write_private_text(Contents(total, []).to_text(), real)
        return cls(path)

    # -- reading --------------------------------------------------------------------------

    def read(self) -> dict[str, Any]:
        """Return the file's contents as version 2 (docs/budget.md), checked.

        A version-1 file is returned as version 2 (and written so at its next change).
        """
        return self._contents().to_dict()

    def entries(self) -> list[BudgetEntry]:
        """Return the entries, in the order they were reserved.

        Examples
        --------
        >>> import os, shutil, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> budget = BudgetFile.create(os.path.join(folder, "b.json"), 1.0)
        >>> reservation = budget.reserve(0.25, method="laplace", output="r.parquet")
        >>> [(e.id, e.status, e.epsilon, e.state()) for e in budget.entries()]
        [(0, 'reserved', 0.25, 'running')]
        >>> shutil.rmtree(folder)
        """
        return list(self._contents().entries)

    @property
    def total_epsilon(self) -> float:
        """The most the dataset may spend, over all its releases."""
        return self._contents().total_epsilon

    def spent(self) -> float:
        """Return the ε counted as spent: every committed and every reserved entry."""
        return self._contents().spent()

    def remaining(self) -> float:
        """Return the ε still allowed."""
        return self._contents().left()

    def shortfall(self, epsilon: float) -> str | None:
        """Say why a release of ``epsilon`` would be refused now; None if it fits.

        What :meth:`reserve` would say, from the file as it is now: nothing is reserved or
        written (a forecast's check, :func:`dpfast.forecast`).

        Examples
        --------
        >>> import os, shutil, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> budget = BudgetFile.create(os.path.join(folder, "b.json"), 1.0)
        >>> budget.shortfall(0.5) is None, budget.shortfall(2.0).startswith("the release needs")
        (True, True)
        >>> shutil.rmtree(folder)
        """
        epsilon = check_epsilon(epsilon)
        contents = self._contents()
        return None if contents.fits(epsilon) else self._exceeded(contents, epsilon)

    # -- changing -------------------------------------------------------------------------

    def reserve(
        self,
        epsilon: float,
        *,
        method: str,
        output: str | os.PathLike[str] | None = None,
        columns: Sequence[Any] | None = None,
    ) -> Reservation:
        """Hold ``epsilon`` for a release, before any work; refuse it if it does not fit.

        The reservation counts as spent until it is committed (final) or abandoned
        (removed). Commit it *before* the output becomes visible; abandon it if the output
        never does (a :class:`Reservation` used in a ``with`` block is abandoned at its end
        unless it was committed).

        Parameters
        ----------
        epsilon : float
            The release's ε: finite, > 0 (checked before the file is touched).
        method : str
            The release method, as the entry records it.
        output : str or os.PathLike, optional
            Where the release will be published; None for a release returned to the
            caller and written by no one (the entry records :data:`RETURNED`).
        columns : sequence of str, optional
            The columns to protect, if chosen (the report's replace them at commit).

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceededError
            ``epsilon`` is more than what is left; the file is left as it was.
        EpsilonRangeError, TypeError
            ``epsilon`` is not a finite number > 0, as the release functions say.

        Examples
        --------
        >>> import os, shutil, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> budget = BudgetFile.create(os.path.join(folder, "b.json"), 1.0)
        >>> first = budget.reserve(0.75, method="laplace", output="r1.parquet")
        >>> budget.reserve(0.5, method="laplace", output="r2.parquet")
        Traceback (most recent call last):
        ...
        dpfast.exceptions.BudgetExceededError: the release needs epsilon=0.5 but ...
        >>> first.abandon()
        True
        >>> budget.remaining()
        1.0
        >>> shutil.rmtree(folder)
        """
        epsilon = check_epsilon(epsilon)
        if not isinstance(method, str) or not method:
            raise BudgetFileError(f"method must be a non-empty name, got {quoted(method)}")
        chosen = None
        if columns is not None:
            chosen = (str(columns),) if isinstance(columns, str) else tuple(map(str, columns))
        with self._locked() as contents:
            if not contents.fits(epsilon):
                raise BudgetExceededError(self._exceeded(contents, epsilon))
            where = RETURNED if output is None else os.fspath(output)
            entry = reserved_entry(contents.next_id(), epsilon, method, where, chosen)
            contents.entries.append(entry)
        return Reservation(self, entry)

    def clear(self, entry: int | None = None, *, force: bool = False) -> list[BudgetEntry]:
        """Remove reservations that will never commit; return them.

        A release commits its spend before any of its output becomes visible, so a
        reservation that was never committed published nothing: removing it returns its ε
        safely. Committed entries are final and never cleared.

        Parameters
        ----------
        entry : int, optional
            The entry to clear. By default every stale reservation (its process, on this
            host, is gone).
        force : bool, default False
            Also clear reservations whose process still runs, or ran on another host (this
            machine cannot tell): such a release then fails at its commit, publishing
            nothing.

        Returns
        -------
        list of BudgetEntry
            The entries removed.

        Raises
        ------
        BudgetFileError
            ``entry`` does not exist, is committed, or is held by a running process (or
            one on another host) and not ``force``.

        Examples
        --------
        >>> import os, shutil, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> budget = BudgetFile.create(os.path.join(folder, "b.json"), 1.0)
        >>> held = budget.reserve(0.5, method="laplace", output="r.parquet")
        >>> budget.clear()  # this process still runs: not stale
        []
        >>> [e.epsilon for e in budget.clear(held.id, force=True)]
        [0.5]
        >>> shutil.rmtree(folder)
        """
        with self._locked() as contents:
            if entry is None:
                chosen = [
                    e
                    for e in contents.entries
                    if e.status == "reserved" and (force or e.state() == "stale")
                ]
            else:
                chosen = [self._clearable(contents, entry, force)]
            gone = {e.id for e in chosen}
            contents.entries = [e for e in contents.entries if e.id not in gone]
        return chosen

    # -- helpers --------------------------------------------------------------------------

    def _contents(self) -> Contents:
        """Read the file (no lock needed: it is only ever replaced whole, by rename)."""
        try:
            text = self.real_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BudgetFileError(
                f"budget file {str(self.path)!r} cannot be read: {exc.strerror or exc}; "
                "check the path and its permissions"
            ) from None
        return Contents.from_text(text, str(self.path))

    @contextmanager
    def _locked(self) -> Iterator[Contents]:
        """Hold the lock; yield the contents; write them back if changed and no error."""
        with _lock_of(self.real_path):
            contents = self._contents()
            before = contents.to_text()
            yield contents
            after = contents.to_text()
            if after != before:
                self._write(after)

    def _write(self, text: str) -> None:
        """Replace the real file with ``text``, keeping its permissions."""
        status = os.stat(self.real_path)
        if status.st_nlink > 1:
            raise BudgetFileError(
                f"budget file {str(self.path)!r} has {status.st_nlink} hard links; a write "
                "would split them into budgets of their own. Keep one, and make the other "
                "paths symbolic links to it (ln -s)"
            )
        write_private_text(text, self.real_path, mode=stat.S_IMODE(status.st_mode))

    def _exceeded(self, contents: Contents, epsilon: float) -> str:
        """Say that ``epsilon`` does not fit, and what can be done."""
        left = max(contents.left(), 0.0)
        text = (
            f"the release needs {spelled('epsilon', epsilon)} but budget file "
            f"{str(self.path)!r} has {left:.6g} of {contents.total_epsilon:g} left; "
        )
        stale = math.fsum(e.epsilon for e in contents.entries if e.state() == "stale")
        if stale > 0:
            text += (
                f"{stale:.6g} of that is held by reservations of runs killed before they "
                f"committed ({_command('clear', self.path)} gives it back); "
            )
        return text + (
            f"lower {option('epsilon')} to at most {left:.6g}, or see what was spent with "
            f"{_command('show', self.path)}"
        )

    def _clearable(self, contents: Contents, number: int, force: bool) -> BudgetEntry:
        """Return entry ``number`` if it may be cleared; else say why not."""
        found = contents.find(number)
        where = f"entry {number} of {str(self.path)!r}"
        if found is None:
            numbers = ", ".join(str(e.id) for e in contents.entries) or "none"
            raise BudgetFileError(
                f"{where} does not exist (entries: {numbers}); {_command('show', self.path)} "
                "lists them"
            )
        if found.status == "committed":
            raise BudgetFileError(
                f"{where} is committed: its output may have been published, so its epsilon is "
                "spent for good; a committed entry is never cleared"
            )
        state = found.state()
        if state != "stale" and not force:
            holder = f"process {found.pid} on host {quoted(found.host)}"
            why = (
                f"{holder}, which still runs: it may yet commit and publish. Stop it "
                f"first (it then leaves the reservation stale), or pass {switch('force')}"
                " to make its commit fail (it then publishes nothing)"
                if state == "running"
                else f"{holder}, another machine: this one cannot tell whether it still runs. "
                f"Check there, then pass {switch('force')}"
            )
            raise BudgetFileError(f"{where} is held by {why}")
        return found


@contextmanager
def _lock_of(real_path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the budget file at ``real_path`` (``REAL_PATH.lock``).

    The lock file is made readable by its owner only, and stays (removing it would let
    two processes lock two files of one name).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        raise DPFastOSError("budget files need fcntl file locks (Linux or macOS)") from None
    lock = real_path.with_name(real_path.name + ".lock")
    try:
        try:
            descriptor = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, OWNER_ONLY)
            os.fchmod(descriptor, OWNER_ONLY)  # whatever the umask
        except FileExistsError:
            descriptor = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # releases the lock
    except DPFastError:
        raise
    except OSError as exc:  # the lock or a change cannot be written
        raise DPFastOSError(_unwritable(real_path, exc)) from exc


def _unwritable(real_path: Path, exc: OSError) -> str:
    """Say why the budget file at ``real_path`` cannot be locked or written, and the fix."""
    folder = repr(str(real_path.parent))  # a path, shown whole: the caller needs all of it
    if exc.errno == errno.ENOENT:
        fix = f"its folder {folder} does not exist: create it first"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = (
            f"its folder {folder} must be writable, since its lock and every change are "
            "written there: give yourself write permission, or keep the budget file in a "
            "writable folder"
        )
    else:
        fix = "check the path, its permissions and the disk"
    return f"budget file {str(real_path)!r} cannot be written ({exc.strerror or exc}); {fix}"


def _total(total_epsilon: Any) -> float:
    """Check a budget file's total ε: a finite number > 0."""
    number = isinstance(total_epsilon, (int, float)) and not isinstance(total_epsilon, bool)
    if not (number and math.isfinite(total_epsilon) and total_epsilon > 0):
        raise BudgetFileError(
            f"{option('total_epsilon')} must be a finite number > 0, got {quoted(total_epsilon)}; "
            f"it is the most the dataset may spend over all its releases, e.g. "
            f"{option('total_epsilon', 3)}"
        )
    return float(total_epsilon)


def _command(name: str, path: Path) -> str:
    """Name the budget command ``name`` as the caller knows it."""
    if in_cli():
        return f"'dpfast budget {name} {path}'"
    calls = {"show": "entries()", "clear": "clear()"}
    return f"BudgetFile({str(path)!r}).{calls[name]}"
