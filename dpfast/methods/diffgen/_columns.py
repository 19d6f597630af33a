"""Validate DiffGen's inputs and have the engine code its columns as integer codes.

Categorical predictors become domain codes of their taxonomy (dictionary-encoded first:
pandas categoricals and Arrow dictionaries keep their own codes). Numeric predictors are
clamped to their public bounds and coded once: integer columns of modest range by
``value - lower``, other columns by their rank among the sorted distinct values
(:class:`~dpfast.engines.base.CodedNumeric`). The class column becomes codes into its
domain (:class:`ClassLookup`). The engine keeps the codes beside the classes
(:class:`~dpfast.engines.base.Contingency`): in memory whole, out of core as counts.

Whether a numeric predictor is an integer column comes from its dtype alone, never from
its values: a float64 column whose values are all whole is a float column, with a float
root interval and split values on its float grid (docs/design.md#diffgen-split).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfast._release import CategoricalColumn as CategoricalColumnSpec
from dpfast._release import ClassLookup as ClassLookup
from dpfast._release import CodedNumeric, Contingency, Engine
from dpfast._validation import check_bounds, in_cli, option, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError, PrivacyLeakWarning
from dpfast.io import check_declared
from dpfast.partitions.grid import Grid
from dpfast.steps import (
    class_codes,
    declared_categories,
    numeric_names,
    occurring_values,
    value_range,
)
from dpfast.steps import contingency as coded_contingency
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
    the values ``x < s`` left (docs/design.md#diffgen-split). The codes stay with the
    engine (:attr:`Prepared.contingency`).
    """

    name: Hashable
    integer: bool
    lower: float
    upper: float
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
    """A categorical predictor: domain codes of its taxonomy (kept by the engine)."""

    name: Hashable
    taxonomy: Taxonomy


Column = NumericColumn | CategoricalColumn


@dataclass(frozen=True)
class Prepared:
    """Everything the DiffGen builder needs: the predictors, the classes, their counts."""

    columns: list[Column]
    target: Hashable
    class_labels: list[Any]
    class_domain: str  # "taxonomy", "classes" or "data"
    bounds_from_data: bool
    contingency: Contingency
    dropped: list[Hashable] = field(default_factory=list)
    # the categories the target's type declares, in their order (kept by the counts)
    class_categories: tuple[str, ...] | None = None


def missing_classes(target: Hashable, missing: int) -> ValueError:
    """Return the error of a target column with ``missing`` missing values."""
    return DPFastValueError(
        f"the target column {quoted(target)} has {missing} missing value(s); drop those rows "
        "or impute them with a public rule"
    )


def unknown_classes(target: Hashable, unknown: Sequence[Any], labels: list[Any]) -> ValueError:
    """Return the error of target values outside the class domain ``labels``."""
    return DPFastValueError(
        f"the target column {quoted(target)} holds value(s) "
        f"{quoted(sorted(unknown, key=str), listed=True)} outside the class domain "
        f"{quoted(labels)}; add them to {option('classes')} (or to the target's taxonomy)"
    )


def labels_from_data(used: Iterable[Any]) -> list[Any]:
    """Return the class domain read from the data: the values that occur, in a fixed order."""
    return sorted(used, key=lambda v: (str(type(v)), str(v)))


