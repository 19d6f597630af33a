"""What a release command writes: the data and its two reports, and the summary it prints."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dpfast.cli._progress import renamed

__all__ = [
    "Staging",
    "from_data",
    "mark_from_data",
    "report_paths",
    "staging",
    "summary",
    "write_release",
]


def report_paths(output: str | os.PathLike[str]) -> tuple[str, str]:
    """Return the paths of the public and the private report of an output file."""
    return f"{output}.public-report.json", f"{output}.private-report.json"


class Staging:
    """A hidden staging directory beside OUTPUT: the data and its reports, then all at once.

    The data is written whole into it (at :attr:`data`, OUTPUT's own name), the budget's
    spend is committed (by the release's engine, or by :meth:`publish`'s
    ``before_publish``), both reports are written beside the data, then the reports are
    renamed into place and the data last (:func:`dpfast._staging.publish`): an error or
    an interrupt before the data's rename takes the reports back, and once the data is in
    place so are they. Its name holds OUTPUT's, this process's id and its host: a run
    killed outright leaves it, and the next one to OUTPUT removes it (:func:`staging`).
    """

    def __init__(self, output: str | os.PathLike[str]) -> None:
        from dpfast._staging import directory_beside

        self.output = Path(output)
        self.directory = directory_beside(self.output)
        self.data = self.directory / self.output.name

    def publish(
        self, report: Any, private: Any, before_publish: Callable[[Any], None] | None = None
    ) -> tuple[str, str]:
        """Write both reports beside the complete data, then rename all three into place.

        ``before_publish(report)`` runs first. The private report is readable by its owner
        only (0600), whatever the umask. Returns the paths of the public and the private
        report.
        """
        from dpfast._private_files import write_private_text
        from dpfast._staging import publish
        from dpfast.io import write_json_atomic

        if before_publish is not None:
            before_publish(report)  # final before anything is visible
        public_path, private_path = report_paths(self.output)
        staged_public, staged_private = report_paths(self.data)
        write_json_atomic(report.to_dict(), staged_public)
        write_private_text(private.to_json() + "\n", staged_private)
        pairs = [
            (Path(staged_public), Path(public_path)),
            (Path(staged_private), Path(private_path)),
            (self.data, self.output),
        ]
        publish(pairs, aside=self.directory)
        return public_path, private_path


@contextlib.contextmanager
def staging(output: str | os.PathLike[str]) -> Iterator[Staging]:
    """Yield OUTPUT's :class:`Staging` directory, removed however the block ends.

    What runs to OUTPUT killed outright left beside it (their process gone) is removed
    first, with a warning naming each (docs/engines.md, "Faults").
    """
    from dpfast._staging import leftovers, remove_gone, remove_path

    remove_gone(leftovers(output))
    stage = Staging(output)
    try:
        yield stage
    finally:
        remove_path(stage.directory)


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
    """Write the data and its two reports, all three at once or none (:class:`Staging`).

    The data is written whole into OUTPUT's staging directory; ``before_publish(report)``
    (the budget's commit) runs then, before both reports are written beside it and the
    three are renamed into place. A failure or an interrupt before the data's rename
    leaves ``output`` and its reports as they were. ``delimiter`` replaces the separator
    of a CSV or TSV output; ``progress`` is called as the data is written. Returns the
    paths of the public and the private report.
    """
    from dpfast.io import write_table_atomic

    target = Path(output)
    shown = None if progress is None else renamed(progress, f"writing {target.name}")
    with staging(output) as stage:
        write_table_atomic(data, stage.data, delimiter=delimiter, progress=shown)
        return stage.publish(report, private, before_publish)


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


def summary(
    args: argparse.Namespace,
    report: Any,
    private: Any,
    paths: tuple[str, str],
    n_rows: int,
    spend: Any,
) -> int:
    """Print what was written and what holds (unless --quiet); return exit code 0.

    Besides the public facts it prints lines for the data holder's eyes: the share of
    values the noise pushed onto a bound, beside those released there and there before
    the noise, and how the share pushed compares with its forecast (from the private
    report); and, under column linkage, that rows are not records.
    """
    if args.quiet:
        return 0
    public_path, private_path = paths
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
    lines.extend(_on_bound(private) + _linkage(report))
    lines.extend(_accuracy(report))
    if spend is not None and spend.reservation is not None:
        left = spend.reservation.budget.remaining()
        lines.append(f"budget {args.budget}: epsilon {left:.6g} left")
    print("\n".join(lines))
    return 0


def _on_bound(private: Any) -> list[str]:
    """Say how many values the noise pushed onto a bound: exact, so private (this terminal only).

    Beside it, the share released on a bound and the share there before the noise (the
    groups' means, clamped and rounded as released: docs/forecast.md#pushed); then the
    line that compares the share pushed with its forecast, if the release kept one.
    """
    rows = private.input_rows
    counts = {
        "pushed there by the noise": private.pushed_onto_bound,
        "released on a bound": private.clamped_output,
        "there before the noise": private.on_bound_before_noise,
    }
    if not private.clamped_output or not rows:
        return []
    parts = [f"{what} {_shares(found, rows)}" for what, found in counts.items()]
    lines = [
        "values on a bound (PRIVATE: counted in this release, do not publish): " + "; ".join(parts)
    ]
    if private.forecast is not None and private.forecast.get("line"):
        lines.append(private.forecast["line"])
    return lines


def _shares(counts: dict[str, int], rows: int) -> str:
    """Return ``"3.1% (age 0.0%, income 6.2%)"``: the share over every column, then each's."""
    overall = sum(counts.values()) / (rows * len(counts)) if counts else 0.0
    shown = ", ".join(f"{name} {count / rows:.1%}" for name, count in list(counts.items())[:10])
    more = ", ..." if len(counts) > 10 else ""
    return f"{overall:.1%} ({shown}{more})"


def _accuracy(report: Any) -> list[str]:
    """State the public report's intervals: public, and what a user of the file can rely on."""
    section = getattr(report, "accuracy", None)
    if not section or not section["columns"]:
        return []
    parts, rounded = [], []
    for name, column in list(section["columns"].items())[:10]:
        intervals = column["intervals"]
        shown = ", ".join(f"{key} ± {found['half_width']:.3g}" for key, found in intervals.items())
        parts.append(f"{name}: {shown}")
        if any(found["rounding"] for found in intervals.values()):
            rounded.append(name)
    more = "; ..." if len(section["columns"]) > 10 else ""
    rounding = (
        f"; rounding to integers may move each value of {', '.join(rounded)} by up to 0.5 more"
        if rounded
        else ""
    )
    return [
        f"accuracy ({section['level']:.0%} intervals from public values, in the public "
        f"report): {'; '.join(parts)}{more}{rounding}. Values the noise pushed onto a bound "
        "bias these statistics beyond the intervals; dpfast.accuracy() gives a subset's"
    ]


def _linkage(report: Any) -> list[str]:
    """Under column linkage, say plainly that rows are not records, and what keeps them."""
    if report.parameters.get("linkage") != "columns":
        return []
    return [
        "rows are not records: --linkage columns shuffles each protected column on its own, "
        "so the values in one output row come from different input rows, and relationships "
        "between columns (correlations, cross-tabulations) are not kept. For linked records "
        "with a proof use dpfast release mdav-dp; --linkage records keeps rows linked as "
        "the paper does, NOT proven differentially private"
    ]


def mark_from_data(report: Any, schema: Any, args: argparse.Namespace) -> Any:
    """Label a release that used schema values marked ``"from_data"`` as not private."""
    marked, text = from_data(report, schema, args)
    if text is not None:
        from dpfast.exceptions import PrivacyLeakWarning

        warnings.warn(text, PrivacyLeakWarning, stacklevel=2)
    return marked


def from_data(report: Any, schema: Any, args: argparse.Namespace) -> tuple[Any, str | None]:
    """Return the report :func:`mark_from_data` writes, and its label (None: unchanged)."""
    marked = {} if schema is None else schema.from_data(report.protected_columns)
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
