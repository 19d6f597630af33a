"""``dpfast evaluate``: releases of one table, utility and disclosure risk side by side."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from dpfast.cli._compare_command import (
    aligned_argument,
    check_output,
    print_verdict,
    read_report,
    shared_arguments,
)
from dpfast.cli._outputs import report_paths
from dpfast.cli._parsing import (
    FORMATS_HELP,
    Command,
    column_list,
    number,
)
from dpfast.cli._progress import delayed_progress, note, progress_line
from dpfast.exceptions import DPFastValueError

_RISK_MEASURES = ("record_linkage", "rank_linkage", "interval_disclosure", "uniqueness")
_UTILITY_MEASURES = ("relative_error", "jensen_shannon", "variance_variation", "correlation_error")

_EVALUATE_EXAMPLES = """\
examples:
  # mdav at k = 3, 5 and 10 and k-noise at k = 5, on one risk-utility map
  dpfast evaluate people.csv mdav3.csv mdav5.csv mdav10.csv knoise5.csv \\
      --schema people.schema.json -o evaluation.html
  # with the uniqueness of the quasi-identifiers, as JSON
  dpfast evaluate people.parquet a.parquet b.parquet --schema s.json \\
      --quasi-identifiers age,sex,zip --k 5 -o evaluation.json
  # DP releases that shuffle their rows, on the default map: release them with
  # --risk --metrics (both measured through the release's own order, kept private)
  dpfast release ir-dp people.csv -o irdp.csv --k 25 --epsilon 1 --schema s.json \\
      --risk --metrics
  dpfast evaluate people.csv irdp.csv mdav5.csv --schema s.json -o e.html
  # releases that shuffle their rows, made without them: an order-free loss on the map
  dpfast evaluate people.csv irdp.csv mdavdp.csv --schema s.json -o e.html \\
      --utility-measure jensen_shannon
  # a release copied without its reports, whose rows are ORIGINAL's, in order
  dpfast evaluate people.csv copy.csv --schema s.json -o e.html --aligned

The output is PRIVATE: it is computed from the original data, says so, and is written
readable by its owner only (mode 0600, whatever the umask). It opens with a verdict, also
printed here: which releases are differentially private (at what epsilon, with the
guarantee their public reports state) and which is best on the map. Per release: the utility
metrics (Jensen-Shannon divergence, variance variation, relative error, the error of the
correlation matrix) and the risk measures (record linkage, interval disclosure, neighbourhood
counts, uniqueness of --quasi-identifiers), and a risk-utility map, one point per release.
RELEASE.public-report.json and RELEASE.private-report.json are read. The row-paired
measures need row i of RELEASE to come from row i of ORIGINAL: a release whose public
report shows shuffled rows gets them from its private report if it was released with
--risk (and --metrics), and otherwise goes without them, saying why. A RELEASE without
its public report is refused unless --aligned or --no-aligned says how its rows lie.
See docs/risk.md#evaluate.
"""


def _evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("original", metavar="ORIGINAL", help=f"the original table ({FORMATS_HELP})")
    parser.add_argument(
        "releases",
        metavar="RELEASE",
        nargs="+",
        help="a released table of ORIGINAL, as a dpfast release wrote it (one or more)",
    )
    parser.add_argument(
        "--schema", required=True, metavar="SCHEMA", help="the schema JSON the releases used"
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="the evaluation to write: .html (a page with the map) or .json",
    )
    parser.add_argument(
        "--labels",
        type=column_list,
        help="one label per RELEASE, comma-separated, for the map (default: the file names)",
    )
    parser.add_argument(
        "--columns",
        type=column_list,
        help="compare only these schema columns (default: the schema's protected columns "
        "that every RELEASE has)",
    )
    parser.add_argument(
        "--p",
        type=number,
        default=10.0,
        help="interval disclosure: the interval's half-width in percent (default 10)",
    )
    parser.add_argument(
        "--width",
        type=number,
        help="neighbourhood counts: the half-width for every numeric column (default: a "
        "k-noise release's 2*delta from its private report; else none)",
    )
    parser.add_argument(
        "--risk-measure",
        choices=_RISK_MEASURES,
        default="record_linkage",
        help="the map's vertical axis (default record_linkage: the share of records "
        "re-identified by distance-based linkage)",
    )
    parser.add_argument(
        "--utility-measure",
        choices=_UTILITY_MEASURES,
        default="relative_error",
        help="the map's horizontal axis, an information loss (default relative_error; "
        "jensen_shannon, variance_variation and correlation_error need no row pairing)",
    )
    aligned_argument(parser, "RELEASE")
    shared_arguments(parser, "each RELEASE")
    parser.add_argument("--force", action="store_true", help="overwrite an existing FILE")


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad options and paths before reading anything."""
    if Path(args.output).suffix.lower() not in (".html", ".json"):
        raise DPFastValueError(
            f"-o {args.output!r}: the evaluation is written as .html (a page with the map) or "
            ".json; give a file name ending in one of them"
        )
    check_output(args, (args.original, args.schema, *args.releases))
    if args.labels is not None and len(args.labels) != len(args.releases):
        raise DPFastValueError(
            f"--labels gives {len(args.labels)} label(s) for {len(args.releases)} RELEASE(s); "
            "give one per RELEASE, in their order"
        )
    if not 0 <= args.p <= 100:
        raise DPFastValueError(f"--p must be a percentage in [0, 100], got {args.p:g}")
    if args.width is not None and not args.width >= 0:
        raise DPFastValueError(f"--width must be >= 0, got {args.width:g}")


