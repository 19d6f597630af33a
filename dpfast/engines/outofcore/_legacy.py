"""What the out-of-core releases of the methods not yet written over the engine protocol share.

Transitional: :class:`DatasetRun` (a report builder over a column source), the scratch
columns of a release, and its publication; each goes once its last method is written
over :class:`~dpfast.engines.base.Engine`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpfast._release import NumericColumn, TableRun
from dpfast._validation import as_numeric_column, non_finite_error
from dpfast.accounting import Report
from dpfast.engines.base import Progress
from dpfast.engines.outofcore._output import FILE_ROWS, ScratchColumn, publish_at, scratch_beside
from dpfast.engines.outofcore._passes import BATCH_ROWS, NonFiniteValue
from dpfast.engines.outofcore._passes import Limits as _Limits
from dpfast.engines.outofcore._passes import numeric_values as _numeric_values
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.io import WRITE_ROWS

__all__ = [
    "BATCH_ROWS",
    "FILE_ROWS",
    "DatasetRun",
    "NonFiniteValue",
    "Progress",
    "ScratchColumn",
    "_Limits",
    "_numeric_values",
    "_publish",
    "_scratch_beside",
    "_write_and_publish",
    "coded_scratch",
    "counts_non_finite",
]

_publish = publish_at
_scratch_beside = scratch_beside

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class DatasetRun(TableRun):
    """A :class:`Run` over a Parquet dataset: the report's counts come from the passes."""

    dataset: ColumnSource | None = None
    on_bound: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        pass  # no in-memory table

    def input_rows(self) -> int:
        """Return the number of rows of the dataset."""
        assert self.dataset is not None
        return self.dataset.n_rows

    def unprotected(self) -> list[str]:
        """Return the dataset's columns that the release does not protect."""
        assert self.dataset is not None
        return [n for n in self.dataset.names if n not in self.released]

    def clamped_output(self, domains: Mapping[Hashable, tuple[float, float]]) -> dict[str, int]:
        """Return the released values on a bound, counted while the columns were written."""
        return {str(n): self.on_bound[str(n)] for n in domains if str(n) in self.on_bound}


def counts_non_finite(function: Callable[P, R]) -> Callable[P, R]:
    """Give a release's :class:`NonFiniteValue` the in-memory error: count, first row, kind.

    Only a failing release pays the counting pass (over the column named by the error,
    after the release has removed its scratch files). The wrapped function takes its
    source as ``dataset`` or ``source``, and optionally ``batch_rows``.
    """
    signature = inspect.signature(function)

    @functools.wraps(function)
    def counted(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except NonFiniteValue as exc:
            from dpfast.engines.outofcore._rows import column_stats

            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            found = bound.arguments.get("dataset", bound.arguments.get("source"))
            rows = int(bound.arguments.get("batch_rows", BATCH_ROWS))
            stats = column_stats(cast(ColumnSource, found), exc.column, rows)
            if not stats.non_finite:
                raise
            nan = stats.first_kind == "NaN or missing"
            error = non_finite_error(exc.column, stats.non_finite, stats.first_bad, nan)
            raise error from None

    return counted


def _numeric_columns(
    dataset: ColumnSource,
    names: Sequence[Hashable],
    integer: Mapping[Hashable, bool] | None,
    categorical: bool = True,
) -> list[NumericColumn]:
    """Return the protected numeric columns, declared integer or float (default: Arrow type).

    A column of another type gets the in-memory method's error: with a taxonomy hint
    where the method protects ``categorical`` columns, else that of
    :func:`~dpfast._validation.as_numeric_column`.
    """
    numeric = []
    for name in names:
        arrow_type = dataset.schema.field(str(name)).type
        if not (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)):
            _refuse_as_in_memory(name, arrow_type, categorical)
            raise TypeError(
                f"column {name!r} must be numeric to be protected, got {arrow_type}; give it a "
                '"taxonomy" in the schema to protect it as a categorical column'
            )
        declared = pa.types.is_integer(arrow_type) if integer is None else integer.get(name)
        # an integer column keeps its own type, as in memory (values rounded, in bounds)
        kept = pa.types.is_integer(arrow_type) and declared
        dtype = np.dtype(
            arrow_type.to_pandas_dtype() if kept else np.int64 if declared else np.float64
        )
        numeric.append(NumericColumn(name, np.empty(0), bool(declared), dtype))
    return numeric


def _refuse_as_in_memory(name: Hashable, arrow_type: pa.DataType, categorical: bool) -> None:
    """Raise the in-memory error of a column of ``arrow_type`` if NumPy refuses it too."""
    from dpfast._release.columns import not_numeric_error

    dtype = np.dtype(pa.array([], arrow_type).to_numpy(zero_copy_only=False).dtype)
    if dtype.kind == "O" or not (np.issubdtype(dtype, np.number) or dtype.kind == "b"):
        if categorical:
            raise not_numeric_error(name, dtype)
        as_numeric_column(np.empty(0, dtype=dtype), name)


# The functions that a cluster's tasks run are module-level classes, not closures: a
# closure is pickled by value, with a scan of every loaded module, once per task (about
# a millisecond each, thousands of tasks per release); these pickle by reference.


def _scratch_name(name: Hashable) -> str:
    """Return a column's scratch file name: a digest, safe whatever the column's name."""
    return f"column-{hashlib.sha256(str(name).encode('utf-8')).hexdigest()[:32]}.bin"


def coded_scratch(scratch: Path, name: Hashable, labels: pa.Array) -> ScratchColumn:
    """Return a column written as int64 codes into ``labels`` (e.g. a taxonomy's domain)."""
    path = scratch / _scratch_name(name)

    def read(first: int, count: int) -> pa.Array:
        codes = np.fromfile(path, np.int64, count, offset=first * 8)
        return labels.take(pa.array(codes))

    return ScratchColumn(str(name), labels.type, read, dictionary=True)


def _stitch(
    scratch: Path, target: Path, columns: Sequence[ScratchColumn], n: int, run: DatasetRun
) -> Path:
    """Write the scratch columns row range by row range as Parquet; return the temporary path."""
    schema = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
    single = target.suffix == ".parquet"
    out = scratch / ("release.parquet" if single else "release")
    if not single:
        out.mkdir()
    rows_per_file = n if single else FILE_ROWS
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
            run.tick(f"writing {target.name}", first + count, n)
    finally:
        if writer is not None:
            writer.close()
    return out


def _write_and_publish(
    scratch: Path,
    target: Path,
    columns: Sequence[ScratchColumn],
    run: DatasetRun,
    report: Report,
    before_publish: Callable[[Report], None] | None,
    after_publish: Callable[[], None] | None,
) -> None:
    """Stitch the scratch columns into the output, then rename it into place between hooks."""
    assert run.dataset is not None
    with run.phase("write"):
        written = _stitch(scratch, target, columns, run.dataset.n_rows, run)
    if before_publish is not None:
        before_publish(report)
    publish_at(written, target)
    if after_publish is not None:
        after_publish()
