"""Class counts of coded columns from passes that sum counts over the batches.

The steps of :mod:`dpfast.steps.class_counts` where the engine does not hold the table (out
of core, on Spark and on Dask). A record's label on a column depends on its code there only
(base.Contingency), so every count a refinement needs is a slice of the column's (code,
class) counts over all records, and the cells' counts need one pass over every column at
the end. The passes, with sums that do not depend on the batches' order (docs/engines.md,
"DiffGen out of core"):

1. **classes**: the target's missing values and values outside the classes (one pass,
   after one for the values that occur, when asked). Each later pass reads the target
   beside its columns and codes its batch's classes again (:class:`_Classify`);
2. **columns**: one pass collects the distinct clamped values of each numeric column coded
   by rank; then one pass, or one per group of columns whose counts fit the memory limit,
   sums every column's (code, class) counts;
3. **cells**: one pass over every coded column and the target counts (cell, class) pairs
   (:class:`_Cells`).

No pass keeps anything by row: the sums are added where the batches are read
(:func:`~dpfast.dataflow.flow.column_total`), so a cluster's driver receives count tables,
never rows. The passes' functions are module-level classes, which a cluster ships to its
workers.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from dpfast._kernels import contingency as kernels
from dpfast._validation import quoted
from dpfast.dataflow.flow import (
    SENT_BACK,
    Dataflow,
    column_total,
    dumps_error,
    numeric_values,
)
from dpfast.dataflow.source import Columns
from dpfast.dataflow.values import CategoricalColumn, Classes, CodedNumeric, Contingency, Lookup
from dpfast.exceptions import DPFastValueError
from dpfast.io import TableData, as_table_data

__all__ = ["CodedPasses", "PassContingency", "clamped", "found_classes", "occurring"]

T = TypeVar("T")

#: Bytes of working memory per value of a batch (the Arrow batch, its float64 values,
#: codes, classes and cell numbers, and slack). A batch of several columns holds as many
#: values as a batch of one: its rows are cut by the number of columns.
BYTES_PER_BATCH_ROW = 64
#: Bytes per distinct value of a numeric column coded by rank: the value, its position
#: in the cut and its counts per class (8 bytes each).
_BYTES_PER_DISTINCT = 16


def _batch_table(name: Hashable, array: pa.Array) -> TableData:
    return as_table_data(pa.table({str(name): array}))


def occurring(codes: np.ndarray, categories: list[Any]) -> list[Any]:
    """Return the categories that some code names (``-1``, a missing value, names none)."""
    return [categories[i] for i in np.unique(codes[codes >= 0])]


def found_classes(
    codes: np.ndarray, categories: list[Any], lookup: Lookup
) -> tuple[int, list[Any], np.ndarray]:
    """Return a target's missing values, its occurring categories outside ``lookup``, and classes.

    The classes are ``lookup``'s table: each category's class (undefined for those outside).
    """
    table, outside = lookup(categories)
    present = np.zeros(len(categories), dtype=bool)
    present[codes[codes >= 0]] = True
    return int((codes < 0).sum()), [categories[i] for i in outside if present[i]], table


def clamped(values: np.ndarray, column: CodedNumeric) -> tuple[np.ndarray, int]:
    """Return a numeric column's values clamped to its bounds, and how many were outside."""
    lower, upper = column.lower, column.upper
    outside = int(np.count_nonzero((values < lower) | (values > upper)))
    return np.clip(values, lower, upper), outside


@dataclass(frozen=True)
class _Occurring:
    """The distinct values that occur in a batch."""

    name: Hashable

    def __call__(self, array: pa.Array, first_row: int) -> list[Any]:
        return occurring(*_batch_table(self.name, array).category_codes(str(self.name)))


@dataclass(frozen=True)
class _ClassCheck:
    """A batch's missing values of the target, and its values outside the lookup."""

    name: Hashable
    lookup: Lookup

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, list[Any]]:
        codes, categories = _batch_table(self.name, array).category_codes(str(self.name))
        missing, unknown, _ = found_classes(codes, categories, self.lookup)
        return missing, unknown


@dataclass(frozen=True)
class _Classify:
    """A batch of the target as class codes (int64), once :class:`_ClassCheck` found all known."""

    name: Hashable
    lookup: Lookup

    def __call__(self, array: pa.Array) -> np.ndarray:
        codes, categories = _batch_table(self.name, array).category_codes(str(self.name))
        lookup, _ = self.lookup(categories)
        if not codes.size:
            return np.zeros(0, dtype=np.int64)
        classes: np.ndarray = lookup[np.maximum(codes, 0)].astype(np.int64)
        return classes


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
        clipped, found = clamped(values, column)
        if self.code_values is None:
            return first_row, (clipped - column.lower).astype(np.int64), found
        return first_row, np.searchsorted(self.code_values, clipped).astype(np.int64), found


