"""The command line's parser, its commands and the options the release commands share."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from dpfast.exceptions import DPFastError

__all__ = [
    "FORMATS_HELP",
    "Command",
    "Parser",
    "UsageError",
    "column_list",
    "columns_argument",
    "delimiter",
    "integer",
    "io_arguments",
    "measuring_metrics",
    "measuring_risk",
    "memory_size",
    "no_epsilon_arguments",
    "number",
    "quiet_argument",
    "releasing",
    "run_arguments",
    "unprotected_argument",
    "writing",
]


class UsageError(DPFastError):
    """A command-line usage error (exit code 2)."""


class Parser(argparse.ArgumentParser):
    """A parser whose errors exit with code 2, and whose options may be added on first use.

    ``arguments``, when given, adds the parser's options the first time it parses: a
    ``dpfast release`` run builds the options of its own method only.
    """

    def __init__(
        self,
        *args: Any,
        arguments: Callable[[argparse.ArgumentParser], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._arguments = arguments

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._arguments is not None:
            arguments, self._arguments = self._arguments, None
            arguments(self)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; run '{self.prog} --help' for usage")


@dataclass(frozen=True)
class Command:
    """One subcommand: its help texts, what adds its options, and what runs it."""

    name: str
    help: str
    description: str
    epilog: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]

    def add_to(self, subcommands: Any, formatter: type[argparse.HelpFormatter]) -> None:
        """Add this command to ``subcommands``; its options are added when it is used."""
        parser = subcommands.add_parser(
            self.name,
            help=self.help,
            description=self.description,
            epilog=self.epilog,
            formatter_class=formatter,
            arguments=self.arguments,
        )
        parser.set_defaults(handler=self.handler)


def _switch(command: Command, flag: str, text: str) -> Command:
    """Return ``command`` whose parser also takes the switch ``flag`` (help ``text``)."""
    arguments = command.arguments

    def with_switch(parser: argparse.ArgumentParser) -> None:
        arguments(parser)
        parser.add_argument(flag, action="store_true", help=text)

    return dataclasses.replace(command, arguments=with_switch)


def writing(command: Command) -> Command:
    """Return ``command`` with a ``--force`` option: it writes files that may exist."""
    return _switch(
        command,
        "--force",
        "overwrite the output and its reports if they exist (default: refuse, so that a "
        "rerun does not spend the privacy budget on the same data again by mistake)",
    )


def measuring_risk(command: Command) -> Command:
    """Return release ``command`` with a ``--risk`` option (its risk in the private report)."""
    return _switch(
        command,
        "--risk",
        "measure the release's disclosure risk (record linkage, interval disclosure; "
        "neighbourhood counts for k-noise) with each released row paired with its source "
        "through the release's own row order, into OUTPUT.private-report.json (PRIVATE), "
        "where dpfast evaluate reads it. In memory only (docs/risk.md)",
    )


def measuring_metrics(command: Command) -> Command:
    """Return release ``command`` with a ``--metrics`` option (its metrics, private)."""
    return _switch(
        command,
        "--metrics",
        "measure the release's utility (per protected column the relative error, with each "
        "released value paired with its source through the release's own row order, the "
        "Jensen-Shannon divergence and the variance variation) into "
        "OUTPUT.private-report.json (PRIVATE; never the public report), where dpfast "
        "evaluate reads it: with --risk, a release that shuffles its rows is then on "
        "evaluate's default risk-utility map. In memory only (docs/metrics.md)",
    )


def releasing(command: Command) -> Command:
    """Return a release ``command`` with ``--dry-run``, and ``--force`` (:func:`writing`)."""
    dry_run = _switch(
        command,
        "--dry-run",
        "print the release's forecast from public values only (the schema, the options and "
        "the row count): per protected column its share of epsilon, its noise, and the share "
        "of values on a bound if they were spread evenly; then the forecast from the data "
        "(PRIVATE, computed from INPUT's values: not for publication): the share the noise is "
        "expected to push onto a bound, the bias and standard error of each column's mean, "
        "a categorical column's expected total-variation distance (docs/forecast.md); "
        "reserves no budget, spends nothing, writes nothing",
    )
    return writing(dry_run)


# -- option types ----------------------------------------------------------------------


def _quoted(text: str) -> str:
    """Quote ``text`` as messages quote a value; imported on an error only, not at start-up."""
    from dpfast._validation import quoted

    return quoted(text)


def integer(text: str) -> int:
    """Parse a whole number."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {_quoted(text)}") from None


