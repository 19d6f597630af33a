"""k-PRAM: invariant PRAM within equal-width intervals of at least k values.

See docs/design.md#k-pram.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._kernels import mechanisms as _kernels
from dpfast._release import (
    Bins,
    NumericColumn,
    Release,
    SeededReleaseOptions,
    Unpack,
    bisect_edge,
    column_threads,
    keep_numerator,
    noise_source,
    not_dp_guarantee,
    numeric_ranges,
    open_run,
)
from dpfast._validation import check_k_anonymity, check_retention, check_seed
from dpfast.dataflow.writes import WriteResampled
from dpfast.steps import bin_counts


def _bins(engine: Any, column: NumericColumn, k: int, lo: float, hi: float) -> Bins:
    """k-PRAM's ``m`` equal-width intervals of a column and their counts (docs/design.md#k-pram)."""
    width = hi - lo

    def bucket_starts(b: int) -> np.ndarray:
        starts = np.zeros(b + 1, dtype=np.int64)
        np.cumsum(bin_counts(engine.dataflow, column, lo, b / width, b), out=starts[1:])
        return starts

    def interval_counts(m: int) -> np.ndarray:
        return bin_counts(engine.dataflow, column, lo, m / width, m)

    m, counts = search_intervals(engine.n_rows, k, width == 0, bucket_starts, interval_counts)
    return Bins(lo, m / width if width > 0 else 0.0, counts)


