"""Tables in files: Parquet, CSV and TSV (plain or gzip), read whole and written atomically."""

from __future__ import annotations

import codecs
import io
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from dpfast._staging import file_beside, leftovers, remove_gone
from dpfast._validation import check_unique_names, quoted
from dpfast.exceptions import DPFastValueError

_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".csv.gz": "csv.gz",
    ".tsv": "tsv",
    ".tsv.gz": "tsv.gz",
}


def output_format(path: str | os.PathLike[str]) -> str:
    """Return a file's format from its name's extension.

    Returns
    -------
    {"parquet", "csv", "csv.gz", "tsv", "tsv.gz"}
        ``.parquet`` and ``.pq`` are Parquet; ``.tsv`` is tab-delimited text; ``.gz`` is
        gzip-compressed text.

    Examples
    --------
    >>> output_format("people.CSV.gz"), output_format("people.tsv")
    ('csv.gz', 'tsv')
    """
    name = Path(path).name.lower()
    for suffix in sorted(_FORMATS, key=len, reverse=True):
        if name.endswith(suffix):
            return _FORMATS[suffix]
    extension = "".join(Path(path).suffixes[-2:])
    raise DPFastValueError(
        f"cannot tell the file format of {os.fspath(path)!r} from its extension "
        f"{quoted(extension or '(none)')}; use .parquet or .csv (also .csv.gz, .tsv, .tsv.gz)"
    )


def _separator(fmt: str, delimiter: str | None) -> str:
    """Return the field separator of a text format: ``delimiter``, or the format's own."""
    if delimiter is None:
        return "\t" if fmt.startswith("tsv") else ","
    if not (isinstance(delimiter, str) and len(delimiter) == 1 and delimiter.isascii()):
        raise DPFastValueError(
            f"a delimiter must be one ASCII character, got {quoted(delimiter)}; e.g. --delimiter "
            "';'"
        )
    if delimiter in '"\r\n':
        raise DPFastValueError(
            f"a delimiter cannot be a quote or a line break, got {quoted(delimiter)}; "
            "e.g. --delimiter ';'"
        )
    return delimiter