def prepare(
    engine: Engine,
    target: Any,
    taxonomies: Any,
    bounds: Any,
    classes: Any,
    reserve: Callable[[list[Hashable]], None] | None = None,
) -> Prepared:
    """Check the arguments against the table, then have ``engine`` code every column.

    The arguments are checked first (and the numeric predictors' types and, in memory,
    values); ``reserve(released columns)`` is then called before any pass over the data.

    Raises
    ------
    TypeError, ValueError, TaxonomyError
        See :func:`dpfast.diffgen`.
    """
    plan = _Plan.check(engine, target, taxonomies, bounds, classes)
    if reserve is not None:
        reserve([*plan.predictors, target])
    categorical = engine.categorical_columns(plan.trees)
    labels = plan.labels
    if labels is None:
        labels = labels_from_data(occurring_values(engine.dataflow, target))
    found = class_codes(engine.dataflow, target, ClassLookup(tuple(labels)))
    if found.missing:
        raise missing_classes(target, found.missing)
    if found.unknown:
        raise unknown_classes(target, found.unknown, labels)
    by_name: dict[Hashable, CodedNumeric | CategoricalColumnSpec] = {
        **{c.name: c for c in categorical},
        **{c.column.name: c for c in plan.numeric},
    }
    predictors = [by_name[name] for name in plan.predictors]
    contingency = coded_contingency(engine.dataflow, found, predictors)
    columns: list[Column] = []
    for j, name in enumerate(plan.predictors):
        if name in plan.trees:
            columns.append(CategoricalColumn(name, plan.trees[name]))
            continue
        coded, values = by_name[name], contingency.code_values[j]
        assert isinstance(coded, CodedNumeric) and values is not None
        integer, lower, upper = coded.column.integer, coded.lower, coded.upper
        step = 1.0 if integer else split_grid_step(lower, upper)
        clamped = contingency.clamped[j]
        columns.append(NumericColumn(name, integer, lower, upper, values, clamped, step))
    declared = declared_categories(engine.dataflow, target)
    return Prepared(
        columns=columns,
        target=target,
        class_labels=list(labels),
        class_domain=plan.class_domain,
        bounds_from_data=plan.derived,
        contingency=contingency,
        dropped=[c for c in engine.names if c != target and c not in plan.predictors],
        class_categories=check_declared(target, declared, labels),
    )


@dataclass(frozen=True)
class _Plan:
    """The arguments checked against the table's columns, before any pass over the data."""

    predictors: list[Hashable]
    trees: dict[Hashable, Taxonomy]
    numeric: list[CodedNumeric]
    derived: bool
    labels: list[Any] | None
    class_domain: str

    @classmethod
    def check(
        cls, engine: Engine, target: Any, taxonomies: Any, bounds: Any, classes: Any
    ) -> _Plan:
        _check_table(engine, target)
        taxonomies, bounds = _check_mappings(engine.names, taxonomies, bounds)
        trees = {name: as_taxonomy(value, name) for name, value in taxonomies.items()}
        class_taxonomy = trees.pop(target, None)
        numeric_names = _numeric_names(engine, target, trees, bounds)
        predictors = [c for c in engine.names if c in trees or c in numeric_names]
        if not predictors:
            raise DPFastValueError(
                "diffgen needs at least one predictor: give numeric columns public "
                + (
                    'schema "bounds" and categorical columns a "taxonomy"'
                    if in_cli()
                    else "bounds= and categorical columns taxonomies="
                )
            )
        numeric, derived = _numeric_predictors(engine, numeric_names, bounds)
        labels, source = _class_domain(target, classes, class_taxonomy)
        in_order = {name: trees[name] for name in predictors if name in trees}
        return cls(predictors, in_order, numeric, derived, labels, source)


def _check_table(engine: Engine, target: Any) -> None:
    if engine.n_rows == 0:
        raise DPFastValueError("the table is empty (0 rows); diffgen needs at least one row")
    if not isinstance(target, Hashable) or target not in engine.names:
        raise DPFastValueError(
            f"target {quoted(target)} is not a column; the table has columns "
            f"{quoted(list(engine.names))}"
        )


def _check_mappings(
    names: Sequence[Hashable], taxonomies: Any, bounds: Any
) -> tuple[Mapping[Any, Any], Any]:
    taxonomies = {} if taxonomies is None else taxonomies
    if not isinstance(taxonomies, Mapping):
        raise DPFastTypeError(
            "taxonomies must be a mapping {column: Taxonomy | ARX file | nested mapping}, got "
            f"{type(taxonomies).__name__}"
        )
    if bounds is None:
        bounds = {}
    if not (isinstance(bounds, Mapping) or (isinstance(bounds, str) and bounds == "data")):
        raise DPFastTypeError(
            f"bounds must be a mapping {{column: (lower, upper)}}, got {type(bounds).__name__}"
        )
    unknown = [
        c for c in (*taxonomies, *(bounds if isinstance(bounds, Mapping) else ())) if c not in names
    ]
    if unknown:
        raise DPFastValueError(
            f"unknown column(s) {quoted(unknown)} in taxonomies or bounds; the table has "
            f"columns {quoted(list(names))}"
        )
    return taxonomies, bounds


