"""The output records written once, for an engine that puts released rows into a sink.

:meth:`RowSink.write` executes each record of :mod:`dpfast.dataflow.writes` with its algorithm
(:mod:`~dpfast.dataflow.row_outputs`, :mod:`~dpfast.dataflow.ranked_rows`,
:mod:`~dpfast.dataflow.clustered_rows`, :mod:`~dpfast.dataflow.resampled_rows`) into the
:class:`~dpfast.dataflow.row_outputs.Rows` the engine gives (an array in memory, a scratch
file out of core). The engine says only where rows go and what it keeps (:class:`RowSink`);
which algorithm writes which record is said here, once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from dpfast.dataflow.clustered_rows import clustered_rows
from dpfast.dataflow.flow import Dataflow
from dpfast.dataflow.ranked_rows import grouped_rows, linked_codes, linked_rows, ranked_rows
from dpfast.dataflow.resampled_rows import resampled_rows
from dpfast.dataflow.row_outputs import Rows, coded_rows, released_rows
from dpfast.dataflow.values import CategoricalColumn, Clusters, ProtectedColumn
from dpfast.dataflow.writes import (
    CopyColumns,
    Write,
    WriteClusters,
    WriteCodes,
    WriteGroups,
    WriteLinked,
    WriteRanked,
    WriteResampled,
    WriteRows,
    WriteTable,
    unknown_write,
)

__all__ = ["RowSink"]

R = TypeVar("R")


class RowSink(ABC):
    """An engine whose released columns are put row by row into rows it gives.

    It implements where a column's rows go (:meth:`rows`), what it keeps of a column once
    they are put (:meth:`keep_column`, :meth:`keep_codes`), and the two records that put no rows
    (:meth:`copy_columns`, :meth:`computed`); :meth:`write` does the rest.
    """

    #: The engine's name, in the error for a record it does not write.
    name: ClassVar[str]

    @property
    @abstractmethod
    def dataflow(self) -> Dataflow:
        """What the algorithms read the table through."""

    @abstractmethod
    def rows(self, name: Hashable, in_place: bool) -> AbstractContextManager[Rows]:
        """Return where column ``name``'s released rows go.

        ``in_place``: float64 rows that a held fast path writes whole into the array it is
        given (:func:`~dpfast.dataflow.row_outputs.held_array`), so an engine may give its
        own output; else the algorithm makes its own array (row by row, or codes).
        """

    @abstractmethod
    def keep_column(
        self,
        column: ProtectedColumn,
        rows: Rows,
        *,
        order: np.ndarray | None = None,
        destination: np.ndarray | None = None,
    ) -> None:
        """Keep a column whose rows are all put.

        ``order``: the keyed permutation of its rank groups, where the algorithm returned
        it; ``destination``: where each input row went, likewise.
        """

    @abstractmethod
    def keep_codes(self, name: Hashable, domain: Sequence[Any], rows: Rows) -> None:
        """Keep a column whose rows hold codes of ``domain`` (:class:`WriteCodes`)."""

    @abstractmethod
    def copy_columns(self, names: Sequence[Hashable], key: np.ndarray | None) -> None:
        """Copy columns ``names`` unchanged, in the order of ``key``'s permutation."""

    @abstractmethod
    def computed(self, columns: Mapping[Hashable, Any], repeat: Hashable | None) -> None:
        """Make a table the method computed the output (:class:`WriteTable`)."""

    def counted(self, rows: Rows) -> Rows:
        """Return ``rows`` counting what the permutation's parts cost (default: themselves)."""
        return rows

    def starting(self, name: Hashable, steps: int) -> None:  # noqa: B027 - optional
        """Say that column ``name``'s output starts, in ``steps`` steps (default: nothing)."""

    def write(self, request: Write[R]) -> R:
        """Write one record of :mod:`dpfast.dataflow.writes` with its algorithm."""
        done: Any = None
        flow = self.dataflow
        match request:
            case WriteRows(column, cells):
                self.starting(column.name, 1)
                with self.rows(column.name, False) as rows:
                    done = released_rows(flow, column, cells, rows)
                self.keep_column(column, rows)
            case WriteGroups(column, values, layout, key):
                with self.rows(column.name, _numeric(column)) as rows:
                    order = grouped_rows(flow, values, layout, key, self.counted(rows))
                self.keep_column(column, rows, order=order)
            case WriteLinked(column, grid, layout, key, values):
                with self.rows(column.name, _numeric(column)) as rows:
                    if isinstance(column, CategoricalColumn):
                        self.starting(column.name, 2)
                        linked = linked_codes(flow, column, layout, key, values, rows)
                    else:
                        assert grid is not None
                        linked = linked_rows(flow, column, grid, layout, key, values, rows)
                self.keep_column(column, rows, destination=linked.destination)
                done = (linked.values, linked.clamped)
            case WriteRanked(column, layout, values):
                with self.rows(column.name, True) as rows:
                    ranked_rows(flow, column, layout, values, rows)
                self.keep_column(column, rows)
            case WriteClusters(columns, clusters, values, key):
                self._clusters(flow, columns, clusters, values, key)
            case WriteResampled(column, bins, key, keep, n_threads):
                with self.rows(column.name, False) as rows:
                    resampled_rows(flow, column, bins, key, keep, rows, n_threads=n_threads)
                self.keep_column(column, rows)
            case WriteCodes(name, domain, cells):
                self.starting(name, 1)
                with self.rows(name, False) as rows:
                    coded_rows(flow, name, domain, cells, rows)
                self.keep_codes(name, domain, rows)
            case CopyColumns(names, key):
                self.copy_columns(names, key)
            case WriteTable(columns, repeat):
                self.computed(columns, repeat)
            case _:
                raise unknown_write(self.name, request)
        return cast(R, done)

    def _clusters(
        self,
        flow: Dataflow,
        columns: Sequence[ProtectedColumn],
        clusters: Clusters,
        values: Sequence[np.ndarray],
        key: np.ndarray | None,
    ) -> None:
        """Write columns released cluster by cluster (:class:`WriteClusters`)."""
        with ExitStack() as stack:
            rows = [stack.enter_context(self.rows(c.name, _numeric(c))) for c in columns]
            into = list(rows)
            if key is not None and into:  # one permutation, counted once
                into[0] = self.counted(into[0])
            destination = clustered_rows(flow, clusters, values, key, into)
        placed = destination if key is not None else None
        for column, released in zip(columns, rows, strict=True):
            self.keep_column(column, released, destination=placed)


def _numeric(column: ProtectedColumn) -> bool:
    return not isinstance(column, CategoricalColumn)
