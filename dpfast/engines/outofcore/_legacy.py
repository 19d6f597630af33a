"""Out-of-core ``ir_dp`` over a Parquet dataset, within a memory limit (docs/engines.md).

The release is the one :func:`dpfast.ir_dp` gives for the same table, seed and arguments
(``linkage="columns"``, ``unprotected="drop"``): the same plan and ledger, the same keys,
and the same kernels, applied part by part.

Per protected column:

1. **Group sums.** A numeric column is quantised to its public grid batch by batch. When
   it holds more values than fit in the memory limit, a histogram pass over the top bits
   of the grid values cuts the grid into ranges that fit; each range is collected in one
   more pass, sorted and added to the groups' exact integer sums from its first global
   rank (a range holding a single grid value is added without sorting). Integer sums do
   not depend on how the column was cut. A categorical column needs only its count per
   taxonomy rank.
2. **Group values.** The noisy centroid (or the exponential-mechanism choice) of every
   rank group, drawn from the same keys as in memory: ``n // k`` values.
3. **Output order.** Output row ``r`` gets the value of the group of rank ``order[r]``,
   where ``order`` is the column's bucketed permutation, computed bucket range by bucket
   range (:func:`dpfast.noise.permutation_part_groups`). The column is written to a scratch
   file in output order.

The scratch columns are then stitched row range by row range into Parquet, written to a
temporary name and renamed into place: a failed or interrupted run leaves no output.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpfast import noise
from dpfast._kernels import outofcore as outofcore_kernels
from dpfast._kernels import ranking
from dpfast._release import (
    CategoricalColumn,
    NumericColumn,
    TableRun,
    column_threads,
    noise_source,
    warn_unproven,
)
from dpfast._validation import (
    as_numeric_column,
    check_bounds,
    check_choice,
    check_columns,
    check_epsilon,
    check_k,
    check_nonempty,
    check_seed,
    non_finite_error,
)
from dpfast.accounting import Ledger, PrivateReport, Report
from dpfast.engines.outofcore._files import append_array, write_at
from dpfast.engines.outofcore._ranges import HISTOGRAM_BITS, cut_ranges, refined_shift
from dpfast.engines.outofcore._sorted import GroupSums, Ranges, add_parts
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.io import WRITE_ROWS
from dpfast.methods.ir_dp import (
    Sensitivity,
    _Arguments,
    _guarantee,
    _parameters,
    _plan,
    _sampler,
)
from dpfast.methods.ir_dp._categorical import group_codes
from dpfast.partitions.grid import Grid
from dpfast.taxonomy import Taxonomy, as_taxonomy

P = ParamSpec("P")
R = TypeVar("R")

Progress = Callable[[str, int, int], None]

#: Rows per batch read from Parquet.
BATCH_ROWS = 1 << 20
#: Rows per file of a Parquet dataset output.
FILE_ROWS = 8 * WRITE_ROWS
#: Bytes of working memory per value collected for sorting (the values, the sort's
#: scratch, the pieces before they are joined, and slack).
_BYTES_PER_SORTED_VALUE = 32
#: Bytes per row of a part of the output order (the order and the released values).
_BYTES_PER_ORDERED_ROW = 24


@dataclass(frozen=True)
class _Limits:
    """What fits in the memory limit: values per sorted range, rows per order part."""

    memory: int
    batch_rows: int

    @property
    def sorted_values(self) -> int:
        return max(1024, self.memory // _BYTES_PER_SORTED_VALUE)

    @property
    def ordered_rows(self) -> int:
        return max(1024, self.memory // _BYTES_PER_ORDERED_ROW)


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


class NonFiniteValue(ValueError):
    """A batch of protected column ``column`` holds NaN, an infinity or a missing value.

    Raised by the first batch found; :func:`counts_non_finite` turns it into the in-memory
    error, which counts them all.
    """

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:  # pickled by Spark and Dask tasks
        return (NonFiniteValue, (str(self), self.column))


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


@counts_non_finite
def ir_dp_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    columns: Sequence[Hashable] | None = None,
    sensitivity: str = "proven",
    linkage: str = "columns",
    shuffle: bool = True,
    unprotected: str = "drop",
    seed: int | None = None,
    memory_limit: int,
    n_threads: int | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Callable[[Report], None] | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with ``ir_dp`` into Parquet at ``output``, within ``memory_limit``.

    ``output`` ending in ``.parquet`` is one file; any other path is a dataset directory of
    ``part-NNNNN.parquet`` files. ``integer`` names the columns declared integer (their
    released values are rounded; default: the Parquet type). Numeric columns run in
    ``n_threads`` threads (default: one per core), each within its share of
    ``memory_limit``; the release does not depend on it. ``before_publish(report)``
    runs once the data is complete and before it is renamed into place, and
    ``after_publish()`` right after, before the scratch files are removed. Returns the
    public and the private report. ``linkage``, ``shuffle`` and ``unprotected`` (what to
    do with the columns not protected) as for :func:`dpfast.ir_dp`; other than the
    defaults they run in :mod:`dpfast.engines.linked`.
    """
    if linkage != "columns" or shuffle is not True or unprotected != "drop":
        from dpfast.engines import linked

        return linked.ir_dp_dataset(
            dataset,
            output,
            k=k,
            epsilon=epsilon,
            bounds=bounds,
            integer=integer,
            taxonomies=taxonomies,
            columns=columns,
            sensitivity=sensitivity,
            linkage=linkage,
            shuffle=shuffle,
            unprotected=unprotected,
            seed=seed,
            memory_limit=memory_limit,
            n_threads=n_threads,
            batch_rows=batch_rows,
            progress=progress,
            before_publish=before_publish,
            after_publish=after_publish,
        )
    start = time.perf_counter()
    run = DatasetRun("ir_dp", None, progress, dataset=dataset)
    run.policy = "drop"
    limits = _Limits(int(memory_limit), int(batch_rows))
    with run.phase("validate"):
        args = _arguments(
            dataset, k, epsilon, bounds, integer, taxonomies, columns, sensitivity, seed
        )
        guarantee = _guarantee(args)
        if guarantee[1] in ("as_published", "heuristic"):
            warn_unproven(guarantee[0])
    source = noise_source(args.seed)
    with run.phase("plan"):
        plan = _plan(args, dataset.n_rows)
        workers = column_threads(n_threads, len(args.numeric) or 1)
        share = _Limits(max(1, limits.memory // workers), limits.batch_rows)
        _check_groups_fit(dataset.n_rows, args, share)
    target = Path(output)
    with _scratch_beside(target) as scratch:
        # the categorical columns' counts first: one cheap pass each, which checks their
        # values against the taxonomies before the long numeric passes
        counts = {}
        for cat in args.categorical:
            with run.phase("columns"):
                run.tick(f"column {cat.name}", 0, 1)
                counts[cat.name] = _rank_counts(dataset, cat, limits)
        # numeric columns in parallel, each worker within its share of the memory limit;
        # the ledger spends in column order whatever order they finish in

        def numeric(column: NumericColumn) -> tuple[int, int]:
            grid, steps = plan.grids[column.name]
            values, clamped = _numeric_group_values(
                dataset, column, grid, args.k, steps, source, share, run
            )
            _write_in_order(scratch, column.name, values, args.k, source, dataset.n_rows, share)
            lower, upper = args.domains[column.name]
            return clamped, _on_bound(values, dataset.n_rows, args.k, lower, upper)

        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            with run.phase("columns"):
                for column, (clamped, on_bound) in zip(
                    args.numeric, pool.map(numeric, args.numeric), strict=True
                ):
                    plan.ledger.spend(plan.entries[column.name])
                    run.released[column.name] = np.empty(0)
                    run.clamped[str(column.name)] = clamped
                    run.on_bound[str(column.name)] = on_bound
        finally:  # on an error or an interrupt, columns not started are not started
            pool.shutdown(wait=True, cancel_futures=True)
        for cat in args.categorical:
            with run.phase("columns"):
                key = source.key("ir_dp", "centroid-choice", str(cat.name))
                entry = plan.entries[cat.name]
                codes = group_codes(cat.taxonomy, counts[cat.name], args.k, key, entry)
                _write_in_order(scratch, cat.name, codes, args.k, source, dataset.n_rows, limits)
            plan.ledger.spend(plan.entries[cat.name])
            run.released[cat.name] = np.empty(0)
            run.clamped[str(cat.name)] = 0
        report, private = run.reports(
            parameters=_parameters(args),
            guarantee=guarantee,
            ledger=plan.ledger,
            seed=args.seed,
            sampler=_sampler(args),
            domains=args.domains,
        )
        written = scratch_columns(
            scratch, args.numeric, args.categorical, dataset.names, dataset.schema
        )
        _write_and_publish(scratch, target, written, run, report, before_publish, after_publish)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def laplace_arguments(
    dataset: ColumnSource,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str,
    integer: Mapping[Hashable, bool] | None,
    columns: Sequence[Hashable] | None,
    seed: int | None,
) -> tuple[float, int | None, list[NumericColumn], dict[Hashable, tuple[float, float]], bool]:
    """Check ``laplace_dp``'s arguments against a source, as the in-memory function does.

    Returns epsilon, the seed, the protected columns, their domains and whether the
    bounds came from the data.
    """
    check_nonempty(dataset.n_rows)
    epsilon = check_epsilon(epsilon)
    seed = check_seed(seed)
    selected = check_columns(columns, dataset.names)
    protected = _numeric_columns(dataset, selected, integer, categorical=False)
    domains, derived = check_bounds(bounds, [c.name for c in protected], {})
    return epsilon, seed, protected, domains, derived


@counts_non_finite
def laplace_dp_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None = None,
    columns: Sequence[Hashable] | None = None,
    unprotected: str = "drop",
    seed: int | None = None,
    memory_limit: int,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Callable[[Report], None] | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with ``laplace_dp`` into Parquet at ``output``, batch by batch.

    The release of :func:`dpfast.laplace_dp` with ``unprotected="drop"``: row ``i``'s
    cell of a column gets the draw of nonce ``i`` of the column's key, whatever batch it
    is read in, and rows keep their order. Arguments as for :func:`ir_dp_dataset`; the
    columns not protected follow ``unprotected`` (:mod:`dpfast.engines.linked`).
    """
    from dpfast._release import check_unprotected
    from dpfast.engines.linked import unprotected_scratch
    from dpfast.methods import laplace_dp as method

    start = time.perf_counter()
    run = DatasetRun("laplace_dp", None, progress, dataset=dataset)
    run.policy = check_unprotected(unprotected)
    limits = _Limits(int(memory_limit), int(batch_rows))
    with run.phase("validate"):
        epsilon, seed, protected, domains, derived = laplace_arguments(
            dataset, epsilon, bounds, integer, columns, seed
        )
    ledger = Ledger(epsilon)
    plans = [
        method._plan(column, domains[column.name], epsilon, len(protected), dataset.n_rows)
        for column in protected
    ]
    for _, _, entry in plans:
        ledger.plan(entry)
    source = noise_source(seed)
    target = Path(output)
    with _scratch_beside(target) as scratch:
        with run.phase("noise"):
            for column, (grid, steps, entry) in zip(protected, plans, strict=True):
                key = source.key("laplace_dp", "cell-noise", str(column.name))
                run.tick(f"column {column.name}", 0, 1)
                clamped, on_bound = _laplace_column(
                    dataset, column, grid, key, steps, domains[column.name], scratch, limits
                )
                ledger.spend(entry)
                run.released[column.name] = np.empty(0)
                run.clamped[str(column.name)] = clamped
                run.on_bound[str(column.name)] = on_bound
        report, private = run.reports(
            parameters=method._parameters(epsilon, domains, derived),
            guarantee=method._guarantee(epsilon, protected, derived),
            ledger=ledger,
            seed=seed,
            sampler=noise.SAMPLER_NAME,
            domains=domains,
        )
        copied = unprotected_scratch(dataset, scratch, run, source, None, limits)
        written = scratch_columns(scratch, protected, [], dataset.names)
        if copied:
            made = {c.name: c for c in written} | copied
            written = [made[name] for name in dataset.names if name in made]
        _write_and_publish(scratch, target, written, run, report, before_publish, after_publish)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def _laplace_column(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    key: np.ndarray,
    steps: int,
    domain: tuple[float, float],
    scratch: Path,
    limits: _Limits,
) -> tuple[int, int]:
    """Noise every cell of a column into its scratch file, at its row's place.

    Returns the clamped count and the released values on a bound.
    """
    from dpfast.methods.laplace_dp import laplace_column

    lower, upper = domain
    path = scratch / _scratch_name(column.name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        # the batch's cells come back to be written here: a source's workers (Spark's
        # executors) may run on other machines
        def batch(array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int, int]:
            values = _numeric_values(array, column, first_row)
            draws = noise.discrete_laplace(key, steps, values.shape[0], start=first_row)
            out, clamped = laplace_column(values, grid, draws, column.integer)
            on_bound = int(np.count_nonzero(out <= lower) + np.count_nonzero(out >= upper))
            return first_row, out, clamped, on_bound

        totals = [0, 0]
        parts = dataset.map_column(str(column.name), limits.batch_rows, batch)
        for first_row, out, clamped, on_bound in parts:
            write_at(fd, out, first_row * 8)
            totals[0] += clamped
            totals[1] += on_bound
    finally:
        os.close(fd)
    return totals[0], totals[1]


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


def _arguments(
    dataset: ColumnSource,
    k: Any,
    epsilon: Any,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None,
    taxonomies: Mapping[Hashable, Any] | None,
    columns: Sequence[Hashable] | None,
    sensitivity: Any,
    seed: Any,
) -> _Arguments:
    k = check_k(k, dataset.n_rows)
    epsilon = check_epsilon(epsilon)
    seed = check_seed(seed)
    sensitivity = check_choice(sensitivity, "sensitivity", ("paper", "proven"))
    selected = check_columns(columns, dataset.names)
    checked = {name: as_taxonomy(t, name) for name, t in (taxonomies or {}).items()}
    numeric_names = [name for name in selected if name not in checked]
    domains, derived = check_bounds(bounds, numeric_names, {})
    numeric = _numeric_columns(dataset, numeric_names, integer)
    categorical = [
        CategoricalColumn(name, np.empty(0, dtype=np.int64), checked[name])
        for name in selected
        if name in checked
    ]
    return _Arguments(
        k,
        epsilon,
        "columns",
        True,
        seed,
        cast(Sensitivity, sensitivity),
        numeric,
        categorical,
        domains,
        derived,
    )


def _group_bytes(n: int, k: int) -> int:
    """Bytes a column's rank group values take while it is released (three int64 a group)."""
    return (n // k) * 8 * 3


def _check_groups_fit(n: int, args: _Arguments, limits: _Limits) -> None:
    needed = _group_bytes(n, args.k)
    if needed > limits.memory:
        raise ValueError(
            f"{n:,} rows with k={args.k} make {n // args.k:,} rank groups per column, whose "
            f"values need {needed:,} bytes, more than the memory limit; raise the "
            "memory limit or k"
        )


def _numeric_values(
    array: pa.Array, column: NumericColumn, first_row: int, method: str = "ir_dp"
) -> np.ndarray:
    """One batch of a numeric column as float64, refusing what ``method`` refuses."""
    if array.null_count:
        row = first_row + int(pc.index(array.is_null(), True).as_py())
        raise NonFiniteValue(
            f"column {column.name!r} has a missing value at row {row}; {method} needs a value "
            "in every row of a protected column",
            str(column.name),
        )
    values = array.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    finite = np.isfinite(values)
    if not finite.all():
        row = first_row + int(np.flatnonzero(~finite)[0])
        raise NonFiniteValue(
            f"column {column.name!r} has NaN or infinity at row {row}; protected columns must "
            "be finite",
            str(column.name),
        )
    if column.integer and not np.array_equal(values, np.rint(values)):
        row = first_row + int(np.flatnonzero(values != np.rint(values))[0])
        raise ValueError(
            f"column {column.name!r} is declared integer but row {row} holds "
            f"{values[row - first_row]!r}; declare it float in the schema"
        )
    return np.asarray(values, dtype=np.float64)


def _quantised(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    limits: _Limits,
    select: Callable[[np.ndarray], Any],
) -> Iterator[tuple[Any, int]]:
    """Yield ``select(grid values)`` of every batch of the column, with its clamped count."""
    batch = _QuantisedBatch(column, grid, select)
    return dataset.map_column(str(column.name), limits.batch_rows, batch)


# The functions that a cluster's tasks run are module-level classes, not closures: a
# closure is pickled by value, with a scan of every loaded module, once per task (about
# a millisecond each, thousands of tasks per release); these pickle by reference.


@dataclass(frozen=True)
class _QuantisedKeys:
    """A batch of a numeric column as grid values (``flagged``: ``q << 1 | clamped``)."""

    column: NumericColumn
    grid: Grid
    flagged: bool = False

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        values = _numeric_values(array, self.column, first_row)
        g = self.grid
        if self.flagged:
            return cast(
                np.ndarray, ranking.quantise_flagged(values, g.lower, g.upper, g.gamma, g.d_int)
            )
        q, _ = ranking.quantise_column(values, g.lower, g.upper, g.gamma, g.d_int)
        return cast(np.ndarray, q)


@dataclass(frozen=True)
class _QuantisedBatch:
    """``(select(grid values), clamped count)`` of a batch of a numeric column."""

    column: NumericColumn
    grid: Grid
    select: Callable[[np.ndarray], Any]

    def __call__(self, array: pa.Array, first_row: int) -> tuple[Any, int]:
        values = _numeric_values(array, self.column, first_row)
        g = self.grid
        q, clamped = ranking.quantise_column(values, g.lower, g.upper, g.gamma, g.d_int)
        return self.select(q), int(clamped)


def _numeric_group_values(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    k: int,
    steps: int,
    source: noise.NoiseSource,
    limits: _Limits,
    run: DatasetRun,
    sort_limits: _Limits | None = None,
) -> tuple[np.ndarray, int]:
    """Every rank group's released value of a numeric column, and its clamped count.

    ``limits`` bound this process's memory; ``sort_limits`` (default ``limits``) bound
    each sort task of a cluster (a source with ``sort_ranges``), which runs on a worker.
    """
    n = dataset.n_rows
    key_bits = max(1, grid.d_int.bit_length())
    sums = np.zeros(n // k, dtype=np.int64)
    passes = [0]

    def tick() -> None:
        passes[0] += 1
        run.tick(f"column {column.name}", passes[0], passes[0] + 1)

    def collect(lo: int, hi: int) -> np.ndarray:
        tick()
        select = _InRange(lo, hi)
        parts = [part for part, _ in _quantised(dataset, column, grid, limits, select)]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)  # parts freed

    def histogram(lo: int, hi: int, shift: int) -> np.ndarray:
        tick()
        counts = np.zeros(((hi - 1 - lo) >> shift) + 1, dtype=np.int64)
        select = _BucketCounts(lo, hi, shift, counts.shape[0])
        for part, _ in _quantised(dataset, column, grid, limits, select):
            counts += part
        return counts

    def add_sorted(words: np.ndarray, first_rank: int) -> None:
        ordered = ranking.radix_sort_packed(words, 0, key_bits)
        ranking.add_group_sums(ordered, 0, first_rank, k, sums)

    def process(lo: int, hi: int, first_rank: int, count: int) -> None:
        if count == 0:
            return
        if hi - lo == 1:
            ranking.add_group_run(lo, count, first_rank, k, sums)
        elif count <= limits.sorted_values:
            add_sorted(collect(lo, hi), first_rank)
        else:
            shift = refined_shift(lo, hi)
            counts = histogram(lo, hi, shift)
            cut_ranges(counts, lo, hi, shift, first_rank, limits.sorted_values, process)

    # the first pass also counts the clamped values
    clamped = 0
    top = grid.d_int + 1
    if hasattr(dataset, "sort_ranges") and (n > limits.sorted_values or key_bits < 63):
        # a cluster: the workers sort and add the groups in one job, instead of the
        # driver sorting the collected column or one pass over the data per range
        sorts = sort_limits or limits
        clamped = _cluster_group_sums(dataset, column, grid, k, sorts, tick, sums)
    elif n <= limits.sorted_values:
        tick()
        parts = []
        for part, count in _quantised(dataset, column, grid, limits, _InRange(0, top)):
            parts.append(part)
            clamped += count
        whole = np.concatenate(parts)
        parts.clear()  # the pieces go before the sort's scratch comes
        add_sorted(whole, 0)
    else:
        shift = max(0, key_bits - HISTOGRAM_BITS)
        tick()
        counts = np.zeros((grid.d_int >> shift) + 1, dtype=np.int64)
        select = _BucketCounts(0, top, shift, counts.shape[0])
        for part, count in _quantised(dataset, column, grid, limits, select):
            counts += part
            clamped += count
        cut_ranges(counts, 0, top, shift, 0, limits.sorted_values, process)
    draws = noise.discrete_laplace(
        source.key("ir_dp", "centroid-noise", str(column.name)), steps, n // k
    )
    values = ranking.noisy_group_values(
        sums, n, k, draws, grid.d_int, grid.lower, grid.upper, grid.gamma, column.integer
    )
    return values, clamped


def _cluster_group_sums(
    dataset: Any,
    column: NumericColumn,
    grid: Grid,
    k: int,
    limits: _Limits,
    tick: Callable[[], None],
    sums: np.ndarray,
) -> int:
    """Add a column's rank group sums on a cluster's workers; return its clamped count.

    A column of at most the memory limit's sorted values is sorted whole by one task of
    one ``sort_ranges`` job, its keys flagged with whether they were clamped (no pass
    before it). A larger one is cut first: a histogram pass cuts the grid into ranges of
    balanced counts (about ``n / (2 * tasks)`` values, and never more than the memory
    limit's sorted values, narrowed by more histogram passes where a bucket holds more);
    one ``sort_ranges`` job sorts each range on a worker and returns its groups' sums. A
    range of one grid value (a tie) is added here. See docs/engines.md, "Ranks on a
    cluster".
    """
    n = dataset.n_rows
    key_bits = max(1, grid.d_int.bit_length())
    top = grid.d_int + 1
    name, rows = str(column.name), limits.batch_rows
    if n <= limits.sorted_values and key_bits < 63:
        return _whole_column_sums(dataset, column, grid, k, limits, tick, sums)
    tasks = max(1, int(getattr(dataset, "sort_tasks", 1)))
    balanced = max(1, min(limits.sorted_values, -(-n // (2 * tasks))))
    planned: list[tuple[int, int, int, int]] = []

    def histogram(lo: int, hi: int, shift: int) -> tuple[np.ndarray, int]:
        tick()
        counts = np.zeros(((hi - 1 - lo) >> shift) + 1, dtype=np.int64)
        clamped = 0
        for part, count in _quantised(
            dataset, column, grid, limits, _BucketCounts(lo, hi, shift, counts.shape[0])
        ):
            counts += part
            clamped += count
        return counts, clamped

    def plan(lo: int, hi: int, first_rank: int, count: int) -> None:
        if count == 0:
            return
        if hi - lo == 1:
            ranking.add_group_run(lo, count, first_rank, k, sums)
        elif count <= limits.sorted_values:  # above the balanced size: one bucket alone
            planned.append((lo, hi, first_rank, count))
        else:
            shift = refined_shift(lo, hi)
            cut_ranges(histogram(lo, hi, shift)[0], lo, hi, shift, first_rank, balanced, plan)

    shift = max(0, key_bits - HISTOGRAM_BITS)
    counts, clamped = histogram(0, top, shift)
    cut_ranges(counts, 0, top, shift, 0, balanced, plan)
    if not planned:
        return clamped
    table = np.array(planned, dtype=np.int64)
    ranges = Ranges(table[:, 0].astype(np.uint64), table[:, 1].astype(np.uint64), table[:, 3])
    reduce = GroupSums(table[:, 2].copy(), int(k), int(sums.shape[0]))

    tick()
    keys = _QuantisedKeys(column, grid)
    results = _sorted_on_workers(dataset, name, rows, keys, ranges, key_bits, reduce)
    add_parts(results, sums, table[:, 3], lambda: ValueError(_CHANGED_BETWEEN_PASSES))
    return clamped


def _sorted_on_workers(
    dataset: Any,
    name: str,
    batch_rows: int,
    keys: Callable[[pa.Array, int], np.ndarray],
    ranges: Ranges,
    key_bits: int,
    reduce: GroupSums,
) -> list[Any]:
    """Return ``dataset.sort_ranges(...)``; a bad value's error names its row, as in memory.

    The sort's tasks run at once and may not number rows (Spark over files), and an
    engine may not give back a task's own exception (Spark raises its traceback), so on a
    failed sort one checking pass in row order (:meth:`map_column`, which sends refused
    values back, nothing else collected) raises the error of the table's first bad value
    instead. An interrupt is not a failure: it goes through.
    """
    try:
        return cast(
            list[Any], dataset.sort_ranges(name, batch_rows, keys, ranges, key_bits, reduce)
        )
    except Exception:
        for _ in dataset.map_column(name, batch_rows, functools.partial(_checked, fn=keys)):
            pass
        raise  # the checking pass found nothing: the sort's own error


def _checked(array: pa.Array, first_row: int, fn: Callable[[pa.Array, int], Any]) -> None:
    """TableRun ``fn`` on a batch for its errors only."""
    fn(array, first_row)


def _whole_column_sums(
    dataset: Any,
    column: NumericColumn,
    grid: Grid,
    k: int,
    limits: _Limits,
    tick: Callable[[], None],
    sums: np.ndarray,
) -> int:
    """Sort a whole column in one task of a cluster, add its group sums, return its clamped count.

    Each key carries its clamped flag in its low bit, so no pass is needed before the sort.
    """
    n = dataset.n_rows
    key_bits = max(1, grid.d_int.bit_length()) + 1
    ranges = Ranges(
        np.array([0], dtype=np.uint64),
        np.array([(grid.d_int + 1) << 1], dtype=np.uint64),
        np.array([n], dtype=np.int64),
    )
    reduce = GroupSums(np.zeros(1, dtype=np.int64), int(k), int(sums.shape[0]), flagged=True)

    tick()
    keys = _QuantisedKeys(column, grid, flagged=True)
    results = _sorted_on_workers(
        dataset, str(column.name), limits.batch_rows, keys, ranges, key_bits, reduce
    )
    expected = np.array([n], dtype=np.int64)
    return add_parts(results, sums, expected, lambda: ValueError(_CHANGED_BETWEEN_PASSES))


#: Why a range's count differs between the histogram and the sort.
_CHANGED_BETWEEN_PASSES = (
    "the data gave other values than in the previous pass; a release reads it several "
    "times, so make it deterministic (cache or persist the frame, avoid unseeded sampling)"
)


@dataclass(frozen=True)
class _InRange:
    """Select the grid values in ``[lo, hi)``."""

    lo: int
    hi: int

    def __call__(self, q: np.ndarray) -> np.ndarray:
        return q[(q >= np.uint64(self.lo)) & (q < np.uint64(self.hi))]


@dataclass(frozen=True)
class _BucketCounts:
    """Count the grid values in ``[lo, hi)`` per bucket of ``2**shift`` values from ``lo``."""

    lo: int
    hi: int
    shift: int
    size: int

    def __call__(self, q: np.ndarray) -> np.ndarray:
        counts = np.zeros(self.size, dtype=np.int64)
        outofcore_kernels.count_in_buckets(
            q, np.uint64(self.lo), np.uint64(self.hi), np.uint64(self.shift), counts
        )
        return counts


def _rank_counts(dataset: ColumnSource, cat: CategoricalColumn, limits: _Limits) -> np.ndarray:
    """Count a categorical column's records per taxonomy rank, batch by batch."""
    taxonomy: Taxonomy = cat.taxonomy
    counts = np.zeros(len(taxonomy.domain), dtype=np.int64)
    for part in dataset.map_column(str(cat.name), limits.batch_rows, _RankCounts(cat)):
        counts += part
    return counts


@dataclass(frozen=True)
class _RankCounts:
    """A batch of a categorical column's records counted per taxonomy rank."""

    cat: CategoricalColumn

    def __call__(self, array: pa.Array, first_row: int) -> np.ndarray:
        taxonomy: Taxonomy = self.cat.taxonomy
        encoded = array if pa.types.is_dictionary(array.type) else array.dictionary_encode()
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        if encoded.indices.null_count:
            missing = encoded.indices.is_null().to_numpy(zero_copy_only=False)
            indices = np.where(missing, -1, indices)
        codes = taxonomy.encode_categories(
            indices.astype(np.int64), encoded.dictionary.to_pylist(), column=self.cat.name
        )
        return np.asarray(taxonomy.rank_counts(codes), dtype=np.int64)


def _write_in_order(
    scratch: Path,
    name: Hashable,
    group_values: np.ndarray,
    k: int,
    source: noise.NoiseSource,
    n: int,
    limits: _Limits,
) -> None:
    """Write ``group_values[order[r] // k]`` for every output row ``r`` to a scratch file."""
    key = source.key("ir_dp", "column-order", str(name))
    sizes = noise.permutation_bucket_sizes(key, n)
    with open(scratch / _scratch_name(name), "wb") as file:
        lo = 0
        while lo < sizes.shape[0]:
            hi, held = lo, 0
            while hi < sizes.shape[0] and (hi == lo or held + sizes[hi] <= limits.ordered_rows):
                held += int(sizes[hi])
                hi += 1
            append_array(
                file, noise.permutation_part_groups(key, n, lo, hi, group_values, k, sizes)
            )
            lo = hi


def _scratch_name(name: Hashable) -> str:
    """Return a column's scratch file name: a digest, safe whatever the column's name."""
    return f"column-{hashlib.sha256(str(name).encode('utf-8')).hexdigest()[:32]}.bin"


def _on_bound(group_values: np.ndarray, n: int, k: int, lower: float, upper: float) -> int:
    """Count the released values on a bound (the private report's ``clamped_output``).

    Every row holds its rank group's value, so the count is the sizes of the groups whose
    value is on a bound: ``k`` rows each, the remainder in the last group.
    """
    on = (group_values <= lower) | (group_values >= upper)
    sizes = np.full(group_values.shape[0], k, dtype=np.int64)
    sizes[-1] = n - k * (group_values.shape[0] - 1)
    return int(sizes[on].sum())


@dataclass(frozen=True)
class ScratchColumn:
    """One released column held in a scratch file, in output row order.

    ``read(first, count)`` returns output rows ``[first, first + count)`` as an Arrow
    array of ``arrow_type``. Methods add kinds of their own by giving another ``read``.
    """

    name: str
    arrow_type: pa.DataType
    read: Callable[[int, int], pa.Array]
    dictionary: bool = False


def numeric_scratch(scratch: Path, column: NumericColumn) -> ScratchColumn:
    """Return a numeric column written as float64 to its scratch file.

    An integer column is read back in its dtype (the input's integer type), as the
    in-memory release restores it.
    """
    path = scratch / _scratch_name(column.name)
    kind = pa.from_numpy_dtype(column.dtype) if column.integer else pa.float64()

    def read(first: int, count: int) -> pa.Array:
        values = np.fromfile(path, np.float64, count, offset=first * 8)
        return pa.array(column.restore_dtype(values), kind)

    return ScratchColumn(str(column.name), kind, read)


def coded_scratch(scratch: Path, name: Hashable, labels: pa.Array) -> ScratchColumn:
    """Return a column written as int64 codes into ``labels`` (e.g. a taxonomy's domain)."""
    path = scratch / _scratch_name(name)

    def read(first: int, count: int) -> pa.Array:
        codes = np.fromfile(path, np.int64, count, offset=first * 8)
        return labels.take(pa.array(codes))

    return ScratchColumn(str(name), labels.type, read, dictionary=True)


def categorical_scratch(
    scratch: Path, column: CategoricalColumn, text: pa.DataType | None = None
) -> ScratchColumn:
    """Return a categorical column written as codes into its taxonomy's domain.

    The labels are ``text`` (the input's string type: a large-string column's labels stay
    large strings, as in memory).
    """
    labels = pa.array(list(column.taxonomy.domain), text or pa.string())
    return coded_scratch(scratch, column.name, labels)


def scratch_columns(
    scratch: Path,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[CategoricalColumn],
    names: Sequence[str],
    schema: pa.Schema | None = None,
) -> list[ScratchColumn]:
    """Return the scratch columns of ``numeric`` and ``categorical``, in ``names`` order.

    With the input's ``schema``, a large-string column's labels are large strings.
    """
    made = {str(c.name): numeric_scratch(scratch, c) for c in numeric}
    for c in categorical:
        kind = schema.field(str(c.name)).type if schema is not None else pa.string()
        text = pa.large_string() if pa.types.is_large_string(kind) else pa.string()
        made[str(c.name)] = categorical_scratch(scratch, c, text)
    return [made[name] for name in names if name in made]


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
            run.tick(f"writing {target.name}", first + count, n)
    finally:
        if writer is not None:
            writer.close()
    return out


@contextmanager
def _scratch_beside(target: Path) -> Iterator[Path]:
    """Yield a hidden scratch directory beside ``target``, removed however the block ends."""
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent or "."))
    try:
        yield scratch
    finally:
        _remove_tree(scratch)


def _remove_tree(path: Path, tries: int = 100) -> None:
    """Remove a directory tree; again while a writer still running adds files to it.

    A cluster's task cancelled while it writes runs on (Dask does not stop a running task)
    and may make a file as the tree is being removed; once the directory is gone, it cannot
    (Arrow does not make parent directories). Gives up after ``tries`` (5 s).
    """
    for _ in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.05)


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
    _publish(written, target)
    if after_publish is not None:
        after_publish()


def _publish(written: Path, target: Path) -> None:
    """Move the complete output into place, replacing a file or directory there."""
    if target.exists() and target.is_dir() and not target.is_symlink():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(written, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(written, target)
