"""``laplace_dp`` on Spark: cells noised on the executors, keyed by their rows' numbers.

The driver validates and plans as :func:`dpfast.laplace_dp` does; one pass per column
checks the values and counts what the private report counts; the release is then the
lazy frame of :meth:`SparkSource.map_batches`, each cell noised with the draw of nonce
``row`` of its column's key (docs/engines.md, "Spark").
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._release import NumericColumn, noise_source
from dpfast.accounting import Ledger, PrivateReport, Report
from dpfast.engines.outofcore import (
    BATCH_ROWS,
    DatasetRun,
    Progress,
    _numeric_values,
    counts_non_finite,
    laplace_arguments,
)
from dpfast.engines.spark._release import spark_of, spark_source
from dpfast.partitions.grid import Grid

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["laplace_dp_spark"]


def laplace_dp_spark(
    data: Any,
    *,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None = None,
    columns: Sequence[Hashable] | None = None,
    seed: int | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> tuple[DataFrame, Report, PrivateReport]:
    """Release a Spark DataFrame with ``laplace_dp``; the data is a lazy frame of the executors.

    The release of :func:`dpfast.laplace_dp` with ``unprotected="drop"`` for the table in
    the source's row order (:class:`SparkSource`: the frame's own order, or the files' for
    :meth:`SparkSource.from_parquet`): row ``i``'s cell of a column gets the draw of nonce
    ``i`` of the column's key. One pass per column checks the values and counts what the
    private report counts; the frame recomputes the same cells when it is used.

    Parameters
    ----------
    data : pyspark.sql.DataFrame or SparkSource
        The table to release.
    epsilon, bounds, integer, columns, seed
        As for :func:`dpfast.engines.outofcore.laplace_dp_dataset`.
    batch_rows : int
        Rows per batch given to an executor's function.
    progress : callable, optional
        ``progress(phase, done, total)``, called after each column's pass.

    Returns
    -------
    data : pyspark.sql.DataFrame
        The release, in row order, computed on the executors whenever it is used.
    report, private : Report, PrivateReport
        As the in-memory release's.
    """
    start = time.perf_counter()
    source = spark_source(data)
    released, report, private = noised_columns(
        source, epsilon, bounds, integer, columns, seed, batch_rows, progress
    )
    schema = ", ".join(f"`{c.name.replace('`', '``')}` {c.spark_type}" for c in released)
    frame = spark_of(source).map_batches(
        [c.name for c in released], int(batch_rows), _NoisedBatch(tuple(released)), schema
    )
    private.timings["total"] = time.perf_counter() - start
    return frame, report, private


@dataclass(frozen=True)
class _Cells:
    """One ``laplace_dp`` column: its grid, key and noise scale."""

    column: NumericColumn
    grid: Grid
    key: np.ndarray
    steps: int
    domain: tuple[float, float]

    @property
    def name(self) -> str:
        return str(self.column.name)

    @property
    def spark_type(self) -> str:
        return "long" if self.column.integer else "double"

    def noised(self, array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        """Return the released cells of rows ``first_row ...`` and the clamped count."""
        from dpfast.methods.laplace_dp import laplace_column

        values = _numeric_values(array, self.column, first_row)
        draws = noise.discrete_laplace(self.key, self.steps, values.shape[0], start=first_row)
        return laplace_column(values, self.grid, draws, self.column.integer)


def _count_cells(source: Any, cells: _Cells, batch_rows: int) -> tuple[int, int]:
    """One pass over a column: check it, and count its clamped inputs and outputs on a bound."""
    lower, upper = cells.domain

    def counted(array: pa.Array, first_row: int) -> tuple[int, int]:
        out, clamped = cells.noised(array, first_row)
        return clamped, int(np.count_nonzero(out <= lower) + np.count_nonzero(out >= upper))

    totals = [0, 0]
    for clamped, on_bound in source.map_column(cells.name, batch_rows, counted):
        totals[0] += clamped
        totals[1] += on_bound
    return totals[0], totals[1]


@dataclass(frozen=True)
class _NoisedBatch:
    """The executors' function of a ``laplace_dp`` frame: a batch's cells, noised."""

    columns: tuple[_Cells, ...]

    def __call__(self, batch: pa.RecordBatch, first_row: int) -> pa.RecordBatch:
        arrays = []
        for i, cells in enumerate(self.columns):
            out, _ = cells.noised(batch.column(i), first_row)
            arrays.append(pa.array(out.astype(np.int64) if cells.column.integer else out))
        return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in self.columns])


@counts_non_finite
def noised_columns(
    source: Any,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None,
    columns: Sequence[Hashable] | None,
    seed: int | None,
    batch_rows: int,
    progress: Progress | None,
) -> tuple[list[_Cells], Report, PrivateReport]:
    """Run ``laplace_dp``'s passes over a cluster's source; return what its tasks need.

    The noised columns' state in the source's column order, and the public and private
    reports. Shared by the Spark and Dask releases, which differ only in their tasks.
    """
    from dpfast.methods import laplace_dp as method

    run = DatasetRun("laplace_dp", None, progress, dataset=source)
    run.policy = "drop"
    with run.phase("validate"):
        epsilon, seed, protected, domains, derived = laplace_arguments(
            source, epsilon, bounds, integer, columns, seed
        )
    ledger = Ledger(epsilon)
    cells, entries = [], []
    for column in protected:
        grid, steps, entry = method._plan(
            column, domains[column.name], epsilon, len(protected), source.n_rows
        )
        ledger.plan(entry)
        entries.append(entry)
        key = noise_source(seed).key("laplace_dp", "cell-noise", str(column.name))
        cells.append(_Cells(column, grid, key, steps, domains[column.name]))
    with run.phase("noise"):
        for i, (cell, entry) in enumerate(zip(cells, entries, strict=True)):
            clamped, on_bound = _count_cells(source, cell, int(batch_rows))
            ledger.spend(entry)
            run.released[cell.column.name] = np.empty(0)
            run.clamped[str(cell.column.name)] = clamped
            run.on_bound[str(cell.column.name)] = on_bound
            run.tick("noise", i + 1, len(cells))
    report, private = run.reports(
        parameters=method._parameters(epsilon, domains, derived),
        guarantee=method._guarantee(epsilon, protected, derived),
        ledger=ledger,
        seed=seed,
        sampler=noise.SAMPLER_NAME,
        domains=domains,
    )
    ordered = {str(c.column.name): c for c in cells}
    return [ordered[name] for name in source.names if name in ordered], report, private
