"""The evaluation page: its verdict, the risk-utility map (inline SVG), the releases.

The verdict comes first, below the PRIVATE banner and the title. Every measured number is
printed rounded to 3 significant digits (counts exactly) and carried exactly in a
``data-value`` attribute and in the JSON block ``<script type="application/json"
id="dpfast-evaluation">``; every data-derived string goes through :func:`html.escape`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dpfast.compare._format import count, rounded
from dpfast.compare._page import _STYLE, BANNER, _number_cell, _text
from dpfast.compare._rumap import SHAPES, ru_map_svg
from dpfast.compare._verdict import guarantee_words

_UTILITY = (
    ("mean_relative_error", "mean relative error"),
    ("mean_jensen_shannon", "mean Jensen-Shannon divergence"),
    ("mean_variance_variation", "mean variance variation"),
    ("correlation_error", "correlation error"),
)

_READING = (
    "How to read the map (Duncan's R-U confidentiality map): each release is one point, its "
    "information loss along the bottom (left: closer to the original) and its disclosure "
    "risk up the side (bottom: safer). Lower left is better on both. A point's shape says "
    "what its public report guarantees: a circle, differential privacy (proven); a "
    "triangle, DP of part of the table only; a square, no DP; a diamond, no public report. "
    "A hollow point is dominated: another release loses no more and risks no more, and is "
    "better on one, so it is never the better choice; the filled points are the frontier "
    "among which the choice is a trade-off. A label that does not fit beside its point is "
    "replaced by its number in the table below the map. Risk figures are worst cases for "
    "their intruder (one who knows every compared attribute of every person); a "
    "differentially private release has a guarantee beyond them, an SDC release only them. "
    "Compare releases of the same table on the same columns only."
)


def _number(value: Any) -> float | None:
    """Return a JSON number (or a non-finite float spelled as text) as a float, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("inf", "-inf", "nan"):
        return float(value)
    return None


def _cell(value: Any) -> str:
    return _number_cell(_number(value))


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _shown(value: Any) -> str:
    number = _number(value)
    return str(value) if number is None else rounded(number)


def _parameters(release: Mapping[str, Any]) -> str:
    parameters = release.get("parameters") or {}
    shown = [f"{key}={_shown(parameters[key])}" for key in ("k", "epsilon") if key in parameters]
    method = release.get("method") or "unknown method (no public report)"
    return method + (f" ({', '.join(shown)})" if shown else "")


def _files_section(releases: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        f'<tr data-release="{_text(r["label"])}"><td>{_text(r["label"])}</td>'
        f"<td><code>{_text(r.get('path') or '')}</code></td><td>{_text(_parameters(r))}</td>"
        f'<td data-value="{r["rows"]}">{count(r["rows"])}</td>'
        f'<td data-aligned="{str(r["aligned"]).lower()}">'
        f"{'row-aligned' if r['aligned'] else 'NOT row-aligned'}: {_text(r['alignment'])}</td>"
        "</tr>"
        for r in releases
    ]
    return (
        '<section id="releases"><h2>Releases</h2><table class="releases"><tr><th>label</th>'
        "<th>file</th><th>method</th><th>rows</th><th>row i from row i of ORIGINAL?</th></tr>"
        f"{''.join(rows)}</table></section>"
    )


#: The shape of each kind of point, as a character: (filled, hollow).
_SYMBOLS = {
    "circle": ("●", "○"),
    "triangle": ("▲", "△"),
    "square": ("■", "□"),
    "diamond": ("◆", "◇"),
}


def _points_table(found: Mapping[str, Any], releases: Sequence[Mapping[str, Any]]) -> str:
    """Return the map's points by number: marker, label, guarantee, measures, frontier."""
    by_label = {r["label"]: r for r in releases}
    rows = []
    for point in found["points"]:
        release = by_label.get(point["label"], {})
        shape = SHAPES.get(point.get("kind", "unknown"), SHAPES["unknown"])[0]
        symbol = _SYMBOLS[shape][1 if point.get("dominated") else 0]
        words = guarantee_words(
            release.get("method"), release.get("epsilon"), release.get("guarantee_level")
        )
        rows.append(
            f'<tr data-release="{_text(point["label"])}" data-kind="{_text(point["kind"])}">'
            f"<td>{point['number']}</td><td>{symbol}</td><td>{_text(point['label'])}</td>"
            f"<td>{_text(words)}</td>{_cell(point['utility'])}{_cell(point['risk'])}"
            f"<td>{'dominated' if point.get('dominated') else 'frontier'}</td></tr>"
        )
    return (
        '<table class="points"><tr><th>#</th><th>marker</th><th>release</th>'
        f"<th>guarantee</th><th>{_text(found['utility_title'])}</th>"
        f"<th>{_text(found['risk_title'])}</th><th>on the map</th></tr>{''.join(rows)}</table>"
    )


def _map_section(found: Mapping[str, Any], releases: Sequence[Mapping[str, Any]]) -> str:
    points = found["points"]
    title = '<section id="ru-map"><h2>Risk-utility map</h2>'
    if points:
        drawn = ru_map_svg(
            points, risk_title=found["risk_title"], utility_title=found["utility_title"]
        ) + _points_table(found, releases)
    else:
        drawn = "<p>No release has both measures: there is nothing to place on the map.</p>"
    left_out = "".join(
        f'<li data-release="{_text(label)}">{_text(label)}: {_text(why)}</li>'
        for label, why in found["left_out"].items()
    )
    missing = f'<p class="missing">Not on the map:</p><ul>{left_out}</ul>' if left_out else ""
    return (
        f'{title}<figure>{drawn}</figure>{missing}<p class="note">{_text(_READING)}</p></section>'
    )


