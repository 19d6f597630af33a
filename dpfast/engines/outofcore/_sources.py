"""Column sources of the out-of-core engine: Parquet datasets and in-memory Arrow tables.

Each is a :class:`~dpfast.dataflow.source.Source`, whose primitive :meth:`map_column` applies
a function to every batch of a column (of a tuple of names: one struct array,
:func:`column_batch`); the caller combines the results by an operation that does not depend
on their order (a sum, or a concatenation sorted next). A cluster's source implements the
same primitive, running the batches elsewhere. Rows of a Parquet dataset are numbered by file
(in sorted path order) and by row within the file, so a row's number never depends on how
the dataset is read.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpfast._validation import check_unique_names, quoted
from dpfast.dataflow.source import Columns, Source, batch_fields, column_batch, column_names
from dpfast.exceptions import DPFastValueError
from dpfast.io import is_declared_dictionary, same_dictionaries

T = TypeVar("T")
R = TypeVar("R")


#: What the out-of-core engine reads a table through (:class:`dpfast.dataflow.source.Source`).
ColumnSource = Source


def _directory_files(directory: Path) -> list[str]:
    """Return a directory input's own Parquet files, refusing one with nested ones."""
    files = [str(p) for p in directory.glob("*.parquet") if p.is_file() and _data_name(p)]
    nested = sorted(
        str(p.relative_to(directory))
        for p in directory.iterdir()
        if p.is_dir() and _data_name(p) and any(p.rglob("*.parquet"))
    )
    if nested:
        shown = ", ".join(repr(name) for name in nested[:3]) + (", ..." if len(nested) > 3 else "")
        raise DPFastValueError(
            f"directory {str(directory)!r} has subdirectories holding Parquet files ({shown}), "
            f"which a directory input does not read; give a glob instead: "
            f"'{directory}/*.parquet' for its own files only, '{directory}/**/*.parquet' for "
            "every level (or move the other files out)"
        )
    return sorted(files)


def _data_name(path: Path) -> bool:
    """Return whether ``path`` may hold data: not hidden (``.*``) nor metadata (``_*``)."""
    return not path.name.startswith((".", "_"))


@dataclass(frozen=True)
class ParquetDataset(Source):
    """The files of a Parquet dataset, their row counts and their common schema.

    ``groups`` holds each file's row groups' row counts, from the same footers;
    ``file_schema`` is the files' schema (:attr:`schema`).
    """

    files: tuple[str, ...]
    rows: tuple[int, ...]
    file_schema: pa.Schema
    groups: tuple[tuple[int, ...], ...]

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ParquetDataset:
        """Open a ``.parquet`` file, a directory or a glob, reading only the files' footers.

        A directory is its own ``*.parquet`` files, never its subdirectories' (hidden files,
        ``.*`` and ``_*``, are not data); one whose subdirectories hold Parquet files is
        refused, naming them: a glob says which files to read (``DIR/**/*.parquet`` reads
        every level). Raises ``ValueError`` when nothing matches or the schemas differ.
        """
        where = os.fspath(path)
        if Path(where).is_dir():
            files = _directory_files(Path(where))
            what = f"directory {where!r} holds no .parquet file"
        elif glob.has_magic(where):
            files = sorted(p for p in glob.glob(where, recursive=True) if Path(p).is_file())
            what = f"no file matches {where!r}"
        else:
            files = [where] if Path(where).is_file() else []
            what = f"input {where!r} does not exist; check the path"
        if not files:
            raise DPFastValueError(what)
        return cls.from_files(files)

    @classmethod
    def from_files(cls, files: list[str]) -> ParquetDataset:
        """Open Parquet ``files`` (rows numbered by file in sorted path order) by their footers."""
        files = sorted(files)
        rows, groups, schema = [], [], None
        for name in files:
            try:
                metadata = pq.read_metadata(name)
                file_schema = pq.read_schema(name)
            except (pa.ArrowInvalid, OSError) as exc:
                raise DPFastValueError(f"cannot read {name!r} as parquet: {exc}") from exc
            rows.append(metadata.num_rows)
            count = metadata.num_row_groups
            groups.append(tuple(metadata.row_group(i).num_rows for i in range(count)))
            if schema is None:
                schema = file_schema.remove_metadata()
            elif not schema.equals(file_schema.remove_metadata()):
                raise DPFastValueError(
                    f"{name!r} has another schema than {files[0]!r}; every file of a dataset "
                    "must have the same columns and types"
                )
        assert schema is not None
        where = repr(files[0]) if len(files) == 1 else f"the dataset of {files[0]!r}"
        check_unique_names(schema.names, where, "rename the repeats where the files are written")
        return cls(tuple(files), tuple(rows), schema, tuple(groups))

    @property
    def schema(self) -> pa.Schema:
        """The files' common schema."""
        return self.file_schema

    @property
    def n_rows(self) -> int:
        """Rows in all the files."""
        return sum(self.rows)

    @property
    def names(self) -> list[str]:
        """The columns' names."""
        return list(self.schema.names)

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)`` for column ``name``, batch by batch in row order."""
        first = 0
        for path in self.files:
            with pq.ParquetFile(path) as file:
                read = file.iter_batches(batch_size=batch_rows, columns=column_names(name))
                for batch in read:
                    yield fn(column_batch(name, batch.columns), first)
                    first += batch.num_rows


@dataclass(frozen=True)
class ArrowSource(Source):
    """An Arrow table in memory as a column source: each column is read a batch at a time."""

    table: pa.Table

    @property
    def names(self) -> list[str]:
        """The columns' names."""
        return list(self.table.column_names)

    @property
    def schema(self) -> pa.Schema:
        """The columns' Arrow types."""
        return self.table.schema

    @property
    def n_rows(self) -> int:
        """The number of rows."""
        return int(self.table.num_rows)

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], Any]
    ) -> Iterator[Any]:
        """Yield ``fn(batch, first_row)`` for column ``name``, batch by batch in row order."""
        names = column_names(name)
        columns = [self.table.column(c) for c in names]
        for first in range(0, self.n_rows, batch_rows):
            pieces = zip(names, columns, strict=True)
            arrays = [_combined(n, c.slice(first, batch_rows)) for n, c in pieces]
            yield fn(column_batch(name, arrays), first)


