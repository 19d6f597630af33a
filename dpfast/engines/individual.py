"""``individual_ranking`` out of core: exact float group means, rows in their order.

The release of :func:`dpfast.individual_ranking` (not differentially private): each
protected column's rows are ranked by (value, row) with :class:`~.ranks.RankPasses` on
order-preserving ``uint64`` images of the floats, every rank group's sum is added up in
rank order, one value at a time (the float additions of the in-memory kernel, in its
order, so the means are the same bit for bit), and every row gets its group's mean
(rounded for integer columns) at its own place. The other columns are kept in their rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from dpfast._kernels import outofcore as kernels
from dpfast._release import NumericColumn
from dpfast._validation import check_columns, check_k_anonymity
from dpfast.accounting import PrivateReport, Report
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.linked import _tag, place_ranked, unprotected_scratch
from dpfast.engines.outofcore._legacy import (
    BATCH_ROWS,
    DatasetRun,
    Progress,
    ScratchColumn,
    _Limits,
    _numeric_values,
    _refuse_as_in_memory,
    _scratch_beside,
    _scratch_name,
    _write_and_publish,
    counts_non_finite,
)
from dpfast.engines.outofcore._ranks import RankPasses, float_keys, float_values


@counts_non_finite
def individual_ranking_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    integer: Mapping[Hashable, bool] | None = None,
    memory_limit: int,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Callable[[Report], None] | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with ``individual_ranking`` into Parquet at ``output``.

    The release of :func:`dpfast.individual_ranking` for the same table, within
    ``memory_limit``. ``integer`` maps declared columns to whether they are integer
    (rounded, written as int64, as the CLI's schema casts them); any other column of an
    Arrow integer type is integer and keeps its type. The other arguments as for
    :func:`dpfast.engines.outofcore.ir_dp_dataset`.
    """
    start = time.perf_counter()
    run = DatasetRun("individual_ranking", None, progress, dataset=dataset)
    limits = _Limits(int(memory_limit), int(batch_rows))
    n = dataset.n_rows
    with run.phase("validate"):
        k = check_k_anonymity(k, n, "individual ranking")
        protected = _columns(dataset, check_columns(columns, dataset.names), integer)
        needed = (n // k) * 8 * 3
        if needed > limits.memory:
            raise ValueError(
                f"{n:,} rows with k={k} make {n // k:,} rank groups per column, whose "
                f"means need {needed:,} bytes, more than the memory limit; raise the "
                "memory limit or k"
            )
    target = Path(output)
    with _scratch_beside(target) as scratch:
        with run.phase("microaggregation"):
            for i, column in enumerate(protected):
                means = _column_means(dataset, column, k, limits, scratch, run)
                place_ranked(
                    scratch, column.name, _ranked(scratch, column), means, k, None, n, limits
                )
                run.released[column.name] = np.empty(0)
                run.tick("microaggregation", i + 1, len(protected))
        copied = unprotected_scratch(dataset, scratch, run, None, None, limits)
        report, private = run.reports(
            parameters={"k": k, "remainder": "last group"},
            guarantee=(
                "NOT differentially private: values are replaced by exact group means of the "
                f"original data (groups of at least {k} per column), with no noise.",
                "none",
            ),
        )
        made = {str(c.name): _means_scratch(scratch, c) for c in protected} | copied
        written = [made[name] for name in dataset.names if name in made]
        _write_and_publish(scratch, target, written, run, report, before_publish, after_publish)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def _columns(
    dataset: ColumnSource, names: Sequence[Hashable], integer: Mapping[Hashable, bool] | None
) -> list[NumericColumn]:
    """Return the protected columns, with the dtype the in-memory release gives them."""
    found = []
    for name in names:
        arrow_type = dataset.schema.field(str(name)).type
        if not (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)):
            _refuse_as_in_memory(name, arrow_type, categorical=False)
            raise TypeError(
                f"column {name!r} must be numeric to be aggregated, got {arrow_type}; leave "
                "it out of the columns"
            )
        if integer is None or name not in integer:
            declared = pa.types.is_integer(arrow_type)
            dtype = np.dtype(arrow_type.to_pandas_dtype()) if declared else np.dtype(np.float64)
        else:  # a declared type: the schema casts integer columns to int64
            declared = bool(integer[name])
            dtype = np.dtype(np.int64 if declared else np.float64)
        found.append(NumericColumn(name, np.empty(0), declared, dtype))
    return found


def _ranked(scratch: Path, column: NumericColumn) -> Path:
    return scratch / (_tag(column.name, "ranked") + ".bin")


def _column_means(
    dataset: ColumnSource,
    column: NumericColumn,
    k: int,
    limits: _Limits,
    scratch: Path,
    run: DatasetRun,
) -> np.ndarray:
    """Rank a column's rows into its ranked file; return every rank group's mean."""
    n = dataset.n_rows
    sums = np.zeros(n // k, dtype=np.float64)
    passes = [0]

    def tick() -> None:
        passes[0] += 1
        run.tick(f"column {column.name}", passes[0], passes[0] + 1)

    def keys(array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        return float_keys(_numeric_values(array, column, first_row)), 0

    def on_sorted(sorted_keys: np.ndarray, first_rank: int) -> None:
        kernels.add_float_group_sums(float_values(sorted_keys), first_rank, k, sums)

    def on_run(key: int, count: int, first_rank: int) -> None:
        value = float(float_values(np.array([key], dtype=np.uint64))[0])
        kernels.add_float_run(value, count, first_rank, k, sums)

    ranks = RankPasses(dataset, str(column.name), keys, limits.batch_rows, limits.memory, tick)
    fd = os.open(_ranked(scratch, column), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        ranks.rank(2**64, fd, on_sorted, on_run)
    finally:
        os.close(fd)
    sizes = np.full(sums.shape[0], k, dtype=np.int64)
    sizes[-1] = n - k * (sums.shape[0] - 1)
    means = sums / sizes
    return np.rint(means) if column.integer else means


def _means_scratch(scratch: Path, column: NumericColumn) -> ScratchColumn:
    """Return a column of means written as float64, in the column's own dtype."""
    path = scratch / _scratch_name(column.name)
    arrow_type = pa.from_numpy_dtype(column.dtype)

    def read(first: int, count: int) -> pa.Array:
        values = np.fromfile(path, np.float64, count, offset=first * 8)
        return pa.array(column.restore_dtype(values), arrow_type)

    return ScratchColumn(str(column.name), arrow_type, read)
