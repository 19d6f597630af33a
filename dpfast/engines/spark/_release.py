"""``ir_dp`` and ``laplace_dp`` on Spark, with the release computed on the executors.

The driver runs the engine's passes through :class:`SparkSource` (the executors read the
data), draws the small global state (an ``ir_dp`` column's ``n // k`` noisy group values;
a ``laplace_dp`` column's key), spends the ledger and builds the reports. The released
data is then a lazy Spark DataFrame computed on the executors from that state alone:

* ``ir_dp`` (columns linkage): ``session.range(parts)`` with one output part per task.
  Output row ``r`` of column ``c`` is ``G_c[order_c[r] // k]``, where ``order_c`` is the
  column's bucketed permutation (docs/engines.md#permutations); task ``p`` computes the
  buckets covering rows ``[p * part_rows, (p + 1) * part_rows)`` of every column
  (:func:`dpfast.noise.permutation_part_groups`), so the frame's rows are those of
  :func:`dpfast.ir_dp`, in its order.
* ``laplace_dp`` (:mod:`._laplace`): ``mapInArrow`` over the input, each cell noised by
  the draw of nonce ``row`` of its column's key, in row order.

Everything is keyed, so the frame is the same however often Spark computes it, whatever
its partitioning and after any retry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._release import NumericColumn, column_threads, noise_source, warn_unproven
from dpfast.accounting import PrivateReport, Report
from dpfast.engines._sorted import WORKER_BUFFERS
from dpfast.engines.outofcore import (
    BATCH_ROWS,
    DatasetRun,
    Progress,
    _arguments,
    _check_groups_fit,
    _group_bytes,
    _Limits,
    _numeric_group_values,
    _on_bound,
    _rank_counts,
    counts_non_finite,
)
from dpfast.engines.spark._rows import quietly
from dpfast.engines.spark._source import SparkSource
from dpfast.methods.ir_dp import _Arguments, _guarantee, _parameters, _plan, _sampler
from dpfast.methods.ir_dp._categorical import group_codes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["PART_ROWS", "ir_dp_spark", "output_part_rows", "spark_of", "spark_source"]

#: The fewest output rows per task of an ``ir_dp`` release frame.
PART_ROWS = 1 << 20
#: The most bytes of released values (8 per cell) one task of the frame computes, unless
#: a quarter of the memory limit is more (:func:`output_part_rows`).
PART_BYTES = 1 << 29


def output_part_rows(n: int, columns: int, tasks: int, memory_limit: int = 0) -> int:
    """Return the output rows per task of an ``ir_dp`` release frame of ``n`` rows.

    Each task reads the whole bucket stream of every column's permutation to find its
    part's rows (:func:`dpfast.noise.permutation_part_groups`, O(n)), so the frame has as few
    parts as keep every task slot busy (four parts each, so that slots finish together),
    at least :data:`PART_ROWS` rows and at most the larger of :data:`PART_BYTES` and
    ``memory_limit / 4`` bytes of released values each. Where the byte cap decides, the
    number of parts is rounded up to a multiple of ``tasks``, so that no slot waits alone
    for the last part.
    """
    tasks = max(1, tasks)
    cap = max(PART_BYTES, int(memory_limit) // 4)
    most = max(PART_ROWS, cap // (8 * max(1, columns)))
    rows = max(PART_ROWS, min(most, -(-n // (4 * tasks))))
    parts = -(-n // rows)
    if parts > tasks and parts % tasks:
        rows = max(PART_ROWS, -(-n // (parts + tasks - parts % tasks)))
    return rows


def spark_source(data: Any) -> Any:
    """Return ``data`` as a column source: a DataFrame becomes a :class:`SparkSource`."""
    return data if hasattr(data, "map_column") else SparkSource(data)


def spark_of(source: Any) -> SparkSource:
    """Return the :class:`SparkSource` under ``source`` (itself, or a checked wrapper's)."""
    inner = source
    while not isinstance(inner, SparkSource):
        inner = getattr(inner, "dataset", None)
        if inner is None:
            raise TypeError(
                f"a Spark release reads a pyspark DataFrame or a SparkSource, got "
                f"{type(source).__name__}"
            )
    return inner


def ir_dp_spark(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    columns: Sequence[Hashable] | None = None,
    sensitivity: str = "proven",
    seed: int | None = None,
    memory_limit: int = 2**30,
    n_threads: int | None = None,
    batch_rows: int = BATCH_ROWS,
    part_rows: int | None = None,
    progress: Progress | None = None,
) -> tuple[DataFrame, Report, PrivateReport]:
    """Release a Spark DataFrame with ``ir_dp``; the data is a lazy frame of the executors.

    A seeded release is the one :func:`dpfast.ir_dp` gives for the same table
    (``linkage="columns"``, unprotected columns dropped), rows in the same order, whatever
    the frame's partitioning.

    Parameters
    ----------
    data : pyspark.sql.DataFrame or SparkSource
        The table to release (a source, e.g. :meth:`SparkSource.from_parquet`, possibly
        wrapped in a schema check).
    k, epsilon, bounds, integer, taxonomies, columns, sensitivity, seed
        As for :func:`dpfast.engines.outofcore.ir_dp_dataset`.
    memory_limit : int
        Bytes of the driver's working memory for the passes (shared by its column threads),
        and of each sort task's on the workers: a column of at most ``memory_limit / 32``
        values is sorted whole by one task, a larger one in ranges of at most that. An
        output task computes at most a quarter of it in released values (at least
        :data:`PART_BYTES`).
    n_threads : int, optional
        Columns whose passes run at once (default: one per task slot of the cluster, plus
        one, as many as the memory limit holds).
    batch_rows : int
        Rows per batch given to an executor's function.
    part_rows : int, optional
        Output rows computed by one task (default: :func:`output_part_rows`).
    progress : callable, optional
        ``progress(phase, done, total)``, called as the passes progress.

    Returns
    -------
    data : pyspark.sql.DataFrame
        The release, computed on the executors whenever it is used.
    report, private : Report, PrivateReport
        As the in-memory release's.
    """
    start = time.perf_counter()
    source = spark_source(data)
    ordered, report, private = released_columns(
        source, k, epsilon, bounds, integer, taxonomies, columns, sensitivity, seed,
        memory_limit, n_threads, batch_rows, progress,
    )  # fmt: skip
    cluster = spark_of(source)
    if part_rows is None:
        part_rows = output_part_rows(
            source.n_rows, len(ordered), cluster.sort_tasks, int(memory_limit)
        )
    frame = _ir_dp_frame(cluster, ordered, source.n_rows, int(k), int(part_rows), int(batch_rows))
    private.timings["total"] = time.perf_counter() - start
    return frame, report, private


@counts_non_finite
def released_columns(
    source: Any,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]],
    integer: Mapping[Hashable, bool] | None,
    taxonomies: Mapping[Hashable, Any] | None,
    columns: Sequence[Hashable] | None,
    sensitivity: str,
    seed: int | None,
    memory_limit: int,
    n_threads: int | None,
    batch_rows: int,
    progress: Progress | None,
) -> tuple[list[_Generated], Report, PrivateReport]:
    """Run ``ir_dp``'s passes over a cluster's source; return what its output tasks need.

    The released columns' small state (group values or codes, and their order keys), in
    the source's column order, and the public and private reports. Shared by the Spark
    and Dask releases, which differ only in how they run the output tasks.
    """
    run = DatasetRun("ir_dp", None, progress, dataset=source)
    run.policy = "drop"
    limits = _Limits(int(memory_limit), int(batch_rows))
    with run.phase("validate"):
        args = _arguments(
            source, k, epsilon, bounds, integer, taxonomies, columns, sensitivity, seed
        )
        guarantee = _guarantee(args)
        if guarantee[1] in ("as_published", "heuristic"):
            warn_unproven(guarantee[0])
    keys = noise_source(args.seed)
    n = source.n_rows
    with run.phase("plan"):
        plan = _plan(args, n)
        workers = _column_jobs(source, args, n, limits, n_threads)
        share = _Limits(max(1, limits.memory // workers), limits.batch_rows)
        _check_groups_fit(n, args, share)
    counts = {}
    for cat in args.categorical:  # cheap passes that check the values first
        with run.phase("columns"):
            run.tick(f"column {cat.name}", 0, 1)
            counts[cat.name] = _rank_counts(source, cat, limits)
    # the sorts run on the workers, one range a task, each within the whole limit: the
    # client's column threads hold only group sums (checked above within their share)
    generated = _numeric_outputs(source, args, plan, keys, share, limits, workers, run)
    for cat in args.categorical:
        with run.phase("columns"):
            key = keys.key("ir_dp", "centroid-choice", str(cat.name))
            codes = group_codes(cat.taxonomy, counts[cat.name], args.k, key, plan.entries[cat.name])
        plan.ledger.spend(plan.entries[cat.name])
        run.released[cat.name] = np.empty(0)
        run.clamped[str(cat.name)] = 0
        labels = tuple(str(label) for label in cat.taxonomy.domain)
        generated[str(cat.name)] = _Generated.of(keys, cat.name, n, codes, "labels", labels)
    report, private = run.reports(
        parameters=_parameters(args),
        guarantee=guarantee,
        ledger=plan.ledger,
        seed=args.seed,
        sampler=_sampler(args),
        domains=args.domains,
    )
    return [generated[name] for name in source.names if name in generated], report, private


def _column_jobs(
    source: Any, args: _Arguments, n: int, limits: _Limits, n_threads: int | None
) -> int:
    """Return how many numeric columns run at once: ``n_threads``, else (Spark) a slot each + 1.

    A column that fits a task is one sort task, so the cluster's slots are used only if
    that many columns are in flight; the one more keeps a slot busy while the driver adds
    up a column that has just finished (docs/engines.md, "Ranks on a cluster"). The
    driver holds each column in flight's group values, so the default takes no more
    columns than the memory limit holds.
    """
    columns = len(args.numeric) or 1
    if n_threads is not None or not _on_spark(source):  # Dask: one per core of the client
        return column_threads(n_threads, columns)
    slots = max(1, int(source.sort_tasks))
    held = max(1, limits.memory // max(1, _group_bytes(n, args.k)))
    return max(1, min(columns, slots + 1, held))


def _on_spark(source: Any) -> bool:
    """Return whether ``source`` is a :class:`SparkSource`, or a checked wrapper of one."""
    try:
        spark_of(source)
    except TypeError:
        return False
    return True


def _numeric_outputs(
    source: Any,
    args: _Arguments,
    plan: Any,
    keys: noise.NoiseSource,
    share: _Limits,
    whole: _Limits,
    workers: int,
    run: DatasetRun,
) -> dict[str, _Generated]:
    """Draw the numeric columns' group values, ``workers`` columns at a time; spend in order.

    ``share`` is a client column thread's share of the memory limit; ``whole``, the whole
    limit, bounds each sort task on the workers.
    """
    n = source.n_rows
    generated = {}

    def numeric(column: NumericColumn) -> tuple[np.ndarray, int]:
        grid, steps = plan.grids[column.name]
        return _numeric_group_values(
            source, column, grid, args.k, steps, keys, share, run, sort_limits=whole
        )

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        with run.phase("columns"):
            done = zip(args.numeric, pool.map(numeric, args.numeric), strict=True)
            for column, (values, clamped) in done:
                plan.ledger.spend(plan.entries[column.name])
                lower, upper = args.domains[column.name]
                run.released[column.name] = np.empty(0)
                run.clamped[str(column.name)] = clamped
                run.on_bound[str(column.name)] = _on_bound(values, n, args.k, lower, upper)
                kind = "int" if column.integer else "float"
                generated[str(column.name)] = _Generated.of(keys, column.name, n, values, kind)
    finally:  # on an error or an interrupt, columns not started are not started
        pool.shutdown(wait=True, cancel_futures=True)
    return generated


@dataclass(frozen=True)
class _Generated:
    """What a task needs to compute rows of one released ``ir_dp`` column."""

    name: str
    key: np.ndarray
    starts: np.ndarray  # the permutation's bucket starts, and n
    values: np.ndarray  # every rank group's value (float64) or code (int64)
    kind: str  # "float", "int" or "labels"
    labels: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        keys: noise.NoiseSource,
        name: Hashable,
        n: int,
        values: np.ndarray,
        kind: str,
        labels: tuple[str, ...] = (),
    ) -> _Generated:
        key = keys.key("ir_dp", "column-order", str(name))
        sizes = noise.permutation_bucket_sizes(key, n)
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return cls(str(name), key, starts, values, kind, labels)

    @property
    def spark_type(self) -> str:
        return {"float": "double", "int": "long", "labels": "string"}[self.kind]

    def buckets(self, lo: int, hi: int) -> tuple[int, int]:
        """Return the permutation buckets ``[first, last)`` covering output rows ``[lo, hi)``."""
        first = int(np.searchsorted(self.starts, lo, side="right")) - 1
        last = int(np.searchsorted(self.starts, hi, side="left"))
        return first, last

    def bucket_items(self, lo: int, hi: int) -> int:
        """Return how many items the buckets covering output rows ``[lo, hi)`` hold."""
        first, last = self.buckets(lo, hi)
        return int(self.starts[last] - self.starts[first])

    def rows(self, n: int, k: int, lo: int, hi: int, buffer: np.ndarray | None = None) -> pa.Array:
        """Return output rows ``[lo, hi)`` of the column.

        ``buffer`` (``uint64``, :meth:`bucket_items` words), if given, holds a float
        column's values: the array returned is a view of it.
        """
        first, last = self.buckets(lo, hi)
        sizes = np.diff(self.starts)
        out = None if buffer is None else buffer.view(np.float64)
        part = noise.permutation_part_groups(
            self.key, n, first, last, self.values, k, sizes, out=out
        )
        out = part[lo - int(self.starts[first]) : hi - int(self.starts[first])]
        if self.kind == "labels":
            return pa.array(self.labels, pa.string()).take(pa.array(out))
        return pa.array(out.astype(np.int64) if self.kind == "int" else out)


@dataclass(frozen=True)
class GeneratedParts:
    """An ``ir_dp`` release frame's parts: what its tasks compute, and a writer can too.

    Part ``p`` holds output rows ``[p * part_rows, (p + 1) * part_rows)`` of every column.
    :func:`dpfast.engines.spark.write_release` finds this on a frame that
    :func:`ir_dp_spark` returned (untransformed) and has the executors write each part
    with pyarrow, instead of converting it into Spark rows for Spark's writer.
    """

    columns: tuple[_Generated, ...]
    n: int
    k: int
    part_rows: int

    @property
    def count(self) -> int:
        """The number of parts."""
        return max(1, math.ceil(self.n / self.part_rows))

    def span(self, part: int) -> tuple[int, int]:
        """Return the output rows ``[lo, hi)`` of part ``part``."""
        return part * self.part_rows, min(self.n, (part + 1) * self.part_rows)

    def table(self, part: int, buffer: np.ndarray | None = None) -> pa.Table:
        """Return part ``part`` of every column.

        Without ``buffer``, the worker's kept sort buffers are freed first: the passes are
        over once the output is computed (:class:`~dpfast.engines._sorted.KeyBuffers`).
        With one (``uint64``, at least :meth:`words` ``(part)``), the float columns' values
        are written into it and the table's arrays are views of it: it must not be
        reused while the table is.
        """
        lo, hi = self.span(part)
        if buffer is None:
            WORKER_BUFFERS.clear()
        arrays, used = [], 0
        for c in self.columns:
            piece = None
            if buffer is not None and c.kind == "float":
                size = c.bucket_items(lo, hi)
                piece, used = buffer[used : used + size], used + size
            arrays.append(c.rows(self.n, self.k, lo, hi, piece))
        return pa.Table.from_arrays(arrays, names=[c.name for c in self.columns])

    def words(self, part: int) -> int:
        """Return the ``uint64`` words of a buffer for :meth:`table` ``(part, buffer)``."""
        lo, hi = self.span(part)
        return sum(c.bucket_items(lo, hi) for c in self.columns if c.kind == "float")

    def most_words(self) -> int:
        """Return the most :meth:`words` of any part, so that one buffer serves them all."""
        return max(self.words(part) for part in range(self.count))


#: The attribute of an ``ir_dp`` release frame holding its :class:`GeneratedParts`.
PARTS_ATTRIBUTE = "_dpfast_generated_parts"


def generated_parts(frame: Any) -> GeneratedParts | None:
    """Return the parts of a frame :func:`ir_dp_spark` returned, else None."""
    found = vars(frame).get(PARTS_ATTRIBUTE) if hasattr(frame, "__dict__") else None
    return found if isinstance(found, GeneratedParts) else None


def _ir_dp_frame(
    source: SparkSource,
    columns: Sequence[_Generated],
    n: int,
    k: int,
    part_rows: int,
    batch_rows: int,
) -> DataFrame:
    """Return the lazy frame of the released columns: task ``p`` computes part ``p``."""
    import functools

    session = source.session
    parts = GeneratedParts(tuple(columns), n, k, part_rows)
    schema = ", ".join(f"`{c.name.replace('`', '``')}` {c.spark_type}" for c in columns)
    generate = functools.partial(_generate, parts=parts, batch_rows=batch_rows)
    with quietly():
        frame = session.range(parts.count, numPartitions=parts.count).mapInArrow(generate, schema)
    setattr(frame, PARTS_ATTRIBUTE, parts)  # a transformed frame does not carry it
    return frame


def _generate(
    batches: Iterable[pa.RecordBatch], parts: GeneratedParts, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Yield the output rows of this task's parts, in order, a batch at a time."""
    for batch in batches:
        for part in batch.column(0).to_pylist():
            yield from parts.table(part).to_batches(max_chunksize=batch_rows)
