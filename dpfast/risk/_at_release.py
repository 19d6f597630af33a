"""Risk measured at release time (``risk=True``): each released row paired with its source.

A release that shuffles its rows has lost, in its output, which input row each released
row came from; the release itself still knows. The engine hands :func:`release_risk` the
released columns in the output's order and, per column, the input row each output row
came from; the measures then compare each released value with its own source
(docs/risk.md#risk-at-release-time).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpfast._validation import check_int, check_threads, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.risk._common import as_table, dpfast_errors, is_numeric, json_name, paired
from dpfast.risk._interval import check_percent
from dpfast.risk._neighbourhood import check_width
from dpfast.risk._summary import (
    interval_section,
    json_ready,
    linkage_section,
    neighbourhood_section,
    uniqueness_section,
    widths_of,
)
from dpfast.taxonomy import Taxonomy, as_taxonomy

#: The keys ``risk=`` takes as a dict.
RISK_KEYS = ("columns", "quasi_identifiers", "k", "p", "width", "taxonomies", "n_threads")

#: What the private report's risk section says of itself.
RISK_WARNING = (
    "computed on the original data: keep this report private, do not publish it with the release"
)


@dataclass(frozen=True)
class RiskOptions:
    """What a release measures with ``risk=``: checked once, before the release runs.

    Attributes
    ----------
    columns : list or None
        The compared columns (default: the release's protected columns that are numeric or
        have a taxonomy).
    quasi_identifiers : list or None
        Columns for :func:`uniqueness` of the original and of the release.
    k : int or None
        Class size of the uniqueness and neighbourhood shares (default: the method's own
        ``k``).
    p : float
        Interval half-width of the interval disclosure, in percent.
    width : float, dict or None
        Neighbourhood half-width: one for every numeric compared column, or ``{column:
        width}`` (default: none, but ``2δ`` per column for ``k_noise``).
    taxonomies : dict or None
        ``{column: taxonomy}`` for text columns, besides those the method used.
    n_threads : int or None
        Threads of the record-linkage searches.

    Examples
    --------
    >>> from dpfast.risk import RiskOptions
    >>> options = RiskOptions(quasi_identifiers=["age", "sex"], k=3)
    >>> options.p, options.columns
    (10.0, None)
    >>> options.check_names(["age", "sex", "income"])  # every named column exists
    """

    columns: list[Hashable] | None = None
    quasi_identifiers: list[Hashable] | None = None
    k: int | None = None
    p: float = 10.0
    width: float | dict[Hashable, float] | None = None
    taxonomies: dict[Hashable, Any] | None = None
    n_threads: int | None = None

    def check_names(self, names: Sequence[Hashable]) -> None:
        """Refuse a column the input does not have, naming the key that gives it."""
        given = {
            "columns": self.columns or [],
            "quasi_identifiers": self.quasi_identifiers or [],
            "width": list(self.width) if isinstance(self.width, dict) else [],
            "taxonomies": list(self.taxonomies or {}),
        }
        known = set(names)
        for key, listed in given.items():
            unknown = [name for name in listed if name not in known]
            if unknown:
                raise DPFastValueError(
                    f"risk['{key}'] names column(s) {quoted(unknown)} that the input does not "
                    f"have; its columns are {quoted(list(names))}"
                )


def _names(value: Any, key: str) -> list[Hashable]:
    """Return ``value`` as a non-empty list of distinct column names."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise DPFastTypeError(f"risk['{key}'] must be a list of column names, got {quoted(value)}")
    names = list(value)
    if not names:
        raise DPFastValueError(f"risk['{key}'] is empty; name at least one column, or leave it out")
    if len(set(names)) != len(names):
        raise DPFastValueError(f"risk['{key}'] lists a column twice: {quoted(names)}")
    return names


def _width(value: Any) -> float | dict[Hashable, float]:
    if isinstance(value, Mapping):
        return {name: check_width(width) for name, width in value.items()}
    return check_width(value)


