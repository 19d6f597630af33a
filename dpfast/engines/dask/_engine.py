"""The Dask engine: the out-of-core engine over a Dask DataFrame, its passes on the workers.

The client keeps the passes' small state (:class:`DaskSource`) and builds the reports; the
release is a lazy frame the workers compute from it where every column allows it, else the
file the client wrote, read back in row order (:class:`~dpfast.engines.outofcore.ClusterEngine`).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpfast.engines.dask._settings import (
    categories,
    kept_dtypes,
    read_in_order,
    scratch_directory,
)
from dpfast.engines.dask._settings import memory_limit as configured_memory
from dpfast.engines.dask._source import (
    DaskSource,
    arrow_column,
    dask_of,
    sort_range,
    split_by_range,
)
from dpfast.engines.dask._write import write_dataset
from dpfast.engines.frames import (
    ExchangedParts,
    GeneratedParts,
    GroupsColumn,
    RowsBatch,
    RowsColumn,
    WritePlan,
    remember,
)
from dpfast.engines.outofcore import ClusterEngine

__all__ = ["DaskEngine"]


class DaskEngine(ClusterEngine):
    """A Dask DataFrame (or :class:`DaskSource`) released on the workers."""

    name = "dask"

    frame = "a Dask DataFrame"
    frame_module = "dask.dataframe"
    in_memory = "frame.compute()"

    source_type = DaskSource
    cluster_of = staticmethod(dask_of)
    ranks_exchanged = True

    @classmethod
    def settings(cls, source: Any) -> tuple[int, Path]:
        """Return ``dpfast.memory-limit`` of Dask's configuration and this process's scratch."""
        return configured_memory(), scratch_directory()

    def groups_frame(self, parts: GeneratedParts) -> Any:
        """Return the lazy frame of the released columns: task ``p`` computes part ``p``.

        The state (every column's group values, ``8 * n / k`` bytes each) is one graph node, sent
        once to each worker that computes a part, not once per task; as the write plan
        (:func:`remember`) it has :meth:`write_dataset` write each part in its task, in Arrow.
        """
        import dask.dataframe as dd
        from dask.delayed import delayed

        name = f"dpfast-release-state-{uuid.uuid4().hex}"  # not hashed: a fresh name per release
        state = delayed(parts, name=name, traverse=False)
        compute = delayed(_groups_part, pure=False)
        meta = pd.DataFrame({c.name: pd.Series([], dtype=_dtype(c)) for c in parts.columns})
        with kept_dtypes():
            frame = dd.from_delayed(
                [compute(state, p) for p in range(parts.count)], meta=meta, verify_meta=False
            )
        return remember(frame, WritePlan(generated=parts))

    def rows_frame(self, columns: Sequence[RowsColumn]) -> Any:
        """Return the lazy frame of row-wise released columns, one task per input partition."""
        import dask.dataframe as dd
        from dask.delayed import delayed

        cells, batch_rows = tuple(columns), self.limits.batch_rows
        names = [c.name for c in cells]
        kinds = [self.cluster.schema.field(name).type for name in names]
        noised, fn = delayed(_rows_part, pure=False), RowsBatch(cells)
        parts = [
            noised(part, first, rows, names, kinds, fn, batch_rows)
            for part, first, rows in self.cluster.parts(names)
        ]
        meta = pd.DataFrame({c.name: pd.Series([], dtype=_dtype(c)) for c in cells})
        return dd.from_delayed(parts, meta=meta, verify_meta=False)

    def exchange_frame(self, parts: ExchangedParts) -> Any:
        return _exchange_frame(self.cluster, parts, self.limits.batch_rows)

    def file_frame(self, path: Path) -> Any:
        """Return the written release; a copied categorical column keeps its categories."""
        kept = {n: t for n, t in categories(self.cluster).items() if n in self.kept.copied}
        return read_in_order(path, kept)

    def table_frame(self, table: Any) -> Any:
        """Return the table as a frame of one partition (dictionaries as categoricals)."""
        import dask.dataframe as dd

        with kept_dtypes():
            return dd.from_pandas(table.to_pandas(), npartitions=1, sort=False)

    @classmethod
    def write_dataset(cls, frame: Any, directory: Path, target: Path, progress: Any) -> Any:
        return write_dataset(frame, directory, target, progress)


def _dtype(column: GroupsColumn | RowsColumn) -> Any:
    """Return a released column's in-memory pandas dtype (labels categorical if the input is)."""
    if isinstance(column, GroupsColumn) and column.numeric is None:
        if column.dictionary is not None:
            return column.labels_of(np.empty(0, dtype=np.int64)).to_pandas().dtype
        return pd.Series(["label"]).dtype
    return column.arrow_type.to_pandas_dtype()


def _groups_series(column: GroupsColumn, array: pa.Array) -> pd.Series:
    """Return a rank-group column's rows as the in-memory release's pandas series."""
    if column.dictionary is not None:
        values = array.to_pandas()
    else:
        values = array.to_pylist() if column.kind == "labels" else array.to_numpy()
    return pd.Series(values, dtype=_dtype(column), copy=False)


def _indexed(frame: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """Return ``frame`` indexed by the output rows ``lo .. hi - 1`` it holds."""
    frame.index = pd.RangeIndex(lo, hi)
    return frame


def _batches(
    part: Any, first: int, rows: int, names: list[str], kinds: list[Any], batch_rows: int
) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Yield a partition's batches of columns ``names`` and their first rows (one if empty)."""
    arrays = [arrow_column(part, n, kind, rows) for n, kind in zip(names, kinds, strict=True)]
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    for lo in range(0, max(rows, 1), batch_rows):
        yield batch.slice(lo, batch_rows), first + lo


def _groups_part(parts: GeneratedParts, part: int) -> pd.DataFrame:
    """Return output part ``part`` of every released column, on a worker."""
    arrays = parts.table(part).columns
    data = {c.name: _groups_series(c, a) for c, a in zip(parts.columns, arrays, strict=True)}
    return _indexed(pd.DataFrame(data), *parts.span(part))


def _rows_part(
    part: Any,
    first: int,
    rows: int,
    names: list[str],
    kinds: list[Any],
    fn: RowsBatch,
    batch_rows: int,
) -> pd.DataFrame:
    """Release one partition's rows, a batch at a time, on a worker."""
    out = [fn(batch, row) for batch, row in _batches(part, first, rows, names, kinds, batch_rows)]
    return _indexed(pa.Table.from_batches(out).to_pandas(), first, first + rows)


def _exchange_frame(source: DaskSource, parts: ExchangedParts, batch_rows: int) -> Any:
    """Return the lazy frame of ``parts`` (:mod:`dpfast.engines.frames.exchange`).

    The state is one node of the graph; the assembling tasks are the frame's write plan
    (:func:`remember`), whose tables :func:`write_dataset` writes as computed.
    """
    import dask.dataframe as dd
    from dask.delayed import delayed

    names = parts.inputs
    kinds = [source.schema.field(name).type for name in names]
    state = delayed(parts, name=f"dpfast-exchange-{uuid.uuid4().hex}", traverse=False)
    emitted = []
    if names:
        emit = delayed(_emit_part, pure=False)
        emitted = [
            emit(state, part, first, rows, names, kinds, batch_rows)
            for part, first, rows in source.parts(names)
        ]
    for column in range(len(parts.ranked)):
        emitted.extend(_ranked_emits(source, parts, state, column, batch_rows))
    assemble = delayed(_assemble_part, pure=False, nout=2)
    assembled = [assemble(state, p, [e[p] for e in emitted]) for p in range(parts.count)]
    tables = [table for table, _ in assembled]
    convert = delayed(_exchanged_pandas, pure=False)
    groups = parts.group_columns
    empty = pa.schema(list(zip(parts.names, parts.types, strict=True))).empty_table().to_pandas()
    meta = pd.DataFrame(
        {
            name: pd.Series([], dtype=_dtype(groups[name]) if name in groups else empty[name].dtype)
            for name in parts.names
        }
    )
    with kept_dtypes():
        frame = dd.from_delayed(
            [convert(state, table, p) for p, table in enumerate(tables)],
            meta=meta,
            verify_meta=False,
        )
    return remember(frame, WritePlan(exchanged=parts, tasks=assembled))


def _ranked_emits(
    source: DaskSource, parts: ExchangedParts, state: Any, column: int, batch_rows: int
) -> list[Any]:
    """Return the tasks sending a ranked column's values: a task per range and chunk of ties.

    Each range's task sorts what the partitions' tasks split off (:func:`split_by_range`, as
    :meth:`DaskSource.sort_ranges` does) and sends its ranks (:meth:`ExchangedParts.emit_sorted`).
    """
    from dask.delayed import delayed

    ranked = parts.ranked[column]
    ranges, name = ranked.plan.ranges, ranked.name
    out = []
    if len(ranges):
        kind = source.schema.field(name).type
        split = delayed(split_by_range, pure=False, nout=len(ranges))
        pieces = [
            split(part, first, rows, name, kind, ranked.keys, ranges, batch_rows)
            for part, first, rows in source.parts([name])
        ]
        sort = delayed(_sort_emit, pure=False)
        key_bits = ranked.plan.key_bits
        for i in range(len(ranges)):
            out.append(sort(state, column, [piece[i] for piece in pieces], i, key_bits))
    ties = delayed(_emit_ties, pure=False)
    out.extend(ties(state, column, i) for i in range(len(ranked.ties)))
    return out


def _sort_emit(
    parts: ExchangedParts, column: int, pieces: list[Any], index: int, key_bits: int
) -> list[list[bytes]]:
    """Sort range ``index`` of a ranked column and return its pieces by part, on a worker."""
    return sort_range(pieces, index, key_bits, functools.partial(parts.emit_sorted, column))


def _emit_ties(parts: ExchangedParts, column: int, index: int) -> list[list[bytes]]:
    """Return the pieces of a ranked column's chunk of ties ``index`` by part, on a worker."""
    return parts.emit_ties(column, index)


def _emit_part(
    parts: ExchangedParts,
    part: Any,
    first: int,
    rows: int,
    names: list[str],
    kinds: list[Any],
    batch_rows: int,
) -> list[list[bytes]]:
    """Return one input partition's pieces, by output part, on a worker."""
    out: list[list[bytes]] = [[] for _ in range(parts.count)]
    for batch, row in _batches(part, first, rows, names, kinds, batch_rows):
        for target, payload in parts.emit(batch, row):
            out[target].append(payload)
    return out


def _assemble_part(
    parts: ExchangedParts, part: int, pieces: list[list[bytes]]
) -> tuple[pa.Table, list[tuple[int, int, int]]]:
    """Return output part ``part`` from every task's pieces, and its counts, on a worker."""
    return parts.assemble_counted(part, [payload for held in pieces for payload in held])


def _exchanged_pandas(parts: ExchangedParts, table: pa.Table, part: int) -> pd.DataFrame:
    """Return an assembled part as the in-memory release's pandas frame."""
    groups = parts.group_columns
    data = {}
    for name, array in zip(table.column_names, table.columns, strict=True):
        chunk = array.combine_chunks()
        data[name] = _groups_series(groups[name], chunk) if name in groups else chunk.to_pandas()
    return _indexed(pd.DataFrame(data), *parts.span(part))
