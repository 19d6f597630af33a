"""Class counts of coded columns out of core: passes over one column at a time.

A record's label on a column depends on its code there only (base.Contingency), so every
count a refinement needs is a slice of the column's (code, class) counts over all
records, and the cells' counts need one pass per column at the end. The passes, each
over one column, batch by batch, with sums that do not depend on the batches' order
(docs/engines.md, "DiffGen out of core"):

1. **classes**: every row's class code, written by row to a scratch file of one byte per
   row (two or four for many classes); the values that occur, when asked, in a pass
   before it;
2. **columns**: a numeric column coded by rank collects its distinct clamped values (a
   pass); then each column's (code, class) counts are summed over the batches (a pass),
   the batch's classes read back from the scratch file by row range;
3. **cells**: each column's code is mapped to its label's position, times the column's
   stride, and added into a by-row scratch file of cell numbers (int32: at most 2**24
   cells); the last column's pass counts the (cell, class) pairs.

The functions the passes run are module-level classes (a cluster ships them to its
workers); the file work stays in this process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dpfast._kernels import contingency as kernels
from dpfast.engines.outofcore._files import write_at
from dpfast.engines.outofcore._passes import Limits, numeric_values
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.values import CategoricalColumn, Classes, CodedNumeric, Contingency, Lookup
from dpfast.exceptions import DPFastOSError, DPFastValueError
from dpfast.io import TableData, as_table_data

__all__ = ["CodedPasses", "PassContingency"]

#: Bytes of working memory per row of a batch (the Arrow batch, its float64 values,
#: codes, classes and cell numbers, and slack).
BYTES_PER_BATCH_ROW = 64
#: Bytes per distinct value of a numeric column coded by rank: the value, its position
#: in the cut and its counts per class (8 bytes each).
_BYTES_PER_DISTINCT = 16


class RowFile:
    """A scratch file of one fixed-size number per row, written and read by row range."""

    def __init__(self, path: Path, dtype: Any, n_rows: int) -> None:
        self.dtype = np.dtype(dtype)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.ftruncate(self.fd, n_rows * self.dtype.itemsize)

    def write(self, first: int, values: np.ndarray) -> None:
        write_at(
            self.fd, np.ascontiguousarray(values, dtype=self.dtype), first * self.dtype.itemsize
        )

    def read(self, first: int, count: int) -> np.ndarray:
        size = count * self.dtype.itemsize
        parts, offset = [], first * self.dtype.itemsize
        while size:
            part = os.pread(self.fd, size, offset)
            if not part:
                raise DPFastOSError("a scratch file ended early; is the disk full?")
            parts.append(part)
            size, offset = size - len(part), offset + len(part)
        return np.frombuffer(b"".join(parts), dtype=self.dtype)

    def close(self) -> None:
        os.close(self.fd)


def _batch_table(name: Hashable, array: pa.Array) -> TableData:
    return as_table_data(pa.table({str(name): array}))


@dataclass(frozen=True)
class _Occurring:
    """The distinct values that occur in a batch."""

    name: Hashable

    def __call__(self, array: pa.Array, first_row: int) -> list[Any]:
        codes, categories = _batch_table(self.name, array).category_codes(str(self.name))
        return [categories[i] for i in np.unique(codes[codes >= 0])]


@dataclass(frozen=True)
class _ClassBatch:
    """A batch's class codes, its missing values, and its values outside the lookup."""

    name: Hashable
    lookup: Lookup
    dtype: np.dtype[Any]

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int, list[Any]]:
        codes, categories = _batch_table(self.name, array).category_codes(str(self.name))
        missing = int((codes < 0).sum())
        lookup, outside = self.lookup(categories)
        present = np.zeros(len(categories), dtype=bool)
        present[codes[codes >= 0]] = True
        unknown = [categories[i] for i in outside if present[i]]
        classes = lookup[np.maximum(codes, 0)] if codes.size else codes
        return first_row, classes.astype(self.dtype), missing, unknown


