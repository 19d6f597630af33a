"""Record-level and distributional metrics: relative error, JSD, variance variation.

docs/design.md#metrics. Each metric takes pandas, Arrow or NumPy input. A single column gives a
float; a table gives the mean over its columns, as Sánchez et al. (2016) report it, or a
mapping ``{column: value}`` with ``per_column=True``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from dpfast._validation import quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.metrics._common import bounds_for, finite, per_column_metric


def relative_error(
    original: Any,
    released: Any,
    bounds: Any = None,
    sanity: float = 0.01,
    *,
    per_column: bool = False,
    taxonomies: Any = None,
) -> float | dict[Hashable, float]:
    """Mean relative error ``|x - x'| / max(|x|, sanity * (upper - lower))``.

    For a categorical column with a taxonomy, the error of a record is the semantic
    distance ``δ(x, x')`` of docs/design.md#relative-error (already in ``[0, 1)``), and no bounds
    are needed.

    Parameters
    ----------
    original, released : array, Series, DataFrame, Arrow or 2-D NumPy
        Record-linked: row ``i`` of ``released`` is the release of row ``i`` of ``original``.
    bounds : pair or mapping
        The public domain per column, for the sanity bound.
    sanity : float
        Fraction of the domain width used as the smallest denominator
        (docs/design.md#relative-error; the paper's constant is not recoverable, 0.01 is our
        default).
    per_column : bool
        Return ``{column: value}`` instead of the mean over columns.
    taxonomies : mapping or Taxonomy, optional
        ``{column: Taxonomy}`` for categorical columns (a single
        :class:`~dpfast.taxonomy.Taxonomy` for a single column). Their values must be
        leaves of the taxonomy.

    Returns
    -------
    float or dict

    Raises
    ------
    DPFastValueError
        Tables of different columns or lengths, an empty column, a NaN or infinite value
        in a numeric column, missing or inverted bounds, or a bad option value.
    DPFastTypeError
        A column that is neither numeric nor categorical with a taxonomy.

    Examples
    --------
    >>> relative_error(np.array([10.0, 0.0]), np.array([11.0, 1.0]), (0, 100))
    0.55
    >>> from dpfast.taxonomy import Taxonomy
    >>> jobs = Taxonomy.from_mapping({"*": {"A": ["a1", "a2"], "b": None}})
    >>> round(relative_error(["a1", "b"], ["a2", "b"], taxonomies=jobs), 4)  # log2(1.5) / 2
    0.2925
    """
    if not sanity > 0:
        raise DPFastValueError(f"sanity must be > 0, got {sanity}")

    def taxonomy_for(name: Hashable, single: bool) -> Any:
        if taxonomies is None:
            return None
        if single and hasattr(taxonomies, "distances_between"):
            return taxonomies
        if not isinstance(taxonomies, Mapping):
            raise DPFastTypeError(
                f"taxonomies must be a mapping {{column: Taxonomy}}, got {quoted(taxonomies)}"
            )
        return taxonomies.get(name)

    def metric(name: Hashable, x: np.ndarray, y: np.ndarray, single: bool) -> float:
        taxonomy = taxonomy_for(name, single)
        if taxonomy is not None:
            distances = taxonomy.distances_between(
                taxonomy.encode(x, column=name), taxonomy.encode(y, column=name)
            )
            return float(np.mean(distances))
        pair = bounds_for(bounds, name, single)
        if pair is None:
            raise DPFastValueError("relative_error needs bounds for the sanity bound")
        x, y = finite(x, name), finite(y, name)
        floor = sanity * (pair[1] - pair[0])
        denominator = np.maximum(np.abs(x), floor)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(
                denominator > 0, np.abs(x - y) / denominator, np.where(x == y, 0.0, np.inf)
            )
        return float(np.mean(ratio))

    return per_column_metric(original, released, per_column, metric)


def _histogram_pair(
    x: np.ndarray, y: np.ndarray, pair: tuple[float, float] | None, bins: int, discrete: bool
) -> tuple[np.ndarray, np.ndarray]:
    if discrete:
        values, inverse = np.unique(np.concatenate([x, y]), return_inverse=True)
        counts_x = np.bincount(inverse[: x.shape[0]], minlength=values.shape[0])
        counts_y = np.bincount(inverse[x.shape[0] :], minlength=values.shape[0])
        return counts_x.astype(np.float64), counts_y.astype(np.float64)
    x, y = x.astype(np.float64), y.astype(np.float64)
    if pair is None:
        pair = (float(min(x.min(), y.min())), float(max(x.max(), y.max())))
    lower, upper = pair
    if upper == lower:
        upper = lower + 1.0
    # Values equal to the upper bound go to the last bin; values outside fall in the end bins.
    index_x = np.clip(np.floor((x - lower) * bins / (upper - lower)).astype(np.int64), 0, bins - 1)
    index_y = np.clip(np.floor((y - lower) * bins / (upper - lower)).astype(np.int64), 0, bins - 1)
    return (
        np.bincount(index_x, minlength=bins).astype(np.float64),
        np.bincount(index_y, minlength=bins).astype(np.float64),
    )


MAX_DISCRETE_VALUES = 1000


def _looks_discrete(x: np.ndarray, y: np.ndarray, pair: tuple[float, float] | None) -> bool:
    numeric = [np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_ for a in (x, y)]
    if not all(numeric):
        return True
    if not all(np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_ for a in (x, y)):
        return False
    if pair is None:
        pair = (float(min(x.min(), y.min())), float(max(x.max(), y.max())))
    return pair[1] - pair[0] + 1 <= MAX_DISCRETE_VALUES


def jensen_shannon_counts(p: np.ndarray, q: np.ndarray) -> float:
    """Base-2 Jensen-Shannon divergence of two histograms (normalised here), in ``[0, 1]``.

    The core of :func:`jensen_shannon`, for callers that already hold the counts (an
    engine's histograms): each histogram is divided by its total, and empty bins of one
    histogram add nothing to its term.

    Parameters
    ----------
    p, q : ndarray of float64, shape (n_bins,)
        Counts (or weights) over the same bins, each with a positive total. They are not
        modified.

    Returns
    -------
    float
        0 for proportional histograms, 1 for histograms with no bin in common; clipped
        to ``[0, 1]`` against rounding.

    Examples
    --------
    >>> import numpy as np
    >>> jensen_shannon_counts(np.array([3.0, 1.0]), np.array([6.0, 2.0]))
    0.0
    >>> jensen_shannon_counts(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    1.0
    >>> round(jensen_shannon_counts(np.array([2.0, 2.0]), np.array([1.0, 3.0])), 4)
    0.0488
    """
    p = p / p.sum()
    q = q / q.sum()
    middle = (p + q) / 2
    total = 0.0
    for dist in (p, q):
        mask = dist > 0
        total += 0.5 * float(np.sum(dist[mask] * np.log2(dist[mask] / middle[mask])))
    return max(0.0, min(1.0, total))


def jensen_shannon(
    original: Any,
    released: Any,
    bounds: Any = None,
    bins: int = 100,
    *,
    discrete: bool | None = None,
    per_column: bool = False,
) -> float | dict[Hashable, float]:
    """Jensen-Shannon divergence (base 2) between original and released marginals.

    Continuous columns use ``bins`` equal-width bins over the domain ``bounds`` (values at
    the upper bound go to the last bin); discrete columns use one bin per value.
    By default a column is discrete when it is not numeric, or when it holds integers and
    its domain spans at most ``MAX_DISCRETE_VALUES`` (1000) values, such as ages or hours;
    an integer column with a wide domain (a survey weight, an income) is binned.

    Parameters
    ----------
    original, released : array, Series, DataFrame, Arrow or 2-D NumPy
        Row order does not matter.
    bounds : pair or mapping, optional
        The public domain per column (default: the range of both columns together).
        A mapping may leave out non-numeric (categorical) columns.
    bins : int
        Number of bins for continuous columns.
    discrete : bool, optional
        One bin per value. Default: see above.
    per_column : bool
        Return ``{column: value}`` instead of the mean over columns.

    Returns
    -------
    float or dict
        0 for identical distributions, at most 1.

    Raises
    ------
    DPFastValueError
        Tables of different columns or lengths, an empty column, a NaN or infinite value
        in a numeric column, missing or inverted bounds, or a bad option value.
    DPFastTypeError
        A column that is neither numeric nor categorical with a taxonomy.

    Examples
    --------
    >>> jensen_shannon(np.array([0.1, 0.2]), np.array([0.1, 0.2]), (0, 1))
    0.0
    >>> jensen_shannon(np.array([1, 1]), np.array([2, 2]))
    1.0
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise DPFastValueError(f"bins must be a positive integer, got {quoted(bins)}")

    def metric(name: Hashable, x: np.ndarray, y: np.ndarray, single: bool) -> float:
        categorical = not all(
            np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_ for a in (x, y)
        )
        if categorical and isinstance(bounds, Mapping) and name not in bounds:
            pair = None  # categories need no domain: one bin per value
        else:
            pair = bounds_for(bounds, name, single)
        is_discrete = discrete
        if is_discrete is None:
            is_discrete = _looks_discrete(x, y, pair)
        if not is_discrete:
            x, y = finite(x, name), finite(y, name)
        p, q = _histogram_pair(x, y, pair, int(bins), bool(is_discrete))
        return jensen_shannon_counts(p, q)

    return per_column_metric(original, released, per_column, metric)


def variance_variation(
    original: Any,
    released: Any,
    *,
    ddof: int = 0,
    per_column: bool = False,
) -> float | dict[Hashable, float]:
    """Relative change of the variance, ``|S² - S'²| / S²`` (docs/design.md#variance-variation).

    The raw ratio, not a percentage, as in Table 1 of Sánchez et al. (2016). Variances are
    population variances (``ddof=0``, dividing by ``n``) by default, as sdcMicro's MDAV
    weights; ``ddof=1`` gives sample variances. Both are computed with the same ``ddof``.

    Parameters
    ----------
    original, released : array, Series, DataFrame, Arrow or 2-D NumPy
        Numeric columns. Row order does not matter.
    ddof : int
        Delta degrees of freedom: 0 (population, default) or 1 (sample).
    per_column : bool
        Return ``{column: value}`` instead of the mean over columns.

    Returns
    -------
    float or dict
        0 when the variances are equal. A constant original column (``S² = 0``) gives 0
        if the released column is constant too, and ``inf`` otherwise (the change is
        unbounded relative to zero).

    Raises
    ------
    TypeError
        A column is not numeric.
    ValueError
        Mismatched columns or shapes, empty columns, ``ddof`` not 0 or 1, or a column with
        no more rows than ``ddof``.

    Examples
    --------
    >>> variance_variation(np.array([1.0, 3.0]), np.array([0.0, 4.0]))  # |1 - 4| / 1
    3.0
    >>> variance_variation(np.array([5.0, 5.0]), np.array([5.0, 5.0]))
    0.0
    """
    if isinstance(ddof, bool) or ddof not in (0, 1):
        raise DPFastValueError(f"ddof must be 0 (population) or 1 (sample), got {quoted(ddof)}")

    def metric(name: Hashable, x: np.ndarray, y: np.ndarray, single: bool) -> float:
        x, y = finite(x, name), finite(y, name)
        if x.shape[0] <= ddof:
            raise DPFastValueError(
                f"column {quoted(name)} has {x.shape[0]} row(s); the sample variance (ddof=1) "
                "needs at least 2"
            )
        before, after = float(np.var(x, ddof=ddof)), float(np.var(y, ddof=ddof))
        if before == 0.0:
            return 0.0 if after == 0.0 else float("inf")
        return abs(before - after) / before

    return per_column_metric(original, released, per_column, metric)
