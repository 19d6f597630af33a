"""What the engines and the methods exchange: column descriptors, results, helpers.

The engine protocol (:class:`~dpfast.engines.base.Engine`) takes and returns these.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from dpfast._validation import option, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.taxonomy import Taxonomy

__all__ = [
    "Bins",
    "CategoricalColumn",
    "Cells",
    "Classes",
    "ClusterTotals",
    "Clusters",
    "CodeCells",
    "CodedNumeric",
    "Contingency",
    "GroupCodes",
    "GroupValues",
    "Lookup",
    "NumericColumn",
    "Opening",
    "OrderStatistics",
    "Progress",
    "ProtectedColumn",
    "PublishHook",
    "RangeValues",
    "check_in_domain",
    "code_dtype",
    "column_threads",
    "holding_dtype",
    "inverse_permutation",
    "own_dtype",
    "partition_inputs",
    "widened_note",
]


#: ``progress(phase, done, total)``.
Progress = Callable[[str, int, int], None]


#: Called with the public report once the output is complete, just before it is made
#: visible (a budget's spend is committed there).
PublishHook = Callable[[Any], None]


@dataclass(frozen=True)
class Opening:
    """What one release asks of the engine it opens (``Engine.open``), the same on every engine.

    Attributes
    ----------
    method : str
        The release method's name, for messages.
    output : str, os.PathLike or None
        Where the release is written (None: returned only, in memory).
    memory_limit : int or None
        Working memory in bytes of an engine that reads in passes (None: its default, or none).
    progress : callable or None
        Called as ``progress(phase, done, total)``.
    metrics : bool
        The release adds utility metrics (compared with its input) to its private report.
    risk : bool
        The release measures its disclosure risk (against its input) into its private report.
    reads_only : bool
        Read only the input's names, size and types and write nothing (a forecast; no ``output``).

    Examples
    --------
    >>> opening = Opening("ir_dp", memory_limit=2**30)
    >>> opening.output is None, opening.metrics
    (True, False)
    >>> opening.refuse_comparisons("out of core")  # neither metrics nor risk: no refusal
    """

    method: str
    output: str | os.PathLike[str] | None = None
    memory_limit: int | None = None
    progress: Progress | None = None
    metrics: bool = False
    risk: bool = False
    reads_only: bool = False

    def refuse_comparisons(self, where: str, in_memory: str = "the table") -> None:
        """Refuse ``metrics`` and ``risk`` on an engine that does not hold the release.

        Both pair each released value with its source row, in memory; ``where`` says
        where this release is, ``in_memory`` what a user releases in memory instead.
        """
        if self.metrics:
            raise DPFastValueError(
                f"{self.method}: {option('metrics', True)} compares the release with the "
                f"original row by row, which a release {where} does not hold; drop it, and "
                f"release {in_memory} in memory, or compare the published output with the "
                "input afterwards (dpfast compare)"
            )
        if self.risk:
            raise DPFastValueError(
                f"{self.method}: {option('risk', True)} pairs each released row with its "
                f"source, which needs the original and the release in memory, and a release "
                f"{where} holds neither; drop it and measure the published output afterwards "
                "(dpfast evaluate, for a release that keeps the row order), or release "
                f"{in_memory} in memory with {option('risk', True)}"
            )


@dataclass(frozen=True)
class NumericColumn:
    """A protected numeric column: its name, whether it is integer, and its output dtype.

    ``values`` holds the column as float64 on an engine that holds it (in memory, never
    written), else is empty. ``dtype`` is the input's own (:func:`own_dtype`) until
    :meth:`within` fits it to the public ``domain``, which the released values lie in.
    """

    name: Hashable
    values: np.ndarray
    integer: bool
    dtype: np.dtype[Any]
    domain: tuple[float, float] | None = None

    def restore_dtype(self, released: np.ndarray) -> np.ndarray:
        """Give released float64 values the column's dtype (rounded and in bounds already).

        A float type narrower than float64 rounds each value to its nearest, then keeps it
        in the domain: a bound that the type cannot hold becomes the nearest value inside.
        """
        if released.dtype == self.dtype:
            return released
        out = released.astype(self.dtype)
        if self.dtype.kind == "f" and self.domain is not None:
            lower, upper = _inner_bounds(self.dtype, *self.domain)
            np.clip(out, lower, upper, out=out)
        return out

    def within(self, lower: float, upper: float) -> NumericColumn:
        """Return the column released in a type that holds every value of ``[lower, upper]``.

        The public bounds decide, never the data (:func:`holding_dtype`): no value wraps around.
        """
        dtype = holding_dtype(self.dtype, self.integer, lower, upper, self.name)
        return replace(self, dtype=dtype, domain=(float(lower), float(upper)))


def own_dtype(dtype: np.dtype[Any], integer: bool) -> np.dtype[Any]:
    """Return a protected column's output type before its bounds are known: its own type.

    A column released as its own kind (integer or boolean as integers, float as floats)
    keeps its type; else an integer column takes float64, a float column int64.
    """
    if integer:
        return dtype if dtype.kind in "iub" else np.dtype(np.int64)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


_SIGNED = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
_UNSIGNED = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))


def holding_dtype(
    dtype: np.dtype[Any], integer: bool, lower: float, upper: float, name: Hashable = None
) -> np.dtype[Any]:
    """Return the type of a protected column's released values, in ``[lower, upper]``.

    A float column keeps its float type when that holds the bounds, else becomes float64.
    An integer column keeps its type when that holds every integer of ``[floor(lower),
    ceil(upper)]`` (a boolean: 0 and 1), else takes the narrowest wider type that does: of
    the same signedness, or signed when an unsigned column's lower bound is negative.

    Examples
    --------
    >>> holding_dtype(np.dtype("uint8"), True, 0, 1000)
    dtype('uint16')
    >>> holding_dtype(np.dtype("uint8"), True, -5, 200)
    dtype('int16')
    >>> holding_dtype(np.dtype("float32"), False, 0.0, 1.5)
    dtype('float32')
    """
    if not integer:
        if dtype.kind == "f" and float(np.finfo(dtype).max) >= max(abs(lower), abs(upper)):
            return dtype
        return np.dtype(np.float64)
    lo, hi = math.floor(lower), math.ceil(upper)
    if dtype.kind == "b" and 0 <= lo and hi <= 1:
        return dtype
    if dtype.kind in "iu" and _holds(dtype, lo, hi):
        return dtype
    unsigned = dtype.kind in "ub" and lo >= 0
    for candidate in _UNSIGNED if unsigned else _SIGNED:
        if candidate.itemsize >= dtype.itemsize and _holds(candidate, lo, hi):
            return candidate
    raise DPFastValueError(
        f"column {quoted(name)} is integer, and no integer type holds its bounds "
        f"[{quoted(lower)}, {quoted(upper)}]; narrow the bounds to what the column can hold "
        "(int64: "
        f"[{-(2**63)}, {2**63 - 1}]), or protect it as a float column"
    )


def _holds(dtype: np.dtype[Any], lo: int, hi: int) -> bool:
    info = np.iinfo(dtype)
    return bool(info.min <= lo and hi <= info.max)


def _inner_bounds(dtype: np.dtype[Any], lower: float, upper: float) -> tuple[Any, Any]:
    """Return the smallest and largest values of float type ``dtype`` in ``[lower, upper]``."""
    lo, hi = dtype.type(lower), dtype.type(upper)
    if float(lo) < lower:
        lo = np.nextafter(lo, dtype.type(np.inf))
    if float(hi) > upper:
        hi = np.nextafter(hi, dtype.type(-np.inf))
    return lo, hi


def widened_note(before: NumericColumn, after: NumericColumn) -> str | None:
    """Return the report's note for a column whose type changed to hold its bounds, if it did."""
    if before.dtype == after.dtype or after.domain is None:
        return None
    lower, upper = after.domain
    return (
        f"column {quoted(before.name)}: its type {before.dtype} cannot hold every value of "
        f"its public bounds [{lower:g}, {upper:g}], so it is released as {after.dtype}"
    )


