"""``dpfast compare``: a private HTML page comparing an original table with its release."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from dpfast.cli._outputs import report_paths
from dpfast.cli._parsing import (
    FORMATS_HELP,
    Command,
    column_list,
    delimiter,
    integer,
    quiet_argument,
)
from dpfast.cli._progress import note
from dpfast.exceptions import DPFastValueError

_COMPARE_EXAMPLES = """\
examples:
  dpfast compare people.csv released.csv --schema people.schema.json -o report.html
  dpfast compare people.parquet released.parquet --schema s.json -o report.html \\
      --columns age,income --force
  dpfast compare people.csv noisy.csv --schema s.json -o report.html --aligned
      (laplace --unprotected keep: row i of the release is row i of the original)

The page is PRIVATE: it is computed from the original data, and written readable by its
owner only (mode 0600, whatever the umask). It opens with a verdict, also printed here:
whether the release is differentially private (at what epsilon, with the guarantee its
public report states), its utility, its values on a bound and its risk. Then the
order-free utility metrics (Jensen-Shannon divergence, variance variation), the clamping
counts with their shares of the rows, the noise scale of each column against its public
domain, the disclosure risk (record linkage and interval disclosure with --aligned, or
from the private report of a release made with --risk; the uniqueness of
--quasi-identifiers in both tables), and per-column plots (histograms; bar charts for
categories) with summaries. It reads RELEASED.public-report.json and
RELEASED.private-report.json (--public-report, --private-report to point elsewhere); a
RELEASED without its public report is refused unless --aligned or --no-aligned says how
its rows lie. Needs matplotlib: pip install 'dpfast[plots]'. See docs/metrics.md.
"""


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("original", metavar="ORIGINAL", help=f"the original table ({FORMATS_HELP})")
    parser.add_argument(
        "released", metavar="RELEASED", help="the released table, as a dpfast release wrote it"
    )
    parser.add_argument(
        "--schema", required=True, metavar="SCHEMA", help="the schema JSON the release used"
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar="HTML", help="the page to write (.html)"
    )
    parser.add_argument(
        "--public-report",
        metavar="JSON",
        help="the release's public report (default: RELEASED.public-report.json if it exists)",
    )
    parser.add_argument(
        "--private-report",
        metavar="JSON",
        help="the release's private report (default: RELEASED.private-report.json if it exists)",
    )
    parser.add_argument(
        "--columns",
        type=column_list,
        help="compare only these schema columns (comma-separated, or a JSON list); default: "
        "every column the schema protects that RELEASED has",
    )
    aligned_argument(parser, "RELEASED", linked=True)
    shared_arguments(parser, "RELEASED")
    parser.add_argument("--force", action="store_true", help="overwrite an existing HTML file")


def aligned_argument(parser: argparse.ArgumentParser, released: str, linked: bool = False) -> None:
    """Add ``--aligned`` / ``--no-aligned``: how the rows of a release lie (default: unsaid).

    ``linked`` adds ``--linked``, compare's earlier name of ``--aligned``.
    """
    if linked:
        what = (
            "row i of RELEASED is the release of row i of ORIGINAL (e.g. laplace with "
            "--unprotected keep): add the record-linked relative error and risk measures "
            "(--linked is the same). --no-aligned: it is not (only order-free metrics). "
            "Default: not aligned, as the public report says; a RELEASED without its public "
            "report is refused unless one of them is given"
        )
    else:
        what = (
            f"each {released} without a public report has row i from row i of ORIGINAL: "
            "measure its row-paired measures on the files. --no-aligned: its rows are not "
            "ORIGINAL's (they are left out). Default: such a RELEASE is refused, since "
            "pairing shuffled rows would compare unrelated records; a RELEASE with its "
            "public report is measured as the report says"
        )
    flags = ("--aligned", "--linked") if linked else ("--aligned",)
    parser.add_argument(
        *flags, dest="aligned", action="store_const", const=True, default=None, help=what
    )
    parser.add_argument(
        "--no-aligned",
        dest="aligned",
        action="store_const",
        const=False,
        help="the opposite of --aligned: the rows are not ORIGINAL's",
    )


def print_verdict(args: argparse.Namespace, text: str) -> None:
    """Print a page's verdict on standard output, wrapped (unless ``--quiet``)."""
    import shutil
    import textwrap

    if args.quiet:
        return
    width = min(max(shutil.get_terminal_size((100, 24)).columns, 40), 100)
    shown = f"Verdict (PRIVATE): {text}"
    print(textwrap.fill(shown, width=width, break_long_words=False, break_on_hyphens=False))


def shared_arguments(parser: argparse.ArgumentParser, released: str) -> None:
    """Add the options compare and evaluate share: uniqueness, CSV reading, ``--quiet``."""
    parser.add_argument(
        "--quasi-identifiers",
        type=column_list,
        help="columns an intruder could know (age,sex,zip): their uniqueness in ORIGINAL "
        f"and in {released}; needs --k",
    )
    parser.add_argument(
        "--k", type=integer, help="the class size the uniqueness checks (records below it)"
    )
    parser.add_argument(
        "--delimiter",
        metavar="CHAR",
        type=delimiter,
        help="field separator of CSV or TSV inputs ('tab' for a tab)",
    )
    parser.add_argument(
        "--encoding", metavar="NAME", help="text encoding of CSV or TSV inputs (default utf-8)"
    )
    quiet_argument(parser)


