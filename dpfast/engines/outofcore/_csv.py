"""CSV and TSV input out of core: converted once into Parquet scratch files, then read.

A pass reads one column, but every pass over a text file would parse every column of every
row. So the files are converted once, batch by batch with pyarrow's streaming reader
(:class:`dpfast.io.CsvFiles`: each column of the type ``pyarrow.csv.read_csv`` gives it, as
in memory), into Parquet files in a scratch directory beside the output, which the passes
read (docs/engines.md#csv-input measures both ways). That directory is named for the output
and this process, found and removed like the engine's own, and removed when the source closes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from dpfast.dataflow.source import CastColumns, Columns, column_names
from dpfast.dataflow.values import Progress
from dpfast.engines.frames.parts import text_columns
from dpfast.engines.outofcore._sources import ParquetDataset, WrappedSource
from dpfast.engines.scratch_dirs import make_scratch, remove_tree
from dpfast.exceptions import DPFastValueError
from dpfast.io import CsvFiles, LooserType, text_files

__all__ = ["ROW_GROUP_BYTES", "CsvSource"]

T = TypeVar("T")

#: The most bytes of Arrow batches gathered into one row group of a converted file (a
#: smaller memory limit gathers an eighth of it).
ROW_GROUP_BYTES = 64 * 2**20


def _text_files(path: str | os.PathLike[str]) -> list[str]:
    """Return the files a CSV path names (:func:`dpfast.io.text_files`), refusing none."""
    files = text_files(path)
    if not files:
        raise DPFastValueError(f"no CSV or TSV file matches {os.fspath(path)!r}")
    return files


class CsvSource(WrappedSource):
    """CSV or TSV files as a column source: their Parquet conversion in a scratch directory.

    Rows are numbered by file (a glob's in sorted path order), then by row, as a Parquet
    dataset's. :meth:`close` removes the converted files.
    """

    def __init__(self, dataset: ParquetDataset, scratch: Path, schema: pa.Schema) -> None:
        super().__init__(dataset)
        self.scratch = scratch
        self._schema = schema
        # Parquet keeps no second unit: such columns come back in milliseconds
        self._cast = {
            f.name: f.type for f in schema if not f.type.equals(dataset.schema.field(f.name).type)
        }

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        beside: str | os.PathLike[str],
        memory_limit: int,
        *,
        delimiter: str | None = None,
        encoding: str = "utf-8",
        progress: Progress | None = None,
    ) -> CsvSource:
        """Convert the CSV file (or glob or directory of them) ``path`` beside ``beside``.

        ``delimiter`` and ``encoding`` as :func:`dpfast.io.read_table` takes them; bad
        files get its errors. A failure or an interrupt removes what was converted.
        """
        files = CsvFiles.open(_text_files(path), delimiter=delimiter, encoding=encoding)
        scratch = make_scratch(Path(beside))
        try:
            group_bytes = min(ROW_GROUP_BYTES, max(1 << 20, memory_limit // 8))
            converted, schema = _convert(files, scratch, group_bytes, progress)
            return cls(ParquetDataset.from_files(converted), scratch, schema)
        except BaseException:
            remove_tree(scratch)
            raise

    @property
    def schema(self) -> pa.Schema:
        """The columns' types, as ``pyarrow.csv.read_csv`` gives them."""
        return self._schema

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)`` for column ``name``, read from the converted files."""
        if any(column in self._cast for column in column_names(name)):
            fn = CastColumns(name, self._cast, fn)
        yield from self.dataset.map_column(name, batch_rows, fn)

    def close(self) -> None:
        """Remove the converted files; safe to call twice."""
        remove_tree(self.scratch)


def _convert(
    files: CsvFiles, scratch: Path, group_bytes: int, progress: Progress | None
) -> tuple[list[str], pa.Schema]:
    """Write every file as ``part-NNNNN.parquet`` in ``scratch``; return them and the types.

    A column whose values a batch cannot convert to the type so far takes its looser
    type (one pass a kind tried), and the files are converted again.
    """
    types = None
    while True:
        try:
            return _write_parts(files, scratch, group_bytes, types, progress)
        except LooserType as found:
            types = dict(found.types)
            types[found.column] = files.looser(found.column, types[found.column])
            for part in scratch.glob("part-*.parquet"):
                part.unlink()


def _write_parts(
    files: CsvFiles,
    scratch: Path,
    group_bytes: int,
    types: dict[str, pa.DataType] | None,
    progress: Progress | None,
) -> tuple[list[str], pa.Schema]:
    """Convert the files' batches into Parquet files, row groups of at most ``group_bytes``.

    (Or of one batch, if a batch is larger: a block of text read.)
    """
    written: list[str] = []
    schema: pa.Schema | None = None
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = []
    first: Any = None

    def flush() -> None:
        if pending and writer is not None:
            writer.write_table(pa.Table.from_batches(pending), row_group_size=1 << 62)
        pending.clear()

    try:
        for i, batch in files.batches(types, progress):
            if i == len(written):  # the next file
                flush()
                if writer is not None:
                    writer.close()
                written.append(str(scratch / f"part-{i:05d}.parquet"))
                schema = batch.schema
                writer = pq.ParquetWriter(
                    written[-1], batch.schema, use_dictionary=text_columns(batch.schema)
                )
            if first is None and batch.num_columns == 1 and batch.column(0).null_count < len(batch):
                first = batch.column(0).drop_null()[0].as_py()
            if pending and sum(b.nbytes for b in pending) + batch.nbytes > group_bytes:
                flush()
            pending.append(batch)
        flush()
    finally:
        if writer is not None:
            writer.close()
    assert schema is not None  # every file gives a batch, if only an empty one
    files.check(schema, first)
    return written, schema
