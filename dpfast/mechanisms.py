"""The perturbation mechanisms of SPEC §9: k-noise, k-PRAM and randomized response.

k-noise and k-PRAM (Biswal, Arbuckle and Kulik) are k-anonymity-style heuristics whose
parameters depend on the data: they are **not** differential privacy, and their reports
say so. Randomized response (uniform perturbation of one categorical column) is
ε-local differential privacy for that column only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpfast import noise
from dpfast._kernels import mechanisms as _kernels
from dpfast._validation import (
    check_columns,
    check_epsilon,
    check_int,
    check_k,
    check_seed,
)
from dpfast.accounting import LedgerEntry, PhaseTimer, Report, names
from dpfast.io import TableData, as_table_data
from dpfast.release._common import (
    SEEDED_NOTE,
    Release,
    _protected_columns,
    _unprotected_note,
)

__all__ = ["k_noise", "k_pram", "minimal_delta", "randomized_response"]

_KEEP_BITS = 32
_RHO1 = (0.01, 0.05, 0.1, 0.25, 0.5)


def _source(seed: int | None) -> noise.NoiseSource:
    return noise.NoiseSource.secure() if seed is None else noise.NoiseSource.from_seed(seed)


def _threads(n_threads: Any) -> int:
    if n_threads is None:
        return max(1, os.cpu_count() or 1)
    value = check_int(n_threads, "n_threads")
    if value < 1:
        raise ValueError(f"n_threads must be >= 1 or None, got {value}")
    return value


def _range(values: np.ndarray, name: Hashable) -> tuple[float, float]:
    lo, hi = _kernels.min_max(values)
    width = float(hi) - float(lo)
    if not math.isfinite(width):
        raise ValueError(
            f"column {name!r}: max - min overflows float64 ({lo!r} to {hi!r}); rescale the "
            "column first"
        )
    if width > 0 and not math.isfinite(values.shape[0] / width):
        raise ValueError(
            f"column {name!r}: its values differ by less than float64 can divide "
            f"(range {width!r}); rescale the column first"
        )
    return float(lo), float(hi)


def _smallest_double_above(target: Fraction) -> float:
    try:
        value = float(target)  # correctly rounded
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ValueError("the minimal delta overflows float64; rescale the column first")
    if Fraction(value) > target:
        return value
    return math.nextafter(value, math.inf)


def minimal_delta(values: Any, k: int) -> float:
    """Return the smallest half-width ``δ`` for which k-noise's condition holds (SPEC §9.2).

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
        raise ValueError(f"values must be 1-D, got shape {array.shape}")
    k = check_k(k, array.shape[0])
    if not np.isfinite(array).all():
        raise ValueError("values must be finite (no NaN or infinity)")
    return _minimal_delta(array, k, "values")[0]


