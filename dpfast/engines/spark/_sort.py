"""The sort job of a Spark source: a column's keys sorted by range on the executors.

Every batch's keys are split by range (:func:`split_by_range`) and ``repartitionById`` brings
range ``i`` to partition ``i``, whose task sorts them and returns only its reductions
(:func:`sort_range`). See docs/engines.md, "Ranks on a cluster".
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from dpfast.dataflow.sorted_ranges import WORKER_BUFFERS, Ranges, keys_by_range, sorted_runs
from dpfast.engines.frames import ExchangedParts
from dpfast.engines.spark._rows import (
    FileTasks,
    Numbering,
    TaskRows,
    partition_index,
    piece_rows,
    regroup,
)

T = TypeVar("T")


#: The schema of :meth:`SparkSource.sort_ranges`'s keys split by range, and of its results.
SPLIT_SCHEMA = "range int, keys binary"
SORTED_SCHEMA = "range int, payload binary"


def split_by_range(
    batches: Iterable[pa.RecordBatch],
    keys: Callable[[pa.Array, int], np.ndarray],
    ranges: Ranges,
    batch_rows: int,
    numbering: Numbering | TaskRows,
) -> Iterator[pa.RecordBatch]:
    """Yield one partition's keys inside the ranges: a row per batch and range present.

    Keys go as raw bytes, several times cheaper in CPU to convert and shuffle than a row a value.
    """
    for grouped in _keys_by_range(batches, keys, ranges, batch_rows, numbering):
        present = [(i, part) for i, part in enumerate(grouped) if part.shape[0]]
        if present:
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([i for i, _ in present], pa.int32()),
                    pa.array([part.tobytes() for _, part in present], pa.binary()),
                ],
                names=["range", "keys"],
            )


def sort_range(
    batches: Iterable[pa.RecordBatch],
    ranges: Ranges,
    key_bits: int,
    reduce: Callable[[int, np.ndarray], Any],
) -> Iterator[pa.RecordBatch]:
    """Sort one shuffled partition's keys; yield ``reduce`` of each of its ranges."""
    yield from _reduced(_sorted_shuffled(batches, ranges, key_bits, reduce))


def _sorted_shuffled(
    batches: Iterable[pa.RecordBatch],
    ranges: Ranges,
    key_bits: int,
    reduce: Callable[[int, np.ndarray], T],
) -> list[tuple[int, T]]:
    """Sort one shuffled partition's keys, joined in one buffer; return :func:`_sorted_results`."""
    parts = [
        np.frombuffer(cell, dtype=np.uint64)
        for batch in batches
        for cell in batch.column(1).to_pylist()
    ]
    if not parts:
        return []
    keys = WORKER_BUFFERS.take(sum(part.shape[0] for part in parts))
    np.concatenate(parts, out=keys)  # a writable array: the sort's scratch
    return _sorted_results(keys, ranges, key_bits, reduce, keys)


def read_sorted(
    batches: Iterable[pa.RecordBatch],
    keys: Callable[[pa.Array, int], np.ndarray],
    ranges: Ranges,
    key_bits: int,
    reduce: Callable[[int, np.ndarray], Any],
    batch_rows: int,
    numbering: FileTasks,
) -> Iterator[pa.RecordBatch]:
    """Read a column's keys in this task's row groups, sort them; yield ``reduce`` by range.

    The sort job of one range over files the executors read (:meth:`FileTasks.whole`): keys
    are computed where they are sorted, not shuffled. With the ranges' counts known, keys are
    copied as they come into one array of that size, not concatenated from pieces: one
    buffer of the column's keys less, and fewer fresh pages (docs/engines.md, "Memory pages").
    """
    total = 0 if ranges.counts is None else int(ranges.counts.sum())
    held = WORKER_BUFFERS.take(total) if total else np.empty(0, dtype=np.uint64)
    filled = 0
    extra: list[np.ndarray] = []  # keys beyond the counts: the data changed between passes
    for grouped in _keys_by_range(batches, keys, ranges, batch_rows, numbering):
        for piece in grouped:
            size = piece.shape[0]
            if filled + size <= held.shape[0]:
                held[filled : filled + size] = piece
                filled += size
            else:
                extra.append(piece)
    words = np.concatenate([held[:filled], *extra]) if extra else held[:filled]
    yield from _reduced(_sorted_results(words, ranges, key_bits, reduce, held))


def _keys_by_range(
    batches: Iterable[pa.RecordBatch],
    keys: Callable[[pa.Array, int], np.ndarray],
    ranges: Ranges,
    batch_rows: int,
    numbering: Numbering | TaskRows,
) -> Iterator[list[np.ndarray]]:
    """Yield the keys of each batch of this task's rows, grouped by range."""
    for batch, first in regroup(numbering.pieces(batches, partition_index()), batch_rows):
        yield keys_by_range(keys(batch.column(0), first), ranges)


def _reduced(results: list[tuple[int, Any]]) -> Iterator[pa.RecordBatch]:
    """Yield results ``(range, result)`` as record batches ``(range, pickled result)``."""
    for index, result in results:
        yield pa.RecordBatch.from_arrays(
            [pa.array([index], pa.int32()), pa.array([dumps(result)])],
            names=["range", "payload"],
        )


def _sorted_results(
    keys: np.ndarray,
    ranges: Ranges,
    key_bits: int,
    reduce: Callable[[int, np.ndarray], T],
    taken: np.ndarray,
) -> list[tuple[int, T]]:
    """Sort ``keys`` (writable, used as scratch); return ``reduce`` of each range present.

    The sort's second buffer comes from :data:`WORKER_BUFFERS`; it and ``taken`` (the keys'
    buffer) go back there for this worker's next sort (docs/engines.md, "Memory pages").
    """
    scratch = WORKER_BUFFERS.take(keys.shape[0])
    try:
        return [
            (index, reduce(index, ordered))
            for index, ordered in sorted_runs(keys, key_bits, ranges, scratch)
        ]
    finally:
        WORKER_BUFFERS.give(taken, scratch)


def sort_emitted(
    batches: Iterable[pa.RecordBatch],
    ranges: Ranges,
    key_bits: int,
    parts: ExchangedParts,
    column: int,
) -> Iterator[pa.RecordBatch]:
    """Sort one shuffled partition's keys of ranked column ``column``; yield their pieces.

    Each range's ranks go out as rows ``(part, payload)`` (:meth:`ExchangedParts.emit_sorted`).
    """
    emit = functools.partial(parts.emit_sorted, column)
    for _, by_part in _sorted_shuffled(batches, ranges, key_bits, emit):
        yield from piece_rows(_flat(by_part))


def _flat(by_part: list[list[bytes]]) -> list[tuple[int, bytes]]:
    return [(part, payload) for part, held in enumerate(by_part) for payload in held]


def ties_emitted(
    batches: Iterable[pa.RecordBatch], parts: ExchangedParts, column: int
) -> Iterator[pa.RecordBatch]:
    """Yield the pieces of the chunks of ties of ranked column ``column`` this task numbers."""
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from piece_rows(_flat(parts.emit_ties(column, int(index))))


def dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def dumped_result(array: pa.Array, first_row: int, fn: Callable[[pa.Array, int], Any]) -> bytes:
    """Return ``fn`` of a batch, pickled."""
    return dumps(fn(array, first_row))