def search_intervals(
    n: int,
    k: int,
    constant: bool,
    bucket_starts: Callable[[int], np.ndarray],
    interval_counts: Callable[[int], np.ndarray],
) -> tuple[int, np.ndarray]:
    """Return k-PRAM's ``m`` and the count of each interval, from counts of the column.

    ``bucket_starts(b)`` is the first rank of each of ``b`` fine equal-width buckets over
    the column's range, then ``n`` (as :func:`dpfast._kernels.mechanisms.bucket_counts`
    gives them), ``interval_counts(m)`` the exact counts of ``m`` intervals
    (:func:`dpfast.steps.bin_counts`); ``constant`` when every value is the
    same. The bisection over ``[1, n // k]`` asks for exact counts only where
    the fine histogram cannot decide.
    """
    if constant:
        return 1, np.array([n], dtype=np.int64)
    n_buckets = max(1, min(n, max(1024, n // 16)))
    starts = bucket_starts(n_buckets)

    def valid(m: int) -> bool:
        status = _kernels.interval_check(starts, m, k)
        if status == -1:
            return bool(interval_counts(m).min() >= k)
        return bool(status == 1)

    high = n // k
    if not valid(high):  # valid(1): one interval holds all n >= k values
        high = bisect_edge(1, high, lambda m: not valid(m))[0]
    counts = interval_counts(high)
    if counts.min() < k:  # pragma: no cover - the checks above are exact
        raise AssertionError("k-PRAM interval search returned an invalid split")
    return high, counts


def k_pram(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    retention: float = 0.5,
    n_threads: int | None = None,
    **options: Unpack[SeededReleaseOptions],
) -> Release:
    """k-PRAM: PRAM within equal-width intervals that each hold at least ``k`` values.

    See docs/design.md#k-pram.

    Each protected column's range is cut into ``m`` equal-width intervals (value ``x`` is
    in interval ``min(floor((x - min) * m / range), m - 1)``, computed in float64), with
    ``m`` the result of a bisection over ``[1, n // k]`` for an ``m`` whose intervals all
    hold ``>= k`` values while ``m + 1``'s do not (``m = n // k`` when that works). Then
    every value is kept with probability ``retention``, or else replaced by the value of a
    uniformly drawn record of its own interval: an invariant PRAM, whose transition matrix
    is supported on the interval's values and keeps each interval's expected distribution
    and size. Not differential privacy: the intervals depend on the data.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table, 2-D numpy.ndarray, Parquet path, Spark or Dask DataFrame
        The table; it is not modified. A Parquet file, directory or glob (or
        ``engine="outofcore"``) is released out of core into ``output``; a Spark or Dask
        DataFrame on its cluster (docs/engines.md).
    k : int
        The least number of values per interval, ``2 <= k <= n_rows`` (with ``k = 1``
        every interval may hold one value, and the release be the input unchanged).
    columns : sequence, optional
        Numeric columns to perturb (default all); integer columns keep their dtype.
    retention : float
        Probability of keeping a value, in ``[0, 1)``; sampled exactly as the largest
        ``a / 2**32`` not above it (the report gives the value used).
    n_threads : int, optional
        Threads for the retain-or-replace draws; the release is the same for any number.
    **options : Unpack[SeededReleaseOptions]
        The options the releases share (:class:`dpfast.SeededReleaseOptions`): ``seed``,
        ``risk``, ``progress``, ``engine``, ``output`` and ``memory_limit``. Out of
        core, the replacements are found one window of pool positions at a time within
        ``memory_limit`` (docs/engines.md).

    Returns
    -------
    Release
        The report gives each column's ``intervals`` (``m``), interval width and smallest
        interval count.

    Raises
    ------
    TypeError, ValueError
        As :func:`k_noise`, and a retention outside ``[0, 1)``.

    Notes
    -----
    Choices not fixed by the source (unconfirmed: docs/design.md#k-pram): validity is not monotone
    in ``m``, so the bisection finds a boundary, not always the largest valid ``m`` (a downward
    scan from ``n // k`` costs O(n²/k)); the replacement is drawn with the interval's value
    frequencies (a uniformly drawn record), not uniformly over its distinct values.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.array([[1.0], [2.0], [3.0], [10.0], [11.0], [12.0]])
    >>> release = k_pram(table, k=3, seed=1)
    >>> release.private.to_dict()["intervals"]
    {'0': 2}
    >>> bool((release.data[:3] <= 3).all() and (release.data[3:] >= 10).all())
    True
    """
    with open_run("k_pram", data, options, SeededReleaseOptions) as run:
        with run.phase("validate"):
            k = check_k_anonymity(k, run.n_rows, "k-PRAM")
            retention = check_retention(retention)
            seed = check_seed(run.seed)
            protected, ranges = numeric_ranges(run.engine, columns)
            threads = column_threads(n_threads)
        keep = keep_numerator(retention)
        source = noise_source(seed)
        intervals: dict[str, int] = {}
        widths: dict[str, float] = {}
        smallest: dict[str, int] = {}
        for column, (lo, hi) in zip(protected, ranges, strict=True):
            with run.phase("intervals"):
                bins = _bins(run.engine, column, k, lo, hi)
            with run.phase("pram"):
                key = source.key("k_pram", "retain-or-replace", str(column.name))
                run.engine.write(WriteResampled(column, bins, key, keep, threads))
            run.keep(column.name)
            intervals[str(column.name)] = bins.m
            widths[str(column.name)] = (hi - lo) / bins.m
            smallest[str(column.name)] = int(bins.counts.min())
        fields = _report_fields(k, retention, keep, seed, intervals, widths, smallest)
        return run.finish(**fields)


def _report_fields(
    k: int,
    retention: float,
    keep: int,
    seed: int | None,
    intervals: dict[str, int],
    widths: dict[str, float],
    smallest: dict[str, int],
) -> dict[str, Any]:
    """Return the report fields of a release (:meth:`Run.finish`)."""
    return {
        "parameters": _parameters(k, retention, keep),
        "guarantee": not_dp_guarantee(
            "the intervals are computed from the data, and each replacement is another "
            "record's exact value."
        ),
        "seed": seed,
        "sampler": noise.RETAIN_SAMPLER_NAME,
        "private": {
            "intervals": intervals,
            "interval_width": widths,
            "smallest_interval_count": smallest,
        },
    }


def _parameters(k: int, retention: float, keep: int) -> dict[str, Any]:
    return {
        "k": k,
        "retention_requested": retention,
        "retention": keep / noise.KEEP_DENOMINATOR,
        "retention_fraction": f"{keep}/2**32",
        "intervals_rule": "equal width over [min, max]; bisection on m in [1, n // k] "
        "for every interval holding >= k values",
        "replacement": "value of a uniformly drawn record of the same interval (invariant PRAM)",
    }
