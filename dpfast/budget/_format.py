"""The budget file's format (version 2), its entries, and the reading of version 1.

docs/budget.md describes every field. A version-1 file (dpfast 0.1) is read as version 2
and written as version 2 at its first change: its ``"spent"`` entries become
``"committed"``, its ``"reserved"`` ones stay reserved with no process recorded (stale:
version 1 recorded the spend before publishing too, so nothing of them was published),
and its ``"cancelled"`` ones (ε 0, nothing published) are dropped.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from dpfast._staging import Leftover, leftovers
from dpfast._validation import in_cli, option, quoted
from dpfast.budget._process import Holder
from dpfast.exceptions import BudgetFileError

VERSION = 2
_SLACK = 1e-9  # relative to the total: ε split into shares does not add up exactly in floats
_STATUSES = ("reserved", "committed")
#: The ``output`` of an entry whose release was returned to its caller, not written.
RETURNED = "(returned to the caller)"
# What a reserved entry's process is doing, as BudgetEntry.state() says it.
State = Literal["committed", "running", "stale", "unknown"]


def spelled(name: str, value: float) -> str:
    """Name an option with a number as the caller writes it: ``epsilon=1`` or ``--epsilon 1``."""
    return f"{option(name)}{' ' if in_cli() else '='}{value:g}"


def switch(name: str) -> str:
    """Name a switch as the caller turns it on: ``force=True`` or ``--force``."""
    return option(name) if in_cli() else f"{name}=True"


def create_hint() -> str:
    """Say how the caller creates a budget file."""
    if in_cli():
        return "'dpfast budget init FILE --total-epsilon E'"
    return "BudgetFile.create(path, total_epsilon)"


def now() -> str:
    """Return the local time, as the file writes it (ISO 8601 with its UTC offset)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass(frozen=True)
class BudgetEntry:
    """One release's entry in a budget file.

    Attributes
    ----------
    id : int
        The entry's number in the file (``dpfast budget clear FILE --entry ID``).
    status : {"reserved", "committed"}
        ``"reserved"``: held by a release that has not published (counted as spent until
        it commits or is abandoned); ``"committed"``: final, never refunded.
    epsilon : float
        The ε reserved, then the ε the release spent (its report's total).
    method : str
        The release method, as its caller named it (``"laplace"``, ``"ir_dp"``, ...).
    output : str
        Where the release is published (an absolute path, for files), or
        ``"(returned to the caller)"`` for a release given no ``output``.
    columns : tuple of str or None
        The protected columns: asked for at reservation (None: the method's default),
        then those of the report.
    guarantee_level : str or None
        The report's guarantee level (:class:`dpfast.Report`); None until committed.
    reserved_at, committed_at : str or None
        Local times, ISO 8601.
    pid, host : int or None, str or None
        The process that reserved, and its host (None in entries read from version 1).
    process_started : float or None
        When that process started (seconds since the epoch; None where the system does not
        say): a later process given the same id is not mistaken for it.

    Examples
    --------
    >>> import os, shutil, tempfile
    >>> from dpfast import BudgetFile
    >>> folder = tempfile.mkdtemp()
    >>> budget = BudgetFile.create(os.path.join(folder, "people.budget.json"), 1.0)
    >>> reservation = budget.reserve(0.25, method="ir_dp", output="out.parquet", columns=["age"])
    >>> entry = budget.entries()[0]
    >>> entry.id, entry.status, entry.epsilon, entry.columns, entry.guarantee_level
    (0, 'reserved', 0.25, ('age',), None)
    >>> entry.state(), entry.pid == os.getpid()
    ('running', True)
    >>> reservation.abandon()
    True
    >>> shutil.rmtree(folder)
    """

    id: int
    status: Literal["reserved", "committed"]
    epsilon: float
    method: str
    output: str
    columns: tuple[str, ...] | None
    guarantee_level: str | None
    reserved_at: str
    committed_at: str | None
    pid: int | None
    host: str | None
    process_started: float | None

    def state(self) -> State:
        """Return ``"committed"``, or what the reserving process is doing.

        ``"running"``: it runs on this host; ``"stale"``: it ran on this host and is gone
        (or the entry records no process), so it can never commit; ``"unknown"``: it ran on
        another host.
        """
        if self.status == "committed":
            return "committed"
        holder = self.holder()
        if holder is None:
            return "stale"
        if not holder.is_local():
            return "unknown"
        return "running" if holder.is_running() else "stale"

    def holder(self) -> Holder | None:
        """Return the reserving process, or None if the entry records none."""
        if self.pid is None or self.host is None:
            return None
        return Holder(self.pid, self.host, self.process_started)

    def leftovers(self) -> list[Leftover]:
        """Return the scratch and staging files that dpfast runs left beside the output.

        Hidden, named for the output and their process (``.OUTPUT.dpfast<pid>h<host>-...``):
        those whose process is gone hold data that was never published and that no
        committed ε covers (``dpfast budget clear`` removes them).
        """
        return leftovers(self.output) if self.output else []

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as the file writes it."""
        data = asdict(self)
        data["columns"] = None if self.columns is None else list(self.columns)
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str) -> BudgetEntry:
        """Read one version-2 entry; ``where`` names it in errors."""
        fields = (
            {name: data.get(name) for name in cls.__dataclass_fields__} if _is_map(data) else {}
        )
        ok = (
            isinstance(fields.get("id"), int)
            and fields.get("status") in _STATUSES
            and _is_number(fields.get("epsilon"))
            and math.isfinite(fields["epsilon"])
            and fields["epsilon"] >= 0
            and isinstance(fields.get("method"), str)
            and isinstance(fields.get("output"), str)
            and isinstance(fields.get("reserved_at"), str)
            and (fields.get("columns") is None or isinstance(fields.get("columns"), list))
        )
        if not ok:
            raise BudgetFileError(
                f"{where} is not a budget entry (expected id, status 'reserved' or "
                f"'committed', epsilon, method, output, reserved_at), got {quoted(data)}; restore "
                "the file from a copy"
            )
        columns = fields["columns"]
        fields["columns"] = None if columns is None else tuple(str(c) for c in columns)
        fields["epsilon"] = float(fields["epsilon"])
        return cls(**fields)


@dataclass
class Contents:
    """A budget file's contents: the total ε and the entries, in order."""

    total_epsilon: float
    entries: list[BudgetEntry]

    def spent(self) -> float:
        """Return the ε counted as spent: every entry, reserved or committed."""
        return math.fsum(entry.epsilon for entry in self.entries)

    def left(self, without: BudgetEntry | None = None) -> float:
        """Return the ε left, counting every entry but ``without``."""
        return self.total_epsilon - self.spent() + (0.0 if without is None else without.epsilon)

    def fits(self, epsilon: float, without: BudgetEntry | None = None) -> bool:
        """Return whether ``epsilon`` fits in what is left (float sums of shares: some slack)."""
        return epsilon <= self.left(without) + _SLACK * self.total_epsilon

    def find(self, number: int) -> BudgetEntry | None:
        """Return entry ``number``, or None."""
        return next((entry for entry in self.entries if entry.id == number), None)

    def put(self, entry: BudgetEntry) -> None:
        """Replace the entry with ``entry``'s id."""
        self.entries = [entry if e.id == entry.id else e for e in self.entries]

    def next_id(self) -> int:
        """Return the number of a new entry."""
        return max((entry.id for entry in self.entries), default=-1) + 1

    def to_dict(self) -> dict[str, Any]:
        """Return the contents as the file holds them (version 2)."""
        return {
            "version": VERSION,
            "total_epsilon": self.total_epsilon,
            "entries": [entry.to_dict() for entry in self.entries],
        }

    def to_text(self) -> str:
        """Return the file's text: indented JSON, one trailing newline."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_text(cls, text: str, where: str) -> Contents:
        """Read a version-2 or version-1 file's text; ``where`` names the file in errors."""
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BudgetFileError(
                f"budget file {where!r} is not valid JSON ({exc}); restore it from a copy"
            ) from None
        if not _is_map(data):
            data = {}
        version, total, entries = (
            data.get("version"),
            data.get("total_epsilon"),
            data.get("entries"),
        )
        if (
            version not in (1, VERSION)
            or not (_is_number(total) and math.isfinite(total) and total > 0)
            or not isinstance(entries, list)
        ):
            raise BudgetFileError(
                f"{where!r} is not a dpfast budget file (expected version {VERSION} or 1, a "
                f"total_epsilon > 0 and a list of entries); create one with {create_hint()}"
            )
        if version == 1:
            entries = [_from_version_1(e, f"{where}: entry {i}") for i, e in enumerate(entries)]
            entries = [e for e in entries if e is not None]
        read = [BudgetEntry.from_dict(e, f"{where}: entry {i}") for i, e in enumerate(entries)]
        if len({entry.id for entry in read}) != len(read):
            raise BudgetFileError(
                f"budget file {where!r} has two entries with one id; restore it from a copy"
            )
        return cls(float(total), read)


