"""Several releases of one table: utility and disclosure risk side by side (``dpfast evaluate``).

Each release is compared with the original on the schema's columns: the utility metrics
of :mod:`dpfast.metrics` (and the error of the correlation matrix) and the risk measures
of :mod:`dpfast.risk`. The row-paired ones (relative error, record linkage, interval
disclosure, neighbourhood counts) need row ``i`` of the release to come from row ``i`` of
the original; a release whose public report shows another row order gets them from its
private report when it was released with ``risk=True`` (and ``metrics=True``), and
otherwise goes without them, saying why. One point per release then places it on Duncan's
risk-utility map (docs/risk.md#the-risk-utility-map).
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
from dpfast._validation import option, quoted
from dpfast.compare._columns import ColumnComparison, chosen_columns, compare_column, per_column
from dpfast.compare._page import _jsonable
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

#: The risk measures the map can show: name -> (axis title, where in a release's risk).
RISK_MEASURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "record_linkage": (
        "record linkage (distance)",
        ("record_linkage", "distance"),
    ),
    "rank_linkage": (
        "record linkage (rank)",
        ("record_linkage", "rank"),
    ),
    "interval_disclosure": (
        "interval disclosure (rank, mean)",
        ("interval_disclosure", "rank_mean"),
    ),
    "uniqueness": (
        "share in classes below k",
        ("uniqueness", "released", "share_below_k"),
    ),
}

#: The information-loss measures the map can show: name -> (axis title, key of the utility).
UTILITY_MEASURES: dict[str, tuple[str, str]] = {
    "relative_error": ("mean relative error", "mean_relative_error"),
    "jensen_shannon": ("mean Jensen-Shannon divergence", "mean_jensen_shannon"),
    "variance_variation": ("mean variance variation", "mean_variance_variation"),
    "correlation_error": ("correlation error", "correlation_error"),
}

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


def _alignment(candidate: Candidate, rows: int, n: int) -> tuple[bool, str]:
    """Whether row ``i`` of the release comes from row ``i`` of the original, and why."""
    if rows != n:
        return False, f"it has {rows:,} rows and ORIGINAL {n:,}: its rows are not ORIGINAL's"
    public = candidate.public_report
    if public is None:
        return True, (
            "no public report was found, so it is taken to be row-aligned with ORIGINAL (it "
            "has as many rows); if its rows were shuffled, its row-paired measures compare "
            "unrelated rows"
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
    comparisons: Sequence[ColumnComparison], private: Mapping[str, Any] | None, aligned: bool
) -> dict[str, Any]:
    """Per-column metrics, their means and the correlation error of one release."""
    columns = {c.name: dict(c.metrics) for c in comparisons}
    notes = []
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
            "relative error from the release's private report (metrics=True): each row "
            "paired with its source through the release's own order"
        )
    out: dict[str, Any] = {"columns": columns, "not_measured": {}}
    for metric in ("relative_error", "jensen_shannon", "variance_variation"):
        out[f"mean_{metric}"] = _mean([v[metric] for v in columns.values() if metric in v])
    if out["mean_relative_error"] is None:
        out["not_measured"]["mean_relative_error"] = (
            "its rows are not paired with ORIGINAL's; choose an order-free "
            f"{option('utility_measure')} (jensen_shannon, variance_variation, "
            "correlation_error), or release it in Python with metrics=True to have it "
            "computed through the release's own order"
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
            else f"the rows are not paired with ORIGINAL's: {why}. Release it again with "
            f"{option('risk', True)} to have them measured through the release's own order"
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
    aligned, why = _alignment(candidate, table.n_rows, original.n_rows)
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
        "guarantee_level": public.get("guarantee_level"),
        "rows": table.n_rows,
        "aligned": aligned,
        "alignment": why,
        "utility": _utility(comparisons, candidate.private_report, aligned),
        "risk": found,
    }


def _dig(value: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def map_points(
    releases: Sequence[Mapping[str, Any]], risk_measure: str, utility_measure: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Return the R-U map's points (label, utility, risk, dominated) and why others are not.

    A release is dominated when another has no more risk and no more information loss,
    and less of one of them: it is never the better choice.
    """
    risk_title, risk_keys = RISK_MEASURES[risk_measure]
    utility_title, utility_key = UTILITY_MEASURES[utility_measure]
    points, left_out = [], {}
    for release in releases:
        x, y = release["utility"].get(utility_key), _dig(release["risk"], risk_keys)
        if not isinstance(x, (int, float)) or not math.isfinite(x):
            why = release["utility"]["not_measured"].get(utility_key, f"it is {x}")
            left_out[release["label"]] = f"no {utility_title}: {why}"
        elif not isinstance(y, (int, float)):
            why = release["risk"]["not_measured"].get(risk_keys[0], "not measured")
            left_out[release["label"]] = f"no {risk_title}: {why}"
        else:
            points.append({"label": release["label"], "utility": float(x), "risk": float(y)})
    for point in points:
        point["dominated"] = any(
            other["utility"] <= point["utility"]
            and other["risk"] <= point["risk"]
            and (other["utility"] < point["utility"] or other["risk"] < point["risk"])
            for other in points
        )
    return points, left_out


def _settings(
    schema: Schema | str | os.PathLike[str],
    columns: Sequence[str] | None,
    original: TableData,
    tables: Sequence[TableData],
    options: tuple[Sequence[str] | None, int | None, float, float | None],
) -> Settings:
    """Check what every release is measured with; the compared columns all releases hold."""
    quasi_identifiers, k, p, width = options
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
    return Settings(
        schema, common, None if quasi_identifiers is None else list(quasi_identifiers), k, p, width
    )


def _check_candidates(candidates: Sequence[Candidate]) -> None:
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
    progress : callable, optional
        Called as ``progress(phase, done, total)`` as each release is measured.
    original_path : str, optional
        Where ``original`` was read from, named in the output.

    Returns
    -------
    Evaluation

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
    _check_candidates(releases)
    original_table = as_table_data(original)
    if original_table.n_rows == 0:
        raise DPFastValueError("ORIGINAL is empty (0 rows); there is nothing to evaluate")
    tables = [as_table_data(candidate.data) for candidate in releases]
    settings = _settings(schema, columns, original_table, tables, (quasi_identifiers, k, p, width))
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
    content = {
        "report": EVALUATION_KIND,
        "warning": EVALUATION_WARNING,
        "original": {"path": original_path, "rows": original_table.n_rows},
        "columns": settings.columns,
        "quasi_identifiers": settings.quasi_identifiers,
        "k": settings.k,
        "p": settings.p,
        "map": {
            "risk_measure": risk_measure,
            "risk_title": RISK_MEASURES[risk_measure][0],
            "utility_measure": utility_measure,
            "utility_title": UTILITY_MEASURES[utility_measure][0],
            "points": points,
            "left_out": left_out,
        },
        "releases": measured,
    }
    return Evaluation(_jsonable(content))
