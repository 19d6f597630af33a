"""The protected columns of a release: numeric values and categorical codes, checked once."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dpfast import steps
from dpfast._kernels import mechanisms as _mechanism_kernels
from dpfast._validation import (
    check_bounds,
    check_columns,
    quoted,
)
from dpfast.dataflow.flow import Dataflow
from dpfast.dataflow.values import CategoricalColumn, NumericColumn, widened_note
from dpfast.engines.base import Engine
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.taxonomy import Taxonomy, as_taxonomy


class TableView(Protocol):
    """What a method's argument checks read of a table: an engine, or a public table.

    (:class:`~dpfast._release.forecast.PublicTable`: the row count and the names only.)
    """

    @property
    def n_rows(self) -> int: ...

    @property
    def names(self) -> list[Hashable]: ...

    def numeric_columns(
        self,
        names: Sequence[Hashable],
        *,
        integer: Mapping[Hashable, bool] | None = None,
        categorical: bool = True,
    ) -> list[NumericColumn]: ...

    def categorical_columns(
        self, taxonomies: Mapping[Hashable, Taxonomy]
    ) -> list[CategoricalColumn]: ...

    @property
    def dataflow(self) -> Dataflow: ...


def _check_taxonomies(taxonomies: Any) -> Mapping[Hashable, Taxonomy]:
    if taxonomies is None:
        return {}
    if not isinstance(taxonomies, Mapping):
        raise DPFastTypeError(
            f"taxonomies must be a mapping {{column: Taxonomy}}, got {type(taxonomies).__name__}"
        )
    return {name: as_taxonomy(taxonomy, name) for name, taxonomy in taxonomies.items()}


def check_taxonomies(taxonomies: Any, selected: Sequence[Hashable]) -> dict[Hashable, Taxonomy]:
    """Return the protected categorical columns' taxonomies, each checked.

    Every column ``taxonomies`` names must be protected (in ``selected``).
    """
    checked = _check_taxonomies(taxonomies)
    stray = [name for name in checked if name not in selected]
    if stray:
        raise DPFastValueError(
            f"taxonomies names column(s) {quoted(stray)} that are not protected; the protected "
            f"columns are {quoted(list(selected))}: add them to columns or drop their taxonomies"
        )
    return dict(checked)


def protected_columns(
    engine: TableView, columns: Any, taxonomies: Any
) -> tuple[list[NumericColumn], list[CategoricalColumn]]:
    """Return the protected columns on ``engine``: numeric, and categorical (with a taxonomy).

    ``columns`` selects them (default all); every column ``taxonomies`` names must be
    selected. Each engine checks them as :meth:`~dpfast.engines.base.Engine.numeric_columns`
    and :meth:`~dpfast.engines.base.Engine.categorical_columns` say, the categorical
    ones first.
    """
    selected = check_columns(columns, engine.names)
    checked = check_taxonomies(taxonomies, selected)
    categorical = engine.categorical_columns({n: checked[n] for n in selected if n in checked})
    numeric = engine.numeric_columns([n for n in selected if n not in checked])
    return numeric, categorical


def column_domains(
    engine: TableView, numeric: Sequence[NumericColumn], bounds: Any
) -> tuple[dict[Hashable, tuple[float, float]], bool]:
    """Return each protected numeric column's public domain, and whether the data gave it.

    ``bounds="data"`` derives them from the engine's values (not private; it warns).
    Without numeric columns ``bounds`` may be omitted.
    """
    if not numeric and bounds is None:
        return {}, False
    by_name = {c.name: c for c in numeric}
    return check_bounds(
        bounds,
        list(by_name),
        lambda name: steps.value_range(engine.dataflow, by_name[name]),
        engine.names,
    )


def fit_domains(
    numeric: Sequence[NumericColumn], domains: Mapping[Hashable, tuple[float, float]]
) -> tuple[list[NumericColumn], list[str]]:
    """Return the columns, each released in a type that holds its public domain, and notes.

    A column whose type cannot hold its bounds widens (:meth:`NumericColumn.within`); the
    report notes each one (its type and bounds are public).
    """
    fitted, notes = [], []
    for column in numeric:
        wide = column.within(*domains[column.name])
        note = widened_note(column, wide)
        if note is not None:
            notes.append(note)
        fitted.append(wide)
    return fitted, notes


def protected_domains(
    engine: TableView, columns: Any, taxonomies: Any, bounds: Any
) -> tuple[
    list[NumericColumn],
    list[CategoricalColumn],
    dict[Hashable, tuple[float, float]],
    bool,
    list[str],
]:
    """Return the protected columns, the numeric ones' domains and the widened types' notes.

    In order: the numeric columns, each in a type that holds its domain
    (:func:`fit_domains`); the categorical columns (:func:`protected_columns`); the
    domains and whether the data gave them (:func:`column_domains`); the notes.
    """
    numeric, categorical = protected_columns(engine, columns, taxonomies)
    domains, derived = column_domains(engine, numeric, bounds)
    numeric, notes = fit_domains(numeric, domains)
    return numeric, categorical, domains, derived, notes


def column_names(
    numeric: Sequence[NumericColumn], categorical: Sequence[CategoricalColumn] = ()
) -> list[Hashable]:
    """Return the protected columns' names, numeric first."""
    return [c.name for c in numeric] + [c.name for c in categorical]


