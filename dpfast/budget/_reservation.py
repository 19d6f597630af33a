"""A release's reservation: reserve, then commit before publishing, or abandon."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from dpfast._validation import quoted
from dpfast.budget._format import BudgetEntry, committed_entry, spelled
from dpfast.exceptions import BudgetExceededError, BudgetFileError

if TYPE_CHECKING:
    from dpfast.budget._file import BudgetFile


class ReleaseReport(Protocol):
    """What a commit records from a release's report (:class:`dpfast.Report` has it)."""

    @property
    def epsilon(self) -> float | None:
        """The ε the release spent (its ledger's total), or None if it spent none."""

    @property
    def guarantee_level(self) -> str:
        """The guarantee level, e.g. ``"proven"``."""

    @property
    def protected_columns(self) -> Sequence[str]:
        """The columns the release protects."""


class Reservation:
    """One release's hold on a budget file, from :meth:`BudgetFile.reserve`.

    Its lifecycle is *reserve → commit → publish*: :meth:`commit` makes the spend final
    and must come before any output becomes visible, so a reservation that was never
    committed provably published nothing and may be given back (:meth:`abandon`, or
    :meth:`BudgetFile.clear` after a killed run). In a ``with`` block it is abandoned at the
    end unless committed, however the block ends.

    Parameters
    ----------
    budget : BudgetFile
        The budget file that holds the entry.
    entry : BudgetEntry
        The reserved entry, as :meth:`BudgetFile.reserve` wrote it. Call
        :meth:`BudgetFile.reserve` rather than this constructor: it checks and records the
        entry under the file's lock.

    Attributes
    ----------
    budget : BudgetFile
        The budget file that holds the entry.
    entry : BudgetEntry
        The entry as this process last wrote it (reserved, then committed).
    id : int
        The entry's number in the file.
    committed : bool
        Whether the spend is final.

    Examples
    --------
    >>> import os, shutil, tempfile
    >>> import numpy as np, dpfast
    >>> folder = tempfile.mkdtemp()
    >>> budget = dpfast.BudgetFile.create(os.path.join(folder, "ages.budget.json"), 1.0)
    >>> reservation = budget.reserve(0.5, method="laplace_dp", output="ages.npy")
    >>> ages = np.array([[23.0], [35.0], [47.0], [52.0]])
    >>> release = dpfast.laplace_dp(ages, epsilon=0.5, bounds={0: (17.0, 90.0)})
    >>> entry = reservation.commit(release.report)  # before ages.npy is written
    >>> entry.status, entry.epsilon, entry.guarantee_level
    ('committed', 0.5, 'proven')
    >>> reservation.abandon()  # too late: a committed spend is final
    False
    >>> budget.remaining()
    0.5
    >>> shutil.rmtree(folder)
    """

    def __init__(self, budget: BudgetFile, entry: BudgetEntry) -> None:
        self.budget = budget
        self.entry = entry

    @property
    def id(self) -> int:
        """The entry's number in the file."""
        return self.entry.id

    @property
    def committed(self) -> bool:
        """Whether the spend is final."""
        return self.entry.status == "committed"

    def commit(self, report: ReleaseReport) -> BudgetEntry:
        """Make the release's spend final, before its output becomes visible.

        Records the ε the release spent (``report.epsilon``; the reserved ε if it is
        None), its guarantee level and its protected columns. Once committed the spend is
        never refunded, whatever happens to the output.

        Parameters
        ----------
        report : Report
            The release's report (any object with ``epsilon``, ``guarantee_level`` and
            ``protected_columns``).

        Returns
        -------
        BudgetEntry
            The committed entry.

        Raises
        ------
        BudgetExceededError
            The release spent more than it reserved and the difference does not fit: the
            entry stays reserved; do not publish, abandon it.
        BudgetFileError
            The reservation was cleared (:meth:`BudgetFile.clear` with ``force``) or was
            already committed: do not publish.
        """
        if self.committed:
            raise BudgetFileError(
                f"entry {self.id} of {str(self.budget.path)!r} is already committed; a "
                "reservation commits once, for one release"
            )
        spent = self.entry.epsilon if report.epsilon is None else float(report.epsilon)
        if not (math.isfinite(spent) and spent >= 0):
            raise BudgetFileError(f"a release spends a finite epsilon >= 0, got {quoted(spent)}")
        with self.budget._locked() as contents:
            mine = contents.find(self.id)
            if mine != self.entry:
                raise BudgetFileError(
                    f"the reservation of entry {self.id} in {str(self.budget.path)!r} was "
                    "cleared while the release ran, so its spend is not recorded; nothing "
                    "was published. Run the release again"
                )
            if not contents.fits(spent, without=mine):
                raise BudgetExceededError(
                    f"the release spent {spelled('epsilon', spent)}, more than the "
                    f"{contents.left(without=mine):.6g} left in {str(self.budget.path)!r} "
                    f"(it reserved {self.entry.epsilon:g}); it must not be published"
                )
            committed = committed_entry(
                mine, spent, str(report.guarantee_level), tuple(map(str, report.protected_columns))
            )
            contents.put(committed)
        self.entry = committed
        return committed

    def abandon(self) -> bool:
        """Give the reserved ε back: the release will not publish; remove the entry.

        Does nothing once committed (a committed spend is final), or if the entry is no
        longer this reservation's (cleared). Returns whether it removed the entry; the
        file is then as it was before the reservation, unless others changed it since.
        """
        if self.committed:
            return False
        removed = False
        with self.budget._locked() as contents:
            if contents.find(self.id) == self.entry:  # still this reservation, uncommitted
                contents.entries = [e for e in contents.entries if e.id != self.id]
                removed = True
        return removed

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.abandon()
