"""The engine protocol: the primitives every method's release is written over (docs/engines.md).

A method says *what* once (validation, plan, ledger, noise keys, report) and asks an
:class:`Engine` for each step that touches the data. An engine says *how* for one place
where data lives: in memory (:mod:`dpfast.engines.memory`), in files beyond memory
(:mod:`dpfast.engines.outofcore`), on Spark or on Dask. Every random draw is keyed by what
it is for (a column, a rank group, a bucket of a permutation), never by how the data was
split, so a seeded release is the same on every engine.

The primitives:

* **the input**: :attr:`Engine.n_rows`, :attr:`Engine.names`, the protected columns
  checked as every engine checks them (:meth:`Engine.numeric_columns`,
  :meth:`Engine.categorical_columns`);
* **work over columns**: :meth:`Engine.each_column`, columns in parallel as the engine
  sees fit, results in column order;
* **passes**: :meth:`Engine.group_sums` (exact integer sums of a column's rank groups on
  its public grid), :meth:`Engine.rank_counts` (a categorical column's records per
  taxonomy rank);
* **outputs**, one released column each: :meth:`Engine.write_rows` (a function of each
  row's value and keyed draw, in row order), :meth:`Engine.write_groups` (rank-group
  values in a keyed permutation), :meth:`Engine.write_linked` (rank-group values at their
  rows' places, record-linked), :meth:`Engine.copy_columns` (columns not protected,
  unchanged, in the rows' order or a keyed one);
* **clusters** (rows partitioned, each cluster released as one value per column):
  :meth:`Engine.insensitive_clusters` (the insensitive MDAV partition under a
  data-independent reference sequence), :meth:`Engine.cluster_totals` (each cluster's
  exact integer grid sums and records per leaf), :meth:`Engine.write_clusters` (each
  row's cluster value, rows in a keyed order);
* **class counts** of columns coded for a generalisation: the values that occur in a
  column (:meth:`Engine.occurring_values`), every record's class
  (:meth:`Engine.class_codes`), and a :class:`Contingency` of coded columns
  (:meth:`Engine.contingency`) whose records are refined label by label; a table the
  method computed from them is its output (:meth:`Engine.write_table`);
* **row-wise statistics and outputs**: :meth:`Engine.order_statistics` (the extremes of
  the spacings between every ``k`` consecutive ranks), :meth:`Engine.bin_counts` (an
  equal-width histogram), :meth:`Engine.write_resampled` (each row kept or replaced by a
  keyed draw from its own bin), :meth:`Engine.value_dtype` and :meth:`Engine.write_codes`
  (a column coded by a public domain, released row by row as its labels);
* **the end**: :meth:`Engine.publish` makes the output visible at once (atomically, for
  an engine that writes files) and returns the released data; :meth:`Engine.close`
  removes what a failed or interrupted release left.

An engine never imports a method; the per-batch functions a method hands over
(:class:`Cells`) are module-level callables, so that a cluster can ship them to its
workers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import ReferenceGeometry
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
    "Engine",
    "GroupValues",
    "Lookup",
    "NumericColumn",
    "OrderStatistics",
    "Progress",
    "PublishHook",
    "check_in_domain",
    "code_dtype",
    "column_threads",
    "inverse_permutation",
    "partition_inputs",
]

T = TypeVar("T")
R = TypeVar("R")

#: ``progress(phase, done, total)``.
Progress = Callable[[str, int, int], None]
#: Called with the public report once the output is complete, just before it is made
#: visible (a budget's spend is committed there).
PublishHook = Callable[[Any], None]


@dataclass(frozen=True)
class NumericColumn:
    """A protected numeric column: its name, whether it is integer, and its output dtype.

    ``values`` holds the column as float64 on an engine that holds it (in memory, never
    written); an engine that reads it in passes holds an empty array.
    """

    name: Hashable
    values: np.ndarray
    integer: bool
    dtype: np.dtype[Any]

    def restore_dtype(self, released: np.ndarray) -> np.ndarray:
        """Give an integer column its dtype back (values are already rounded and in bounds)."""
        return released.astype(self.dtype) if self.integer else released


@dataclass(frozen=True)
class CategoricalColumn:
    """A protected categorical column: int64 codes of its taxonomy's leaves.

    ``codes`` is empty on an engine that reads the column in passes.
    """

    name: Hashable
    codes: np.ndarray
    taxonomy: Taxonomy


class Cells(Protocol):
    """A released column computed row by row: ``cells(values, first_row)``.

    ``values`` are the float64 values of rows ``first_row, first_row + 1, ...`` of a
    protected column, checked as the engine checks every protected value. Returns the
    released float64 values of the same rows (keyed draws read the column's stream from
    ``first_row``, so the release does not depend on how the rows are cut) and an int64
    array of counts that the engine adds up over all batches.
    """

    def __call__(self, values: np.ndarray, first_row: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the released values of the batch and its counts."""
        ...


