"""The tasks of a Spark release frame made through one exchange (:class:`ExchangedParts`).

The input's tasks emit each batch's pieces as rows ``(tag, part, payload)``
(:func:`emitted`); ``repartition`` by the tag brings part ``p``'s pieces to partition
``p`` (:func:`~dpfast.engines.spark._sort.partition_tags`), whose task assembles its part
(:func:`assembled`). See :mod:`dpfast.engines.outofcore._exchange`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from dpfast.engines.outofcore import ExchangedParts
from dpfast.engines.spark._rows import Numbering, partition_index, regroup

__all__ = ["EMITTED", "assembled", "emitted"]

#: The schema of the pieces the input's tasks emit.
EMITTED = "tag int, part int, payload binary"


def emitted(
    batches: Iterable[pa.RecordBatch],
    parts: ExchangedParts,
    tags: np.ndarray,
    batch_rows: int,
    numbering: Numbering,
) -> Iterator[pa.RecordBatch]:
    """Yield the pieces of one input partition's batches, each tagged with its part's tag."""
    for batch, first in regroup(numbering.pieces(batches, partition_index()), batch_rows):
        out = parts.emit(batch, first)
        if out:
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([int(tags[part]) for part, _ in out], pa.int32()),
                    pa.array([part for part, _ in out], pa.int32()),
                    pa.array([payload for _, payload in out], pa.binary()),
                ],
                names=["tag", "part", "payload"],
            )


def assembled(
    batches: Iterable[pa.RecordBatch], parts: ExchangedParts, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Yield the parts whose pieces this task received, in part order."""
    pieces: dict[int, list[bytes]] = {}
    for batch in batches:
        for part, payload in zip(
            batch.column(1).to_pylist(), batch.column(2).to_pylist(), strict=True
        ):
            pieces.setdefault(part, []).append(payload)
    for part in sorted(pieces):
        table = parts.assemble(part, pieces.pop(part))
        yield from table.to_batches(max_chunksize=batch_rows)