#: What a batch of the counting pass gives: per column its (code, class) counts and its
#: clamped count, and the columns whose batch was refused: ``(column, first_row, error)``.
_Counted = tuple[tuple[np.ndarray, ...], tuple[int, ...], list[tuple[int, int, bytes]]]


@dataclass(frozen=True)
class _Counts:
    """A batch's (code, class) counts and clamped count of each of some coded columns.

    The batch is a struct array of the columns, then the target. A column whose batch is
    refused (a bad value) adds nothing and sends back its pickled error instead.
    """

    coders: tuple[_Codes, ...]
    n_codes: tuple[int, ...]
    classify: _Classify
    n_classes: int

    def __call__(self, array: pa.Array, first_row: int) -> _Counted:
        classes = self.classify(array.field(len(self.coders)))
        hists, clamped, failed = [], [], []
        for j, (coder, n_codes) in enumerate(zip(self.coders, self.n_codes, strict=True)):
            try:
                _, codes, found = coder(array.field(j), first_row)
            except SENT_BACK as exc:
                failed.append((j, first_row, dumps_error(exc)))
                found = 0
                hists.append(np.zeros((n_codes, self.n_classes), dtype=np.int64))
            else:
                hists.append(kernels.class_histogram(codes, classes, n_codes, self.n_classes))
            clamped.append(found)
        return tuple(hists), tuple(clamped), failed

    def start(self) -> _Counted:
        """Return the counts of no batch."""
        hists = tuple(np.zeros((n, self.n_classes), dtype=np.int64) for n in self.n_codes)
        return hists, (0,) * len(self.coders), []


@dataclass(frozen=True)
class _Cells:
    """A batch's (cell, class) counts, flat: every coded column and the target, as a struct.

    ``at[j][code]`` is the position of column ``j``'s code's label in the final cut,
    times the column's stride, so a row's cell is the sum over its columns.
    """

    coders: tuple[_Codes, ...]
    at: tuple[np.ndarray, ...]
    classify: _Classify
    n_cells: int
    n_classes: int

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        cells = np.zeros(len(array), dtype=np.int64)
        for j, (coder, at) in enumerate(zip(self.coders, self.at, strict=True)):
            _, codes, _ = coder(array.field(j), first_row)
            cells += at[codes]
        classes = self.classify(array.field(len(self.coders)))
        return np.bincount(
            cells * self.n_classes + classes, minlength=self.n_cells * self.n_classes
        )


def _name(column: CodedNumeric | CategoricalColumn) -> Hashable:
    return column.name if isinstance(column, CategoricalColumn) else column.column.name


def _n_codes(coder: _Codes) -> int:
    """Return how many codes a coder's column has: its taxonomy's leaves, or code values."""
    if isinstance(coder.column, CategoricalColumn):
        return len(coder.column.taxonomy.domain)
    if coder.code_values is not None:
        return int(coder.code_values.shape[0])
    return int(coder.column.upper - coder.column.lower) + 1


