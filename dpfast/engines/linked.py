"""Record-linked ``ir_dp`` and unprotected columns out of core (docs/engines.md#linked).

:func:`ir_dp_dataset` gives the release of :func:`dpfast.ir_dp` with any ``linkage``,
``shuffle`` and ``unprotected`` policy (the column engine's own
:func:`dpfast.engines.outofcore.ir_dp_dataset` sends those here); the unprotected
columns of ``laplace_dp`` come through :func:`unprotected_scratch`.

Record-linked numeric column:

1. **Ranks.** Rows are ranked by (grid value, input row), as
   :func:`dpfast.methods.ir_dp._numeric.release_linked` does in memory
   (:class:`~.ranks.RankPasses`): the grid is cut into ranges that fit the memory limit
   by histograms of the grid values' top bits; each range's ``(grid value, row)`` words
   are collected, sorted, added to the group sums, and its rows are written to a scratch
   file in rank order. A range of one grid value too long to sort (a long tie) is ranked
   by row: one pass counts its rows per batch, a second writes them at their ranks.
2. **Group values.** The noisy value of each rank group, from the same key as in memory.
3. **Placement.** The rank-ordered file is read back in parts; each row's released value
   (its rank group's) goes, with its row id, through a :class:`~.placement.Placer` into
   input order and then, when rows are shuffled, through a second one into the order of
   the row permutation ``("ir_dp", "row-order")``.

A record-linked categorical column needs no sort: a pass counts each batch's values per
taxonomy rank, which gives every batch's first rank per value; a second pass gives each
row its rank, hence its group's value, and places it. Unprotected columns are placed as
they are read: in input order, in the rows' permutation (``"keep"``), or in a
permutation of their own (``"shuffle"``, key ``(method, "unprotected-order")``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import ranking
from dpfast._release import (
    CategoricalColumn,
    NumericColumn,
    check_unprotected,
    column_threads,
    noise_source,
    option,
    warn_unproven,
)
from dpfast._validation import check_bool, check_choice
from dpfast.accounting import LedgerEntry, PrivateReport, Report
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.engines.outofcore._legacy import (
    BATCH_ROWS,
    DatasetRun,
    Progress,
    ScratchColumn,
    _arguments,
    _check_groups_fit,
    _Limits,
    _numeric_group_values,
    _numeric_values,
    _on_bound,
    _rank_counts,
    _scratch_beside,
    _scratch_name,
    _write_and_publish,
    _write_in_order,
    coded_scratch,
    numeric_scratch,
)
from dpfast.engines.outofcore._placement import ArrowFile, Placer, raw_sink
from dpfast.engines.outofcore._ranks import RankPasses
from dpfast.methods.ir_dp import Linkage, _guarantee, _parameters, _plan, _policy, _sampler
from dpfast.methods.ir_dp._categorical import group_codes
from dpfast.partitions.grid import Grid

#: Bytes of working memory per row of a part scattered to a placer's ranges: the rows,
#: their values and groups, the ranges, their order, and the pieces cut from them.
_BYTES_PER_SCATTERED_ROW = 96


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

    The release of :func:`dpfast.ir_dp` with the same ``linkage``, ``shuffle`` and
    ``unprotected``; the other arguments as for
    :func:`dpfast.engines.outofcore.ir_dp_dataset`. Returns the public and the private
    report.
    """
    start = time.perf_counter()
    run = DatasetRun("ir_dp", None, progress, dataset=dataset)
    limits = _Limits(int(memory_limit), int(batch_rows))
    with run.phase("validate"):
        args = _arguments(
            dataset, k, epsilon, bounds, integer, taxonomies, columns, sensitivity, seed
        )
        linkage = check_choice(linkage, "linkage", ("records", "columns"))
        shuffle = check_bool(shuffle, "shuffle")
        if linkage == "columns" and not shuffle:
            raise ValueError(
                f"{option('linkage', 'columns')} shuffles every protected column; "
                f"drop {option('shuffle', False)} or choose {option('linkage', 'records')}"
            )
        args = replace(args, linkage=cast(Linkage, linkage), shuffle=shuffle)
        run.policy = _policy(check_unprotected(unprotected), args.linkage)
        guarantee = _guarantee(args)
        if guarantee[1] in ("as_published", "heuristic"):
            warn_unproven(guarantee[0])
    source = noise_source(args.seed)
    linked = args.linkage == "records"
    row_key = source.key("ir_dp", "row-order") if linked and args.shuffle else None
    with run.phase("plan"):
        plan = _plan(args, dataset.n_rows)
        workers = column_threads(n_threads, len(args.numeric) or 1)
        share = _Limits(max(1, limits.memory // workers), limits.batch_rows)
        _check_groups_fit(dataset.n_rows, args, share)
    target = Path(output)
    n = dataset.n_rows
    with _scratch_beside(target) as scratch:
        counts = {}
        if not linked:  # the categorical columns' counts first: they check the values
            for cat in args.categorical:
                with run.phase("columns"):
                    run.tick(f"column {cat.name}", 0, 1)
                    counts[cat.name] = _rank_counts(dataset, cat, limits)

        def numeric(column: NumericColumn) -> tuple[int, int]:
            grid, steps = plan.grids[column.name]
            if linked:
                values, clamped = _linked_numeric(
                    dataset, column, grid, args.k, steps, source, share, scratch, row_key, run
                )
            else:
                values, clamped = _numeric_group_values(
                    dataset, column, grid, args.k, steps, source, share, run
                )
                _write_in_order(scratch, column.name, values, args.k, source, n, share)
            lower, upper = args.domains[column.name]
            return clamped, _on_bound(values, n, args.k, lower, upper)

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
                if linked:
                    _linked_categorical(
                        dataset, cat, args.k, key, entry, limits, scratch, row_key, run
                    )
                else:
                    codes = group_codes(cat.taxonomy, counts[cat.name], args.k, key, entry)
                    _write_in_order(scratch, cat.name, codes, args.k, source, n, limits)
            plan.ledger.spend(plan.entries[cat.name])
            run.released[cat.name] = np.empty(0)
            run.clamped[str(cat.name)] = 0
        keep_key = row_key if linked else None
        copied = unprotected_scratch(dataset, scratch, run, source, keep_key, limits)
        report, private = run.reports(
            parameters=_parameters(args),
            guarantee=guarantee,
            ledger=plan.ledger,
            seed=args.seed,
            sampler=_sampler(args),
            domains=args.domains,
            groups="rank group" if linked else None,
        )
        made = {str(c.name): numeric_scratch(scratch, c) for c in args.numeric}
        made.update({str(c.name): _labels_scratch(scratch, c, dataset) for c in args.categorical})
        made.update(copied)
        written = [made[name] for name in dataset.names if name in made]
        _write_and_publish(scratch, target, written, run, report, before_publish, after_publish)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def _labels_scratch(scratch: Path, cat: CategoricalColumn, dataset: ColumnSource) -> ScratchColumn:
    """Return a categorical column's codes as its taxonomy's labels, of the input's type.

    As in memory (``TableData.categorical_output``): a dictionary column gets a dictionary
    of the taxonomy's leaves, any other column strings of its own Arrow type.
    """
    original = dataset.schema.field(str(cat.name)).type
    labels = pa.array(list(cat.taxonomy.domain), pa.string())
    coded = coded_scratch(scratch, cat.name, labels)
    if pa.types.is_dictionary(original):
        path = scratch / _scratch_name(cat.name)

        def dictionary(first: int, count: int) -> pa.Array:
            codes = np.fromfile(path, np.int64, count, offset=first * 8)
            return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), labels)

        return ScratchColumn(coded.name, pa.dictionary(pa.int32(), pa.string()), dictionary)
    if original == pa.string():
        return coded

    def cast(first: int, count: int) -> pa.Array:
        return coded.read(first, count).cast(original)

    return ScratchColumn(coded.name, original, cast, dictionary=True)


