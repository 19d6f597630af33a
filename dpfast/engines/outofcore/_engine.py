"""The out-of-core engine: the protocol over a column source, within a memory limit."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import pyarrow as pa

from dpfast._validation import (
    as_numeric_column,
    check_unique_names,
    non_finite_error,
    not_numeric_error,
    option,
    quoted,
)
from dpfast.dataflow.flow import (
    Dataflow,
    Limits,
    NonFiniteValue,
    column_stats,
    declared_dictionary,
)
from dpfast.dataflow.row_outputs import FileRows, Rows
from dpfast.dataflow.sink import RowSink
from dpfast.dataflow.source import Source, Staged
from dpfast.dataflow.values import (
    CategoricalColumn,
    NumericColumn,
    Opening,
    Progress,
    ProtectedColumn,
    column_threads,
    own_dtype,
)
from dpfast.engines.base import Engine, in_threads
from dpfast.engines.outofcore._computed import repeated_columns, table_columns
from dpfast.engines.outofcore._csv import CsvSource
from dpfast.engines.outofcore._memory import check_memory_limit, most_columns
from dpfast.engines.outofcore._output import Output
from dpfast.engines.outofcore._sources import ArrowSource, ColumnSource, ParquetDataset
from dpfast.engines.outofcore._work import CountedSource, Work
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.io import (
    build_table,
    check_declared,
    is_text_path,
)
from dpfast.taxonomy import Taxonomy

__all__ = [
    "BATCH_ROWS",
    "DEFAULT_MEMORY",
    "OutOfCoreEngine",
    "refuse_text_output",
    "source_of",
]

T = TypeVar("T")
R = TypeVar("R")

#: The working memory of a release when ``memory_limit`` is not given.
DEFAULT_MEMORY = 4 * 2**30

#: Rows per batch read from Parquet.
BATCH_ROWS = 1 << 20


def source_of(data: Any) -> ColumnSource:
    """Return ``data`` as a column source: a path or glob, a pyarrow dataset, a table.

    Parquet (a file, a directory, a glob or a ``pyarrow.dataset`` of its files) is opened by
    its footers, rows numbered by file in sorted path order, then by row; a source is taken
    as it is; an in-memory table (pandas, Arrow, polars) is read a batch at a time as Arrow.
    """
    if isinstance(data, Source):
        return data
    if isinstance(data, (str, os.PathLike)):
        return ParquetDataset.open(data)
    module = type(data).__module__
    if module.startswith("pyarrow._dataset") or module.startswith("pyarrow.dataset"):
        files = getattr(data, "files", None)
        if not files or getattr(getattr(data, "format", None), "default_extname", "") != "parquet":
            raise DPFastTypeError(
                "a pyarrow dataset is released out of core from its Parquet files: open it "
                "with pyarrow.dataset.dataset(path, format='parquet'), or pass the path"
            )
        return ParquetDataset.from_files(files)
    from dpfast.io import as_table_data

    table = as_table_data(data)
    if table.kind == "numpy":
        raise DPFastTypeError(
            f"{option('engine', 'outofcore')} reads named columns: give a table (pandas, "
            "Arrow, polars) or a Parquet path, not a NumPy array"
        )
    source = table.source
    if table.kind == "pandas":
        source = pa.Table.from_pandas(source, preserve_index=False)
    return ArrowSource(source)


class OutOfCoreEngine(RowSink, Engine):
    """A table read in batches from a column source, its release written to ``output``.

    Every pass reads one column batch by batch; a column's sort is cut into ranges that
    fit ``memory_limit`` (shared by the columns that run at once); the released columns
    go to scratch files beside ``output`` and are published in one rename.
    """

    #: Whether the output is always a dataset directory, whatever its name.
    writes_dataset: ClassVar[bool] = False

    name = "outofcore"

    def __init__(
        self,
        source: ColumnSource,
        output: str | os.PathLike[str],
        *,
        memory_limit: int = DEFAULT_MEMORY,
        batch_rows: int = BATCH_ROWS,
        progress: Progress | None = None,
    ) -> None:
        check_unique_names(
            source.names,
            "the input",
            "rename the repeats (a Spark frame: frame.toDF(*names); Dask: frame.columns = names)",
        )
        self.counters = Work()
        self.source = CountedSource(source, self.counters)
        self.limits = Limits(check_memory_limit(int(memory_limit)), int(batch_rows))
        self.progress = progress
        self.out = Output(
            self.source, Path(output), self._tick, self.counters, dataset=self.writes_dataset
        )
        self._local = threading.local()
        self._owned: CsvSource | None = None  # CSV input converted when the engine opened

    @classmethod
    def open(
        cls,
        data: Any,
        opening: Opening,
        *,
        batch_rows: int = BATCH_ROWS,
    ) -> OutOfCoreEngine:
        """Open a release of ``data`` read in batches; it is written to ``output``.

        A CSV or TSV file (or a glob of them) is converted to Parquet first, beside
        ``output`` (:class:`~dpfast.engines.outofcore._csv.CsvSource`).
        """
        opening.refuse_comparisons("out of core")
        output = opening.output
        if output is None and opening.reads_only:  # a forecast: nothing is ever written
            output = os.devnull
        if output is None:
            raise DPFastValueError(
                f"a release out of core is written, not held: pass {option('output')} (a "
                "directory of Parquet files, or a .parquet file)"
            )
        refuse_text_output(output)
        memory = DEFAULT_MEMORY if opening.memory_limit is None else opening.memory_limit
        converted = None
        if is_text_path(data):  # its Parquet conversion, removed when the engine closes
            beside = opening.output or os.path.join(tempfile.gettempdir(), "forecast")
            converted = CsvSource.open(data, beside, memory, progress=opening.progress)
        try:
            engine = cls(
                converted or source_of(data),
                output,
                memory_limit=memory,
                batch_rows=batch_rows,
                progress=opening.progress,
            )
        except BaseException:
            if converted is not None:
                converted.close()
            raise
        engine._owned = converted
        return engine

    # -- the input ----------------------------------------------------------------------

    @property
    def n_rows(self) -> int:
        return int(self.source.n_rows)

    @property
    def names(self) -> list[Hashable]:
        return list(self.source.names)

    def numeric_columns(
        self,
        names: Sequence[Hashable],
        *,
        integer: Mapping[Hashable, bool] | None = None,
        categorical: bool = True,
    ) -> list[NumericColumn]:
        return [self._numeric(name, integer, categorical) for name in names]

    def _numeric(
        self, name: Hashable, integer: Mapping[Hashable, bool] | None, categorical: bool
    ) -> NumericColumn:
        """Read a protected numeric column, declared integer or float (default: its Arrow type)."""
        arrow_type = self.source.schema.field(str(name)).type
        if not (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)):
            dtype = np.dtype(pa.array([], arrow_type).to_numpy(zero_copy_only=False).dtype)
            if dtype.kind in "mM":
                raise not_numeric_error(name, dtype)
            if dtype.kind == "O" or not (np.issubdtype(dtype, np.number) or dtype.kind == "b"):
                if categorical:
                    raise not_numeric_error(name, dtype)
                as_numeric_column(np.empty(0, dtype=dtype), name)
            raise DPFastTypeError(
                f"column {quoted(name)} must be numeric to be protected, got {arrow_type}; give it "
                "a "
                '"taxonomy" in the schema to protect it as a categorical column'
            )
        declared = pa.types.is_integer(arrow_type) if integer is None else integer.get(name)
        # the column keeps its own type, as in memory (values rounded, in bounds)
        dtype = own_dtype(np.dtype(arrow_type.to_pandas_dtype()), bool(declared))
        return NumericColumn(name, np.empty(0), bool(declared), dtype)

    def categorical_columns(
        self, taxonomies: Mapping[Hashable, Taxonomy]
    ) -> list[CategoricalColumn]:
        empty = np.empty(0, dtype=np.int64)
        return [
            CategoricalColumn(
                name,
                empty,
                taxonomy,
                check_declared(name, self._declared(name), taxonomy.domain),
            )
            for name, taxonomy in taxonomies.items()
        ]

    def _declared(self, name: Hashable) -> tuple[str, ...] | None:
        """Return the categories column ``name``'s type declares (one pass over its batches)."""
        return declared_dictionary(self.source, name, self.limits.batch_rows)

    # -- work over columns --------------------------------------------------------------

    def column_workers(self, n_columns: int, n_threads: int | None, held_bytes: int) -> int:
        """How many columns run at once: ``n_threads``, else one per core."""
        return column_threads(n_threads, n_columns or 1)

    def each_column(
        self,
        columns: Sequence[T],
        work: Callable[[T], R],
        *,
        n_threads: int | None = None,
        held_bytes: int = 0,
    ) -> Iterator[tuple[T, R]]:
        workers = self._workers(len(columns), n_threads, held_bytes)
        share = Limits(self.limits.memory // workers, self.limits.batch_rows)
        if held_bytes > share.memory:
            raise DPFastValueError(
                f"a column's release holds {held_bytes:,} bytes, more than its share of the "
                f"memory limit ({share.memory:,} bytes); raise {option('memory_limit')}"
            )

        def shared(column: T) -> R:
            self._local.limits = share
            try:
                return work(column)
            finally:
                self._local.limits = None

        yield from in_threads(columns, shared, workers)

    def column_memory(self, n_columns: int, *, n_threads: int | None, held_bytes: int) -> int:
        """Bytes of the memory limit each column gets when ``n_columns`` run at once."""
        return self.limits.memory // self._workers(n_columns, n_threads, held_bytes)

    def _workers(self, n_columns: int, n_threads: int | None, held_bytes: int) -> int:
        """:meth:`column_workers`, as many as the limit gives the least share each."""
        workers = self.column_workers(n_columns, n_threads, held_bytes)
        return min(workers, most_columns(self.limits.memory))

    def _limits(self) -> Limits:
        """Return the memory this thread may use: its column's share, or the whole limit."""
        return getattr(self._local, "limits", None) or self.limits

    def _tick(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(phase, done, total)

    # -- passes -------------------------------------------------------------------------

    @property
    def dataflow(self) -> Dataflow:
        return Dataflow(
            self.source,
            self._limits(),
            self._tick,
            scratch=self._scratch,
            task_limits=self.sort_limits(),
        )

    def _scratch(self) -> Path:
        return self.out.directory

    def sort_limits(self) -> Limits | None:
        """Return the memory of each sort task on a cluster's workers (``None``: this process's)."""
        return None

    # -- outputs ------------------------------------------------------------------------

    def rows(self, name: Hashable, in_place: bool) -> AbstractContextManager[Rows]:
        """Return a column's scratch file, 8 bytes a row (float64 or int64 codes)."""
        return FileRows(self.out.path(name))

    def keep_column(
        self,
        column: ProtectedColumn,
        rows: Rows,
        *,
        order: np.ndarray | None = None,
        destination: np.ndarray | None = None,
    ) -> None:
        self.out.released(column)

    def keep_codes(self, name: Hashable, domain: Sequence[Any], rows: Rows) -> None:
        self.out.coded(name, domain, self._declared(name))

    def counted(self, rows: Rows) -> Rows:
        """Count an output pass over the permutation's stream for each part put."""
        return _PassCounted(rows, self.counters, self.n_rows)

    def starting(self, name: Hashable, steps: int) -> None:
        self._tick(f"column {name}", 0, steps)

    def copy_columns(self, names: Sequence[Hashable], key: np.ndarray | None) -> None:
        for i, name in enumerate(names):
            self._tick("unprotected columns", i, len(names))
            self.out.copied(str(name), key, self.limits, self._declared(name))

    def computed(self, columns: Mapping[Hashable, Any], repeat: Hashable | None) -> None:
        self._write_table(build_table("arrow", columns), repeat)

    def _write_table(self, table: pa.Table, repeat: Hashable | None) -> None:
        """Write a computed table (built as Arrow) whole, or each row ``repeat`` times."""
        made = table_columns(table) if repeat is None else repeated_columns(table, str(repeat))
        self.out.table(*made)

    # -- the end ------------------------------------------------------------------------

    def publish(self, report: Any, *, reindex: bool) -> Staged:
        return self.out.publish(_dataset).counted(self.counters.to_dict())

    def close(self) -> None:
        self.out.close()
        if self._owned is not None:
            self._owned.close()

    def explain(self, error: Exception) -> BaseException:
        """Report a bad value found in a pass: the in-memory error, which counts them all.

        Only a failing release pays the counting pass (after its scratch is removed).
        """
        if not isinstance(error, NonFiniteValue):
            return error
        self.out.close()
        stats = column_stats(self.source, error.column, self.limits.batch_rows)
        if not stats.non_finite:
            return error
        nan = stats.first_kind == "NaN or missing"
        return non_finite_error(error.column, stats.non_finite, stats.first_bad, nan)


@dataclass(frozen=True)
class _PassCounted:
    """Rows put part by part of a permutation, each part one output pass over its stream."""

    rows: Rows
    work: Work
    n_rows: int

    def put(self, first_row: int, values: np.ndarray) -> None:
        self.rows.put(first_row, values)
        self.work.output_pass(self.n_rows, values.shape[0])


def _dataset(target: Path) -> Any:
    """Return the published release as a Parquet dataset."""
    import pyarrow.dataset as ds

    return ds.dataset(str(target), format="parquet")


def refuse_text_output(output: str | os.PathLike[str]) -> None:
    """Refuse an ``output`` named as a text file: a release read in passes writes Parquet."""
    name = Path(output).name.lower()
    if name.endswith((".csv", ".tsv", ".csv.gz", ".tsv.gz", ".txt")):
        raise DPFastValueError(
            f"a release out of core is written as Parquet, but {os.fspath(output)!r} names a "
            "text file; name it .parquet (one file) or give a directory, or release the "
            "table in memory to write text"
        )
