"""Utility metrics comparing an original table with its release (SPEC §6).

Each metric takes pandas, Arrow or NumPy input. A single column (1-D array, Series,
Arrow array) gives a float; a table gives the mean over its columns, as Sánchez et al.
(2016) report it, or a mapping ``{column: value}`` with ``per_column=True``.

Metrics read the original data: they are for the data holder and must not be published
with the release.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from dpfast.io import as_table_data


def _columns(data: Any) -> tuple[list[Hashable], dict[Hashable, np.ndarray], bool]:
    """Return (names, arrays, is_single_column)."""
    if isinstance(data, np.ndarray) and data.ndim == 1:
        return [0], {0: data}, True
    if hasattr(data, "to_numpy") and getattr(data, "ndim", 2) == 1:  # pandas Series
        return [0], {0: np.asarray(data.to_numpy())}, True
    if type(data).__module__.startswith("pyarrow") and not hasattr(data, "column_names"):
        return [0], {0: np.asarray(data.to_numpy(zero_copy_only=False))}, True
    if isinstance(data, (list, tuple)):
        return [0], {0: np.asarray(data)}, True
    table = as_table_data(data)
    return list(table.names), {n: table.column(n) for n in table.names}, False


def _paired(
    original: Any, released: Any
) -> tuple[list[Hashable], dict[Hashable, np.ndarray], dict[Hashable, np.ndarray], bool]:
    names_o, cols_o, single_o = _columns(original)
    names_r, cols_r, single_r = _columns(released)
    if single_o != single_r or names_o != names_r:
        raise ValueError(
            f"original and released must have the same columns, got {names_o} and {names_r}"
        )
    for name in names_o:
        if cols_o[name].shape != cols_r[name].shape:
            raise ValueError(
                f"column {name!r} has {cols_o[name].shape[0]} original and "
                f"{cols_r[name].shape[0]} released rows; pass tables of the same shape"
            )
        if cols_o[name].shape[0] == 0:
            raise ValueError(f"column {name!r} is empty; metrics need at least one row")
    return names_o, cols_o, cols_r, single_o


def _bounds_for(bounds: Any, name: Hashable, single: bool) -> tuple[float, float] | None:
    if bounds is None:
        return None
    if single and not isinstance(bounds, Mapping):
        pair = bounds
    else:
        if name not in bounds:
            raise ValueError(f"no bounds for column {name!r}; add it to bounds")
        pair = bounds[name]
    lower, upper = float(pair[0]), float(pair[1])
    if not lower <= upper:
        raise ValueError(f"bounds for column {name!r} are inverted: ({lower}, {upper})")
    return lower, upper


def _aggregate(
    values: dict[Hashable, float], single: bool, per_column: bool
) -> float | dict[Hashable, float]:
    if single:
        return next(iter(values.values()))
    if per_column:
        return values
    return float(np.mean(list(values.values())))


def column_metric(value: float | dict[Hashable, float]) -> float:
    """The float a metric returns for a single column (narrows the return type)."""
    if isinstance(value, dict):
        raise TypeError("expected a single column's metric, got a per-column mapping")
    return float(value)


def _as_float(values: np.ndarray, name: Hashable) -> np.ndarray:
    try:
        result = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"column {name!r} is not numeric") from exc
    return result


def _per_column(
    original: Any, released: Any, per_column: bool,
    metric: Callable[[Hashable, np.ndarray, np.ndarray, bool], float],
) -> float | dict[Hashable, float]:
    names, cols_o, cols_r, single = _paired(original, released)
    values = {name: metric(name, cols_o[name], cols_r[name], single) for name in names}
    return _aggregate(values, single, per_column)


def relative_error(
    original: Any, released: Any, bounds: Any = None, sanity: float = 0.01, *,
    per_column: bool = False, taxonomies: Any = None,
) -> float | dict[Hashable, float]:
    """Mean relative error ``|x - x'| / max(|x|, sanity * (upper - lower))``.

    For a categorical column with a taxonomy, the error of a record is the semantic
    distance ``δ(x, x')`` of SPEC §6.1 (already in ``[0, 1)``), and no bounds are needed.

    Parameters
    ----------
    original, released : array, Series, DataFrame, Arrow or 2-D NumPy
        Record-linked: row ``i`` of ``released`` is the release of row ``i`` of ``original``.
    bounds : pair or mapping
        The public domain per column, for the sanity bound.
    sanity : float
        Fraction of the domain width used as the smallest denominator (SPEC §6.1; the
        paper's constant is not recoverable, 0.01 is our default).
    per_column : bool
        Return ``{column: value}`` instead of the mean over columns.
    taxonomies : mapping or Taxonomy, optional
        ``{column: Taxonomy}`` for categorical columns (a single
        :class:`~dpfast.taxonomy.Taxonomy` for a single column). Their values must be
        leaves of the taxonomy.

    Returns
    -------
    float or dict

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
        raise ValueError(f"sanity must be > 0, got {sanity}")

    def taxonomy_for(name: Hashable, single: bool) -> Any:
        if taxonomies is None:
            return None
        if single and hasattr(taxonomies, "distances_between"):
            return taxonomies
        if not isinstance(taxonomies, Mapping):
            raise TypeError(
                f"taxonomies must be a mapping {{column: Taxonomy}}, got {taxonomies!r}"
            )
        return taxonomies.get(name)

    def metric(name: Hashable, x: np.ndarray, y: np.ndarray, single: bool) -> float:
        taxonomy = taxonomy_for(name, single)
        if taxonomy is not None:
            distances = taxonomy.distances_between(
                taxonomy.encode(x, column=name), taxonomy.encode(y, column=name)
            )
            return float(np.mean(distances))
        pair = _bounds_for(bounds, name, single)
        if pair is None:
            raise ValueError("relative_error needs bounds for the sanity bound")
        x, y = _as_float(x, name), _as_float(y, name)
        floor = sanity * (pair[1] - pair[0])
        denominator = np.maximum(np.abs(x), floor)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(denominator > 0, np.abs(x - y) / denominator,
                             np.where(x == y, 0.0, np.inf))
        return float(np.mean(ratio))

    return _per_column(original, released, per_column, metric)


def _histogram_pair(
    x: np.ndarray, y: np.ndarray, pair: tuple[float, float] | None, bins: int, discrete: bool
) -> tuple[np.ndarray, np.ndarray]:
    if discrete:
        values, inverse = np.unique(np.concatenate([x, y]), return_inverse=True)
        counts_x = np.bincount(inverse[: x.shape[0]], minlength=values.shape[0])
        counts_y = np.bincount(inverse[x.shape[0]:], minlength=values.shape[0])
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
    return (np.bincount(index_x, minlength=bins).astype(np.float64),
            np.bincount(index_y, minlength=bins).astype(np.float64))


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
    """Base-2 Jensen-Shannon divergence of two histograms (normalised here), in ``[0, 1]``."""
    p = p / p.sum()
    q = q / q.sum()
    middle = (p + q) / 2
    total = 0.0
    for dist in (p, q):
        mask = dist > 0
        total += 0.5 * float(np.sum(dist[mask] * np.log2(dist[mask] / middle[mask])))
    return max(0.0, min(1.0, total))


def jensen_shannon(
    original: Any, released: Any, bounds: Any = None, bins: int = 100, *,
    discrete: bool | None = None, per_column: bool = False,
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

    Examples
    --------
    >>> jensen_shannon(np.array([0.1, 0.2]), np.array([0.1, 0.2]), (0, 1))
    0.0
    >>> jensen_shannon(np.array([1, 1]), np.array([2, 2]))
    1.0
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")

    def metric(name: Hashable, x: np.ndarray, y: np.ndarray, single: bool) -> float:
        pair = _bounds_for(bounds, name, single)
        is_discrete = discrete
        if is_discrete is None:
            is_discrete = _looks_discrete(x, y, pair)
        if not is_discrete:
            x, y = _as_float(x, name), _as_float(y, name)
        p, q = _histogram_pair(x, y, pair, int(bins), bool(is_discrete))
        return jensen_shannon_counts(p, q)

    return _per_column(original, released, per_column, metric)


def reconstruct_distribution(
    released: Any,
    column: Hashable,
    retention: float | None = None,
    *,
    domain: Any = None,
) -> pd.DataFrame:
    """Estimate a column's original category frequencies after randomized response.

    The unbiased estimator of SPEC §9.3: with ``n`` released rows, ``m`` public
    categories, retention ``p`` and observed frequencies ``λ̂_y = f_y / n``: ``π̂_y = (λ̂_y - (1 - p) / m) / p``, unbiased because
    ``E[λ̂_y] = p π_y + (1 - p) / m``, with standard error ``sqrt(λ̂_y (1 - λ̂_y) / n) / p``.
    Estimates may fall outside ``[0, 1]``; they are not clipped (clipping would bias them).
    Reading only the released data, this is post-processing: it costs no budget.

    Parameters
    ----------
    released : Release, pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
        The output of :func:`dpfast.randomized_response`, or its data.
    column : hashable
        The perturbed column.
    retention : float, optional
        The retention ``p`` used, in ``(0, 1)``. Default: the one in the release's report
        (the exact value sampled).
    domain : sequence or Taxonomy, optional
        The public categories. Default: the release's report.

    Returns
    -------
    pandas.DataFrame
        Indexed by category, with columns ``observed`` (``λ̂``), ``estimate`` (``π̂``) and
        ``standard_error``.

    Raises
    ------
    ValueError
        A retention outside ``(0, 1)``, no domain, or released values outside it.

    Examples
    --------
    >>> import pandas as pd
    >>> released = pd.DataFrame({"c": ["a"] * 70 + ["b"] * 30})
    >>> reconstruct_distribution(released, "c", 0.5, domain=["a", "b"])["estimate"].round(2)
    a    0.9
    b    0.1
    Name: estimate, dtype: float64
    """
    report = getattr(released, "report", None)
    data = getattr(released, "data", released) if report is not None else released
    parameters = getattr(report, "parameters", {}) if report is not None else {}
    if retention is None:
        if "retention" not in parameters:
            raise ValueError(
                "retention is required unless released is a Release from "
                "randomized_response; pass the retention p used"
            )
        retention = parameters["retention"]
    if domain is None:
        extra = getattr(report, "extra", {}) if report is not None else {}
        if "domain" not in extra:
            raise ValueError(
                "domain is required unless released is a Release from randomized_response; "
                "pass the public list of categories"
            )
        domain = extra["domain"]
    for attribute in ("leaves", "domain"):
        if not isinstance(domain, (list, tuple, np.ndarray, pd.Index)) and hasattr(
                domain, attribute):
            domain = getattr(domain, attribute)
            domain = domain() if callable(domain) else domain
            break
    if isinstance(retention, bool) or not isinstance(retention, (int, float, np.number)):
        raise TypeError(f"retention must be a number, got {retention!r}")
    p = float(retention)
    if not 0.0 < p < 1.0:
        raise ValueError(
            f"retention must be in (0, 1), got {retention!r}; with 0 the release carries no "
            "information about the original values"
        )
    categories = pd.Index(list(domain))
    if len(categories) < 2 or not categories.is_unique:
        raise ValueError("domain must hold at least 2 distinct categories")
    table = as_table_data(data)
    if column not in table.names:
        raise ValueError(f"unknown column {column!r}; the table has columns {table.names}")
    values = table.column(column)
    n = values.shape[0]
    if n == 0:
        raise ValueError(f"column {column!r} is empty; nothing to estimate")
    codes = categories.get_indexer(values)
    if (codes < 0).any():
        bad = pd.unique(values[codes < 0])[:5]
        raise ValueError(
            f"column {column!r} holds value(s) outside the domain: {list(bad)}; pass the "
            "domain used for the release"
        )
    m = len(categories)
    observed = np.bincount(codes, minlength=m) / n
    estimate = (observed - (1.0 - p) / m) / p
    error = np.sqrt(observed * (1.0 - observed) / n) / p
    return pd.DataFrame(
        {"observed": observed, "estimate": estimate, "standard_error": error},
        index=categories,
    )
