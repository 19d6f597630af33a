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
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from dpfast.partitions.grid import Grid
from dpfast.taxonomy import Taxonomy

__all__ = [
    "Bins",
    "CategoricalColumn",
    "Cells",
    "CodeCells",
    "Engine",
    "GroupValues",
    "NumericColumn",
    "OrderStatistics",
    "Progress",
    "PublishHook",
    "check_in_domain",
    "code_dtype",
    "column_threads",
    "inverse_permutation",
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
    def copy_columns(self, names: Sequence[Hashable], key: np.ndarray | None) -> None:
        """Release columns ``names`` unchanged: output row ``r`` holds input row ``order[r]``.

        ``order`` is :func:`dpfast.noise.permutation` ``(key, n)``, or the input order
        when ``key`` is ``None``. The columns keep their types.
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
