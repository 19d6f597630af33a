"""The ``dpfast`` command line: read a table, call a release function, write the result.

No algorithm logic lives here. Exit codes: 0 on success, 2 on a usage or input error
(one line on stderr starting ``dpfast: error:``), 1 on an unexpected error, 130 on Ctrl-C
and 143 on SIGTERM (either way no temporary or partial output is left).
Set ``DPFAST_DEBUG=1`` to see the traceback of an input error.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dpfast._version import __version__
from dpfast.cli import _budget_command, _diffgen, _mdav, _mechanisms, _numeric, _schema_command
from dpfast.cli._compare_command import COMPARE
from dpfast.cli._demo_command import DEMO, _demo
from dpfast.cli._evaluate_command import EVALUATE
from dpfast.cli._parsing import (
    Parser,
    UsageError,
    measuring_metrics,
    measuring_risk,
    releasing,
)
from dpfast.cli._progress import ProgressLine as ProgressLine
from dpfast.cli._warm_up_command import WARM_UP
from dpfast.exceptions import DPFastError, EpsilonRangeError, interrupt_in

__all__ = ["main", "run"]

_MAIN_EXAMPLES = """\
examples:
  dpfast demo                      release the bundled Adult data, write ./dpfast-demo/
  dpfast demo --mixed              the paper's mixed table: 2 numeric + 2 categorical columns
  dpfast release ir-dp people.parquet -o released.parquet --k 25 --epsilon 1 \\
      --schema people.schema.json
  dpfast release --help            list the release methods
  dpfast schema init people.csv -o people.schema.json    a schema to fill in
  dpfast compare people.csv released.csv --schema people.schema.json -o report.html
                                   a PRIVATE page: original against release
  dpfast evaluate people.csv a.csv b.csv --schema people.schema.json -o evaluation.html
                                   PRIVATE: utility and disclosure risk, a risk-utility map
  dpfast warm-up                   compile the kernels once, so that a first release starts
                                   at once (scripts/demo runs it)

The schema file declares each column's type and public bounds: see docs/schema.md.
"""

# The release methods, in the order `dpfast release --help` lists them.
RELEASE_COMMANDS = (
    *_numeric.COMMANDS,
    *_mdav.COMMANDS,
    *_mechanisms.COMMANDS,
    *_diffgen.COMMANDS,
)

# The release methods whose function takes metrics=True: they take --metrics.
METRICS_COMMANDS = ("ir-dp", "laplace", "individual-ranking", "mdav", "mdav-dp")

# Command groups besides `release`: (name, help, description, commands).
_GROUPS = (
    (
        "schema",
        "write a schema skeleton from a data file (dpfast schema init)",
        "Schema files: dpfast schema init DATA writes a skeleton to fill in.",
        _schema_command.COMMANDS,
    ),
    (
        "budget",
        "a dataset's persistent privacy budget (dpfast budget init / show / clear)",
        "Budget files: the total epsilon allowed for a dataset, and every spend.",
        _budget_command.COMMANDS,
    ),
)

_RELEASE_EXAMPLES = """\
examples:
  dpfast release ir-dp people.csv -o released.csv --k 25 --epsilon 1 --schema s.json
  dpfast release laplace people.parquet -o noisy.parquet --epsilon 1 --schema s.json
  dpfast release individual-ranking people.csv -o grouped.csv --k 3 --columns age,income
  dpfast release ir-dp people.csv -o released.csv --k 25 --epsilon 1 --schema s.json --dry-run
                                    the forecast only: each column's noise and the share of
                                    values on a bound; spends nothing, writes nothing
  dpfast release METHOD --help      every option of METHOD, with examples
"""


def _version() -> str:
    return __version__


def build_parser() -> argparse.ArgumentParser:
    """Return the ``dpfast`` argument parser."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = Parser(
        prog="dpfast",
        description="Differentially private release of tabular microdata.",
        epilog=_MAIN_EXAMPLES,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"dpfast {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    release = commands.add_parser(
        "release",
        help="release a Parquet or CSV table with a privacy method",
        description="Release a Parquet or CSV table with a privacy method.",
        epilog=_RELEASE_EXAMPLES,
        formatter_class=formatter,
    )
    methods = release.add_subparsers(
        dest="method", metavar="METHOD", required=True, title="methods"
    )
    for command in RELEASE_COMMANDS:
        if command.name in METRICS_COMMANDS:
            command = measuring_metrics(command)
        releasing(measuring_risk(command)).add_to(methods, formatter)
    for name, help_text, description, group in _GROUPS:
        parser_of_group = commands.add_parser(
            name, help=help_text, description=description, formatter_class=formatter
        )
        members = parser_of_group.add_subparsers(
            dest=f"{name}_command", metavar="COMMAND", required=True
        )
        for command in group:
            command.add_to(members, formatter)
    # _demo is looked up here, at call time, so that tests can monkeypatch dpfast.cli._demo
    dataclasses.replace(DEMO, handler=_demo).add_to(commands, formatter)
    COMPARE.add_to(commands, formatter)
    EVALUATE.add_to(commands, formatter)
    WARM_UP.add_to(commands, formatter)
    return parser


