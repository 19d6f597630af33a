"""A column coded by a public domain and released row by row, beyond memory (docs/engines.md).

One pass: each batch's values are looked up in the domain and its codes released by the
method's cells where the batch is read (a cluster's workers); the codes are written at
their rows' places in the column's scratch file, 8 bytes a row, whatever order the
batches come in, and read back as the domain's labels. A batch with a missing value or a
value outside the domain writes nothing and reports them, so that the release stops after
the pass with the in-memory error (the values outside named in row order).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpfast.engines.outofcore._output import ScratchColumn
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.scratch_files import write_at
from dpfast.engines.values import CodeCells, check_in_domain, code_dtype
from dpfast.io import arrow_labels

__all__ = ["write_codes"]


def write_codes(
    dataset: ColumnSource,
    name: Hashable,
    domain: Sequence[Any],
    cells: CodeCells,
    path: Path,
    batch_rows: int,
    declared: Sequence[str] | None = None,
) -> ScratchColumn:
    """Write column ``name``'s released codes at their rows' places; return it as labels.

    A dictionary column of a domain of text comes back a dictionary, as in memory
    (:func:`dpfast.io.arrow_labels`, with the categories its type ``declared``).
    """
    coded = _Coded(pd.Index(list(domain)), code_dtype(len(domain)), cells)
    found = _Outside()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for first_row, codes, outside in dataset.map_column(str(name), batch_rows, coded):
            found.add(outside)
            if codes is not None:
                write_at(fd, codes, first_row * 8)
    finally:
        os.close(fd)
    first_rows = found.first_rows
    check_in_domain(name, found.missing, sorted(first_rows, key=lambda value: first_rows[value]))
    original = dataset.schema.field(str(name)).type
    if pa.types.is_dictionary(original) and all(isinstance(v, str) for v in domain):
        return _dictionary(str(name), list(domain), original, declared, path)
    labels = np.asarray(domain)
    if labels.dtype.kind in "USO":  # the values the in-memory release decodes codes into
        labels = np.asarray(domain, dtype=object)
    return _labels(str(name), pa.array(labels), path)


def _labels(name: str, labels: pa.Array, path: Path) -> ScratchColumn:
    """Return a column written as int64 codes, read back as ``labels``."""

    def read(first: int, count: int) -> pa.Array:
        codes = np.fromfile(path, np.int64, count, offset=first * 8)
        return labels.take(pa.array(codes))

    return ScratchColumn(name, labels.type, read, dictionary=True)


def _dictionary(
    name: str,
    domain: list[str],
    original: pa.DataType,
    declared: Sequence[str] | None,
    path: Path,
) -> ScratchColumn:
    """Return a column written as int64 codes, read back as a dictionary of the domain."""

    def read(first: int, count: int) -> pa.Array:
        codes = np.fromfile(path, np.int64, count, offset=first * 8)
        return arrow_labels(codes, domain, original, declared)

    return ScratchColumn(name, read(0, 0).type, read, dictionary=True)


@dataclass
class _Outside:
    """What a pass found outside a domain: missing values, and values with their first row."""

    missing: int = 0
    first_rows: dict[Any, int] = field(default_factory=dict)

    def add(self, other: _Outside) -> None:
        self.missing += other.missing
        for value, row in other.first_rows.items():
            self.first_rows[value] = min(row, self.first_rows.get(value, row))


@dataclass(frozen=True)
class _Coded:
    """A batch coded by a domain and released by ``cells``, with its first row.

    Returns ``(first_row, int64 codes, nothing outside)``, or ``(first_row, None, what is
    outside)`` for a batch with values outside the domain (or missing).
    """

    index: pd.Index
    dtype: Any
    cells: CodeCells

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, np.ndarray | None, _Outside]:
        values = array.to_numpy(zero_copy_only=False)
        codes = self.index.get_indexer(values)
        bad = codes < 0
        if bad.any():
            return first_row, None, _outside(values, bad, first_row)
        drawn = self.cells(codes.astype(self.dtype), first_row)
        return first_row, np.asarray(drawn, dtype=np.int64), _Outside()


def _outside(values: np.ndarray, bad: np.ndarray, first_row: int) -> _Outside:
    """Count the missing values among ``bad`` and find the others' first rows."""
    missing = pd.isna(values[bad])
    rows = np.flatnonzero(bad)[~missing]
    frame = pd.DataFrame({"value": values[rows], "row": rows + first_row})
    frame = frame.drop_duplicates("value")
    return _Outside(int(missing.sum()), dict(zip(frame["value"], frame["row"], strict=True)))
