"""Out-of-core DiffGen over a column source, within a memory limit (docs/engines.md#diffgen).

The release is the one :func:`dpfast.diffgen` gives for the same table, seed and
arguments: the same cut, split values, noisy counts, ledger and reports. It rests on one
fact of the algorithm: the records of a value ``v`` of attribute ``j`` are the records
whose code of column ``j`` lies under ``v`` (a taxonomy node's leaves, or an interval's
code range), whatever the other attributes. So every score and split value DiffGen draws
is computed from the column's (code, class) counts over all records, restricted to the
codes under ``v``; the in-memory builder gets the very same counts by splitting its
partition tree. The passes, each over one column, batch by batch, with sums that do not
depend on the batches' order:

1. **Classes.** The target column's class codes, written by row to a scratch file of one
   byte per row (two or four for many classes).
2. **Predictors.** Each numeric predictor is checked (a pass); one whose values are coded
   by rank collects its distinct clamped values (a pass). Then each predictor's (code,
   class) counts are summed over the batches (a pass), reading the batch's classes back
   from the scratch file by row range.
3. **Specialisation.** The builder of the in-memory function runs on those counts
   (:class:`PassBuilder`): same candidates, scores, keys and ledger.
4. **Counts.** Each predictor's code is mapped to its position in the final cut and
   added, times the column's stride, into a by-row scratch file of cell numbers (int32:
   at most 2**24 cells); the last predictor's pass counts (cell, class) pairs. The noise
   is then drawn as in memory.

The table (or, with ``microdata``, its expansion into records, row range by row range) is
stitched from scratch columns into Parquet and renamed into place: a failed or
interrupted run leaves no output.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpfast._kernels import diffgen as _kernels
from dpfast._validation import (
    as_numeric_column,
    check_bounds,
    check_choice,
    check_epsilon,
    check_int,
    check_seed,
    is_integer_column,
    non_finite_error,
    option,
)
from dpfast.accounting import PrivateReport, Report
from dpfast.engines.outofcore._legacy import (
    BATCH_ROWS,
    DatasetRun,
    Progress,
    ScratchColumn,
    _publish,
    _scratch_beside,
    _stitch,
)
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.io import as_table_data, build_table
from dpfast.methods.diffgen._budget import Utility
from dpfast.methods.diffgen._columns import (
    CategoricalColumn,
    Column,
    NumericColumn,
    Prepared,
    _check_mappings,
    _class_domain,
    _numeric_names,
    class_lookup,
    labels_from_data,
    missing_classes,
    numeric_domain,
    offset_coded,
    split_grid_step,
    unknown_classes,
)
from dpfast.methods.diffgen._scores import UTILITIES
from dpfast.methods.diffgen._tree import Builder
from dpfast.methods.diffgen.release import COUNT_COLUMN, DiffGenRelease, release_prepared
from dpfast.taxonomy import Taxonomy, as_taxonomy

__all__ = ["PassBuilder", "diffgen_dataset", "diffgen_source"]

#: Bytes of working memory per row of a batch (the Arrow batch, its float64 values,
#: codes, classes and cell numbers, and slack).
BYTES_PER_BATCH_ROW = 64
#: Bytes per distinct value of a numeric predictor coded by rank: the value, its
#: position in the cut and its counts per class (8 bytes each).
_BYTES_PER_DISTINCT = 16


class PassBuilder(Builder):
    """DiffGen's :class:`~dpfast.methods.diffgen._tree.Builder` on per-column class counts.

    ``hists[j]`` is column ``j``'s (code, class) counts over every record; the records of
    a value are those with a code under it, so a value's counts are a slice of them.
    ``count_cells(builder, cuts)`` returns the (cell, class) counts of the final cut (a
    pass over the data). Everything else (candidates, scores, draws) is the in-memory
    builder's.
    """

    def __init__(
        self,
        prepared: Prepared,
        *,
        hists: Sequence[np.ndarray],
        count_cells: Callable[[PassBuilder, list[list[int]]], np.ndarray],
        **options: Any,
    ) -> None:
        super().__init__(prepared, **options)
        self._hists = list(hists)
        self._count_cells = count_cells

    def _root_histogram(self, column: int, n_codes: int) -> np.ndarray:
        return self._hists[column]

    def _start_partitions(self, root_ids: list[int]) -> None:
        pass  # the records stay in the dataset

    def _split_records(
        self,
        value_id: int,
        child_of: np.ndarray,
        offset: int,
        n_codes: int,
        child_ids: np.ndarray,
    ) -> np.ndarray:
        return self._hists[self.values[value_id].column][offset : offset + n_codes]

    def leaf_counts(self) -> tuple[list[list[int]], np.ndarray]:
        """Return the cuts (display order) and the (cell, class) counts, from a pass."""
        cuts = [self.cut_order(j) for j in range(len(self.columns))]
        return cuts, self._count_cells(self, cuts)


class _RowFile:
    """A scratch file of one fixed-size number per row, written and read by row range."""

    def __init__(self, path: Path, dtype: Any, n_rows: int) -> None:
        self.dtype = np.dtype(dtype)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.ftruncate(self.fd, n_rows * self.dtype.itemsize)

    def write(self, first: int, values: np.ndarray) -> None:
        data = np.ascontiguousarray(values, dtype=self.dtype).tobytes()
        offset = first * self.dtype.itemsize
        while data:
            done = os.pwrite(self.fd, data, offset)
            data, offset = data[done:], offset + done

    def read(self, first: int, count: int) -> np.ndarray:
        size = count * self.dtype.itemsize
        parts, offset = [], first * self.dtype.itemsize
        while size:
            part = os.pread(self.fd, size, offset)
            if not part:
                raise OSError("a scratch file ended early; is the disk full?")
            parts.append(part)
            size, offset = size - len(part), offset + len(part)
        return np.frombuffer(b"".join(parts), dtype=self.dtype)

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class _Passes:
    """The passes over the dataset: batch size, the classes scratch file, progress."""

    dataset: ColumnSource
    scratch: Path
    batch_rows: int
    memory: int
    run: DatasetRun
    class_file: _RowFile | None = None
    done: int = 0

    def map(self, name: Hashable, fn: Callable[[pa.Array, int], Any]) -> Iterator[Any]:
        """Run ``fn`` on every batch of column ``name``, counting the pass for progress."""
        self.done += 1
        self.run.tick(f"pass {self.done} (column {name})", self.done, self.done + 1)
        return self.dataset.map_column(str(name), self.batch_rows, fn)

    def classes(self, first: int, count: int) -> np.ndarray:
        """Return the class codes of rows ``[first, first + count)`` as int64."""
        assert self.class_file is not None
        return self.class_file.read(first, count).astype(np.int64)

    def close(self) -> None:
        if self.class_file is not None:
            self.class_file.close()


def diffgen_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    target: Hashable,
    epsilon: float,
    steps: int,
    taxonomies: Mapping[Hashable, Any] | None = None,
    bounds: Mapping[Hashable, tuple[float, float]] | None = None,
    utility: Utility = "max",
    classes: Sequence[Any] | None = None,
    seed: int | None = None,
    microdata: bool = False,
    memory_limit: int,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Callable[[Report], None] | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with DiffGen into Parquet at ``output``, within ``memory_limit``.

    Writes the counts table of :func:`dpfast.diffgen` (with ``microdata``: the records of
    :meth:`DiffGenRelease.microdata`) to ``output``: one ``.parquet`` file, or a dataset
    directory of ``part-NNNNN.parquet`` files for any other path. Arguments as for
    :func:`dpfast.diffgen`; ``bounds`` must be a mapping (bounds from the data need the
    table in memory). ``before_publish(report)`` runs once the data is complete and
    before it is renamed into place, ``after_publish()`` right after. Returns the public
    and the private report.
    """
    start = time.perf_counter()
    target_path = Path(output)
    with _scratch_beside(target_path) as scratch:
        release, run = _release(
            dataset,
            scratch,
            target=target,
            epsilon=epsilon,
            steps=steps,
            taxonomies=taxonomies,
            bounds=bounds,
            utility=utility,
            classes=classes,
            seed=seed,
            memory_limit=memory_limit,
            batch_rows=batch_rows,
            progress=progress,
        )
        columns, n_out = (
            _microdata_columns(release.counts) if microdata else _table_columns(release.counts)
        )
        with run.phase("write"):
            written = _write(scratch, target_path, columns, n_out, run)
        if before_publish is not None:
            before_publish(release.report)
        _publish(written, target_path)
        if after_publish is not None:
            after_publish()
    private = release.private
    private.timings["total"] = time.perf_counter() - start
    return release.report, private