def _tag(name: Hashable, kind: str) -> str:
    """Return a scratch name for one column's files of ``kind``, safe whatever the name."""
    return f"{kind}-{hashlib.sha256(str(name).encode('utf-8')).hexdigest()[:32]}"


def _place_numeric(
    scratch: Path, name: Hashable, key: np.ndarray | None, n: int, limits: _Limits
) -> tuple[Placer, Callable[[], None], Callable[[], None]]:
    """Return a placer of by-row float64 values into the column's scratch file.

    With ``key`` the values go through input order into the permutation's order. Returns
    the placer, what writes the placed values once every piece is added, and what closes
    the files however the work ends.
    """
    write, close_sink = raw_sink(scratch / _scratch_name(name), np.dtype(np.float64))
    by_row = Placer(scratch, _tag(name, "by-row"), n, None, pa.float64(), 8, limits.memory)
    shuffled = None
    if key is not None:
        shuffled = Placer(scratch, _tag(name, "shuffled"), n, key, pa.float64(), 8, limits.memory)

    def finish() -> None:
        if shuffled is None:
            by_row.finish(write)
        else:
            by_row.finish(lambda values, first: shuffled.add(values, first=first))
            shuffled.finish(write)

    def close() -> None:
        by_row.close()
        if shuffled is not None:
            shuffled.close()
        close_sink()

    return by_row, finish, close


