"""Utility metrics of a release against its original, for the private part of the report."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dpfast import metrics as utility
from dpfast.dataflow.values import CategoricalColumn, NumericColumn

METRICS_WARNING = (
    "computed on the original data: keep this report private, do not publish it with the release"
)


def _aligned(original: np.ndarray, destination: np.ndarray | None) -> np.ndarray:
    """``original`` moved to the released row order (rows matched through the shuffle)."""
    if destination is None or destination.shape[0] != original.shape[0]:
        return original
    aligned = np.empty_like(original)
    aligned[destination] = original
    return aligned


def _mean(values: Mapping[str, float]) -> float:
    return float(np.mean(list(values.values()))) if values else math.nan


def _numeric_metrics(
    out: dict[str, Any],
    numeric: Sequence[NumericColumn],
    released: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
    domains: Mapping[Hashable, tuple[float, float]] | None,
) -> None:
    for column in numeric:
        original = _aligned(column.values, destinations.get(column.name))
        if column.integer:
            original = original.astype(column.dtype)
        got = released[column.name]
        pair = (
            domains[column.name]
            if domains is not None
            else (float(original.min()), float(original.max()))
        )
        name = str(column.name)
        out["relative_error"][name] = utility.column_metric(
            utility.relative_error(original, got, pair)
        )
        out["jensen_shannon"][name] = utility.column_metric(
            utility.jensen_shannon(original, got, pair)
        )
        out["variance_variation"][name] = utility.column_metric(
            utility.variance_variation(original, got)
        )


def _categorical_metrics(
    out: dict[str, Any],
    categorical: Sequence[CategoricalColumn],
    released_codes: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
) -> None:
    """Relative error = mean semantic distance; JSD over the taxonomy's leaves."""
    for column in categorical:
        original = _aligned(column.codes, destinations.get(column.name))
        got = released_codes[column.name]
        m = len(column.taxonomy.domain)
        out["relative_error"][str(column.name)] = float(
            np.mean(column.taxonomy.distances_between(original, got))
        )
        out["jensen_shannon"][str(column.name)] = utility.jensen_shannon_counts(
            np.bincount(original, minlength=m).astype(np.float64),
            np.bincount(got, minlength=m).astype(np.float64),
        )


def release_metrics(
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    released: Mapping[Hashable, np.ndarray],
    released_codes: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
    domains: Mapping[Hashable, tuple[float, float]] | None,
) -> dict[str, Any]:
    """Compute utility metrics of the released columns against the original (private).

    Rows are matched through the shuffle (``destinations``), so the relative error is
    record-linked.
    """
    out: dict[str, Any] = {
        "warning": METRICS_WARNING,
        "relative_error": {},
        "jensen_shannon": {},
        "variance_variation": {},
    }
    _numeric_metrics(out, numeric, released, destinations, domains)
    variation = out.pop("variance_variation")
    out["mean_relative_error"] = _mean(out["relative_error"])
    out["mean_jensen_shannon"] = _mean(out["jensen_shannon"])
    # Numeric columns only: a categorical column has no variance.
    out["variance_variation"] = variation
    out["mean_variance_variation"] = _mean(variation)
    if categorical:
        _categorical_metrics(out, categorical, released_codes, destinations)
        out["mean_relative_error"] = _mean(out["relative_error"])
        out["mean_jensen_shannon"] = _mean(out["jensen_shannon"])
    return out
