"""Out-of-core row-wise mechanisms over a Parquet dataset (docs/engines.md#row-wise-mechanisms).

``randomized_response``, ``k_noise`` and ``k_pram`` release every row on its own: row
``i``'s draws read word ``i`` of its column's keyed stream (and, rarely, the stream of
nonce ``i + 1``), whatever batch row ``i`` is read in. So each released column is written
batch by batch at its rows' places in a scratch file, and the columns that are not
protected are copied unchanged, in their rows, as the in-memory functions do. What the
mechanisms take from the whole column is small and computed first, in passes whose
results are combined in any order:

* randomized response: nothing (the domain is public); values outside it are counted;
* k-noise: ``δ``, from the order statistics of the column (:mod:`dpfast.engines._order`);
* k-PRAM: the intervals' counts, then the values of the records drawn as replacements
  (:mod:`dpfast.engines._intervals`).

Each release is the one the in-memory function gives for the same table and seed: the
same data, dtypes and reports.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpfast import noise
from dpfast._release import column_threads, keep_numerator, noise_source
from dpfast._release.columns import check_width
from dpfast._validation import (
    check_columns,
    check_k,
    check_k_anonymity,
    check_nonempty,
    check_retention,
    check_seed,
)
from dpfast.accounting import Ledger, PrivateReport, Report
from dpfast.engines.outofcore._legacy import (
    BATCH_ROWS,
    DatasetRun,
    Progress,
    ScratchColumn,
    _Limits,
    _scratch_beside,
    _scratch_name,
    coded_scratch,
)
from dpfast.engines.outofcore._rows import (
    Hook,
    checked_stats,
    float_scratch,
    float_values,
    is_integer_type,
    numeric_names,
    numpy_dtype,
    output_of,
    publish,
    typed_scratch,
    write_rows,
)
from dpfast.engines.outofcore._sources import ColumnSource

# ---------------------------------------------------------------------------------------
# Randomized response


@dataclass
class _Outside:
    """What a pass found outside a domain: missing values, and values with their first row."""

    missing: int = 0
    first_rows: dict[Any, int] | None = None

    def add(self, other: _Outside) -> None:
        self.missing += other.missing
        for value, row in (other.first_rows or {}).items():
            if self.first_rows is None:
                self.first_rows = {}
            self.first_rows[value] = min(row, self.first_rows.get(value, row))


def _outside(values: np.ndarray, bad: np.ndarray, first_row: int) -> _Outside:
    """Count the missing values among ``bad`` and find the others' first rows."""
    missing = pd.isna(values[bad])
    rows = np.flatnonzero(bad)[~missing]
    frame = pd.DataFrame({"value": values[rows], "row": rows + first_row})
    frame = frame.drop_duplicates("value")
    return _Outside(int(missing.sum()), dict(zip(frame["value"], frame["row"], strict=True)))


def _check_outside(name: Hashable, found: _Outside) -> None:
    """Refuse missing values or values outside the domain, as the in-memory function does."""
    if found.missing:
        raise ValueError(
            f"column {name!r} has {found.missing} missing value(s); impute them with a public "
            "rule, or add an explicit category for them to the domain"
        )
    if found.first_rows:
        outside = sorted(found.first_rows, key=lambda value: found.first_rows[value])  # type: ignore[index]
        shown = ", ".join(repr(v) for v in outside[:5])
        more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
        raise ValueError(
            f"column {name!r} holds value(s) outside the domain: {shown}{more}; add them "
            "to the public domain or recode them (the domain is never taken from the data)"
        )


