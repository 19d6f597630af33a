"""What every release shares: the Release type, column preparation, threads, metrics, notes."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast import metrics as utility
from dpfast import noise
from dpfast._validation import (
    all_finite,
    as_numeric_column,
    check_columns,
    check_threads,
    is_integer_column,
)
from dpfast.accounting import Report
from dpfast.io import TableData
from dpfast.taxonomy import Taxonomy

Progress = Callable[[str, int, int], None]


SEEDED_NOTE = "reproducible — not for publication: noise was drawn from a seeded generator"


@dataclass(frozen=True)
class Release:
    """Released data and the report of how it was made.

    Attributes
    ----------
    data : pandas.DataFrame, pyarrow.Table or numpy.ndarray
        The released table, of the same kind as the input.
    report : Report
        Method, parameters, ε ledger, guarantee, clamped counts, timings.
    """

    data: Any
    report: Report


@dataclass(frozen=True)
class _Column:
    name: Hashable
    values: np.ndarray  # float64, read-only use
    integer: bool
    dtype: np.dtype[Any]


def _protected_columns(table: TableData, columns: Any) -> list[_Column]:
    selected = check_columns(columns, table.names)
    finite = table.kind == "numpy" and all_finite(table.source)
    result = []
    for name in selected:
        raw = table.column(name)
        result.append(
            _Column(
                name,
                as_numeric_column(raw, name, known_finite=finite),
                is_integer_column(raw),
                raw.dtype,
            )
        )
    return result


@dataclass(frozen=True)
class _Categorical:
    name: Hashable
    codes: np.ndarray  # int64 domain codes
    taxonomy: Taxonomy


def _split_columns(
    table: TableData, columns: Any, taxonomies: Any
) -> tuple[list[_Column], list[_Categorical]]:
    """Protected numeric columns, and categorical columns (those with a taxonomy)."""
    if taxonomies is None:
        taxonomies = {}
    if not isinstance(taxonomies, Mapping):
        raise TypeError(
            f"taxonomies must be a mapping {{column: Taxonomy}}, got {type(taxonomies).__name__}"
        )
    for name, taxonomy in taxonomies.items():
        if not isinstance(taxonomy, Taxonomy):
            raise TypeError(
                f"taxonomies[{name!r}] must be a dpfast.Taxonomy (Taxonomy.from_arx(path) or "
                f"Taxonomy.from_mapping(...)), got {type(taxonomy).__name__}"
            )
    selected = check_columns(columns, table.names)
    stray = [name for name in taxonomies if name not in selected]
    if stray:
        raise ValueError(
            f"taxonomies names column(s) {stray} that are not protected; the protected "
            f"columns are {selected}: add them to columns or drop their taxonomies"
        )
    numeric = [name for name in selected if name not in taxonomies]
    categorical = []
    for name in selected:
        if name in taxonomies:
            codes, categories = table.category_codes(name)
            codes = taxonomies[name].encode_categories(codes, categories, column=name)
            categorical.append(_Categorical(name, codes, taxonomies[name]))
    for name in numeric:
        raw = table.column(name)
        if raw.dtype == object or not (
            np.issubdtype(raw.dtype, np.number) or raw.dtype == np.bool_
        ):
            raise TypeError(
                f"column {name!r} must be numeric to be protected, got dtype {raw.dtype}; "
                "pass its taxonomy in taxonomies= to protect it as a categorical column, "
                "or leave it out of columns"
            )
    return (_protected_columns(table, numeric) if numeric else []), categorical


def _names(protected: Sequence[_Column], categorical: Sequence[_Categorical]) -> list[Hashable]:
    return [c.name for c in protected] + [c.name for c in categorical]


def _noise_source(seed: int | None) -> noise.NoiseSource:
    return noise.NoiseSource.secure() if seed is None else noise.NoiseSource.from_seed(seed)


def _threads(n_threads: Any, n_columns: int) -> int:
    return check_threads(n_threads, min(n_columns, os.cpu_count() or 1))


def _inverse(permutation: np.ndarray) -> np.ndarray:
    inverse = np.empty_like(permutation)
    inverse[permutation] = np.arange(permutation.shape[0], dtype=permutation.dtype)
    return inverse


def _finish(column: _Column, released: np.ndarray) -> np.ndarray:
    """Give an integer column its dtype back (values are already rounded and in bounds)."""
    if column.integer:
        return released.astype(column.dtype)
    return released


def _utility_metrics(
    protected: Sequence[_Column],
    released: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
    domains: Mapping[Hashable, tuple[float, float]] | None,
) -> dict[str, Any]:
    """Relative error, JSD and variance variation of each protected numeric column.

    Rows are matched through the shuffle, so the relative error is record-linked.
    """
    relative: dict[str, float] = {}
    divergence: dict[str, float] = {}
    variation: dict[str, float] = {}
    for column in protected:
        original = column.values
        destination = destinations.get(column.name)
        if destination is not None and destination.shape[0] == original.shape[0]:
            aligned = np.empty_like(original)
            aligned[destination] = original
            original = aligned
        if column.integer:
            original = original.astype(column.dtype)
        out = released[column.name]
        pair = (
            domains[column.name]
            if domains is not None
            else (float(original.min()), float(original.max()))
        )
        relative[str(column.name)] = utility.column_metric(
            utility.relative_error(original, out, pair)
        )
        divergence[str(column.name)] = utility.column_metric(
            utility.jensen_shannon(original, out, pair)
        )
        variation[str(column.name)] = utility.column_metric(
            utility.variance_variation(original, out)
        )
    return {
        "warning": "computed on the original data: keep this report private, do not "
        "publish it with the release",
        "relative_error": relative,
        "jensen_shannon": divergence,
        "mean_relative_error": float(np.mean(list(relative.values()))) if relative else math.nan,
        "mean_jensen_shannon": float(np.mean(list(divergence.values()))) if relative else math.nan,
        # Numeric columns only: a categorical column has no variance.
        "variance_variation": variation,
        "mean_variance_variation": (
            float(np.mean(list(variation.values()))) if variation else math.nan
        ),
    }


def _report_progress(progress: Progress | None, phase: str, done: int, total: int) -> None:
    if progress is not None:
        progress(phase, done, total)


def _unprotected_note(unprotected: Sequence[str]) -> str:
    if not unprotected:
        return ""
    return (
        f" Column(s) {list(unprotected)} are released unchanged and are not protected by "
        "any guarantee."
    )


def _categorical_metrics(
    metrics: dict[str, Any],
    categorical: Sequence[_Categorical],
    released_codes: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
) -> None:
    """Add categorical columns: relative error = mean semantic distance; JSD per category."""
    for column in categorical:
        original = column.codes
        destination = destinations.get(column.name)
        if destination is not None and destination.shape[0] == original.shape[0]:
            aligned = np.empty_like(original)
            aligned[destination] = original
            original = aligned
        out = released_codes[column.name]
        m = len(column.taxonomy.domain)
        metrics["relative_error"][str(column.name)] = float(
            np.mean(column.taxonomy.distances_between(original, out))
        )
        metrics["jensen_shannon"][str(column.name)] = utility.jensen_shannon_counts(
            np.bincount(original, minlength=m).astype(np.float64),
            np.bincount(out, minlength=m).astype(np.float64),
        )
    metrics["mean_relative_error"] = float(np.mean(list(metrics["relative_error"].values())))
    metrics["mean_jensen_shannon"] = float(np.mean(list(metrics["jensen_shannon"].values())))