def _risk_cells(release: Mapping[str, Any]) -> str:
    found = release["risk"]
    neighbourhood = found.get("neighbourhood")
    smallest = None
    if isinstance(neighbourhood, Mapping) and neighbourhood:
        smallest = min(_number(column.get("minimum")) or 0.0 for column in neighbourhood.values())
    values = [
        _dig(found, "record_linkage", "distance"),
        _dig(found, "record_linkage", "rank"),
        _dig(found, "interval_disclosure", "rank_mean"),
        _dig(found, "interval_disclosure", "value_mean"),
        _dig(found, "uniqueness", "released", "share_below_k"),
        _dig(found, "uniqueness", "released", "sample_uniques"),
        smallest,
    ]
    return "".join(_cell(value) for value in values)


def _side_by_side(releases: Sequence[Mapping[str, Any]]) -> str:
    utility_head = "".join(f"<th>{_text(title)}</th>" for _, title in _UTILITY)
    risk_head = (
        "<th>record linkage (distance)</th><th>record linkage (rank)</th>"
        "<th>interval disclosure (rank, mean)</th><th>interval disclosure (value, mean)</th>"
        "<th>share below k</th><th>sample uniques</th><th>smallest neighbourhood count</th>"
    )
    rows = []
    for release in releases:
        utility = "".join(_cell(release["utility"].get(key)) for key, _ in _UTILITY)
        rows.append(
            f'<tr data-release="{_text(release["label"])}"><td>{_text(release["label"])}</td>'
            f"{utility}{_risk_cells(release)}</tr>"
        )
    return (
        '<section id="side-by-side"><h2>Utility and risk side by side</h2>'
        '<table class="side-by-side"><tr><th rowspan="2">release</th>'
        f'<th colspan="{len(_UTILITY)}">utility: information loss (lower: more utility)</th>'
        '<th colspan="7">disclosure risk (lower: safer)</th></tr>'
        f"<tr>{utility_head}{risk_head}</tr>{''.join(rows)}</table>"
        '<p class="note">— means not measured: each release\'s section below says why.</p>'
        "</section>"
    )


def _column_rows(release: Mapping[str, Any]) -> str:
    found = release["risk"]
    rows = []
    for name, values in release["utility"]["columns"].items():
        cells = [
            values.get("jensen_shannon"),
            values.get("variance_variation"),
            values.get("relative_error"),
            _dig(found, "interval_disclosure", "rank", name),
            _dig(found, "interval_disclosure", "value", name),
            _dig(found, "neighbourhood", name, "minimum"),
            _dig(found, "neighbourhood", name, "median"),
        ]
        rows.append(
            f'<tr data-column="{_text(name)}"><td>{_text(name)}</td>'
            + "".join(_cell(value) for value in cells)
            + "</tr>"
        )
    return "".join(rows)


def _release_section(release: Mapping[str, Any]) -> str:
    found = release["risk"]
    head = (
        "<tr><th>column</th><th>Jensen-Shannon divergence</th><th>variance variation</th>"
        "<th>relative error</th><th>interval disclosure (rank)</th>"
        "<th>interval disclosure (value)</th><th>neighbourhood minimum</th>"
        "<th>neighbourhood median</th></tr>"
    )
    missing = {**release["utility"].get("not_measured", {}), **found.get("not_measured", {})}
    not_measured = "".join(
        f"<li>{_text(measure)}: {_text(why)}</li>" for measure, why in missing.items()
    )
    notes = "".join(f"<li>{_text(note)}</li>" for note in release["utility"]["notes"])
    return (
        f'<section class="release" data-release="{_text(release["label"])}">'
        f"<h3>{_text(release['label'])}</h3>"
        f'<table class="columns">{head}{_column_rows(release)}</table>'
        f"<p>Row-paired risk measures: {_text(found.get('source', ''))}.</p>"
        + (f"<p>Utility notes:</p><ul>{notes}</ul>" if notes else "")
        + (f"<p>Not measured:</p><ul>{not_measured}</ul>" if not_measured else "")
        + "</section>"
    )


def _data_block(content: Mapping[str, Any]) -> str:
    text = json.dumps(content, allow_nan=False, sort_keys=True)
    # "<" escaped so that no string can close the script element
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="dpfast-evaluation">{text}</script>'


def _settings_text(content: Mapping[str, Any]) -> str:
    original = content["original"]
    where = f" ({original['path']})" if original.get("path") else ""
    qis = content.get("quasi_identifiers")
    uniqueness = (
        f" Quasi-identifiers {', '.join(map(str, qis))}, class size k = {content['k']}."
        if qis
        else ""
    )
    return (
        f"ORIGINAL{where}: {count(original['rows'])} rows. Compared columns: "
        f"{', '.join(map(str, content['columns']))}. Interval disclosure at "
        f"±{rounded(content['p'])}%."
        f"{uniqueness}"
    )


def evaluation_page(content: Mapping[str, Any]) -> str:
    """Return the whole HTML page of an evaluation's content (``Evaluation.to_dict()``)."""
    releases = content["releases"]
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            "<title>PRIVATE: dpfast evaluation of releases: utility and disclosure risk</title>",
            f"<style>{_STYLE}</style></head><body>",
            f'<div class="private-banner" role="alert">{_text(BANNER)}</div>',
            "<h1>Releases of one table: utility and disclosure risk</h1>",
            '<section id="verdict"><h2>Verdict</h2>',
            f'<p class="verdict">{_text(content["verdict"]["text"])}</p></section>',
            _map_section(content["map"], releases),
            f"<p>{_text(_settings_text(content))}</p>",
            _files_section(releases),
            _side_by_side(releases),
            '<section id="details"><h2>Each release</h2>',
            "".join(_release_section(release) for release in releases),
            "</section>",
            _data_block(content),
            "</body></html>\n",
        ]
    )
