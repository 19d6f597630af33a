"""The tasks of a Spark release frame made through one exchange (:class:`ExchangedParts`).

The input's tasks emit each batch's pieces as rows ``(part, payload)`` (:func:`emitted`);
``repartitionById`` by the part brings part ``p``'s pieces to partition ``p``, whose task
assembles its part (:func:`assembled`). See :mod:`dpfast.engines.frames.exchange`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dpfast.engines.frames import ExchangedParts
from dpfast.engines.spark._rows import Numbering, partition_index, piece_rows, quietly, regroup
from dpfast.engines.spark._sort import sort_emitted, ties_emitted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["EMITTED", "assembled", "emitted", "exchange_pieces", "received"]

#: The schema of the pieces the input's tasks emit.
EMITTED = "part int, payload binary"


def emitted(
    batches: Iterable[pa.RecordBatch],
    parts: ExchangedParts,
    batch_rows: int,
    numbering: Numbering,
) -> Iterator[pa.RecordBatch]:
    """Yield the pieces of one input partition's batches, each with its part."""
    for batch, first in regroup(numbering.pieces(batches, partition_index()), batch_rows):
        yield from piece_rows(parts.emit(batch, first))


def assembled(
    batches: Iterable[pa.RecordBatch], parts: ExchangedParts, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Yield the parts whose pieces this task received, in part order."""
    for part, payloads in received(batches):
        table = parts.assemble(part, payloads)
        yield from table.to_batches(max_chunksize=batch_rows)


def received(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[int, list[bytes]]]:
    """Yield each part whose pieces this task received, with its pieces, in part order."""
    pieces: dict[int, list[bytes]] = {}
    for batch in batches:
        for part, payload in zip(
            batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
        ):
            pieces.setdefault(part, []).append(payload)
    for part in sorted(pieces):
        yield part, pieces.pop(part)


def exchange_pieces(source: Any, parts: ExchangedParts, batch_rows: int) -> DataFrame:
    """Return the pieces of ``parts`` as rows ``(part, payload)``, part ``p``'s in partition ``p``.

    Those of every input batch of ``source`` (a :class:`~dpfast.engines.spark.SparkSource`,
    :meth:`ExchangedParts.emit`), and for each ranked column, those its sorted ranges' ranks
    send (split and sorted as by ``sort_ranges``, :meth:`ExchangedParts.emit_sorted`) and
    those of each run of ties (:meth:`ExchangedParts.emit_ties`).
    """
    sent = []
    with quietly():
        if parts.inputs:
            frame, numbering = source.pass_frame(parts.inputs, batch_rows)
            emit = functools.partial(
                emitted, parts=parts, batch_rows=int(batch_rows), numbering=numbering
            )
            sent.append(frame.mapInArrow(emit, EMITTED))
        for column, ranked in enumerate(parts.ranked):
            ranges, key_bits = ranked.plan.ranges, ranked.plan.key_bits
            if len(ranges):
                shuffled = source.range_split(ranked.name, batch_rows, ranked.keys, ranges)
                emit = functools.partial(
                    sort_emitted, ranges=ranges, key_bits=int(key_bits), parts=parts,
                    column=column,
                )  # fmt: skip
                sent.append(shuffled.mapInArrow(emit, EMITTED))
            runs = len(ranked.ties)
            if runs:
                ties = functools.partial(ties_emitted, parts=parts, column=column)
                numbered = source.session.range(runs, numPartitions=min(runs, source.sort_tasks))
                sent.append(numbered.mapInArrow(ties, EMITTED))
    pieces: DataFrame = functools.reduce(lambda a, b: a.union(b), sent)
    return pieces.repartitionById(parts.count, "part")