#: ``values(sums)``: every rank group's released value from the groups' exact sums.
GroupValues = Callable[[np.ndarray], np.ndarray]

#: ``(X_(1), X_(k), X_(n-k+1), X_(n), X_(i), X_(i+k), inner)``: :meth:`Engine.order_statistics`.
OrderStatistics = tuple[float, float, float, float, float, float, bool]


@dataclass(frozen=True)
class Bins:
    """Equal-width bins over a numeric column, and how many of its values each holds.

    Value ``v`` is in bin ``min(int((v - lo) * scale), m - 1)``, computed in float64
    (monotone in ``v``), with ``m = len(counts)``; ``scale`` is ``m / (max - min)``, or 0
    for a constant column (one bin).
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

    ``codes`` are the indices in a public domain of rows ``first_row, first_row + 1, ...``
    (of :func:`code_dtype`); returns the released codes of the same rows, of the same
    dtype (keyed draws read the column's stream from ``first_row``).
    """

    def __call__(self, codes: np.ndarray, first_row: int) -> np.ndarray:
        """Return the released codes of the batch."""
        ...


@dataclass(frozen=True)
class Clusters:
    """A partition of the rows into ``count`` clusters, numbered by first appearance.

    Cluster ``c`` holds ``sizes[c]`` rows; its first row comes before the first row of
    cluster ``c + 1``. ``labels`` holds each row's cluster on an engine that holds the
    rows (in memory) and is empty on one that keeps them in files, whose own handle is
    ``held``.
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
    """What a release needs of each cluster (:meth:`Engine.cluster_totals`).

    ``sums[j]`` (int64, one per cluster) are numeric column ``j``'s exact integer sums
    on its grid, ``clamped[j]`` how many of its values lay outside the grid's domain;
    ``counts[j]`` (int64, ``(clusters, leaves)``) are categorical column ``j``'s
    records per leaf of its taxonomy.
    """

    sums: list[np.ndarray]
    clamped: list[int]
    counts: list[np.ndarray]


# -- class counts of coded columns ------------------------------------------------------


@dataclass(frozen=True)
class CodedNumeric:
    """A numeric column coded within its public bounds, for :meth:`Engine.contingency`.

    Its values are clamped to ``[lower, upper]``; a value's code is ``value - lower`` when
    ``by_offset`` (an integer column of modest range: codes ``0 .. upper - lower``), else
    its rank among the column's distinct clamped values.
    """

    column: NumericColumn
    lower: float
    upper: float
    by_offset: bool


class Lookup(Protocol):
    """A column's values as codes ``0 .. size - 1``: ``lookup(categories) -> (codes, outside)``.

    ``categories`` are distinct values of the column; ``codes`` (int64, at least one entry)
    gives each its code, ``-1`` for those outside, whose indices ``outside`` lists. A
    module-level callable of the method (a cluster ships it to its workers).
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
    """Every record's class: a column coded by a :class:`Lookup` (:meth:`Engine.class_codes`).

    ``missing`` counts its missing values, ``unknown`` lists its values outside the lookup
    (each once); the release may use it only when both are empty. ``codes`` is the
    engine's own (the codes in memory, a scratch file out of core).
    """

    size: int
    missing: int
    unknown: list[Any]
    codes: Any = None