def _labels(args: argparse.Namespace) -> list[str]:
    if args.labels is not None:
        return list(args.labels)
    names = [os.path.basename(os.path.normpath(path)) for path in args.releases]
    return names if len(set(names)) == len(names) else list(args.releases)


def _read(path: str, args: argparse.Namespace, progress: Any) -> Any:
    from dpfast.io import output_format, read_table

    text = output_format(path) != "parquet"
    return read_table(
        path,
        delimiter=args.delimiter if text else None,
        encoding=(args.encoding or "utf-8") if text else "utf-8",
        progress=progress,
    )


def _reported(args: argparse.Namespace) -> list[Any]:
    """Return each RELEASE as a Candidate with its reports, its table not yet read.

    What evaluate would refuse in them (a DiffGen release, a release without its public
    report and neither --aligned nor --no-aligned) is refused now, before any table is read.
    """
    from dpfast.compare import Candidate, check_releases

    found = []
    for label, path in zip(_labels(args), args.releases, strict=True):
        if not os.path.isfile(path):
            _read(path, args, None)  # refuses it as the reading would: it does not exist
        public_path, private_path = report_paths(path)
        found.append(
            Candidate(
                label=label,
                data=None,
                public_report=read_report(None, public_path)[0],
                private_report=read_report(None, private_path)[0],
                path=path,
            )
        )
    check_releases(found, aligned=args.aligned)
    return found


def _candidates(args: argparse.Namespace, reported: list[Any], progress: Any) -> list[Any]:
    """Return the candidates with their tables read."""
    import dataclasses

    return [
        dataclasses.replace(candidate, data=_read(candidate.path, args, progress))
        for candidate in reported
    ]


def _evaluate(args: argparse.Namespace) -> int:
    from dpfast._private_files import write_private_text
    from dpfast.compare import evaluate
    from dpfast.schema import Schema

    _check_arguments(args)
    schema = Schema.from_json(args.schema)
    reported = _reported(args)
    with delayed_progress(args) as reading:
        original = _read(args.original, args, reading)
        candidates = _candidates(args, reported, reading)
    line = progress_line(args)
    try:
        found = evaluate(
            original,
            candidates,
            schema=schema,
            columns=args.columns,
            quasi_identifiers=args.quasi_identifiers,
            k=args.k,
            p=args.p,
            width=args.width,
            risk_measure=args.risk_measure,
            utility_measure=args.utility_measure,
            aligned=args.aligned,
            progress=line,
            original_path=args.original,
        )
    finally:
        if line is not None:
            line.close()
    html = Path(args.output).suffix.lower() == ".html"
    write_private_text(found.to_html() if html else found.to_json() + "\n", args.output)
    content = found.to_dict()
    placed = len(content["map"]["points"])
    note(
        args,
        f"wrote {args.output} (PRIVATE: computed from the original data; do not publish): "
        f"{len(candidates)} release(s), {placed} on the risk-utility map",
    )
    for label, why in content["map"]["left_out"].items():
        note(args, f"{label} is not on the map: {why}")
    print_verdict(args, content["verdict"]["text"])
    return 0


#: ``dpfast evaluate``.
EVALUATE = Command(
    "evaluate",
    help="a private evaluation of releases: utility and disclosure risk, a risk-utility map",
    description="Measure, for the data holder only, the utility and the disclosure risk of "
    "one or more releases of ORIGINAL, side by side, and place them on a risk-utility map "
    "(Duncan's R-U confidentiality map), one point per release.",
    epilog=_EVALUATE_EXAMPLES,
    arguments=_evaluate_arguments,
    handler=_evaluate,
)