def risk_options(risk: Any) -> RiskOptions | None:
    """Check a release's ``risk=``: False or None (no risk), True (the defaults), or a dict.

    The dict takes the keys of :data:`RISK_KEYS` (:class:`RiskOptions`); every value is
    checked here, before the release runs.

    Parameters
    ----------
    risk : bool, dict, RiskOptions or None
        A release's ``risk=`` argument. A dict may hold ``columns`` and
        ``quasi_identifiers`` (column names), ``k`` (int >= 1), ``p`` (percent, in
        ``[0, 100]``), ``width`` (a number >= 0, or ``{column: width}``), ``taxonomies``
        (``{column: taxonomy}``) and ``n_threads`` (int >= 1); a :class:`RiskOptions` is
        returned as it is.

    Returns
    -------
    RiskOptions or None
        None for ``None`` or ``False`` (nothing measured); the defaults for ``True``; else
        the checked options. Column names are checked against the input later
        (:meth:`RiskOptions.check_names`).

    Raises
    ------
    TypeError
        ``risk`` of another type, ``taxonomies`` that is not a mapping, ``columns`` or
        ``quasi_identifiers`` that is neither a name nor a list, or a value of the wrong
        type.
    ValueError
        An unknown key, an empty or repeated list of columns, ``k < 1``, ``p`` outside
        ``[0, 100]``, a negative or infinite ``width``, ``n_threads < 1`` (all also
        ``dpfast.exceptions.DPFastError``).

    Examples
    --------
    >>> from dpfast import risk
    >>> risk.risk_options(True)
    RiskOptions(columns=None, quasi_identifiers=None, k=None, p=10.0, width=None, \
taxonomies=None, n_threads=None)
    >>> risk.risk_options({"quasi_identifiers": ["age", "zip"], "k": 5}).k
    5
    """
    if risk is None or risk is False:
        return None
    if risk is True:
        return RiskOptions()
    if isinstance(risk, RiskOptions):
        return risk
    if not isinstance(risk, Mapping):
        raise DPFastTypeError(
            f"risk must be True, False or a dict with keys among {list(RISK_KEYS)}, got "
            f"{quoted(risk)}; e.g. risk={{'quasi_identifiers': ['age', 'zip'], 'k': 5}}"
        )
    unknown = [key for key in risk if key not in RISK_KEYS]
    if unknown:
        raise DPFastValueError(
            f"risk has unknown key(s) {quoted(unknown)}; the keys are {list(RISK_KEYS)} "
            "(docs/risk.md#risk-at-release-time)"
        )
    taxonomies = risk.get("taxonomies")
    if taxonomies is not None and not isinstance(taxonomies, Mapping):
        raise DPFastTypeError(
            f"risk['taxonomies'] must be a dict {{column: taxonomy}}, got {quoted(taxonomies)}"
        )
    with dpfast_errors():
        k = risk.get("k")
        threads = risk.get("n_threads")
        return RiskOptions(
            columns=None if risk.get("columns") is None else _names(risk["columns"], "columns"),
            quasi_identifiers=None
            if risk.get("quasi_identifiers") is None
            else _names(risk["quasi_identifiers"], "quasi_identifiers"),
            k=None if k is None else check_int(k, "risk['k']", low=1),
            p=check_percent(risk.get("p", 10.0)),
            width=None if risk.get("width") is None else _width(risk["width"]),
            taxonomies=None if taxonomies is None else dict(taxonomies),
            n_threads=None if threads is None else check_threads(threads, 1),
        )


