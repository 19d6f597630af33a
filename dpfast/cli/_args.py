"""Argument types and options shared by the subcommands; usage errors exit with code 2."""

from __future__ import annotations

import argparse
from typing import NoReturn


class _UsageError(Exception):
    """A command-line usage error (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message}; run '{self.prog} --help' for usage")


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
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated column names such as 'age,income', got {text!r}"
        )
    return names


def _io_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", help="input table (.parquet or .csv)")
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT",
        required=True,
        help="output table (.parquet or .csv); OUTPUT.report.json is written beside it",
    )


def _quiet_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress display or notes")