def randomized_response_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    column: Hashable,
    domain: Any,
    epsilon: float | None = None,
    retention: float | None = None,
    seed: int | None = None,
    memory_limit: int,
    n_threads: int | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Hook | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with ``randomized_response`` into Parquet at ``output``.

    The release of :func:`dpfast.randomized_response` for the same table: row ``i`` keeps
    or replaces its value from word ``i`` of the column's key (:func:`dpfast.noise.
    retain_or_replace` with ``start``), whatever batch it is read in; rows keep their
    order and the other columns are copied unchanged. One pass over the column (codes,
    checks and draws) and one over each other column; the memory is a few batches.
    ``output``, the hooks and the return value are as for
    :func:`dpfast.engines.outofcore.laplace_dp_dataset`.
    """
    from dpfast.methods import randomized_response as method

    start = time.perf_counter()
    run = DatasetRun("randomized_response", None, progress, dataset=dataset)
    out = output_of(output, memory_limit, batch_rows, progress, before_publish, after_publish)
    with run.phase("validate"):
        check_nonempty(dataset.n_rows)
        (name,) = check_columns([column], dataset.names, name="column")
        categories = method._domain_values(domain)
        m = len(categories)
        keep, epsilon, retention = method._keep(epsilon, retention, m)
        seed = check_seed(seed)
        threads = column_threads(n_threads)
        dtype = numpy_dtype(dataset.schema.field(str(name)).type)
        typed = method._in_column_type(categories, np.empty(0, dtype=dtype))
    gamma = 1.0 + float(Fraction(keep * m, noise.KEEP_DENOMINATOR - keep))
    ledger = Ledger(math.log(gamma))
    entry = ledger.plan(method._entry(name, ledger.total, keep / noise.KEEP_DENOMINATOR))
    key = noise_source(seed).key("randomized_response", str(name))
    index = pd.Index(typed)
    code_dtype = method._code_dtype(m)
    pool = np.arange(m, dtype=code_dtype)

    def batch(array: pa.Array, first_row: int) -> tuple[np.ndarray | None, _Outside]:
        values = array.to_numpy(zero_copy_only=False)
        codes = index.get_indexer(values)
        bad = codes < 0
        if bad.any():
            return None, _outside(values, bad, first_row)
        drawn = noise.retain_or_replace(
            key, keep, codes.astype(code_dtype), pool, start=first_row, n_threads=threads
        )
        return drawn.astype(np.int64), _Outside()

    with _scratch_beside(out.path) as scratch:
        with run.phase("perturb"):
            run.tick(f"column {name}", 0, 1)
            found = _Outside()
            for part in write_rows(
                dataset, str(name), scratch / _scratch_name(name), out.limits.batch_rows, batch
            ):
                found.add(part)
            _check_outside(name, found)
            ledger.spend(entry)
            run.released[name] = np.empty(0)
        labels = pa.array(_decoded(typed))
        report, private = run.reports(
            **method._report_fields(name, categories, keep, epsilon, retention, ledger, seed)
        )
        released = {str(name): coded_scratch(scratch, name, labels)}
        publish(dataset, run, released, scratch, out, report)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def _decoded(domain: list[Any]) -> np.ndarray:
    """Return the labels the in-memory release decodes codes into, in the domain's order."""
    array = np.asarray(domain)
    if array.dtype.kind in "USO":
        array = np.asarray(domain, dtype=object)
    return array


# ---------------------------------------------------------------------------------------
# k-noise


def k_noise_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    seed: int | None = None,
    memory_limit: int,
    n_threads: int | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Hook | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with ``k_noise`` into Parquet at ``output``, within ``memory_limit``.

    The release of :func:`dpfast.k_noise` for the same table. Per protected column: one
    pass checks the values and finds the range; ``δ`` comes from the order statistics
    (:func:`dpfast.engines._order.knoise_extremes`: one more pass when the column fits in
    ``memory_limit``, else a histogram pass and one pass per range of sorted keys); a last
    pass adds row ``i`` the uniform draw of word ``i`` of the column's key. Rows keep their
    order; the other columns are copied unchanged.
    """
    from dpfast.engines._order import knoise_extremes
    from dpfast.methods import k_noise as method

    start = time.perf_counter()
    run = DatasetRun("k_noise", None, progress, dataset=dataset)
    out = output_of(output, memory_limit, batch_rows, progress, before_publish, after_publish)
    with run.phase("validate"):
        k = check_k(k, dataset.n_rows)
        seed = check_seed(seed)
        names = numeric_names(dataset, columns)
        threads = column_threads(n_threads)
        stats = checked_stats(dataset, names, out.limits, run)
    source = noise_source(seed)
    deltas: dict[str, float] = {}
    spans: dict[str, float] = {}
    released: dict[str, ScratchColumn] = {}
    with _scratch_beside(out.path) as scratch:
        for name in names:
            with run.phase("delta"):
                lo, hi = check_width(stats[name].lo, stats[name].hi, dataset.n_rows, name)
                if hi == lo:
                    delta, span = math.nextafter(0.0, math.inf), 0.0
                else:
                    extremes = knoise_extremes(dataset, str(name), k, lo, hi, out.limits, run)
                    delta, span = method.delta_from_extremes(*extremes)
            with run.phase("noise"):
                run.tick(f"column {name}", 0, 1)
                key = source.key("k_noise", "uniform-noise", str(name))
                _add_noise(dataset, str(name), key, delta, threads, scratch, out.limits)
            run.released[name] = np.empty(0)
            released[str(name)] = float_scratch(scratch, name)
            deltas[str(name)] = delta
            spans[str(name)] = span
        integer = [str(n) for n in names if is_integer_type(dataset.schema.field(str(n)).type)]
        report, private = run.reports(**method._report_fields(k, seed, integer, deltas, spans))
        publish(dataset, run, released, scratch, out, report)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def _add_noise(
    dataset: ColumnSource,
    name: str,
    key: np.ndarray,
    delta: float,
    threads: int,
    scratch: Path,
    limits: _Limits,
) -> None:
    """Write ``value + δ T`` of every row at its place, ``T`` from word ``row`` of ``key``."""

    def batch(array: pa.Array, first_row: int) -> tuple[np.ndarray, None]:
        values = float_values(array)
        return noise.add_uniform(key, values, delta, start=first_row, n_threads=threads), None

    write_rows(dataset, name, scratch / _scratch_name(name), limits.batch_rows, batch)


# ---------------------------------------------------------------------------------------
# k-PRAM


def k_pram_dataset(
    dataset: ColumnSource,
    output: str | os.PathLike[str],
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    retention: float = 0.5,
    seed: int | None = None,
    memory_limit: int,
    n_threads: int | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
    before_publish: Hook | None = None,
    after_publish: Callable[[], None] | None = None,
) -> tuple[Report, PrivateReport]:
    """Release ``dataset`` with ``k_pram`` into Parquet at ``output``, within ``memory_limit``.

    The release of :func:`dpfast.k_pram` for the same table. Per protected column: one pass
    checks the values and finds the range; the intervals come from a histogram pass (and
    exact counts where it cannot decide, as in memory); the replacements from two passes
    per window of pool positions (:mod:`dpfast.engines._intervals`); a last pass writes
    the column. Rows keep their order; the other columns are copied unchanged.
    """
    from dpfast.engines._intervals import find_intervals, find_replacements
    from dpfast.methods import k_pram as method

    start = time.perf_counter()
    run = DatasetRun("k_pram", None, progress, dataset=dataset)
    out = output_of(output, memory_limit, batch_rows, progress, before_publish, after_publish)
    with run.phase("validate"):
        k = check_k_anonymity(k, dataset.n_rows, "k-PRAM")
        retention = check_retention(retention)
        seed = check_seed(seed)
        names = numeric_names(dataset, columns)
        column_threads(n_threads)
        stats = checked_stats(dataset, names, out.limits, run)
    keep = keep_numerator(retention)
    source = noise_source(seed)
    intervals: dict[str, int] = {}
    widths: dict[str, float] = {}
    smallest: dict[str, int] = {}
    released: dict[str, ScratchColumn] = {}
    with _scratch_beside(out.path) as scratch:
        for name in names:
            with run.phase("intervals"):
                lo, hi = check_width(stats[name].lo, stats[name].hi, dataset.n_rows, name)
                found = find_intervals(dataset, str(name), k, lo, hi, out.limits)
            with run.phase("pram"):
                key = source.key("k_pram", "retain-or-replace", str(name))
                replacements = find_replacements(
                    dataset, str(name), found, key, keep, scratch, out.limits, run
                )
                path = scratch / _scratch_name(name)
                write_rows(
                    dataset, str(name), path, out.limits.batch_rows, _as_floats, replacements.apply
                )
            arrow_type = dataset.schema.field(str(name)).type
            dtype = numpy_dtype(arrow_type) if is_integer_type(arrow_type) else np.dtype(np.float64)
            run.released[name] = np.empty(0)
            released[str(name)] = typed_scratch(scratch, name, dtype)
            intervals[str(name)] = found.m
            widths[str(name)] = (hi - lo) / found.m
            smallest[str(name)] = int(found.counts.min())
        fields = method._report_fields(k, retention, keep, seed, intervals, widths, smallest)
        report, private = run.reports(**fields)
        publish(dataset, run, released, scratch, out, report)
    private.timings["total"] = time.perf_counter() - start
    return report, private


def _as_floats(array: pa.Array, first_row: int) -> tuple[np.ndarray, None]:
    return float_values(array), None
