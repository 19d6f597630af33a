"""``dpfast budget init``, ``show`` and ``clear``: a dataset's persistent privacy budget."""

from __future__ import annotations

import argparse
import math
from typing import Any

from dpfast.cli._parsing import Command, integer, number

_INIT_EXAMPLES = """\
examples:
  dpfast budget init people.budget.json --total-epsilon 3
  dpfast release ir-dp people.csv -o r1.csv --k 50 --epsilon 1 --schema s.json \\
      --budget people.budget.json
  dpfast budget show people.budget.json

Releases of the same data add up: three releases at epsilon = 1 are 3-DP together. A
budget file keeps the total you allow for a dataset and every epsilon spent from it
(docs/budget.md). A release with --budget reserves its --epsilon before any work (refused
if it does not fit in what is left), and commits it, for good, before its output is
published: a crash never leaves output whose spend was given back. The file and its lock
(FILE.lock) are readable by their owner only.
"""

_CLEAR_EXAMPLES = """\
examples:
  dpfast budget clear people.budget.json              # every stale reservation
  dpfast budget clear people.budget.json --entry 4    # one of them

A release commits its spend before any of its output is published, so a reservation that
was never committed published nothing, and clearing it returns its epsilon safely. A run
killed outright (kill -9, a lost machine) leaves its reservation behind: 'dpfast budget
show' marks it STALE once its process (recorded with its host and start time) is gone.
Committed entries are final and never cleared. Clear also removes the hidden scratch and
staging files that killed runs left beside the budget's outputs and the budget file, and
their cluster scratch directories in the temporary directory, and names each; those of a
process still running, or of another host, are named and left alone.
"""


