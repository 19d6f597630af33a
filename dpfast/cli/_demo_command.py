"""``dpfast demo``: release the bundled Adult data with ir-dp and print a summary."""

from __future__ import annotations

import argparse
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from dpfast.cli._inputs import schema_taxonomies
from dpfast.cli._outputs import write_release
from dpfast.cli._parsing import Command, integer, number, quiet_argument
from dpfast.cli._progress import progress_line
from dpfast.exceptions import DPFastValueError

_DEMO_EXAMPLES = """\
examples:
  dpfast demo
  dpfast demo --out /tmp/adult-demo --k 50 --epsilon 0.5 --seed 1
  dpfast demo --all-columns           # all six numeric columns: much more noise each
  dpfast demo --mixed --epsilon 10

Releases age, education-num and hours-per-week of the bundled UCI Adult training data
(30,162 complete rows) with ir-dp, using the public bounds of
dpfast/datasets/adult.schema.json (--all-columns: its six numeric columns). With --mixed it
releases the paper's mixed table instead: age, hours-per-week, occupation and
native-country (dpfast/datasets/adult_mixed.schema.json, bundled ARX taxonomies). Rows are
released in random order; the utility figures match each released row to its original
internally (metrics=True), so the report holds them and must stay private. The bundled
data are public and the demo spends no one's budget: every run replaces the demo's own
files in --out (adult_ir_dp.parquet and its two reports), and only those.
"""


#: The numeric columns the demo releases by default: a realistic choice for one epsilon.
DEMO_COLUMNS = ("age", "education-num", "hours-per-week")


def _demo_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--out",
        default="dpfast-demo",
        help="output folder; a rerun replaces the demo's own files in it (default: %(default)s)",
    )
    demo.add_argument("--k", type=integer, default=100, help="group size (default: 100)")
    demo.add_argument(
        "--all-columns",
        action="store_true",
        help="release all six numeric columns (each then gets a sixth of epsilon)",
    )
    demo.add_argument("--epsilon", type=number, default=1.0, help="budget (default: 1)")
    demo.add_argument("--seed", type=integer, help="seeded noise: NOT for publication")
    demo.add_argument(
        "--mixed",
        action="store_true",
        help="release the paper's mixed table (age, hours-per-week, occupation, "
        "native-country) instead of the numeric columns",
    )
    demo.add_argument(
        "--sensitivity",
        choices=("proven", "paper"),
        default="proven",
        help="with --mixed: the categorical sensitivity; paper is NOT proven (default: proven)",
    )
    quiet_argument(demo)


