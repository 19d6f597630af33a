"""Every applicable risk measure of a row-aligned release, as one JSON-ready dict."""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from dpfast._validation import check_threads, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.risk._common import (
    Pair,
    check_taxonomies,
    dpfast_errors,
    is_numeric,
    json_name,
    numeric_values,
    paired,
)
from dpfast.risk._interval import check_percent, rank_interval_hits, value_interval_hits
from dpfast.risk._linkage import linkage_inputs, linkage_scores
from dpfast.risk._neighbourhood import check_width, neighbourhood_counts
from dpfast.risk._uniqueness import uniqueness
from dpfast.taxonomy import Taxonomy


def share(values: np.ndarray) -> float:
    return float(np.mean(values))


def interval_section(pair: Any, numeric: list[Hashable], p: float) -> dict[str, Any]:
    section: dict[str, Any] = {"p": p, "rank": {}, "value": {}}
    for name in numeric:
        x = numeric_values(pair.original, name, "original", "")
        y = numeric_values(pair.released, name, "released", "")
        section["rank"][json_name(name)] = share(rank_interval_hits(x, y, p))
        section["value"][json_name(name)] = share(value_interval_hits(x, y, p))
    for method in ("rank", "value"):
        shares = section[method].values()
        section[f"{method}_mean"] = float(np.mean(list(shares))) if shares else None
    return section


def linkage_section(
    pair: Pair, taxonomies: Mapping[Hashable, Taxonomy], n_threads: int
) -> dict[str, float]:
    """``{"distance": rate, "rank": rate}`` of a row-aligned pair."""
    return {
        method: float(
            np.mean(linkage_scores(linkage_inputs(pair, taxonomies, method == "rank"), n_threads))
        )
        for method in ("distance", "rank")
    }


def uniqueness_section(
    original: Any, released: Any, quasi_identifiers: Any, k: int
) -> dict[str, Any]:
    """``{"original": ..., "released": ...}``: :meth:`Uniqueness.as_dict` of each table."""
    return {
        "original": uniqueness(original, quasi_identifiers, k=k).as_dict(),
        "released": uniqueness(released, quasi_identifiers, k=k).as_dict(),
    }


def neighbourhood_section(
    original: Any, released: Any, widths: Mapping[Hashable, float], k: int | None
) -> dict[str, Any]:
    """``{column: NeighbourhoodCounts.as_dict()}`` for each column given a width."""
    return {
        json_name(name): neighbourhood_counts(original, released, name, width=value, k=k).as_dict()
        for name, value in widths.items()
    }


def widths_of(width: Any, numeric: list[Hashable]) -> dict[Hashable, float]:
    if width is None:
        return {}
    if isinstance(width, Mapping):
        unknown = [name for name in width if name not in numeric]
        if unknown:
            raise DPFastValueError(
                f"width names column(s) {quoted(unknown)} that are not numeric columns "
                f"compared here; they are {quoted(list(numeric))}"
            )
        return {name: check_width(value) for name, value in width.items()}
    value = check_width(width)
    return {name: value for name in numeric}


def _selected(pair: Any, columns: Any, taxonomies: Mapping[Hashable, Any]) -> dict[str, str]:
    """Text columns without a taxonomy, left out when ``columns`` is None: {name: why}."""
    if columns is not None:
        return {}
    skipped = {}
    for name in pair.names:
        if name not in taxonomies and not is_numeric(pair.released, name):
            skipped[json_name(name)] = "not numeric and no taxonomy (no distance)"
    return skipped


def risk_summary(
    original: Any,
    released: Any,
    *,
    columns: Any = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    quasi_identifiers: Any = None,
    k: int | None = None,
    p: float = 10.0,
    width: float | Mapping[Hashable, float] | None = None,
    n_threads: int | None = None,
) -> dict[str, Any]:
    """All applicable risk measures of a row-aligned release, as a JSON-ready dict.

    For the data holder only: the measures read the original data and must not be
    published with the release. Output keys (docs/risk.md#risk-summary):

    - ``"n_records"``: rows of each table;
    - ``"columns"``: the compared columns; ``"skipped_columns"``: ``{column: reason}``,
      the text columns without a taxonomy left out when ``columns`` is None;
    - ``"record_linkage"``: ``{"distance": share, "rank": share}``
      (:func:`record_linkage`);
    - ``"interval_disclosure"``: ``{"p": p, "rank": {column: share}, "value": {column:
      share}, "rank_mean": ..., "value_mean": ...}`` over the numeric columns
      (:func:`interval_disclosure`; means None without numeric columns);
    - ``"uniqueness"``: ``{"original": {...}, "released": {...}}``
      (:meth:`Uniqueness.as_dict`), or None without ``quasi_identifiers``;
    - ``"neighbourhood"``: ``{column: {...}}`` (:meth:`NeighbourhoodCounts.as_dict`), or
      None without ``width``.

    Column names become strings; an undefined value is None (never NaN).

    Parameters
    ----------
    original, released : table
        Row-aligned tables, or a :class:`dpfast.Release` that keeps the row order.
    columns : list, optional
        Compared columns; default: the release's numeric columns and those with a taxonomy.
    taxonomies : mapping, optional
        ``{column: Taxonomy}`` for text columns.
    quasi_identifiers : list, optional
        Columns for :func:`uniqueness`, checked on both tables (needs ``k``).
    k : int, optional
        Class size for the uniqueness and neighbourhood shares.
    p : float
        Interval half-width in percent.
    width : float or mapping, optional
        Neighbourhood half-width: one for every numeric column, or ``{column: width}``.
    n_threads : int, optional
        Threads of the record linkage searches.

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        As the measures do; ``quasi_identifiers`` without ``k``; no column to compare.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfast import risk
    >>> x = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    >>> got = risk.risk_summary(x, x + 0.1, quasi_identifiers=[0], k=2, width=1.0)
    >>> got["record_linkage"], got["uniqueness"]["released"]["sample_uniques"]
    ({'distance': 1.0, 'rank': 1.0}, 4)
    """
    p = check_percent(p)
    with dpfast_errors():
        threads = check_threads(n_threads, os.cpu_count() or 1)
    if quasi_identifiers is not None and k is None:
        raise DPFastValueError("quasi_identifiers needs k= (the class size to check), got k=None")
    pair = paired(original, released, columns, "risk_summary")
    checked = check_taxonomies(taxonomies, pair)
    skipped = _selected(pair, columns, checked)
    names = [name for name in pair.names if json_name(name) not in skipped]
    if not names:
        raise DPFastValueError(
            f"no column to compare: {skipped}; pass taxonomies= for the text columns"
        )
    pair = paired(original, released, names, "risk_summary")
    numeric = [name for name in names if name not in checked]
    linkage = linkage_section(pair, checked, threads)
    summary: dict[str, Any] = {
        "n_records": pair.n_records,
        "columns": [json_name(name) for name in names],
        "skipped_columns": skipped,
        "record_linkage": linkage,
        "interval_disclosure": interval_section(pair, numeric, p),
        "uniqueness": None,
        "neighbourhood": None,
    }
    if quasi_identifiers is not None:
        assert k is not None
        summary["uniqueness"] = uniqueness_section(original, released, quasi_identifiers, k)
    widths = widths_of(width, numeric)
    if widths:
        summary["neighbourhood"] = neighbourhood_section(original, released, widths, k)
    ready: dict[str, Any] = json_ready(summary)
    return ready


def json_ready(value: Any) -> Any:
    """Replace NaN by None, recursively."""
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