def _check_text_options(path: str | os.PathLike[str], delimiter: str | None, encoding: str) -> None:
    """Refuse text-file options for a Parquet file, and an encoding Python does not know."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise DPFastValueError(
            f"unknown text encoding {quoted(encoding)}; give a name Python knows, e.g. "
            "--encoding utf-8, latin-1 or cp1252"
        ) from None
    if output_format(path) == "parquet" and (delimiter is not None or not _is_utf8(encoding)):
        raise DPFastValueError(
            f"{os.fspath(path)!r} is Parquet: a delimiter and an encoding apply to CSV and TSV "
            "files only; leave them out"
        )


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name == "utf-8"


Progress = Callable[[str, int, int], None]


class _CountingFile(io.RawIOBase):
    """A binary file that reports ``progress(phase, bytes read, file size)`` as it is read."""

    def __init__(self, path: str | os.PathLike[str], progress: Progress, phase: str) -> None:
        super().__init__()
        self._file = open(path, "rb")  # closed with this object
        self._size = os.fstat(self._file.fileno()).st_size
        self._read = 0
        self._progress = progress
        self._phase = phase

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        count = self._file.readinto(buffer)
        self._read += count
        self._progress(self._phase, min(self._read, self._size), self._size)
        return count

    def close(self) -> None:
        self._file.close()
        super().close()


def read_table(
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    progress: Progress | None = None,
) -> pa.Table:
    """Read a Parquet, CSV or TSV file (chosen by extension) into an Arrow table.

    ``.csv.gz`` and ``.tsv.gz`` are read through gzip. Error messages name the command
    line's options (``--delimiter``, ``--encoding``), which take the same values as the
    keyword arguments.

    Parameters
    ----------
    path : str or path-like
    delimiter : str, optional
        CSV and TSV only: the one-character field separator (default ``","`` for CSV, a
        tab for TSV).
    encoding : str
        CSV and TSV only: the file's text encoding, e.g. ``"latin-1"`` (default UTF-8).
    progress : callable, optional
        Called as ``progress("reading NAME", bytes read, file size)`` while reading.

    Raises
    ------
    ValueError
        If the extension is unknown, the file does not exist or cannot be parsed, a text
        option is given for Parquet, the text is not valid UTF-8 (when no other encoding
        is given), or the header is one column that another delimiter would split.
    """
    where = os.fspath(path)
    fmt = output_format(path)
    _check_text_options(path, delimiter, encoding)
    separator = None if fmt == "parquet" else _separator(fmt, delimiter)
    if not Path(path).is_file():
        raise DPFastValueError(f"input file {where!r} does not exist; check the path")
    source: Any = path
    if progress is not None:
        source = _CountingFile(path, progress, f"reading {Path(path).name}")
    try:
        if separator is None:
            # pre-buffering keeps the file's column chunks alive with the table: about
            # twice the table's memory for incompressible data
            return pq.read_table(source, pre_buffer=False)
        compression = "gzip" if fmt.endswith(".gz") else None
        with pa.input_stream(source, compression=compression) as stream:
            table = pa_csv.read_csv(
                stream,
                read_options=pa_csv.ReadOptions(encoding=encoding),
                parse_options=pa_csv.ParseOptions(delimiter=separator),
            )
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as exc:
        raise _read_error(where, fmt, encoding, exc) from exc
    finally:
        if isinstance(source, _CountingFile):
            source.close()
    if _is_utf8(encoding):
        _check_utf8(where, table)
    _check_delimiter(where, table, separator)
    check_unique_names(
        table.column_names,
        repr(where),
        "rename the repeats where the file is written"
        if separator is None
        else "rename the repeats in the file's header row (e.g. age and age_2)",
    )
    return table


#: The row number pyarrow's CSV readers put in a message only when they read on one thread
#: (``pyarrow.cpu_count() == 1``, or the streaming reader on one CPU): dropped, so that a
#: file's error is the same whole or in batches, on any machine.
_PYARROW_ROW = re.compile(r"(?<=: )Row #\d+: ")


def _pyarrow_text(exc: BaseException) -> str:
    """Return pyarrow's message ``exc``, stripped, without the one-thread row number.

    >>> _pyarrow_text(ValueError("CSV parse error: Row #3: Expected 2 columns, got 3 "))
    'CSV parse error: Expected 2 columns, got 3'
    """
    return _PYARROW_ROW.sub("", str(exc).strip())


def _read_error(where: str, fmt: str, encoding: str, exc: BaseException) -> DPFastValueError:
    """Return the error for a file that pyarrow could not read (``exc``)."""
    text = _pyarrow_text(exc)
    first_line = text.splitlines()[0] if text else type(exc).__name__
    return DPFastValueError(
        f"cannot read {where!r} as {fmt}: {first_line}; check that the file "
        f"is valid {fmt}" + ("" if fmt == "parquet" else f" in {encoding} (--encoding)")
    )


def _check_utf8(where: str, table: pa.Table) -> None:
    """Refuse text that is not UTF-8: Arrow reads it as binary columns or undecodable names."""
    fix = "give the file's encoding, e.g. --encoding latin-1 (or cp1252), or save it as UTF-8"
    try:
        names = table.column_names
    except UnicodeDecodeError:
        raise DPFastValueError(f"{where!r} is not UTF-8 text (its header is not); {fix}") from None
    for name, column in zip(names, table.columns, strict=True):
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            raise DPFastValueError(
                f"{where!r} is not UTF-8 text (column {quoted(name)} is not); {fix}"
            )


# The separators a one-column header is checked for (docs/cli.md, "Input and output files").
_LIKELY_DELIMITERS = (";", "\t", "|", ",")


def _check_delimiter(where: str, table: pa.Table, separator: str) -> None:
    """Refuse a table read as one column when another common delimiter splits its header.

    A single column that merely has such a character in its name is accepted when its
    first value does not contain it.
    """
    if table.num_columns != 1:
        return
    header = table.column_names[0]
    values = table.column(0).drop_null()
    first = str(values[0].as_py()) if len(values) else None
    for candidate in _LIKELY_DELIMITERS:
        if candidate == separator or candidate not in header:
            continue
        if first is not None and candidate not in first:
            continue
        flag = "--delimiter tab" if candidate == "\t" else f"--delimiter '{candidate}'"
        shown = "tab" if candidate == "\t" else repr(candidate)
        raise DPFastValueError(
            f"{where!r} looks {shown}-delimited: its header {quoted(header)} is read as one "
            f"column; pass {flag}"
        )


def _atomic_write(
    path: str | os.PathLike[str], write: Any, before: Callable[[], None] | None = None
) -> None:
    """Write through ``write(tmp)`` to a temporary file, then rename it over ``path``.

    The temporary file is hidden beside ``path``, named for it and this process
    (:mod:`dpfast._staging`); those that killed runs left beside ``path`` are removed first.

    ``before()``, if given, runs once the file is complete, just before the rename (a
    budget's spend is committed there). On any exception, ``KeyboardInterrupt`` and the
    command line's SIGTERM included (both ``BaseException``), the temporary file is removed
    and ``path`` is left as it was. No signal handler is installed here: that is the host
    program's choice.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise DPFastValueError(
            f"output directory {str(directory)!r} does not exist; create it first"
        )
    tmp = None
    remove_gone(leftovers(target))  # what runs killed while writing it left
    try:
        fd, tmp = file_beside(target, ".tmp")
        os.close(fd)
        write(tmp)
        # mkstemp makes the file owner-only; give it the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        if before is not None:
            before()
        os.replace(tmp, target)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


