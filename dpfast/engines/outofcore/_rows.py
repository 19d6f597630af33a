"""Shared pieces of the row-wise engines (:mod:`dpfast.engines.rowwise`).

Writing a released column at its rows' places, copying the columns that are not
protected, and the checking pass over a numeric column.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from dpfast._validation import as_numeric_column, check_columns
from dpfast.accounting import Report
from dpfast.engines.outofcore._legacy import (
    DatasetRun,
    Progress,
    ScratchColumn,
    _Limits,
    _scratch_name,
    _write_and_publish,
)
from dpfast.engines.outofcore._sources import ColumnSource

Hook = Callable[[Report], None]


@dataclass(frozen=True)
class Output:
    """Where and how a release is written: the path, the limits, progress and the hooks."""

    path: Path
    limits: _Limits
    progress: Progress | None
    before_publish: Hook | None
    after_publish: Callable[[], None] | None


def output_of(
    output: str | os.PathLike[str],
    memory_limit: int,
    batch_rows: int,
    progress: Progress | None,
    before_publish: Hook | None,
    after_publish: Callable[[], None] | None,
) -> Output:
    limits = _Limits(int(memory_limit), int(batch_rows))
    return Output(Path(output), limits, progress, before_publish, after_publish)


# ---------------------------------------------------------------------------------------
# Writing columns at their rows' places, and copying the others


def write_rows(
    dataset: ColumnSource,
    name: str,
    path: Path,
    batch_rows: int,
    fn: Callable[[pa.Array, int], tuple[np.ndarray | None, Any]],
    adjust: Callable[[np.ndarray, int], np.ndarray] | None = None,
) -> list[Any]:
    """Write ``fn(batch, first_row)[0]`` at row ``first_row``'s place (8 bytes a row) of ``path``.

    ``adjust(values, first_row)``, if given, runs where the file is written, on the
    values of each batch before they are written. Returns the second items, in the order
    the batches came; a ``None`` array (an input error found in the batch) is not written.
    """

    def batch(array: pa.Array, first_row: int) -> tuple[int, np.ndarray | None, Any]:
        values, result = fn(array, first_row)
        return first_row, values, result

    results = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for first_row, values, result in dataset.map_column(name, batch_rows, batch):
            results.append(result)
            if values is None:
                continue
            if adjust is not None:
                values = adjust(values, first_row)
            data = np.ascontiguousarray(values).data.cast("B")
            written = 0
            while written < data.nbytes:
                written += os.pwrite(fd, data[written:], 8 * first_row + written)
    finally:
        os.close(fd)
    return results


def float_scratch(scratch: Path, name: Hashable) -> ScratchColumn:
    """Return a column written as float64 at its rows' places."""
    path = scratch / _scratch_name(name)

    def read(first: int, count: int) -> pa.Array:
        return pa.array(np.fromfile(path, np.float64, count, offset=first * 8))

    return ScratchColumn(str(name), pa.float64(), read)


def copied_scratch(
    dataset: ColumnSource, name: str, scratch: Path, batch_rows: int
) -> ScratchColumn:
    """Copy a column unchanged, batch by batch, into Arrow files; return it by row range.

    Each batch goes to a file named after its first row, so the batches may come in any
    order; rows ``[first, first + count)`` are then read from the files that hold them.
    The batches are written where the passes are driven (never by a source's workers,
    which may run on other machines, as Spark's executors do).
    """
    folder = scratch / f"copy-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:32]}"
    folder.mkdir()

    def batch(array: pa.Array, first_row: int) -> tuple[int, pa.Array]:
        return first_row, array

    parts = []
    for first_row, array in dataset.map_column(name, batch_rows, batch):
        if len(array):
            schema = pa.schema([pa.field("v", array.type)])
            with pa.OSFile(str(folder / f"{first_row:020d}.arrow"), "wb") as sink:
                with pa.ipc.new_file(sink, schema) as writer:
                    writer.write_batch(pa.record_batch([array], schema=schema))
            parts.append((first_row, len(array), array.type))
    parts.sort()
    starts = [first for first, _, _ in parts]
    arrow_type = parts[0][2] if parts else dataset.schema.field(name).type

    def read(first: int, count: int) -> pa.Array:
        pieces = []
        i = bisect.bisect_right(starts, first) - 1
        while count > 0:
            start, rows, _ = parts[i]
            with pa.memory_map(str(folder / f"{start:020d}.arrow")) as source:
                column = pa.ipc.open_file(source).get_batch(0).column(0)
                take = min(rows - (first - start), count)
                piece = column.slice(first - start, take)
                # a copy: the memory map is closed when the block ends
                pieces.append(pa.concat_arrays([piece]))
            first, count, i = first + take, count - take, i + 1
        return cast(pa.Array, pa.chunked_array(pieces, arrow_type))

    return ScratchColumn(name, arrow_type, read)