def _linked_numeric(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    k: int,
    steps: int,
    source: noise.NoiseSource,
    limits: _Limits,
    scratch: Path,
    row_key: np.ndarray | None,
    run: DatasetRun,
) -> tuple[np.ndarray, int]:
    """Release a record-linked numeric column into its scratch file, in output order.

    Returns every rank group's value and the clamped count.
    """
    n = dataset.n_rows
    ranked = scratch / (_tag(column.name, "ranked") + ".bin")
    fd = os.open(ranked, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        sums, clamped = _rank_numeric(dataset, column, grid, k, limits, fd, run)
    finally:
        os.close(fd)
    draws = noise.discrete_laplace(
        source.key("ir_dp", "centroid-noise", str(column.name)), steps, n // k
    )
    values = ranking.noisy_group_values(
        sums, n, k, draws, grid.d_int, grid.lower, grid.upper, grid.gamma, column.integer
    )
    place_ranked(scratch, column.name, ranked, values, k, row_key, n, limits)
    return values, clamped


def place_ranked(
    scratch: Path,
    name: Hashable,
    ranked: Path,
    group_values: np.ndarray,
    k: int,
    key: np.ndarray | None,
    n: int,
    limits: _Limits,
) -> None:
    """Give every row its rank group's value, in output order, in the column's scratch file.

    ``ranked`` holds the rows in rank order (:class:`~.ranks.RankPasses`); it is read
    back in parts and removed. ``key`` as for :func:`_place_numeric`.
    """
    placer, finish, close = _place_numeric(scratch, name, key, n, limits)
    step = max(1024, limits.memory // _BYTES_PER_SCATTERED_ROW)
    last = group_values.shape[0] - 1
    try:
        for first in range(0, n, step):
            count = min(step, n - first)
            rows = np.fromfile(ranked, np.int64, count, offset=first * 8)
            groups = np.minimum(np.arange(first, first + count, dtype=np.int64) // k, last)
            placer.add(pa.array(group_values[groups]), rows=rows)
            del rows, groups
        ranked.unlink()
        finish()
    finally:
        close()


def _rank_numeric(
    dataset: ColumnSource,
    column: NumericColumn,
    grid: Grid,
    k: int,
    limits: _Limits,
    fd: int,
    run: DatasetRun,
) -> tuple[np.ndarray, int]:
    """Rank a column's rows by (grid value, row): write the rows in rank order to ``fd``.

    Returns the exact integer sum of every rank group's grid values, and the clamped count.
    """
    sums = np.zeros(dataset.n_rows // k, dtype=np.int64)
    passes = [0]

    def tick() -> None:
        passes[0] += 1
        run.tick(f"column {column.name}", passes[0], passes[0] + 1)

    def keys(array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
        values = _numeric_values(array, column, first_row)
        q, clamped = ranking.quantise_column(values, grid.lower, grid.upper, grid.gamma, grid.d_int)
        return q, int(clamped)

    def on_sorted(sorted_keys: np.ndarray, first_rank: int) -> None:
        ranking.add_group_sums(sorted_keys, 0, first_rank, k, sums)

    def on_run(key: int, count: int, first_rank: int) -> None:
        ranking.add_group_run(key, count, first_rank, k, sums)

    passes_ = RankPasses(dataset, str(column.name), keys, limits.batch_rows, limits.memory, tick)
    clamped = passes_.rank(grid.d_int + 1, fd, on_sorted, on_run)
    return sums, clamped


def _category_ranks(array: pa.Array, cat: CategoricalColumn) -> np.ndarray:
    """One batch of a categorical column as taxonomy ranks, refusing values not in it."""
    taxonomy = cat.taxonomy
    encoded = array if pa.types.is_dictionary(array.type) else array.dictionary_encode()
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    if encoded.indices.null_count:
        missing = encoded.indices.is_null().to_numpy(zero_copy_only=False)
        indices = np.where(missing, -1, indices)
    codes = taxonomy.encode_categories(
        indices.astype(np.int64), encoded.dictionary.to_pylist(), column=cat.name
    )
    return np.asarray(taxonomy.rank, dtype=np.int64)[np.asarray(codes, dtype=np.int64)]


def _linked_categorical(
    dataset: ColumnSource,
    cat: CategoricalColumn,
    k: int,
    key: np.ndarray,
    entry: LedgerEntry,
    limits: _Limits,
    scratch: Path,
    row_key: np.ndarray | None,
    run: DatasetRun,
) -> None:
    """Release a record-linked categorical column into its scratch file, in output order.

    Rows are ranked by (taxonomy rank of their value, row), as in memory.
    """
    n, m = dataset.n_rows, len(cat.taxonomy.domain)
    name = str(cat.name)
    run.tick(f"column {name}", 0, 2)

    def count(array: pa.Array, first_row: int) -> tuple[int, np.ndarray]:
        return first_row, np.bincount(_category_ranks(array, cat), minlength=m)

    per_batch = sorted(dataset.map_column(name, limits.batch_rows, count), key=lambda p: p[0])
    totals = np.zeros(m, dtype=np.int64)
    for _, part in per_batch:
        totals += part
    codes = group_codes(cat.taxonomy, totals, k, key, entry)
    last = codes.shape[0] - 1
    offsets = {}
    running = np.concatenate(([0], np.cumsum(totals)[:-1])).astype(np.int64)
    for first_row, part in per_batch:
        offsets[first_row] = running.copy()
        running += part
    del per_batch

    def released(array: pa.Array, first_row: int) -> tuple[int, np.ndarray]:
        ranks = _category_ranks(array, cat)
        by_rank = np.argsort(ranks, kind="stable")
        ordered = ranks[by_rank]
        within = np.arange(ordered.shape[0]) - np.searchsorted(ordered, ordered, side="left")
        position = np.empty(ranks.shape[0], dtype=np.int64)
        position[by_rank] = offsets[first_row][ordered] + within
        return first_row, codes[np.minimum(position // k, last)]

    run.tick(f"column {name}", 1, 2)
    write, close = raw_sink(scratch / _scratch_name(cat.name), np.dtype(np.int64))
    placer = Placer(scratch, _tag(name, "placed"), n, row_key, pa.int64(), 8, limits.memory)
    try:
        for first_row, out in dataset.map_column(name, limits.batch_rows, released):
            placer.add(pa.array(out), first=first_row)
        placer.finish(write)
    finally:
        placer.close()
        close()


def unprotected_scratch(
    dataset: ColumnSource,
    scratch: Path,
    run: DatasetRun,
    source: noise.NoiseSource | None,
    keep_key: np.ndarray | None,
    limits: _Limits,
) -> dict[str, ScratchColumn]:
    """Place the columns the release does not protect as ``run.policy`` says, in scratch.

    ``"drop"``: none. ``"shuffle"``: in the permutation of the key ``(method,
    "unprotected-order")``, as :meth:`dpfast._release.Run.assemble` draws it. ``"keep"``:
    in the rows' order, the permutation of ``keep_key`` (``None``: the input order).
    Returns the scratch columns by name, of the dataset's own Arrow types.
    """
    names = run.unprotected()
    if run.policy == "drop" or not names:
        return {}
    if run.policy == "shuffle":
        if source is None:
            raise AssertionError("a shuffle of the unprotected columns needs a source")
        key: np.ndarray | None = source.key(run.method, "unprotected-order")
    else:
        key = keep_key
    made = {}
    with run.phase("unprotected"):
        for i, name in enumerate(names):
            run.tick("unprotected columns", i, len(names))
            made[name] = _copied_column(dataset, scratch, name, key, limits)
    return made


def _copied_column(
    dataset: ColumnSource, scratch: Path, name: str, key: np.ndarray | None, limits: _Limits
) -> ScratchColumn:
    """Place one column unchanged, of any Arrow type, into an Arrow file in output order.

    The column keeps the type of its batches (a source that casts a declared type, as
    the CLI's schema does, gives the cast type); a dictionary column stays one.
    """
    declared = dataset.schema.field(name).type
    dictionary = pa.types.is_dictionary(declared)
    try:
        row_bytes = float(max(1, (declared.value_type if dictionary else declared).bit_width // 8))
    except ValueError:  # variable width: the column's average, from one pass
        sizes = dataset.map_column(name, limits.batch_rows, lambda a, _f: a.nbytes)
        row_bytes = sum(sizes) / max(1, dataset.n_rows)

    def plain(array: pa.Array, first_row: int) -> tuple[int, pa.Array]:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        return first_row, array

    out: ArrowFile | None = None
    placer: Placer | None = None
    try:
        for first_row, array in dataset.map_column(name, limits.batch_rows, plain):
            if out is None or placer is None:  # the batches' type (a source may cast it)
                out = ArrowFile(scratch / (_tag(name, "copied") + ".arrow"), array.type)
                placer = Placer(
                    scratch,
                    _tag(name, "copy"),
                    dataset.n_rows,
                    key,
                    array.type,
                    row_bytes,
                    limits.memory,
                )
            placer.add(
                array.cast(out.arrow_type) if array.type != out.arrow_type else array,
                first=first_row,
            )
        assert placer is not None and out is not None  # a dataset has rows
        placer.finish(out.write)
    finally:
        if placer is not None:
            placer.close()
        if out is not None:
            out.close()
    value_type = out.arrow_type
    arrow_type = pa.dictionary(declared.index_type, value_type) if dictionary else value_type

    def read(first: int, count: int) -> pa.Array:
        values = out.read(first, count)
        return values.dictionary_encode().cast(arrow_type) if dictionary else values

    return ScratchColumn(name, arrow_type, read)
