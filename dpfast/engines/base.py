"""The engine protocol: the primitives every method's release is written over (docs/engines.md).

A method says *what* once (validation, plan, ledger, noise keys, report) and asks an
:class:`Engine` for each step that touches the data; an engine says *how* for one place
where data lives: in memory (:mod:`dpfast.engines.memory`), in files beyond memory
(:mod:`dpfast.engines.outofcore`), on Spark or on Dask. Every random draw is keyed by what
it is for (a column, a rank group, a bucket of a permutation), never by how the data was
split, so a seeded release is the same on every engine.

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

from dpfast.dataflow.flow import Dataflow
from dpfast.dataflow.on_bound import BoundCount, RankGroupValues
from dpfast.dataflow.source import Staged
from dpfast.dataflow.values import (
    CategoricalColumn,
    GroupCodes,
    NumericColumn,
    Opening,
    column_threads,
)
from dpfast.dataflow.writes import Write
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups
from dpfast.risk import ReleaseDefaults, RiskOptions
from dpfast.taxonomy import Taxonomy

__all__ = ["Engine", "Measurer", "RankSender", "in_threads"]

T = TypeVar("T")
E = TypeVar("E", bound="Engine")
R = TypeVar("R")


class Engine(ABC):
    """One release's input where it lives, and the primitives a method runs on it.

    Opened for one release (:func:`dpfast.engines.open_engine`) and used by one thread at a
    time, except inside :meth:`each_column`, where different columns' primitives may run at once.
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

        ``integer`` declares columns integer or float (default: by type); ``categorical``: the
        method protects categorical columns (a text column's error then suggests a taxonomy).
        Every engine raises the same errors for the same table, before any output exists; one
        that reads its columns in passes checks their values in those passes.
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

        Columns may run at once (at most ``n_threads``; default the engine's choice), each
        within its share of the engine's memory, ``held_bytes`` of which the method holds
        while the column runs (a share too small for them is refused, saying what to change).
        On an error or interrupt, the columns not started are not started. Without a memory
        limit they run in threads (default one per core, at most one per column), or in this
        thread when that is one.
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
        """What the steps (:mod:`dpfast.steps`, each written once for every engine) read.

        A :class:`~dpfast.dataflow.flow.Dataflow`: the column source, a pass's memory limits
        (where columns run at once, the released column's share: read it inside its work),
        the progress line, and the table where the engine holds it (the steps' fast path).
        """

    # -- outputs ------------------------------------------------------------------------

    @abstractmethod
    def write(self, request: Write[R]) -> R:
        """Write one released output (a record of :mod:`dpfast.dataflow.writes`).

        Now, or kept for :meth:`publish`; either way it is in the output staged there. Returns
        what writing gives back (the record's ``R``: counts of a row-wise release, values of
        a record-linked one); a record the engine does not know is refused.
        """

    def rank_sender(self, copied: Sequence[str] | None) -> RankSender | None:
        """Return the engine as a :class:`RankSender`, where its tasks send the rank groups.

        ``copied``: the columns the release copies unprotected (``None``: any input column
        may be); an engine that sends them (a cluster with ``output``) decides by these, per
        release. ``None`` (the default): the groups come to this process (the ``group_sums``
        step, then a :class:`~dpfast.dataflow.writes.WriteGroups`).
        """
        return None

    # -- the end ------------------------------------------------------------------------

    @abstractmethod
    def publish(self, report: Any, *, reindex: bool) -> Staged:
        """Stage the released data, every column written above, in the input's order.

        Output to files is written whole under a staging name, invisible until the release
        skeleton has committed the budget and written the reports; :meth:`Staged.reveal` then
        shows it in one step and returns the data (a failure before leaves nothing).
        ``reindex``: the rows are in a new order (a pandas result gets a fresh index). An engine
        that runs passes gives what they did as :attr:`~dpfast.dataflow.source.Staged.work`.
        """

    def close(self) -> None:  # noqa: B027 - an engine without scratch has nothing to remove
        """Remove what any release, even an interrupted one, left behind; safe to call twice."""

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

        ``None`` (the default): the engine refuses ``metrics=True`` and ``risk=True`` when opened.
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

    The method gives the column and how to compute its groups' values; the engine sorts the
    column where its batches are read, and each task sends its groups' values to their rows'
    output places. No group's sum or value comes to this process.
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

        As a :class:`~dpfast.dataflow.writes.WriteGroups` of ``key`` would write the
        ``group_sums`` step's sums on ``grid`` through ``values(sums, first_group)`` (once per
        run of groups). Returns the clamped count and the rows released on a bound of
        ``domain`` (there before the noise: ``values.before_noise``; pushed there by it:
        :class:`~dpfast.dataflow.on_bound.OnBound`), or a function giving them once written.
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
        groups ``first .. stop - 1``, as a :class:`~dpfast.dataflow.writes.WriteGroups` of
        ``codes(counts, 0, n_groups)`` would write them.
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