@dataclass(frozen=True)
class CategoricalColumn:
    """A protected categorical column: int64 codes of its taxonomy's leaves.

    ``codes`` is empty on an engine that reads the column in passes. ``categories`` are
    those the column's type declares, in order (a pandas ordered categorical, a polars
    ``Enum``, an ordered Arrow dictionary: :func:`dpfast.io.released_categories`), else None.
    """

    name: Hashable
    codes: np.ndarray
    taxonomy: Taxonomy
    categories: tuple[str, ...] | None = None


#: A protected column of either kind: what a rank-group output releases.
ProtectedColumn = NumericColumn | CategoricalColumn


class Cells(Protocol):
    """A released column computed row by row: ``cells(values, first_row)``.

    ``values`` are a protected column's float64 values of rows ``first_row, ...``, checked
    as every protected value is. Returns the released float64 values of the same rows and
    int64 counts the engine adds up over all batches. Keyed draws read the column's stream
    from ``first_row``, so the release does not depend on how the rows are cut.
    """

    def __call__(self, values: np.ndarray, first_row: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the released values of the batch and its counts."""
        ...


#: ``values(sums)``: every rank group's released value from the groups' exact sums.
GroupValues = Callable[[np.ndarray], np.ndarray]

#: ``values(sums, first_group)``: the released values of groups ``first_group ..`` from their
#: exact sums alone (noise keyed by group), so a task holding some computes theirs
#: (:meth:`Engine.write_rank_groups`).
RangeValues = Callable[[np.ndarray, int], np.ndarray]

#: ``codes(counts, first, stop)``: the released codes of a categorical column's rank groups
#: ``first .. stop - 1`` from its records per taxonomy rank alone (draws keyed by group), so a
#: task holding some of its ranks computes theirs (:meth:`Engine.write_category_groups`).
GroupCodes = Callable[[np.ndarray, int, int], np.ndarray]

#: ``(X_(1), X_(k), X_(n-k+1), X_(n), X_(i), X_(i+k), inner)``: the ``order_statistics``
#: step (:mod:`dpfast.steps.spacings`).
OrderStatistics = tuple[float, float, float, float, float, float, bool]


@dataclass(frozen=True)
class Bins:
    """Equal-width bins over a numeric column, and how many of its values each holds.

    Value ``v`` is in bin ``min(int((v - lo) * scale), m - 1)`` (float64, monotone in ``v``),
    ``m = len(counts)``; ``scale`` is ``m / (max - min)``, or 0 for a constant column (one bin).
    """

    lo: float
    scale: float
    counts: np.ndarray

    @property
    def m(self) -> int:
        """The number of bins."""
        return int(self.counts.shape[0])

    @property
    def starts(self) -> np.ndarray:
        """Each bin's first position in the pool that lists the values bin by bin."""
        starts = np.zeros(self.m, dtype=np.int64)
        np.cumsum(self.counts[:-1], out=starts[1:])
        return starts

    def of(self, values: np.ndarray) -> np.ndarray:
        """Return each value's bin (int64)."""
        index = ((values - self.lo) * self.scale).astype(np.int64)
        return np.minimum(index, self.m - 1)


class CodeCells(Protocol):
    """A coded column released row by row: ``cells(codes, first_row)``.

    ``codes`` (of :func:`code_dtype`) index a public domain, for rows ``first_row, ...``;
    returns the same rows' released codes, same dtype (keyed draws as in :class:`Cells`).
    """

    def __call__(self, codes: np.ndarray, first_row: int) -> np.ndarray:
        """Return the released codes of the batch."""
        ...


@dataclass(frozen=True)
class Clusters:
    """A partition of the rows into ``count`` clusters, numbered by first appearance.

    Cluster ``c`` holds ``sizes[c]`` rows. ``labels`` holds each row's cluster where the
    rows are held in memory; where they were read in passes it is empty, and ``held`` is the
    :class:`~dpfast.dataflow.cluster_files.Partition` of scratch files that holds them.
    """

    count: int
    sizes: np.ndarray
    labels: np.ndarray
    held: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, labels: np.ndarray) -> Clusters:
        """Return the clusters of in-memory ``labels`` (int64, numbered by first appearance)."""
        count = int(labels.max()) + 1 if labels.shape[0] else 0
        return cls(count, np.bincount(labels, minlength=count).astype(np.int64), labels)


