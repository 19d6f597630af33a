"""CSV and TSV files read batch by batch, each column of the type a whole read gives it.

:func:`dpfast.io.read_table` reads a text file whole with ``pyarrow.csv.read_csv``, whose
type inference gives a column the first kind of :data:`KINDS` that converts every one of
its values: it infers a kind from the first block, and loosens it (converting every block
again) whenever a later block does not convert. :class:`CsvFiles` reads the same files a
batch at a time with pyarrow's streaming reader, which infers from the first block only
and fails on a later block that does not convert: :meth:`CsvFiles.batches` then raises
:class:`LooserType`, :meth:`CsvFiles.looser` finds the column's type as a whole read
does (one more pass over the column per kind it tries), and the caller reads again with
it. So the batches hold, bit for bit, the columns of a whole read, and bad files get the
errors of :func:`~dpfast.io.read_table`.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv

from dpfast._validation import check_unique_names
from dpfast.exceptions import DPFastError, DPFastValueError
from dpfast.io._files import (
    Progress,
    _check_delimiter,
    _check_text_options,
    _check_utf8,
    _CountingFile,
    _is_utf8,
    _pyarrow_text,
    _read_error,
    _separator,
    output_format,
)

__all__ = ["KINDS", "CsvFiles", "LooserType", "is_text_path", "text_files"]

#: The kinds pyarrow's CSV type inference tries, in its order (a kind's values may be
#: missing: empty, ``NA``, ``null``, ``NaN``, ...): a column read whole gets the first
#: that converts every value.
KINDS: tuple[pa.DataType, ...] = (
    pa.null(),
    pa.int64(),
    pa.bool_(),
    pa.float64(),
    pa.date32(),
    pa.time32("s"),
    pa.timestamp("s"),
    pa.timestamp("ns"),
    pa.timestamp("s", tz="UTC"),
    pa.timestamp("ns", tz="UTC"),
    pa.string(),
    pa.binary(),
)

#: pyarrow's message for a value that does not convert (its row number left out).
_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error to ")

_ERRORS = (pa.ArrowInvalid, OSError, UnicodeDecodeError)


def _is_text_name(name: str) -> bool:
    try:
        return output_format(name) != "parquet"
    except ValueError:
        return False


def text_files(path: str | os.PathLike[str]) -> list[str]:
    """Return the CSV or TSV files ``path`` names, in sorted order (none: it names none).

    A file by its extension; a glob's matching files; a directory's own files (not its
    subdirectories', not hidden ``.*`` or ``_*`` ones) when it holds text files and no
    Parquet file.
    """
    where = os.fspath(path)
    if Path(where).is_dir():
        own = [p for p in Path(where).iterdir() if p.is_file() and p.name[0] not in "._"]
        if any(p.suffix == ".parquet" for p in own):
            return []
        return sorted(str(p) for p in own if _is_text_name(p.name))
    if glob.has_magic(where):
        if not _is_text_name(where):
            return []
        return sorted(p for p in glob.glob(where, recursive=True) if Path(p).is_file())
    return [where] if _is_text_name(where) else []


def is_text_path(path: object) -> bool:
    """Return whether ``path`` (a string or path) names CSV or TSV files (:func:`text_files`).

    A glob names them by its extension (``'DIR/*.csv'``), even when nothing matches.
    """
    if not isinstance(path, (str, os.PathLike)):
        return False
    if glob.has_magic(os.fspath(path)):
        return _is_text_name(os.fspath(path))
    return bool(text_files(path))


class LooserType(DPFastError):
    """A batch of ``column`` holds a value that its type so far does not convert.

    ``types`` are every column's types so far; read again with the column's
    :meth:`CsvFiles.looser` type.
    """

    def __init__(self, column: str, types: Mapping[str, pa.DataType]) -> None:
        super().__init__(column)
        self.column = column
        self.types = dict(types)


@dataclass(frozen=True)
class CsvFiles:
    """CSV or TSV files read as one table, batch by batch: rows by file, then by row.

    Every file is read with the options :func:`~dpfast.io.read_table` reads it with (its
    format's delimiter or ``delimiter``, ``encoding``) and must have the first file's
    header.
    """

    files: tuple[str, ...]
    fmt: str
    separator: str
    encoding: str
    #: Bytes of text per block the reader parses (pyarrow's default, as a whole read).
    block_size: int = 1 << 20

    @classmethod
    def open(
        cls,
        files: Sequence[str | os.PathLike[str]],
        *,
        delimiter: str | None = None,
        encoding: str = "utf-8",
    ) -> CsvFiles:
        """Check ``files`` and their options as :func:`~dpfast.io.read_table` does; read nothing."""
        paths = tuple(os.fspath(f) for f in files)
        formats = {output_format(p).removesuffix(".gz") for p in paths}
        if len(formats) != 1 or formats == {"parquet"}:
            raise DPFastValueError(
                f"the files {', '.join(repr(p) for p in paths[:3])} are not all CSV or all "
                "TSV; read them as one format"
            )
        for path in paths:
            _check_text_options(path, delimiter, encoding)
            if not Path(path).is_file():
                raise DPFastValueError(f"input file {path!r} does not exist; check the path")
        fmt = output_format(paths[0])
        return cls(paths, fmt, _separator(fmt, delimiter), encoding)

    @contextmanager
    def _reader(
        self,
        path: str,
        progress: Progress | None,
        types: Mapping[str, pa.DataType] | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Any]:
        """Yield pyarrow's streaming reader of one file (``types`` given, ``columns`` only)."""
        source: Any = (
            path
            if progress is None
            else _CountingFile(path, progress, f"reading {Path(path).name}")
        )
        compression = "gzip" if self.fmt.endswith(".gz") else None
        convert = pa_csv.ConvertOptions(
            column_types=dict(types or {}), include_columns=list(columns or [])
        )
        try:
            with pa.input_stream(source, compression=compression) as stream:
                try:
                    reader = pa_csv.open_csv(
                        stream,
                        read_options=pa_csv.ReadOptions(
                            encoding=self.encoding, block_size=self.block_size
                        ),
                        parse_options=pa_csv.ParseOptions(delimiter=self.separator),
                        convert_options=convert,
                    )
                except _ERRORS as exc:  # the first block is read, and converted, here
                    raise _unconverted(exc) or _read_error(
                        path, self.fmt, self.encoding, exc
                    ) from exc
                yield reader
        finally:
            if isinstance(source, _CountingFile):
                source.close()

    @contextmanager
    def _opened(
        self, path: str, progress: Progress | None, types: dict[str, pa.DataType] | None
    ) -> Iterator[Any]:
        """Yield :meth:`_reader` of every column of ``path``.

        A first block that does not convert to ``types`` is the :class:`LooserType` of its
        column (the files share the first's header).
        """
        try:
            with self._reader(path, progress, types) as reader:
                yield reader
        except _Unconverted as failed:
            if types is None:
                raise AssertionError("a first block converts to its inferred types") from None
            raise LooserType(list(types)[failed.index], types) from None

    def _next(self, path: str, reader: Any) -> pa.RecordBatch | None:
        """Return the reader's next batch (None at the end); a conversion failure as its column."""
        try:
            return reader.read_next_batch()
        except StopIteration:
            return None
        except _ERRORS as exc:
            raise _unconverted(exc) or _read_error(path, self.fmt, self.encoding, exc) from exc

    def batches(
        self, types: Mapping[str, pa.DataType] | None = None, progress: Progress | None = None
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Yield ``(file index, batch)`` for every batch of every file, in row order.

        Without ``types`` the first file's first block decides them (pyarrow's streaming
        inference); raises :class:`LooserType` at a batch whose values do not convert.
        Checks every file's header against the first's, as the batches come.
        """
        decided = None if types is None else dict(types)
        names: list[str] | None = None
        for i, path in enumerate(self.files):
            with self._opened(path, progress, decided) as reader:
                schema = reader.schema
                if names is None:
                    if _is_utf8(self.encoding):
                        _check_utf8(path, schema.empty_table())  # a header not UTF-8
                    names = list(schema.names)
                    self._check_names(names)
                elif list(schema.names) != names:
                    raise DPFastValueError(
                        f"{path!r} has another header than {self.files[0]!r}; every file "
                        "read as one table must have the same columns, in the same order"
                    )
                if decided is None:
                    decided = {field.name: field.type for field in schema}
                yielded = False
                while True:
                    try:
                        batch = self._next(path, reader)
                    except _Unconverted as failed:
                        raise LooserType(list(decided)[failed.index], decided) from None
                    if batch is None:
                        break
                    yielded = True
                    yield i, batch
                if not yielded:  # a header only: no rows, the columns' types
                    yield i, pa.RecordBatch.from_pylist([], schema=_typed(schema, decided))

    def looser(self, column: str, current: pa.DataType) -> pa.DataType:
        """Return the first kind after ``current`` that converts every value of ``column``.

        One pass over the files reads the column for each kind tried.
        """
        later = [i for i, kind in enumerate(KINDS) if kind == current]
        for kind in KINDS[(later[0] + 1 if later else 0) :]:
            if self._converts(column, kind):
                return kind
        return pa.binary()  # holds any bytes

    def _converts(self, column: str, kind: pa.DataType) -> bool:
        try:
            for path in self.files:
                with self._reader(path, None, {column: kind}, [column]) as reader:
                    while self._next(path, reader) is not None:
                        pass
        except _Unconverted:
            return False
        return True

    def check(self, schema: pa.Schema, first: Any) -> None:
        """Refuse what :func:`~dpfast.io.read_table` refuses once the file is read.

        Text that is not UTF-8 (a binary column, when the encoding is UTF-8), and a
        header read as one column that another common delimiter would split (``first``:
        the column's first value that is not missing, or None).
        """
        table = schema.empty_table()
        if len(schema) == 1 and first is not None:  # the first value, for the delimiter's check
            table = pa.Table.from_arrays([pa.array([first], schema.field(0).type)], schema=schema)
        if _is_utf8(self.encoding):
            _check_utf8(self.files[0], table)
        _check_delimiter(self.files[0], table, self.separator)

    def _check_names(self, names: list[str]) -> None:
        check_unique_names(
            names,
            repr(self.files[0]),
            "rename the repeats in the file's header row (e.g. age and age_2)",
        )


def _typed(schema: pa.Schema, types: Mapping[str, pa.DataType]) -> pa.Schema:
    return pa.schema([field.with_type(types.get(field.name, field.type)) for field in schema])


class _Unconverted(DPFastError):
    """The streaming reader could not convert a value of column ``index`` to its type."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def _unconverted(exc: BaseException) -> _Unconverted | None:
    """Return pyarrow's failure to convert a value as :class:`_Unconverted`, else None."""
    found = _CONVERSION.match(_pyarrow_text(exc))
    return None if found is None else _Unconverted(int(found.group(1)))
