"""Shared by the commands: parsing, progress display, notes, input checks, writing."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

# -- parsing ---------------------------------------------------------------------------


class _UsageError(Exception):
    """A command-line usage error (exit code 2)."""


class _Parser(argparse.ArgumentParser):
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
        raise _UsageError(f"{message}; run '{self.prog} --help' for usage")


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


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _column_list(text: str) -> list[str]:
    """Column names: ``age,income``, or a JSON list for names with commas."""
    if text.lstrip().startswith("["):
        try:
            names = json.loads(text)
        except json.JSONDecodeError:
            names = None
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise argparse.ArgumentTypeError(
                f'expected a JSON list of column names such as \'["a,b", "c"]\', got {text!r}'
            )
        return names
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated column names such as 'age,income' (or a JSON list "
            f'such as \'["a,b", "c"]\' for names with commas), got {text!r}'
        )
    return names


def _columns_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--columns",
        type=_column_list,
        help="protect only these schema columns (comma-separated, or a JSON list for names "
        "with commas); default: every column the schema protects",
    )


def _selection(
    args: argparse.Namespace, schema: Any, *, categorical: bool
) -> tuple[list[str], dict[Hashable, tuple[float, float]], dict[Hashable, Any]]:
    """Return the protected columns (:func:`_selected`), their public bounds and taxonomies."""
    columns = _selected(args, schema, categorical=categorical)
    bounds: dict[Hashable, tuple[float, float]] = {
        name: bound for name, bound in schema.bounds().items() if name in columns
    }
    return columns, bounds, _schema_taxonomies(schema, columns) if categorical else {}


def _selected(args: argparse.Namespace, schema: Any, *, categorical: bool) -> list[str]:
    """Return the columns to protect: ``--columns`` (declared, protected), else the schema's."""
    declared: list[str] = schema.protected_numeric()
    if categorical:
        declared = declared + schema.protected_categorical()
    chosen = getattr(args, "columns", None)
    if chosen is None:
        return declared
    kinds = "numeric" + (' or categorical (with a "taxonomy")' if categorical else "")
    wrong = [c for c in chosen if c not in declared]
    if wrong:
        raise ValueError(
            f"--columns names {', '.join(repr(c) for c in wrong)}, which {args.schema} does not "
            f"declare as a protected {kinds} column; declare it there (with its bounds or "
            "taxonomy), or leave it out of --columns"
        )
    return list(chosen)


def _delimiter(text: str) -> str:
    if text in ("tab", "\\t"):
        return "\t"
    if len(text) != 1:
        raise argparse.ArgumentTypeError(
            f"expected one character such as ';' (or 'tab'), got {text!r}"
        )
    return text


_FORMATS_HELP = ".parquet, .csv, .csv.gz, .tsv or .tsv.gz"


def _io_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", help=f"input table ({_FORMATS_HELP})")
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT",
        required=True,
        help=f"output table ({_FORMATS_HELP}); OUTPUT.public-report.json (may be published "
        "with it) and OUTPUT.private-report.json (keep it private) are written beside it",
    )
    parser.add_argument(
        "--delimiter",
        metavar="CHAR",
        type=_delimiter,
        help="field separator of a CSV or TSV input and output ('tab' for a tab). Default: "
        "',' for .csv and .csv.gz, tab for .tsv and .tsv.gz",
    )
    parser.add_argument(
        "--encoding",
        metavar="NAME",
        help="text encoding of a CSV or TSV input, e.g. latin-1 or cp1252. Default: utf-8",
    )


def _unprotected_argument(parser: argparse.ArgumentParser, groups: str | None) -> None:
    keep = (
        f"keep: kept in their rows, where they show which rows share a {groups}: NOT "
        "differentially private"
        if groups
        else "keep: kept in their rows, NOT protected"
    )
    parser.add_argument(
        "--unprotected",
        choices=("drop", "shuffle", "keep"),
        default="drop",
        help="what to do with the columns the schema does not protect. drop: leave them "
        "out; shuffle: write them unchanged, NOT protected, in a random row order of their "
        f"own; {keep}. Default: drop",
    )


def _quiet_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress display or notes")


def _force_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite the output and its reports if they exist (default: refuse, so that a "
        "rerun does not spend the privacy budget on the same data again by mistake)",
    )


def writing(command: Command) -> Command:
    """Return ``command`` with a ``--force`` option: it writes files that may exist."""
    arguments = command.arguments

    def with_force(parser: argparse.ArgumentParser) -> None:
        arguments(parser)
        _force_argument(parser)

    return dataclasses.replace(command, arguments=with_force)