def _from_version_1(entry: Any, where: str) -> dict[str, Any] | None:
    """Return a version-1 entry as version 2, or None for a cancelled one (dropped)."""
    if not _is_map(entry) or entry.get("status") not in ("spent", "reserved", "cancelled"):
        raise BudgetFileError(f"{where} is not a version-1 budget entry, got {quoted(entry)}")
    if entry["status"] == "cancelled":
        return None
    return {
        "id": entry.get("id"),
        "status": "committed" if entry["status"] == "spent" else "reserved",
        "epsilon": entry.get("epsilon"),
        "method": entry.get("method"),
        "output": entry.get("output"),
        "columns": None,
        "guarantee_level": None,
        "reserved_at": entry.get("time"),
        "committed_at": None,
        "pid": None,
        "host": None,
        "process_started": None,
    }


def reserved_entry(
    number: int, epsilon: float, method: str, output: str, columns: tuple[str, ...] | None
) -> BudgetEntry:
    """Return a new reserved entry, held by the calling process."""
    holder = Holder.this_process()
    return BudgetEntry(
        id=number,
        status="reserved",
        epsilon=epsilon,
        method=method,
        output=output,
        columns=columns,
        guarantee_level=None,
        reserved_at=now(),
        committed_at=None,
        pid=holder.pid,
        host=holder.host,
        process_started=holder.started,
    )


def committed_entry(
    entry: BudgetEntry, epsilon: float, guarantee_level: str, columns: tuple[str, ...]
) -> BudgetEntry:
    """Return ``entry`` committed: final, with what the release spent and guarantees."""
    return replace(
        entry,
        status="committed",
        epsilon=epsilon,
        guarantee_level=guarantee_level,
        columns=columns,
        committed_at=now(),
    )


def _is_map(value: Any) -> bool:
    return isinstance(value, dict)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