# Rows per Parquet row group, and per piece of a written table between progress calls
# (pyarrow's default row group size).
WRITE_ROWS = 1024 * 1024


def write_table_atomic(
    table: Any,
    path: str | os.PathLike[str],
    *,
    delimiter: str | None = None,
    progress: Progress | None = None,
    before: Callable[[], None] | None = None,
) -> None:
    """Write a table (Arrow, pandas or 2-D NumPy) to Parquet, CSV or TSV, atomically.

    The format comes from the extension (:func:`output_format`; ``.gz``: gzip-compressed
    text); ``delimiter`` replaces a text format's separator. The data goes to a temporary
    file in the target directory, which is renamed over ``path`` only once complete; on
    any failure the temporary file is removed. ``progress`` is called as
    ``progress("writing NAME", rows written, rows)`` every :data:`WRITE_ROWS` rows;
    ``before()`` runs once the file is complete, before it is renamed into place.
    """
    fmt = output_format(path)
    if fmt == "parquet" and delimiter is not None:
        raise DPFastValueError(
            f"{os.fspath(path)!r} is Parquet: a delimiter applies to CSV and TSV files only; "
            "leave it out"
        )
    separator = None if fmt == "parquet" else _separator(fmt, delimiter)
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    elif isinstance(table, np.ndarray):
        table = pa.table({str(j): table[:, j] for j in range(table.shape[1])})

    phase = f"writing {Path(path).name}"

    def pieces() -> Any:
        for start in range(0, table.num_rows, WRITE_ROWS):
            yield table.slice(start, WRITE_ROWS)
            if progress is not None:
                progress(phase, min(start + WRITE_ROWS, table.num_rows), table.num_rows)

    def write(tmp: str) -> None:
        if separator is None:
            with pq.ParquetWriter(tmp, table.schema, compression="zstd") as writer:
                for piece in pieces():
                    writer.write_table(piece, row_group_size=WRITE_ROWS)
            return
        compression = "gzip" if fmt.endswith(".gz") else None
        options = pa_csv.WriteOptions(delimiter=separator)
        with (
            pa.output_stream(tmp, compression=compression) as sink,
            pa_csv.CSVWriter(sink, table.schema, write_options=options) as writer,
        ):
            for piece in pieces():
                writer.write_table(piece)

    _atomic_write(path, write, before)


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a complete file or none at all."""

    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")

    _atomic_write(path, write)


def write_json_atomic(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    write_text_atomic(json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n", path)


def parquet_shape(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Return ``(rows, columns)`` of a Parquet file from its footer, without reading data."""
    metadata = pq.read_metadata(path)
    return int(metadata.num_rows), int(metadata.num_columns)


def column_kinds(table: pa.Table) -> list[tuple[str, str, int]]:
    """Each column's name, the schema type its Arrow type suggests, and its missing values.

    The type is ``"integer"`` (integers and booleans), ``"float"``, ``"categorical"``
    (strings and dictionaries) or ``"string"`` (anything else, copied unprotected).
    """
    out = []
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = field.type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
            suggested = "integer"
        elif pa.types.is_floating(kind) or pa.types.is_decimal(kind):
            suggested = "float"
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            suggested = "categorical"
        else:
            suggested = "string"
        out.append((field.name, suggested, int(column.null_count)))
    return out