def number(text: str) -> float:
    """Parse a number."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_quoted(text)}") from None


def memory_size(text: str) -> str:
    """Check a memory size such as ``4GiB`` as it is parsed; return it as written."""
    from dpfast.engines import parse_memory

    try:
        parse_memory(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def percent(text: str) -> float:
    """Parse a percentage in ``[0, 100]`` (``10`` or ``10%``)."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {_quoted(text)}") from None
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"expected a percentage in [0, 100], got {_quoted(text)}")
    return value


def column_list(text: str) -> list[str]:
    """Column names: ``age,income``, or a JSON list for names with commas."""
    if text.lstrip().startswith("["):
        try:
            names = json.loads(text)
        except json.JSONDecodeError:
            names = None
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise argparse.ArgumentTypeError(
                'expected a JSON list of column names such as \'["a,b", "c"]\', got '
                f"{_quoted(text)}"
            )
        return names
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated column names such as 'age,income' (or a JSON list "
            f'such as \'["a,b", "c"]\' for names with commas), got {_quoted(text)}'
        )
    return names


def delimiter(text: str) -> str:
    """One field separator character (or ``tab``)."""
    if text in ("tab", "\\t"):
        return "\t"
    if len(text) != 1:
        raise argparse.ArgumentTypeError(
            f"expected one character such as ';' (or 'tab'), got {_quoted(text)}"
        )
    return text


# -- options the release commands share -----------------------------------------------

FORMATS_HELP = ".parquet, .csv, .csv.gz, .tsv or .tsv.gz"


def io_arguments(parser: argparse.ArgumentParser) -> None:
    """INPUT, ``-o OUTPUT``, ``--delimiter`` and ``--encoding``."""
    parser.add_argument(
        "input",
        metavar="INPUT",
        help=f"input table ({FORMATS_HELP}), or a directory of Parquet files or a glob "
        "(released out of core). A directory is its own *.parquet files, never its "
        "subdirectories' (one that has some is refused: quote a glob such as "
        "'DIR/**/*.parquet' to read every level)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT",
        required=True,
        help=f"output table ({FORMATS_HELP}; out of core: .parquet or a directory of Parquet "
        "files); OUTPUT.public-report.json (may be published with it) and "
        "OUTPUT.private-report.json (keep it private) are written beside it",
    )
    parser.add_argument(
        "--delimiter",
        metavar="CHAR",
        type=delimiter,
        help="field separator of a CSV or TSV input and output ('tab' for a tab). Default: "
        "',' for .csv and .csv.gz, tab for .tsv and .tsv.gz",
    )
    parser.add_argument(
        "--encoding",
        metavar="NAME",
        help="text encoding of a CSV or TSV input, e.g. latin-1 or cp1252. Default: utf-8",
    )


def bounded_arguments(parser: argparse.ArgumentParser, k_help: str | None) -> None:
    """INPUT and OUTPUT, ``--k`` (where ``k_help`` is given), ``--epsilon`` and ``--schema``.

    For the releases whose numeric columns need public bounds, which the schema gives.
    """
    io_arguments(parser)
    if k_help is not None:
        parser.add_argument("--k", type=integer, required=True, help=k_help)
    parser.add_argument("--epsilon", type=number, required=True, help="total privacy budget")
    parser.add_argument("--schema", required=True, help="schema JSON with public bounds")
    parser.add_argument(
        "--max-on-bound",
        type=percent,
        metavar="PCT",
        help="refuse the release, before any budget is reserved or anything written, when "
        "its forecast puts more than PCT percent of a numeric column's values onto a bound; "
        "the data is read once more for the forecast from the data (PRIVATE: the share the "
        "noise is expected to push there, docs/forecast.md#from-the-data) where the method "
        "has one (ir-dp, mdav-dp), else the public forecast decides",
    )


def columns_argument(parser: argparse.ArgumentParser) -> None:
    """``--columns``: a subset of the schema's protected columns."""
    parser.add_argument(
        "--columns",
        type=column_list,
        help="protect only these schema columns (comma-separated, or a JSON list for names "
        "with commas); default: every column the schema protects",
    )


