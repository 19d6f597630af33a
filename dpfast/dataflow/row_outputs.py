"""Columns released row by row, written once for every engine (docs/architecture.md).

A row-wise output releases each row of a column from that row alone (and the method's
key), so its values go to the rows' own places, whatever order the batches come in. It
reads the table through the :class:`~dpfast.dataflow.flow.Dataflow` and puts each batch's
values into the :class:`Rows` the engine gives; where the engine holds the table
(``flow.holds``), it releases the whole column at once from the values held.
``WriteResampled`` is :mod:`dpfast.dataflow.resampled_rows`'s.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from dpfast._kernels import mechanisms as mechanism_kernels
from dpfast.dataflow.flow import Dataflow, numeric_values
from dpfast.dataflow.scratch_files import write_at
from dpfast.dataflow.values import Cells, CodeCells, NumericColumn, check_in_domain, code_dtype

if TYPE_CHECKING:
    from dpfast.io import TableData

__all__ = [
    "FileRows",
    "HeldRows",
    "Rows",
    "coded_rows",
    "decodes_to_dictionary",
    "domain_labels",
    "held_array",
    "released_batch",
    "released_rows",
]


class Rows(Protocol):
    """Where a row-wise output puts the released values of rows ``[first_row, ...)``."""

    def put(self, first_row: int, values: np.ndarray) -> None:
        """Put ``values`` at rows ``first_row`` to ``first_row + len(values)``."""


class HeldRows:
    """A released column held in memory: :attr:`values`, once every row is put.

    The whole column put at once is kept (no copy); parts are copied into one array of
    their dtype, or into ``out``, the array the engine gives to fill (a view into its
    output, say), which a held fast path may fill directly (:meth:`array`).

    Examples
    --------
    >>> rows = HeldRows(4)
    >>> rows.put(2, np.array([7, 8])); rows.put(0, np.array([5, 6]))
    >>> rows.values.tolist()
    [5, 6, 7, 8]
    """

    def __init__(self, n_rows: int, out: np.ndarray | None = None) -> None:
        self.n_rows = n_rows
        self._values = out

    def array(self, dtype: Any) -> np.ndarray:
        """Return the array the column is put into (``out``, or a new one of ``dtype``)."""
        if self._values is None:
            self._values = np.empty(self.n_rows, dtype=dtype)
        return self._values

    def put(self, first_row: int, values: np.ndarray) -> None:
        """Put ``values`` at rows ``first_row`` to ``first_row + len(values)``."""
        if values is self._values:
            return
        if self._values is None:
            if first_row == 0 and values.shape[0] == self.n_rows:
                self._values = values
                return
            self._values = np.empty(self.n_rows, dtype=values.dtype)
        self._values[first_row : first_row + values.shape[0]] = values

    @property
    def values(self) -> np.ndarray:
        """The released column (an empty float64 array for a table with no rows)."""
        if self._values is None:
            return np.empty(self.n_rows, dtype=np.float64)
        return self._values


def held_array(into: Rows, n: int, dtype: type) -> np.ndarray:
    """Return the array a held fast path writes into: the engine's (``HeldRows``), or new.

    A fast path fills it whole, then puts it (``into.put(0, out)``), which a
    :class:`HeldRows` that gave it takes as done.
    """
    return into.array(dtype) if isinstance(into, HeldRows) else np.empty(n, dtype=dtype)


class FileRows:
    """A released column written at its rows' places in a scratch file, 8 bytes a row.

    A context manager: the file (readable by its owner only) is open within it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def __enter__(self) -> FileRows:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        os.close(self._fd)
        self._fd = -1

    def put(self, first_row: int, values: np.ndarray) -> None:
        """Write ``values`` (8 bytes each) at rows ``first_row`` onwards."""
        assert values.dtype.itemsize == 8, values.dtype
        write_at(self._fd, values, first_row * 8)


# -- a protected numeric column, released by the method's cells ------------------------


def released_rows(flow: Dataflow, column: NumericColumn, cells: Cells, into: Rows) -> np.ndarray:
    """Put ``cells`` of every batch of ``column`` into ``into``; return the counts, added up.

    ``cells(values, first_row)`` gives a batch's released float64 values and its counts
    (clamped values, ...), added up over the batches. Held: one call over the held values.
    """
    if flow.holds:
        out, counts = cells(column.values, 0)
        into.put(0, out)
        return np.asarray(counts, dtype=np.int64)
    total: np.ndarray | None = None
    batch = _RowCells(column, cells)
    for first_row, out, counts in flow.source.map_column(
        str(column.name), flow.limits.batch_rows, batch
    ):
        into.put(first_row, out)
        total = counts if total is None else total + counts
    return np.zeros(0, dtype=np.int64) if total is None else total


def released_batch(
    column: NumericColumn, cells: Cells, array: pa.Array, first_row: int
) -> tuple[np.ndarray, np.ndarray]:
    """Check a batch of ``column`` from row ``first_row``: its ``cells`` (counts as int64)."""
    out, counts = cells(numeric_values(array, column, first_row), first_row)
    return out, np.asarray(counts, dtype=np.int64)


@dataclass(frozen=True)
class _RowCells:
    """A batch of a protected numeric column released by ``cells``, with its first row."""

    column: NumericColumn
    cells: Cells

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray, np.ndarray]:
        return first_row, *released_batch(self.column, self.cells, array, first_row)