@dataclass(frozen=True)
class ClusterTotals:
    """What a release needs of each cluster (:func:`dpfast.steps.cluster_totals`).

    Numeric column ``j``: ``sums[j]`` (int64, per cluster) its exact integer sums on its grid,
    ``clamped[j]`` its values outside the grid's domain. Categorical column ``j``:
    ``counts[j]`` (int64, ``(clusters, leaves)``) its records per leaf of its taxonomy.
    """

    sums: list[np.ndarray]
    clamped: list[int]
    counts: list[np.ndarray]


@dataclass(frozen=True)
class CodedNumeric:
    """A numeric column coded within its public bounds, for the ``contingency`` step.

    Values are clamped to ``[lower, upper]``; a value's code is ``value - lower`` if
    ``by_offset`` (an integer column of modest range), else its rank among the distinct ones.
    """

    column: NumericColumn
    lower: float
    upper: float
    by_offset: bool


class Lookup(Protocol):
    """A column's values as codes ``0 .. size - 1``: ``lookup(categories) -> (codes, outside)``.

    ``categories`` are distinct values of the column; ``codes`` is int64, at least one entry,
    ``-1`` outside. A module-level callable of the method (a cluster ships it to its workers).
    """

    @property
    def size(self) -> int:
        """The number of codes."""
        ...

    def __call__(self, categories: Sequence[Any]) -> tuple[np.ndarray, list[int]]:
        """Return each category's code, and the indices of those outside."""
        ...


