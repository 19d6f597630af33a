"""The one way a release command runs: read INPUT, call the public function, write.

Each method's command is a :class:`Method`: the public function, and how its arguments
come from the options and the schema. :func:`release` does the rest for every method:
it checks the paths, reads INPUT (whole, or as a column source read in passes:
:mod:`dpfast.cli._inputs`), forecasts the release from public values (``--dry-run``
prints it and stops; otherwise its warning comes now, before any ε is reserved),
reserves the budget, calls the function, and writes. A table released
in memory is written here, its spend committed before it is renamed into place; a
release read in passes is written by its engine into OUTPUT's staging directory, given
``memory_limit`` and the budget, which it commits once the data is complete there. Either
way the reports are written beside the data and renamed into place before it
(:class:`~dpfast.cli._outputs.Staging`): OUTPUT is never visible without them.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dpfast.cli._inputs import (
    DEFAULT_MEMORY,
    check_paths,
    is_dataset_path,
    opened,
    output_delimiter,
    reads_in_passes,
)
from dpfast.cli._outputs import mark_from_data, staging, summary, write_release
from dpfast.cli._progress import delayed_progress, note, progress_line
from dpfast.cli._spend import spending
from dpfast.exceptions import DPFastValueError, NoiseDominatesWarning

__all__ = ["OUT_OF_CORE", "Method", "release"]

#: What a method that runs in memory only says about data beyond memory.
OUT_OF_CORE = (
    "ir-dp, laplace, mdav-dp, diffgen, k-noise, k-pram, randomized-response and "
    "individual-ranking run out of core (--memory-limit), on Spark (--engine spark) and on "
    "Dask (--engine dask); see docs/engines.md"
)


@dataclass(frozen=True)
class Method:
    """A release command: its public function, and its arguments from the options.

    ``arguments(args, schema)`` gives the function's arguments but the data (``schema``
    is ``None`` without ``--schema``); ``spends`` says whether the function takes a
    budget; ``in_memory_only`` is what the command says of a directory or glob INPUT, for
    a method that releases in memory only; ``schema_check`` refuses a schema whose
    protected columns the method cannot release; ``note`` is printed before the release;
    ``written(release, args)`` is the table written in memory (default: the release's
    data), ``options(args)`` the function's arguments out of core only; ``show_notes``
    prints the report's notes.
    """

    name: str
    function: Callable[..., Any]
    arguments: Callable[[argparse.Namespace, Any], dict[str, Any]]
    spends: bool = False
    in_memory_only: str | None = None
    schema_check: bool = True
    note: str | None = None
    written: Callable[[Any, argparse.Namespace], Any] = field(
        default=lambda release, args: release.data
    )
    options: Callable[[argparse.Namespace], dict[str, Any]] = field(default=lambda args: {})
    show_notes: bool = False


def release(args: argparse.Namespace, method: Method) -> int:
    """Run ``method``'s release of INPUT; write the data and the two reports.

    With ``--dry-run``, print the release's forecast and stop: no budget reserved, nothing
    written.
    """
    if getattr(args, "memory_limit", None) is not None:
        _memory(args)  # a limit too small for the engine, before the paths' checks
    if method.in_memory_only is not None and is_dataset_path(args.input):
        raise DPFastValueError(f"{args.input!r} is a directory or a glob: {method.in_memory_only}")
    in_passes = method.in_memory_only is None and reads_in_passes(args)
    dry_run = bool(getattr(args, "dry_run", False))
    # a dry run writes nothing, so an existing OUTPUT is no reason to refuse it
    check_paths(
        argparse.Namespace(**{**vars(args), "force": True}) if dry_run else args,
        in_passes=in_passes,
    )
    if method.note is not None:
        note(args, method.note)
    with opened(args, method.name, in_passes=in_passes, schema_check=method.schema_check) as found:
        arguments = method.arguments(args, found.schema)
        if getattr(args, "risk", False):
            arguments["risk"] = True
        if getattr(args, "metrics", False):
            arguments["metrics"] = True
        if found.in_passes:  # every option refused before the forecast's advice
            arguments["memory_limit"] = _memory(args)
        limit = getattr(args, "max_on_bound", None)
        read = dry_run or limit is not None
        budget = _read_budget(args, dry_run)
        expected = _forecast(args, method, found, {**arguments, **budget}, read=read)
        if dry_run:
            print(expected)
            return 0
        if limit is not None:  # refused before any ε is reserved
            expected.refuse_above(limit / 100.0)
        if expected.warning is not None:  # before any ε is reserved
            warnings.warn(expected.warning, NoiseDominatesWarning, stacklevel=2)
        _remove_killed_scratch()
        with spending(args, method.name) as spend, _warned_already():
            made, paths, rows = _run(args, method, found, arguments, spend, expected)
    return summary(args, made.report, made.private, paths, rows, spend)


def _remove_killed_scratch() -> None:
    """Remove the cluster scratch directories that runs killed outright left (process gone).

    Dask's client and Spark's driver make one in the temporary directory when a release
    opens; they go quietly (the system's directory, not the user's). What a killed run
    left beside OUTPUT goes, with a warning, when the release stages its output
    (:func:`~dpfast.cli._outputs.staging`).
    """
    from dpfast._staging import process_leftovers, remove_gone

    remove_gone(process_leftovers(), warn=False)


def _forecast(
    args: argparse.Namespace, method: Method, found: Any, arguments: dict[str, Any], *, read: bool
) -> Any:
    """Return the release's forecast; from the data too (PRIVATE) when ``read``.

    From the schema, the arguments and the row count alone; with ``read``, the method's
    forecast from the data reads INPUT (where the method has one): nothing is reserved,
    spent or written.
    """
    from dpfast._release import PublicTable
    from dpfast.methods.forecast import forecast, forecast_from_data

    data, schema = found.data, found.schema
    names = list(data.column_names) if hasattr(data, "column_names") else list(data.names)
    integer = [] if schema is None else [c for c in schema.names if schema[c].type == "integer"]
    public = forecast(
        method.function, PublicTable(found.n_rows, names, frozenset(integer)), **arguments
    )
    if not read:
        return public
    where = {"output": args.output} if found.in_passes else {}
    return public.with_data(forecast_from_data(method.function, data, **arguments, **where))


def _read_budget(args: argparse.Namespace, dry_run: bool) -> dict[str, Any]:
    """Return a dry run's ``--budget``: its forecast reads it (never reserves) to say if it fits."""
    if not dry_run or getattr(args, "budget", None) is None:
        return {}
    from dpfast.budget import BudgetFile

    return {"budget": BudgetFile(args.budget)}