# -- a column coded by a public domain --------------------------------------------------


def coded_rows(
    flow: Dataflow, name: Hashable, domain: Sequence[Any], cells: CodeCells, into: Rows
) -> None:
    """Put column ``name``'s released codes (indices into ``domain``) into ``into``.

    Each batch's values are looked up in the domain (a cluster's on its worker) and its codes
    released by ``cells(codes, first_row)``, put as int64. Held: a pandas categorical is coded
    by its categories (one pass over its codes), any other column looked up whole, and the
    codes put whole in the smallest type (:func:`~dpfast.dataflow.values.code_dtype`).

    Raises
    ------
    DPFastValueError
        The column has a missing value, or values outside the domain (named in row
        order): :func:`~dpfast.dataflow.values.check_in_domain`. Nothing is put into
        ``into`` for a batch that holds one.
    """
    coded = _Coded(pd.Index(list(domain)), code_dtype(len(domain)), cells)
    parts: Iterable[tuple[int, np.ndarray | None, _Outside]]
    if flow.holds:
        assert flow.table is not None
        parts = [coded.held(flow.table, name)]
    else:
        parts = flow.source.map_column(str(name), flow.limits.batch_rows, coded)
    found = _Outside()
    for first_row, codes, outside in parts:
        found.add(outside)
        if codes is not None:
            into.put(first_row, codes)
    first_rows = found.first_rows
    check_in_domain(name, found.missing, sorted(first_rows, key=lambda value: first_rows[value]))


@dataclass
class _Outside:
    """What a pass found outside a domain: missing values, and values with their first row."""

    missing: int = 0
    first_rows: dict[Any, int] = field(default_factory=dict)

    def add(self, other: _Outside) -> None:
        self.missing += other.missing
        for value, row in other.first_rows.items():
            self.first_rows[value] = min(row, self.first_rows.get(value, row))


Coded = tuple[int, np.ndarray | None, _Outside]


@dataclass(frozen=True)
class _Coded:
    """A batch coded by a domain and released by ``cells``, with its first row.

    Returns ``(first_row, int64 codes, nothing outside)``, or ``(first_row, None, what is
    outside)`` for a batch with values outside the domain (or missing).
    """

    index: pd.Index
    dtype: Any
    cells: CodeCells

    def __call__(self, array: pa.Array, first_row: int) -> Coded:
        """Code and release a batch, its codes as int64 (8 bytes a row, as files hold them)."""
        first, codes, outside = self.values(array.to_numpy(zero_copy_only=False), first_row)
        return first, None if codes is None else np.asarray(codes, dtype=np.int64), outside

    def values(self, values: np.ndarray, first_row: int) -> Coded:
        """Code and release a batch's values."""
        codes = self.index.get_indexer(values)
        bad = codes < 0
        if bad.any():
            return first_row, None, _outside(values, bad, first_row)
        return self.released(codes, first_row)

    def released(self, codes: np.ndarray, first_row: int) -> Coded:
        return (
            first_row,
            self.cells(np.ascontiguousarray(codes, dtype=self.dtype), first_row),
            _Outside(),
        )

    def held(self, table: TableData, name: Hashable) -> Coded:
        """Code and release column ``name`` of a table held in memory, whole."""
        series = table.source[name] if table.kind == "pandas" else None
        if series is None or not isinstance(series.dtype, pd.CategoricalDtype):
            return self.values(table.column(name), 0)
        categories = series.cat.categories
        mapping = self.index.get_indexer(categories).astype(np.int64)
        raw = series.cat.codes.to_numpy()
        codes = np.empty(raw.shape[0], dtype=self.dtype)
        missing, first = mechanism_kernels.map_codes(raw, mapping, codes)
        if missing or first >= 0:  # the error path: the values outside, in row order
            bad = (raw < 0) | (mapping[np.maximum(raw, 0)] < 0)
            values = np.asarray(categories.take(np.maximum(raw, 0)), dtype=object)
            values[raw < 0] = None
            return 0, None, _outside(values, bad, 0)
        del raw  # pandas' copy of the categorical's codes, freed before the draws
        return self.released(codes, 0)


def domain_labels(domain: Sequence[Any]) -> np.ndarray:
    """Return the values a coded column's codes decode into: text as Python objects."""
    labels = np.asarray(domain)
    return np.asarray(domain, dtype=object) if labels.dtype.kind in "USO" else labels


def decodes_to_dictionary(arrow_type: pa.DataType, domain: Sequence[Any]) -> bool:
    """Whether a column of ``arrow_type`` coded by ``domain`` is released as a dictionary."""
    return bool(pa.types.is_dictionary(arrow_type) and all(isinstance(v, str) for v in domain))


def _outside(values: np.ndarray, bad: np.ndarray, first_row: int) -> _Outside:
    """Count the missing values among ``bad`` and find the others' first rows."""
    missing = pd.isna(values[bad])
    rows = np.flatnonzero(bad)[~missing]
    frame = pd.DataFrame({"value": values[rows], "row": rows + first_row})
    frame = frame.drop_duplicates("value")
    return _Outside(int(missing.sum()), dict(zip(frame["value"], frame["row"], strict=True)))