def _minimal_delta(values: np.ndarray, k: int, name: Hashable) -> tuple[float, float]:
    """Return ``(δ, D_k)`` for a validated float64 column."""
    lo, hi = _range(values, name)
    if hi == lo:
        return math.nextafter(0.0, math.inf), 0.0
    n = values.shape[0]
    n_buckets = max(1, min(n, max(1024, n // 16)))
    x1, xk, xnk, xn, inner_lo, inner_hi, has_inner = _kernels.knoise_extremes(values, k, n_buckets)
    d = max(Fraction(xk) - Fraction(x1), Fraction(xn) - Fraction(xnk))
    if has_inner:
        d = max(d, (Fraction(inner_hi) - Fraction(inner_lo)) / 2)
    return _smallest_double_above(d / 2), float(d)


def _not_dp(what: str, unprotected: list[str]) -> str:
    return (
        f"NOT differential privacy: {what} A k-anonymity-style heuristic (Biswal, Arbuckle "
        "and Kulik); it gives no formal guarantee." + _unprotected_note(unprotected)
    )


def k_noise(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    seed: int | None = None,
    n_threads: int | None = None,
) -> Release:
    """k-noise: add uniform noise on ``[-δ, δ]`` to each value (SPEC §9.2). Not DP.

    For each protected column, ``δ`` is the smallest half-width such that every point of
    the column's range has at least ``k`` values within ``2δ``
    (:func:`minimal_delta`); then ``Y_j = X_j + η_j`` with ``η_j`` uniform on
    ``(-δ, δ)``. Theorem 1 of Biswal et al.: the expected number of released values within
    ``2δ`` of any point is more than ``k / 2``. ``δ`` depends on the data, so this is
    **not** differential privacy. Rows keep their order; integer columns are released as
    floats (rounding would change the noise).

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
        Never modified.
    k : int
        ``1 <= k <= n_rows``.
    columns : sequence, optional
        Numeric columns to perturb (default all); the others are copied unchanged.
    seed : int, optional
        Reproducible noise, not for publication.
    n_threads : int, optional
        Threads for the noise (default: one per core). Results do not depend on it.

    Returns
    -------
    Release
        ``report.to_dict()["deltas"]`` holds ``δ`` per column.

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
    >>> release.report.to_dict()["deltas"]
    {'age': 7.500000000000001}
    >>> release.report.guarantee_level
    'none'
    """
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        k = check_k(k, table.n_rows)
        seed = check_seed(seed)
        protected = _protected_columns(table, columns)
        threads = _threads(n_threads)
    source = _source(seed)
    released: dict[Hashable, np.ndarray] = {}
    deltas: dict[str, float] = {}
    spans: dict[str, float] = {}
    for column in protected:
        with timer.phase("delta"):
            delta, span = _minimal_delta(column.values, k, column.name)
        with timer.phase("noise"):
            released[column.name] = noise.add_uniform(
                source.key("k_noise", "uniform-noise", str(column.name)),
                column.values,
                delta,
                n_threads=threads,
            )
        deltas[str(column.name)] = delta
        spans[str(column.name)] = span
    with timer.phase("assemble"):
        result = table.rebuild(released, None)
    unprotected = [str(n) for n in table.names if n not in released]
    integer = [str(c.name) for c in protected if c.integer]
    notes = [SEEDED_NOTE] if seed is not None else []
    if integer:
        notes.append(f"integer column(s) {integer} are released as floats")
    report = Report(
        method="k_noise",
        parameters={
            "k": k,
            "noise": "uniform on (-delta, delta)",
            "delta_rule": "smallest double above D_k / 2 (SPEC §9.2)",
        },
        epsilon=None,
        ledger=[],
        guarantee=_not_dp(
            "delta is computed from the data (the spread of the k nearest values), so the "
            "noise scale itself reveals information about the records.",
            unprotected,
        ),
        guarantee_level="none",
        protected_columns=names([c.name for c in protected]),
        unprotected_columns=unprotected,
        clamped={},
        seeded=seed is not None,
        sampler=noise.UNIFORM_SAMPLER_NAME,
        timings=timer.timings,
        n_rows=table.n_rows,
        notes=notes,
        extra={"deltas": deltas, "d_k": spans},
    )
    return Release(result, report)


# -- k-PRAM ----------------------------------------------------------------------------


def _keep_numerator(retention: float) -> int:
    """Largest ``a`` with ``a / 2**32 <= retention`` (exact)."""
    exact = Fraction(retention)
    return exact.numerator * (1 << _KEEP_BITS) // exact.denominator


def _check_retention(retention: Any) -> float:
    if isinstance(retention, (bool, np.bool_)) or not isinstance(
        retention, (int, float, np.number)
    ):
        raise TypeError(f"retention must be a number, got {retention!r}")
    value = float(retention)
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"retention must be in [0, 1), got {retention!r}; 1 would release the data unchanged"
        )
    return value


def _interval_count(values: np.ndarray, k: int, lo: float, hi: float) -> tuple[int, np.ndarray]:
    """k-PRAM's number of intervals ``m`` and the exact count of each (SPEC §9.1)."""
    n = values.shape[0]
    width = hi - lo
    if width == 0:
        return 1, np.array([n], dtype=np.int64)
    n_buckets = max(1, min(n, max(1024, n // 16)))
    starts = _kernels.bucket_counts(values, lo, n_buckets / width, n_buckets)

    def valid(m: int) -> bool:
        status = _kernels.interval_check(starts, m, k)
        if status == -1:
            counts = _kernels.interval_counts(values, lo, m / width, m)
            return bool(counts.min() >= k)
        return bool(status == 1)

    low, high = 1, n // k
    if not valid(high):
        while high - low > 1:
            middle = (low + high) // 2
            if valid(middle):
                low = middle
            else:
                high = middle
        high = low
    counts = _kernels.interval_counts(values, lo, high / width, high)
    if counts.min() < k:  # pragma: no cover - the checks above are exact
        raise AssertionError("k-PRAM interval search returned an invalid split")
    return high, counts


def k_pram(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    retention: float = 0.5,
    seed: int | None = None,
    n_threads: int | None = None,
) -> Release:
    """k-PRAM: PRAM within equal-width intervals that each hold at least ``k`` values (§9.1).

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
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
        Never modified.
    k : int
        ``1 <= k <= n_rows``.
    columns : sequence, optional
        Numeric columns to perturb (default all).
    retention : float
        Probability of keeping a value, in ``[0, 1)``; sampled exactly as the largest
        ``a / 2**32`` not above it (the report gives the value used).
    seed : int, optional
        Reproducible, not for publication.
    n_threads : int, optional
        Threads for the draws. Results do not depend on it.

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
    Choices not fixed by the source ([U] in SPEC §9.1): validity is not monotone in ``m``,
    so the bisection finds a boundary, not always the largest valid ``m`` (the downward
    scan of the spec costs O(n²/k)); the replacement is drawn with the interval's value
    frequencies (a uniformly drawn record), not uniformly over its distinct values.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.array([[1.0], [2.0], [3.0], [10.0], [11.0], [12.0]])
    >>> release = k_pram(table, k=3, seed=1)
    >>> release.report.to_dict()["intervals"]
    {'0': 2}
    >>> bool((release.data[:3] <= 3).all() and (release.data[3:] >= 10).all())
    True
    """
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        k = check_k(k, table.n_rows)
        retention = _check_retention(retention)
        seed = check_seed(seed)
        protected = _protected_columns(table, columns)
        threads = _threads(n_threads)
    keep = _keep_numerator(retention)
    source = _source(seed)
    released: dict[Hashable, np.ndarray] = {}
    intervals: dict[str, int] = {}
    widths: dict[str, float] = {}
    smallest: dict[str, int] = {}
    for column in protected:
        values = column.values
        with timer.phase("intervals"):
            lo, hi = _range(values, column.name)
            m, counts = _interval_count(values, k, lo, hi)
            group_start = np.zeros(m, dtype=np.int64)
            np.cumsum(counts[:-1], out=group_start[1:])
            groups = np.empty(values.shape[0], dtype=np.int64)
            pool = np.empty(values.shape[0], dtype=np.float64)
            scale = m / (hi - lo) if hi > lo else 0.0
            _kernels.group_by_interval(values, lo, scale, m, group_start, groups, pool)
        with timer.phase("pram"):
            out = noise.retain_or_replace(
                source.key("k_pram", "retain-or-replace", str(column.name)),
                keep,
                values,
                pool,
                groups=groups,
                group_start=group_start,
                group_size=counts,
                n_threads=threads,
            )
        released[column.name] = out.astype(column.dtype) if column.integer else out
        intervals[str(column.name)] = m
        widths[str(column.name)] = (hi - lo) / m
        smallest[str(column.name)] = int(counts.min())
    with timer.phase("assemble"):
        result = table.rebuild(released, None)
    unprotected = [str(n) for n in table.names if n not in released]
    report = Report(
        method="k_pram",
        parameters={
            "k": k,
            "retention_requested": retention,
            "retention": keep / 2**_KEEP_BITS,
            "retention_fraction": f"{keep}/2**32",
            "intervals_rule": "equal width over [min, max]; bisection on m in [1, n // k] "
            "for every interval holding >= k values",
            "replacement": "value of a uniformly drawn record of the same interval "
            "(invariant PRAM)",
        },
        epsilon=None,
        ledger=[],
        guarantee=_not_dp(
            "the intervals are computed from the data, and each replacement is another "
            "record's exact value.",
            unprotected,
        ),
        guarantee_level="none",
        protected_columns=names([c.name for c in protected]),
        unprotected_columns=unprotected,
        clamped={},
        seeded=seed is not None,
        sampler=noise.RETAIN_SAMPLER_NAME,
        timings=timer.timings,
        n_rows=table.n_rows,
        notes=[SEEDED_NOTE] if seed is not None else [],
        extra={
            "intervals": intervals,
            "interval_width": widths,
            "smallest_interval_count": smallest,
        },
    )
    return Release(result, report)


# -- randomized response ---------------------------------------------------------------


def _domain_values(domain: Any) -> list[Any]:
    if domain is None:
        raise ValueError(
            "domain is required: pass the public list of categories (or a Taxonomy); it is "
            "never taken from the data"
        )
    for attribute in ("leaves", "domain"):
        if not isinstance(domain, (list, tuple, np.ndarray, pd.Index)) and hasattr(
            domain, attribute
        ):
            domain = getattr(domain, attribute)
            if callable(domain):
                domain = domain()
            break
    if isinstance(domain, (str, bytes)) or not hasattr(domain, "__iter__"):
        raise TypeError(
            f"domain must be a list of categories or a Taxonomy, got {type(domain).__name__}"
        )
    values = list(domain)
    if len(values) < 2:
        raise ValueError(
            f"domain must hold at least 2 categories, got {len(values)}; with one there is "
            "nothing to perturb"
        )
    if len(set(values)) != len(values):
        seen: set[Any] = set()
        twice = [v for v in values if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
        raise ValueError(f"domain lists categories more than once: {twice[:5]}")
    if len(values) > 2**_KEEP_BITS:
        raise ValueError(f"domain may hold at most 2**32 categories, got {len(values)}")
    return values


def _code_dtype(m: int) -> type[np.signedinteger[Any]]:
    for dtype in (np.int8, np.int16, np.int32):
        if m <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def _encode(table: TableData, column: Hashable, domain: list[Any]) -> tuple[np.ndarray, Any]:
    """Codes of ``column`` in ``domain`` and a function turning codes back into a column."""
    index = pd.Index(domain)
    series = table.source[column] if table.kind == "pandas" else None
    if series is not None and isinstance(series.dtype, pd.CategoricalDtype):
        mapping = index.get_indexer(series.cat.categories).astype(np.int64)
        codes = np.empty(len(series), dtype=_code_dtype(len(domain)))
        raw = series.cat.codes.to_numpy()
        missing, first = _kernels.map_codes(raw, mapping, codes)
        outside = []
        if first >= 0:  # the error path: name every category outside the domain
            unmapped = np.unique(raw[(raw >= 0) & (mapping[np.maximum(raw, 0)] < 0)])
            outside = [series.cat.categories[c] for c in unmapped]
        dtype = pd.CategoricalDtype(index)

        def decode(new: np.ndarray) -> Any:
            return pd.Categorical.from_codes(new, dtype=dtype)

    else:
        values = table.column(column)
        codes = index.get_indexer(values)
        bad = codes < 0
        missing = int(pd.isna(values[bad]).sum()) if bad.any() else 0
        outside = list(pd.unique(values[bad & ~pd.isna(values)])) if bad.any() else []
        domain_array = np.asarray(domain)
        if domain_array.dtype.kind in "US" or domain_array.dtype.kind == "O":
            domain_array = np.asarray(domain, dtype=object)

        def decode(new: np.ndarray) -> Any:
            return domain_array[new]

    if missing:
        raise ValueError(
            f"column {column!r} has {missing} missing value(s); impute them with a public "
            "rule, or add an explicit category for them to the domain"
        )
    if outside:
        shown = ", ".join(repr(v) for v in outside[:5])
        more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
        raise ValueError(
            f"column {column!r} holds value(s) outside the domain: {shown}{more}; add them "
            "to the public domain or recode them (the domain is never taken from the data)"
        )
    return np.ascontiguousarray(codes, dtype=_code_dtype(len(domain))), decode


def _keep_from_epsilon(epsilon: float, m: int) -> int:
    """Largest ``a`` with ``1 + (a/2**32) m / (1 - a/2**32) <= e^ε`` (never overstated)."""
    with localcontext() as context:
        context.prec = 80
        growth = Decimal(epsilon).exp()
        retention = (growth - 1) / (growth - 1 + m)
        scaled = retention * (2**_KEEP_BITS)
        keep = int(scaled.to_integral_value(rounding="ROUND_FLOOR"))
        if scaled - keep < Decimal(10) ** -60:
            keep -= 1  # too close to call at this precision: round down
        keep = max(0, min(keep, 2**_KEEP_BITS - 1))
        while keep > 0 and Decimal(1) + Decimal(keep) * m / (2**_KEEP_BITS - keep) > growth:
            keep -= 1
    return int(keep)


def _rho_bound(gamma: float) -> dict[str, Any]:
    return {
        "amplification": gamma,
        "condition": "no upward rho1-to-rho2 or downward rho2-to-rho1 privacy breach when "
        "rho2 (1 - rho1) / (rho1 (1 - rho2)) > amplification (Evfimievski, "
        "Gehrke and Srikant 2003, as recalled in SPEC §9.3)",
        "rho2_above": {str(rho1): gamma * rho1 / (1 - rho1 + gamma * rho1) for rho1 in _RHO1},
    }


def randomized_response(
    data: Any,
    *,
    column: Hashable,
    domain: Any,
    epsilon: float | None = None,
    retention: float | None = None,
    seed: int | None = None,
    n_threads: int | None = None,
) -> Release:
    """Uniform perturbation (k-ary randomized response) of one categorical column (§9.3).

    Each value is kept with probability ``p`` (the retention), or else replaced by a
    uniform draw from the public ``domain`` of ``m`` categories (possibly itself), so
    ``Pr[x -> x] = p + (1 - p)/m`` and ``Pr[x -> y] = (1 - p)/m``. This is ε-local
    differential privacy with ``e^ε = 1 + p m / (1 - p)`` for the column, and
    ``(rho1, rho2)``-privacy for every pair with ``rho2 (1 - rho1) / (rho1 (1 - rho2))
    > e^ε``. The
    other columns are released unchanged and are not protected. Rows keep their order.

    Sampling is exact: ``p`` is the rational ``a / 2**32`` with the largest ``a`` such that
    ``a / 2**32 <= retention`` (or, from ``epsilon``, such that the resulting ε does not
    exceed the one asked for), and the replacement is an exact uniform draw.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
        Never modified.
    column : hashable
        The sensitive column.
    domain : sequence or Taxonomy
        The public categories (a Taxonomy gives its leaves); never inferred from the data.
        At least 2.
    epsilon : float, optional
        Local-DP budget ``> 0``: ``p = (e^ε - 1)/(e^ε - 1 + m)``, rounded down.
    retention : float, optional
        ``p`` in ``[0, 1)``. Give exactly one of ``epsilon`` and ``retention``.
    seed : int, optional
        Reproducible, not for publication.
    n_threads : int, optional
        Threads for the draws. Results do not depend on it.

    Returns
    -------
    Release
        The report gives the retention and ε used (and asked for), the keep probability,
        the amplification and the ``(rho1, rho2)`` bound.

    Raises
    ------
    TypeError, ValueError
        Unknown column, a domain with fewer than 2 or repeated categories, values outside
        the domain or missing, both or neither of ``epsilon`` and ``retention``,
        ``epsilon <= 0``, ``retention`` outside ``[0, 1)``.

    References
    ----------
    A. Evfimievski, J. Gehrke and R. Srikant, "Limiting privacy breaches in privacy
    preserving data mining", PODS 2003. S. L. Warner, "Randomized response", JASA 1965.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"disease": ["flu", "cold", "flu", "none"], "zip": [1, 2, 3, 4]})
    >>> release = randomized_response(table, column="disease",
    ...                               domain=["cold", "flu", "none"], epsilon=1.0, seed=3)
    >>> release.report.epsilon <= 1.0, release.report.unprotected_columns
    (True, ['zip'])
    """
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        if table.n_rows == 0:
            raise ValueError("the table is empty (0 rows); nothing to release")
        (name,) = check_columns([column], table.names)
        categories = _domain_values(domain)
        m = len(categories)
        if (epsilon is None) == (retention is None):
            raise ValueError(
                "give exactly one of epsilon (local differential privacy) and retention "
                "(the probability of keeping a value)"
            )
        if epsilon is not None:
            epsilon = check_epsilon(epsilon)
            keep = _keep_from_epsilon(epsilon, m)
        else:
            retention = _check_retention(retention)
            keep = _keep_numerator(retention)
        seed = check_seed(seed)
        threads = _threads(n_threads)
        codes, decode = _encode(table, name, categories)
    p = keep / 2**_KEEP_BITS
    gamma = 1.0 + float(Fraction(keep * m, 2**_KEEP_BITS - keep))
    epsilon_used = math.log(gamma)
    source = _source(seed)
    with timer.phase("perturb"):
        new_codes = noise.retain_or_replace(
            source.key("randomized_response", str(name)),
            keep,
            codes,
            np.arange(m, dtype=codes.dtype),
            n_threads=threads,
        )
    with timer.phase("assemble"):
        result = table.rebuild({name: decode(new_codes)}, None)
    unprotected = [str(n) for n in table.names if n != name]
    ledger = [
        LedgerEntry(
            step="randomized response",
            columns=(str(name),),
            epsilon=epsilon_used,
            mechanism="k-ary randomized response (uniform perturbation), local DP",
            sensitivity=1.0,
            noise_scale=1.0 - p,
            sampler=noise.RETAIN_SAMPLER_NAME,
            details={
                "noise_scale_is": "replacement probability 1 - p",
                "sensitivity_is": "one record's category",
            },
        )
    ]
    guarantee = (
        f"{epsilon_used:.6g}-local differential privacy for column {str(name)!r}: each "
        f"record's value is kept with probability {p:.6g}, else replaced by a uniform draw "
        f"from the public domain of {m} categories, independently of every other record. "
        "Centrally this protects only that column's value of a record."
    )
    if unprotected:
        guarantee += (
            f" Column(s) {unprotected} are released unchanged and are NOT protected by "
            "any guarantee."
        )
    notes = [SEEDED_NOTE] if seed is not None else []
    if epsilon is not None:
        notes.append(
            f"retention rounded down to {keep}/2**32 for exact sampling: the epsilon spent, "
            f"{epsilon_used:.10g}, is at most the {epsilon:g} asked for"
        )
    report = Report(
        method="randomized_response",
        parameters={
            "column": str(name),
            "domain_size": m,
            "epsilon_requested": epsilon,
            "retention_requested": retention,
            "retention": p,
            "retention_fraction": f"{keep}/2**32",
            "epsilon": epsilon_used,
            "keep_probability": p + (1 - p) / m,
        },
        epsilon=epsilon_used,
        ledger=ledger,
        guarantee=guarantee,
        guarantee_level="local",
        protected_columns=[str(name)],
        unprotected_columns=unprotected,
        clamped={},
        seeded=seed is not None,
        sampler=noise.RETAIN_SAMPLER_NAME,
        timings=timer.timings,
        n_rows=table.n_rows,
        notes=notes,
        extra={
            "domain": [c if isinstance(c, (str, int, float)) else str(c) for c in categories],
            "rho_bound": _rho_bound(gamma),
        },
    )
    return Release(result, report)
