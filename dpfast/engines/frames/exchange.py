"""A release frame computed by a cluster's workers through one exchange (docs/scale.md).

The columns a release copies in a keyed permutation of the rows (``unprotected="shuffle"``),
beside columns released row by row or in rank groups, never pass through the driver:

1. **Emit**, on every batch of the input (a task per input partition): the rows' released
   values (:class:`~dpfast.engines.frames.parts.RowsColumn`) and the columns copied in row
   order go to the output parts holding those rows; each row of a permuted column goes, with
   its bucket (:func:`dpfast.noise.permutation_buckets`: a function of the row's lane of the
   permutation's stream), to the parts holding its bucket.
2. **Assemble**, in output part ``p`` (output rows ``[bounds[p], bounds[p + 1])``): the
   pieces sent to it, ordered by first row, give its rows in row order, and its buckets'
   rows, put in the permutation's order by :func:`dpfast.noise.permutation_order`; rank-group
   columns are computed there from their state (:class:`~dpfast.engines.frames.parts.GroupsColumn`).

A numeric column of rank groups may instead be sent by the tasks that sort it
(:mod:`dpfast.engines.frames.sent_ranks`), the parts assembling it beside the others and
counting its values on a bound (:meth:`ExchangedParts.assemble_counted`). Where a column is
permuted, the parts' bounds are bucket starts (:func:`part_bounds`), so each row is read and
sent once: the work is O(n) whatever the number of parts, and the driver holds only the
permutation's bucket starts.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dpfast.dataflow.sorted_ranges import WORKER_BUFFERS
from dpfast.engines.frames.parts import (
    GroupsColumn,
    RowsBatch,
    RowsColumn,
    bucket_pieces,
    bucket_span,
    bucket_starts,
)
from dpfast.engines.frames.sent_ranks import (
    CHANGED_PART,
    RankedPiece,
    RankedState,
    part_places,
)
from dpfast.exceptions import DPFastRuntimeError, DPFastValueError
from dpfast.partitions.ranking import RankGroups

__all__ = ["ExchangedParts", "Shuffled", "part_bounds"]


@dataclass(frozen=True)
class Shuffled:
    """Columns copied unchanged: output row ``r`` holds input row ``permutation(key, n)[r]``."""

    names: tuple[str, ...]
    key: np.ndarray
    starts: np.ndarray  # the permutation's bucket starts, and n

    @classmethod
    def of(cls, names: tuple[str, ...], key: np.ndarray, n: int) -> Shuffled:
        """Return columns ``names`` in the permutation of ``key`` over ``n`` rows."""
        return cls(names, key, bucket_starts(key, n))


def part_bounds(n: int, part_rows: int, starts: np.ndarray | None = None) -> np.ndarray:
    """Return the first output row of every part of about ``part_rows`` rows, and ``n``.

    With a permutation's bucket starts, each bound is the first bucket start at or after
    ``p * part_rows``: no bucket is cut between parts, each holding one at least.
    """
    targets = np.arange(0, max(n, 1), max(1, part_rows), dtype=np.int64)
    if starts is not None:
        targets = np.unique(starts[np.searchsorted(starts, targets, side="left")])
        targets = targets[targets < n] if n else targets[:1]
    return np.append(targets, n).astype(np.int64)


@dataclass(frozen=True)
class _Piece:
    """What one batch of the input sends to one output part."""

    first_row: int
    rows: list[pa.Array] | None  # the part's rows among the batch's, row-ordered columns
    buckets: np.ndarray | None  # the batch's rows of the part's buckets: their buckets,
    shuffled: list[pa.Array] | None  # and their values, by bucket (rows increasing)


@dataclass(frozen=True)
class ExchangedParts:
    """A release frame of row-ordered, permuted and rank-group columns, part by part.

    Part ``p`` holds output rows ``[bounds[p], bounds[p + 1])`` (:func:`part_bounds`).
    ``names`` and ``types`` are the released columns in output order; ``rows`` are released
    row by row from the input, ``kept`` copied in the rows' order, ``shuffled`` copied in a
    keyed permutation, ``groups`` (the rank groups of ``layout``) computed from their state,
    ``ranked`` sent by their sorts; ``input_types``: the types the copied columns are read as.
    """

    n: int
    bounds: np.ndarray
    names: tuple[str, ...]
    types: tuple[pa.DataType, ...]
    rows: tuple[RowsColumn, ...] = ()
    kept: tuple[str, ...] = ()
    shuffled: Shuffled | None = None
    groups: tuple[GroupsColumn, ...] = ()
    layout: RankGroups | None = None
    input_types: tuple[tuple[str, pa.DataType], ...] = ()
    ranked: tuple[RankedState, ...] = ()

    def __post_init__(self) -> None:
        b = self.bounds
        rising = self.n == 0 or bool(np.all(b[1:] > b[:-1]))
        if b.ndim != 1 or b.shape[0] < 2 or b[0] != 0 or b[-1] != self.n or not rising:
            raise DPFastValueError("the parts' bounds must rise from 0 to n")
        if self.groups and self.layout is None:
            raise DPFastValueError("columns of rank groups need their layout")

    @property
    def count(self) -> int:
        """The number of parts."""
        return int(self.bounds.shape[0]) - 1

    def span(self, part: int) -> tuple[int, int]:
        """Return the output rows ``[lo, hi)`` of part ``part``."""
        return int(self.bounds[part]), int(self.bounds[part + 1])

    @property
    def group_columns(self) -> dict[str, GroupsColumn]:
        """The rank-group columns' output states by name, the ranked columns' too."""
        out = {c.name: c for c in self.groups}
        out.update((r.name, r.output) for r in self.ranked)
        return out

    @property
    def inputs(self) -> list[str]:
        """The input columns the emitting tasks read."""
        shuffled = self.shuffled.names if self.shuffled is not None else ()
        return list(dict.fromkeys([*(r.name for r in self.rows), *self.kept, *shuffled]))

    # -- on the input's tasks ---------------------------------------------------------------

    def emit(self, batch: pa.RecordBatch, first_row: int) -> list[tuple[int, bytes]]:
        """Return the pieces a batch of the input (rows ``first_row ...``) sends, by part."""
        m = batch.num_rows
        if m == 0:
            return []
        kinds = dict(self.input_types)
        columns = {
            name: _as(batch.column(batch.schema.get_field_index(name)), kinds.get(name))
            for name in self.inputs
        }
        in_order = self._in_order(batch, columns, first_row)
        by_bucket = self._by_bucket(columns, first_row, m)
        out = []
        for part in sorted(set(in_order) | set(by_bucket)):
            buckets, values = by_bucket.get(part, (None, None))
            piece = _Piece(first_row, in_order.get(part), buckets, values)
            out.append((part, pickle.dumps(piece, protocol=pickle.HIGHEST_PROTOCOL)))
        return out

    def _in_order(
        self, batch: pa.RecordBatch, columns: dict[str, pa.Array], first_row: int
    ) -> dict[int, list[pa.Array]]:
        """Return the row-ordered columns' slices of the batch, for each part its rows fall in."""
        if not self.rows and not self.kept:
            return {}
        arrays: list[pa.Array] = []
        if self.rows:
            inputs = pa.RecordBatch.from_arrays(
                [columns[r.name] for r in self.rows], names=[r.name for r in self.rows]
            )
            arrays.extend(RowsBatch(self.rows)(inputs, first_row).columns)
        arrays.extend(columns[name] for name in self.kept)
        last = first_row + batch.num_rows
        out = {}
        top = int(np.searchsorted(self.bounds, last - 1, side="right")) - 1
        for part in range(int(np.searchsorted(self.bounds, first_row, side="right")) - 1, top + 1):
            lo, hi = self.span(part)
            a, b = max(lo, first_row) - first_row, min(hi, last) - first_row
            # copied out of the batch: a pickled slice would carry the whole buffer
            out[part] = [pa.concat_arrays([array.slice(a, b - a)]) for array in arrays]
        return out

    def _by_bucket(
        self, columns: dict[str, pa.Array], first_row: int, m: int
    ) -> dict[int, tuple[np.ndarray, list[pa.Array]]]:
        """Return the permuted columns' rows of the batch, for each part holding their buckets."""
        if self.shuffled is None:
            return {}
        key, starts = self.shuffled.key, self.shuffled.starts
        arrays = [columns[name] for name in self.shuffled.names]
        out = {}
        for part, places, run in bucket_pieces(key, self.n, starts, self.bounds, first_row, m):
            rows = pa.array(places)
            out[part] = (run, [x.take(rows) for x in arrays])
        return out

    # -- on the tasks of a ranked column's sort -------------------------------------------

    def emit_sorted(self, column: int, index: int, ordered: np.ndarray) -> list[list[bytes]]:
        """Return, by part, the pieces of sorted range ``index`` of ranked column ``column``."""
        state = self.ranked[column]
        return self._by_part(column, state.emit_sorted(self.bounds, index, ordered))

    def emit_ties(self, column: int, index: int) -> list[list[bytes]]:
        """Return, by part, the pieces of chunk ``index`` of ranked column ``column``'s ties."""
        return self._by_part(column, self.ranked[column].emit_ties(self.bounds, index))

    def _by_part(self, column: int, sent: list[tuple[int, RankedPiece]]) -> list[list[bytes]]:
        out: list[list[bytes]] = [[] for _ in range(self.count)]
        for part, piece in sent:
            out[part].append(pickle.dumps((column, piece), protocol=pickle.HIGHEST_PROTOCOL))
        return out

    # -- on the output's tasks --------------------------------------------------------------

    def assemble(self, part: int, payloads: list[bytes]) -> pa.Table:
        """Return output part ``part`` from every piece sent to it."""
        return self.assemble_counted(part, payloads)[0]

    def assemble_counted(
        self, part: int, payloads: list[bytes]
    ) -> tuple[pa.Table, list[tuple[int, int, int]]]:
        """Return output part ``part``, and each ranked column's rows on a bound in it.

        Per ranked column, ``(released, before, pushed)``
        (:meth:`~dpfast.dataflow.on_bound.OnBound.counts`).
        """
        loaded = [pickle.loads(p) for p in payloads]
        ranked: list[list[RankedPiece]] = [[] for _ in self.ranked]
        for item in loaded:
            if isinstance(item, tuple):
                ranked[item[0]].append(item[1])
        pieces = sorted(
            (p for p in loaded if isinstance(p, _Piece)), key=lambda piece: piece.first_row
        )
        lo, hi = self.span(part)
        columns: dict[str, pa.Array] = {}
        if self.rows or self.kept:
            names = [*(r.name for r in self.rows), *self.kept]
            held = [p.rows for p in pieces if p.rows is not None]
            for i, name in enumerate(names):
                columns[name] = _concat([arrays[i] for arrays in held], self._type(name))
            if sum(len(arrays[0]) for arrays in held) != hi - lo:
                raise DPFastRuntimeError(CHANGED_PART.format(part=part))
        if self.shuffled is not None:
            columns.update(self._permuted(part, pieces))
        if self.groups:
            WORKER_BUFFERS.clear()  # the sorts are over: their kept buffers go
            assert self.layout is not None  # checked when made
            columns.update((c.name, c.rows(self.layout, lo, hi)) for c in self.groups)
        on_bound: list[tuple[int, int, int]] = []
        for state, sent in zip(self.ranked, ranked, strict=True):
            values, count = state.column.assemble(self.bounds, part, sent)
            columns[state.name] = state.arrow(values)
            on_bound.append(count.counts())
        table = pa.Table.from_arrays([columns[name] for name in self.names], names=list(self.names))
        return table, on_bound

    def _permuted(self, part: int, pieces: list[_Piece]) -> dict[str, pa.Array]:
        """Return the permuted columns of part ``part``: its buckets' rows in permutation order."""
        shuffled = self.shuffled
        assert shuffled is not None
        lo, hi = self.span(part)
        held = [p for p in pieces if p.buckets is not None]
        buckets = [p.buckets for p in held if p.buckets is not None]
        at = part_places(shuffled.key, self.n, shuffled.starts, (lo, hi, part), buckets)
        rows = pa.array(at)
        out = {}
        for i, name in enumerate(shuffled.names):
            values = _concat([p.shuffled[i] for p in held if p.shuffled], self._type(name))
            out[name] = values.take(rows)
        return out

    def _type(self, name: str) -> pa.DataType:
        return self.types[self.names.index(name)]

    def scanned(self, part: int) -> tuple[int, int]:
        """Return the items part ``part``'s task places, and the items it writes.

        Its buckets' rows, placed once for all permuted columns (one order), and each rank-group
        column's whole stream of ``n`` items (:func:`dpfast.noise.permutation_part_groups`).
        """
        lo, hi = self.span(part)
        scanned, written = 0, 0
        if self.shuffled is not None:
            first, last = bucket_span(self.shuffled.starts, lo, hi)
            scanned += int(self.shuffled.starts[last] - self.shuffled.starts[first])
            written += (hi - lo) * len(self.shuffled.names)
        scanned += self.n * len(self.groups)
        written += (hi - lo) * len(self.groups)
        for state in self.ranked:  # its buckets' items, each placed once
            first, last = bucket_span(state.column.starts, lo, hi)
            scanned += int(state.column.starts[last] - state.column.starts[first])
            written += hi - lo
        return scanned, written


def _as(array: pa.Array | pa.ChunkedArray, kind: pa.DataType | None) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array if kind is None or array.type == kind else array.cast(kind)


def _concat(arrays: list[pa.Array], kind: pa.DataType) -> pa.Array:
    arrays = [a if a.type == kind else a.cast(kind) for a in arrays]
    return pa.concat_arrays(arrays) if arrays else pa.array([], kind)
