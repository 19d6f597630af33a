"""Validate DiffGen's inputs and encode its columns as integer codes.

Categorical predictors become domain codes of their taxonomy (dictionary-encoded first:
pandas categoricals and Arrow dictionaries keep their own codes). Numeric predictors are
clamped to their public bounds and coded once: integer columns of modest range by
``value - lower`` (no sort), other columns by their rank among the sorted distinct values
(one ``np.unique``). The class column becomes codes into its domain.

Whether a numeric predictor is an integer column comes from its dtype alone, never from
its values: a float64 column whose values are all whole is a float column, with a float
root interval and split values on its float grid (docs/design.md#diffgen-split).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfast._validation import (
    as_numeric_column,
    check_bounds,
    in_cli,
    is_integer_column,
    option,
)
from dpfast.exceptions import PrivacyLeakWarning
from dpfast.io import TableData
from dpfast.partitions.grid import Grid
from dpfast.taxonomy import Taxonomy, as_taxonomy

# Integer columns whose public range has at most this many values are coded by offset.
_OFFSET_CODES_MAX = 2**22

# Grid indices of split values stay below 2**52 in magnitude, so that ``k * step`` and
# ``k ± 1`` are exact in float64 (docs/design.md#diffgen-split).
_INDEX_BITS = 52


@dataclass(frozen=True)
class NumericColumn:
    """A numeric predictor: codes into ``code_values`` (sorted), public root interval.

    The root interval is ``[lower, upper + 1)`` for integer columns and ``[lower, upper]``
    for float columns. Split values lie on the column's grid, the multiples ``k * step``
    of a power of two: ``step`` is 1 for integer columns, and for float columns it is
    chosen from the public bounds alone (:func:`split_grid_step`). A split at ``s`` sends
    the values ``x < s`` left (docs/design.md#diffgen-split).
    """

    name: Hashable
    integer: bool
    lower: float
    upper: float
    codes: np.ndarray
    code_values: np.ndarray
    clamped: int
    step: float = 1.0

    @property
    def root(self) -> tuple[float, float]:
        """The root interval ``(lo, hi)``: ``hi`` is exclusive for integer columns."""
        if self.integer:
            return float(math.ceil(self.lower)), float(math.floor(self.upper) + 1)
        return self.lower, self.upper

    def grid_index(self, values: np.ndarray, *, strict: bool) -> np.ndarray:
        """Return, for each ``x``, the least ``k`` with ``k * step > x`` (strict) or ``>= x``.

        With ``strict``, ``k`` is the first split that sends ``x`` left. ``values`` are
        float64 within the public bounds (or a node's ends); returns int64. Exact: ``x /
        step`` is a multiplication by a power of two, exact unless it underflows, which
        needs ``step > 1``; then one correction each way repairs it (``k * step`` is exact,
        ``|k| <= 2**52``).
        """
        x = np.asarray(values, dtype=np.float64)
        scaled = x / self.step
        k = np.floor(scaled, out=scaled) if strict else np.ceil(scaled, out=scaled)
        if strict:
            k += 1.0
        if self.step > 1.0:
            if strict:
                k += k * self.step <= x
                k -= (k - 1.0) * self.step > x
            else:
                k += k * self.step < x
                k -= (k - 1.0) * self.step >= x
        return k.astype(np.int64)

    def split_range(self, lo: float, hi: float) -> tuple[int, int]:
        """Grid indices ``[first, stop)`` of the split values strictly between ``lo`` and ``hi``.

        ``stop == first`` when there is none: the interval cannot be split.
        """
        first = int(self.grid_index(np.array([lo]), strict=True)[0])
        stop = int(self.grid_index(np.array([hi]), strict=False)[0])
        return first, max(first, stop)


@dataclass(frozen=True)
class CategoricalColumn:
    """A categorical predictor: domain codes of its taxonomy."""

    name: Hashable
    taxonomy: Taxonomy
    codes: np.ndarray


Column = NumericColumn | CategoricalColumn


@dataclass(frozen=True)
class Prepared:
    """Everything the DiffGen builder needs, as arrays."""

    kind: str
    n_rows: int
    columns: list[Column]
    target: Hashable
    classes: np.ndarray
    class_labels: list[Any]
    class_domain: str  # "taxonomy", "classes" or "data"
    bounds_from_data: bool
    dropped: list[Hashable] = field(default_factory=list)


def _class_codes(
    table: TableData, target: Hashable, labels: list[Any] | None
) -> tuple[np.ndarray, list[Any]]:
    codes, categories = table.category_codes(target)
    missing = int((codes < 0).sum())
    if missing:
        raise missing_classes(target, missing)
    present = np.zeros(len(categories), dtype=bool)
    if codes.size:
        present[np.unique(codes)] = True
    if labels is None:
        labels = labels_from_data(c for c, p in zip(categories, present, strict=True) if p)
    lookup, outside = class_lookup(categories, labels)
    unknown = [categories[i] for i in outside if present[i]]
    if unknown:
        raise unknown_classes(target, unknown, labels)
    return lookup[codes], list(labels)


def missing_classes(target: Hashable, missing: int) -> ValueError:
    """Return the error of a target column with ``missing`` missing values."""
    return ValueError(
        f"the target column {target!r} has {missing} missing value(s); drop those rows "
        "or impute them with a public rule"
    )


def unknown_classes(target: Hashable, unknown: Sequence[Any], labels: list[Any]) -> ValueError:
    """Return the error of target values outside the class domain ``labels``."""
    shown = ", ".join(repr(v) for v in sorted(unknown, key=str)[:10])
    return ValueError(
        f"the target column {target!r} holds value(s) {shown} outside the class domain "
        f"{labels[:10]!r}; add them to {option('classes')} (or to the target's taxonomy)"
    )


def labels_from_data(used: Iterable[Any]) -> list[Any]:
    """Return the class domain read from the data: the values that occur, in a fixed order."""
    return sorted(used, key=lambda v: (str(type(v)), str(v)))


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


def prepare(
    table: TableData,
    target: Any,
    taxonomies: Any,
    bounds: Any,
    classes: Any,
) -> Prepared:
    """Check the arguments against the table and encode every column.

    Raises
    ------
    TypeError, ValueError, TaxonomyError
        See :func:`dpfast.diffgen`.
    """
    _check_table(table, target)
    taxonomies, bounds = _check_mappings(table, taxonomies, bounds)
    trees = {name: as_taxonomy(value, name) for name, value in taxonomies.items()}
    class_taxonomy = trees.pop(target, None)
    numeric_names = _numeric_names(table, target, trees, bounds)
    predictors = [c for c in table.names if c in trees or c in numeric_names]
    if not predictors:
        raise ValueError(
            "diffgen needs at least one predictor: give numeric columns public "
            + (
                'schema "bounds" and categorical columns a "taxonomy"'
                if in_cli()
                else "bounds= and categorical columns taxonomies="
            )
        )
    columns, derived = _encode_predictors(table, predictors, trees, numeric_names, bounds)
    labels, source = _class_domain(target, classes, class_taxonomy)
    class_codes, class_labels = _class_codes(table, target, labels)
    return Prepared(
        kind=table.kind,
        n_rows=table.n_rows,
        columns=columns,
        target=target,
        classes=np.ascontiguousarray(class_codes, dtype=np.int64),
        class_labels=class_labels,
        class_domain=source,
        bounds_from_data=derived,
        dropped=[c for c in table.names if c != target and c not in predictors],
    )


def _check_table(table: TableData, target: Any) -> None:
    if table.kind == "numpy":
        raise TypeError(
            "diffgen needs named columns: pass a pandas DataFrame or a pyarrow Table, not a "
            "NumPy array"
        )
    if table.n_rows == 0:
        raise ValueError("the table is empty (0 rows); diffgen needs at least one row")
    if not isinstance(target, Hashable) or target not in table.names:
        raise ValueError(
            f"target {target!r} is not a column; the table has columns {list(table.names)}"
        )


def _check_mappings(
    table: TableData, taxonomies: Any, bounds: Any
) -> tuple[Mapping[Any, Any], Any]:
    taxonomies = {} if taxonomies is None else taxonomies
    if not isinstance(taxonomies, Mapping):
        raise TypeError(
            "taxonomies must be a mapping {column: Taxonomy | ARX file | nested mapping}, got "
            f"{type(taxonomies).__name__}"
        )
    if bounds is None:
        bounds = {}
    if not (isinstance(bounds, Mapping) or (isinstance(bounds, str) and bounds == "data")):
        raise TypeError(
            f"bounds must be a mapping {{column: (lower, upper)}}, got {type(bounds).__name__}"
        )
    unknown = [
        c
        for c in (*taxonomies, *(bounds if isinstance(bounds, Mapping) else ()))
        if c not in table.names
    ]
    if unknown:
        raise ValueError(
            f"unknown column(s) {unknown} in taxonomies or bounds; the table has columns "
            f"{list(table.names)}"
        )
    return taxonomies, bounds


def _numeric_names(
    table: TableData, target: Hashable, trees: Mapping[Any, Taxonomy], bounds: Any
) -> list[Hashable]:
    """Return the numeric predictors: those with bounds (with "data": every numeric one)."""
    if not isinstance(bounds, Mapping):  # "data": every other non-taxonomy numeric column
        return [
            c
            for c in table.names
            if c != target
            and c not in trees
            and np.issubdtype(np.asarray(table.column(c)[:0]).dtype, np.number)
        ]
    if target in bounds:
        raise ValueError(
            f"the target {target!r} is categorical: drop it from bounds (give its public "
            "values in classes= or a taxonomy instead)"
        )
    both = [c for c in bounds if c in trees]
    if both:
        raise ValueError(
            f"column(s) {both} have both bounds and a taxonomy; a predictor is numeric "
            "(bounds) or categorical (taxonomy), not both"
        )
    return [c for c in table.names if c in bounds]


def _encode_predictors(
    table: TableData,
    predictors: list[Hashable],
    trees: Mapping[Any, Taxonomy],
    numeric_names: list[Hashable],
    bounds: Any,
) -> tuple[list[Column], bool]:
    """Every predictor's codes, and whether the numeric bounds came from the data."""
    raw_numeric = {}
    for name in numeric_names:
        raw = table.column(name)
        raw_numeric[name] = (as_numeric_column(raw, name), is_integer_column(raw))
    domains, derived = (
        check_bounds(
            bounds, numeric_names, {name: values for name, (values, _) in raw_numeric.items()}
        )
        if numeric_names
        else ({}, False)
    )
    columns: list[Column] = []
    for name in predictors:
        if name in trees:
            codes, categories = table.category_codes(name)
            leaf_codes = trees[name].encode_categories(codes, categories, column=name)
            columns.append(CategoricalColumn(name, trees[name], leaf_codes))
        else:
            values, integer = raw_numeric[name]
            lower, upper = domains[name]
            columns.append(_numeric_column(name, values, integer, lower, upper))
    return columns, derived


def _class_domain(
    target: Hashable, classes: Any, class_taxonomy: Taxonomy | None
) -> tuple[list[Any] | None, str]:
    """Return the public class values and their source (None: read from the data)."""
    if classes is not None and class_taxonomy is not None:
        raise ValueError(
            f"the class domain is given twice ({option('classes')} and the taxonomy of "
            f"{target!r}); keep one"
        )
    if class_taxonomy is not None:
        return list(class_taxonomy.domain), "taxonomy"
    if classes is not None:
        if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
            raise TypeError(f"{option('classes')} must be a list of class labels, got {classes!r}")
        labels = list(classes)
        if not labels or len(set(map(str, labels))) != len(labels):
            raise ValueError(
                f"{option('classes')} must be non-empty and without repeats, got {labels!r}"
            )
        return labels, "classes"
    warnings.warn(
        f"the class domain of {target!r} is read from the data (which class values "
        "occur), which is not differentially private; pass the public classes= (or a "
        "taxonomy for the target)",
        PrivacyLeakWarning,
        stacklevel=5,
    )
    return None, "data"


def _numeric_column(
    name: Hashable, values: np.ndarray, integer: bool, lower: float, upper: float
) -> NumericColumn:
    lower, upper = numeric_domain(name, integer, lower, upper)
    clipped = np.clip(values, lower, upper)
    clamped = int(np.count_nonzero((values < lower) | (values > upper)))
    if offset_coded(integer, lower, upper):
        codes = (clipped - lower).astype(np.int64)
        code_values = np.arange(lower, upper + 1, dtype=np.float64)
    else:
        code_values, inverse = np.unique(clipped, return_inverse=True)
        codes = inverse.astype(np.int64).reshape(-1)
    step = 1.0 if integer else split_grid_step(lower, upper)
    return NumericColumn(name, integer, lower, upper, codes, code_values, clamped, step)


def numeric_domain(
    name: Hashable, integer: bool, lower: float, upper: float
) -> tuple[float, float]:
    """Return a numeric predictor's public domain: an integer column's is rounded inwards."""
    if not integer:
        return lower, upper
    lower_int, upper_int = math.ceil(lower), math.floor(upper)
    if lower_int > upper_int:
        raise ValueError(
            f"bounds[{name!r}] = ({lower}, {upper}) holds no integer; widen the bounds"
        )
    return float(lower_int), float(upper_int)


def offset_coded(integer: bool, lower: float, upper: float) -> bool:
    """Whether a numeric predictor is coded ``value - lower`` (else by rank among its values)."""
    return integer and upper - lower + 1 <= _OFFSET_CODES_MAX


def split_grid_step(lower: float, upper: float) -> float:
    """Return the grid step of a float column's split values: a power of two, from the bounds.

    The step of the exact grid (:class:`dpfast.partitions.grid.Grid`: at most 2**40 steps
    over the public domain; DiffGen's row count is not public, so the grid is chosen as
    for a single record and does not depend on it), made coarser when the bounds are far
    from 0 compared with their width, so that every grid index in the domain is below
    2**52 in magnitude and every grid point ``k * step`` is a float64
    (docs/design.md#diffgen-split).
    """
    gamma = Grid.for_column(lower, upper, 1).gamma
    _, exponent = math.frexp(max(abs(lower), abs(upper)))  # |bound| < 2**exponent
    return max(gamma, math.ldexp(1.0, exponent - _INDEX_BITS), math.ldexp(1.0, -1074))
