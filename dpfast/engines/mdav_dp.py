"""Out-of-core ``mdav_dp`` over a column source, within a memory limit (docs/engines.md).

The release is the one :func:`dpfast.mdav_dp` gives for the same table, seed and
arguments (``unprotected="drop"``, reference sequences of at most
:data:`~dpfast.partitions.insensitive_mdav.FAST_PATH_MAX_POINTS` distinct points): the same
clusters, plan, ledger, keys and kernels. The passes:

1. **Values.** Each protected column is read batch by batch, checked, clamped to its public
   bounds (numeric) or encoded as taxonomy codes (categorical), and written at its rows'
   places in a scratch file.
2. **Keys.** Row range by row range, every row's distance key to each distinct reference
   point (:func:`dpfast._kernels.insensitive_mdav.reference_keys`), as an order-preserving
   uint64 word, into one scratch file per point.
3. **Orders.** Each point's keys are cut into ranges that fit the memory limit by
   histograms of their top bits (refined while a bucket is too large); each range is
   collected, sorted by (key, values, codes, row) as in memory, and appended to the
   point's order file. A key held by more rows than fit is cut by the next attribute.
4. **Merge.** The orders are read back in buffers; each cluster takes the first ``k`` rows
   of its point's order not yet taken (a bitset of ``n`` bits), as the in-memory fast path
   does. The rows taken go, with their cluster, to files by row range, which then give
   every row's cluster in row order. Clusters are numbered by first appearance, as in
   memory.
5. **Centroids.** Exact integer sums (numeric) or code counts (categorical) per cluster,
   then the noisy centroids or exponential-mechanism choices from the in-memory keys.
6. **Output.** The rows' permutation, part by part, gives each output row's cluster; the
   released columns are written in output order and stitched into Parquet, renamed into
   place when complete.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._kernels import mdav_stream
from dpfast._release import CategoricalColumn, NumericColumn, noise_source
from dpfast._validation import (
    check_bounds,
    check_choice,
    check_columns,
    check_epsilon,
    check_k,
    check_nonempty,
    check_seed,
)
from dpfast.accounting import PrivateReport, Report, names
from dpfast.engines.outofcore._files import append_array, write_at
from dpfast.engines.outofcore._legacy import (
    BATCH_ROWS,
    DatasetRun,
    _numeric_columns,
    _numeric_values,
    _scratch_beside,
    _scratch_name,
    _write_and_publish,
    counts_non_finite,
    scratch_columns,
)
from dpfast.engines.outofcore._ranges import cut_ranges, refined_shift
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.exceptions import PrivacyLeakWarning
from dpfast.methods.mdav_dp import (
    CALIBRATIONS,
    Calibration,
    _Arguments,
    _guarantee,
    _notes,
    _parameters,
    _Plan,
    _plan,
)
from dpfast.partitions.categorical import distance_units
from dpfast.partitions.insensitive_mdav import (
    FAST_PATH_MAX_POINTS,
    Reference,
    _category_terms,
    reference_sequence,
)
from dpfast.taxonomy import as_taxonomy

__all__ = ["mdav_dp_dataset"]

Progress = Callable[[str, int, int], None]

#: Bits of a histogram pass over distance keys.
#: Distance keys are uint64 words: the whole key space.
_KEY_SPACE = 1 << 64
#: Bytes of working memory per collected row of a sorted range, beside 16 per attribute
#: (the key, the row, the sort's scratch and the values that break ties).
_BYTES_PER_SORTED_ROW = 64
#: Bytes per row of a part of the output order (the rows, their sort, their clusters).
_BYTES_PER_ORDERED_ROW = 40
#: Rows of a sequential pass over the scratch files, at most.
_CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class _Budget:
    """How the memory limit is cut: working memory beside the per-cluster arrays."""

    work: int
    batch_rows: int
    attributes: int
    merge_rows: int

    @property
    def sorted_rows(self) -> int:
        return max(1024, self.work // (_BYTES_PER_SORTED_ROW + 16 * self.attributes))

    @property
    def ordered_rows(self) -> int:
        return max(1024, self.work // _BYTES_PER_ORDERED_ROW)

    @property
    def chunk_rows(self) -> int:
        return max(1024, min(_CHUNK_ROWS, self.work // (8 * (self.attributes + 4))))

    @property
    def bucket_rows(self) -> int:
        """Rows of a row range of the merge's output (its pairs and its labels)."""
        return max(1024, self.work // 32)


@dataclass(frozen=True)
class _Geometry:
    """The reference points of the fast path: distinct points used, widths and terms."""

    points: np.ndarray
    widths: np.ndarray
    terms: np.ndarray
    sequence: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


@counts_non_finite
def mdav_dp_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | None = None,
    integer: Mapping[Hashable, bool] | None = None,
    taxonomies: Mapping[Hashable, Any] | None = None,
    columns: Sequence[Hashable] | None = None,
    reference: Reference = "corners",
    calibration: str = "l1",
    seed: int | None = None,
    memory_limit: int,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Callable[[Report], None] | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with ``mdav_dp`` into Parquet at ``output``, within ``memory_limit``.

    The release of :func:`dpfast.mdav_dp` with ``unprotected="drop"``, for reference
    sequences with at most 64 distinct points (``"corners"``, ``"cycling"`` up to six
    attributes, or explicit points): the same clusters, noisy centroids, row order and
    reports. ``output`` ending in ``.parquet`` is one file; any other path is a dataset
    directory. ``integer`` names the numeric columns declared integer (default: the
    Parquet type). ``memory_limit`` bounds the working memory beside the per-cluster
    arrays (``n // k`` clusters) and a bitset of the rows; the release does not depend on
    it, nor on ``batch_rows``. The hooks are those of
    :func:`dpfast.engines.outofcore.ir_dp_dataset`. Returns the public and the private
    report.

    Raises
    ------
    TypeError, ValueError
        Bad arguments, as :func:`dpfast.mdav_dp`; a reference sequence with more than 64
        distinct points; per-cluster arrays that take more than half of ``memory_limit``.
    """
    start = time.perf_counter()
    run = DatasetRun("mdav_dp", None, progress, dataset=dataset)
    run.policy = "drop"
    with run.phase("validate"):
        args = _arguments(
            dataset, k, epsilon, bounds, integer, taxonomies, columns, calibration, seed
        )
        n = dataset.n_rows
        n_clusters = n // args.k
        plan = _plan(args, n, n_clusters)  # an unusable epsilon fails before any pass
        geometry = _geometry(args, reference, n)
        budget = _budget(args, n, n_clusters, geometry, int(memory_limit), int(batch_rows))
    source = noise_source(args.seed)
    target = Path(output)
    with _scratch_beside(target) as scratch:
        with run.phase("values"):
            _write_values(dataset, args, scratch, budget, run)
        with run.phase("partition"):
            n_steps = geometry.sequence.shape[0]
            orders = _orders(scratch, args, geometry, n, budget, run) if n_steps else []
            first_rows = _merge(scratch, orders, geometry.sequence, args.k, n, budget, run)
        rank = np.empty(n_clusters, dtype=np.int64)
        rank[np.argsort(first_rows, kind="stable")] = np.arange(n_clusters, dtype=np.int64)
        with run.phase("columns"):
            cluster_values = _centroids(scratch, args, plan, source, rank, n, budget, run)
        with run.phase("shuffle"):
            _write_in_order(scratch, args, cluster_values, source, n, budget, run)
        report, private = _reports(run, args, plan, reference, n_clusters)
        written = scratch_columns(
            scratch, args.numeric, args.categorical, dataset.names, dataset.schema
        )
        _write_and_publish(scratch, target, written, run, report, before_publish, after_publish)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def _reports(
    run: DatasetRun, args: _Arguments, plan: _Plan, reference: Reference, n_clusters: int
) -> tuple[Report, PrivateReport]:
    """Build the reports of :func:`dpfast.mdav_dp`; warn as it does when ε is overspent."""
    total = plan.ledger.total
    notes = _notes(args, total)
    report, private = run.reports(
        parameters=_parameters(args, total, reference, n_clusters),
        guarantee=_guarantee(
            args.epsilon,
            total,
            names(list(run.released)),
            args.calibration,
            args.derived,
            names([c.name for c in args.categorical]),
        ),
        ledger=plan.ledger,
        seed=args.seed,
        sampler="; ".join(
            ([noise.SAMPLER_NAME] if args.numeric else [])
            + ([noise.EM_SAMPLER_NAME] if args.categorical else [])
        ),
        notes=notes,
        groups="cluster",
        domains=args.domains,
    )
    if notes and total > args.epsilon * (1 + 1e-9):
        warnings.warn(notes[0], PrivacyLeakWarning, stacklevel=3)
    return report, private


# -- validation ------------------------------------------------------------------------


def _arguments(
    dataset: ColumnSource,
    k: Any,
    epsilon: Any,
    bounds: Any,
    integer: Mapping[Hashable, bool] | None,
    taxonomies: Mapping[Hashable, Any] | None,
    columns: Sequence[Hashable] | None,
    calibration: Any,
    seed: Any,
) -> _Arguments:
    """Check the arguments in :func:`dpfast.mdav_dp`'s order; no row is read."""
    check_nonempty(dataset.n_rows)
    k = check_k(k, dataset.n_rows)
    epsilon = check_epsilon(epsilon)
    calibration = check_choice(calibration, "calibration", CALIBRATIONS)
    seed = check_seed(seed)
    selected = check_columns(columns, dataset.names)
    checked = {name: as_taxonomy(t, name) for name, t in (taxonomies or {}).items()}
    stray = [name for name in checked if name not in selected]
    if stray:
        raise ValueError(
            f"taxonomies names column(s) {stray} that are not protected; the protected "
            f"columns are {selected}: add them to columns or drop their taxonomies"
        )
    numeric_names = [name for name in selected if name not in checked]
    if isinstance(bounds, str):
        raise ValueError(
            "out of core, bounds must be public {column: (lower, upper)}; bounds='data' "
            "reads the data for them (not private): release in memory for that"
        )
    domains: dict[Hashable, tuple[float, float]] = {}
    if numeric_names or bounds is not None:
        domains, _ = check_bounds(bounds, numeric_names, {})
    numeric = _numeric_columns(dataset, numeric_names, integer)
    categorical = [
        CategoricalColumn(name, np.empty(0, dtype=np.int64), checked[name])
        for name in selected
        if name in checked
    ]
    return _Arguments(
        k, epsilon, cast(Calibration, calibration), seed, numeric, categorical, domains, False
    )


def _geometry(args: _Arguments, reference: Reference, n: int) -> _Geometry:
    """Return the fast path's distinct reference points; refuse a sequence it cannot take."""
    lower = np.array([args.domains[c.name][0] for c in args.numeric], dtype=np.float64)
    upper = np.array([args.domains[c.name][1] for c in args.numeric], dtype=np.float64)
    found = [c.taxonomy for c in args.categorical]
    corners = np.array(
        [[t.code(label) for label in t.boundary] for t in found], dtype=np.float64
    ).reshape(-1, 2)
    n_steps = max(n // args.k - 1, 0)
    points, sequence = reference_sequence(
        reference,
        np.concatenate([lower, corners[:, 0]]),
        np.concatenate([upper, corners[:, 1]]),
        n_steps,
    )
    if points.shape[0] > FAST_PATH_MAX_POINTS:
        raise ValueError(
            f"this reference sequence has {points.shape[0]} distinct points; out of core, "
            f"mdav_dp takes at most {FAST_PATH_MAX_POINTS} (one sorted order of the rows per "
            "point): use reference 'corners' (or 'cycling' with at most 6 protected "
            "columns), or release in memory without --memory-limit"
        )
    m = lower.shape[0]
    terms = _category_terms(points[:, m:], found)
    used = np.unique(sequence)
    remap = np.zeros(points.shape[0], dtype=np.int64)
    remap[used] = np.arange(used.shape[0], dtype=np.int64)
    return _Geometry(
        np.ascontiguousarray(points[used, :m]),
        upper - lower,
        np.ascontiguousarray(terms[used]),
        remap[sequence],
        lower,
        upper,
    )


def _budget(
    args: _Arguments,
    n: int,
    n_clusters: int,
    geometry: _Geometry,
    memory: int,
    batch_rows: int,
) -> _Budget:
    """Cut the memory limit; refuse when the per-cluster arrays take more than half of it."""
    attributes = len(args.numeric) + len(args.categorical)
    domain = sum(len(c.taxonomy.domain) for c in args.categorical)
    n_points = geometry.points.shape[0]
    merge_rows = max(1024, min(_CHUNK_ROWS, memory // (64 * (n_points + 1))))
    fixed = (
        (n + 7) // 8  # the bitset of taken rows
        + n_clusters * 8 * (6 + attributes)  # sequence, first rows, ranks, sums, values
        + n_clusters * 16 * domain  # categorical counts and qualities
        + (n_points + 1) * 8 * merge_rows  # the merge's buffers
    )
    if 2 * fixed > memory:
        raise ValueError(
            f"{n:,} rows with k={args.k} make {n_clusters:,} clusters, whose arrays (and the "
            f"bitset of the rows) need about {fixed:,} bytes, more than half the memory "
            "limit; raise the memory limit or k"
        )
    return _Budget(memory - fixed, batch_rows, attributes, merge_rows)


# -- pass 1: values --------------------------------------------------------------------


def _values_path(scratch: Path, name: Hashable) -> Path:
    return scratch / f"input-{_scratch_name(name)}"


def _write_values(
    dataset: ColumnSource, args: _Arguments, scratch: Path, budget: _Budget, run: DatasetRun
) -> None:
    """Write every protected column, clamped or encoded, at its rows' places."""
    total = len(args.numeric) + len(args.categorical)
    for i, column in enumerate(args.numeric):
        run.tick("values", i, total)
        lower, upper = args.domains[column.name]
        run.clamped[str(column.name)] = _write_numeric(
            dataset, column, lower, upper, _values_path(scratch, column.name), budget
        )
    for i, cat in enumerate(args.categorical):
        run.tick("values", len(args.numeric) + i, total)
        _write_codes(dataset, cat, _values_path(scratch, cat.name), budget)
    run.tick("values", total, total)


def _positional(
    dataset: ColumnSource,
    name: Hashable,
    path: Path,
    budget: _Budget,
    convert: Callable[[pa.Array, int], tuple[np.ndarray, int]],
) -> int:
    """Write ``convert(batch)`` of every batch at its rows' places; return the counts' sum.

    The batches come back to this process to be written (a source may run them elsewhere).
    """

    def batch(array: pa.Array, first_row: int) -> tuple[int, np.ndarray, int]:
        return (first_row, *convert(array, first_row))

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    total = 0
    try:
        for first_row, values, count in dataset.map_column(str(name), budget.batch_rows, batch):
            write_at(fd, values, first_row * 8)
            total += count
    finally:
        os.close(fd)
    return total


def _write_numeric(
    dataset: ColumnSource,
    column: NumericColumn,
    lower: float,
    upper: float,
    path: Path,
    budget: _Budget,
) -> int:
    """Write a numeric column clamped to its bounds; return the values outside them."""

    def convert(array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        values = _numeric_values(array, column, first_row, method="mdav_dp")
        outside = int(np.count_nonzero(values < lower) + np.count_nonzero(values > upper))
        return np.clip(values, lower, upper) + 0.0, outside  # + 0.0 turns -0.0 into 0.0

    return _positional(dataset, column.name, path, budget, convert)


def _write_codes(
    dataset: ColumnSource, cat: CategoricalColumn, path: Path, budget: _Budget
) -> None:
    """Write a categorical column as int64 codes of its taxonomy's domain."""

    def convert(array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        encoded = array if pa.types.is_dictionary(array.type) else array.dictionary_encode()
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        if encoded.indices.null_count:
            missing = encoded.indices.is_null().to_numpy(zero_copy_only=False)
            indices = np.where(missing, -1, indices)
        codes = cat.taxonomy.encode_categories(
            indices.astype(np.int64), encoded.dictionary.to_pylist(), column=cat.name
        )
        return np.asarray(codes, dtype=np.int64), 0

    _positional(dataset, cat.name, path, budget, convert)


def _read_rows(path: Path, dtype: Any, first: int, count: int) -> np.ndarray:
    """Read rows ``[first, first + count)`` of a scratch file of 8-byte values."""
    return np.fromfile(path, dtype, count, offset=first * 8)


def _chunks(n: int, rows: int) -> Iterator[tuple[int, int]]:
    for first in range(0, n, rows):
        yield first, min(rows, n - first)


def _attributes(
    scratch: Path, args: _Arguments, first: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Read rows ``[first, first + count)`` of the clamped values and of the codes."""
    values = np.empty((count, len(args.numeric)), dtype=np.float64)
    for j, column in enumerate(args.numeric):
        values[:, j] = _read_rows(_values_path(scratch, column.name), np.float64, first, count)
    codes = np.empty((count, len(args.categorical)), dtype=np.int64)
    for j, cat in enumerate(args.categorical):
        codes[:, j] = _read_rows(_values_path(scratch, cat.name), np.int64, first, count)
    return values, codes


# -- passes 2 and 3: keys and sorted orders ----------------------------------------------


def _keys_path(scratch: Path, point: int) -> Path:
    return scratch / f"keys-{point}.bin"


def _order_path(scratch: Path, point: int) -> Path:
    return scratch / f"order-{point}.bin"


def _orders(
    scratch: Path, args: _Arguments, geometry: _Geometry, n: int, budget: _Budget, run: DatasetRun
) -> list[Path]:
    """Write every row's key to each point, then each point's order of all rows."""
    n_points = geometry.points.shape[0]
    files = [open(_keys_path(scratch, p), "wb") for p in range(n_points)]
    try:
        for first, count in _chunks(n, budget.chunk_rows):
            values, codes = _attributes(scratch, args, first, count)
            for p in range(n_points):
                keys = mdav_kernels.reference_keys(
                    values, geometry.points[p], geometry.widths, codes, geometry.terms[p]
                )
                append_array(files[p], mdav_stream.orderable_bits(keys))
            run.tick("distance keys", first + count, n)
    finally:
        for file in files:
            file.close()
    orders = []
    for p in range(n_points):
        _sort_point(scratch, args, p, n, budget, run)
        _keys_path(scratch, p).unlink()
        orders.append(_order_path(scratch, p))
    return orders


def _select(bits: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Return a mask of the words in ``[lo, hi)``."""
    inside = bits >= np.uint64(lo)
    if hi < _KEY_SPACE:
        inside &= bits < np.uint64(hi)
    return inside


@dataclass(frozen=True)
class _Components:
    """The sort's components as uint64 words in order: the key, the values, the codes."""

    scratch: Path
    args: _Arguments
    keys_path: Path

    @property
    def count(self) -> int:
        return 1 + len(self.args.numeric) + len(self.args.categorical)

    def words(self, level: int, first: int, count: int) -> np.ndarray:
        """Return component ``level`` of rows ``[first, first + count)`` as ordered words."""
        if level == 0:
            return _read_rows(self.keys_path, np.uint64, first, count)
        m = len(self.args.numeric)
        if level <= m:
            path = _values_path(self.scratch, self.args.numeric[level - 1].name)
            words: np.ndarray = mdav_stream.orderable_bits(
                _read_rows(path, np.float64, first, count)
            )
            return words
        path = _values_path(self.scratch, self.args.categorical[level - 1 - m].name)
        codes = _read_rows(path, np.int64, first, count)
        return codes.view(np.uint64) ^ np.uint64(1 << 63)

    def select(
        self, prefix: Sequence[int], lo: int, hi: int, first: int, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return the positions of the chunk's rows equal to ``prefix``, next word in ``[lo, hi)``.

        Also returns those rows' next words.
        """
        level = len(prefix)
        bits = self.words(level, first, count)
        inside = _select(bits, lo, hi)
        for j, word in enumerate(prefix):
            inside &= self.words(j, first, count) == np.uint64(word)
        where = np.flatnonzero(inside)
        return where, bits[where]


def _sort_point(
    scratch: Path, args: _Arguments, point: int, n: int, budget: _Budget, run: DatasetRun
) -> None:
    """Append the rows sorted by (key, values, codes, row) to the point's order file.

    Ranges of keys that fit are sorted in memory; a single key held by more rows than fit
    is cut by the next component (the values, then the codes) in the same way, and rows
    equal in every component are written in row order.
    """
    components = _Components(scratch, args, _keys_path(scratch, point))
    capacity = budget.sorted_rows
    done = [0]

    def histogram(prefix: Sequence[int], lo: int, hi: int, shift: int) -> np.ndarray:
        counts = np.zeros(((hi - 1 - lo) >> shift) + 1, dtype=np.int64)
        for first, count in _chunks(n, budget.chunk_rows):
            _, inside = components.select(prefix, lo, hi, first, count)
            buckets = ((inside - np.uint64(lo)) >> np.uint64(shift)).astype(np.int64)
            counts += np.bincount(buckets, minlength=counts.shape[0])
        return counts

    def tick(held: int) -> None:
        done[0] += held
        run.tick(f"order {point + 1}", done[0], n)

    def level(prefix: list[int]) -> Callable[[int, int, int], None]:
        def ranked(lo: int, hi: int, first_rank: int, held: int) -> None:
            process(lo, hi, held)

        def process(lo: int, hi: int, held: int) -> None:
            if held <= capacity:
                _sort_range(components, prefix, order, lo, hi, n, budget)
                tick(held)
            elif hi - lo > 1:
                shift = refined_shift(lo, hi)
                cut_ranges(histogram(prefix, lo, hi, shift), lo, hi, shift, 0, capacity, ranked)
            elif len(prefix) + 1 < components.count:  # one word: cut by the next component
                level([*prefix, lo])(0, _KEY_SPACE, held)
            else:  # equal in every component: row order
                for first, count in _chunks(n, budget.chunk_rows):
                    where, _ = components.select(prefix, lo, hi, first, count)
                    append_array(order, where + first)
                tick(held)

        return process

    with open(_order_path(scratch, point), "wb") as order:
        level([])(0, _KEY_SPACE, n)


def _sort_range(
    components: _Components,
    prefix: Sequence[int],
    order: Any,
    lo: int,
    hi: int,
    n: int,
    budget: _Budget,
) -> None:
    """Collect the rows of ``prefix`` whose next word lies in ``[lo, hi)``; sort; append them."""
    words_parts, row_parts = [], []
    for first, count in _chunks(n, budget.chunk_rows):
        where, words = components.select(prefix, lo, hi, first, count)
        words_parts.append(words)
        row_parts.append(where + first)
    rows = np.concatenate(row_parts)  # ascending
    keys = (
        np.concatenate(words_parts) if not prefix else np.full(rows.shape[0], np.uint64(prefix[0]))
    )
    del words_parts, row_parts
    by_key = np.argsort(keys)  # distinct keys have one order; ties are sorted again below
    ordered = keys[by_key]
    if rows.shape[0] > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        # ties: values, then codes, lexicographically, then the row (lexsort is stable)
        del ordered, by_key
        args = components.args
        values, codes = _gather_attributes(components.scratch, args, rows, n, budget)
        lexicographic = [codes[:, j] for j in range(codes.shape[1] - 1, -1, -1)]
        lexicographic += [values[:, j] for j in range(values.shape[1] - 1, -1, -1)]
        by_key = np.lexsort([*lexicographic, keys])
    append_array(order, rows[by_key])


def _gather_attributes(
    scratch: Path, args: _Arguments, rows: np.ndarray, n: int, budget: _Budget
) -> tuple[np.ndarray, np.ndarray]:
    """Return the clamped values and codes of ``rows`` (ascending), read chunk by chunk."""
    values = np.empty((rows.shape[0], len(args.numeric)), dtype=np.float64)
    codes = np.empty((rows.shape[0], len(args.categorical)), dtype=np.int64)
    for first, count in _chunks(n, budget.chunk_rows):
        a, b = np.searchsorted(rows, [first, first + count])
        if a == b:
            continue
        inside = rows[a:b] - first
        chunk_values, chunk_codes = _attributes(scratch, args, first, count)
        values[a:b] = chunk_values[inside]
        codes[a:b] = chunk_codes[inside]
    return values, codes


# -- pass 4: the merge -----------------------------------------------------------------


def _labels_path(scratch: Path) -> Path:
    return scratch / "clusters.bin"


def _merge(
    scratch: Path,
    orders: Sequence[Path],
    sequence: np.ndarray,
    k: int,
    n: int,
    budget: _Budget,
    run: DatasetRun,
) -> np.ndarray:
    """Form the clusters; write each row's cluster (in formation order) to the labels file.

    Returns the first row of every cluster, in formation order.
    """
    n_steps = sequence.shape[0]
    first_rows = np.full(n_steps + 1, n, dtype=np.int64)
    bucket_rows = budget.bucket_rows
    n_buckets = (n + bucket_rows - 1) // bucket_rows
    buckets = [scratch / f"taken-{b}.bin" for b in range(n_buckets)]
    if n_steps:
        _take(orders, sequence, k, n, buckets, budget, first_rows, run)
    with open(_labels_path(scratch), "wb") as labels_file:
        for b in range(n_buckets):
            first = b * bucket_rows
            labels = np.full(min(bucket_rows, n - first), n_steps, dtype=np.int64)
            if buckets[b].exists():
                pairs = np.fromfile(buckets[b], np.int64).reshape(-1, 2)
                labels[pairs[:, 0] - first] = pairs[:, 1]
                del pairs
                buckets[b].unlink()
            if first_rows[n_steps] == n:
                rest = np.flatnonzero(labels == n_steps)
                if rest.shape[0]:
                    first_rows[n_steps] = first + int(rest[0])
            append_array(labels_file, labels)
    return first_rows


def _take(
    orders: Sequence[Path],
    sequence: np.ndarray,
    k: int,
    n: int,
    buckets: Sequence[Path],
    budget: _Budget,
    first_rows: np.ndarray,
    run: DatasetRun,
) -> None:
    """Run the streamed merge; file each row taken, with its cluster, by row range."""
    n_points = len(orders)
    width = budget.merge_rows
    buffers = np.zeros((n_points, width), dtype=np.int64)
    starts = np.zeros(n_points, dtype=np.int64)
    stops = np.zeros(n_points, dtype=np.int64)
    cursors = [0] * n_points
    taken = np.zeros((n + 7) // 8, dtype=np.uint8)
    out = np.empty(width, dtype=np.int64)
    state = np.zeros(3, dtype=np.int64)
    emitted = 0
    while True:
        status = mdav_stream.merge_orders(buffers, starts, stops, sequence, state, k, taken, out)
        if status < 0:
            filled = int(state[2])
            _file_taken(out[:filled], emitted, k, buckets, budget.bucket_rows, first_rows)
            emitted += filled
            state[2] = 0
            run.tick("clusters", int(state[0]), sequence.shape[0])
            if status == mdav_stream.MERGE_DONE:
                return
            continue
        read = _read_rows(orders[status], np.int64, cursors[status], width)
        if read.shape[0] == 0:  # pragma: no cover - an order holds every row
            raise AssertionError("an order ran out of rows before its clusters were formed")
        buffers[status, : read.shape[0]] = read
        starts[status], stops[status] = 0, read.shape[0]
        cursors[status] += read.shape[0]


def _file_taken(
    rows: np.ndarray,
    emitted: int,
    k: int,
    buckets: Sequence[Path],
    bucket_rows: int,
    first_rows: np.ndarray,
) -> None:
    """Append ``(row, cluster)`` of the rows taken to the files of their row ranges."""
    if rows.shape[0] == 0:
        return
    clusters = (emitted + np.arange(rows.shape[0], dtype=np.int64)) // k
    np.minimum.at(first_rows, clusters, rows)
    which = rows // bucket_rows
    by_bucket = np.argsort(which, kind="stable")
    pairs = np.column_stack([rows[by_bucket], clusters[by_bucket]])
    edges = np.searchsorted(which[by_bucket], np.arange(len(buckets) + 1))
    for b in np.flatnonzero(edges[1:] > edges[:-1]).tolist():
        with open(buckets[b], "ab") as file:
            append_array(file, pairs[edges[b] : edges[b + 1]])


# -- pass 5: centroids -----------------------------------------------------------------


def _centroids(
    scratch: Path,
    args: _Arguments,
    plan: _Plan,
    source: noise.NoiseSource,
    rank: np.ndarray,
    n: int,
    budget: _Budget,
    run: DatasetRun,
) -> dict[Hashable, np.ndarray]:
    """Every cluster's released value per column (clusters in formation order).

    Numeric: float64 values; categorical: codes of the taxonomy's domain. Noise is drawn
    for the clusters numbered by first appearance, as in memory.
    """
    n_clusters = rank.shape[0]
    sums = {c.name: np.zeros(n_clusters, dtype=np.int64) for c in args.numeric}
    sizes = np.zeros(n_clusters, dtype=np.int64)
    histograms = {
        c.name: np.zeros(n_clusters * len(c.taxonomy.domain), dtype=np.int64)
        for c in args.categorical
    }
    for first, count in _chunks(n, budget.chunk_rows):
        labels = _read_rows(_labels_path(scratch), np.int64, first, count)
        sizes += np.bincount(labels, minlength=n_clusters)
        for column in args.numeric:
            grid, _ = plan.grids[column.name]
            values = _read_rows(_values_path(scratch, column.name), np.float64, first, count)
            part, _, _ = mdav_kernels.cluster_grid_sums(
                values, labels, n_clusters, grid.lower, grid.upper, grid.gamma, grid.d_int
            )
            sums[column.name] += part
        for cat in args.categorical:
            codes = _read_rows(_values_path(scratch, cat.name), np.int64, first, count)
            flat = labels * len(cat.taxonomy.domain) + codes
            histograms[cat.name] += np.bincount(flat, minlength=histograms[cat.name].shape[0])
        run.tick("cluster sums", first + count, n)
    released: dict[Hashable, np.ndarray] = {}
    for column in args.numeric:
        released[column.name] = _numeric_centroids(
            column, args, plan, source, rank, sums.pop(column.name), sizes
        )
        plan.ledger.spend(plan.entries[column.name])
        run.released[column.name] = np.empty(0)
        lower, upper = args.domains[column.name]
        on_bound = (released[column.name] <= lower) | (released[column.name] >= upper)
        run.on_bound[str(column.name)] = int(sizes[on_bound].sum())
    for cat in args.categorical:
        counts = histograms.pop(cat.name).reshape(n_clusters, -1)
        released[cat.name] = _categorical_choices(cat, plan, source, rank, counts)
        plan.ledger.spend(plan.entries[cat.name])
        run.released[cat.name] = np.empty(0)
        run.clamped[str(cat.name)] = 0
    return released


def _numeric_centroids(
    column: NumericColumn,
    args: _Arguments,
    plan: _Plan,
    source: noise.NoiseSource,
    rank: np.ndarray,
    sums: np.ndarray,
    sizes: np.ndarray,
) -> np.ndarray:
    """Each cluster's noisy centroid, as released (float64, rounded where integer)."""
    grid, steps = plan.grids[column.name]
    n_clusters = rank.shape[0]
    draws = noise.discrete_laplace(
        source.key("mdav_dp", "centroid-noise", str(column.name)), steps, n_clusters
    )
    values = mdav_kernels.noisy_cluster_values(sums, sizes, draws[rank], grid.d_int)
    out = np.empty(n_clusters, dtype=np.float64)
    mdav_kernels.broadcast_clusters(
        np.arange(n_clusters, dtype=np.int64),
        values,
        grid.lower,
        grid.upper,
        grid.gamma,
        column.integer,
        np.empty(0, dtype=np.int64),
        out,
    )
    return out


def _categorical_choices(
    cat: CategoricalColumn,
    plan: _Plan,
    source: noise.NoiseSource,
    rank: np.ndarray,
    counts: np.ndarray,
) -> np.ndarray:
    """Each cluster's value by the exponential mechanism, as codes (formation order)."""
    em_epsilon, em_sensitivity = plan.choices[cat.name]
    if em_sensitivity <= 0:  # a one-value domain: nothing to choose
        return np.zeros(rank.shape[0], dtype=np.int64)
    quality = np.empty((rank.shape[0], counts.shape[1]), dtype=np.int64)
    quality[rank] = -(counts @ distance_units(cat.taxonomy.distance_matrix()))
    chosen = noise.exponential_mechanism(
        source.key("mdav_dp", "centroid-choice", str(cat.name)),
        quality,
        epsilon=em_epsilon,
        sensitivity=em_sensitivity,
    )
    codes: np.ndarray = np.asarray(chosen, dtype=np.int64)[rank]
    return codes


# -- pass 6: output order --------------------------------------------------------------


def _write_in_order(
    scratch: Path,
    args: _Arguments,
    cluster_values: Mapping[Hashable, np.ndarray],
    source: noise.NoiseSource,
    n: int,
    budget: _Budget,
    run: DatasetRun,
) -> None:
    """Write each released column in output order: row ``r`` holds input row ``order[r]``."""
    key = source.key("mdav_dp", "row-order")
    sizes = noise.permutation_bucket_sizes(key, n)
    labels_path = _labels_path(scratch)
    whole = _read_rows(labels_path, np.int64, 0, n) if n * 8 <= budget.work // 4 else None
    files = {name: open(scratch / _scratch_name(name), "wb") for name in cluster_values}
    try:
        lo, done = 0, 0
        while lo < sizes.shape[0]:
            hi, held = lo, 0
            while hi < sizes.shape[0] and (hi == lo or held + sizes[hi] <= budget.ordered_rows):
                held += int(sizes[hi])
                hi += 1
            rows = noise.permutation_part(key, n, lo, hi, sizes)
            labels = (
                whole[rows] if whole is not None else _gather_labels(labels_path, rows, n, budget)
            )
            del rows
            for name, values in cluster_values.items():
                append_array(files[name], values[labels])
            done += labels.shape[0]
            run.tick("output order", done, n)
            lo = hi
    finally:
        for file in files.values():
            file.close()


def _gather_labels(path: Path, rows: np.ndarray, n: int, budget: _Budget) -> np.ndarray:
    """Return the clusters of ``rows`` (any order), read from the labels file by chunks."""
    by_row = np.argsort(rows)  # distinct rows
    ordered = rows[by_row]
    out = np.empty(rows.shape[0], dtype=np.int64)
    for first, count in _chunks(n, budget.chunk_rows):
        a, b = np.searchsorted(ordered, [first, first + count])
        if a < b:
            chunk = _read_rows(path, np.int64, first, count)
            out[by_row[a:b]] = chunk[ordered[a:b] - first]
    return out