@dataclass(frozen=True)
class _Distinct:
    """A batch's distinct values of a numeric column, clamped to its bounds."""

    column: CodedNumeric

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        values = numeric_values(array, self.column.column, first_row, "diffgen")
        return np.unique(np.clip(values, self.column.lower, self.column.upper))


@dataclass(frozen=True)
class _Codes:
    """A batch of a column as codes (int64), its first row and its clamped count."""

    column: CodedNumeric | CategoricalColumn
    code_values: np.ndarray | None = None

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int]:
        column = self.column
        if isinstance(column, CategoricalColumn):
            codes, categories = _batch_table(column.name, array).category_codes(str(column.name))
            leaves = column.taxonomy.encode_categories(codes, categories, column=column.name)
            return first_row, leaves, 0
        values = numeric_values(array, column.column, first_row, "diffgen")
        lower, upper = column.lower, column.upper
        clipped = np.clip(values, lower, upper)
        clamped = int(np.count_nonzero((values < lower) | (values > upper)))
        if self.code_values is None:
            return first_row, (clipped - lower).astype(np.int64), clamped
        return first_row, np.searchsorted(self.code_values, clipped).astype(np.int64), clamped


def _name(column: CodedNumeric | CategoricalColumn) -> Hashable:
    return column.name if isinstance(column, CategoricalColumn) else column.column.name


def _small_dtype(n: int) -> np.dtype[Any]:
    return np.dtype(np.int8 if n < 2**7 else np.int16 if n < 2**15 else np.int32)