def _numeric_names(
    engine: Engine, target: Hashable, trees: Mapping[Any, Taxonomy], bounds: Any
) -> list[Hashable]:
    """Return the numeric predictors: those with bounds (with "data": every numeric one)."""
    if not isinstance(bounds, Mapping):  # "data": every other non-taxonomy numeric column
        others = [c for c in engine.names if c != target and c not in trees]
        return numeric_names(engine.dataflow, others)
    if target in bounds:
        raise DPFastValueError(
            f"the target {quoted(target)} is categorical: drop it from bounds (give its public "
            "values in classes= or a taxonomy instead)"
        )
    both = [c for c in bounds if c in trees]
    if both:
        raise DPFastValueError(
            f"column(s) {both} have both bounds and a taxonomy; a predictor is numeric "
            "(bounds) or categorical (taxonomy), not both"
        )
    return [c for c in engine.names if c in bounds]


def _numeric_predictors(
    engine: Engine, names: list[Hashable], bounds: Any
) -> tuple[list[CodedNumeric], bool]:
    """Every numeric predictor's coding, and whether the bounds came from the data.

    Public bounds are checked before the columns; bounds from the data need their values.
    """
    if not names:
        return [], False
    if isinstance(bounds, Mapping):
        domains, derived = check_bounds(bounds, names, {}, engine.names)
    columns = engine.numeric_columns(names, categorical=False)
    if not isinstance(bounds, Mapping):
        by_name = {c.name: c for c in columns}
        flow = engine.dataflow
        domains, derived = check_bounds(bounds, names, lambda n: value_range(flow, by_name[n]))
    coded = []
    for column in columns:
        lower, upper = numeric_domain(column.name, column.integer, *domains[column.name])
        coded.append(CodedNumeric(column, lower, upper, offset_coded(column.integer, lower, upper)))
    return coded, derived


def _class_domain(
    target: Hashable, classes: Any, class_taxonomy: Taxonomy | None
) -> tuple[list[Any] | None, str]:
    """Return the public class values and their source (None: read from the data)."""
    if classes is not None and class_taxonomy is not None:
        raise DPFastValueError(
            f"the class domain is given twice ({option('classes')} and the taxonomy of "
            f"{quoted(target)}); keep one"
        )
    if class_taxonomy is not None:
        return list(class_taxonomy.domain), "taxonomy"
    if classes is not None:
        if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
            raise DPFastTypeError(
                f"{option('classes')} must be a list of class labels, got {quoted(classes)}"
            )
        labels = list(classes)
        if not labels or len(set(map(str, labels))) != len(labels):
            raise DPFastValueError(
                f"{option('classes')} must be non-empty and without repeats, got {quoted(labels)}"
            )
        return labels, "classes"
    warnings.warn(
        f"the class domain of {quoted(target)} is read from the data (which class values "
        "occur), which is not differentially private; pass the public classes= (or a "
        "taxonomy for the target)",
        PrivacyLeakWarning,
        stacklevel=5,
    )
    return None, "data"


def numeric_domain(
    name: Hashable, integer: bool, lower: float, upper: float
) -> tuple[float, float]:
    """Return a numeric predictor's public domain: an integer column's is rounded inwards."""
    if not integer:
        return lower, upper
    lower_int, upper_int = math.ceil(lower), math.floor(upper)
    if lower_int > upper_int:
        raise DPFastValueError(
            f"bounds[{quoted(name)}] = ({lower}, {upper}) holds no integer; widen the bounds"
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
