"""Shared input handling of the risk measures: errors, row-aligned pairs, columns.

The measures compare row ``i`` of a release with row ``i`` of the original, so a release
must keep the input's row order (docs/risk.md#alignment). A :class:`dpfast.Release` is read
through its public report, duck-typed: this layer does not import the release skeleton.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._kernels import checks
from dpfast._validation import check_columns, quoted
from dpfast.exceptions import DPFastError, DPFastTypeError, DPFastValueError
from dpfast.io import TableData, as_table_data
from dpfast.taxonomy import Taxonomy, as_taxonomy


@contextmanager
def dpfast_errors() -> Iterator[None]:
    """Re-raise a lower layer's ``ValueError`` / ``TypeError`` as dpfast's own errors."""
    try:
        yield
    except DPFastError:
        raise
    except TypeError as exc:
        raise DPFastTypeError(str(exc)) from exc
    except ValueError as exc:
        raise DPFastValueError(str(exc)) from exc


#: Methods whose release keeps the input's row order (unless their report shows a shuffle).
ROW_ORDER_METHODS = (
    "individual_ranking",
    "ir_dp",
    "k_noise",
    "k_pram",
    "laplace_dp",
    "mdav",
    "randomized_response",
)


def misalignment(report: Any) -> str | None:
    """Why a release's rows are not row ``i`` of its input, from its public report; or None.

    The risk measures that compare row ``i`` of a release with row ``i`` of the original
    ask this first, and refuse a release for which it gives a reason (docs/risk.md#alignment).

    Parameters
    ----------
    report : Report or mapping
        A :class:`dpfast.accounting.Report` or its ``to_dict()`` (a release's
        ``.public-report.json``, parsed). Only its ``method``, ``parameters`` and
        ``unprotected`` are read; missing fields count as unknown.

    Returns
    -------
    str or None
        None when the report shows a release that keeps the input's row order (a method of
        :data:`ROW_ORDER_METHODS` without a shuffle); otherwise why its rows are not
        aligned: ``linkage="columns"``, ``shuffle=True`` (``ir_dp``'s default),
        ``unprotected="shuffle"``, or a method dpfast does not know to keep the order.

    Examples
    --------
    >>> from dpfast import risk
    >>> risk.misalignment({"method": "mdav", "parameters": {"k": 5}, "unprotected": None}) is None
    True
    >>> risk.misalignment({"method": "mdav_dp", "parameters": {"shuffle": True}})
    'its report shows shuffle=True: its rows are in a new random order'
    """
    if isinstance(report, Mapping):
        method, parameters = report.get("method"), report.get("parameters")
        unprotected = report.get("unprotected")
    else:
        method, parameters = getattr(report, "method", None), getattr(report, "parameters", None)
        unprotected = getattr(report, "unprotected", None)
    parameters = parameters if isinstance(parameters, Mapping) else {}
    if parameters.get("linkage") == "columns":
        return "its report shows linkage='columns': every column is in an order of its own"
    shuffle = parameters.get("shuffle")
    if shuffle is True or (method == "ir_dp" and shuffle is not False):
        return "its report shows shuffle=True: its rows are in a new random order"
    if unprotected == "shuffle":
        return (
            "its report shows unprotected='shuffle': its unprotected columns are in an order "
            "of their own"
        )
    if method not in ROW_ORDER_METHODS:
        return f"dpfast cannot tell whether a {quoted(method)} release keeps the input's row order"
    return None


def release_data(released: Any, function: str, *, aligned: bool = True) -> Any:
    """Return the table of ``released``: itself, or a Release's checked ``data``."""
    report = getattr(released, "report", None)
    is_release = hasattr(released, "data") and all(
        hasattr(report, field) for field in ("method", "parameters", "unprotected")
    )
    if not is_release:
        return released
    if aligned:
        reason = misalignment(report)
        if reason is not None:
            method = getattr(report, "method", None)
            raise DPFastValueError(
                f"{function} needs row-aligned tables (row i of the release comes from row i "
                f"of the original), but this {method} release is not: {reason}. Release it "
                "again with risk=True: the release then pairs each row with its source "
                "through its own order and puts the measures in release.private.risk "
                f"(docs/risk.md#risk-at-release-time); {_again(report)}. Or measure a "
                "release that keeps the row "
                f"order: one of {list(ROW_ORDER_METHODS)} (ir_dp with linkage='records' and "
                "shuffle=False), with unprotected='drop' or 'keep'"
            )
    return released.data


def _again(report: Any) -> str:
    """Say what releasing the same data again costs: its ε again, from its report."""
    epsilon = getattr(report, "epsilon", None)
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool):
        return (
            f"that is a second release of the same data, which spends its ε = {epsilon:.3g} "
            "again, on top of this one's"
        )
    return (
        "that is a second release of the same data, which discloses more together with this "
        "one than either alone"
    )


