"""What an engine hands the release skeleton when its output is written: a :class:`Staged` release.

An engine's ``publish`` writes the whole release under a staging name (a hidden file or
directory beside the output, :mod:`dpfast._staging`) and returns a :class:`Staged`
release, still invisible. The release skeleton (:meth:`dpfast._release._run.Run.finish`),
not the engine, then commits the budget's reservation and writes the reports, and only
then calls :meth:`Staged.reveal`, which makes the output visible in one step (one rename)
and returns the released data. A release that fails before that leaves nothing at the
output (:meth:`Staged.discard`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dpfast._staging import directory_beside, leftovers, publish, remove_gone, remove_path
from dpfast.exceptions import DPFastValueError

__all__ = ["Staged", "stage_beside"]

T = TypeVar("T")


def _nothing() -> None:
    return None


class Staged:
    """A release written whole and not yet visible.

    ``reveal()`` makes it visible in one step and returns the released data (the table,
    the dataset, the cluster's frame); ``discard()`` removes what was staged. After the
    first call of either, both do nothing more (``reveal`` returns the same data).

    Examples
    --------
    >>> staged = Staged.ready([1, 2, 3])
    >>> staged.reveal()
    [1, 2, 3]
    >>> staged.discard()  # revealed: nothing to remove
    """

    def __init__(self, reveal: Callable[[], Any], discard: Callable[[], None] = _nothing) -> None:
        self._reveal = reveal
        self._discard = discard
        self._done = False
        self._data: Any = None

    @classmethod
    def ready(cls, data: Any) -> Staged:
        """Return a release that nothing hides: ``data`` (in memory, or a lazy frame)."""
        return cls(lambda: data)

    def reveal(self) -> Any:
        """Make the release visible (once) and return its data; on failure, discard it."""
        if not self._done:
            try:
                self._data = self._reveal()
            except BaseException:
                self.discard()
                raise
            self._done = True
        return self._data

    def giving(self, data: Any) -> Staged:
        """Return this release, revealed as ``data`` instead of what it gave."""

        def reveal() -> Any:
            self.reveal()
            return data

        return Staged(reveal, self.discard)

    def discard(self) -> None:
        """Remove what was staged, if it was not revealed; safe to call twice."""
        if not self._done:
            self._done = True
            self._discard()


def stage_beside(target: str | os.PathLike[str], write: Callable[[Path], T]) -> tuple[Staged, T]:
    """Have ``write(path)`` make the whole output at a staging path beside ``target``.

    The path is ``release`` with ``target``'s suffixes, inside a hidden directory beside
    it named for it and this process (what a killed run left there is removed first,
    with a warning).
    Returns a :class:`Staged` whose ``reveal()`` renames the output onto ``target`` (a
    file or a directory there is replaced) and returns ``write``'s result, and that
    result. If ``write`` fails, the staging directory is removed and nothing is left.
    """
    final = Path(target)
    parent = final.parent if str(final.parent) else Path(".")
    if not parent.is_dir():
        raise DPFastValueError(f"output directory {str(parent)!r} does not exist; create it first")
    remove_gone(leftovers(final))
    directory = directory_beside(final)
    staged_path = directory / ("release" + "".join(final.suffixes))  # its format kept
    try:
        result = write(staged_path)
    except BaseException:
        remove_path(directory)
        raise

    def reveal() -> T:
        try:
            publish([(staged_path, final)], aside=directory)
        finally:
            remove_path(directory)
        return result

    return Staged(reveal, lambda: remove_path(directory)), result
