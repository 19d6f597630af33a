"""The comparison page: one self-contained HTML document (styles and PNGs inline).

Its verdict comes first, below the PRIVATE banner and the title. Every measured number is
printed rounded to 3 significant digits (counts exactly) and also carried exactly: in a
``data-value`` attribute (Python's ``repr`` of the float, which reads back to the same
float) and in the JSON block ``<script type="application/json" id="dpfast-compare">``.
Every data-derived string goes through :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dpfast._validation import option
from dpfast.compare._columns import QUANTILES, ColumnComparison, noise_rows, per_column
from dpfast.compare._format import count, percent, rounded
from dpfast.compare._plots import column_png
from dpfast.compare._verdict import comparison_verdict

BANNER = "PRIVATE — computed from the original data; do not publish"

_STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 62em; color: #222; }
.private-banner { background: #b00020; color: #fff; font-weight: bold; padding: 0.8em 1em;
  font-size: 1.15em; border-radius: 4px; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.note { color: #555; font-size: 0.92em; }
.missing { color: #8a4b00; }
figure { margin: 0.5em 0 1.5em; }
.verdict { font-size: 1.08em; line-height: 1.45; background: #f3f6fa; padding: 0.7em 1em;
  border-left: 4px solid #1f5fa8; }
"""

_METRIC_TITLES = {
    "jensen_shannon": "Jensen-Shannon divergence",
    "variance_variation": "variance variation",
    "relative_error": "relative error (record-linked)",
}


