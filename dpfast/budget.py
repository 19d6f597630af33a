"""A persistent privacy budget per dataset: a JSON file of every ε spent on it.

Several releases of the same data compose: their ε add up. A budget file keeps the total
allowed for a dataset and one entry per release, across runs and processes:

1. :meth:`BudgetFile.reserve` checks that the release's ε fits in what is left and
   records it as ``"reserved"`` *before any work*, so a crash at any later point loses
   no spend (a reservation counts as spent);
2. :meth:`BudgetFile.settle` records the ε the release really spent (its ledger's total)
   as ``"spent"`` *before the output is published*;
3. :meth:`BudgetFile.cancel` returns the spend of a release whose output was never
   published (it failed or was interrupted before that: the atomic writers leave nothing
   behind), so nothing was released and nothing was spent. A run killed outright keeps
   its entry counted.

Every change happens under an exclusive lock (``FILE.lock``, ``fcntl.flock``) and is
written atomically, so concurrent runs on one machine cannot both take the last of a
budget.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpfast.exceptions import BudgetExceededError

_VERSION = 1
_SLACK = 1e-9  # relative: float sums of shares


class BudgetFile:
    """A dataset's budget file (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file, made by :meth:`create`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(
                f"budget file {str(self.path)!r} does not exist; create it with "
                "'dpfast budget init FILE --total-epsilon E'"
            )

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], total_epsilon: float, *, force: bool = False
    ) -> BudgetFile:
        """Write a new budget file allowing ``total_epsilon`` in all, with no entry."""
        if not (isinstance(total_epsilon, (int, float)) and math.isfinite(total_epsilon)):
            raise ValueError(
                f"the total epsilon must be a finite number > 0, got {total_epsilon!r}"
            )
        if total_epsilon <= 0:
            raise ValueError(f"the total epsilon must be > 0, got {total_epsilon!r}")
        target = Path(path)
        if target.exists() and not force:
            raise ValueError(
                f"budget file {str(target)!r} exists; it holds the spend of earlier releases, "
                "so it is not replaced unless --force"
            )
        _write(target, {"version": _VERSION, "total_epsilon": float(total_epsilon), "entries": []})
        return cls(target)

    def read(self) -> dict[str, Any]:
        """Return the file's contents, checked."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"budget file {str(self.path)!r} cannot be read: {exc}") from None
        if (
            not isinstance(data, dict)
            or data.get("version") != _VERSION
            or not isinstance(data.get("total_epsilon"), (int, float))
            or not isinstance(data.get("entries"), list)
        ):
            raise ValueError(f"{str(self.path)!r} is not a dpfast budget file (version {_VERSION})")
        return data

    @staticmethod
    def spent(data: dict[str, Any]) -> float:
        """Return the ε counted as spent: every ``"spent"`` and ``"reserved"`` entry."""
        return math.fsum(e["epsilon"] for e in data["entries"] if e["status"] != "cancelled")

    def remaining(self) -> float:
        """Return the ε still allowed."""
        data = self.read()
        return float(data["total_epsilon"]) - self.spent(data)

    def reserve(self, epsilon: float, *, method: str, output: str) -> int:
        """Record ``epsilon`` as reserved for a release; refuse it if it does not fit.

        Returns the entry's number, for :meth:`settle` or :meth:`cancel`.

        Raises
        ------
        BudgetExceededError
            ``epsilon`` is more than what is left.
        """
        with self._locked() as data:
            left = float(data["total_epsilon"]) - self.spent(data)
            if epsilon > left + _SLACK * float(data["total_epsilon"]):
                raise BudgetExceededError(
                    f"the release needs epsilon={epsilon:g} but budget file "
                    f"{str(self.path)!r} has {max(left, 0.0):.6g} of "
                    f"{float(data['total_epsilon']):g} left; 'dpfast budget show "
                    f"{self.path}' lists what was spent"
                )
            number = len(data["entries"])
            entry = {
                "id": number,
                "status": "reserved",
                "epsilon": float(epsilon),
                "method": method,
                "output": output,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            data["entries"].append(entry)
        return number

    def settle(self, entry: int, epsilon: float) -> None:
        """Record what the release really spent, before its output is published.

        Raises
        ------
        BudgetExceededError
            It spent more than was reserved and the difference does not fit: the entry is
            cancelled, and the output must not be published.
        """
        with self._locked() as data:
            record = data["entries"][entry]
            others = self.spent(data) - record["epsilon"]
            total = float(data["total_epsilon"])
            fits = epsilon <= total - others + _SLACK * total
            record["status"] = "spent" if fits else "cancelled"
            record["epsilon"] = float(epsilon) if fits else 0.0
        if not fits:
            raise BudgetExceededError(
                f"the release spent epsilon={epsilon:g}, more than the {total - others:.6g} "
                f"left in {str(self.path)!r}; it was not published"
            )

    def cancel(self, entry: int) -> None:
        """Return the spend of a release that was never published (it failed before that).

        Only the caller knows that nothing was published; a run killed outright never
        gets here, so its reservation or spend stays counted.
        """
        with self._locked() as data:
            record = data["entries"][entry]
            record["status"] = "cancelled"
            record["epsilon"] = 0.0

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Hold the file's lock; yield its contents; write them back if no error."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on Linux or macOS
            raise OSError("budget files need fcntl file locks (Linux or macOS)") from None
        lock = self.path.with_name(self.path.name + ".lock")
        with open(lock, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                data = self.read()
                yield data
                _write(self.path, data)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _write(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file, flushed, then renamed)."""
    folder = path.parent
    descriptor, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