def _demo(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise DPFastValueError(f"--out {args.out!r} is a file; give a folder")
    data_path = out_dir / "adult_ir_dp.parquet"
    release, columns, n_categorical = _release_adult(args)
    utility = _utility_lines(release, columns)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = write_release(release.data, release.report, release.private, data_path)
    r = release.report
    lines = _ledger_lines(args, r, columns, n_categorical) + utility
    lines += [
        "",
        f"input values clamped to the bounds: {sum(release.private.clamped.values())} (private)",
        f"wrote {data_path} ({r.released_rows:,} rows)",
        f"  public report (may be published with the data): {written[0]}",
        f"  PRIVATE report (exact counts, metrics, timings; keep it): {written[1]}",
    ]
    print("\n".join(lines))
    return 0


def _release_adult(args: argparse.Namespace) -> tuple[Any, list[str], int]:
    """Release the demo's Adult columns with ir-dp (``metrics=True``).

    Returns the release, its protected columns and how many of them are categorical.
    """
    from dpfast.datasets import adult, adult_mixed_schema_path, adult_schema_path
    from dpfast.methods.ir_dp import ir_dp
    from dpfast.schema import Schema

    schema = Schema.from_json(adult_mixed_schema_path() if args.mixed else adult_schema_path())
    taxonomies = schema_taxonomies(schema)
    columns = schema.protected_numeric() + schema.protected_categorical()
    if not args.mixed and not args.all_columns:
        columns = [c for c in columns if c in DEMO_COLUMNS]
    bounds_all = schema.bounds()
    bounds: dict[Hashable, tuple[float, float]] = {
        c: b for c, b in bounds_all.items() if c in columns
    }
    original = adult("train", drop_missing=True)[columns]
    progress = progress_line(args)
    try:
        release = ir_dp(
            original,
            k=args.k,
            epsilon=args.epsilon,
            bounds=bounds,
            taxonomies=taxonomies,
            sensitivity=args.sensitivity,
            seed=args.seed,
            metrics=True,
            progress=progress,
        )
    finally:
        if progress is not None:
            progress.close()
    return release, columns, len(taxonomies)


def _ledger_lines(
    args: argparse.Namespace, r: Any, columns: list[str], n_categorical: int
) -> list[str]:
    """Return the summary's heading, its epsilon ledger and its guarantee."""
    width = max(len(c) for c in columns) + 2
    kinds = f"{len(columns)} numeric columns"
    if n_categorical:
        kinds = (
            f"{len(columns) - n_categorical} numeric + {n_categorical} categorical "
            f"columns (sensitivity {args.sensitivity})"
        )
    lines = [
        f"dpfast demo: ir-dp on UCI Adult (train, {r.released_rows:,} complete rows), "
        f"{kinds}, k = {args.k}, epsilon = {r.epsilon:g}",
        "",
        "epsilon ledger",
        f"  {'step':<20}{'column':<{width}}{'epsilon':>9}{'sensitivity':>13}{'noise scale':>13}",
    ]
    for entry in r.ledger:
        lines.append(
            f"  {entry.step:<20}{', '.join(entry.columns):<{width}}{entry.epsilon:>9.4g}"
            f"{_number_text(entry.sensitivity):>13}{_number_text(entry.noise_scale):>13}"
        )
    total = sum(entry.epsilon for entry in r.ledger)
    lines += [
        f"  {'total':<20}{'':<{width}}{total:>9.4g}",
        "",
        f"guarantee ({r.guarantee_level}): {r.guarantee}",
    ]
    if r.seeded:
        lines.append("noise: seeded, reproducible, NOT for publication")
    return lines


def _utility_lines(release: Any, columns: list[str]) -> list[str]:
    """Return the summary's utility table: relative error and JSD per column, and means."""
    metrics = release.private.metrics or {}
    errors = _by_column(metrics["relative_error"])
    divergences = _by_column(metrics["jensen_shannon"])
    width = max(len(c) for c in columns) + 2
    lines = [
        "",
        "utility against the original (0 is perfect; in the private report only)",
        f"  {'column':<{width}}{'relative error':>16}{'JSD':>10}",
    ]
    for column in columns:
        lines.append(f"  {column:<{width}}{errors[column]:>16.4f}{divergences[column]:>10.4f}")
    lines += [
        f"  {'mean':<{width}}{metrics['mean_relative_error']:>16.4f}"
        f"{metrics['mean_jensen_shannon']:>10.4f}",
        "  relative error: how far a released value is from its original, as a fraction of it",
        "  (0.06: about 6% off); JSD: how far the released distribution is from the original",
        "  one (0: the same, 1: disjoint). A larger epsilon scales the noise down in proportion;",
        "  a larger k shares each noise draw among k rows, but averages more rows together.",
    ]
    return lines


def _by_column(values: Any) -> dict[str, float]:
    return {str(name): float(value) for name, value in dict(values).items()}


def _number_text(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


#: ``dpfast demo``; the command line binds its handler (tests may replace ``dpfast.cli._demo``).
DEMO = Command(
    "demo",
    help="release the bundled Adult data with ir-dp and print a summary",
    description="Release the bundled UCI Adult data's numeric columns with ir-dp.",
    epilog=_DEMO_EXAMPLES,
    arguments=_demo_arguments,
    handler=_demo,
)