def _same_order(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a is b or bool(np.array_equal(a, b))


def _in_input_order(values: Any, source: np.ndarray | None) -> Any:
    """Values of output row ``r`` moved to row ``source[r]``: the release unshuffled."""
    if source is None:
        return values
    destination = np.empty_like(source)
    destination[source] = np.arange(source.shape[0], dtype=source.dtype)
    return values[destination]


@dataclass(frozen=True)
class _Compared:
    """The compared columns, those left out, and how the compared ones are paired."""

    names: list[Hashable]
    skipped: dict[str, str]
    paired: list[Hashable]
    pairing: str
    unlinked: str | None


def _pairing(
    names: list[Hashable], sources: Mapping[Hashable, np.ndarray | None]
) -> tuple[list[Hashable], str, str | None]:
    """Return the paired columns, how they are paired, and why no record links (or None)."""
    with_source = [name for name in names if name in sources]
    orders = [sources[name] for name in with_source]
    shared = all(_same_order(order, orders[0]) for order in orders) if orders else False
    if not names:
        return [], "none", "no column to compare"
    if len(with_source) < len(names):
        computed = [name for name in names if name not in sources]
        reason = (
            f"column(s) {computed} of the release are computed by the method (not one value "
            "per input record), so a released row has no source record to link to"
        )
        return with_source, "column by column" if with_source else "none", reason
    if not shared:
        reason = (
            "the compared columns are in orders of their own (linkage='columns', or "
            "unprotected='shuffle' columns among them): a released row is not one input "
            "record, so no record can be linked; each column is still measured on its own"
        )
        return with_source, "column by column", reason
    return with_source, "input order" if orders[0] is None else "through the release's order", None


def _compared(
    options: RiskOptions,
    frame: pd.DataFrame,
    protected: Sequence[Hashable],
    taxonomies: Mapping[Hashable, Taxonomy],
    sources: Mapping[Hashable, np.ndarray | None],
) -> _Compared:
    table = as_table(frame, "released")
    skipped: dict[str, str] = {}
    if options.columns is not None:
        names = list(options.columns)
    else:
        held = [name for name in protected if name in frame.columns]
        names = [name for name in held if name in taxonomies or is_numeric(table, name)]
        skipped = {
            json_name(name): "not numeric and no taxonomy (no distance)"
            for name in held
            if name not in names
        }
    paired_names, pairing, unlinked = _pairing(names, sources)
    return _Compared(names, skipped, paired_names, pairing, unlinked)


def _released_frame(
    released: Mapping[Hashable, Any],
    needed: Sequence[Hashable],
    counts: Hashable | None,
    *,
    repeat: bool = False,
) -> pd.DataFrame:
    """Return the released columns ``needed`` in the output's order (``repeat``: by counts)."""
    missing = [name for name in needed if name not in released or name == counts]
    if missing:
        raise DPFastValueError(
            f"risk names column(s) {quoted(missing)} that the release does not hold (it holds "
            f"{quoted([name for name in released if name != counts])}); name released columns, or "
            "release them too (unprotected='keep' or 'shuffle')"
        )
    frame = pd.DataFrame({name: released[name] for name in needed})
    if repeat and counts is not None:
        rows = np.repeat(np.arange(len(frame)), np.asarray(released[counts], dtype=np.int64))
        frame = frame.take(rows).reset_index(drop=True)
    return frame


def _widths(
    options: RiskOptions, default: Mapping[Hashable, float], numeric: list[Hashable]
) -> dict[Hashable, float]:
    """Return the neighbourhood half-widths: ``options.width``, else the release's own."""
    if options.width is None:
        return {name: value for name, value in default.items() if name in numeric}
    return widths_of(options.width, numeric)


@dataclass(frozen=True)
class ReleaseDefaults:
    """What a release knows that ``risk=`` leaves unset.

    ``protected``: the released columns a mechanism protected (the default compared
    columns); ``k``: the method's own class size; ``width``: default neighbourhood
    half-widths (``k_noise``: ``2δ``); ``taxonomies``: the method's; ``counts``: a
    released column counting the records each output row stands for (generalised counts).
    """

    protected: Sequence[Hashable] = ()
    k: int | None = None
    width: Mapping[Hashable, float] | None = None
    taxonomies: Mapping[Hashable, Taxonomy] | None = None
    counts: Hashable | None = None


def _taxonomies(options: RiskOptions, defaults: ReleaseDefaults) -> dict[Hashable, Taxonomy]:
    given = dict(defaults.taxonomies or {})
    with dpfast_errors():
        for name, value in (options.taxonomies or {}).items():
            given[name] = as_taxonomy(value, name)
    return given


def release_risk(
    original: Any,
    released: Mapping[Hashable, Any],
    sources: Mapping[Hashable, np.ndarray | None],
    options: RiskOptions,
    defaults: ReleaseDefaults | None = None,
) -> dict[str, Any]:
    """Every applicable risk measure of a release, each released value paired with its source.

    Parameters
    ----------
    original : table
        The release's input.
    released : mapping
        ``{column: values}``, each column of the release in the output's row order (NumPy
        arrays or pandas Categoricals).
    sources : mapping
        ``{column: rows}``: output row ``r`` of the column came from input row ``rows[r]``
        (``None``: from row ``r``). A column absent here was computed by the method (no
        source row).
    options : RiskOptions
        What to measure (:func:`risk_options`).
    defaults : ReleaseDefaults, optional
        What the release knows that ``options`` leaves unset.

    Returns
    -------
    dict
        :func:`risk_summary`'s keys, and ``"warning"``, ``"pairing"`` (``"input order"``,
        ``"through the release's order"``, ``"column by column"`` or ``"none"``) and
        ``"not_measured"`` (``{measure: why}``); a measure not taken is None
        (docs/risk.md#risk-at-release-time).

    Examples
    --------
    >>> import numpy as np
    >>> from dpfast import risk
    >>> original = np.array([[1.0], [2.0], [3.0], [4.0]])
    >>> released = {0: np.array([3.1, 1.1, 4.1, 2.1])}  # output row r from input sources[r]
    >>> sources = {0: np.array([2, 0, 3, 1])}
    >>> found = risk.release_risk(original, released, sources, risk.RiskOptions(),
    ...                           risk.ReleaseDefaults(protected=[0]))
    >>> found["pairing"], found["record_linkage"]
    ("through the release's order", {'distance': 1.0, 'rank': 1.0})
    """
    defaults = defaults or ReleaseDefaults()
    k = options.k if options.k is not None else defaults.k
    taxonomies = _taxonomies(options, defaults)
    held = [name for name in defaults.protected if name in released]
    asked = held if options.columns is None else options.columns
    frame = _released_frame(released, asked, defaults.counts)
    chosen = _compared(options, frame, held, taxonomies, sources)
    n = as_table(original, "original").n_rows
    aligned = pd.DataFrame(
        {name: _in_input_order(released[name], sources[name]) for name in chosen.paired}
    )
    checked = {name: taxonomies[name] for name in chosen.paired if name in taxonomies}
    numeric = [name for name in chosen.paired if name not in checked]
    not_measured: dict[str, str] = {}
    summary: dict[str, Any] = {
        "warning": RISK_WARNING,
        "pairing": chosen.pairing,
        "n_records": n,
        "columns": [json_name(name) for name in chosen.names],
        "skipped_columns": chosen.skipped,
        "record_linkage": None,
        "interval_disclosure": None,
        "uniqueness": None,
        "neighbourhood": None,
        "not_measured": not_measured,
    }
    threads = check_threads(options.n_threads, os.cpu_count() or 1)
    if chosen.unlinked is None:
        pair = paired(original, aligned, chosen.names, "risk")
        summary["record_linkage"] = linkage_section(pair, checked, threads)
    else:
        not_measured["record_linkage"] = chosen.unlinked
    if numeric:
        pair = paired(original, aligned, numeric, "risk")
        summary["interval_disclosure"] = interval_section(pair, numeric, options.p)
    else:
        not_measured["interval_disclosure"] = "no numeric column paired with its source"
    _uniqueness(summary, original, released, options, k, defaults.counts)
    widths = _widths(options, defaults.width or {}, numeric)
    if widths:
        summary["neighbourhood"] = neighbourhood_section(original, aligned, widths, k)
    else:
        not_measured["neighbourhood"] = (
            "no width given (k_noise measures at 2δ; other releases take one as risk={'width': w})"
        )
    ready: dict[str, Any] = json_ready(summary)
    return ready


def _uniqueness(
    summary: dict[str, Any],
    original: Any,
    released: Mapping[Hashable, Any],
    options: RiskOptions,
    k: int | None,
    counts: Hashable | None,
) -> None:
    """Fill the uniqueness section: both tables, the release in its own row order."""
    names = options.quasi_identifiers
    if names is None:
        summary["not_measured"]["uniqueness"] = (
            "no quasi-identifiers: give them as risk={'quasi_identifiers': [...]}"
        )
        return
    if k is None:
        raise DPFastValueError(
            "risk['quasi_identifiers'] needs a class size to check, and this method has no k "
            "of its own: pass risk={'quasi_identifiers': [...], 'k': 5}"
        )
    frame = _released_frame(released, names, counts, repeat=True)
    summary["uniqueness"] = uniqueness_section(original, frame, names, k)