def _combined(name: str, chunked: pa.ChunkedArray) -> pa.Array:
    """Return ``chunked`` as one array, refusing ordered dictionaries that disagree.

    Combining chunks unifies their dictionaries under the first one's order; an ordered
    column whose parts declare different categories has no order of its own, and is
    refused as :func:`dpfast.io.same_dictionaries` refuses it when the parts are batches.
    """
    if chunked.num_chunks > 1 and is_declared_dictionary(chunked.type):
        same_dictionaries(name, [chunk.dictionary for chunk in chunked.chunks])
    return chunked.combine_chunks()


class WrappedSource(Source):
    """A column source over another one, ``dataset``: the same columns and rows.

    It forwards the names, the row count, whether the source sorts where its batches
    are read and how many of its tasks run at once; a wrapper states the rest.
    """

    def __init__(self, dataset: Source) -> None:
        self._dataset = dataset

    @property
    def dataset(self) -> Source:
        """The source under this one."""
        return self._dataset

    @property
    def names(self) -> list[str]:
        """The columns' names."""
        return list(self._dataset.names)

    @property
    def n_rows(self) -> int:
        """The number of rows."""
        return int(self._dataset.n_rows)

    @property
    def sorts_in_place(self) -> bool:
        """Whether the source under this one sorts where its batches are read."""
        return self._dataset.sorts_in_place

    @property
    def sort_tasks(self) -> int:
        """How many of the source's tasks run at once."""
        return self._dataset.sort_tasks


class SchemaCheckedSource(WrappedSource):
    """A column source whose batches are checked and cast against a schema, as it is read.

    The declared columns exist and numeric ones hold numbers, checked against the source's
    Arrow schema when it is built, before any row is read; each batch of a numeric column is
    then checked (no missing value in a protected column) and cast exactly to its declared
    type, errors naming rows across the whole source.
    """

    def __init__(self, dataset: Any, schema: Any) -> None:
        super().__init__(dataset)
        self._schema = schema
        schema.check_table(dataset.schema.empty_table())

    @property
    def schema(self) -> pa.Schema:
        """The columns' Arrow types as read: a declared numeric column's declared type.

        ``"integer"`` columns are read as int64 and ``"float"`` ones as float64, as the
        schema casts a table in memory (:meth:`dpfast.schema.Schema.check_table`).
        """
        declared = {"integer": pa.int64(), "float": pa.float64()}
        fields = []
        for field in self._dataset.schema:
            spec = self._schema[field.name] if field.name in self._schema.names else None
            if spec is not None and spec.is_numeric:
                field = field.with_type(declared[spec.type])
            fields.append(field)
        return pa.schema(fields)

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(checked batch, first_row)`` for the batches of column ``name``."""
        yield from self._dataset.map_column(name, batch_rows, self._checked(name, fn))

    def add_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T], most: int = 1
    ) -> Iterable[tuple[T, int]]:
        """Return the source's partial totals of ``fn`` over checked batches of ``name``."""
        return self._dataset.add_column(name, batch_rows, self._checked(name, fn), most)

    def sort_ranges(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Any,
        key_bits: int,
        reduce: Callable[[int, np.ndarray], R],
    ) -> list[R]:
        """Return the source's :meth:`~Source.sort_ranges`, its keys from checked batches."""
        checked = self._checked(name, keys)
        return self._dataset.sort_ranges(name, batch_rows, checked, ranges, key_bits, reduce)

    def _checked(
        self, name: Columns, fn: Callable[[pa.Array, int], T]
    ) -> Callable[[pa.Array, int], T]:
        """Return ``fn`` of a batch of column ``name`` checked and cast as declared."""
        schema = self._schema  # not self: the function may be shipped to a cluster's workers
        specs = {c: schema[c] for c in column_names(name) if c in schema.names}

        def one(array: pa.Array, column: str, first_row: int) -> pa.Array:
            spec = specs.get(column)
            if spec is None or not spec.is_numeric:
                return array
            if spec.protect and array.null_count:
                nulls = array.is_null().to_numpy(zero_copy_only=False)
                raise DPFastValueError(
                    f"protected column {quoted(column)} has a missing value at row "
                    f"{first_row + int(nulls.argmax())}; drop or impute those rows, or "
                    'set "protect": false for the column'
                )
            return schema.cast_column(array, column, first_row)

        def checked(array: pa.Array, first_row: int) -> T:
            return fn(batch_fields(name, array, lambda a, c: one(a, c, first_row)), first_row)

        return checked
