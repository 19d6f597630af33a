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
* **passes**: :attr:`Engine.dataflow`, what the steps of :mod:`dpfast.steps` read the
  table through (what a column's type says, a column's range, rank groups' sums and a
  categorical column's records per taxonomy rank, order statistics, bin and edge counts,
  a target's classes and the class counts of coded columns, insensitive MDAV's clusters
  and their totals: each written once for every engine);
* **outputs**, one released column each: :meth:`Engine.write_rows` (a function of each
  row's value and keyed draw, in row order), :meth:`Engine.write_groups` (rank-group
  values in a keyed permutation), :meth:`Engine.write_linked` (rank-group values at their
  rows' places, record-linked), :meth:`Engine.write_ranked` (rank-group values at
  their rows' places, rows in their order), :meth:`Engine.copy_columns` (columns not
  protected, unchanged, in the rows' order or a keyed one);
* **clusters** (rows partitioned by the steps ``insensitive_clusters`` and
  ``cluster_totals``, each cluster released as one value per column):
  :meth:`Engine.write_clusters` (each row's cluster value, rows in a keyed order);
* **tables**: a table the method computed from the class counts of the
  ``contingency`` step is its output (:meth:`Engine.write_table`);
* **row-wise outputs**: :meth:`Engine.write_resampled` (each row kept or replaced by a
  keyed draw from its own bin), :meth:`Engine.write_codes` (a column coded by a public
  domain, released row by row as its labels);
* **the end**: :meth:`Engine.publish` writes the output whole under a staging name and
  returns it as a :class:`~dpfast.engines.source.Staged` release, which the release
  skeleton reveals (in one step) once the budget is committed; :meth:`Engine.close`
  removes what a failed or interrupted release left.

Rank groups come as the method's :class:`~dpfast.partitions.ranking.RankGroups` (which
group holds the remainder ``n mod k`` is the method's choice); an engine only executes
that layout. An engine never imports a method; the per-batch functions a method hands over
(:class:`Cells`) are module-level callables, so that a cluster can ship them to its
workers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

import numpy as np

from dpfast.engines.dataflow import Dataflow
from dpfast.engines.on_bound import BoundCount, RankGroupValues
from dpfast.engines.source import Staged
from dpfast.engines.values import (
    Bins,
    CategoricalColumn,
    Cells,
    Clusters,
    CodeCells,
    GroupCodes,
    GroupValues,
    NumericColumn,
    Opening,
    ProtectedColumn,
    column_threads,
)
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups
from dpfast.risk import ReleaseDefaults, RiskOptions
from dpfast.taxonomy import Taxonomy

__all__ = ["Engine", "Measurer", "RankSender", "in_threads"]

T = TypeVar("T")
E = TypeVar("E", bound="Engine")
R = TypeVar("R")


# -- class counts of coded columns ------------------------------------------------------


class Engine(ABC):
    """One release's input where it lives, and the primitives a method runs on it.

    An engine is opened for one release (:func:`dpfast.engines.open_engine`) and used by
    one thread at a time, except inside :meth:`each_column`, where the primitives of
    different columns may run at once.
    """

    #: The engine's name in the registry and in ``engine=`` arguments.
    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def open(cls: type[E], data: Any, opening: Opening) -> E:
        """Open the engine on ``data`` for one release, refusing what it cannot do.

        An engine takes its own settings (``EngineChoice.options``) as keywords; a refusal
        says what to change, before anything is read or written.
        """

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

        An engine without a memory limit runs them in threads (default one per core, at
        most one per column), or one after the other in this thread where that is one.
        """
        threads = column_threads(n_threads, len(columns) or 1)
        if threads == 1:
            for column in columns:
                yield column, work(column)
            return
        yield from in_threads(columns, work, threads)

    def column_memory(self, n_columns: int, *, n_threads: int | None, held_bytes: int) -> int:
        """Bytes each column may hold when ``n_columns`` run in :meth:`each_column`.

        An engine without a memory limit answers a number no column reaches.
        """
        column_threads(n_threads, n_columns or 1)  # a bad n_threads is refused here
        return 1 << 62

    # -- passes -------------------------------------------------------------------------

    @property
    @abstractmethod
    def dataflow(self) -> Dataflow:
        """What a step (:mod:`dpfast.steps`) reads the table through.

        The column source, the memory limits of a pass (the share of the column being
        released, where columns run at once: read it inside the column's work), the
        progress line, and the table itself where the engine holds it in memory (the
        steps' fast path: :class:`~dpfast.engines.dataflow.Dataflow`).
        """

    # -- outputs ------------------------------------------------------------------------

    @abstractmethod
    def write_rows(self, column: NumericColumn, cells: Cells) -> np.ndarray:
        """Release ``column`` row by row with ``cells``; return the counts, added up.

        Output row ``i`` holds input row ``i``'s released value (an integer column in its
        own dtype).
        """

    @abstractmethod
    def write_groups(
        self, column: ProtectedColumn, values: np.ndarray, layout: RankGroups, key: np.ndarray
    ) -> None:
        """Release a column whose output row ``r`` holds ``values[layout.group_of(order[r])]``.

        ``order`` is :func:`dpfast.noise.permutation` ``(key, n)``; ``values`` are the
        rank groups' released values (float64, or taxonomy codes of a categorical
        column), in ``layout``'s groups.
        """

    @property
    def rank_sender(self) -> RankSender | None:
        """The engine as a :class:`RankSender`, where its tasks send the rank groups.

        ``None`` (the default) where this release's rank groups come to this process: the
        ``group_sums`` step, then :meth:`write_groups`. An engine that sends them (a
        cluster with ``output``) says so for each release, once the release has said
        which columns it copies (:meth:`expect_copies`).
        """
        return None

    @abstractmethod
    def write_linked(
        self,
        column: ProtectedColumn,
        grid: Grid | None,
        layout: RankGroups,
        key: np.ndarray | None,
        values: GroupValues,
    ) -> tuple[np.ndarray, int]:
        """Release each row's rank-group value at the row's own place (record linkage).

        Rows are ranked by (grid value, row) for a numeric column, by (taxonomy rank,
        row) for a categorical one, and cut into ``layout``'s rank groups;
        ``values(sums)`` (numeric: the groups' exact integer
        sums; categorical: the records per taxonomy rank) gives every group's value.
        Output row ``r`` holds input row ``permutation(key, n)[r]`` (``key`` ``None``:
        the input order). Returns the group values and the clamped count.
        """

    @abstractmethod
    def write_ranked(self, column: NumericColumn, layout: RankGroups, values: GroupValues) -> None:
        """Release each row's rank-group value at the row's own place, in the input order.

        Rows are ranked by (value, row) and cut into ``layout``'s rank groups;
        ``values(sums)`` gets every rank group's float sum, its values added one by one in
        rank order, and gives every group's released value.
        """

    def expect_copies(self, names: Sequence[str]) -> None:
        """Learn, once the release's arguments are checked, the columns it will copy.

        :meth:`copy_columns` copies them at the end; an engine may choose how it writes the
        released columns by their types. By default nothing is done.
        """
        return None

    @abstractmethod
    def copy_columns(self, names: Sequence[Hashable], key: np.ndarray | None) -> None:
        """Release columns ``names`` unchanged: output row ``r`` holds input row ``order[r]``.

        ``order`` is :func:`dpfast.noise.permutation` ``(key, n)``, or the input order
        when ``key`` is ``None``. The columns keep their types.
        """

    # -- clusters -----------------------------------------------------------------------

    @abstractmethod
    def write_clusters(
        self,
        columns: Sequence[ProtectedColumn],
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

    # -- coded columns ------------------------------------------------------------------

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
    def publish(self, report: Any, *, reindex: bool) -> Staged:
        """Stage the released data, every column written above, in the input's order.

        Output that lands in files is written whole under a staging name and stays
        invisible: the release skeleton commits the budget and writes the reports, then
        :meth:`Staged.reveal` makes it visible in one step and returns the data (a
        failure before leaves nothing). ``reindex``: the rows are in a new order (a
        pandas result gets a fresh index).
        """

    def work(self) -> dict[str, int] | None:
        """Return what the release's passes did (the private report's ``work``), or None.

        An engine that runs passes counts their tasks, the bytes of their results and the
        items its output passes scanned (docs/scale.md#counters); in memory, None.
        """
        return None

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

    @property
    def measurer(self) -> Measurer | None:
        """The engine as a :class:`Measurer`, where it holds the original and the release.

        ``None`` (the default): an engine that cannot measure the release refuses
        ``metrics=True`` and ``risk=True`` when it is opened.
        """
        return None


# -- small helpers the engines share --------------------------------------------------------


class Measurer(ABC):
    """An engine that holds the original and the release, row by row (``Engine.measurer``).

    It measures what only such an engine can: the release's utility and its disclosure
    risk, each released row paired with its source through the shuffles.
    """

    @abstractmethod
    def metrics(
        self,
        numeric: Sequence[NumericColumn],
        categorical: Sequence[CategoricalColumn],
        domains: Mapping[Hashable, tuple[float, float]] | None,
    ) -> dict[str, Any]:
        """Return the utility metrics of the released columns against the original."""

    @abstractmethod
    def risk(self, options: RiskOptions, defaults: ReleaseDefaults) -> dict[str, Any]:
        """Return the disclosure risk of the release (docs/risk.md#risk-at-release-time)."""


class RankSender(ABC):
    """An engine whose tasks place rank groups where its output is made (``rank_sender``).

    The method gives the column and how to compute its groups' values; the engine sorts
    the column where its batches are read, and each task computes its groups' values and
    sends them to their rows' output places. No group's sum or value comes to this
    process.
    """

    @abstractmethod
    def write_rank_groups(
        self,
        column: NumericColumn,
        grid: Grid,
        layout: RankGroups,
        values: RankGroupValues,
        key: np.ndarray,
        domain: tuple[float, float],
    ) -> tuple[int, BoundCount]:
        """Release a numeric column in rank groups; return its clamped and on-bound counts.

        The release of the ``group_sums`` step's sums on ``grid``, with ``values(sums,
        first_group)`` for every run of groups, written as :meth:`Engine.write_groups`
        writes them with ``key``. Returns the clamped count and the rows on a bound of
        ``domain`` (released there, there before the noise: ``values.before_noise``,
        and pushed there by the noise: :class:`~dpfast.engines.on_bound.OnBound`), or a
        function that gives them once the release is written.
        """

    @abstractmethod
    def write_category_groups(
        self,
        column: CategoricalColumn,
        counts: np.ndarray,
        layout: RankGroups,
        codes: GroupCodes,
        key: np.ndarray,
    ) -> None:
        """Release a categorical column in the rank groups of ``layout``, in ``key``'s order.

        ``counts`` are the column's records per taxonomy rank (the ``rank_counts`` step),
        so its sorted ranks are known without a sort; ``codes(counts, first, stop)`` draws
        groups ``first .. stop - 1``, as :meth:`Engine.write_groups` would write
        ``codes(counts, 0, n_groups)``.
        """


def in_threads(columns: Sequence[T], work: Callable[[T], R], threads: int) -> Iterator[tuple[T, R]]:
    """Yield ``(column, work(column))`` for every column, ``threads`` at once, in order.

    On an error or an interrupt, the columns not started are not started.
    """
    pool = ThreadPoolExecutor(max_workers=threads)
    try:
        yield from zip(columns, pool.map(work, columns), strict=True)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
