"""Tables in and out: pandas, Arrow, NumPy, Parquet and CSV.

This is the only module that imports pyarrow. Release functions see every input through
:class:`TableData`: a list of column names and one 1-D NumPy array per column (zero-copy
where the input allows it). :meth:`TableData.rebuild` turns new column arrays back into
the caller's kind of table.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

Kind = Literal["pandas", "arrow", "numpy"]

_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


@dataclass(frozen=True)
class TableData:
    """A table seen as named 1-D columns, plus what is needed to rebuild the caller's kind.

    Attributes
    ----------
    kind : {"pandas", "arrow", "numpy"}
        What the caller passed in.
    names : list
        Column names: strings for pandas and Arrow, integer positions for NumPy.
    n_rows : int
        Number of rows.
    source : object
        The caller's table, never modified.
    """

    kind: Kind
    names: list[Hashable]
    n_rows: int
    source: Any

    def column(self, name: Hashable) -> np.ndarray:
        """Return column ``name`` as a 1-D NumPy array (a read-only view where possible)."""
        if self.kind == "numpy":
            return self.source[:, name]  # type: ignore[no-any-return]
        if self.kind == "pandas":
            series = self.source[name]
            if isinstance(series.dtype, pd.CategoricalDtype) or series.dtype == object:
                return series.to_numpy()  # type: ignore[no-any-return]
            try:
                return series.to_numpy(copy=False)  # type: ignore[no-any-return]
            except (TypeError, ValueError):  # nullable extension dtypes with missing values
                return series.to_numpy(dtype=object)  # type: ignore[no-any-return]
        chunked = self.source.column(name)
        if chunked.null_count:
            return chunked.to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]
        if chunked.num_chunks == 1:
            return chunked.chunk(0).to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]
        return chunked.to_numpy()  # type: ignore[no-any-return]

    def category_codes(self, name: Hashable) -> tuple[np.ndarray, list[Any]]:
        """Return a column as ``(codes, categories)``: int64 codes, ``-1`` for missing.

        pandas categoricals and Arrow dictionary columns give their own codes without
        looking at every value's text; other columns are dictionary-encoded (by Arrow for
        Arrow strings, by ``pandas.factorize`` otherwise).
        """
        if self.kind == "pandas":
            series = self.source[name]
            if isinstance(series.dtype, pd.CategoricalDtype):
                codes = np.asarray(series.cat.codes, dtype=np.int64)
                return codes, list(series.cat.categories)
            codes, uniques = pd.factorize(series, use_na_sentinel=True)
            return np.asarray(codes, dtype=np.int64), list(uniques)
        if self.kind == "numpy":
            codes, uniques = pd.factorize(np.asarray(self.source[:, name], dtype=object))
            return np.asarray(codes, dtype=np.int64), list(uniques)
        chunked = self.source.column(name)
        if not pa.types.is_dictionary(chunked.type):
            chunked = chunked.dictionary_encode()
        chunked = chunked.unify_dictionaries()
        if chunked.num_chunks == 0:
            return np.empty(0, dtype=np.int64), []
        dictionary = chunked.chunk(0).dictionary.to_pylist()
        indices = pa.chunked_array([c.indices for c in chunked.chunks]).combine_chunks()
        codes = np.asarray(indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        return codes, dictionary

    def categorical_output(self, name: Hashable, codes: np.ndarray, labels: Sequence[str]) -> Any:
        """Build a released categorical column of the same kind as the input column.

        pandas categoricals and Arrow dictionary columns give categoricals (categories:
        ``labels``); other pandas and Arrow columns give strings; NumPy gives objects.
        """
        if self.kind == "pandas":
            if isinstance(self.source[name].dtype, pd.CategoricalDtype):
                return pd.Categorical.from_codes(codes, categories=list(labels))
            return np.asarray(labels, dtype=object)[codes]
        if self.kind == "numpy":
            return np.asarray(labels, dtype=object)[codes]
        original = self.source.column(name).type
        array = pa.DictionaryArray.from_arrays(
            pa.array(codes, type=pa.int32()), pa.array(list(labels), type=pa.string())
        )
        if pa.types.is_dictionary(original):
            return array
        return array.cast(original)

    def _subset(self, keep: Sequence[Hashable]) -> TableData:
        """Return the table restricted to the columns ``keep`` (NumPy: renumbered 0..m-1)."""
        kept = [n for n in self.names if n in set(keep)]
        if self.kind == "pandas":  # no copy: rebuild reads only the kept columns
            return TableData("pandas", kept, self.n_rows, self.source)
        if self.kind == "arrow":
            return TableData("arrow", kept, self.n_rows, self.source.select(kept))
        return _NumpySubset("numpy", list(range(len(kept))), self.n_rows, self.source, kept)

    def output_columns(
        self, columns: Sequence[Hashable]
    ) -> tuple[dict[Hashable, np.ndarray], np.ndarray | None]:
        """Allocate float64 output columns for ``columns``.

        For a float64 NumPy input, the columns are views into one new 2-D array (returned
        as the second item, to pass to :meth:`rebuild` as ``base``), so the release is
        written in place instead of being copied into a table at the end.
        """
        if self.kind == "numpy" and self.source.dtype == np.float64:
            base = np.empty(self.source.shape, dtype=np.float64)
            return {name: base[:, cast(int, name)] for name in columns}, base
        return {name: np.empty(self.n_rows, dtype=np.float64) for name in columns}, None

    def rebuild(
        self,
        replaced: Mapping[Hashable, np.ndarray],
        row_order: np.ndarray | None,
        base: np.ndarray | None = None,
        *,
        reindex: bool = False,
        keep: Sequence[Hashable] | None = None,
    ) -> Any:
        """Return a table of the caller's kind with some columns replaced.

        Parameters
        ----------
        replaced : mapping
            New values for some columns, already in the output row order.
        row_order : ndarray of int64 or None
            Output row ``i`` is input row ``row_order[i]`` for the columns not replaced.
            ``None`` keeps the input order.
        base : ndarray, optional
            The 2-D array from :meth:`output_columns`, completed in place.
        reindex : bool
            The rows were reordered (even if no column is copied): give a pandas result a
            fresh RangeIndex.
        keep : sequence, optional
            Output only these columns (in the input's order); default all.

        Returns
        -------
        object
            A pandas DataFrame (with a fresh RangeIndex when rows were reordered, since
            the original index would reveal the permutation), an Arrow table, or a 2-D
            NumPy array.
        """
        if keep is not None and len(set(keep)) < len(self.names):
            return self._subset(keep).rebuild(
                replaced, row_order, reindex=reindex or row_order is not None
            )
        if base is not None:
            for j in range(base.shape[1]):
                if j not in replaced:
                    base[:, j] = (
                        self.source[:, j] if row_order is None else self.source[row_order, j]
                    )
            return base
        if self.kind == "numpy":
            source = self.source
            dtype = np.result_type(source.dtype, *(a.dtype for a in replaced.values()))
            out = np.empty(source.shape, dtype=dtype, order="C")
            for j in range(source.shape[1]):
                if j in replaced:
                    out[:, j] = replaced[j]
                elif row_order is None:
                    out[:, j] = source[:, j]
                else:
                    out[:, j] = source[row_order, j]
            return out
        if self.kind == "pandas":
            frame = self.source
            data: dict[Hashable, Any] = {}
            for name in self.names:
                if name in replaced:
                    data[name] = replaced[name]
                else:
                    column = frame[name]
                    column = column.copy() if row_order is None else column.take(row_order)
                    data[name] = column.array
            reordered = reindex or row_order is not None
            index = pd.RangeIndex(self.n_rows) if reordered else frame.index.copy()
            columns = frame.columns
            if len(self.names) < len(columns):  # a subset (the others left out)
                kept = set(self.names)
                columns = columns[[n in kept for n in columns]]
            return pd.DataFrame(data, index=index, columns=columns, copy=False)
        table = self.source
        arrays = []
        for name in self.names:
            if name in replaced:
                column = replaced[name]
                is_arrow = isinstance(column, (pa.Array, pa.ChunkedArray))
                arrays.append(column if is_arrow else pa.array(column))
            elif row_order is None:
                arrays.append(table.column(name))
            else:
                arrays.append(table.column(name).take(pa.array(row_order)))
        return pa.table(arrays, names=[str(n) for n in self.names])


@dataclass(frozen=True)
class _NumpySubset(TableData):
    """Some columns of a 2-D array, renumbered: output column ``i`` is input ``kept[i]``."""

    kept: list[Hashable]

    def rebuild(
        self,
        replaced: Mapping[Hashable, np.ndarray],
        row_order: np.ndarray | None,
        base: np.ndarray | None = None,
        *,
        reindex: bool = False,
        keep: Sequence[Hashable] | None = None,
    ) -> Any:
        columns = []
        for name in self.kept:
            if name in replaced:
                columns.append(replaced[name])
            else:
                column = self.source[:, name]
                columns.append(column if row_order is None else column[row_order])
        dtype = np.result_type(*(c.dtype for c in columns))
        out = np.empty((self.n_rows, len(columns)), dtype=dtype)
        for j, column in enumerate(columns):
            out[:, j] = column
        return out


def _categorical(codes: np.ndarray, labels: Sequence[Any]) -> pd.Categorical:
    try:  # codes built by dpfast are in range: skip pandas' scan (pandas >= 2.1)
        return pd.Categorical.from_codes(codes, categories=list(labels), validate=False)
    except TypeError:
        return pd.Categorical.from_codes(codes, categories=list(labels))


def build_table(kind: str, columns: Mapping[str, Any]) -> Any:
    """Build a new pandas DataFrame or Arrow table from named columns.

    Parameters
    ----------
    kind : {"pandas", "arrow"}
    columns : mapping
        Column name to a 1-D NumPy array, or to a pair ``(codes, labels)`` giving a
        categorical column (pandas ``Categorical``, Arrow dictionary) with integer codes
        in ``[0, len(labels))`` (``-1`` for missing) into ``labels``. The arrays are
        used without copying: pass arrays that nothing else holds (never a view of the
        caller's data).

    Returns
    -------
    pandas.DataFrame or pyarrow.Table
    """
    if kind == "pandas":
        data: dict[str, Any] = {}
        for name, column in columns.items():
            if isinstance(column, tuple):
                codes, labels = column
                data[name] = _categorical(codes, labels)
            else:
                data[name] = column
        n = len(next(iter(data.values()))) if data else 0
        # the arrays are new and owned by the result: no copy
        return pd.DataFrame(data, index=pd.RangeIndex(n), copy=False)
    arrays = []
    for column in columns.values():
        if isinstance(column, tuple):
            codes, labels = column
            codes = np.asarray(codes)
            if codes.dtype.kind != "i" or codes.dtype.itemsize > 4:
                codes = codes.astype(np.int32)
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(list(labels))))
        else:
            arrays.append(pa.array(column))
    return pa.table(arrays, names=[str(name) for name in columns])


def _check_names_as_text(names: Sequence[Hashable]) -> None:
    """Refuse column names that are distinct but read the same as text (``0`` and ``"0"``).

    Reports, noise keys and written files name columns by ``str(name)``, so two such
    columns would share a noise stream and a key of the report.
    """
    seen: dict[str, Hashable] = {}
    for name in names:
        text = str(name)
        if text in seen:
            raise ValueError(
                f"columns {seen[text]!r} and {name!r} have the same name as text ({text!r}); "
                "rename one, e.g. frame.columns = frame.columns.map(str) after making the "
                "names distinct"
            )
        seen[text] = name


def as_table_data(data: Any) -> TableData:
    """Wrap a pandas DataFrame, Arrow table or 2-D NumPy array without copying it.

    Raises
    ------
    TypeError
        If ``data`` is none of the supported kinds, or a NumPy array is not 2-D.
    ValueError
        If column names are duplicated, or equal once read as text (``0`` and ``"0"``).
    """
    if isinstance(data, pd.DataFrame):
        names = list(data.columns)
        if len(set(names)) != len(names):
            raise ValueError("the DataFrame has duplicate column names; rename them first")
        _check_names_as_text(names)
        return TableData("pandas", names, len(data), data)
    if isinstance(data, pa.Table):
        names = list(data.column_names)
        if len(set(names)) != len(names):
            raise ValueError("the Arrow table has duplicate column names; rename them first")
        return TableData("arrow", names, data.num_rows, data)
    if isinstance(data, pa.RecordBatch):
        return as_table_data(pa.Table.from_batches([data]))
    if isinstance(data, np.ndarray):
        if data.ndim != 2:
            raise TypeError(
                f"a NumPy input must be 2-D (rows x columns), got {data.ndim}-D; "
                "use array.reshape(-1, 1) for a single column"
            )
        return TableData("numpy", list(range(data.shape[1])), data.shape[0], data)
    raise TypeError(
        "data must be a pandas DataFrame, a pyarrow Table or a 2-D NumPy array, "
        f"got {type(data).__name__}"
    )


def output_format(path: str | os.PathLike[str]) -> str:
    """Return ``"parquet"`` or ``"csv"`` from a file name's extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in _FORMATS:
        raise ValueError(
            f"cannot tell the file format of {os.fspath(path)!r} from its extension "
            f"{suffix or '(none)'!r}; use .parquet or .csv"
        )
    return _FORMATS[suffix]


def read_table(path: str | os.PathLike[str]) -> pa.Table:
    """Read a Parquet or CSV file (chosen by extension) into an Arrow table.

    Raises
    ------
    ValueError
        If the extension is unknown, the file does not exist, or it cannot be parsed.
    """
    fmt = output_format(path)
    if not Path(path).is_file():
        raise ValueError(f"input file {os.fspath(path)!r} does not exist; check the path")
    try:
        if fmt == "parquet":
            return pq.read_table(path)
        return pa_csv.read_csv(path)
    except (pa.ArrowInvalid, OSError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"cannot read {os.fspath(path)!r} as {fmt}: {first_line}; check that the file "
            f"is valid {fmt}"
        ) from exc


def _atomic_write(path: str | os.PathLike[str], write: Any) -> None:
    """Write through ``write(tmp)`` to a temporary file, then rename it over ``path``.

    On any exception, ``KeyboardInterrupt`` and the command line's SIGTERM included (both
    ``BaseException``), the temporary file is removed and ``path`` is left as it was. No
    signal handler is installed here: that is the host program's choice.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise ValueError(f"output directory {str(directory)!r} does not exist; create it first")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        os.close(fd)
        write(tmp)
        # mkstemp makes the file owner-only; give it the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def write_table_atomic(table: Any, path: str | os.PathLike[str]) -> None:
    """Write a table (Arrow, pandas or 2-D NumPy) to Parquet or CSV, atomically.

    The data goes to a temporary file in the target directory, which is renamed over
    ``path`` only once complete; on any failure the temporary file is removed.
    """
    fmt = output_format(path)
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    elif isinstance(table, np.ndarray):
        table = pa.table({str(j): table[:, j] for j in range(table.shape[1])})

    def write(tmp: str) -> None:
        if fmt == "parquet":
            pq.write_table(table, tmp, compression="zstd")
        else:
            pa_csv.write_csv(table, tmp)

    _atomic_write(path, write)


def write_json_atomic(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n"

    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")

    _atomic_write(path, write)