@dataclass(frozen=True)
class Classes:
    """Every record's class: a column coded by a :class:`Lookup` (the ``class_codes`` step).

    ``missing`` counts its missing values, ``unknown`` lists its values outside the lookup
    (each once); the release may use it only when both are empty. ``codes`` is the engine's
    own: the codes in memory; out of core, the function that codes a batch in each pass.
    """

    size: int
    missing: int
    unknown: list[Any]
    codes: Any = None


class Contingency(ABC):
    """Coded columns beside every record's class, refined label by label (a generalisation).

    Column ``j`` has codes ``0 .. n_codes[j] - 1`` (a categorical column: its taxonomy's
    leaves; a numeric one: :class:`CodedNumeric`, whose code values and clamped count are
    ``code_values[j]`` and ``clamped[j]``). Every record carries one label per column
    (:meth:`start`, :meth:`split`, :meth:`cells`), which depends on its code there only, so
    an engine may count by codes (out of core) or keep the records of every label (in memory).
    """

    def __init__(
        self,
        n_classes: int,
        n_codes: list[int],
        code_values: list[np.ndarray | None],
        clamped: list[int],
    ) -> None:
        self.n_classes = n_classes
        self.n_codes = n_codes
        self.code_values = code_values
        self.clamped = clamped

    @abstractmethod
    def counts(self, column: int) -> np.ndarray:
        """Return every record's int64 (code, class) counts: ``(n_codes[column], n_classes)``."""

    @abstractmethod
    def start(self, labels: Sequence[int]) -> None:
        """Give every record label ``labels[j]`` on column ``j`` (non-negative ints)."""

    @abstractmethod
    def split(
        self, column: int, label: int, child_of: np.ndarray, offset: int, children: np.ndarray
    ) -> np.ndarray:
        """Relabel the records of ``label`` on ``column`` by their code ``c`` there.

        Each gets label ``children[child_of[c - offset]]``: ``child_of`` (int64) covers
        codes ``offset .. offset + len(child_of) - 1``, which hold every code of the
        label's records, ``-1`` for the codes no record of the label has. Returns the
        label's records' (code, class) counts over those codes (zero where ``child_of`` is
        ``-1``): int64, shape ``(len(child_of), n_classes)``.
        """

    @abstractmethod
    def cells(self, position: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
        """Return the class counts of every cell: int64, shape ``(prod(sizes), n_classes)``.

        A record's cell has coordinate ``position[label]`` (in ``0 .. sizes[j] - 1``) on column
        ``j``, its final label there; cells are in C order (the first column varies slowest).
        """


def column_threads(n_threads: Any, n_columns: int | None = None) -> int:
    """Return a valid thread count; the default is one per core (at most one per column)."""
    import os

    from dpfast._validation import check_threads

    cores = os.cpu_count() or 1
    return check_threads(n_threads, cores if n_columns is None else min(n_columns, cores))


def code_dtype(m: int) -> type[np.signedinteger[Any]]:
    """Return the smallest signed integer type that holds the codes of ``m`` categories."""
    for dtype in (np.int8, np.int16, np.int32):
        if m <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def check_in_domain(name: Hashable, missing: int, outside: Sequence[Any]) -> None:
    """Refuse a coded column's ``missing`` values and its values ``outside`` its domain.

    ``outside`` lists them in the order found (the first five are named).
    """
    if missing:
        raise DPFastValueError(
            f"column {quoted(name)} has {missing} missing value(s); impute them with a public "
            "rule, or add an explicit category for them to the domain"
        )
    if len(outside):
        raise DPFastValueError(
            f"column {quoted(name)} holds value(s) outside the domain: "
            f"{quoted(list(outside), listed=True)}; add them "
            "to the public domain or recode them (the domain is never taken from the data)"
        )


def inverse_permutation(permutation: np.ndarray) -> np.ndarray:
    """Return the inverse of a permutation of ``0 .. n-1``."""
    inverse = np.empty_like(permutation)
    inverse[permutation] = np.arange(permutation.shape[0], dtype=permutation.dtype)
    return inverse


def partition_inputs(
    numeric: Sequence[NumericColumn], categorical: Sequence[CategoricalColumn], n_records: int
) -> tuple[np.ndarray, np.ndarray, list[Taxonomy]]:
    """Return the numeric matrix ``(n, m)``, categorical codes ``(n, c)`` and their taxonomies.

    The columns' values held in memory, side by side, as the partitions take them.
    """
    matrix = np.column_stack([c.values for c in numeric]) if numeric else np.zeros((n_records, 0))
    codes = (
        np.column_stack([c.codes for c in categorical])
        if categorical
        else np.zeros((n_records, 0), dtype=np.int64)
    )
    return matrix, codes, [c.taxonomy for c in categorical]
