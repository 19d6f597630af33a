"""Several releases of one table: utility and disclosure risk side by side (``dpfast evaluate``).

Each release is compared with the original on the schema's columns: the utility metrics
of :mod:`dpfast.metrics` (and the error of the correlation matrix) and the risk measures
of :mod:`dpfast.risk`. The row-paired ones (relative error, record linkage, interval
disclosure, neighbourhood counts) need row ``i`` of the release to come from row ``i`` of
the original; a release whose public report shows another row order gets them from its
private report when it was released with ``risk=True`` (and ``metrics=True``), and
otherwise goes without them, saying why. A release without a public report is measured
only once the caller says whether its rows are aligned (``aligned=``). One point per
release then places it on Duncan's risk-utility map (docs/risk.md#the-risk-utility-map),
marked by its guarantee, and a verdict names the DP releases and the best on the map.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast import metrics, risk
from dpfast._validation import in_cli, option, quoted
from dpfast.compare._advice import release_again
from dpfast.compare._columns import ColumnComparison, chosen_columns, compare_column, per_column
from dpfast.compare._map import RISK_MEASURES, UTILITY_MEASURES, map_points
from dpfast.compare._page import _jsonable
from dpfast.compare._verdict import evaluation_verdict
from dpfast.exceptions import DPFastValueError
from dpfast.io import TableData, as_table_data
from dpfast.schema import Schema
from dpfast.taxonomy import Taxonomy, as_taxonomy

#: What an evaluation says of itself, in its JSON and at the top of its page.
EVALUATION_KIND = "PRIVATE: not for publication"
EVALUATION_WARNING = (
    "computed from the original data: keep this evaluation private, never publish it with "
    "the releases"
)

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Candidate:
    """One release to evaluate: its label on the map, its table and its reports.

    ``public_report`` and ``private_report`` are the release's reports as parsed JSON
    (``Report.to_dict()``, ``PrivateReport.to_dict()``), or None when not found; ``path``
    names the file it was read from.
    """

    label: str
    data: Any
    public_report: Mapping[str, Any] | None = None
    private_report: Mapping[str, Any] | None = None
    path: str | None = None


@dataclass(frozen=True)
class Settings:
    """What every release is measured with."""

    schema: Schema
    columns: list[str]
    quasi_identifiers: list[str] | None
    k: int | None
    p: float
    width: float | None
    aligned: bool | None = None


@dataclass(frozen=True)
class Evaluation:
    """The evaluation of several releases of one table: a JSON-ready dict, and its page."""

    content: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """Return the evaluation as plain JSON-ready objects (non-finite floats as text)."""
        return dict(self.content)

    def to_json(self, indent: int | None = 2) -> str:
        """Return the evaluation as a JSON document."""
        return json.dumps(self.content, indent=indent, allow_nan=False)

    def to_html(self) -> str:
        """Return the evaluation as one self-contained private HTML page (an SVG map)."""
        from dpfast.compare._evaluation_page import evaluation_page

        return evaluation_page(self.content)


def _alignment(candidate: Candidate, rows: int, n: int, aligned: bool | None) -> tuple[bool, str]:
    """Whether row ``i`` of the release comes from row ``i`` of the original, and why."""
    if rows != n:
        return False, f"it has {rows:,} rows and ORIGINAL {n:,}: its rows are not ORIGINAL's"
    public = candidate.public_report
    if public is None:
        if aligned:
            return True, (
                f"no public report; row-aligned with ORIGINAL as {option('aligned', True)} "
                "states: its row-paired measures pair row i with row i"
            )
        return False, (
            f"no public report; not row-aligned with ORIGINAL, as {option('aligned', False)} states"
        )
    reason = risk.misalignment(public)
    if reason is not None:
        return False, reason
    return True, f"its public report shows a {public.get('method')} release in the row order"


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _correlation_error(comparisons: Sequence[ColumnComparison]) -> float | None:
    numeric = [c for c in comparisons if c.kind == "numeric"]
    if len(numeric) < 2:
        return None
    x = np.column_stack([c.original.astype(np.float64) for c in numeric])
    y = np.column_stack([c.released.astype(np.float64) for c in numeric])
    if x.shape[0] < 2 or y.shape[0] < 2:
        return None
    found = metrics.correlation_error(x, y)
    return None if math.isnan(found) else found


def _utility(
    comparisons: Sequence[ColumnComparison], candidate: Candidate, aligned: bool
) -> dict[str, Any]:
    """Per-column metrics, their means and the correlation error of one release."""
    columns = {c.name: dict(c.metrics) for c in comparisons}
    notes = []
    private = candidate.private_report
    stored = None if private is None else private.get("metrics")
    if (
        not aligned
        and isinstance(stored, Mapping)
        and isinstance(stored.get("relative_error"), Mapping)
    ):
        linked = per_column(stored["relative_error"])
        for name, values in columns.items():
            if name in linked:
                values["relative_error"] = linked[name]
        notes.append(
            f"relative error from the release's private report ({option('metrics', True)}): "
            "each row paired with its source through the release's own order"
        )
    out: dict[str, Any] = {"columns": columns, "not_measured": {}}
    for metric in ("relative_error", "jensen_shannon", "variance_variation"):
        out[f"mean_{metric}"] = _mean([v[metric] for v in columns.values() if metric in v])
    if out["mean_relative_error"] is None:
        out["not_measured"]["mean_relative_error"] = (
            "its rows are not paired with ORIGINAL's; choose an order-free "
            f"{option('utility_measure')} (jensen_shannon, variance_variation, "
            "correlation_error), or, to have it computed through the release's own order, "
            + release_again(candidate.public_report, "metrics")
        )
    if out["mean_variance_variation"] is None:
        out["not_measured"]["mean_variance_variation"] = "no numeric column"
    out["correlation_error"] = _correlation_error(comparisons)
    if out["correlation_error"] is None:
        out["not_measured"]["correlation_error"] = (
            "fewer than two numeric columns, or no pair's correlation defined"
        )
    out["notes"] = notes
    return out


def _widths(
    settings: Settings, private: Mapping[str, Any] | None, numeric: Sequence[str]
) -> dict[Hashable, float] | None:
    """Return the neighbourhood half-widths: ``width``, else a k-noise release's ``2δ``."""
    found: dict[Hashable, float] = {}
    deltas = None if private is None else private.get("deltas")
    if settings.width is not None:
        found = dict.fromkeys(numeric, settings.width)
    elif isinstance(deltas, Mapping):
        found = {name: 2.0 * float(deltas[name]) for name in numeric if name in deltas}
    return found or None


