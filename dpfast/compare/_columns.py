"""One column of the original against its release: values, summaries and order-free metrics.

Order-free means that nothing here pairs row ``i`` of one table with row ``i`` of the other:
the default releases shuffle their rows (each column on its own under ir_dp's
``linkage="columns"``), so only the marginal distributions can be compared. The relative
error, which is record-linked, is computed only when the caller says the rows are linked.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfast import metrics
from dpfast._validation import quoted
from dpfast.exceptions import DPFastValueError
from dpfast.schema import Schema
from dpfast.taxonomy import as_taxonomy

#: The label a missing value of a categorical column gets on the page.
MISSING = "(missing)"

#: The quantiles the summary table shows, by name.
QUANTILES = (("min", 0.0), ("25%", 0.25), ("median", 0.5), ("75%", 0.75), ("max", 1.0))


@dataclass(frozen=True)
class ColumnComparison:
    """What the page shows about one column.

    Attributes
    ----------
    name : str
        The column.
    kind : {"numeric", "categorical"}
        How it is plotted and measured.
    original, released : numpy.ndarray
        The values: int64 (declared integer) or float64 for numeric columns, text for
        categorical ones (missing values as :data:`MISSING`).
    bounds : (lower, upper) or None
        The schema's public domain of a numeric column.
    taxonomy : Taxonomy or None
        The schema's taxonomy of a categorical column.
    metrics : dict
        ``{"jensen_shannon": ..., "variance_variation": ..., "relative_error": ...}``, each
        as ``dpfast.metrics`` returns it; a metric that does not apply is left out.
    summary : dict
        ``{"original": {...}, "released": {...}}``: count, mean, standard deviation
        (population, ``ddof=0``) and quantiles of a numeric column.
    outside : dict
        ``{"original": (below, above), "released": (below, above)}``: how many values lie
        outside ``bounds`` (the original's are the ones a release clamps).
    """

    name: str
    kind: str
    original: np.ndarray
    released: np.ndarray
    bounds: tuple[float, float] | None = None
    taxonomy: Any = None
    metrics: dict[str, float] = field(default_factory=dict)
    summary: dict[str, dict[str, float]] = field(default_factory=dict)
    outside: dict[str, tuple[int, int]] = field(default_factory=dict)


def numeric_values(values: Any, name: str, declared: str, which: str) -> np.ndarray:
    """Return a numeric column as int64 (declared integer, whole values) or float64.

    Raises ``ValueError`` on missing or non-numeric values, naming the file and the column.
    """
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DPFastValueError(
            f"column {quoted(name)} of the {which} table is declared {declared} but holds "
            "non-numeric values; compare the files the release read and wrote"
        ) from None
    missing = int(np.count_nonzero(~np.isfinite(array)))
    if missing:
        raise DPFastValueError(
            f"column {quoted(name)} of the {which} table has {missing} missing or non-finite "
            "value(s); compare needs complete numeric columns (leave it out with --columns)"
        )
    if declared == "integer" and np.array_equal(array, np.round(array)):
        return array.astype(np.int64)
    return array


def categorical_values(values: Any) -> np.ndarray:
    """Return a column's values as text, missing values as :data:`MISSING`."""
    out = [
        MISSING if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
        for value in np.asarray(values, dtype=object)
    ]
    return np.array(out, dtype=str) if out else np.empty(0, dtype=str)


def _summary(values: np.ndarray) -> dict[str, float]:
    as_float = values.astype(np.float64)
    out = {
        "count": float(as_float.shape[0]),
        "mean": float(np.mean(as_float)),
        "sd": float(np.std(as_float)),
    }
    for label, q in QUANTILES:
        out[label] = float(np.quantile(as_float, q))
    return out


def _outside(values: np.ndarray, bounds: tuple[float, float] | None) -> tuple[int, int]:
    if bounds is None:
        return (0, 0)
    return (
        int(np.count_nonzero(values < bounds[0])),
        int(np.count_nonzero(values > bounds[1])),
    )


def compare_numeric(
    name: str,
    original: np.ndarray,
    released: np.ndarray,
    bounds: tuple[float, float] | None,
    *,
    linked: bool,
) -> ColumnComparison:
    """Measure a numeric column: JSD over ``bounds``, variance variation, summaries."""
    scores: dict[str, float] = {
        "jensen_shannon": metrics.column_metric(metrics.jensen_shannon(original, released, bounds)),
        "variance_variation": metrics.column_metric(metrics.variance_variation(original, released)),
    }
    if linked:
        # the sanity bound needs a domain: the public one, else the original's range
        pair = bounds or (float(np.min(original)), float(np.max(original)))
        scores["relative_error"] = metrics.column_metric(
            metrics.relative_error(original, released, pair)
        )
    return ColumnComparison(
        name=name,
        kind="numeric",
        original=original,
        released=released,
        bounds=bounds,
        metrics=scores,
        summary={"original": _summary(original), "released": _summary(released)},
        outside={"original": _outside(original, bounds), "released": _outside(released, bounds)},
    )


def compare_categorical(
    name: str, original: np.ndarray, released: np.ndarray, taxonomy: Any, *, linked: bool
) -> ColumnComparison:
    """Measure a categorical column: JSD over the categories; semantic distance if linked."""
    scores: dict[str, float] = {
        "jensen_shannon": metrics.column_metric(metrics.jensen_shannon(original, released)),
    }
    if linked and taxonomy is not None:
        scores["relative_error"] = metrics.column_metric(
            metrics.relative_error(original, released, taxonomies=taxonomy)
        )
    return ColumnComparison(
        name=name,
        kind="categorical",
        original=original,
        released=released,
        taxonomy=taxonomy,
        metrics=scores,
    )


def category_shares(
    original: np.ndarray, released: np.ndarray, limit: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Return categories (most frequent in the original first) and each table's shares.

    Past ``limit`` categories the rest are summed into one ``"other (N)"`` bar.
    """
    labels, inverse = np.unique(np.concatenate([original, released]), return_inverse=True)
    n = original.shape[0]
    counts_original = np.bincount(inverse[:n], minlength=labels.shape[0]).astype(np.float64)
    counts_released = np.bincount(inverse[n:], minlength=labels.shape[0]).astype(np.float64)
    # stable: ties keep the labels' sorted order
    order = np.argsort(-(counts_original + counts_released / 1e12), kind="stable")
    names = [str(labels[i]) for i in order]
    share_original = counts_original[order] / max(n, 1)
    share_released = counts_released[order] / max(released.shape[0], 1)
    if len(names) > limit:
        rest = len(names) - (limit - 1)
        names = [*names[: limit - 1], f"other ({rest})"]
        share_original = np.append(share_original[: limit - 1], share_original[limit - 1 :].sum())
        share_released = np.append(share_released[: limit - 1], share_released[limit - 1 :].sum())
    return names, share_original, share_released


def noise_rows(
    name: str, ledger: Any, bounds: tuple[float, float] | None, taxonomy: Any
) -> list[dict[str, Any]]:
    """Return the ledger entries that touch column ``name``, with its domain beside each."""
    rows = []
    for entry in ledger if isinstance(ledger, list) else []:
        if not isinstance(entry, Mapping) or name not in (entry.get("columns") or []):
            continue
        row: dict[str, Any] = {
            "step": str(entry.get("step", "")),
            "mechanism": str(entry.get("mechanism", "")),
            "epsilon": _number_or_none(entry.get("epsilon")),
            "sensitivity": _number_or_none(entry.get("sensitivity")),
            "noise_scale": _number_or_none(entry.get("noise_scale")),
        }
        if bounds is not None:
            width = float(bounds[1]) - float(bounds[0])
            row["domain_width"] = width
            scale = row["noise_scale"]
            row["scale_over_width"] = scale / width if scale is not None and width > 0 else None
        elif taxonomy is not None:
            row["categories"] = len(taxonomy.domain)
        rows.append(row)
    return rows


def _number_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def per_column(values: Mapping[Hashable, Any]) -> dict[str, float]:
    """Return a report's ``{column: number}`` mapping with text keys and float values."""
    out: dict[str, float] = {}
    for key, value in values.items():
        number = _number_or_none(value)
        if number is not None:
            out[str(key)] = number
    return out


def chosen_columns(
    schema: Schema, columns: Sequence[str] | None, original: Any, released: Any
) -> list[str]:
    """Return the compared columns: ``columns`` (checked), or the schema's protected ones."""
    if columns is None:
        chosen = [
            spec.name
            for spec in schema
            if spec.protect and spec.type != "string" and spec.name in released.names
        ]
        if not chosen:
            raise DPFastValueError(
                "the released table has none of the columns the schema protects; check that "
                "the schema is the one the release used"
            )
    else:
        chosen = list(columns)
        undeclared = [c for c in chosen if c not in schema]
        if undeclared:
            raise DPFastValueError(
                f"columns {quoted(undeclared, listed=True)} are not declared in the "
                "schema; choose among its columns"
            )
    for which, table in (("original", original), ("released", released)):
        absent = [c for c in chosen if c not in table.names]
        if absent:
            raise DPFastValueError(
                f"the {which} table has no column {quoted(absent, listed=True)}; "
                "leave it out of the columns to compare"
            )
    return chosen


def compare_column(
    name: str, schema: Schema, original: Any, released: Any, *, linked: bool
) -> ColumnComparison:
    """Measure column ``name`` of two tables as the schema declares it."""
    spec = schema[name]
    if spec.is_numeric:
        return compare_numeric(
            name,
            numeric_values(original.column(name), name, spec.type, "original"),
            numeric_values(released.column(name), name, spec.type, "released"),
            spec.bounds,
            linked=linked,
        )
    taxonomy = None if spec.taxonomy is None else as_taxonomy(spec.taxonomy, name)
    return compare_categorical(
        name,
        categorical_values(original.column(name)),
        categorical_values(released.column(name)),
        taxonomy,
        linked=linked,
    )