def diffgen_source(
    dataset: ColumnSource,
    scratch: str | os.PathLike[str],
    *,
    target: Hashable,
    epsilon: float,
    steps: int,
    taxonomies: Mapping[Hashable, Any] | None = None,
    bounds: Mapping[Hashable, tuple[float, float]] | None = None,
    utility: Utility = "max",
    classes: Sequence[Any] | None = None,
    seed: int | None = None,
    memory_limit: int,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> DiffGenRelease:
    """Return the :class:`DiffGenRelease` of ``dataset``, its counts as an Arrow table.

    The release of :func:`dpfast.diffgen` on the same table, computed in passes over the
    columns; ``scratch`` is an existing directory for the by-row scratch files (removed
    by the caller). The counts table holds one row per (cell, class): at most
    ``2**24 x classes`` rows. Arguments as for :func:`diffgen_dataset`.
    """
    release, _ = _release(
        dataset,
        Path(scratch),
        target=target,
        epsilon=epsilon,
        steps=steps,
        taxonomies=taxonomies,
        bounds=bounds,
        utility=utility,
        classes=classes,
        seed=seed,
        memory_limit=memory_limit,
        batch_rows=batch_rows,
        progress=progress,
    )
    return release


def _release(
    dataset: ColumnSource,
    scratch: Path,
    *,
    target: Hashable,
    epsilon: float,
    steps: int,
    taxonomies: Mapping[Hashable, Any] | None,
    bounds: Mapping[Hashable, tuple[float, float]] | None,
    utility: Utility,
    classes: Sequence[Any] | None,
    seed: int | None,
    memory_limit: int,
    batch_rows: int,
    progress: Progress | None,
) -> tuple[DiffGenRelease, DatasetRun]:
    run = DatasetRun("diffgen", None, progress, dataset=dataset)
    with run.phase("validate"):
        epsilon = check_epsilon(epsilon)
        steps = check_int(steps, option("steps"))
        if steps < 0:
            raise ValueError(f"{option('steps')} must be >= 0, got {steps}")
        utility = cast(Utility, check_choice(utility, "utility", UTILITIES))
        seed = check_seed(seed)
    rows = max(1024, int(memory_limit) // BYTES_PER_BATCH_ROW)
    passes = _Passes(dataset, scratch, max(1, min(int(batch_rows), rows)), int(memory_limit), run)
    try:
        with run.phase("encode"):
            prepared, hists = _prepare(passes, target, taxonomies, bounds, classes)
        counter = _CellCounter(passes, prepared)

        def make_builder(prepared: Prepared, **options: Any) -> Builder:
            return PassBuilder(prepared, hists=hists, count_cells=counter, **options)

        release = release_prepared(run, prepared, epsilon, steps, utility, seed, make_builder)
    finally:
        passes.close()
    return release, run


# -- encoding --------------------------------------------------------------------------


def _prepare(
    passes: _Passes,
    target: Hashable,
    taxonomies: Any,
    bounds: Any,
    classes: Any,
) -> tuple[Prepared, list[np.ndarray]]:
    """Check the arguments as :func:`dpfast.diffgen` does; encode the columns in passes."""
    dataset = passes.dataset
    if isinstance(bounds, str):
        raise ValueError(
            f"{option('bounds')}={bounds!r} reads the bounds from the data, which runs in "
            "memory only; give public bounds for the numeric predictors"
        )
    empty = as_table_data(dataset.schema.empty_table())
    if dataset.n_rows == 0:
        raise ValueError("the table is empty (0 rows); diffgen needs at least one row")
    if not isinstance(target, Hashable) or target not in empty.names:
        raise ValueError(
            f"target {target!r} is not a column; the table has columns {list(empty.names)}"
        )
    taxonomies, bounds = _check_mappings(empty, taxonomies, bounds)
    trees = {name: as_taxonomy(value, name) for name, value in taxonomies.items()}
    class_taxonomy = trees.pop(target, None)
    numeric_names = _numeric_names(empty, target, trees, bounds)
    predictors = [c for c in empty.names if c in trees or c in numeric_names]
    if not predictors:
        raise ValueError(
            "diffgen needs at least one predictor: give numeric columns public bounds= and "
            "categorical columns taxonomies="
        )
    # the arguments first (bounds, class domain), then the passes
    domains, _ = check_bounds(bounds, numeric_names, {})
    labels, domain_source = _class_domain(target, classes, class_taxonomy)
    numeric = {name: _check_numeric(passes, name, domains[name]) for name in numeric_names}
    class_labels = _write_classes(passes, target, labels)
    n_classes = len(class_labels)
    columns: list[Column] = []
    hists = []
    for name in predictors:
        if name in trees:
            column: Column = CategoricalColumn(name, trees[name], np.empty(0, dtype=np.int64))
        else:
            column = _numeric_codes(passes, numeric[name], n_classes)
        hist, clamped = _histogram(passes, column, n_classes)
        if isinstance(column, NumericColumn):
            column = replace(column, clamped=clamped)
        columns.append(column)
        hists.append(hist)
    prepared = Prepared(
        kind="arrow",
        n_rows=dataset.n_rows,
        columns=columns,
        target=target,
        classes=np.empty(0, dtype=np.int64),
        class_labels=class_labels,
        class_domain=domain_source,
        bounds_from_data=False,
        dropped=[c for c in empty.names if c != target and c not in predictors],
    )
    return prepared, hists


def _batch_table(name: Hashable, array: pa.Array) -> Any:
    return as_table_data(pa.table({str(name): array}))


def _numeric_batch(name: Hashable, array: pa.Array) -> tuple[np.ndarray, bool]:
    """One batch of a numeric predictor as float64 (refused as in memory), and its kind."""
    raw = _batch_table(name, array).column(str(name))
    return as_numeric_column(raw, name), is_integer_column(raw)


@dataclass(frozen=True)
class _NumericSpec:
    name: Hashable
    integer: bool
    lower: float
    upper: float


def _check_numeric(passes: _Passes, name: Hashable, bound: tuple[float, float]) -> _NumericSpec:
    """Refuse bad values (a pass); return the column's domain and kind (from its dtype).

    The non-finite values are counted over every batch, the first one by its global row,
    so the error is the in-memory one.
    """

    def check(array: pa.Array, first_row: int) -> tuple[bool, int, int, bool]:
        raw = _batch_table(name, array).column(str(name))
        floats = as_numeric_column(raw, name, known_finite=True)
        bad = np.flatnonzero(~np.isfinite(floats))
        if not bad.size:
            return is_integer_column(raw), 0, -1, False
        first = int(bad[0])
        return False, int(bad.size), first_row + first, bool(np.isnan(floats[first]))

    integer, count, first, nan = True, 0, -1, False
    for batch_integer, batch_count, batch_first, batch_nan in passes.map(name, check):
        integer = integer and batch_integer
        count += batch_count
        if batch_count and (first < 0 or batch_first < first):
            first, nan = batch_first, batch_nan
    if count:
        raise non_finite_error(name, count, first, nan)
    lower, upper = numeric_domain(name, integer, *bound)
    return _NumericSpec(name, integer, lower, upper)


def _numeric_codes(passes: _Passes, spec: _NumericSpec, n_classes: int) -> NumericColumn:
    """Return the column with its code values: its range, or its distinct values (a pass)."""
    lower, upper = spec.lower, spec.upper
    step = 1.0 if spec.integer else split_grid_step(lower, upper)
    empty = np.empty(0, dtype=np.int64)
    if offset_coded(spec.integer, lower, upper):
        values = np.arange(lower, upper + 1, dtype=np.float64)
        return NumericColumn(spec.name, True, lower, upper, empty, values, 0, step)

    def distinct(array: pa.Array, first_row: int) -> np.ndarray:
        values, _ = _numeric_batch(spec.name, array)
        return np.unique(np.clip(values, lower, upper))

    found = np.empty(0, dtype=np.float64)
    per_value = _BYTES_PER_DISTINCT + 8 * n_classes
    for part in passes.map(spec.name, distinct):
        found = np.union1d(found, part)
        if found.shape[0] * per_value > passes.memory:
            raise ValueError(
                f"column {spec.name!r} holds more than {found.shape[0]:,} distinct values, "
                f"whose class counts need more than the memory limit of {passes.memory:,} "
                "bytes; raise the memory limit, or round the column to fewer values"
            )
    return NumericColumn(spec.name, spec.integer, lower, upper, empty, found, 0, step)


def _write_classes(passes: _Passes, target: Hashable, labels: list[Any] | None) -> list[Any]:
    """Write every row's class code to the classes scratch file; return the class domain.

    Without public labels a first pass reads the values that occur (not private; the
    caller has warned).
    """

    def occurring(array: pa.Array, first_row: int) -> list[Any]:
        codes, categories = _batch_table(target, array).category_codes(str(target))
        return [categories[i] for i in np.unique(codes[codes >= 0])]

    if labels is None:
        used: dict[Any, None] = {}
        for part in passes.map(target, occurring):
            used.update(dict.fromkeys(part))
        labels = labels_from_data(used)
    known = labels
    dtype = np.dtype(_small_dtype(len(known)))
    passes.class_file = _RowFile(passes.scratch / "classes.bin", dtype, passes.dataset.n_rows)

    def encode(array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int, list[Any]]:
        codes, categories = _batch_table(target, array).category_codes(str(target))
        missing = int((codes < 0).sum())
        lookup, outside = class_lookup(categories, known)
        present = np.zeros(len(categories), dtype=bool)
        present[codes[codes >= 0]] = True
        unknown = [categories[i] for i in outside if present[i]]
        classes = lookup[np.maximum(codes, 0)] if codes.size else codes
        return first_row, classes.astype(dtype), missing, unknown

    missing = 0
    unknown: list[Any] = []
    for first_row, codes, batch_missing, batch_unknown in passes.map(target, encode):
        passes.class_file.write(first_row, codes)
        missing += batch_missing
        unknown.extend(v for v in batch_unknown if v not in unknown)
    if missing:
        raise missing_classes(target, missing)
    if unknown:
        raise unknown_classes(target, unknown, known)
    return list(known)


def _small_dtype(n: int) -> type[np.signedinteger[Any]]:
    return np.int8 if n < 2**7 else np.int16 if n < 2**15 else np.int32


def _batch_codes(column: Column, array: pa.Array) -> tuple[np.ndarray, int]:
    """One batch of a predictor as codes (int64), and its clamped values (numeric)."""
    if isinstance(column, CategoricalColumn):
        table = _batch_table(column.name, array)
        codes, categories = table.category_codes(str(column.name))
        taxonomy: Taxonomy = column.taxonomy
        return taxonomy.encode_categories(codes, categories, column=column.name), 0
    values, _ = _numeric_batch(column.name, array)
    lower, upper = column.lower, column.upper
    clipped = np.clip(values, lower, upper)
    clamped = int(np.count_nonzero((values < lower) | (values > upper)))
    if offset_coded(column.integer, lower, upper):
        return (clipped - lower).astype(np.int64), clamped
    return np.searchsorted(column.code_values, clipped).astype(np.int64), clamped


def _n_codes(column: Column) -> int:
    if isinstance(column, CategoricalColumn):
        return len(column.taxonomy.domain)
    return int(column.code_values.shape[0])


def _histogram(passes: _Passes, column: Column, n_classes: int) -> tuple[np.ndarray, int]:
    """Return the column's (code, class) counts over every record and its clamped count."""
    n_codes = _n_codes(column)

    def encode(array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int]:
        codes, clamped = _batch_codes(column, array)
        return first_row, codes, clamped

    hist = np.zeros((n_codes, n_classes), dtype=np.int64)
    clamped = 0
    for first_row, codes, batch_clamped in passes.map(column.name, encode):
        classes = passes.classes(first_row, codes.shape[0])
        hist += _kernels.class_histogram(codes, classes, n_codes, n_classes)
        clamped += batch_clamped
    return hist, clamped


# -- the final counts ------------------------------------------------------------------


class _CellCounter:
    """Count the records of every (cell of the final cut, class), in one pass per predictor."""

    def __init__(self, passes: _Passes, prepared: Prepared) -> None:
        self.passes = passes
        self.prepared = prepared

    def __call__(self, builder: PassBuilder, cuts: list[list[int]]) -> np.ndarray:
        sizes = [len(cut) for cut in cuts]
        n_cells = math.prod(sizes)
        n_classes = len(self.prepared.class_labels)
        strides = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
        counts = np.zeros(n_cells * n_classes, dtype=np.int64)
        last = len(self.prepared.columns) - 1
        cells_file = _RowFile(
            self.passes.scratch / "cells.bin", np.int32, self.passes.dataset.n_rows
        )
        try:
            for j, column in enumerate(self.prepared.columns):
                position = _positions(builder, column, cuts[j]) * strides[j]

                def encode(array: pa.Array, first_row: int, column: Column = column) -> Any:
                    return first_row, _batch_codes(column, array)[0]

                for first_row, codes in self.passes.map(column.name, encode):
                    cells = position[codes]
                    if j > 0:
                        cells += cells_file.read(first_row, codes.shape[0])
                    if j < last:
                        cells_file.write(first_row, cells)
                        continue
                    classes = self.passes.classes(first_row, codes.shape[0])
                    part = np.bincount(cells * n_classes + classes)
                    counts[: part.shape[0]] += part
        finally:
            cells_file.close()
        return counts.reshape(n_cells, n_classes)


def _positions(builder: PassBuilder, column: Column, cut: list[int]) -> np.ndarray:
    """Map every code of ``column`` to its value's position in the cut (int64)."""
    position = np.full(_n_codes(column), -1, dtype=np.int64)
    for p, value_id in enumerate(cut):
        value = builder.values[value_id]
        if isinstance(column, CategoricalColumn):
            position[column.taxonomy.leaves_under(value.node)] = p
        else:
            position[value.a : value.b] = p
    return position


# -- output ----------------------------------------------------------------------------


def _table_columns(counts: pa.Table) -> tuple[list[ScratchColumn], int]:
    """Return the counts table's columns, read by row range (cells x classes rows)."""

    def column(name: str) -> ScratchColumn:
        data = counts.column(name)

        def read(first: int, count: int) -> pa.Array:
            return data.slice(first, count).combine_chunks()

        dictionary = pa.types.is_dictionary(data.type)
        return ScratchColumn(name, data.type, read, dictionary)

    return [column(str(name)) for name in counts.column_names], int(counts.num_rows)


def _microdata_columns(counts: pa.Table) -> tuple[list[ScratchColumn], int]:
    """Return the counts expanded into records (``DiffGenRelease.microdata``) by row range."""
    table = as_table_data(counts)
    ends = np.cumsum(np.asarray(table.column(COUNT_COLUMN), dtype=np.int64))
    n_out = int(ends[-1]) if ends.size else 0

    def column(name: str) -> ScratchColumn:
        codes, labels = table.category_codes(name)

        def build(rows: np.ndarray) -> pa.Array:
            built = build_table("arrow", {name: (codes[rows], labels)})
            return built.column(0).combine_chunks()

        def read(first: int, count: int) -> pa.Array:
            wanted = np.arange(first, first + count, dtype=np.int64)
            return build(np.searchsorted(ends, wanted, side="right"))

        return ScratchColumn(name, build(np.empty(0, dtype=np.int64)).type, read, True)

    names = [str(n) for n in counts.column_names if n != COUNT_COLUMN]
    return [column(name) for name in names], n_out


def _write(
    scratch: Path, target: Path, columns: list[ScratchColumn], n_out: int, run: DatasetRun
) -> Path:
    """Write the columns as Parquet in the scratch directory; return the written path."""
    if n_out:
        return _stitch(scratch, target, columns, n_out, run)
    schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
    empty = schema.empty_table()
    if target.suffix == ".parquet":
        out = scratch / "release.parquet"
        pq.write_table(empty, out)
        return out
    out = scratch / "release"
    out.mkdir()
    pq.write_table(empty, out / "part-00000.parquet")
    return out