def _columns_in_order(
    dataset: ColumnSource, released: dict[str, ScratchColumn], scratch: Path, limits: _Limits
) -> list[ScratchColumn]:
    """Return the released columns and the others copied unchanged, in the dataset's order."""
    return [
        released[name]
        if name in released
        else copied_scratch(dataset, name, scratch, limits.batch_rows)
        for name in dataset.names
    ]


def publish(
    dataset: ColumnSource,
    run: DatasetRun,
    released: dict[str, ScratchColumn],
    scratch: Path,
    out: Output,
    report: Report,
) -> None:
    with run.phase("copy"):
        columns = _columns_in_order(dataset, released, scratch, out.limits)
    _write_and_publish(
        scratch, out.path, columns, run, report, out.before_publish, out.after_publish
    )


def numpy_dtype(arrow_type: pa.DataType) -> np.dtype[Any]:
    """Return the NumPy dtype that a batch of ``arrow_type`` without missing values gives."""
    return pa.array([], arrow_type).to_numpy(zero_copy_only=False).dtype  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------
# Numeric columns of k-noise and k-PRAM


@dataclass(frozen=True)
class ColumnStats:
    """What one pass finds in a numeric column: its range and its non-finite values."""

    lo: float
    hi: float
    non_finite: int
    first_bad: int
    first_kind: str


def float_values(array: pa.Array) -> np.ndarray:
    """One batch of a numeric column as float64 (missing values as NaN)."""
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


def column_stats(dataset: ColumnSource, name: str, batch_rows: int) -> ColumnStats:
    """One pass: a numeric column's min and max, and its non-finite values."""

    def batch(array: pa.Array, first_row: int) -> ColumnStats:
        values = float_values(array)
        bad = ~np.isfinite(values)
        count = int(bad.sum())
        if count:
            first = int(np.argmax(bad))
            kind = "NaN or missing" if np.isnan(values[first]) else "infinite"
            return ColumnStats(math.inf, -math.inf, count, first_row + first, kind)
        if not values.shape[0]:
            return ColumnStats(math.inf, -math.inf, 0, -1, "")
        return ColumnStats(float(values.min()), float(values.max()), 0, -1, "")

    lo, hi, count, first, kind = math.inf, -math.inf, 0, -1, ""
    for part in dataset.map_column(name, batch_rows, batch):
        lo, hi, count = min(lo, part.lo), max(hi, part.hi), count + part.non_finite
        if part.non_finite and (first < 0 or part.first_bad < first):
            first, kind = part.first_bad, part.first_kind
    return ColumnStats(lo, hi, count, first, kind)


def numeric_names(dataset: ColumnSource, columns: Sequence[Hashable] | None) -> list[Hashable]:
    """Return the selected columns, refusing the types the in-memory functions refuse."""
    selected = check_columns(columns, dataset.names)
    for name in selected:
        as_numeric_column(
            np.empty(0, dtype=numpy_dtype(dataset.schema.field(str(name)).type)), name
        )
    return selected


def checked_stats(
    dataset: ColumnSource, names: Sequence[Hashable], limits: _Limits, run: DatasetRun
) -> dict[Hashable, ColumnStats]:
    """One pass per column: ranges, refusing non-finite values as the in-memory functions do."""
    stats = {}
    for name in names:
        run.tick(f"checking {name}", 0, 1)
        found = column_stats(dataset, str(name), limits.batch_rows)
        if found.non_finite:
            raise ValueError(
                f"column {name!r} has {found.non_finite} non-finite value(s) (first at row "
                f"{found.first_bad}: {found.first_kind}); drop or impute them with a public "
                "rule before the release"
            )
        stats[name] = found
    return stats


def is_integer_type(arrow_type: pa.DataType) -> bool:
    """Whether a column of ``arrow_type`` is an integer column (as NumPy sees it)."""
    return bool(pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type))


def typed_scratch(scratch: Path, name: Hashable, dtype: np.dtype[Any]) -> ScratchColumn:
    """Return a column written as float64 at its rows' places, released as ``dtype``."""
    path = scratch / _scratch_name(name)
    arrow_type = pa.from_numpy_dtype(dtype)

    def read(first: int, count: int) -> pa.Array:
        return pa.array(np.fromfile(path, np.float64, count, offset=first * 8).astype(dtype))

    return ScratchColumn(str(name), arrow_type, read)
