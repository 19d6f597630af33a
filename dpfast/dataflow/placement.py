"""Put a column's values in output row order without holding the column (docs/engines.md).

A released column arrives as pieces ``(input rows, values)`` in any order. Output row ``r``
holds input row ``order[r]``, ``order`` the identity or a bucketed permutation
(:func:`dpfast.noise.permutation`), whose bucket of input row ``i`` follows from ``i`` alone:

1. **Scatter.** Each piece is cut by *range* (consecutive rows, or consecutive permutation
   buckets, as many as fit in the memory limit), each part appended with its row ids to the
   range's spill file (Arrow IPC).
2. **Reorder.** Range by range, in output order, a spill file is read back, its values put
   in the order of the range's part of ``order`` (:func:`dpfast.noise.permutation_part`)
   and handed on.

No file is ever read at random: every spill file is written by appends and read whole.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import outofcore
from dpfast.dataflow.flow import bucket_runs

__all__ = ["ArrowFile", "BatchFiles", "Placer", "Sink", "bucket_ids"]

Sink = Callable[[pa.Array, int], None]

#: Bytes of working memory per row of a range besides its values: the row ids read
#: back, their sort order, the sorted ids, the permutation part, the positions found.
_BYTES_PER_PLACED_ROW = 64
#: At most this many ranges (spill files open at once) per placer: two placers per column
#: in work and a column per thread stay well within the usual limit of 1,024 open files.
_MAX_RANGES = 128
#: Rows per record batch of an output file read back by row ranges.
_OUTPUT_BATCH_ROWS = 1 << 16


def bucket_ids(key: np.ndarray, n: int, first: int, count: int) -> np.ndarray:
    """Return the bucket of :func:`dpfast.noise.permutation` ``(key, n)`` of rows ``first ..``."""
    bits = noise.permutation_bucket_bits(n)
    out = np.zeros(count, dtype=np.int64)
    if bits and count:
        outofcore.bucket_ids(key, bits, first, out)
    return out


@dataclass
class Placer:
    """Scatter a column's pieces to spill files by range, then hand them on in output order.

    Parameters
    ----------
    scratch : Path
        The run's scratch directory; the spill files go in a subdirectory ``tag``.
    tag : str
        A name unique within the run (e.g. a digest of the column's name).
    n : int
        Rows of the table.
    key : ndarray or None
        The permutation's key, or ``None`` for the input order.
    value_type : pyarrow.DataType
        The values' type (not a dictionary).
    row_bytes : float
        Bytes per value in memory (its width, or the column's average).
    memory : int
        The memory limit of a range's reordering.
    """

    scratch: Path
    tag: str
    n: int
    key: np.ndarray | None
    value_type: pa.DataType
    row_bytes: float
    memory: int
    _writers: dict[int, pa.ipc.RecordBatchFileWriter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory = self.scratch / self.tag
        self.directory.mkdir()
        wanted = int(self.memory // (_BYTES_PER_PLACED_ROW + 2 * max(1.0, self.row_bytes)))
        rows = max(1024, wanted, -(-self.n // _MAX_RANGES))
        if self.key is None:
            self.rows_per_range = rows
            self.bounds = [*range(0, self.n, rows), self.n]
        else:
            self.sizes = noise.permutation_bucket_sizes(self.key, self.n)
            self.bounds = bucket_runs(self.sizes, rows)  # the ranges' first buckets, the end
            ranges = np.arange(len(self.bounds) - 1, dtype=np.int64)
            self.bucket_range = np.repeat(ranges, np.diff(self.bounds))
        self.schema = pa.schema([("row", pa.int64()), ("value", self.value_type)])

    def add(
        self, values: pa.Array | pa.ChunkedArray, rows: np.ndarray | None = None, first: int = 0
    ) -> None:
        """Scatter ``values`` of ``rows``, or of rows ``first ..`` (a shuffle takes only these)."""
        if isinstance(values, pa.ChunkedArray):
            done = 0
            for chunk in values.chunks:
                part = None if rows is None else rows[done : done + len(chunk)]
                self.add(chunk, part, first + done)
                done += len(chunk)
            return
        if rows is None:
            rows = np.arange(first, first + len(values), dtype=np.int64)
            if self.key is None:
                ranges = rows // self.rows_per_range
            else:
                ranges = self.bucket_range[bucket_ids(self.key, self.n, first, len(values))]
        elif self.key is None:
            ranges = rows // self.rows_per_range
        else:
            raise AssertionError("a shuffle scatters consecutive rows only")
        if len(values) == 0:
            return
        by_range = np.argsort(ranges, kind="stable")
        sorted_ranges = ranges[by_range]
        cuts = np.flatnonzero(np.diff(sorted_ranges)) + 1
        starts = np.concatenate(([0], cuts))
        stops = np.concatenate((cuts, [len(values)]))
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            take = by_range[start:stop]
            piece = pa.record_batch(
                [pa.array(rows[take]), values.take(pa.array(take))], schema=self.schema
            )
            self._writer(int(sorted_ranges[start])).write_batch(piece)

    def _writer(self, index: int) -> pa.ipc.RecordBatchFileWriter:
        writer = self._writers.get(index)
        if writer is None:
            sink = pa.OSFile(str(self.directory / f"range-{index:05d}.arrow"), "wb")
            writer = pa.ipc.new_file(sink, self.schema)
            self._writers[index] = writer
        return writer

    def finish(self, sink: Sink) -> None:
        """Hand on every range's values in output order: ``sink(values, first_output_row)``."""
        self.close()
        first = 0
        for index in range(len(self.bounds) - 1):
            path = self.directory / f"range-{index:05d}.arrow"
            rows, values = self._read(path)
            if self.key is None:
                lo = self.bounds[index]
                position = np.empty(self.bounds[index + 1] - lo, dtype=np.int64)
                position[rows - lo] = np.arange(rows.shape[0], dtype=np.int64)
            else:
                lo_bucket, hi_bucket = self.bounds[index], self.bounds[index + 1]
                part = noise.permutation_part(self.key, self.n, lo_bucket, hi_bucket, self.sizes)
                by_row = np.argsort(rows)
                position = by_row[np.searchsorted(rows[by_row], part)]
                del part, by_row
            del rows
            if position.shape[0]:
                sink(values.take(pa.array(position)), first)
            first += position.shape[0]
            del values, position
            if path.exists():
                path.unlink()
        self.directory.rmdir()

    def close(self) -> None:
        """Close the spill files still open (the files stay until :meth:`finish` reads them)."""
        while self._writers:
            _, writer = self._writers.popitem()
            writer.close()

    def _read(self, path: Path) -> tuple[np.ndarray, pa.ChunkedArray]:
        if not path.exists():
            return np.empty(0, dtype=np.int64), pa.chunked_array([], self.value_type)
        with pa.OSFile(str(path), "rb") as file:
            table = pa.ipc.open_file(file).read_all()
        rows = table.column("row").to_numpy()
        return rows, table.column("value")


@dataclass
class ArrowFile:
    """An Arrow IPC file of one column in output order, read back by row ranges."""

    path: Path
    arrow_type: pa.DataType
    _writer: pa.ipc.RecordBatchFileWriter | None = None
    _offsets: list[int] = field(default_factory=lambda: [0])
    _reader: pa.ipc.RecordBatchFileReader | None = None

    def write(self, values: pa.Array, first: int) -> None:
        """Append ``values``, output rows ``first ..`` (pieces arrive in output order)."""
        if first != self._offsets[-1]:
            raise AssertionError("pieces of an output file must come in output order")
        if self._writer is None:
            schema = pa.schema([("value", self.arrow_type)])
            self._writer = pa.ipc.new_file(pa.OSFile(str(self.path), "wb"), schema)
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        for chunk in chunks:
            for start in range(0, len(chunk), _OUTPUT_BATCH_ROWS):
                piece = chunk.slice(start, _OUTPUT_BATCH_ROWS)
                self._writer.write_batch(pa.record_batch([piece], names=["value"]))
                self._offsets.append(self._offsets[-1] + len(piece))

    def close(self) -> None:
        """Close the file once every piece is written."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def read(self, first: int, count: int) -> pa.Array:
        """Return output rows ``[first, first + count)``."""
        if self._reader is None:
            self._reader = pa.ipc.open_file(pa.OSFile(str(self.path), "rb"))
        offsets = self._offsets
        batch = int(np.searchsorted(offsets, first, side="right")) - 1
        pieces = []
        while count > 0:
            array = self._reader.get_batch(batch).column(0)
            start = first - offsets[batch]
            take = min(count, len(array) - start)
            pieces.append(array.slice(start, take))
            first += take
            count -= take
            batch += 1
        if not pieces:
            return pa.array([], self.arrow_type)
        return pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]


@dataclass
class BatchFiles:
    """A column's batches in input order, each in an Arrow file of its own, read by row ranges.

    Batches may come in any order (a cluster's) and are cast to the first one's type. Nothing
    is spilled or reordered: a column copied in its rows' order is written once.
    """

    directory: Path
    arrow_type: pa.DataType | None = None
    _parts: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory.mkdir()

    def add(self, values: pa.Array, first: int) -> None:
        """Keep ``values``, rows ``first ..``."""
        if len(values) == 0:
            return
        if self.arrow_type is None:
            self.arrow_type = values.type
        elif values.type != self.arrow_type:
            values = values.cast(self.arrow_type)
        schema = pa.schema([("value", self.arrow_type)])
        with pa.OSFile(str(self._path(first)), "wb") as sink:
            with pa.ipc.new_file(sink, schema) as writer:
                writer.write_batch(pa.record_batch([values], schema=schema))
        bisect.insort(self._parts, (first, len(values)))

    def read(self, first: int, count: int) -> pa.Array:
        """Return rows ``[first, first + count)``."""
        i = bisect.bisect_right(self._parts, (first, 1 << 62)) - 1
        pieces = []
        while count > 0:
            start, rows = self._parts[i]
            with pa.memory_map(str(self._path(start))) as source:
                column = pa.ipc.open_file(source).get_batch(0).column(0)
                take = min(rows - (first - start), count)
                # a copy: the memory map is closed when the block ends
                pieces.append(pa.concat_arrays([column.slice(first - start, take)]))
            first, count, i = first + take, count - take, i + 1
        if not pieces:
            return pa.array([], self.arrow_type)
        return pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]

    def _path(self, first: int) -> Path:
        return self.directory / f"{first:020d}.arrow"
