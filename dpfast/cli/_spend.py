"""A release command's spend from ``--budget FILE``: reserved, committed, or abandoned."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any

from dpfast.cli._outputs import from_data
from dpfast.exceptions import DPFastValueError

__all__ = ["Reserved", "Spend", "spending"]


class Spend:
    """A release's spend from ``--budget FILE`` (:mod:`dpfast.budget`).

    Reserved before any work (``--epsilon`` checked first), committed before the output
    is published (then final), abandoned if it never is.
    """

    def __init__(self, args: argparse.Namespace, method: str) -> None:
        self.args = args
        self.reservation: Any = None
        path = getattr(args, "budget", None)
        if path is None:
            return
        epsilon = getattr(args, "epsilon", None)
        if epsilon is None:
            raise DPFastValueError(
                "--budget needs --epsilon, the budget this release may spend (with --retention "
                "alone the epsilon is not known before the release)"
            )
        from dpfast.budget import BudgetFile

        columns = getattr(args, "columns", None)
        if columns is None and getattr(args, "column", None) is not None:
            columns = [args.column]
        self.reservation = BudgetFile(path).reserve(
            epsilon, method=method, output=os.path.abspath(args.output), columns=columns
        )

    def commit(self, report: Any) -> None:
        """Make the spend final, with the release's report; call before publishing."""
        if self.reservation is not None:
            self.reservation.commit(report)

    def before_publish(self, schema: Any) -> Callable[[Any], None]:
        """Return an engine's ``before_publish`` hook: commit with the report as written.

        The report is labelled as :func:`~dpfast.cli._outputs.mark_from_data` will label it,
        so that the entry records the guarantee the reports state.
        """

        def commit(report: Any) -> None:
            if schema is not None:
                report = from_data(report, schema, self.args)[0]
            self.commit(report)

        return commit

    def abandon(self) -> None:
        """Give back a reservation that was not committed (nothing was published)."""
        if self.reservation is not None:
            self.reservation.abandon()

    def budget(self, schema: Any) -> Any:
        """Return the budget a release function spends from, or None without ``--budget``.

        The command reserved the epsilon when it started; the release commits it, with the
        report as written, before its output is visible. What it does not commit, the
        command abandons.
        """
        if self.reservation is None:
            return None
        return Reserved(self.before_publish(schema))


@dataclasses.dataclass(frozen=True)
class Reserved:
    """The command's reservation, as a release function's budget (``BudgetLike``)."""

    committed: Callable[[Any], None]

    def reserve(self, epsilon: float, *, method: str, output: Any, columns: Any) -> Reserved:
        return self

    def commit(self, report: Any) -> None:
        self.committed(report)

    def abandon(self) -> None:
        pass  # the command abandons what was not committed (_spending)


@contextlib.contextmanager
def spending(args: argparse.Namespace, method: str) -> Iterator[Spend]:
    """Run a release command under its ``--budget`` reservation (if any).

    However the command ends, a reservation it did not commit is abandoned: its output
    was never published.
    """
    spend = Spend(args, method)
    args.spend = spend
    try:
        yield spend
    finally:
        spend.abandon()