def check_output(args: argparse.Namespace, inputs: tuple[str, ...]) -> None:
    """Refuse ``-o`` that is a directory, an input, or exists without ``--force``.

    Also refuse ``--quasi-identifiers`` without a class size ``--k >= 1``.
    """
    out = Path(args.output)
    if out.is_dir():
        raise DPFastValueError(
            f"-o {args.output!r} is a directory; give a file name such as report.html"
        )
    for given in inputs:
        if out.exists() and Path(given).exists() and out.resolve() == Path(given).resolve():
            raise DPFastValueError(
                f"-o {args.output!r} would overwrite an input; choose another path"
            )
    if out.exists() and not args.force:
        raise DPFastValueError(f"{args.output!r} already exists; pass --force to overwrite it")
    if args.quasi_identifiers is not None and args.k is None:
        raise DPFastValueError("--quasi-identifiers needs --k, the class size to check")
    if args.k is not None and args.k < 1:
        raise DPFastValueError(f"--k must be >= 1, got {args.k}")


def read_report(given: str | None, default: str) -> tuple[dict[str, Any] | None, str]:
    """Return a report (None if the default path does not exist) and the path looked at."""
    path = default if given is None else given
    if given is None and not os.path.exists(path):
        return None, path
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except FileNotFoundError:
        raise DPFastValueError(f"report {path!r} does not exist; check the path") from None
    except json.JSONDecodeError as exc:
        raise DPFastValueError(
            f"report {path!r} is not valid JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    if not isinstance(report, dict):
        raise DPFastValueError(f"report {path!r} is not a dpfast report (a JSON object)")
    return report, path


def _read(path: str, args: argparse.Namespace) -> Any:
    from dpfast.io import output_format, read_table

    text = output_format(path) != "parquet"
    return read_table(
        path,
        delimiter=args.delimiter if text else None,
        encoding=(args.encoding or "utf-8") if text else "utf-8",
    )


def _compare(args: argparse.Namespace) -> int:
    from dpfast import compare
    from dpfast._private_files import write_private_text
    from dpfast.schema import Schema

    if Path(args.output).suffix.lower() not in (".html", ".htm"):
        raise DPFastValueError(
            f"-o {args.output!r} does not end in .html, but the page compare writes is HTML; "
            f"name it {Path(args.output).stem or 'report'}.html"
        )
    check_output(args, (args.original, args.released, args.schema))
    public_default, private_default = report_paths(args.released)
    public, public_path = read_report(args.public_report, public_default)
    private, private_path = read_report(args.private_report, private_default)
    if public is not None and public.get("method") == "diffgen":
        raise DPFastValueError(
            f"{args.released} is a DiffGen release (a generalized count table, not microdata); "
            "compare supports microdata releases (ir-dp, laplace, mdav-dp, ...) only"
        )
    if not os.path.isfile(args.released):
        _read(args.released, args)  # refuses it as the reading would: it does not exist
    compare.check_releases(
        [compare.Candidate("RELEASED", None, public, private, args.released)],
        aligned=args.aligned,
    )
    try:
        compare.require_matplotlib()
    except ImportError:
        raise DPFastValueError(
            f"dpfast compare draws its plots with matplotlib, which is not installed; "
            f"install it with: {compare.INSTALL_HINT}"
        ) from None
    schema = Schema.from_json(args.schema)
    page = compare.compare_html(
        _read(args.original, args),
        _read(args.released, args),
        schema=schema,
        columns=args.columns,
        public_report=public,
        private_report=private,
        linked=bool(args.aligned),
        quasi_identifiers=args.quasi_identifiers,
        k=args.k,
        sources={
            "original": args.original,
            "released": args.released,
            "public report": public_path,
            "private report": private_path,
        },
    )
    write_private_text(page, args.output)  # for the data holder only: 0600
    missing = [
        name for name, report in (("public", public), ("private", private)) if report is None
    ]
    note(
        args,
        f"wrote {args.output} (PRIVATE: computed from the original data; do not publish)"
        + (f"; {' and '.join(missing)} report not found, its sections say so" if missing else ""),
    )
    print_verdict(args, compare.page_verdict(page))
    return 0


#: ``dpfast compare``.
COMPARE = Command(
    "compare",
    help="a private HTML page comparing an original table with its release",
    description="Write one self-contained HTML page, for the data holder only, comparing "
    "ORIGINAL with its release RELEASED: per-column plots, utility metrics, noise scale "
    "against the domain, clamped values.",
    epilog=_COMPARE_EXAMPLES,
    arguments=_compare_arguments,
    handler=_compare,
)