def _text(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number_cell(value: float | None, tag: str = "td", *, whole: bool = False) -> str:
    """Return a cell showing ``value`` rounded, and exactly in its ``data-value``.

    A count (``whole``) is shown exactly, with thousands separators.
    """
    if value is None:
        return f"<{tag}>—</{tag}>"
    shown = count(value) if whole and math.isfinite(value) else rounded(value)
    return f'<{tag} data-value="{_text(repr(float(value)))}">{_text(shown)}</{tag}>'


def _jsonable(value: Any) -> Any:
    """``value`` with non-finite floats spelled ``"inf"``, ``"-inf"``, ``"nan"`` (valid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _metrics_section(columns: Sequence[ColumnComparison], linked: bool) -> str:
    names = ["jensen_shannon", "variance_variation"] + (["relative_error"] if linked else [])
    head = "".join(f"<th>{_text(_METRIC_TITLES[n])}</th>" for n in names)
    rows = []
    for column in columns:
        cells = "".join(_number_cell(column.metrics.get(n)) for n in names)
        rows.append(
            f'<tr data-column="{_text(column.name)}"><td>{_text(column.name)}</td>{cells}</tr>'
        )
    linkage = (
        "--linked: row i of the release is taken to be the release of row i of the original, so "
        "the relative error (record-linked: docs/design.md#relative-error) is shown too."
        if linked
        else "Only order-free metrics are computed from the two files: releases shuffle their "
        "rows (ir-dp shuffles each column on its own), so row i of the release is not the "
        "release of row i of the original and a record-linked metric such as the relative "
        "error would be meaningless. Pass --linked when the rows are linked (e.g. laplace "
        "with --unprotected keep)."
    )
    return (
        '<section id="metrics"><h2>Utility metrics</h2>'
        f'<table class="metrics"><tr><th>column</th>{head}</tr>{"".join(rows)}</table>'
        '<p class="note">Computed with dpfast.metrics: Jensen-Shannon divergence (base 2, 0 = '
        "same distribution, 1 = disjoint) over 100 bins of the public domain, or one bin per "
        "value for integer columns with at most 1000 values and for categories; variance "
        "variation |S² - S'²| / S² (numeric columns). "
        f"{_text(linkage)}</p></section>"
    )


def _summary_table(column: ColumnComparison) -> str:
    labels = ["count", "mean", "sd"] + [label for label, _ in QUANTILES]
    head = "".join(f"<th>{_text(label)}</th>" for label in labels)
    rows = []
    for which in ("original", "released"):
        stats = column.summary[which]
        cells = "".join(_number_cell(stats[label], whole=label == "count") for label in labels)
        rows.append(f'<tr data-table="{which}"><td>{which}</td>{cells}</tr>')
    return f'<table class="summary"><tr><th></th>{head}</tr>{"".join(rows)}</table>'


def _column_section(column: ColumnComparison) -> str:
    png = base64.b64encode(column_png(column)).decode("ascii")
    kind = "bar chart of category shares" if column.kind == "categorical" else "histogram"
    alt = f"{kind} of {column.name}: original against released"
    parts = [
        f'<section class="column" data-column="{_text(column.name)}" data-kind="{column.kind}">',
        f"<h3>{_text(column.name)} <small>({_text(column.kind)})</small></h3>",
        f'<figure><img class="plot" data-column="{_text(column.name)}" data-plot="{kind}" '
        f'alt="{_text(alt)}" src="data:image/png;base64,{png}"></figure>',
    ]
    if column.kind == "numeric":
        parts.append(_summary_table(column))
        domain = (
            f"public domain [{rounded(column.bounds[0], 6)}, {rounded(column.bounds[1], 6)}]"
            if column.bounds is not None
            else "no public bounds in the schema: the plot spans the values of both tables"
        )
        parts.append(f'<p class="note">{_text(domain)}; sd is the population one (ddof=0).</p>')
    parts.append("</section>")
    return "".join(parts)


def _missing(what: str, where: str | None) -> str:
    place = f" (looked for {where})" if where else ""
    return f'<p class="missing">{_text(what)} not found{_text(place)}: this section needs it.</p>'


def _noise_section(
    columns: Sequence[ColumnComparison], public: Mapping[str, Any] | None, where: str | None
) -> str:
    title = '<section id="noise"><h2>Noise scale against the domain</h2>'
    if public is None:
        return title + _missing("The public report", where) + "</section>"
    head = (
        "<tr><th>column</th><th>step</th><th>epsilon</th><th>sensitivity</th>"
        "<th>noise scale</th><th>domain</th><th>noise scale / domain width</th></tr>"
    )
    rows = []
    for column in columns:
        for row in noise_rows(column.name, public.get("ledger"), column.bounds, column.taxonomy):
            if "domain_width" in row:
                domain = _number_cell(row["domain_width"])
            elif "categories" in row:
                domain = f'<td data-value="{row["categories"]}">{row["categories"]} categories</td>'
            else:
                domain = "<td>—</td>"
            rows.append(
                f'<tr data-column="{_text(column.name)}"><td>{_text(column.name)}</td>'
                f"<td>{_text(row['step'])}</td>{_number_cell(row['epsilon'])}"
                f"{_number_cell(row['sensitivity'])}{_number_cell(row['noise_scale'])}"
                f"{domain}{_number_cell(row.get('scale_over_width'))}</tr>"
            )
    body = (
        f"<table>{head}{''.join(rows)}</table>"
        if rows
        else "<p>The ledger has no entry for these columns.</p>"
    )
    return (
        title
        + body
        + "<p class=\"note\">From the public report's ledger. A numeric column's noise scale "
        "is in the column's units: near or above half the domain width the released values "
        "are mostly noise. A categorical column's scale is the exponential mechanism's "
        "(Pr[c] ∝ exp(q(c) / scale)), not comparable with its number of categories.</p></section>"
    )


def _count_cell(value: float | None, rows: int) -> str:
    """Return a cell showing a count and its share of ``rows``; both exactly in attributes."""
    if value is None:
        return "<td>—</td>"
    share = value / rows if rows > 0 else math.nan
    shown = f"{count(value)} ({percent(share)})" if rows > 0 else count(value)
    return (
        f'<td data-value="{_text(repr(float(value)))}" data-share="{_text(repr(share))}">'
        f"{_text(shown)}</td>"
    )


def _clamped_section(
    columns: Sequence[ColumnComparison], private: Mapping[str, Any] | None, where: str | None
) -> str:
    title = '<section id="clamped"><h2>Clamped values</h2>'
    parts = []
    if private is None:
        parts.append(_missing("The private report", where))
        clamped: dict[str, float] = {}
        clamped_output: dict[str, float] = {}
    else:
        clamped = per_column(private.get("clamped") or {})
        clamped_output = per_column(private.get("clamped_output") or {})
    head = (
        "<tr><th>column</th><th>input values clamped (private report)</th>"
        "<th>released values on a bound (private report)</th>"
        "<th>original below the lower bound</th><th>original above the upper bound</th></tr>"
    )
    rows = []
    for column in columns:
        below, above = column.outside.get("original", (None, None))
        n_original, n_released = column.original.shape[0], column.released.shape[0]
        rows.append(
            f'<tr data-column="{_text(column.name)}"><td>{_text(column.name)}</td>'
            f"{_count_cell(clamped.get(column.name), n_original)}"
            f"{_count_cell(clamped_output.get(column.name), n_released)}"
            f"{_count_cell(None if below is None else float(below), n_original)}"
            f"{_count_cell(None if above is None else float(above), n_original)}</tr>"
        )
    parts.append(f'<table class="clamped">{head}{"".join(rows)}</table>')
    parts.append(
        '<p class="note">Each cell: how many values, and their share of the rows (of the '
        "original for input values, of the release for released ones). Input values clamped: "
        "original values moved onto the public bounds before the noise. Released values on a "
        "bound: released values that the noise pushed past a bound and that were put back on "
        "it. The last two columns count, in the original file, the values outside the "
        "schema's bounds (numeric columns).</p>"
    )
    return title + "".join(parts) + "</section>"


def _release_metrics_section(private: Mapping[str, Any] | None) -> str:
    title = '<section id="release-metrics"><h2>Metrics computed inside the release</h2>'
    stored = None if private is None else private.get("metrics")
    if not isinstance(stored, Mapping):
        reason = "No private report" if private is None else "The private report holds no metrics"
        return (
            title + f"<p>{reason}: the release was made without {option('metrics', True)}, so "
            "there are no record-linked figures from inside it.</p></section>"
        )
    names = [
        n
        for n in ("relative_error", "jensen_shannon", "variance_variation")
        if isinstance(stored.get(n), Mapping)
    ]
    values = {n: per_column(stored[n]) for n in names}
    columns = sorted({c for n in names for c in values[n]})
    head = "".join(f"<th>{_text(_METRIC_TITLES.get(n, n))}</th>" for n in names)
    rows = [
        f'<tr data-column="{_text(c)}"><td>{_text(c)}</td>'
        + "".join(_number_cell(values[n].get(c)) for n in names)
        + "</tr>"
        for c in columns
    ]
    return (
        title
        + f'<table class="release-metrics"><tr><th>column</th>{head}</tr>{"".join(rows)}</table>'
        '<p class="note">From the private report: the release matched each released row to '
        "its original through its own shuffle, so these relative errors are record-linked.</p>"
        "</section>"
    )


def _value(found: Any, *keys: str) -> float | None:
    for key in keys:
        if not isinstance(found, Mapping):
            return None
        found = found.get(key)
    return float(found) if isinstance(found, (int, float)) and not isinstance(found, bool) else None


def _risk_section(found: Mapping[str, Any]) -> str:
    rows = [
        ("record linkage, distance-based", ("record_linkage", "distance")),
        ("record linkage, rank-based", ("record_linkage", "rank")),
        ("interval disclosure, rank-based (mean)", ("interval_disclosure", "rank_mean")),
        ("interval disclosure, value-based (mean)", ("interval_disclosure", "value_mean")),
        ("original: share in classes below k", ("uniqueness", "original", "share_below_k")),
        ("release: share in classes below k", ("uniqueness", "released", "share_below_k")),
        ("original: sample uniques", ("uniqueness", "original", "sample_uniques")),
        ("release: sample uniques", ("uniqueness", "released", "sample_uniques")),
    ]
    cells = "".join(
        f'<tr data-measure="{_text(".".join(keys))}"><td>{_text(title)}</td>'
        f"{_number_cell(_value(found, *keys))}</tr>"
        for title, keys in rows
    )
    missing = "".join(
        f"<li>{_text(measure)}: {_text(why)}</li>"
        for measure, why in (found.get("not_measured") or {}).items()
    )
    return (
        '<section id="risk"><h2>Disclosure risk</h2>'
        f'<table class="risk"><tr><th>measure</th><th>value</th></tr>{cells}</table>'
        f"<p>Row-paired measures: {_text(found.get('source', ''))}.</p>"
        + (f'<p class="missing">Not measured:</p><ul>{missing}</ul>' if missing else "")
        + '<p class="note">Computed with dpfast.risk (docs/risk.md): the share of released '
        "records an intruder who knows every compared attribute links to their own source "
        "(record linkage), the share of released values whose ±10% interval holds the "
        "original (interval disclosure), and the k-anonymity of the quasi-identifiers "
        "(uniqueness). Lower is safer. Like every number here, they come from the original "
        "data: never publish them.</p></section>"
    )


def _data_block(
    columns: Sequence[ColumnComparison],
    public: Mapping[str, Any] | None,
    private: Mapping[str, Any] | None,
    risk: Mapping[str, Any] | None = None,
    verdict: Mapping[str, Any] | None = None,
) -> str:
    data = {
        "banner": BANNER,
        "verdict": verdict,
        "method": None if public is None else public.get("method"),
        "columns": {
            column.name: {
                "kind": column.kind,
                "metrics": column.metrics,
                "summary": column.summary,
                "original_outside_bounds": list(column.outside.get("original", ())),
                "noise": (
                    noise_rows(column.name, public.get("ledger"), column.bounds, column.taxonomy)
                    if public is not None
                    else None
                ),
            }
            for column in columns
        },
        "clamped": None if private is None else private.get("clamped"),
        "clamped_output": None if private is None else private.get("clamped_output"),
        "release_metrics": None if private is None else private.get("metrics"),
        "risk": risk,
    }
    text = json.dumps(_jsonable(data), allow_nan=False, sort_keys=True)
    # "<" escaped so that no string can close the script element
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="dpfast-compare">{text}</script>'


def render_page(
    columns: Sequence[ColumnComparison],
    *,
    public: Mapping[str, Any] | None,
    private: Mapping[str, Any] | None,
    sources: Mapping[str, str],
    linked: bool,
    risk: Mapping[str, Any] | None = None,
) -> str:
    """Return the whole HTML page: its verdict first, then the tables, then the plots."""
    found = {"public report": public is not None, "private report": private is not None}
    rows = (columns[0].original.shape[0], columns[0].released.shape[0]) if columns else (0, 0)
    verdict = comparison_verdict(public, private, {c.name: c.metrics for c in columns}, risk, rows)
    files = "".join(
        f"<li>{_text(role)}: <code>{_text(path)}</code>"
        f"{'' if found.get(role, True) else ' (not found)'}</li>"
        for role, path in sources.items()
    )
    method = "" if public is None else f" Release method: {public.get('method')}."
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            "<title>PRIVATE: dpfast comparison of the original and the release</title>",
            f"<style>{_STYLE}</style></head><body>",
            f'<div class="private-banner" role="alert">{_text(BANNER)}</div>',
            "<h1>Original against release</h1>",
            '<section id="verdict"><h2>Verdict</h2>',
            f'<p class="verdict">{_text(verdict["text"])}</p></section>',
            f"<p>{_text(method)} Files compared:</p><ul>{files}</ul>",
            _metrics_section(columns, linked),
            _clamped_section(columns, private, sources.get("private report")),
            _noise_section(columns, public, sources.get("public report")),
            "" if risk is None else _risk_section(risk),
            _release_metrics_section(private),
            '<section id="columns"><h2>Columns</h2>',
            "".join(_column_section(column) for column in columns),
            "</section>",
            _data_block(columns, public, private, risk, verdict),
            "</body></html>\n",
        ]
    )
