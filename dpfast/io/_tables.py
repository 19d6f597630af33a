"""Tables in memory: the caller's table as named 1-D columns, and back to its kind.

Release functions see every input through :class:`TableData`: a list of column names and
one 1-D NumPy array per column (zero-copy where the input allows it).
:meth:`TableData.rebuild` turns new column arrays back into the caller's kind of table.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import pyarrow as pa

from dpfast._validation import check_unique_names, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.io._categories import (
    arrow_labels,
    is_declared_dictionary,
    released_categories,
    same_dictionaries,
    text_categories,
)

Kind = Literal["pandas", "arrow", "numpy", "polars"]


@dataclass(frozen=True)
class TableData:
    """A table seen as named 1-D columns, plus what is needed to rebuild the caller's kind.

    Attributes
    ----------
    kind : {"pandas", "arrow", "numpy", "polars"}
        The kind of table a release gives back: the caller's (``"arrow"`` also for any
        other object read through the Arrow C stream interface).
    names : list
        Column names: strings for pandas, Arrow and polars, integer positions for NumPy.
    n_rows : int
        Number of rows.
    source : object
        The table the columns are read from, never modified: the caller's table, or the
        ``pyarrow.Table`` that shares its buffers (polars, Arrow C streams).
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
            if pa.types.is_dictionary(chunked.type):
                # ChunkedArray.to_numpy decodes a null's index as if it were a category
                chunked = chunked.cast(chunked.type.value_type)
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
        # int64 first: polars gives unsigned indices, which cannot hold the -1 of a null
        indices = indices.cast(pa.int64()).fill_null(-1)
        codes = np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        return codes, dictionary

    def declared_categories(self, name: Hashable) -> tuple[str, ...] | None:
        """Return the categories a column's type declares, in their order, if it declares them.

        A pandas ordered categorical, a polars ``Enum`` and an Arrow dictionary marked
        ordered declare their categories: a release keeps them if they hold its whole domain
        (:func:`released_categories`, :func:`check_declared`).
        Other columns (unordered categoricals and dictionaries, whose categories are often
        those that occur, in the order they occur; text) declare none: ``None``.
        """
        if self.kind == "pandas":
            dtype = self.source[name].dtype
            declared = None
            if isinstance(dtype, pd.CategoricalDtype) and dtype.ordered:
                declared = text_categories(list(dtype.categories))
            return None if declared is None else tuple(declared)
        if self.kind == "numpy":
            return None
        chunked = self.source.column(name)
        if not is_declared_dictionary(chunked.type):
            return None
        return tuple(same_dictionaries(name, [chunk.dictionary for chunk in chunked.chunks]))

    def categorical_output(self, name: Hashable, codes: np.ndarray, labels: Sequence[str]) -> Any:
        """Build a released categorical column of the same kind as the input column.

        ``codes`` index ``labels`` (the public domain). pandas categoricals and Arrow (and
        polars) dictionary columns give categoricals: of categories ``labels``, or, for a
        column that declares its categories (:meth:`declared_categories`; they must hold
        every label, :func:`check_declared`), of those categories, of the input's type
        (the ordered flag, an Arrow dictionary's index and value types). Other pandas columns
        give strings of their own dtype (``object``, ``str``, ``string[pyarrow]``, ...),
        other Arrow columns strings of their own Arrow type; NumPy gives objects.
        """
        if self.kind == "pandas":
            dtype = self.source[name].dtype
            if isinstance(dtype, pd.CategoricalDtype):
                categories, codes = released_categories(
                    codes, labels, self.declared_categories(name)
                )
                return pd.Categorical.from_codes(
                    codes, categories=categories, ordered=bool(dtype.ordered)
                )
            values = np.asarray(labels, dtype=object)[codes]
            if isinstance(dtype, pd.api.extensions.ExtensionDtype):
                return pd.array(values, dtype=dtype)
            return values
        if self.kind == "numpy":
            return np.asarray(labels, dtype=object)[codes]
        original = self.source.column(name).type
        return arrow_labels(codes, labels, original, self.declared_categories(name))

    def _subset(self, keep: Sequence[Hashable]) -> TableData:
        """Return the table (pandas, Arrow or polars) restricted to the columns ``keep``."""
        kept = [n for n in self.names if n in set(keep)]
        if self.kind == "pandas":  # no copy: rebuild reads only the kept columns
            return TableData("pandas", kept, self.n_rows, self.source)
        # (a _PolarsTable keeps its polars schema)
        return replace(self, names=kept, source=self.source.select(kept))

    def _array(
        self,
        columns: Sequence[Hashable],
        replaced: Mapping[Hashable, np.ndarray],
        row_order: np.ndarray | None,
    ) -> np.ndarray:
        """Return a new 2-D array of the NumPy input's ``columns``, in that order.

        Released columns come from ``replaced``; the others are copied, in ``row_order``.
        """
        source = self.source
        dtype = np.result_type(source.dtype, *(replaced[j].dtype for j in columns if j in replaced))
        out = np.empty((self.n_rows, len(columns)), dtype=dtype, order="C")
        for i, j in enumerate(columns):
            if j in replaced:
                out[:, i] = replaced[j]
            elif row_order is None:
                out[:, i] = source[:, j]
            else:
                out[:, i] = source[row_order, j]
        return out

    def has_row_labels(self) -> bool:
        """Whether the rows carry labels of their own: a pandas index other than the default.

        The default is an unnamed ``RangeIndex`` from 0 in steps of 1. A release that
        reorders the rows cannot keep such labels (they would show the new order).
        """
        if self.kind != "pandas":
            return False
        index = self.source.index
        default = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
        return not (default and index.name is None)

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
            The 2-D array from :meth:`output_columns`, completed in place (a replaced column
            not written into it is copied in).
        reindex : bool
            The rows were reordered (even if no column is copied): give a pandas result a
            fresh RangeIndex.
        keep : sequence, optional
            Output only these columns (in the input's order); default all.

        Returns
        -------
        object
            A pandas DataFrame (with a fresh RangeIndex when rows were reordered, since
            the original index would reveal the permutation; released columns keep the
            input's extension dtype, :func:`_with_pandas_dtype`), an Arrow table (the
            fields of the columns not released as they were), a polars DataFrame, or a
            2-D NumPy array.
        """
        if keep is not None and len(set(keep)) < len(self.names):
            if self.kind == "numpy":
                kept = set(keep)
                return self._array([n for n in self.names if n in kept], replaced, row_order)
            return self._subset(keep).rebuild(
                replaced, row_order, reindex=reindex or row_order is not None
            )
        if base is not None:
            for j in range(base.shape[1]):
                if j not in replaced:
                    base[:, j] = (
                        self.source[:, j] if row_order is None else self.source[row_order, j]
                    )
                elif not np.shares_memory(replaced[j], base[:, j]):  # in an array of its own
                    base[:, j] = replaced[j]
            return base
        if self.kind == "numpy":
            return self._array(self.names, replaced, row_order)
        if self.kind == "pandas":
            frame = self.source
            data: dict[Hashable, Any] = {}
            for name in self.names:
                if name in replaced:
                    data[name] = _with_pandas_dtype(replaced[name], frame[name].dtype)
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
        arrays: list[Any] = []
        fields = []
        for name in self.names:
            if name in replaced:
                released: Any = replaced[name]
                if not isinstance(released, (pa.Array, pa.ChunkedArray)):
                    released = pa.array(released)
                arrays.append(released)
                fields.append(pa.field(str(name), released.type))
            else:
                column = table.column(name)
                arrays.append(column if row_order is None else _take(column, row_order))
                # the input's field, with its metadata (polars marks its Enum columns there)
                fields.append(table.schema.field(name))
        return self._from_arrow(pa.Table.from_arrays(arrays, schema=pa.schema(fields)))

    def _from_arrow(self, table: pa.Table) -> Any:
        """Return a released Arrow table as the caller's kind (Arrow: as it is)."""
        return table


@dataclass(frozen=True)
class _PolarsTable(TableData):
    """A polars DataFrame, read through the Arrow table that shares its buffers.

    ``schema`` is the frame's polars schema, for the dtypes that Arrow does not carry back
    on its own (a released ``Enum`` or ``Categorical`` column).
    """

    schema: Mapping[str, Any]

    def _from_arrow(self, table: pa.Table) -> Any:
        polars = _polars_module()
        frame = polars.from_arrow(table)
        for name in frame.columns:
            wanted, got = self.schema.get(name), frame.schema[name]
            if isinstance(wanted, polars.Enum) and not isinstance(got, polars.Enum):
                column = table.column(name)
                if pa.types.is_dictionary(column.type):
                    # released as the taxonomy's leaves: an Enum of those (as pandas gets
                    # a Categorical whose categories are the leaves)
                    leaves = column.unify_dictionaries().chunk(0).dictionary.to_pylist()
                    wanted = polars.Enum(leaves)
                frame = _try_cast(polars, frame, name, wanted)
            elif isinstance(wanted, polars.Categorical) and got == polars.String:
                frame = _try_cast(polars, frame, name, wanted)
        return frame


def _try_cast(polars: Any, frame: Any, name: str, dtype: Any) -> Any:
    """Cast a polars column to ``dtype``, or leave it as it is where a value does not fit."""
    try:
        return frame.with_columns(polars.col(name).cast(dtype))
    except polars.exceptions.InvalidOperationError:  # a released value outside the Enum
        return frame


# view types that Arrow's take has no kernel for, and the types it takes them through
# (by name: pyarrow < 16 has no view types)
_TAKEN_AS = {"string_view": pa.large_string(), "binary_view": pa.large_binary()}


def _take(column: pa.ChunkedArray, row_order: np.ndarray) -> pa.ChunkedArray:
    """Return ``column`` in ``row_order`` (string and binary views, through their copies)."""
    indices = pa.array(row_order)
    try:
        return column.take(indices)
    except pa.ArrowNotImplementedError:
        if str(column.type) not in _TAKEN_AS:
            raise
        return column.cast(_TAKEN_AS[str(column.type)]).take(indices).cast(column.type)


def _polars_module() -> Any:
    import polars  # only reached for polars input, so polars is imported already

    return polars


def _is_polars(data: Any, name: str) -> bool:
    """Whether ``data`` is a ``polars.<name>``, without importing polars.

    An object of polars can only exist once polars is imported, so a program that does not
    use polars never pays for its import here.
    """
    module = sys.modules.get("polars")
    return module is not None and isinstance(data, getattr(module, name, ()))


def _with_pandas_dtype(values: Any, dtype: Any) -> Any:
    """Give a released NumPy column the input column's pandas extension dtype back.

    ``Int64``, ``Float64``, ``int64[pyarrow]``, ... when the values have that dtype's NumPy
    dtype (a protected column holds no missing value, so nothing is lost), or the same
    family's dtype of the values' type when the release widened it (``UInt8`` to
    ``UInt16``); other columns are returned as they are.
    """
    if not isinstance(values, np.ndarray) or not isinstance(
        dtype, pd.api.extensions.ExtensionDtype
    ):
        return values
    if isinstance(dtype, pd.CategoricalDtype):
        return values
    numpy_dtype = getattr(dtype, "numpy_dtype", None)
    if numpy_dtype is None:
        return values
    if values.dtype != numpy_dtype:
        dtype = _extension_of(dtype, values.dtype)
        if dtype is None:
            return values
    return pd.array(values, dtype=dtype, copy=False)


#: pandas' nullable numeric dtypes, by the name of their NumPy dtype.
_MASKED = {
    name: name.capitalize().replace("Uint", "UInt")
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
} | {"float32": "Float32", "float64": "Float64"}


def _extension_of(family: Any, dtype: np.dtype[Any]) -> Any:
    """Return the extension dtype of ``family``'s kind (nullable, or Arrow) for ``dtype``."""
    if isinstance(family, pd.ArrowDtype):
        return pd.ArrowDtype(pa.from_numpy_dtype(dtype))
    if str(family) in _MASKED.values() and dtype.name in _MASKED:
        return pd.api.types.pandas_dtype(_MASKED[dtype.name])
    return None


def _categorical(codes: np.ndarray, labels: Sequence[Any], ordered: bool) -> pd.Categorical:
    try:  # codes built by dpfast are in range: skip pandas' scan (pandas >= 2.1)
        return pd.Categorical.from_codes(
            codes, categories=list(labels), ordered=ordered, validate=False
        )
    except TypeError:
        return pd.Categorical.from_codes(codes, categories=list(labels), ordered=ordered)


def build_table(kind: str, columns: Mapping[Any, Any]) -> Any:
    """Build a new pandas DataFrame or Arrow table from named columns.

    Parameters
    ----------
    kind : {"pandas", "arrow", "polars"}
    columns : mapping
        Column name to a 1-D NumPy array, or to a tuple ``(codes, labels)`` or ``(codes,
        labels, ordered)`` giving a categorical column (pandas ``Categorical``, Arrow
        dictionary; ordered: a pandas ordered categorical, an Arrow dictionary marked
        ordered, a polars ``Enum``) with integer codes in ``[0, len(labels))`` (``-1``
        for missing) into ``labels``. The arrays are used without copying: pass arrays
        that nothing else holds (never a view of the caller's data).

    Returns
    -------
    pandas.DataFrame, pyarrow.Table or polars.DataFrame
    """
    if kind == "pandas":
        data: dict[Any, Any] = {}
        for name, column in columns.items():
            if isinstance(column, tuple):
                codes, labels, *ordered = column
                data[name] = _categorical(codes, labels, bool(ordered and ordered[0]))
            else:
                data[name] = column
        n = len(next(iter(data.values()))) if data else 0
        # the arrays are new and owned by the result: no copy
        return pd.DataFrame(data, index=pd.RangeIndex(n), copy=False)
    arrays = []
    enums = {}
    for name, column in columns.items():
        if isinstance(column, tuple):
            codes, labels, *ordered = column
            codes = np.asarray(codes)
            if codes.dtype.kind != "i" or codes.dtype.itemsize > 4:
                codes = codes.astype(np.int32)
            flag = bool(ordered and ordered[0])
            arrays.append(
                pa.DictionaryArray.from_arrays(
                    pa.array(codes), pa.array(list(labels)), ordered=flag
                )
            )
            if flag:
                enums[str(name)] = [str(label) for label in labels]
        else:
            arrays.append(pa.array(column))
    table = pa.table(arrays, names=[str(name) for name in columns])
    if kind != "polars":
        return table
    polars = _polars_module()
    frame = polars.from_arrow(table)
    return frame.with_columns(*(polars.col(n).cast(polars.Enum(c)) for n, c in enums.items()))


def _check_names_as_text(names: Sequence[Hashable]) -> None:
    """Refuse column names that are distinct but read the same as text (``0`` and ``"0"``).

    Reports, noise keys and written files name columns by ``str(name)``, so two such
    columns would share a noise stream and a key of the report.
    """
    seen: dict[str, Hashable] = {}
    for name in names:
        text = str(name)
        if text in seen:
            raise DPFastValueError(
                f"columns {quoted(seen[text])} and {quoted(name)} have the same name as text "
                f"({quoted(text)}); "
                "rename one, e.g. frame.columns = frame.columns.map(str) after making the "
                "names distinct"
            )
        seen[text] = name


def repeat_rows(data: Any, count: Hashable) -> Any:
    """Return ``data`` with each row repeated ``count``'s times, without that column.

    ``data`` is a table :func:`as_table_data` takes, ``count`` a column of non-negative
    integers; the other columns come back categorical (pandas ``Categorical``, Arrow
    dictionary), in a table of the same kind (:func:`build_table`); a column whose type
    declares its categories keeps them, in their order.
    """
    table = as_table_data(data)
    counts = np.asarray(table.column(count), dtype=np.int64)
    rows = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
    out: dict[Any, Any] = {}
    for name in table.names:
        if name != count:
            codes, labels = table.category_codes(name)
            out[name] = (codes[rows], labels, table.declared_categories(name) is not None)
    return build_table(table.kind, out)


def as_table_data(data: Any) -> TableData:
    """Wrap a table of any accepted kind without copying it.

    Accepted: a pandas DataFrame, a pyarrow Table or RecordBatch, a polars DataFrame, any
    other object with the Arrow C stream interface (``__arrow_c_stream__``: read with
    pyarrow, and given back as a pyarrow Table), or a 2-D NumPy array. polars and Arrow
    columns are read through Arrow, sharing the input's buffers where Arrow allows it.

    Raises
    ------
    TypeError
        If ``data`` is none of the supported kinds, or a NumPy array is not 2-D.
    ValueError
        If column names are duplicated, or equal once read as text (``0`` and ``"0"``).
    """
    if isinstance(data, pd.DataFrame):
        names = list(data.columns)
        check_unique_names(
            names, "the DataFrame", "rename the repeats, e.g. frame.columns = [...] with new names"
        )
        _check_names_as_text(names)
        return TableData("pandas", names, len(data), data)
    if isinstance(data, pa.Table):
        names = list(data.column_names)
        check_unique_names(
            names, "the Arrow table", "rename the repeats, e.g. table.rename_columns([...])"
        )
        return TableData("arrow", names, data.num_rows, data)
    if isinstance(data, pa.RecordBatch):
        return as_table_data(pa.Table.from_batches([data]))
    if isinstance(data, np.ndarray):
        if data.ndim != 2:
            raise DPFastTypeError(
                f"a NumPy input must be 2-D (rows x columns), got {data.ndim}-D; "
                "use array.reshape(-1, 1) for a single column"
            )
        return TableData("numpy", list(range(data.shape[1])), data.shape[0], data)
    if _is_polars(data, "DataFrame"):
        table = data.to_arrow()  # zero-copy for numeric columns without missing values
        return _PolarsTable("polars", list(table.column_names), data.height, table, data.schema)
    if _is_polars(data, "LazyFrame"):
        raise DPFastTypeError(
            "a polars LazyFrame is a query, not a table; pass frame.collect() (the released "
            "rows must all be known before any noise is drawn)"
        )
    if hasattr(data, "__arrow_c_stream__"):
        return as_table_data(_read_arrow_stream(data))
    raise DPFastTypeError(
        "data must be a pandas DataFrame, a pyarrow Table, a polars DataFrame, an object "
        "with the Arrow C stream interface (__arrow_c_stream__) or a 2-D NumPy array, "
        f"got {type(data).__name__}"
    )


def _read_arrow_stream(data: Any) -> pa.Table:
    """Read an object with ``__arrow_c_stream__`` into a pyarrow Table (no copy)."""
    from_stream = getattr(pa.RecordBatchReader, "from_stream", None)
    if from_stream is None:  # pragma: no cover - pyarrow < 15
        raise DPFastTypeError(
            f"reading a {type(data).__name__} through the Arrow C stream interface needs "
            f"pyarrow >= 15 (installed: {pa.__version__}); upgrade pyarrow, or pass a "
            "pyarrow Table"
        )
    try:
        return from_stream(data).read_all()
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DPFastTypeError(
            f"{type(data).__name__} has an Arrow C stream, but not of a table ({first_line}); "
            "pass a table: an object whose stream holds record batches of named columns"
        ) from exc