class Contingency(ABC):
    """Coded columns beside every record's class, refined label by label (a generalisation).

    Column ``j`` has codes ``0 .. n_codes[j] - 1`` (a categorical column: its taxonomy's
    leaves; a numeric one: :class:`CodedNumeric`, whose code values and clamped count are
    ``code_values[j]`` and ``clamped[j]``). Every record carries one label per column:
    :meth:`start` gives each column its first label, :meth:`split` relabels the records
    of one label by their codes, and :meth:`cells` counts the records by the labels they
    end with. A record's label on a column depends on its code there only, so an engine
    may count by codes (out of core) or keep the records of every label (in memory).
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
        """Return column ``column``'s (code, class) counts over every record.

        int64, shape ``(n_codes[column], n_classes)``.
        """

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

        A record's cell has coordinate ``position[label]`` (in ``0 .. sizes[j] - 1``) on
        column ``j``, ``label`` its label there; cells are in C order (the first column
        varies slowest). ``position`` is indexed by label.
        """


class Engine(ABC):
    """One release's input where it lives, and the primitives a method runs on it.

    An engine is opened for one release (:func:`dpfast.engines.open_engine`) and used by
    one thread at a time, except inside :meth:`each_column`, where the primitives of
    different columns may run at once.
    """

    #: The engine's name in the registry and in ``engine=`` arguments.
    name: ClassVar[str]

    # -- the input ----------------------------------------------------------------------

    @property
    @abstractmethod
    def n_rows(self) -> int:
        """The number of input rows."""

    @property
    @abstractmethod
    def names(self) -> list[Hashable]:
        """The input's column names, in order."""

    @abstractmethod
    def numeric_columns(
        self,
        names: Sequence[Hashable],
        *,
        integer: Mapping[Hashable, bool] | None = None,
        categorical: bool = True,
    ) -> list[NumericColumn]:
        """Return the protected numeric columns ``names``, refusing what cannot be protected.

        ``integer`` declares columns integer or float (default: their type says);
        ``categorical`` says whether the method protects categorical columns (the error
        for a text column then suggests a taxonomy). Every engine raises the same errors
        for the same table, before any output exists; an engine that reads its columns
        in passes checks their values in those passes.
        """

    @abstractmethod
    def categorical_columns(
        self, taxonomies: Mapping[Hashable, Taxonomy]
    ) -> list[CategoricalColumn]:
        """Return the protected categorical columns, in ``taxonomies``' order.

        An engine that holds the values checks that each is a leaf of its taxonomy here;
        one that reads them in passes checks them in the first pass.
        """

    # -- work over columns --------------------------------------------------------------

    @abstractmethod
    def each_column(
        self,
        columns: Sequence[T],
        work: Callable[[T], R],
        *,
        n_threads: int | None = None,
        held_bytes: int = 0,
    ) -> Iterator[tuple[T, R]]:
        """Yield ``(column, work(column))`` for every column, in ``columns``' order.

        The columns may run at once (``n_threads``: at most that many; default the
        engine's choice), each within its share of the engine's memory, of which
        ``held_bytes`` are held by the method while the column runs (the engine refuses
        a share too small for them, saying what to change). Results are yielded in
        order, whatever order they finish in; on an error or interrupt, the columns not
        started are not started.
        """

    def column_memory(self, n_columns: int, *, n_threads: int | None, held_bytes: int) -> int:
        """Bytes each column may hold when ``n_columns`` run in :meth:`each_column`.

        An engine without a memory limit answers a number no column reaches.
        """
        column_threads(n_threads, n_columns or 1)  # a bad n_threads is refused here
        return 1 << 62

    # -- passes -------------------------------------------------------------------------

    @abstractmethod
    def value_range(self, column: NumericColumn) -> tuple[float, float]:
        """Return the smallest and the largest value of a protected numeric column."""

    @abstractmethod
    def group_sums(self, column: NumericColumn, grid: Grid, k: int) -> tuple[np.ndarray, int]:
        """Return the exact integer sums of a column's rank groups, and its clamped count.

        Each value is clamped to ``grid``'s domain and quantised to its grid steps; the
        rows are sorted by grid value and cut into ``n // k`` groups of ``k`` (the
        remainder in the last). Integer sums do not depend on how the column is cut.
        """

    @abstractmethod
    def rank_counts(self, column: CategoricalColumn) -> np.ndarray:
        """Return how many records hold each taxonomy rank (the taxonomy's order)."""

    # -- outputs ------------------------------------------------------------------------

    @abstractmethod
    def write_rows(self, column: NumericColumn, cells: Cells) -> np.ndarray:
        """Release ``column`` row by row with ``cells``; return the counts, added up.

        Output row ``i`` holds input row ``i``'s released value (an integer column in its
        own dtype).
        """

    @abstractmethod
    def write_groups(
        self,
        column: NumericColumn | CategoricalColumn,
        values: np.ndarray,
        k: int,
        key: np.ndarray,
    ) -> None:
        """Release a column whose output row ``r`` holds ``values[order[r] // k]``.

        ``order`` is :func:`dpfast.noise.permutation` ``(key, n)``; ``values`` are the
        rank groups' released values (float64, or taxonomy codes of a categorical
        column; the last group holds the remainder).
        """

    @abstractmethod
    def write_linked(
        self,
        column: NumericColumn | CategoricalColumn,
        grid: Grid | None,
        k: int,
        key: np.ndarray | None,
        values: GroupValues,
    ) -> tuple[np.ndarray, int]:
        """Release each row's rank-group value at the row's own place (record linkage).

        Rows are ranked by (grid value, row) for a numeric column, by (taxonomy rank,
        row) for a categorical one; ``values(sums)`` (numeric: the groups' exact integer
        sums; categorical: the records per taxonomy rank) gives every group's value.
        Output row ``r`` holds input row ``permutation(key, n)[r]`` (``key`` ``None``:
        the input order). Returns the group values and the clamped count.
        """

    @abstractmethod
    def write_ranked(self, column: NumericColumn, k: int, values: GroupValues) -> None:
        """Release each row's rank-group value at the row's own place, in the input order.

        Rows are ranked by (value, row); ``values(sums)`` gets every rank group's float
        sum, its values added one by one in rank order (the remainder in the last group),
        and gives every group's released value.
        """

    @abstractmethod
    def copy_columns(self, names: Sequence[Hashable], key: np.ndarray | None) -> None:
        """Release columns ``names`` unchanged: output row ``r`` holds input row ``order[r]``.

        ``order`` is :func:`dpfast.noise.permutation` ``(key, n)``, or the input order
        when ``key`` is ``None``. The columns keep their types.
        """

    # -- clusters -----------------------------------------------------------------------

    @abstractmethod
    def insensitive_clusters(
        self,
        numeric: Sequence[NumericColumn],
        categorical: Sequence[CategoricalColumn],
        geometry: ReferenceGeometry,
        k: int,
    ) -> Clusters:
        """Partition the rows by insensitive MDAV under ``geometry`` (docs/design.md#imdav-order).

        Numeric values are clamped to ``geometry``'s domain (in the order of
        ``numeric``), categorical ones are their taxonomies' codes. While at least ``2k``
        rows remain, the next cluster takes the ``k`` rows not yet taken that come first
        in the order of its reference point: distance, then the values, the codes, the
        row; the rest form the last cluster. Every engine gives the partition of
        :func:`~dpfast.partitions.insensitive_mdav.insensitive_labels`. An engine that
        reads in passes may refuse, before its first pass, a sequence of too many
        distinct points or clusters too many for its memory, saying what to change.
        """

    @abstractmethod
    def cluster_totals(
        self,
        clusters: Clusters,
        numeric: Sequence[NumericColumn],
        grids: Sequence[Grid],
        categorical: Sequence[CategoricalColumn],
    ) -> ClusterTotals:
        """Return each cluster's exact integer sums and records per leaf, in one pass.

        Numeric column ``numeric[j]`` is clamped to ``grids[j]``'s domain and quantised
        to its steps (as :meth:`group_sums` does); ``clusters`` are this engine's.
        """

    @abstractmethod
    def write_clusters(
        self,
        columns: Sequence[NumericColumn | CategoricalColumn],
        clusters: Clusters,
        values: Sequence[np.ndarray],
        key: np.ndarray | None,
    ) -> None:
        """Release ``columns`` cluster by cluster, the rows in a keyed order.

        Output row ``r`` of column ``j`` holds ``values[j][c]``, ``c`` the cluster of input
        row ``order[r]``; ``order`` is :func:`dpfast.noise.permutation` ``(key, n)``, or
        the input order when ``key`` is ``None``; ``values[j]`` holds column ``j``'s
        released value of every cluster (float64, already rounded for an integer column,
        or taxonomy codes of a categorical one).
        """

    # -- class counts of coded columns --------------------------------------------------

    @abstractmethod
    def numeric_names(self, names: Sequence[Hashable]) -> list[Hashable]:
        """Return the columns among ``names`` whose type holds numbers (not booleans)."""

    @abstractmethod
    def occurring_values(self, name: Hashable) -> list[Any]:
        """Return the distinct values that occur in column ``name`` (not missing), any order."""

    @abstractmethod
    def class_codes(self, name: Hashable, lookup: Lookup) -> Classes:
        """Code every record's value of column ``name`` with ``lookup``: its class.

        A value's category is its own (a dictionary's, a pandas categorical's). Reads the
        column once; the codes stay with the engine, for :meth:`contingency`.
        """

    @abstractmethod
    def contingency(
        self, classes: Classes, columns: Sequence[CodedNumeric | CategoricalColumn]
    ) -> Contingency:
        """Code ``columns`` (in order) beside ``classes``; checks their values as it reads them.

        A categorical column's codes are its taxonomy's leaves (its values are checked
        as :meth:`categorical_columns` says); a numeric one's, as :class:`CodedNumeric`
        says (its values checked as every protected value).
        """

    @abstractmethod
    def write_table(
        self, columns: Mapping[Hashable, Any], *, repeat: Hashable | None = None
    ) -> None:
        """Release a table the method computed (a row per cell, not per record) as the output.

        ``columns`` as :func:`dpfast.io.build_table` takes them: an array, or ``(codes,
        labels)`` for a categorical column. :meth:`publish` returns it as a table of the
        input's kind (in memory) or a frame (a cluster), or returns the dataset written at
        ``output`` (out of core). With ``repeat`` (a column of non-negative integer
        counts), what is written at ``output`` holds each row that many times, without
        that column.
        """

    # -- row-wise statistics and outputs -------------------------------------------------

    @abstractmethod
    def order_statistics(
        self, column: NumericColumn, k: int, value_range: tuple[float, float]
    ) -> OrderStatistics:
        """Return the order statistics that bound the spacings of every ``k`` ranks.

        ``(X_(1), X_(k), X_(n-k+1), X_(n), X_(i), X_(i+k), inner)``, 1-based ranks of the
        column sorted: ``(X_(i), X_(i+k))`` is the pair of largest ``X_(i+k) - X_(i)`` over
        ``i = 1 .. n - k``, compared exactly (the rounded difference, then its TwoSum
        error; ties go to the lowest ``i``), and ``inner`` is false when ``n == k`` (the
        pair is then ``(X_(1), X_(1))``). ``value_range`` is the column's ``(min, max)``
        (:meth:`value_range`), with ``min < max``; ``1 <= k <= n``.
        """

    @abstractmethod
    def bin_counts(self, column: NumericColumn, lo: float, scale: float, m: int) -> np.ndarray:
        """Return how many values of a numeric column each of ``m`` equal-width bins holds.

        Value ``v`` is in bin ``min(int((v - lo) * scale), m - 1)`` (:class:`Bins`);
        int64[m].
        """

    @abstractmethod
    def write_resampled(
        self, column: NumericColumn, bins: Bins, key: np.ndarray, keep: int, *, n_threads: int = 1
    ) -> None:
        """Release a numeric column whose rows keep their value or take one of their bin's.

        Output row ``i`` is row ``i`` of :func:`dpfast.noise.retain_or_replace` ``(key,
        keep, values, pool, groups=bins.of(values), group_start=bins.starts,
        group_size=bins.counts)``, where the pool lists the values bin by bin, each bin's
        in row order: kept with probability ``keep / 2**32``, else replaced by the value
        of a uniformly drawn row of the same bin (every bin holds a value). Rows keep
        their order; an integer column keeps its dtype. ``n_threads`` draw at once (the
        release does not depend on it).
        """

    @abstractmethod
    def value_dtype(self, name: Hashable) -> np.dtype[Any]:
        """Return the NumPy dtype of column ``name``'s values, as :meth:`write_codes` reads them.

        ``object`` for text and for categorical (dictionary) columns held as such.
        """

    @abstractmethod
    def write_codes(self, name: Hashable, domain: Sequence[Any], cells: CodeCells) -> None:
        """Release column ``name`` coded by a public ``domain``, row by row, in row order.

        Each value becomes its index in ``domain`` (an equal label; :func:`code_dtype`),
        ``cells`` gives every row's released code, and the output holds the codes'
        labels: a pandas categorical column stays one (of categories ``domain``), any
        other column holds ``domain``'s values. A missing value or one not in ``domain``
        is refused (:func:`check_in_domain`) before any output is published.
        """

    # -- the end ------------------------------------------------------------------------

    @abstractmethod
    def publish(self, report: Any, *, reindex: bool, before: PublishHook | None = None) -> Any:
        """Return the released data, every column written above, in the input's order.

        Output that lands in files is complete before ``before(report)`` runs, and is
        made visible at once after it (a failure before leaves nothing). ``reindex``:
        the rows are in a new order (a pandas result gets a fresh index).
        """

    def close(self) -> None:  # noqa: B027 - an engine without scratch has nothing to remove
        """Remove whatever a release left behind (scratch files); safe to call twice."""

    def explain(self, error: Exception) -> BaseException:
        """Return the error a release should raise for ``error`` raised while it ran.

        An engine that finds bad values in passes gives the error the in-memory release
        gives (the count and first row of them); a cluster gives an interrupt that it
        reported as a failed job back as the interrupt. By default, ``error`` itself.
        """
        return error

    # -- what only an engine holding the values can do ----------------------------------

    def metrics(
        self,
        numeric: Sequence[NumericColumn],
        categorical: Sequence[CategoricalColumn],
        domains: Mapping[Hashable, tuple[float, float]] | None,
    ) -> dict[str, Any]:
        """Return the utility metrics of the released columns against the original.

        Only an engine that holds both can; the others refuse ``metrics=True`` when
        they are opened.
        """
        raise NotImplementedError(f"the {self.name} engine computes no metrics")


# -- small helpers the engines share --------------------------------------------------------


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

    ``outside`` lists the values not in the domain, in the order they were found (the
    first five are named).
    """
    if missing:
        raise ValueError(
            f"column {name!r} has {missing} missing value(s); impute them with a public "
            "rule, or add an explicit category for them to the domain"
        )
    if len(outside):
        shown = ", ".join(repr(v) for v in outside[:5])
        more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
        raise ValueError(
            f"column {name!r} holds value(s) outside the domain: {shown}{more}; add them "
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