def as_table(data: Any, role: str) -> TableData:
    """Read any accepted table; a 1-D array or a pandas Series is a table of one column."""
    if isinstance(data, np.ndarray) and data.ndim == 1:
        data = data.reshape(-1, 1)
    elif hasattr(data, "to_frame") and getattr(data, "ndim", 2) == 1:  # pandas Series
        data = data.to_frame()
    try:
        return as_table_data(data)
    except (TypeError, ValueError) as exc:
        error = DPFastTypeError if isinstance(exc, TypeError) else DPFastValueError
        raise error(f"{role}: {exc}") from exc


@dataclass(frozen=True)
class Pair:
    """An original and a released table with the same rows, and the columns compared."""

    original: TableData
    released: TableData
    names: list[Hashable]

    @property
    def n_records(self) -> int:
        """Number of rows of each table."""
        return self.original.n_rows


def paired(original: Any, released: Any, columns: Any, function: str) -> Pair:
    """Check that two tables are row-aligned and hold ``columns`` (default: the release's)."""
    released_table = as_table(release_data(released, function), "released")
    original_table = as_table(original, "original")
    n, n_released = original_table.n_rows, released_table.n_rows
    if n != n_released:
        raise DPFastValueError(
            f"{function} needs row-aligned tables, but the original has {n} rows and the "
            f"release {n_released}; pass the release of this very table, in its row order"
        )
    if n == 0:
        raise DPFastValueError(f"the tables are empty (0 rows); {function} needs at least one row")
    with dpfast_errors():
        names = check_columns(columns, released_table.names)
    missing = [name for name in names if name not in set(original_table.names)]
    if missing:
        raise DPFastValueError(
            f"column(s) {quoted(missing)} of the release are not in the original, which has "
            f"{quoted(list(original_table.names))}; name the columns both tables share in columns="
        )
    return Pair(original_table, released_table, names)


def numeric_values(table: TableData, name: Hashable, role: str, hint: str) -> np.ndarray:
    """Column ``name`` as finite float64 values, or an error that names it and ``hint``."""
    raw = table.column(name)
    if raw.dtype.kind not in "biuf":  # booleans, integers, floats
        raise DPFastTypeError(
            f"column {quoted(name)} of the {role} table is not numeric (dtype {raw.dtype}); {hint}"
        )
    values = np.asarray(raw, dtype=np.float64)
    count, first = checks.non_finite(values)
    if count:
        raise DPFastValueError(
            f"column {quoted(name)} of the {role} table has {count} NaN or infinite value(s) "
            f"(first at row {first}); the risk measures need finite numbers: drop or impute "
            "those rows in both tables"
        )
    return values


def standardising_weight(values: np.ndarray) -> float:
    """``1 / σ²`` (population variance, correctly rounded sums); 0 for a constant column.

    A column constant in the original adds the same term to the distance from a released
    record to every original record, so it cannot change which is nearest: weight 0
    leaves it out (sdcMicro and MDAV divide it by 1 instead; docs/risk.md#standardisation).
    """
    if values.min() == values.max():
        return 0.0
    n = values.shape[0]
    mean = math.fsum(values.tolist()) / n
    centred = values - mean
    variance = math.fsum((centred * centred).tolist()) / n
    return float(1.0 / variance)


def check_taxonomies(taxonomies: Any, pair: Pair) -> dict[Hashable, Taxonomy]:
    """Taxonomies of the compared columns (others are ignored; unknown names refused)."""
    if taxonomies is None:
        return {}
    if not isinstance(taxonomies, Mapping):
        raise DPFastTypeError(
            f"taxonomies must be a mapping {{column: Taxonomy}}, got {type(taxonomies).__name__}"
        )
    unknown = [name for name in taxonomies if name not in set(pair.released.names)]
    if unknown:
        raise DPFastValueError(
            f"taxonomies names column(s) {quoted(unknown)} that the release does not have; its "
            f"columns are {quoted(list(pair.released.names))}"
        )
    with dpfast_errors():
        return {
            name: as_taxonomy(value, name)
            for name, value in taxonomies.items()
            if name in set(pair.names)
        }


def taxonomy_codes(table: TableData, name: Hashable, taxonomy: Taxonomy) -> np.ndarray:
    """Domain codes (int64) of a categorical column; unknown or missing labels refused."""
    with dpfast_errors():
        codes, categories = table.category_codes(name)
        return taxonomy.encode_categories(codes, categories, column=name)


def is_numeric(table: TableData, name: Hashable) -> bool:
    """Whether a column holds numbers (booleans included) rather than text or objects."""
    return table.column(name).dtype.kind in "biuf"


def json_name(name: Hashable) -> str:
    """Return a column name as a JSON object key."""
    return str(name)