@contextmanager
def _warned_already() -> Iterator[None]:
    """Within the block, the release's own noise warning is not shown: the forecast's was."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=NoiseDominatesWarning)
        yield


def _run(
    args: argparse.Namespace,
    method: Method,
    found: Any,
    arguments: dict[str, Any],
    spend: Any,
    expected: Any,
) -> tuple[Any, tuple[str, str], int]:
    """Release and write: the release (its report as written), the reports' paths, the rows.

    Where ``expected`` holds a forecast from the data, the private report compares the
    release's share pushed onto a bound with it.
    """
    if found.in_passes:  # the engine writes and commits into the staging directory
        with staging(args.output) as stage:
            made = _in_passes(args, method, found, arguments, spend, stage.data)
            _check_forecast(made.private, expected)
            report = mark_from_data(made.report, found.schema, args)
            paths = stage.publish(report, made.private)
        return _Made(report, made.private), paths, _rows_written(args.output, found.n_rows)
    made = _in_memory(method, found, arguments, args)
    _check_forecast(made.private, expected)
    report = mark_from_data(made.report, found.schema, args)
    data = method.written(made, args)
    with delayed_progress(args) as progress:
        paths = write_release(
            data,
            report,
            made.private,
            args.output,
            delimiter=output_delimiter(args),
            progress=progress,
            before_publish=spend.commit,  # final before the data is renamed into place
        )
    rows = int(data.num_rows if hasattr(data, "num_rows") else len(data))
    return _Made(report, made.private), paths, rows


def _check_forecast(private: Any, expected: Any) -> None:
    """Compare the share pushed onto a bound with the forecast from the data, if read."""
    from dpfast._release import forecast_check

    if expected.from_data is not None and private.clamped_output:
        private.forecast = forecast_check(private, expected, expected.from_data)


@dataclass(frozen=True)
class _Made:
    """A release's reports, as written."""

    report: Any
    private: Any


def _in_memory(method: Method, found: Any, arguments: dict[str, Any], args: Any) -> Any:
    """Release the table in memory: the function's own progress, shown at once."""
    progress = progress_line(args)
    try:
        made = method.function(found.data, progress=progress, **arguments)
    finally:
        if progress is not None:
            progress.close()
    _notes(args, method, made)
    return made


def _memory(args: argparse.Namespace) -> int:
    """Return the working memory of a release read in passes: ``--memory-limit``, or 4 GiB."""
    from dpfast.engines import parse_memory
    from dpfast.engines.outofcore import check_memory_limit

    if args.memory_limit is None:
        return DEFAULT_MEMORY
    return check_memory_limit(parse_memory(args.memory_limit))


def _in_passes(
    args: argparse.Namespace,
    method: Method,
    found: Any,
    arguments: dict[str, Any],
    spend: Any,
    output: Any,
) -> Any:
    """Release the column source out of core, on its engine; the engine writes ``output``.

    ``output`` is OUTPUT's name in its staging directory; the engine commits the spend
    once the data is complete there.
    """
    if method.spends:
        arguments = {**arguments, "budget": spend.budget(found.schema)}
    with delayed_progress(args) as progress:  # a quick refusal stays one line
        made = method.function(
            found.data,
            output=output,
            progress=progress,
            **arguments,
            **method.options(args),
        )
    _notes(args, method, made)
    return made


def _notes(args: argparse.Namespace, method: Method, made: Any) -> None:
    """Show the report's notes, for a method whose notes say what was released."""
    if method.show_notes:
        for text in made.report.notes:
            note(args, text)


def _rows_written(output: str, read: int) -> int:
    """Count the rows of what was written at ``output`` (a Parquet file or dataset)."""
    from dpfast.engines.outofcore import ParquetDataset

    try:
        return ParquetDataset.open(output).n_rows
    except ValueError:
        return read
