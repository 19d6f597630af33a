"""``dpfast budget init`` and ``dpfast budget show``: a dataset's persistent privacy budget."""

from __future__ import annotations

import argparse

from dpfast.cli._common import Command, _number

_INIT_EXAMPLES = """\
examples:
  dpfast budget init people.budget.json --total-epsilon 3
  dpfast release ir-dp people.csv -o r1.csv --k 50 --epsilon 1 --schema s.json \\
      --budget people.budget.json

Releases of the same data add up: three releases at epsilon = 1 are 3-DP together. A
budget file keeps the total you allow for a dataset and every epsilon spent from it.
A release with --budget is refused before any work if its --epsilon does not fit in what
is left; its spend is recorded before its output is written, so a crash loses none.
"""


def _init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the budget file to create (JSON)")
    parser.add_argument(
        "--total-epsilon", type=_number, required=True, help="the most this dataset may spend"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing FILE")


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the budget file")


def _init(args: argparse.Namespace) -> int:
    from dpfast.budget import BudgetFile

    BudgetFile.create(args.file, args.total_epsilon, force=args.force)
    print(f"wrote {args.file}: a total of epsilon {args.total_epsilon:g}, none spent")
    return 0


def _show(args: argparse.Namespace) -> int:
    from dpfast.budget import BudgetFile

    budget = BudgetFile(args.file)
    data = budget.read()
    total = float(data["total_epsilon"])
    spent = BudgetFile.spent(data)
    lines = [
        f"{args.file}: total epsilon {total:g}, spent {spent:.6g}, left {total - spent:.6g}",
    ]
    if data["entries"]:
        lines.append(f"  {'#':>3}  {'status':<10}{'epsilon':>10}  {'method':<20}{'when':<26}output")
    for entry in data["entries"]:
        lines.append(
            f"  {entry['id']:>3}  {entry['status']:<10}{entry['epsilon']:>10.6g}  "
            f"{entry['method']:<20}{entry['time']:<26}{entry['output']}"
        )
    if any(entry["status"] == "reserved" for entry in data["entries"]):
        lines.append(
            "  reserved: a release that did not finish (counted as spent: its output may "
            "have been written)"
        )
    print("\n".join(lines))
    return 0


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
        description="Print a budget file: its total, what was spent, and every release.",
        epilog="",
        arguments=_show_arguments,
        handler=_show,
    ),
)