# -- progress --------------------------------------------------------------------------


class ProgressLine:
    """Render ``progress(phase, done, total)`` calls on one line of a stream.

    On a terminal the line is redrawn in place, only when the phase or the whole percent
    changes. Elsewhere (a pipe, a log file) a line is printed when a phase starts, and then
    at most one every ``every`` seconds while it runs, with its percent done. With
    ``delay``, a phase shows only once it has run that many seconds: reading and writing
    files say nothing when they are quick.
    """

    def __init__(self, stream: TextIO, every: float = 5.0, delay: float = 0.0) -> None:
        self._stream = stream
        try:
            self._tty = stream.isatty()
        except (AttributeError, ValueError):
            self._tty = False
        self._shown: tuple[str, int] | None = None
        self._width = 0
        self._every = every
        self._delay = delay
        self._started: tuple[str, float] | None = None
        self._last = 0.0
        self._lock = threading.Lock()

    def __call__(self, phase: str, done: int, total: int) -> None:
        percent = 100 if total <= 0 else max(0, min(100, (100 * done) // total))
        with self._lock:
            if self._delay > 0:
                now = time.monotonic()
                if self._started is None or self._started[0] != phase:
                    self._started = (phase, now)
                if now - self._started[1] < self._delay:
                    return
            if self._tty:
                if self._shown == (phase, percent):
                    return
                text = f"dpfast: {phase} {percent:3d}%"
                self._stream.write("\r" + text.ljust(self._width))
                self._width = len(text)
            else:
                now = time.monotonic()
                if self._shown is None or self._shown[0] != phase:
                    self._stream.write(f"dpfast: {phase}...\n")
                elif percent != self._shown[1] and now - self._last >= self._every:
                    self._stream.write(f"dpfast: {phase} {percent}%\n")
                else:
                    return
                self._last = now
            self._shown = (phase, percent)
            self._stream.flush()

    def close(self) -> None:
        """Clear the progress line (terminal only)."""
        with self._lock:
            if self._tty and self._width:
                self._stream.write("\r" + " " * self._width + "\r")
                self._stream.flush()
                self._width = 0


def _progress(args: argparse.Namespace) -> ProgressLine | None:
    return None if args.quiet else ProgressLine(sys.stderr)


# Reading and writing files, and the column engine, show a phase once it has taken this long.
IO_PROGRESS_DELAY = 1.0


@contextlib.contextmanager
def _delayed_progress(args: argparse.Namespace) -> Iterator[ProgressLine | None]:
    """Yield a progress line that shows a phase only once it has run a second (or None).

    Reading and writing files, and the column engine, say nothing when they are quick, so
    a refusal stays one line.
    """
    if getattr(args, "quiet", False):
        yield None
        return
    line = ProgressLine(sys.stderr, delay=IO_PROGRESS_DELAY)
    try:
        yield line
    finally:
        line.close()


def _note(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(f"dpfast: {text}", file=sys.stderr)


# -- release commands ------------------------------------------------------------------


def report_paths(output: str | os.PathLike[str]) -> tuple[str, str]:
    """Return the paths of the public and the private report of an output file."""
    return f"{output}.public-report.json", f"{output}.private-report.json"


#: The release methods that run on the column engine (out of core, datasets); what the
#: methods that run in memory only say about datasets beyond memory.
OUT_OF_CORE_METHODS = (
    "ir-dp",
    "laplace",
    "mdav-dp",
    "diffgen",
    "k-noise",
    "k-pram",
    "randomized-response",
    "individual-ranking",
)
_OUT_OF_CORE = (
    f"{', '.join(OUT_OF_CORE_METHODS[:-1])} and {OUT_OF_CORE_METHODS[-1]} run out of core "
    "(--memory-limit), on Spark (--engine spark) and on Dask (--engine dask); see "
    "docs/engines.md"
)
_IN_MEMORY_ONLY = {
    "mdav": "mdav is sequential (O(n^2/k) distance passes) and runs in memory only; for "
    "data beyond memory use ir-dp (individual ranking, proven DP) or mdav-dp (insensitive "
    f"MDAV, proven DP); {_OUT_OF_CORE}",
}


def is_dataset_path(path: str) -> bool:
    """Return whether ``path`` names a directory or a glob rather than one file."""
    return Path(path).is_dir() or glob.has_magic(str(path))


def refuse_dataset_input(args: argparse.Namespace) -> None:
    """Refuse a directory or glob INPUT for a release method that reads one file."""
    method = getattr(args, "method", None)
    if method is None or method in OUT_OF_CORE_METHODS:
        return
    if is_dataset_path(args.input):
        raise ValueError(
            f"{args.input!r} is a directory or a glob: "
            + _IN_MEMORY_ONLY.get(
                str(method), f"{method} reads one file, in memory; {_OUT_OF_CORE}"
            )
        )


def _check_paths(args: argparse.Namespace) -> None:
    """Fail fast, before any work, on output paths that cannot be written."""
    from dpfast.io import output_format

    text_input = output_format(args.input) != "parquet"
    text_output = output_format(args.output) != "parquet"
    if getattr(args, "delimiter", None) is not None and not (text_input or text_output):
        raise ValueError(
            "--delimiter applies to CSV and TSV files, but the input and the output are "
            "Parquet; leave it out"
        )
    if getattr(args, "encoding", None) is not None and not text_input:
        raise ValueError(
            f"--encoding applies to a CSV or TSV input, but {args.input!r} is Parquet; leave it out"
        )
    out = Path(args.output)
    if out.is_dir():
        raise ValueError(
            f"output {args.output!r} is a directory; give a file name such as "
            f"{os.path.join(args.output, 'released.parquet')!r}"
        )
    parent = out.parent
    if not parent.is_dir():
        raise ValueError(f"output directory {str(parent)!r} does not exist; create it first")
    if Path(args.input).exists() and out.exists() and out.resolve() == Path(args.input).resolve():
        raise ValueError("the output would overwrite the input; choose another -o path")
    check_overwrite(args.output, force=args.force, flag="-o")


def check_overwrite(output: str | os.PathLike[str], *, force: bool, flag: str) -> None:
    """Refuse, before any work, to replace ``output`` or its reports unless ``force``.

    A release that overwrote an earlier one would publish a second draw on the same data
    and spend the privacy budget again.
    """
    if force:
        return
    for path in (os.fspath(output), *report_paths(output)):
        if os.path.lexists(path):
            raise ValueError(
                f"{path!r} already exists; pass --force to overwrite it (a new release spends "
                f"the privacy budget again), or choose another {flag} path"
            )


def _read_input(args: argparse.Namespace) -> Any:
    """Read the input with the command's --delimiter and --encoding; refuse an empty table."""
    from dpfast.io import output_format, read_table

    text = output_format(args.input) != "parquet"
    with _delayed_progress(args) as progress:
        table = read_table(
            args.input,
            delimiter=getattr(args, "delimiter", None) if text else None,
            encoding=getattr(args, "encoding", None) or "utf-8",
            progress=progress,
        )
    if table.num_rows == 0:  # one message for a header-only CSV and an empty Parquet file
        raise ValueError(f"{args.input}: the table is empty (0 rows); nothing to release")
    return table


def _output_delimiter(args: argparse.Namespace) -> str | None:
    """Return --delimiter for a CSV or TSV output, else None."""
    from dpfast.io import output_format

    if output_format(args.output) == "parquet":
        return None
    return getattr(args, "delimiter", None)


def check_schema_for(args: argparse.Namespace, method: str, schema: Any) -> None:
    """Refuse a schema whose protected columns ``method`` cannot release."""
    categorical = schema.protected_categorical()
    if getattr(args, "columns", None) is not None:
        categorical = [c for c in categorical if c in args.columns]
    with_taxonomies = method in ("ir-dp", "mdav", "mdav-dp")
    if with_taxonomies:
        categorical = [c for c in categorical if schema[c].taxonomy is None]
    if categorical:
        also = ' and categorical columns with a "taxonomy"' if with_taxonomies else ""
        raise ValueError(
            f"{args.schema}: {method} protects numeric columns only{also}, but the "
            f"schema protects categorical column(s) "
            f"{', '.join(repr(c) for c in categorical)}"
            f"{' without a taxonomy' if also else ''}; "
            + ('add "taxonomy": "hierarchy.csv" (ARX format), or ' if also else "")
            + 'set "protect": false for them to copy them unchanged, or drop them'
        )
    has_categorical = with_taxonomies and schema.protected_categorical()
    if (
        not schema.protected_numeric()
        and not has_categorical
        and not getattr(args, "columns", None)
    ):
        raise ValueError(
            f"{args.schema}: no protected numeric column, so there is nothing to release; "
            'declare at least one "integer" or "float" column with "bounds"'
        )


def _load(args: argparse.Namespace, method: str) -> tuple[Any, Any]:
    """Read the input and the schema (if any) and check them against each other."""
    from dpfast.schema import Schema

    table = _read_input(args)
    schema = None
    if getattr(args, "schema", None) is not None:
        schema = Schema.from_json(args.schema)
        table = schema.check_table(table)
        check_schema_for(args, method, schema)
    return table, schema


def write_release(
    data: Any,
    report: Any,
    private: Any,
    output: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    before_publish: Callable[[Any], None] | None = None,
) -> tuple[str, str]:
    """Write the data and its two reports, each atomically; never leave one without the others.

    The data is written whole to a hidden file beside ``output``; ``before_publish(report)``
    (the budget's commit) runs then, before it is renamed into place and the reports are
    written. A failure or an interrupt before the rename leaves ``output`` as it was; one
    after it removes the output again (its spend, committed, stays spent).
    ``delimiter`` replaces the separator of a CSV or TSV output; ``progress`` is called as
    the data is written. Returns the paths of the public and the private report.
    """
    from dpfast.io import output_format, write_table_atomic

    target = Path(output)
    descriptor, unpublished = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=f".unpublished.{output_format(target)}", dir=target.parent
    )
    os.close(descriptor)
    shown = None if progress is None else _renamed(progress, f"writing {target.name}")
    try:
        write_table_atomic(data, unpublished, delimiter=delimiter, progress=shown)
        if before_publish is not None:
            before_publish(report)
        os.replace(unpublished, target)
        return write_reports(report, private, output)
    except BaseException:
        if os.path.lexists(unpublished):
            Path(unpublished).unlink()
        else:  # renamed into place: take it back, as write_reports does
            target.unlink(missing_ok=True)
        raise


def _renamed(
    progress: Callable[[str, int, int], None], phase: str
) -> Callable[[str, int, int], None]:
    """Return ``progress`` showing every phase as ``phase``."""
    return lambda _, done, total: progress(phase, done, total)


def write_reports(report: Any, private: Any, output: str | os.PathLike[str]) -> tuple[str, str]:
    """Write both reports of the published ``output``; remove all three if one fails.

    The private report is readable by its owner only (0600), whatever the umask.
    Returns the paths of the public and the private report.
    """
    from dpfast._private_files import write_private_text
    from dpfast.io import write_json_atomic

    public_path, private_path = report_paths(output)
    written: list[str] = []
    try:
        write_json_atomic(report.to_dict(), public_path)
        written.append(public_path)
        write_private_text(private.to_json() + "\n", private_path)
    except BaseException:
        for path in written:
            Path(path).unlink(missing_ok=True)
        if Path(output).is_dir():
            shutil.rmtree(output, ignore_errors=True)
        else:
            Path(output).unlink(missing_ok=True)
        raise
    return public_path, private_path


_LEVELS = {
    "proven": "proven: {epsilon}-differential privacy of everything written",
    "protected_only": "{epsilon}-differential privacy of the protected columns only; the "
    "unprotected columns are NOT protected",
    "as_published": "NOT proven differentially private (the paper's claim only)",
    "heuristic": "NOT proven differentially private (heuristic)",
    "local": "local differential privacy of one column only",
    "none": "NOT differentially private",
}

_UNPROTECTED = {
    "drop": "left out (--unprotected drop)",
    "shuffle": "written unchanged in a random row order of their own, NOT protected "
    "(--unprotected shuffle)",
    "keep": "written unchanged in their rows, NOT protected",
}


def _n_rows(data: Any) -> int:
    return int(data.num_rows if hasattr(data, "num_rows") else len(data))


def _finish(args: argparse.Namespace, release: Any) -> int:
    report = release.report
    spend = args.spend
    with _delayed_progress(args) as progress:
        public_path, private_path = write_release(
            release.data,
            report,
            release.private,
            args.output,
            delimiter=_output_delimiter(args),
            progress=progress,
            before_publish=spend.commit,  # final before the data is renamed into place
        )
    return _summary(args, report, public_path, private_path, _n_rows(release.data), spend)


def _summary(
    args: argparse.Namespace,
    report: Any,
    public_path: str,
    private_path: str,
    n_rows: int,
    spend: Any,
) -> int:
    """Print what was written and what holds (unless --quiet); return exit code 0."""
    if args.quiet:
        return 0
    budget = "no privacy budget" if report.epsilon is None else f"epsilon = {report.epsilon:g}"
    level = _LEVELS[report.guarantee_level].format(epsilon=f"{report.epsilon or 0:g}")
    lines = [
        f"wrote {args.output} ({n_rows:,} rows)",
        f"  public report (may be published with the data): {public_path}",
        f"  PRIVATE report (exact counts and timings; do not publish): {private_path}",
        f"{report.method}: {budget}; guarantee: {level}"
        + (" (seeded: not for publication)" if report.seeded else ""),
    ]
    if report.unprotected_columns:
        shown = ", ".join(report.unprotected_columns[:10])
        more = ", ..." if len(report.unprotected_columns) > 10 else ""
        lines.append(
            f"unprotected columns {shown}{more}: {_UNPROTECTED[report.unprotected or 'keep']}"
        )
    if report.guarantee_level not in ("proven", "protected_only"):
        lines.append(f"why: {report.guarantee}")
    if spend is not None and spend.reservation is not None:
        left = spend.reservation.budget.remaining()
        lines.append(f"budget {args.budget}: epsilon {left:.6g} left")
    print("\n".join(lines))
    return 0


def _budget_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget",
        metavar="FILE",
        help="spend from this dataset's budget file (dpfast budget init): refused before any "
        "work if --epsilon does not fit in what is left",
    )


class _Spend:
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
            raise ValueError(
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

        The report is labelled as :func:`_mark_from_data` will label it, so that the entry
        records the guarantee the reports state.
        """

        def commit(report: Any) -> None:
            if schema is not None:
                report = _from_data(report, schema, self.args)[0]
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
        return _Reserved(self.before_publish(schema))


@dataclasses.dataclass(frozen=True)
class _Reserved:
    """The command's reservation, as a release function's budget (``BudgetLike``)."""

    committed: Callable[[Any], None]

    def reserve(self, epsilon: float, *, method: str, output: Any, columns: Any) -> _Reserved:
        return self

    def commit(self, report: Any) -> None:
        self.committed(report)

    def abandon(self) -> None:
        pass  # the command abandons what was not committed (_spending)


@contextlib.contextmanager
def _spending(args: argparse.Namespace, method: str) -> Iterator[None]:
    """Run a release command under its ``--budget`` reservation (if any).

    However the command ends, a reservation it did not commit is abandoned: its output
    was never published.
    """
    spend = _Spend(args, method)
    args.spend = spend
    try:
        yield
    finally:
        spend.abandon()


def _run_release(
    args: argparse.Namespace, method: str, call: Callable[[Any, Any, Any], Any]
) -> int:
    _check_paths(args)
    with _spending(args, method):
        return _release_and_finish(args, method, call)


def _release_and_finish(
    args: argparse.Namespace, method: str, call: Callable[[Any, Any, Any], Any]
) -> int:
    table, schema = _load(args, method)
    progress = _progress(args)
    try:
        release = call(table, schema, progress)
    finally:
        if progress is not None:
            progress.close()
    if schema is not None:
        release = dataclasses.replace(release, report=_mark_from_data(release.report, schema, args))
    return _finish(args, release)


def _mark_from_data(report: Any, schema: Any, args: argparse.Namespace) -> Any:
    """Label a release that used schema values marked ``"from_data"`` as not private."""
    marked, text = _from_data(report, schema, args)
    if text is not None:
        from dpfast.exceptions import PrivacyLeakWarning

        warnings.warn(text, PrivacyLeakWarning, stacklevel=2)
    return marked


def _from_data(report: Any, schema: Any, args: argparse.Namespace) -> tuple[Any, str | None]:
    """Return the report :func:`_mark_from_data` writes, and its label (None: unchanged)."""
    marked = schema.from_data(report.protected_columns)
    if not marked:
        return report, None
    fields = "; ".join(f"{column}: {', '.join(keys)}" for column, keys in marked.items())
    text = (
        f"NOT differentially private: {args.schema} marks values taken from the data "
        f'("from_data": {fields}), so the release depends on every record through them and '
        "no epsilon covers that. Replace them with public values and remove "
        f'"from_data". Without them: {report.guarantee}'
    )
    return dataclasses.replace(report, guarantee=text, guarantee_level="none"), text


def _schema_taxonomies(schema: Any, columns: Sequence[str] | None = None) -> dict[Hashable, Any]:
    """Return the taxonomies of the protected categorical columns (of ``columns`` if given)."""
    from dpfast.taxonomy import as_taxonomy

    return {
        name: as_taxonomy(schema[name].taxonomy, name)
        for name in schema.protected_categorical()
        if columns is None or name in columns
    }