_PAIRED = ("record_linkage", "interval_disclosure", "neighbourhood")


def _paired_risk(
    candidate: Candidate,
    table: TableData,
    original: TableData,
    settings: Settings,
    alignment: tuple[bool, str],
) -> dict[str, Any]:
    """Measure the row-paired risk: from the files, from the private report, or not."""
    aligned, why = alignment
    taxonomies, compared = _risk_columns(settings)
    out: dict[str, Any] = dict.fromkeys(_PAIRED)
    out["not_measured"] = {}
    stored = None if candidate.private_report is None else candidate.private_report.get("risk")
    if aligned and compared:
        numeric = [name for name in compared if name not in taxonomies]
        found = risk.risk_summary(
            original.source,
            table.source,
            columns=compared,
            taxonomies=taxonomies,
            p=settings.p,
            width=_widths(settings, candidate.private_report, numeric),
        )
        out.update({key: found[key] for key in _PAIRED})
        out["source"] = "the two files, row i of the release with row i of ORIGINAL"
    elif not aligned and isinstance(stored, Mapping):
        out.update({key: stored.get(key) for key in _PAIRED})
        reasons = stored.get("not_measured")
        if isinstance(reasons, Mapping):
            out["not_measured"] = {k: str(v) for k, v in reasons.items() if k in _PAIRED}
        shown = ", ".join(map(str, stored.get("columns") or []))
        out["source"] = (
            f"the release's private report ({option('risk', True)}): each row paired with "
            f"its source through the release's own order, on its columns {shown}"
        )
    else:
        reason = (
            "no numeric column, nor one with a taxonomy, to compare"
            if not compared
            else f"the rows are not paired with ORIGINAL's: {why}. To have them measured "
            "through the release's own order, " + release_again(candidate.public_report, "risk")
        )
        out["not_measured"] = dict.fromkeys(_PAIRED, reason)
        out["source"] = "not measured"
    if out["neighbourhood"] is None and "neighbourhood" not in out["not_measured"]:
        out["not_measured"]["neighbourhood"] = f"no width ({option('width')})"
    return out


