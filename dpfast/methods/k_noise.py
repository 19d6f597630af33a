"""k-noise: uniform noise on ``[-δ, δ]`` with the minimal data-dependent ``δ``.

See docs/design.md#k-noise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._kernels import mechanisms as _kernels
from dpfast._release import (
    Release,
    SeededReleaseOptions,
    Unpack,
    column_threads,
    noise_source,
    not_dp_guarantee,
    numeric_ranges,
    open_run,
    value_range,
)
from dpfast._validation import check_k, check_seed
from dpfast.dataflow.writes import WriteRows
from dpfast.exceptions import DPFastValueError
from dpfast.steps import order_statistics


def _smallest_double_above(target: Fraction) -> float:
    try:
        value = float(target)  # correctly rounded
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise DPFastValueError("the minimal delta overflows float64; rescale the column first")
    if Fraction(value) > target:
        return value
    return math.nextafter(value, math.inf)


def minimal_delta(values: Any, k: int) -> float:
    """Return the smallest half-width ``δ`` for which k-noise's condition holds.

    See docs/design.md#k-noise.

    The condition is ``#{j : |X_j - x| < 2δ} >= k`` for every ``x`` in ``[min X, max X]``,
    i.e. ``2δ > D_k`` with ``D_k = max(X_(k) - X_(1), X_(n) - X_(n-k+1),
    max_i (X_(i+k) - X_(i)) / 2)``. The result is the smallest double strictly above
    ``D_k / 2``, found exactly (rational arithmetic on the extreme order statistics); it is
    ``nextafter(D_k / 2, +inf)`` whenever ``D_k / 2`` is a double. The column is never
    fully sorted: see :mod:`dpfast._kernels.mechanisms`. Expected O(n), O(n log n) at worst.

    Parameters
    ----------
    values : array-like of float
        1-D, finite.
    k : int
        ``1 <= k <= len(values)``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        On NaN or infinite values, a bad ``k`` or a range that overflows float64.

    Examples
    --------
    >>> minimal_delta([0.0, 1.0, 2.0, 10.0], 2)  # D_k = X_(4) - X_(3) = 8
    4.000000000000001
    """
    array = np.ascontiguousarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise DPFastValueError(f"values must be 1-D, got shape {array.shape}")
    k = check_k(k, array.shape[0])
    if not np.isfinite(array).all():
        raise DPFastValueError("values must be finite (no NaN or infinity)")
    return _minimal_delta(array, k, "values")[0]


def _minimal_delta(values: np.ndarray, k: int, name: Hashable) -> tuple[float, float]:
    """Return ``(δ, D_k)`` for a validated float64 column."""
    lo, hi = value_range(values, name)
    if hi == lo:
        return math.nextafter(0.0, math.inf), 0.0
    n = values.shape[0]
    n_buckets = max(1, min(n, max(1024, n // 16)))
    return delta_from_extremes(*_kernels.knoise_extremes(values, k, n_buckets))


def delta_from_extremes(
    x1: float, xk: float, xnk: float, xn: float, inner_lo: float, inner_hi: float, inner: bool
) -> tuple[float, float]:
    """Return ``(δ, D_k)`` from the order statistics of :func:`minimal_delta` (exactly).

    ``x1, xk, xnk, xn`` are ``X_(1), X_(k), X_(n-k+1), X_(n)``; ``(inner_lo, inner_hi)``
    the pair ``(X_(i), X_(i+k))`` of largest difference, when ``inner`` (``n > k``).
    """
    d = max(Fraction(xk) - Fraction(x1), Fraction(xn) - Fraction(xnk))
    if inner:
        d = max(d, (Fraction(inner_hi) - Fraction(inner_lo)) / 2)
    return _smallest_double_above(d / 2), float(d)


def k_noise(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    n_threads: int | None = None,
    **options: Unpack[SeededReleaseOptions],
) -> Release:
    """k-noise: add uniform noise on ``[-δ, δ]`` to each value (docs/design.md#k-noise). Not DP.

    For each protected column, ``δ`` is the smallest half-width such that every point of
    the column's range has at least ``k`` values within ``2δ``
    (:func:`minimal_delta`); then ``Y_j = X_j + η_j`` with ``η_j`` uniform on
    ``(-δ, δ)``. Theorem 1 of Biswal et al.: the expected number of released values within
    ``2δ`` of any point is more than ``k / 2``. ``δ`` depends on the data, so this is
    **not** differential privacy. Rows keep their order; integer columns are released as
    floats (rounding would change the noise).

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table, 2-D numpy.ndarray, Parquet path, Spark or Dask DataFrame
        Never modified. A Parquet file, directory or glob (or ``engine="outofcore"``) is
        released out of core into ``output``; a Spark or Dask DataFrame on its cluster
        (docs/engines.md).
    k : int
        ``1 <= k <= n_rows``.
    columns : sequence, optional
        Numeric columns to perturb (default all); the others are copied unchanged.
    n_threads : int, optional
        Threads for the noise (default: one per core). Results do not depend on it.
    **options : Unpack[SeededReleaseOptions]
        The options the releases share (:class:`dpfast.SeededReleaseOptions`): ``seed``,
        ``risk``, ``progress``, ``engine``, ``output`` and ``memory_limit``. Out of
        core, the ``δ`` of a column that does not fit in ``memory_limit`` comes from its
        sorted ranges, one by one (docs/engines.md).

    Returns
    -------
    Release
        ``private.to_dict()["deltas"]`` holds ``δ`` per column (private: it comes from
        the data).

    Raises
    ------
    TypeError, ValueError
        Non-numeric columns, NaN or infinite values, ``k`` outside ``[1, n]``, unknown
        columns, an empty table.

    References
    ----------
    A. Biswal, L. Arbuckle and L. Kulik, "Disclosure metrics born from statistical
    evaluations of data utility", §2.4-2.5, Theorem 1.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"age": [23, 35, 41, 52, 67, 30]})
    >>> release = k_noise(table, k=2, seed=1)
    >>> release.private.to_dict()["deltas"]
    {'age': 7.500000000000001}
    >>> release.report.guarantee_level
    'none'
    """
    with open_run("k_noise", data, options, SeededReleaseOptions) as run:
        with run.phase("validate"):
            k = check_k(k, run.n_rows)
            seed = check_seed(run.seed)
            protected, ranges = numeric_ranges(run.engine, columns)
            threads = column_threads(n_threads)
        source = noise_source(seed)
        deltas: dict[str, float] = {}
        spans: dict[str, float] = {}
        for column, (lo, hi) in zip(protected, ranges, strict=True):
            with run.phase("delta"):
                delta, span = math.nextafter(0.0, math.inf), 0.0
                if hi > lo:
                    found = order_statistics(run.engine.dataflow, column, k, (lo, hi))
                    delta, span = delta_from_extremes(*found)
            with run.phase("noise"):
                key = source.key("k_noise", "uniform-noise", str(column.name))
                # released as floats (a float column in its own type): the noise is continuous
                kind = column.dtype if column.dtype.kind == "f" else np.dtype(np.float64)
                floats = dataclasses.replace(column, integer=False, dtype=kind)
                run.engine.write(WriteRows(floats, UniformCells(key, delta, threads)))
            run.keep(column.name)
            run.risk_width[column.name] = 2.0 * delta  # the paper's neighbourhood, 2δ
            deltas[str(column.name)] = delta
            spans[str(column.name)] = span
        integer = [str(c.name) for c in protected if c.integer]
        return run.finish(**_report_fields(k, seed, integer, deltas, spans))


@dataclass(frozen=True)
class UniformCells:
    """One column's cells plus uniform noise on ``(-delta, delta)``, keyed by row.

    Row ``i`` gets word ``i`` of the column's key (:func:`dpfast.noise.add_uniform`);
    no counts.
    """

    key: np.ndarray
    delta: float
    n_threads: int

    def __call__(self, values: np.ndarray, first_row: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the batch's values with their noise, and no counts."""
        out = noise.add_uniform(
            self.key, values, self.delta, start=first_row, n_threads=self.n_threads
        )
        return out, np.zeros(0, dtype=np.int64)


def _report_fields(
    k: int, seed: int | None, integer: list[str], deltas: dict[str, float], spans: dict[str, float]
) -> dict[str, Any]:
    """Return the report fields of a release (:meth:`Run.finish`)."""
    return {
        "parameters": {
            "k": k,
            "noise": "uniform on (-delta, delta)",
            "delta_rule": "smallest double above D_k / 2 (docs/design.md#k-noise)",
        },
        "guarantee": not_dp_guarantee(
            "delta is computed from the data (the spread of the k nearest values), so the "
            "noise scale itself reveals information about the records."
        ),
        "seed": seed,
        "sampler": noise.UNIFORM_SAMPLER_NAME,
        "notes": [f"integer column(s) {integer} are released as floats"] if integer else [],
        "private": {"deltas": deltas, "d_k": spans},
    }