def taxonomy_parameters(categorical: Sequence[CategoricalColumn]) -> dict[str, Any]:
    """Describe each categorical column's taxonomy for the report."""
    return {
        str(c.name): {"name": c.taxonomy.name, "leaves": len(c.taxonomy.domain)}
        for c in categorical
    }


def value_range(values: np.ndarray, name: Hashable) -> tuple[float, float]:
    """Return a column's ``(min, max)``; refuse a width that float64 cannot divide by."""
    lo, hi = _mechanism_kernels.min_max(values)
    return check_width(float(lo), float(hi), values.shape[0], name)


def numeric_ranges(
    engine: Engine, columns: Any
) -> tuple[list[NumericColumn], list[tuple[float, float]]]:
    """Return the numeric columns ``columns`` protects (default all), and their ranges.

    Each range is the column's ``(min, max)`` (:func:`dpfast.steps.value_range`). Every
    column's type is checked first, then every column's values (an engine that reads in
    passes checks them in its pass), then the widths (:func:`check_width`): every engine
    refuses the same column first.
    """
    selected = check_columns(columns, engine.names)
    protected = engine.numeric_columns(selected, categorical=False)
    flow = engine.dataflow
    ranges = [steps.value_range(flow, column) for column in protected]
    checked = [
        check_width(lo, hi, engine.n_rows, column.name)
        for column, (lo, hi) in zip(protected, ranges, strict=True)
    ]
    return protected, checked


def check_width(lo: float, hi: float, n: int, name: Hashable) -> tuple[float, float]:
    """Return ``(lo, hi)``, the range of ``n`` values; refuse a width float64 cannot divide by."""
    width = float(hi) - float(lo)
    if not math.isfinite(width):
        raise DPFastValueError(
            f"column {quoted(name)}: max - min overflows float64 ({quoted(lo)} to {quoted(hi)}); "
            "rescale the "
            "column first"
        )
    if width > 0 and not math.isfinite(n / width):
        raise DPFastValueError(
            f"column {quoted(name)}: its values differ by less than float64 can divide "
            f"(range {quoted(width)}); rescale the column first"
        )
    return float(lo), float(hi)


def class_lookup(categories: Sequence[Any], labels: list[Any]) -> tuple[np.ndarray, list[int]]:
    """Map each category to its class code (by value, else by text); ``-1`` when outside.

    Returns the lookup (int64, at least one entry) and the indices of the categories
    outside ``labels``.
    """
    exact = {label: i for i, label in enumerate(labels)}
    text = {str(label): i for i, label in enumerate(labels)}
    lookup = np.full(max(len(categories), 1), -1, dtype=np.int64)
    outside = []
    for i, category in enumerate(categories):
        j = exact.get(category) if isinstance(category, Hashable) else None
        if j is None:
            j = text.get(str(category))
        if j is not None:
            lookup[i] = j
        else:
            outside.append(i)
    return lookup, outside


@dataclass(frozen=True)
class ClassLookup:
    """The codes of a column's categories in a public list (:class:`~dpfast.engines.base.Lookup`).

    DiffGen codes its target's classes with it, randomized response its column's domain.
    """

    labels: tuple[Any, ...]

    @property
    def size(self) -> int:
        """The number of codes."""
        return len(self.labels)

    def __call__(self, categories: Sequence[Any]) -> tuple[np.ndarray, list[int]]:
        return class_lookup(categories, list(self.labels))