def _risk_columns(settings: Settings) -> tuple[dict[Hashable, Taxonomy], list[str]]:
    """Return the compared categorical columns' taxonomies, and the columns risk compares."""
    taxonomies: dict[Hashable, Taxonomy] = {}
    compared = []
    for name in settings.columns:
        spec = settings.schema[name]
        if spec.is_numeric:
            compared.append(name)
        elif spec.taxonomy is not None:
            taxonomies[name] = as_taxonomy(spec.taxonomy, name)
            compared.append(name)
    return taxonomies, compared


def _uniqueness(
    risk_found: dict[str, Any],
    table: TableData,
    original: dict[str, Any] | None,
    settings: Settings,
) -> None:
    names = settings.quasi_identifiers
    if names is None or settings.k is None:
        risk_found["uniqueness"] = None
        risk_found["not_measured"]["uniqueness"] = (
            f"no quasi-identifiers ({option('quasi_identifiers')})"
        )
        return
    missing = [name for name in names if name not in table.names]
    if missing:
        risk_found["uniqueness"] = None
        risk_found["not_measured"]["uniqueness"] = (
            f"the release has no column {quoted(missing, listed=True)} (the release left "
            f"it out: {option('unprotected', 'drop')})"
        )
        return
    released = risk.uniqueness(table.source, names, k=settings.k).as_dict()
    risk_found["uniqueness"] = {"original": original, "released": released}