def _init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the budget file to create (JSON)")
    parser.add_argument(
        "--total-epsilon", type=number, required=True, help="the most this dataset may spend"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing FILE")


def _file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the budget file")


def _clear_arguments(parser: argparse.ArgumentParser) -> None:
    _file_argument(parser)
    parser.add_argument(
        "--entry",
        metavar="N",
        type=integer,
        help="clear this reservation (its number in 'dpfast budget show'); default: every "
        "stale one",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="also clear reservations whose process still runs or ran on another host; such "
        "a release then fails at its commit and publishes nothing",
    )


def _init(args: argparse.Namespace) -> int:
    from dpfast.budget import BudgetFile

    BudgetFile.create(args.file, args.total_epsilon, force=args.force)
    print(f"wrote {args.file}: a total of epsilon {args.total_epsilon:g}, none spent")
    return 0


def _show(args: argparse.Namespace) -> int:
    from dpfast.budget import BudgetFile

    budget = BudgetFile(args.file)
    total, entries = budget.total_epsilon, budget.entries()
    spent = math.fsum(entry.epsilon for entry in entries)
    lines = [f"{args.file}: total epsilon {total:g}, spent {spent:.6g}, left {total - spent:.6g}"]
    if entries:
        lines.append(
            f"  {'#':>3}  {'status':<10}{'epsilon':>10}  {'method':<20}{'guarantee':<16}"
            f"{'columns':<24}{'when':<26}output"
        )
    for entry in entries:
        columns = "(method's default)" if entry.columns is None else _shortened(entry.columns)
        lines.append(
            f"  {entry.id:>3}  {entry.status:<10}{entry.epsilon:>10.6g}  {entry.method:<20}"
            f"{entry.guarantee_level or '-':<16}{columns:<24}"
            f"{entry.committed_at or entry.reserved_at:<26}{entry.output}"
        )
        if entry.status == "reserved":
            lines.append(f"       {_reservation_state(entry, args.file)}")
    print("\n".join(lines))
    return 0


def _shortened(columns: tuple[str, ...]) -> str:
    shown = ",".join(columns)
    return shown if len(shown) <= 22 else shown[:19] + "..."


def _holder(entry: Any) -> str:
    return f"process {entry.pid} on host {entry.host}"


def _reservation_state(entry: Any, file: str) -> str:
    """Say in plain words what a reserved entry's process is doing, and what to do."""
    state = entry.state()
    clear = f"'dpfast budget clear {file} --entry {entry.id}'"
    if state == "running":
        return (
            f"^ running: {_holder(entry)}; counted as spent until it commits (final) or "
            "gives it back"
        )
    if state == "unknown":
        return (
            f"^ reserved by {_holder(entry)}, another machine: if that run is over, {clear} "
            "--force gives it back"
        )
    who = _holder(entry) + " is gone" if entry.pid is not None else "no process recorded"
    return (
        f"^ STALE: {who}; it never committed, so nothing of it was published. {clear} gives "
        "its epsilon back"
    )


def _clear(args: argparse.Namespace) -> int:
    from dpfast.budget import BudgetFile

    budget = BudgetFile(args.file)
    cleared = budget.clear(args.entry, force=args.force)
    lines = []
    if not cleared:
        running = [e.id for e in budget.entries() if e.status == "reserved"]
        held = (
            f"; reservations {', '.join(map(str, running))} are not stale (see 'dpfast budget "
            f"show {args.file}')"
            if running
            else ""
        )
        lines.append(f"{args.file}: no stale reservation to clear{held}")
    for entry in cleared:
        who = _holder(entry) if entry.pid is not None else "a version-1 run"
        lines.append(
            f"cleared entry {entry.id}: epsilon {entry.epsilon:g} reserved by {entry.method} "
            f"for {entry.output} ({who})"
        )
    if cleared:
        lines.append(
            "a release commits its spend before any of its output is published, so these runs "
            f"published nothing; epsilon {budget.remaining():.6g} of {budget.total_epsilon:g} "
            "is left"
        )
    print("\n".join(lines + _leftovers(budget, cleared)))
    return 0


def _leftovers(budget: Any, cleared: list[Any]) -> list[str]:
    """Remove what killed runs left (their process gone); say what was removed and kept.

    Beside every output the budget names (its entries', and those just cleared), beside
    the budget file itself, and the cluster scratch directories in the temporary
    directory: hidden files named for them and their process (docs/budget.md).
    """
    from dpfast._staging import leftovers, process_leftovers, remove_gone

    found = leftovers(budget.real_path) + process_leftovers()
    for entry in [*budget.entries(), *cleared]:
        found += [f for f in entry.leftovers() if f not in found]
    removed = remove_gone(found, warn=False)
    lines = []
    if removed:
        lines.append(
            "removed what runs killed before they could clean up left (never published, "
            f"covered by no epsilon): {_paths(f for f in found if f.path in removed)}"
        )
    running = [f for f in found if f.state == "running"]
    if running:
        lines.append(f"left alone, their process still runs: {_paths(running)}")
    elsewhere = [f for f in found if f.state == "elsewhere"]
    if elsewhere:
        lines.append(
            "made on another host, which this one cannot check: delete them once that run "
            f"is over: {_paths(elsewhere)}"
        )
    return lines


def _paths(found: Any) -> str:
    return ", ".join(f"{str(f.path)!r} (process {f.pid})" for f in found)


#: ``dpfast budget``'s commands.
COMMANDS = (
    Command(
        "init",
        help="create a dataset's budget file",
        description="Create a budget file: the total epsilon allowed for one dataset.",
        epilog=_INIT_EXAMPLES,
        arguments=_init_arguments,
        handler=_init,
    ),
    Command(
        "show",
        help="print a budget file's ledger",
        description="Print a budget file: its total, what was spent, every release (its "
        "method, guarantee, columns and output) and what each unfinished one is doing.",
        epilog="",
        arguments=_file_argument,
        handler=_show,
    ),
    Command(
        "clear",
        help="give back the epsilon of reservations that will never commit",
        description="Remove stale reservations, left by runs killed before they committed "
        "(they published nothing), or one reservation with --entry, and the scratch files "
        "killed runs left.",
        epilog=_CLEAR_EXAMPLES,
        arguments=_clear_arguments,
        handler=_clear,
    ),
)