class CodedPasses:
    """The passes of one release over ``source``: batch size, scratch files, progress.

    Passes are numbered across the release for the progress line; the scratch files go
    to ``directory()`` and are closed by :meth:`close`.
    """

    def __init__(
        self,
        source: ColumnSource,
        directory: Callable[[], Path],
        limits: Limits,
        tick: Callable[[str, int, int], None],
    ) -> None:
        rows = max(1024, limits.memory // BYTES_PER_BATCH_ROW)
        self.source = source
        self.directory = directory
        self.memory = limits.memory
        self.batch_rows = max(1, min(limits.batch_rows, rows))
        self.tick = tick
        self.done = 0
        self.files: list[RowFile] = []

    def map(self, name: Hashable, fn: Callable[[pa.Array, int], Any]) -> Iterator[Any]:
        """Run ``fn`` on every batch of column ``name``, counting the pass for progress."""
        self.done += 1
        self.tick(f"pass {self.done} (column {name})", self.done, self.done + 1)
        return self.source.map_column(str(name), self.batch_rows, fn)

    def row_file(self, name: str, dtype: Any) -> RowFile:
        """Return a new scratch file of one ``dtype`` number per row."""
        made = RowFile(self.directory() / f"{name}.bin", dtype, self.source.n_rows)
        self.files.append(made)
        return made

    def close(self) -> None:
        for made in self.files:
            made.close()
        self.files.clear()

    # -- the passes ---------------------------------------------------------------------

    def occurring_values(self, name: Hashable) -> list[Any]:
        """Return the values that occur in column ``name``, from one pass."""
        found: dict[Any, None] = {}
        for part in self.map(name, _Occurring(name)):
            found.update(dict.fromkeys(part))
        return list(found)

    def class_codes(self, name: Hashable, lookup: Lookup) -> Classes:
        """Write every row's class code to a scratch file (one pass)."""
        dtype = _small_dtype(lookup.size)
        file = self.row_file("classes", dtype)
        missing = 0
        unknown: list[Any] = []
        for first_row, codes, batch_missing, batch_unknown in self.map(
            name, _ClassBatch(name, lookup, dtype)
        ):
            file.write(first_row, codes)
            missing += batch_missing
            unknown.extend(v for v in batch_unknown if v not in unknown)
        return Classes(lookup.size, missing, unknown, file)

    def contingency(
        self, classes: Classes, columns: Sequence[CodedNumeric | CategoricalColumn]
    ) -> PassContingency:
        """Code every column and sum its (code, class) counts (a pass, two if by rank)."""
        hists, code_values, clamped, coders = [], [], [], []
        for column in columns:
            values: np.ndarray | None = None
            if isinstance(column, CategoricalColumn):
                coder, n_codes = _Codes(column), len(column.taxonomy.domain)
            elif column.by_offset:
                values = np.arange(column.lower, column.upper + 1, dtype=np.float64)
                coder, n_codes = _Codes(column), values.shape[0]
            else:
                values = self._distinct(column, classes.size)
                coder, n_codes = _Codes(column, values), values.shape[0]
            hist, found = self._histogram(coder, n_codes, classes)
            hists.append(hist)
            code_values.append(values)
            clamped.append(found)
            coders.append(coder)
        return PassContingency(self, classes, coders, hists, code_values, clamped)

    def _distinct(self, column: CodedNumeric, n_classes: int) -> np.ndarray:
        """Return the distinct clamped values of a column coded by rank (a pass)."""
        found = np.empty(0, dtype=np.float64)
        per_value = _BYTES_PER_DISTINCT + 8 * n_classes
        name = column.column.name
        for part in self.map(name, _Distinct(column)):
            found = np.union1d(found, part)
            if found.shape[0] * per_value > self.memory:
                raise DPFastValueError(
                    f"column {name!r} holds more than {found.shape[0]:,} distinct values, "
                    f"whose class counts need more than the memory limit of {self.memory:,} "
                    "bytes; raise the memory limit, or round the column to fewer values"
                )
        return found

    def _histogram(self, coder: _Codes, n_codes: int, classes: Classes) -> tuple[np.ndarray, int]:
        """Return a column's (code, class) counts over every record and its clamped count."""
        hist = np.zeros((n_codes, classes.size), dtype=np.int64)
        clamped = 0
        for first_row, codes, batch_clamped in self.map(_name(coder.column), coder):
            batch_classes = classes.codes.read(first_row, codes.shape[0]).astype(np.int64)
            hist += kernels.class_histogram(codes, batch_classes, n_codes, classes.size)
            clamped += batch_clamped
        return hist, clamped


class PassContingency(Contingency):
    """Columns' (code, class) counts from passes; each code's label kept per column."""

    def __init__(
        self,
        passes: CodedPasses,
        classes: Classes,
        coders: list[_Codes],
        hists: list[np.ndarray],
        code_values: list[np.ndarray | None],
        clamped: list[int],
    ) -> None:
        super().__init__(classes.size, [int(h.shape[0]) for h in hists], code_values, clamped)
        self.passes = passes
        self.classes = classes
        self.coders = coders
        self.hists = hists
        self.labels: list[np.ndarray] = []

    def counts(self, column: int) -> np.ndarray:
        return self.hists[column]

    def start(self, labels: Sequence[int]) -> None:
        self.labels = [
            np.full(n, label, dtype=np.int64) for n, label in zip(self.n_codes, labels, strict=True)
        ]

    def split(
        self, column: int, label: int, child_of: np.ndarray, offset: int, children: np.ndarray
    ) -> np.ndarray:
        """Return a slice of the column's counts; give the codes of each child its label."""
        stop = offset + child_of.shape[0]
        hist = self.hists[column][offset:stop].copy()
        hist[child_of < 0] = 0
        for c in range(children.shape[0]):
            self.labels[column][offset + np.flatnonzero(child_of == c)] = children[c]
        return hist

    def cells(self, position: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
        """Count every (cell, class) pair in one pass per column (see the module docstring)."""
        n_cells = math.prod(sizes)
        strides = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
        counts = np.zeros(n_cells * self.n_classes, dtype=np.int64)
        last = len(self.coders) - 1
        cells_file = self.passes.row_file("cells", np.int32)
        for j, coder in enumerate(self.coders):
            at = position[self.labels[j]] * strides[j]
            for first_row, codes, _ in self.passes.map(_name(coder.column), coder):
                cells = at[codes]
                if j > 0:
                    cells += cells_file.read(first_row, codes.shape[0])
                if j < last:
                    cells_file.write(first_row, cells)
                    continue
                classes = self.classes.codes.read(first_row, codes.shape[0]).astype(np.int64)
                part = np.bincount(cells * self.n_classes + classes)
                counts[: part.shape[0]] += part
        return counts.reshape(n_cells, self.n_classes)