def measure_risk(
    candidate: Candidate,
    original: TableData,
    settings: Settings,
    alignment: tuple[bool, str],
    original_uniqueness: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Measure one release's risk: row-paired where ``alignment`` allows, and uniqueness.

    ``alignment`` says whether row ``i`` of the release comes from row ``i`` of the
    original, and why (or why not).
    """
    table = as_table_data(candidate.data)
    found = _paired_risk(candidate, table, original, settings, alignment)
    if original_uniqueness is None and settings.quasi_identifiers and settings.k is not None:
        original_uniqueness = risk.uniqueness(
            original.source, settings.quasi_identifiers, k=settings.k
        ).as_dict()
    _uniqueness(found, table, original_uniqueness, settings)
    return found


def _evaluate_one(
    candidate: Candidate,
    original: TableData,
    settings: Settings,
    original_uniqueness: dict[str, Any] | None,
) -> dict[str, Any]:
    """Measure one release: its row pairing, utility and risk."""
    table = as_table_data(candidate.data)
    aligned, why = _alignment(candidate, table.n_rows, original.n_rows, settings.aligned)
    comparisons = [
        compare_column(name, settings.schema, original, table, linked=aligned)
        for name in settings.columns
    ]
    found = measure_risk(candidate, original, settings, (aligned, why), original_uniqueness)
    public = candidate.public_report or {}
    return {
        "label": candidate.label,
        "path": candidate.path,
        "method": public.get("method"),
        "parameters": public.get("parameters"),
        "epsilon": public.get("epsilon"),
        "guarantee_level": public.get("guarantee_level"),
        "rows": table.n_rows,
        "aligned": aligned,
        "alignment": why,
        "utility": _utility(comparisons, candidate, aligned),
        "risk": found,
    }


def _settings(
    schema: Schema | str | os.PathLike[str],
    columns: Sequence[str] | None,
    original: TableData,
    tables: Sequence[TableData],
    options: tuple[Sequence[str] | None, int | None, float, float | None, bool | None],
) -> Settings:
    """Check what every release is measured with; the compared columns all releases hold."""
    quasi_identifiers, k, p, width, aligned = options
    if not isinstance(schema, Schema):
        schema = Schema.from_json(schema)
    chosen = [chosen_columns(schema, columns, original, table) for table in tables]
    common = [name for name in chosen[0] if all(name in other for other in chosen)]
    if not common:
        raise DPFastValueError(
            "the releases share none of the columns the schema protects; name the columns "
            f"to compare ({option('columns')})"
        )
    if quasi_identifiers is not None:
        if k is None:
            raise DPFastValueError(
                f"{option('quasi_identifiers')} needs {option('k')}, the class size the "
                "uniqueness checks"
            )
        unknown = [name for name in quasi_identifiers if name not in original.names]
        if unknown:
            raise DPFastValueError(
                f"ORIGINAL has no column {quoted(unknown, listed=True)} "
                f"({option('quasi_identifiers')}); "
                f"its columns are {quoted(list(original.names), listed=True)}"
            )
    qis = None if quasi_identifiers is None else list(quasi_identifiers)
    return Settings(schema, common, qis, k, p, width, aligned)


def _unreported(candidate: Candidate) -> str:
    """Refuse a release without its public report: whether its rows are aligned is unknown."""
    name = candidate.path or candidate.label
    if in_cli():
        where = (
            f"copy its reports beside it ({name}.public-report.json and {name}.private-report.json)"
        )
    else:
        where = "give its reports (Candidate(public_report=..., private_report=...))"
    return (
        f"{name} has no public report, so dpfast cannot tell whether its rows are in "
        "ORIGINAL's order, which the relative error, record linkage, interval disclosure "
        f"and neighbourhood counts need; {where}, or say how its rows lie: "
        f"{option('aligned', True)} if row i of it is the release of row i of ORIGINAL, "
        f"{option('aligned', False)} if not (its row-paired measures are then left out). "
        "Either applies to every release without a public report"
    )


def check_releases(candidates: Sequence[Candidate], *, aligned: bool | None = None) -> None:
    """Refuse what :func:`evaluate` refuses in its releases, before any table is read.

    No release, two with one label, a DiffGen release (counts, not microdata), or a
    release without a public report while ``aligned`` is None: nothing would say whether
    its rows are in the original's order, which the row-paired measures need. A
    candidate's ``data`` is not looked at (it may still be None).

    Raises
    ------
    ValueError
        The first of these found, saying how to fix it.

    Examples
    --------
    >>> check_releases([Candidate("copy", None, None, None, "copy.csv")])
    Traceback (most recent call last):
    ...
    dpfast.exceptions.DPFastValueError: copy.csv has no public report, so dpfast cannot tell ...
    >>> check_releases([Candidate("copy", None, None, None, "copy.csv")], aligned=True)
    """
    if not candidates:
        raise DPFastValueError("give at least one release to evaluate")
    labels = [candidate.label for candidate in candidates]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise DPFastValueError(
            f"two releases have the label {quoted(repeated[0])}; give each its own "
            f"({option('labels')})"
        )
    for candidate in candidates:
        if (candidate.public_report or {}).get("method") == "diffgen":
            raise DPFastValueError(
                f"{candidate.path or candidate.label} is a DiffGen release (generalised "
                "counts, not microdata); evaluate compares microdata releases (ir-dp, "
                "laplace, mdav, k-noise, ...)"
            )
        if candidate.public_report is None and aligned is None:
            raise DPFastValueError(_unreported(candidate))


def evaluate(
    original: Any,
    releases: Sequence[Candidate],
    *,
    schema: Schema | str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    quasi_identifiers: Sequence[str] | None = None,
    k: int | None = None,
    p: float = 10.0,
    width: float | None = None,
    risk_measure: str = "record_linkage",
    utility_measure: str = "relative_error",
    aligned: bool | None = None,
    progress: Progress | None = None,
    original_path: str | None = None,
) -> Evaluation:
    """Measure the utility and the disclosure risk of several releases of one table.

    PRIVATE: computed from the original data. See docs/risk.md#evaluate.

    Parameters
    ----------
    original : table
        The table the releases came from.
    releases : sequence of Candidate
        The releases, each with its label and its reports (when found).
    schema : Schema or path
        Declared types, public bounds and taxonomies of the columns.
    columns : list of str, optional
        The compared columns (default: the schema's protected columns every release holds).
    quasi_identifiers : list of str, optional
        Columns for the uniqueness of each table (needs ``k``).
    k : int, optional
        The class size the uniqueness checks.
    p : float
        Interval half-width of the interval disclosure, in percent.
    width : float, optional
        Neighbourhood half-width for every numeric column (default: a k-noise release's
        ``2δ`` from its private report, else none).
    risk_measure, utility_measure : str
        The map's axes: a key of :data:`RISK_MEASURES` and of :data:`UTILITY_MEASURES`.
    aligned : bool, optional
        For the releases without a public report, which would say: True if row ``i`` of
        each is the release of row ``i`` of ``original``, False if not (their row-paired
        measures are left out). Default None: such a release is refused, since pairing
        shuffled rows would compare unrelated records.
    progress : callable, optional
        Called as ``progress(phase, done, total)`` as each release is measured.
    original_path : str, optional
        Where ``original`` was read from, named in the output.

    Returns
    -------
    Evaluation
        Its ``verdict`` (``to_dict()["verdict"]``) names the differentially private
        releases and the best on the map, in one paragraph (``"text"``).

    Raises
    ------
    ValueError
        No release, two with one label, a DiffGen release, a release without a public
        report while ``aligned`` is None, an empty ``original``, or bad settings.

    Examples
    --------
    >>> import pandas as pd, dpfast
    >>> people = pd.DataFrame({"age": [20, 25, 31, 40, 52, 60, 33, 47],
    ...                        "hours": [40.0, 38.0, 45.0, 20.0, 50.0, 10.0, 30.0, 35.0]})
    >>> schema = Schema.from_dict({"columns": {"age": {"type": "integer", "bounds": [0, 99]},
    ...                                        "hours": {"type": "float", "bounds": [0, 99]}}})
    >>> releases = [dpfast.mdav(people, k=k) for k in (2, 4)]
    >>> found = evaluate(people, [Candidate(f"k={r.report.parameters['k']}", r.data,
    ...                                     r.report.to_dict()) for r in releases], schema=schema)
    >>> [(p["label"], p["risk"]) for p in found.to_dict()["map"]["points"]]
    [('k=2', 0.375), ('k=4', 0.25)]
    """
    if risk_measure not in RISK_MEASURES or utility_measure not in UTILITY_MEASURES:
        raise DPFastValueError(
            f"risk_measure must be one of {list(RISK_MEASURES)} and utility_measure one of "
            f"{list(UTILITY_MEASURES)}, got {quoted(risk_measure)} and {quoted(utility_measure)}"
        )
    check_releases(releases, aligned=aligned)
    original_table = as_table_data(original)
    if original_table.n_rows == 0:
        raise DPFastValueError("ORIGINAL is empty (0 rows); there is nothing to evaluate")
    tables = [as_table_data(candidate.data) for candidate in releases]
    settings = _settings(
        schema, columns, original_table, tables, (quasi_identifiers, k, p, width, aligned)
    )
    original_uniqueness = None
    if settings.quasi_identifiers is not None and settings.k is not None:
        found = risk.uniqueness(original_table.source, settings.quasi_identifiers, k=settings.k)
        original_uniqueness = found.as_dict()
    measured = []
    for done, candidate in enumerate(releases):
        if progress is not None:
            progress(f"evaluating {candidate.label}", done, len(releases))
        measured.append(_evaluate_one(candidate, original_table, settings, original_uniqueness))
    points, left_out = map_points(measured, risk_measure, utility_measure)
    found_map = {
        "risk_measure": risk_measure,
        "risk_title": RISK_MEASURES[risk_measure][0],
        "utility_measure": utility_measure,
        "utility_title": UTILITY_MEASURES[utility_measure][0],
        "points": points,
        "left_out": left_out,
    }
    content = {
        "report": EVALUATION_KIND,
        "warning": EVALUATION_WARNING,
        "original": {"path": original_path, "rows": original_table.n_rows},
        "columns": settings.columns,
        "quasi_identifiers": settings.quasi_identifiers,
        "k": settings.k,
        "p": settings.p,
        "verdict": evaluation_verdict(measured, found_map),
        "map": found_map,
        "releases": measured,
    }
    return Evaluation(_jsonable(content))
