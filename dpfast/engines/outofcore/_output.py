"""The released columns of an out-of-core release: scratch files, then one atomic publish.

Each released column is written in output row order to a scratch file, in a hidden scratch
directory beside the output:

* **rows** (:mod:`dpfast.dataflow.row_outputs`, written by the engine): a batch's released
  values at their rows' places, read back by :meth:`Output.coded` for a coded column;
* **rank groups** (:mod:`dpfast.dataflow.ranked_rows`, written by the engine): the groups'
  values in a keyed order of the rows, bucket range by bucket range of the permutation, or
  each row's group value placed at its output position through spill files;
* **copied** (:meth:`Output.copied`): an unprotected column, unchanged, in the rows' order
  or a keyed one.

:meth:`Output.publish` stitches the scratch columns row range by row range into Parquet under
a temporary name, then renames it into place: a failed or interrupted release leaves no
output, and its scratch directory is removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpfast.dataflow.flow import Limits
from dpfast.dataflow.placement import ArrowFile, BatchFiles, Placer
from dpfast.dataflow.row_outputs import decodes_to_dictionary, domain_labels
from dpfast.dataflow.scratch_files import (
    column_digest,
    read_rows,
    scratch_name,
)
from dpfast.dataflow.source import Staged
from dpfast.dataflow.values import (
    CategoricalColumn,
    NumericColumn,
    ProtectedColumn,
)
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.outofcore._work import Work
from dpfast.engines.scratch_dirs import make_scratch, publish_at, remove_tree
from dpfast.io import WRITE_ROWS, arrow_labels

__all__ = ["FILE_ROWS", "Output", "ScratchColumn"]

#: Rows per file of a Parquet dataset output.
FILE_ROWS = 8 * WRITE_ROWS
Tick = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ScratchColumn:
    """One released column held in a scratch file, in output row order.

    ``read(first, count)`` returns output rows ``[first, first + count)`` as an Arrow
    array of ``arrow_type``.
    """

    name: str
    arrow_type: pa.DataType
    read: Callable[[int, int], pa.Array]
    dictionary: bool = False


class Output:
    """The released columns of one release over ``source``, published to ``target``.

    ``target`` is one Parquet file if it ends in ``.parquet``, else a dataset directory;
    with ``dataset``, always a directory (a cluster's writers make one, whatever its name).
    """

    def __init__(
        self,
        source: ColumnSource,
        target: Path,
        tick: Tick,
        work: Work,
        *,
        dataset: bool = False,
    ) -> None:
        self.source = source
        self.work = work
        self.target = target
        self.dataset = dataset
        self.tick = tick
        self.columns: dict[str, ScratchColumn] = {}
        self._table: tuple[list[ScratchColumn], int] | None = None
        self._directory: Path | None = None
        self._lock = threading.Lock()

    @property
    def directory(self) -> Path:
        """The hidden scratch directory beside the output, made when first needed."""
        with self._lock:  # columns run in threads
            if self._directory is None:
                self._directory = make_scratch(self.target)
            return self._directory

    def path(self, name: Hashable, kind: str = "column") -> Path:
        """Return a column's scratch file of ``kind`` (named by ``scratch_files.scratch_name``)."""
        return self.directory / scratch_name(name, kind)

    # -- the kinds of released column ---------------------------------------------------

    def released(self, column: ProtectedColumn) -> None:
        """Read a column written to its scratch file back: its own dtype, or its labels."""
        if isinstance(column, CategoricalColumn):
            self._labels(column)
        else:
            self._numeric(column)

    def coded(self, name: Hashable, domain: Sequence[Any], declared: Sequence[str] | None) -> None:
        """Read a column written as int64 codes back as ``domain``'s values, as in memory.

        A dictionary (``row_outputs.decodes_to_dictionary``) keeps the categories its type
        ``declared`` (:func:`dpfast.io.arrow_labels`).
        """
        path = self.path(name)
        original = self.source.schema.field(str(name)).type
        text = decodes_to_dictionary(original, domain)
        values = pa.array(domain_labels(domain))

        def read(first: int, count: int) -> pa.Array:
            codes = read_rows(path, np.int64, first, count)
            if text:
                return arrow_labels(codes, list(domain), original, declared)
            return values.take(pa.array(codes))

        self.columns[str(name)] = ScratchColumn(str(name), read(0, 0).type, read, True)

    def copied(
        self,
        name: str,
        key: np.ndarray | None,
        limits: Limits,
        categories: Sequence[str] | None = None,
    ) -> None:
        """Place one column unchanged, of any Arrow type, into an Arrow file in output order.

        It keeps its batches' type (a source that casts a declared type, as the CLI's schema
        does, gives the cast type); a dictionary column stays one, with the ``categories``
        its type declares, if any (its own dictionary, in its order). In the rows' order
        (``key`` ``None``) the batches are kept as they come, in one pass.
        """
        declared = self.source.schema.field(name).type
        dictionary = pa.types.is_dictionary(declared)
        if key is None:
            batches = BatchFiles(self.directory / f"copied-{column_digest(name)}")
            for first_row, array in self.source.map_column(name, limits.batch_rows, _plain):
                batches.add(array, first_row)
            self.columns[name] = _copied_column(name, batches, declared, dictionary, categories)
            return
        row_bytes = self._row_bytes(name, declared, limits)
        out: ArrowFile | None = None
        placer: Placer | None = None
        try:
            for first_row, array in self.source.map_column(name, limits.batch_rows, _plain):
                if out is None or placer is None:  # the batches' type (a source may cast it)
                    out = ArrowFile(self.path(name, "copied").with_suffix(".arrow"), array.type)
                    placer = Placer(
                        self.directory,
                        column_digest(name) + "-copy",
                        self.source.n_rows,
                        key,
                        array.type,
                        row_bytes,
                        limits.memory,
                    )
                placer.add(
                    array.cast(out.arrow_type) if array.type != out.arrow_type else array,
                    first=first_row,
                )
            assert placer is not None and out is not None  # a dataset has rows
            placer.finish(out.write)
        finally:
            if placer is not None:
                placer.close()
            if out is not None:
                out.close()
        self.columns[name] = _copied_column(name, out, declared, dictionary, categories)

    def table(self, columns: Sequence[ScratchColumn], n_rows: int) -> None:
        """Make ``n_rows`` rows of ``columns`` the output, instead of released columns."""
        self._table = (list(columns), int(n_rows))

    # -- the end ------------------------------------------------------------------------

    def publish(self, data: Callable[[Path], Any]) -> Staged:
        """Stitch the columns into the output in scratch; revealing renames it into place.

        The staged release's data is ``data(target)``, once the output is there.
        """
        if self._table is not None:
            written = self._stitch(*self._table)
        else:
            columns = [self.columns[str(n)] for n in self.source.names if str(n) in self.columns]
            written = self._stitch(columns, self.source.n_rows)

        def reveal() -> Any:
            publish_at(written, self.target)
            return data(self.target)

        return Staged(reveal, lambda: remove_tree(written))

    def close(self) -> None:
        """Remove the scratch directory, however the release ended."""
        with self._lock:
            if self._directory is not None:
                remove_tree(self._directory)
                self._directory = None

    # -- helpers ------------------------------------------------------------------------

    def _numeric(self, column: NumericColumn) -> None:
        """Convert a numeric column written as float64: it is read back in its own dtype."""
        path = self.path(column.name)
        kind = pa.from_numpy_dtype(column.dtype)

        def read(first: int, count: int) -> pa.Array:
            values = np.fromfile(path, np.float64, count, offset=first * 8)
            return pa.array(column.restore_dtype(values), kind)

        self.columns[str(column.name)] = ScratchColumn(str(column.name), kind, read)

    def _labels(self, column: CategoricalColumn) -> None:
        """Convert a categorical column's codes to its taxonomy's labels, of the input's type.

        As in memory (``TableData.categorical_output``): a dictionary column gets a
        dictionary (:func:`dpfast.io.arrow_labels`: the categories its type declares, else
        the taxonomy's leaves), any other column strings of its own type.
        """
        original = self.source.schema.field(str(column.name)).type
        domain = list(column.taxonomy.domain)
        labels = pa.array(domain, pa.string())
        path = self.path(column.name)

        def codes(first: int, count: int) -> np.ndarray:
            return np.fromfile(path, np.int64, count, offset=first * 8)

        def read(first: int, count: int) -> pa.Array:
            if pa.types.is_dictionary(original):
                return arrow_labels(codes(first, count), domain, original, column.categories)
            strings = labels.take(pa.array(codes(first, count)))
            return strings if original == pa.string() else strings.cast(original)

        # dictionary-encoded, so that a dictionary column's own categories are written, in order
        self.columns[str(column.name)] = ScratchColumn(
            str(column.name), read(0, 0).type, read, True
        )

    def _row_bytes(self, name: str, declared: pa.DataType, limits: Limits) -> float:
        """Bytes per value of a column: its width, or (variable width) its average."""
        try:
            kind = declared.value_type if pa.types.is_dictionary(declared) else declared
            return float(max(1, kind.bit_width // 8))
        except ValueError:  # variable width: the column's average, from one pass
            sizes = self.source.map_column(name, limits.batch_rows, _nbytes)
            return sum(sizes) / max(1, self.source.n_rows)

    def _stitch(self, columns: Sequence[ScratchColumn], n: int) -> Path:
        """Write ``n`` rows of the columns range by range as Parquet; return the temporary path.

        No rows: one file of the columns' schema.
        """
        schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
        single = self.target.suffix == ".parquet" and not self.dataset
        out = self.directory / ("release.parquet" if single else "release")
        if not single:
            out.mkdir()
        if n == 0:
            pq.write_table(schema.empty_table(), out if single else out / "part-00000.parquet")
            return out
        rows_per_file = n if single else FILE_ROWS
        # released numbers are near-random: a dictionary only costs time
        dictionary = [c.name for c in columns if c.dictionary]
        writer = None
        try:
            for first in range(0, n, WRITE_ROWS):
                count = min(WRITE_ROWS, n - first)
                arrays = [c.read(first, count) for c in columns]
                if first % rows_per_file == 0:
                    if writer is not None:
                        writer.close()
                    part = out if single else out / f"part-{first // rows_per_file:05d}.parquet"
                    writer = pq.ParquetWriter(
                        part, schema, compression="zstd", use_dictionary=dictionary
                    )
                table = pa.Table.from_arrays(arrays, schema=schema)
                assert writer is not None
                writer.write_table(table, row_group_size=WRITE_ROWS)
                self.tick(f"writing {self.target.name}", first + count, n)
        finally:
            if writer is not None:
                writer.close()
        return out


def _plain(array: pa.Array, first_row: int) -> tuple[int, pa.Array]:
    """Return a batch as it is, a dictionary decoded."""
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return first_row, array


def _nbytes(array: pa.Array, first_row: int) -> int:
    return int(array.nbytes)


def _copied_column(
    name: str,
    out: ArrowFile | BatchFiles,
    declared: pa.DataType,
    dictionary: bool,
    categories: Sequence[str] | None,
) -> ScratchColumn:
    if categories is not None:  # the column's own dictionary, in its order
        return _declared_column(name, out, declared, categories)
    value_type = out.arrow_type
    if value_type is None:  # no batch came: no rows
        value_type = declared.value_type if dictionary else declared
    arrow_type = pa.dictionary(declared.index_type, value_type) if dictionary else value_type

    def read(first: int, count: int) -> pa.Array:
        values = out.read(first, count)
        return values.dictionary_encode().cast(arrow_type) if dictionary else values

    return ScratchColumn(name, arrow_type, read)


def _declared_column(
    name: str, out: ArrowFile | BatchFiles, declared: pa.DataType, categories: Sequence[str]
) -> ScratchColumn:
    """Return a copied column that declares its categories, coded by them again as it is read."""
    dictionary = pa.array(list(categories), declared.value_type)

    def read(first: int, count: int) -> pa.Array:
        values = out.read(first, count).cast(declared.value_type)
        indices = pc.index_in(values, value_set=dictionary).cast(declared.index_type)
        return pa.DictionaryArray.from_arrays(indices, dictionary, ordered=True)

    return ScratchColumn(name, declared, read, dictionary=True)