# -- entry point -----------------------------------------------------------------------


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _error(message: str) -> int:
    print(f"dpfast: error: {_one_line(message)}", file=sys.stderr)
    return 2


def _show_warning(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    print(f"dpfast: warning: {_one_line(str(message))}", file=sys.stderr)


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that writers clean up as on Ctrl-C.

    A ``BaseException``, like ``KeyboardInterrupt``: no ``except Exception`` swallows it.
    """


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`_Terminated`; the previous handler after.

    Only the command line installs it (a library must not change its host's handlers), and
    only from the main thread, the one where Python runs signal handlers. A second SIGTERM
    during the cleanup gets the previous handler (by default: the process ends at once).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def terminate(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, previous)
        raise _Terminated

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _handle(args: argparse.Namespace) -> int:
    """Run a command: texts name the CLI's flags, and warnings print as one line each."""
    from dpfast._release import cli_spelling

    with warnings.catch_warnings(), cli_spelling():
        warnings.simplefilter("always")
        warnings.showwarning = _show_warning
        return int(args.handler(args))


def _os_error_message(exc: OSError) -> str:
    """Say what a failed read or write needs: room on the disk, or a path and permissions."""
    target = f" {exc.filename!r}" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"{exc.strerror}{target}: the disk is full; free space on it, or write OUTPUT to "
            "a disk with room (out of core, the scratch files, about 8 bytes per row and "
            "released column, are written beside OUTPUT too)"
        )
    if exc.errno == errno.EFBIG:
        return (
            f"{exc.strerror}{target}: a file outgrew the file size limit (ulimit -f) or the "
            "file system's; raise the limit, or write OUTPUT to another file system"
        )
    return f"{exc.strerror}{target}; check the path and its permissions"


def run() -> None:
    """Run the ``dpfast`` program: :func:`main`, then end the process with its exit code.

    The process ends without C++ static destructors: pyarrow's thread pools may still be
    winding down after a Parquet read, and their teardown then calls ``std::terminate``,
    which would turn the exit code into SIGABRT (apache/arrow#34314, #39862). What Python
    runs at exit runs first: the other threads are joined, then the ``atexit`` handlers
    (scratch directories, a Spark session's JVM), and the standard streams are flushed.
    Ctrl-C at any stage, start-up and clean-up included, ends the run with one line and
    exit code 130; during the clean-up it is noted and the clean-up finishes.
    """
    try:
        code = main()
        with _finishing() as interrupted:
            current = threading.current_thread()
            for thread in threading.enumerate():
                if thread is not current and not thread.daemon:
                    thread.join()
            import atexit

            atexit._run_exitfuncs()
        if interrupted:
            code = _interrupted()
    except KeyboardInterrupt:  # at any stage main() does not catch it in
        code = _interrupted()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say
            pass
    os._exit(code)


#: The exit code of a run ended by Ctrl-C (128 + SIGINT).
_INTERRUPTED = 130


def _interrupted() -> int:
    """Say, in one line, that Ctrl-C ended the run; return its exit code."""
    print("dpfast: interrupted", file=sys.stderr)
    return _INTERRUPTED


@contextmanager
def _finishing() -> Iterator[list[bool]]:
    """Within the block (the clean-up at exit), Ctrl-C is noted, not raised.

    The clean-up removes scratch files and stops a cluster: an interrupt must not cut it
    short, nor print a traceback from an exit handler. The list yielded holds ``True``
    once Ctrl-C was pressed; a second Ctrl-C ends the process at once.
    """
    pressed: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return

    def note(signum: int, frame: Any) -> None:
        pressed.append(True)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dpfast`` command line.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 success, 2 usage or input error, 1 unexpected error, 130 Ctrl-C,
        143 SIGTERM.

    Examples
    --------
    >>> main(["--version"])
    dpfast 0.1.0
    0
    """
    try:  # the start-up: the parser, and what parsing the arguments imports
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        return _error(str(exc))
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        return _interrupted()
    try:
        with _sigterm_raises():
            return _handle(args)
    except KeyboardInterrupt:
        return _interrupted()
    except _Terminated:
        print("dpfast: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except EpsilonRangeError as exc:  # every command takes its budget as --epsilon
        if os.environ.get("DPFAST_DEBUG"):
            raise
        return _error(exc.for_parameter("--epsilon"))
    except (ValueError, TypeError, OSError) as exc:
        if os.environ.get("DPFAST_DEBUG"):
            raise
        message = str(exc)
        if isinstance(exc, OSError) and exc.strerror:
            message = _os_error_message(exc)
        return _error(message or type(exc).__name__)
    except DPFastError as exc:  # dpfast's other errors: a missing package, a name, a cluster
        if interrupt_in(exc) is not None:
            return _interrupted()
        if os.environ.get("DPFAST_DEBUG"):
            raise
        return _error(str(exc.args[0]) if exc.args else type(exc).__name__)
    except Exception as exc:
        if interrupt_in(exc) is not None:  # Ctrl-C, turned by pyspark into a cancelled job
            return _interrupted()
        traceback.print_exc()
        print(
            "dpfast: internal error: this is a bug in dpfast; please report it with the "
            "traceback above",
            file=sys.stderr,
        )
        return 1
