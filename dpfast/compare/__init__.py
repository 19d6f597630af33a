"""Compare an original table with its release on one private HTML page (``dpfast compare``).

The page is for the data holder only: it is computed from the original data. It opens
with a verdict (is the release DP, at what ε; its utility, its values on a bound, its
risk), then shows the order-free utility metrics of :mod:`dpfast.metrics`, the clamping
counts of the private report with their shares of the rows, the noise scale of the public
report's ledger against the column's public domain, and per column the original against
the release (histograms, or bar charts of categories).
See docs/metrics.md#comparing-a-release-with-its-original.

matplotlib (the ``plots`` extra: ``pip install 'dpfast[plots]'``) draws the plots.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from dpfast._validation import option
from dpfast.compare._columns import chosen_columns, compare_column
from dpfast.compare._evaluation import (
    Candidate,
    Evaluation,
    Settings,
    check_releases,
    evaluate,
    measure_risk,
)
from dpfast.compare._map import RISK_MEASURES, UTILITY_MEASURES, map_points
from dpfast.compare._page import BANNER, render_page
from dpfast.compare._plots import INSTALL_HINT, require_matplotlib
from dpfast.exceptions import DPFastValueError
from dpfast.io import as_table_data
from dpfast.schema import Schema

__all__ = [
    "BANNER",
    "INSTALL_HINT",
    "MICRODATA_METHODS",
    "RISK_MEASURES",
    "UTILITY_MEASURES",
    "Candidate",
    "Evaluation",
    "check_releases",
    "compare_html",
    "evaluate",
    "map_points",
    "page_verdict",
    "require_matplotlib",
]

#: Release methods whose output is microdata (one row per record), which compare accepts.
MICRODATA_METHODS = (
    "ir_dp",
    "laplace_dp",
    "individual_ranking",
    "mdav",
    "mdav_dp",
    "k_noise",
    "k_pram",
    "randomized_response",
)


def _check_method(public_report: Mapping[str, Any] | None) -> None:
    method = None if public_report is None else public_report.get("method")
    if method == "diffgen":
        raise DPFastValueError(
            "the release is a DiffGen release (a generalized count table, not microdata); "
            "compare supports microdata releases (ir-dp, laplace, mdav-dp, ...) only"
        )


def _risk(
    tables: tuple[Any, Any],
    schema: Schema,
    chosen: list[str],
    reports: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None],
    uniqueness: tuple[Sequence[str] | None, int | None],
    linked: bool,
) -> dict[str, Any]:
    """Measure the page's risk section: row-paired measures when ``linked``.

    Otherwise they come from the private report (``risk=True``), if it has them; the
    uniqueness of the quasi-identifiers is measured in both tables either way.
    """
    original, released = tables
    quasi_identifiers, k = uniqueness
    if quasi_identifiers is not None and k is None:
        raise DPFastValueError(f"{option('quasi_identifiers')} needs {option('k')}")
    settings = Settings(
        schema,
        chosen,
        None if quasi_identifiers is None else list(quasi_identifiers),
        k,
        10.0,
        None,
    )
    why = (
        "row i of the release is taken to be the release of row i of the original (--linked)"
        if linked
        else "the rows are not linked (pass --linked when they are)"
    )
    candidate = Candidate("release", released.source, reports[0], reports[1])
    return measure_risk(candidate, original, settings, (linked, why))


def compare_html(
    original: Any,
    released: Any,
    *,
    schema: Schema | str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    public_report: Mapping[str, Any] | None = None,
    private_report: Mapping[str, Any] | None = None,
    linked: bool = False,
    sources: Mapping[str, str] | None = None,
    quasi_identifiers: Sequence[str] | None = None,
    k: int | None = None,
) -> str:
    """Return a self-contained HTML page comparing ``original`` with its release.

    The page is PRIVATE: it is computed from the original data and says so in its title
    and in a banner. Its verdict comes first: whether the release is differentially
    private and at what ε (from ``public_report``), its utility, its values on a bound and
    its risk, in one paragraph. Plots are inline PNGs; nothing is loaded from elsewhere.
    Numbers are shown rounded to 3 significant digits (counts exactly)
    and given exactly in ``data-value`` attributes and in the JSON block
    ``<script type="application/json" id="dpfast-compare">`` (its ``"verdict"`` holds the
    paragraph).

    Parameters
    ----------
    original, released : table
        pandas, Arrow or polars tables (anything :func:`dpfast.io.as_table_data` takes).
    schema : Schema or path
        The schema the release used: declared types, public bounds and taxonomies.
    columns : list of str, optional
        The columns to compare (default: the schema's protected columns that ``released``
        has).
    public_report, private_report : mapping, optional
        The release's reports as parsed JSON (``Report.to_dict()`` and
        ``PrivateReport.to_dict()``). Without them the sections that need them say so.
    linked : bool
        Row ``i`` of ``released`` is the release of row ``i`` of ``original`` (e.g. laplace
        with ``unprotected="keep"``): the record-linked relative error is added. Leave it
        False for releases that shuffle rows (the default of most methods): only the
        order-free metrics (Jensen-Shannon divergence, variance variation) are computed.
    sources : mapping, optional
        ``{role: path}`` of the files read (``"original"``, ``"released"``,
        ``"public report"``, ``"private report"``), listed on the page.
    quasi_identifiers : list of str, optional
        Columns for the risk section's uniqueness of both tables (needs ``k``).
    k : int, optional
        The class size the uniqueness checks.

    Returns
    -------
    str
        The HTML document.

    Raises
    ------
    ImportError
        matplotlib is not installed (``pip install 'dpfast[plots]'``).
    ValueError
        A DiffGen release (not microdata), a column missing from a table or not declared,
        missing or non-numeric values in a numeric column, or ``linked`` with tables of
        different lengths.

    Examples
    --------
    >>> import pandas as pd
    >>> schema = Schema.from_dict({"columns": {"age": {"type": "integer", "bounds": [0, 100]}}})
    >>> page = compare_html(pd.DataFrame({"age": [20, 30, 40]}),
    ...                     pd.DataFrame({"age": [22, 31, 35]}), schema=schema)
    >>> page.startswith("<!DOCTYPE html>") and "PRIVATE" in page
    True
    """
    _check_method(public_report)
    require_matplotlib()
    if not isinstance(schema, Schema):
        schema = Schema.from_json(schema)
    original_table, released_table = as_table_data(original), as_table_data(released)
    if linked and original_table.n_rows != released_table.n_rows:
        raise DPFastValueError(
            f"linked comparison needs one released row per original row, but the original "
            f"has {original_table.n_rows} rows and the release {released_table.n_rows}; "
            "leave out --linked (the rows are not linked)"
        )
    if original_table.n_rows == 0 or released_table.n_rows == 0:
        raise DPFastValueError("a table is empty (0 rows); there is nothing to compare")
    chosen = chosen_columns(schema, columns, original_table, released_table)
    compared = [
        compare_column(name, schema, original_table, released_table, linked=linked)
        for name in chosen
    ]
    found_risk = _risk(
        (original_table, released_table),
        schema,
        chosen,
        (public_report, private_report),
        (quasi_identifiers, k),
        linked,
    )
    return render_page(
        compared,
        risk=found_risk,
        public=public_report,
        private=private_report,
        sources=dict(sources or {}),
        linked=linked,
    )


def page_verdict(page: str) -> str:
    """Return the verdict paragraph of a page of :func:`compare_html` or ``Evaluation.to_html``.

    It is read from the page's JSON block (``"verdict"``), as the page shows it first.

    Raises
    ------
    ValueError
        ``page`` is not such a page.

    Examples
    --------
    >>> import pandas as pd
    >>> schema = Schema.from_dict({"columns": {"age": {"type": "integer", "bounds": [0, 100]}}})
    >>> page = compare_html(pd.DataFrame({"age": [20, 30, 40]}),
    ...                     pd.DataFrame({"age": [22, 31, 35]}), schema=schema)
    >>> page_verdict(page)[:58]
    'Whether this release is differentially private is unknown:'
    """
    for block in ("dpfast-compare", "dpfast-evaluation"):
        opening = f'<script type="application/json" id="{block}">'
        if opening in page:
            data = json.loads(page.split(opening, 1)[1].split("</script>", 1)[0])
            verdict = data.get("verdict") if isinstance(data, dict) else None
            if isinstance(verdict, dict) and isinstance(verdict.get("text"), str):
                return str(verdict["text"])
    raise DPFastValueError(
        "the page holds no verdict: give a page that compare_html or Evaluation.to_html wrote"
    )
