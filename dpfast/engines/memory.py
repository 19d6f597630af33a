"""The in-memory engine: a table held whole, released with NumPy and Numba in one go.

The input is any table :func:`dpfast.io.as_table_data` accepts; the release is a table of
the same kind and dtypes. Each primitive works on whole columns: a column is sorted once,
its output written into one array, and the columns run in threads, one per core.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._validation import (
    all_finite,
    as_numeric_column,
    is_integer_column,
    not_numeric_error,
    option,
)
from dpfast.dataflow.flow import Dataflow
from dpfast.dataflow.row_outputs import HeldRows, Rows
from dpfast.dataflow.sink import RowSink
from dpfast.dataflow.source import Staged, stage_beside
from dpfast.dataflow.values import (
    CategoricalColumn,
    NumericColumn,
    Opening,
    Progress,
    ProtectedColumn,
    inverse_permutation,
    own_dtype,
)
from dpfast.engines._metrics import release_metrics
from dpfast.engines._risk import computed_columns, copied_columns, released_columns
from dpfast.engines._tables import decode, warn_index_dropped
from dpfast.engines.base import Engine, Measurer
from dpfast.exceptions import DPFastValueError
from dpfast.io import (
    TableData,
    as_table_data,
    build_table,
    check_declared,
    repeat_rows,
    write_table_atomic,
)
from dpfast.risk import ReleaseDefaults, RiskOptions, release_risk
from dpfast.taxonomy import Taxonomy

__all__ = ["MemoryEngine"]


class MemoryEngine(RowSink, Engine, Measurer):
    """A table held in memory (see the module docstring)."""

    name = "memory"

    def __init__(
        self,
        table: TableData,
        *,
        output: str | os.PathLike[str] | None = None,
        progress: Progress | None = None,
        metrics: bool = False,
        risk: bool = False,
    ) -> None:
        self.table = table
        self.output = output
        self.progress = progress
        self.track = metrics or risk
        self.released: dict[Hashable, Any] = {}
        self.codes: dict[Hashable, np.ndarray] = {}
        self.taxonomies: dict[Hashable, Taxonomy] = {}
        self.destinations: dict[Hashable, np.ndarray] = {}
        self._ranks: dict[Hashable, np.ndarray] = {}
        self._base: np.ndarray | None = None
        self._copied: list[Hashable] = []
        self._copy_order: np.ndarray | None = None
        self._table: tuple[Mapping[Hashable, Any], Hashable | None] | None = None

    @classmethod
    def open(
        cls,
        data: Any,
        opening: Opening,
    ) -> MemoryEngine:
        """Open a release of ``data`` held in memory; ``output``, if given, is written too."""
        if opening.memory_limit is not None:
            raise DPFastValueError(
                f"{option('memory_limit')} bounds a release out of core, and this table is "
                f"held in memory; drop it, or pass {option('engine', 'outofcore')} (with "
                f"{option('output')}) to release the table column by column within it"
            )
        return cls(
            as_table_data(data),
            output=opening.output,
            progress=opening.progress,
            metrics=opening.metrics,
            risk=opening.risk,
        )

    # -- the input ----------------------------------------------------------------------

    @property
    def n_rows(self) -> int:
        return int(self.table.n_rows)

    @property
    def names(self) -> list[Hashable]:
        return list(self.table.names)

    def numeric_columns(
        self,
        names: Sequence[Hashable],
        *,
        integer: Mapping[Hashable, bool] | None = None,
        categorical: bool = True,
    ) -> list[NumericColumn]:
        table = self.table
        if categorical:  # every column's type first, then their values
            for name in names:
                kind = table.column(name).dtype
                numeric = np.issubdtype(kind, np.number) or kind == np.bool_
                if kind.kind in "OmM" or not numeric:
                    raise not_numeric_error(name, kind)
        finite = table.kind == "numpy" and all_finite(table.source)
        columns = []
        for name in names:
            raw = table.column(name)
            values = as_numeric_column(raw, name, known_finite=finite)
            declared = is_integer_column(raw) if integer is None else bool(integer.get(name))
            columns.append(NumericColumn(name, values, declared, own_dtype(raw.dtype, declared)))
        return columns

    def categorical_columns(
        self, taxonomies: Mapping[Hashable, Taxonomy]
    ) -> list[CategoricalColumn]:
        columns = []
        for name, taxonomy in taxonomies.items():
            codes, categories = self.table.category_codes(name)
            codes = taxonomy.encode_categories(codes, categories, column=name)
            declared = check_declared(name, self.table.declared_categories(name), taxonomy.domain)
            columns.append(CategoricalColumn(name, codes, taxonomy, declared))
        return columns

    # -- passes -------------------------------------------------------------------------

    @property
    def dataflow(self) -> Dataflow:
        """The table as one batch per column; the protected columns' values are held."""
        return Dataflow.held(self.table, self._ranks.__setitem__ if self.track else None)

    # -- outputs ------------------------------------------------------------------------

    def rows(self, name: Hashable, in_place: bool) -> AbstractContextManager[Rows]:
        """Return a held column: written in place into the output where it can be, else new."""
        return nullcontext(HeldRows(self.n_rows, self._output(name) if in_place else None))

    def keep_column(
        self,
        column: ProtectedColumn,
        rows: Rows,
        *,
        order: np.ndarray | None = None,
        destination: np.ndarray | None = None,
    ) -> None:
        """Keep a released column: a categorical's codes as labels, else in its own dtype.

        With metrics or risk, where each input row went too: ``destination``, or the
        inverse of a rank-group ``order`` through the rows' rank order.
        """
        assert isinstance(rows, HeldRows)
        if self.track and order is not None:
            destination = np.empty_like(order)
            destination[self._rank_order(column)] = inverse_permutation(order)
        if self.track and destination is not None:
            self.destinations[column.name] = destination
        if isinstance(column, CategoricalColumn):
            self.codes[column.name] = rows.values
            self.taxonomies[column.name] = column.taxonomy
            self.released[column.name] = self.table.categorical_output(
                column.name, rows.values, column.taxonomy.domain
            )
        else:
            self.released[column.name] = column.restore_dtype(rows.values)

    def _rank_order(self, column: ProtectedColumn) -> np.ndarray:
        """Return the rows in rank order: the ``group_sums`` step's (``keep_order``), or by rank."""
        if isinstance(column, CategoricalColumn):
            return column.taxonomy.rank_order(column.codes)
        return self._ranks.pop(column.name)

    def keep_codes(self, name: Hashable, domain: Sequence[Any], rows: Rows) -> None:
        assert isinstance(rows, HeldRows)
        self.released[name] = decode(self.table, name, rows.values, list(domain))

    def copy_columns(self, names: Sequence[Hashable], key: np.ndarray | None) -> None:
        self._copied = list(names)
        self._copy_order = None if key is None else noise.permutation(key, self.n_rows)

    def _output(self, name: Hashable) -> np.ndarray | None:
        """Return a view into one 2-D output array for a float64 NumPy input, else None."""
        table = self.table
        if table.kind != "numpy" or table.source.dtype != np.float64:
            return None
        if self._base is None:
            self._base = np.empty(table.source.shape, dtype=np.float64)
        return self._base[:, name]  # type: ignore[index]

    # -- coded columns ------------------------------------------------------------------

    def computed(self, columns: Mapping[Hashable, Any], repeat: Hashable | None) -> None:
        """Keep the columns: :meth:`publish` builds the table."""
        self._table = (columns, repeat)

    def _publish_table(self) -> Staged:
        """Stage the table of a ``WriteTable`` (input's kind); ``output`` gets it too."""
        assert self._table is not None
        columns, repeat = self._table
        result = build_table(self.table.kind, columns)
        if self.output is None:
            return Staged.ready(result)
        written = result if repeat is None else repeat_rows(result, repeat)
        return self._staged(written, result)

    def _staged(self, written: Any, result: Any) -> Staged:
        """Write ``written`` whole beside ``output``; revealing renames it and gives ``result``."""
        assert self.output is not None
        staged, _ = stage_beside(self.output, lambda path: write_table_atomic(written, path))
        return staged.giving(result)

    # -- the end ------------------------------------------------------------------------

    def publish(self, report: Any, *, reindex: bool) -> Staged:
        if self._table is not None:
            return self._publish_table()
        table = self.table
        kept = set(self.released) | set(self._copied)
        keep = None if len(kept) == len(table.names) else [n for n in table.names if n in kept]
        if (reindex or self._copy_order is not None) and table.has_row_labels():
            warn_index_dropped(table.source.index)
        base = self._base if keep is None else None
        result = table.rebuild(self.released, self._copy_order, base, reindex=reindex, keep=keep)
        return Staged.ready(result) if self.output is None else self._staged(result, result)

    @property
    def measurer(self) -> Measurer:
        """Return this engine: it holds the original and the release."""
        return self

    def metrics(
        self,
        numeric: Sequence[NumericColumn],
        categorical: Sequence[CategoricalColumn],
        domains: Mapping[Hashable, tuple[float, float]] | None,
    ) -> dict[str, Any]:
        return release_metrics(
            numeric, categorical, self.released, self.codes, self.destinations, domains
        )

    def risk(self, options: RiskOptions, defaults: ReleaseDefaults) -> dict[str, Any]:
        """Measure the release's risk, each released value paired with its own source."""
        if self._table is not None:
            released, sources = computed_columns(self._table[0])
        else:
            released, sources = released_columns(
                self.released, self.codes, self.taxonomies, self.destinations
            )
            copied, order = copied_columns(self.table, self._copied, self._copy_order)
            released.update(copied)
            sources.update(order)
        known = {**self.taxonomies, **(defaults.taxonomies or {})}
        return release_risk(
            self.table.source, released, sources, options, replace(defaults, taxonomies=known)
        )