def unprotected_argument(
    parser: argparse.ArgumentParser, groups: str | None, keep_needs: str | None = None
) -> None:
    """``--unprotected``: what to do with the columns the schema does not protect.

    ``keep_needs`` names the option without which rows are not kept whole (``keep`` is
    then refused).
    """
    keep = (
        f"keep: kept in their rows, where they show which rows share a {groups}: NOT "
        "differentially private"
        if groups
        else "keep: kept in their rows, NOT protected"
    )
    if keep_needs:
        keep += f" (needs {keep_needs}: otherwise no output row is an input record)"
    parser.add_argument(
        "--unprotected",
        choices=("drop", "shuffle", "keep"),
        default="drop",
        help="what to do with the columns the schema does not protect. drop: leave them "
        "out; shuffle: write them unchanged, NOT protected, in a random row order of their "
        f"own; {keep}. Default: drop",
    )


def quiet_argument(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress display or notes."""
    parser.add_argument("--quiet", action="store_true", help="no progress display or notes")


def _budget_argument(parser: argparse.ArgumentParser) -> None:
    """``--budget FILE``: the dataset's budget file."""
    parser.add_argument(
        "--budget",
        metavar="FILE",
        help="spend from this dataset's budget file (dpfast budget init): refused before any "
        "work if --epsilon does not fit in what is left",
    )


class _SpendsNothing(argparse.Action):
    """A DP-only flag given to a command that spends no ε: refused, saying why."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{parser.prog} spends no epsilon (it is not differential privacy), so it takes "
            f"no {option_string}; drop it, or release with a differentially private method: "
            "dpfast release ir-dp, laplace, mdav-dp, diffgen or randomized-response"
        )


def no_epsilon_arguments(parser: argparse.ArgumentParser) -> None:
    """``--epsilon`` and ``--budget``, hidden, for a command without ε: refused with the why."""
    for flag in ("--epsilon", "--budget"):
        parser.add_argument(
            flag, nargs="?", action=_SpendsNothing, default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )  # fmt: skip


_MEMORY_HELP = (
    "release out of core within about SIZE of working memory (e.g. 4GiB; at least 96KiB): INPUT "
    "may then be a Parquet file, a directory of Parquet files or a glob, and OUTPUT a "
    ".parquet file or a dataset directory. An INPUT directory or glob implies it "
    "(default 4GiB). The same release as in memory (docs/engines.md)"
)


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--master`` and ``--scheduler``."""
    parser.add_argument(
        "--engine",
        choices=("local", "spark", "dask"),
        default="local",
        help="local: this process, in memory or out of core (default); spark: the passes "
        "over INPUT (Parquet) run on Spark executors, which write OUTPUT (a dataset "
        "directory of that name, whatever its suffix) where "
        "the release allows it; needs pip install 'dpfast[spark]'. dask: the same on Dask "
        "workers (pip install 'dpfast[dask]'). The same release on every engine",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --engine dask: the Dask scheduler's address (default: a local cluster "
        "of worker processes, one per core, started and closed by this command)",
    )
    parser.add_argument(
        "--master",
        metavar="URL",
        help="with --engine spark: the Spark master (default local[*], every core here)",
    )


def run_arguments(
    parser: argparse.ArgumentParser,
    *,
    seed: bool = True,
    threads: bool = False,
    budget: bool = True,
    memory_help: str = _MEMORY_HELP,
) -> None:
    """Add the options of how a release runs, after the release's own.

    ``--seed`` (if ``seed``: the release draws noise), ``--threads`` (if ``threads``),
    ``--memory-limit`` (help ``memory_help``), :func:`_engine_arguments`, ``--budget`` (if
    ``budget``: the release spends epsilon; else ``--epsilon`` and ``--budget`` are refused,
    saying why: :func:`no_epsilon_arguments`) and ``--quiet``, in this order.
    """
    if seed:
        parser.add_argument("--seed", type=integer, help="seeded noise: NOT for publication")
    if threads:
        parser.add_argument("--threads", type=integer, help="worker threads (default: cores)")
    parser.add_argument("--memory-limit", metavar="SIZE", type=memory_size, help=memory_help)
    _engine_arguments(parser)
    if budget:
        _budget_argument(parser)
    else:
        no_epsilon_arguments(parser)
    quiet_argument(parser)