class CodedPasses:
    """One step's passes over a dataflow's source: batch size, progress numbered across it."""

    def __init__(self, flow: Dataflow) -> None:
        self.source = flow.source
        self.memory = flow.limits.memory
        self.most_rows = flow.limits.batch_rows
        self.tick = flow.tick
        self.done = 0

    def batch_rows(self, columns: int) -> int:
        """Return the rows of a batch of ``columns`` columns: the values of a one-column batch."""
        rows = min(self.most_rows, max(1024, self.memory // BYTES_PER_BATCH_ROW))
        return max(1, rows // columns)

    def _count(self, what: str) -> None:
        self.done += 1
        self.tick(f"pass {self.done} ({what})", self.done, self.done + 1)

    def map(self, name: Hashable, fn: Callable[[pa.Array, int], Any]) -> Iterator[Any]:
        """Run ``fn`` on every batch of column ``name``, counting the pass for progress."""
        self._count(f"column {name}")
        return self.source.map_column(str(name), self.batch_rows(1), fn)

    def total(self, name: Columns, what: str, fn: Callable[[pa.Array, int], T], start: T) -> T:
        """Add ``fn`` of each batch of ``name`` to ``start`` where it is read (pass ``what``)."""
        self._count(what)
        columns = 1 if isinstance(name, str) else len(name)
        return column_total(self.source, name, self.batch_rows(columns), fn, start, most=1)

    # -- the passes ---------------------------------------------------------------------

    def occurring_values(self, name: Hashable) -> list[Any]:
        """Return the values that occur in column ``name``, from one pass."""
        found: dict[Any, None] = {}
        for part in self.map(name, _Occurring(name)):
            found.update(dict.fromkeys(part))
        return list(found)

    def class_codes(self, name: Hashable, lookup: Lookup) -> Classes:
        """Check the target's values (one pass); its classes are coded again by each pass."""
        start: tuple[int, list[Any]] = (0, [])
        missing, found = self.total(str(name), f"column {name}", _ClassCheck(name, lookup), start)
        unknown = list(dict.fromkeys(found))
        return Classes(lookup.size, missing, unknown, _Classify(name, lookup))

    def contingency(
        self, classes: Classes, columns: Sequence[CodedNumeric | CategoricalColumn]
    ) -> PassContingency:
        """Code every column and sum its (code, class) counts (step 2 of the module docstring).

        A bad value raises the error of the first column holding one (in order), at its first
        bad row, as passes column by column would.
        """
        coders: list[_Codes] = []
        code_values: list[np.ndarray | None] = []
        refused: BaseException | None = None
        for column in columns:
            values: np.ndarray | None = None
            if isinstance(column, CategoricalColumn):
                coder = _Codes(column)
            elif column.by_offset:
                values = np.arange(column.lower, column.upper + 1, dtype=np.float64)
                coder = _Codes(column)
            else:
                try:
                    values = self._distinct(column, classes.size)
                except SENT_BACK as exc:  # raised unless an earlier column has a bad value
                    refused = exc
                    break
                coder = _Codes(column, values)
            coders.append(coder)
            code_values.append(values)
        hists: list[np.ndarray] = []
        clamped: list[int] = []
        for group in self._groups(coders, classes.size):
            counted, found = self._counts(group, classes)
            hists.extend(counted)
            clamped.extend(found)
        if refused is not None:
            raise refused
        return PassContingency(self, classes, coders, hists, code_values, clamped)

    def _groups(self, coders: list[_Codes], n_classes: int) -> Iterator[list[_Codes]]:
        """Cut ``coders`` in order into groups whose counts (held three times) fit memory."""
        group: list[_Codes] = []
        held = 0
        for coder in coders:
            size = 3 * 8 * n_classes * _n_codes(coder)
            if group and held + size > self.memory:
                yield group
                group, held = [], 0
            group.append(coder)
            held += size
        if group:
            yield group

    def _distinct(self, column: CodedNumeric, n_classes: int) -> np.ndarray:
        """Return the distinct clamped values of a column coded by rank (a pass)."""
        found = np.empty(0, dtype=np.float64)
        per_value = _BYTES_PER_DISTINCT + 8 * n_classes
        name = column.column.name
        for part in self.map(name, _Distinct(column)):
            found = np.union1d(found, part)
            if found.shape[0] * per_value > self.memory:
                raise DPFastValueError(
                    f"column {quoted(name)} holds more than {found.shape[0]:,} distinct values, "
                    f"whose class counts need more than the memory limit of {self.memory:,} "
                    "bytes; raise the memory limit, or round the column to fewer values"
                )
        return found

    def _counts(
        self, coders: list[_Codes], classes: Classes
    ) -> tuple[tuple[np.ndarray, ...], tuple[int, ...]]:
        """Return the columns' (code, class) counts and clamped counts (one pass)."""
        counts = _Counts(tuple(coders), tuple(map(_n_codes, coders)), classes.codes, classes.size)
        names = (*(str(_name(c.column)) for c in coders), str(classes.codes.name))
        what = f"the counts of {len(coders)} columns" if len(coders) > 1 else f"column {names[0]}"
        hists, clamped, failed = self.total(names, what, counts, counts.start())
        if failed:
            raise pickle.loads(min(failed)[2])
        return hists, tuple(int(c) for c in clamped)


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
        """Return the column's (code, class) counts, summed by the counting pass."""
        return self.hists[column]

    def start(self, labels: Sequence[int]) -> None:
        """Give every code of each column its first label."""
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
        """Count every (cell, class) pair in one pass (see the module docstring)."""
        n_cells = math.prod(sizes)
        strides = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
        at = tuple(position[self.labels[j]] * strides[j] for j in range(len(self.coders)))
        classify = self.classes.codes
        fn = _Cells(tuple(self.coders), at, classify, n_cells, self.n_classes)
        names = (*(str(_name(c.column)) for c in self.coders), str(classify.name))
        start = np.zeros(n_cells * self.n_classes, dtype=np.int64)
        counts = self.passes.total(names, "the cells", fn, start)
        return counts.reshape(n_cells, self.n_classes)
