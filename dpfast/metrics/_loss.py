"""Information loss of masked numeric data: IL1-IL6 and the SSE/SST of a partition.

See docs/design.md#information-loss.

Zero denominators (a zero mean, variance or covariance, a constant column's undefined
correlation) are guarded the same way everywhere: a term whose numerator is 0 too (the
statistic did not change) counts as 0 loss; any other such term is skipped and counted in
:attr:`InformationLoss.skipped`. A measure whose terms are all skipped is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfast._validation import quoted
from dpfast.exceptions import DPFastKeyError, DPFastValueError
from dpfast.metrics._common import (
    aggregate,
    as_float,
    columns_of,
    finite,
    paired,
    ratio_or_zero,
)

MEASURES = ("IL1", "IL2", "IL3", "IL4", "IL5", "IL6")


@dataclass(frozen=True)
class InformationLoss(Mapping[str, float]):
    """IL1-IL5 and their summary IL6; a read-only mapping ``{"IL1": ..., "IL6": ...}``.

    Attributes
    ----------
    il1, il2, il3, il4, il5 : float
        Mean absolute error over ``√2·S``, relative change of the means, of the variances,
        of the covariances, and mean absolute change of the correlations.
    il6 : float
        ``100 * mean(IL1..IL5)`` over the measures that are defined (IL5 is NaN for a
        single column, which has no pairs).
    skipped : dict
        ``{"IL1": count, ...}``: terms skipped because their denominator was 0 while the
        statistic changed.

    Examples
    --------
    >>> loss = information_loss(np.array([1.0, 3.0, 5.0]), np.array([2.0, 2.0, 5.0]))
    >>> list(loss), loss["IL2"], round(loss.il6, 2)
    (['IL1', 'IL2', 'IL3', 'IL4', 'IL5', 'IL6'], 0.0, 19.72)
    >>> loss.as_dict()["IL5"] is None, loss.skipped["IL1"]  # one column: no correlation
    (True, 0)
    """

    il1: float
    il2: float
    il3: float
    il4: float
    il5: float
    il6: float
    skipped: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, key: str) -> float:
        if key not in MEASURES:
            raise DPFastKeyError(f"{quoted(key)}; expected one of {list(MEASURES)}")
        return float(getattr(self, key.lower()))

    def __iter__(self) -> Iterator[str]:
        return iter(MEASURES)

    def __len__(self) -> int:
        return len(MEASURES)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"IL1": ..., ..., "IL6": ..., "skipped": {...}}`` (NaN as None)."""
        values: dict[str, Any] = {
            key: (None if math.isnan(self[key]) else self[key]) for key in MEASURES
        }
        values["skipped"] = dict(self.skipped)
        return values


def _mean_of_terms(terms: list[float | None], measure: str, skipped: dict[str, int]) -> float:
    defined = [t for t in terms if t is not None]
    skipped[measure] = len(terms) - len(defined)
    return float(np.mean(defined)) if defined else math.nan


def _matrices(original: Any, released: Any) -> tuple[np.ndarray, np.ndarray]:
    names, cols_o, cols_r, _ = paired(original, released)
    x = np.column_stack([as_float(cols_o[n], n) for n in names])
    y = np.column_stack([as_float(cols_r[n], n) for n in names])
    for label, matrix in (("original", x), ("released", y)):
        if not np.isfinite(matrix).all():
            raise DPFastValueError(
                f"{label} holds NaN or inf; information loss needs finite numbers"
            )
    return x, y


def covariance(matrix: np.ndarray, ddof: int) -> np.ndarray:
    centred = matrix - matrix.mean(axis=0)
    result: np.ndarray = centred.T @ centred / (matrix.shape[0] - ddof)
    return result


def correlation_change(v: np.ndarray, w: np.ndarray, i: int, j: int) -> float | None:
    defined = v[i, i] > 0 and v[j, j] > 0, w[i, i] > 0 and w[j, j] > 0
    if all(defined):
        r = v[i, j] / math.sqrt(v[i, i] * v[j, j])
        s = w[i, j] / math.sqrt(w[i, i] * w[j, j])
        return float(abs(r - s))
    same = v[i, i] == w[i, i] and v[j, j] == w[j, j] and v[i, j] == w[i, j]
    return 0.0 if same else None


def information_loss(original: Any, released: Any, *, ddof: int = 0) -> InformationLoss:
    """IL1-IL5 and IL6 of a masked numeric table against the original.

    See docs/design.md#information-loss.

    With ``p`` columns, standard deviations ``S_j``, means ``x̄_j``, covariances ``v_ij``
    and correlations ``r_ij`` of the original (primed: the released table)::

        IL1 = (1/(n p)) Σ_j Σ_i |x_ij - x'_ij| / (√2 S_j)
        IL2 = (1/p) Σ_j |x̄_j - x̄'_j| / |x̄_j|
        IL3 = (1/p) Σ_j |v_jj - v'_jj| / |v_jj|
        IL4 = (1/(p(p+1)/2)) Σ_{i<=j} |v_ij - v'_ij| / |v_ij|
        IL5 = (1/(p(p-1)/2)) Σ_{i<j} |r_ij - r'_ij|
        IL6 = 100 (IL1 + IL2 + IL3 + IL4 + IL5) / 5

    IL1 is sdcMicro's ``dUtility`` "IL1s" divided by ``n p``; the exact forms of IL2-IL5
    are recalled, not confirmed in a source (unconfirmed: docs/design.md#information-loss). Only IL1
    is record-linked: IL2-IL5 compare statistics, which do not depend on the row order.

    Parameters
    ----------
    original, released : Series, DataFrame, Arrow or NumPy
        Numeric, finite, of the same shape; row ``i`` of ``released`` is the release of row
        ``i`` of ``original``.
    ddof : int
        0 (population, default) or 1 (sample) for standard deviations and covariances.

    Returns
    -------
    InformationLoss
        A mapping ``{"IL1": ..., ..., "IL6": ...}`` with a ``skipped`` count per measure.
        Zero denominators: a term is 0 when its statistic did not change, and is skipped
        and counted otherwise; a measure with every term skipped is NaN, and IL6 averages
        the measures that are defined.

    Raises
    ------
    TypeError
        A non-numeric column.
    ValueError
        Mismatched columns or shapes, empty, NaN or inf, or ``ddof`` not 0 or 1, or too few
        rows for ``ddof``.

    Examples
    --------
    >>> x = np.array([[1.0, 2.0], [3.0, 6.0]])
    >>> loss = information_loss(x, x)
    >>> [loss[key] for key in loss]
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    >>> round(information_loss(x[:, 0], np.array([2.0, 2.0]))["IL1"], 4)  # 1 / (√2 · 1)
    0.7071
    """
    if isinstance(ddof, bool) or ddof not in (0, 1):
        raise DPFastValueError(f"ddof must be 0 (population) or 1 (sample), got {quoted(ddof)}")
    x, y = _matrices(original, released)
    n, p = x.shape
    if n <= ddof:
        raise DPFastValueError(f"{n} row(s); the sample covariance (ddof=1) needs at least 2")
    v, w = covariance(x, ddof), covariance(y, ddof)
    mean_x, mean_y = x.mean(axis=0), y.mean(axis=0)
    skipped: dict[str, int] = {}

    il1_terms = []
    for j in range(p):
        error = float(np.mean(np.abs(x[:, j] - y[:, j])))
        il1_terms.append(ratio_or_zero(error, math.sqrt(2.0 * v[j, j])))
    il1 = _mean_of_terms(il1_terms, "IL1", skipped)
    il2 = _mean_of_terms(
        [ratio_or_zero(abs(mean_x[j] - mean_y[j]), mean_x[j]) for j in range(p)], "IL2", skipped
    )
    il3 = _mean_of_terms(
        [ratio_or_zero(abs(v[j, j] - w[j, j]), v[j, j]) for j in range(p)], "IL3", skipped
    )
    il4 = _mean_of_terms(
        [ratio_or_zero(abs(v[i, j] - w[i, j]), v[i, j]) for j in range(p) for i in range(j + 1)],
        "IL4",
        skipped,
    )
    il5 = _mean_of_terms(
        [correlation_change(v, w, i, j) for j in range(p) for i in range(j)], "IL5", skipped
    )
    defined = [value for value in (il1, il2, il3, il4, il5) if not math.isnan(value)]
    il6 = 100.0 * float(np.mean(defined)) if defined else math.nan
    return InformationLoss(il1, il2, il3, il4, il5, il6, skipped)


def _labels(labels: Any, n_rows: int) -> np.ndarray:
    array = np.asarray(
        labels.to_numpy(zero_copy_only=False)
        if type(labels).__module__.startswith("pyarrow")
        else labels
    )
    if array.ndim != 1 or array.shape[0] != n_rows:
        raise DPFastValueError(
            f"labels must be one label per row ({n_rows}), got shape {array.shape}; pass the "
            "partition's labels, e.g. dpfast.partitions.mdav.mdav_labels(...)"
        )
    _, codes = np.unique(array, return_inverse=True)
    return np.asarray(codes, dtype=np.int64).ravel()


def _scaled_columns(
    data: Any, standardize: bool
) -> tuple[list[Hashable], dict[Hashable, np.ndarray], bool]:
    names, columns, single = columns_of(data)
    result: dict[Hashable, np.ndarray] = {}
    for name in names:
        values = finite(columns[name], name)
        if values.shape[0] == 0:
            raise DPFastValueError(f"column {quoted(name)} is empty; metrics need at least one row")
        if standardize:
            scale = float(np.std(values))
            values = (values - values.mean()) / (scale if scale > 0 else 1.0)
        result[name] = values
    return names, result, single


def sse(
    data: Any,
    labels: Any,
    *,
    standardize: bool = False,
    per_column: bool = False,
) -> float | dict[Hashable, float]:
    """Within-group sum of squares of a partition: ``Σ_g Σ_{i∈g} ‖x_i - x̄_g‖²``.

    The information loss that MDAV minimises; ``sse / sst`` is its usual normalised form
    (0 for singleton groups, 1 for one group). Unlike the other metrics, a table's value is
    the **sum** over its columns, not the mean: SSE is a squared Euclidean distance, and
    summing keeps ``sse(table) / sst(table)`` the multivariate ratio of the MDAV papers.

    Parameters
    ----------
    data : Series, DataFrame, Arrow or NumPy
        The original numeric data (finite).
    labels : array_like
        One group label per row (any hashable values).
    standardize : bool
        Centre and scale each column by its population standard deviation first (a
        constant column keeps weight 1, as sdcMicro does), as for MDAV's distances.
    per_column : bool
        Return ``{column: value}``.

    Returns
    -------
    float or dict

    Raises
    ------
    TypeError
        A non-numeric column.
    ValueError
        Labels of the wrong length, an empty table, NaN or inf.

    Examples
    --------
    >>> sse(np.array([1.0, 3.0, 10.0, 12.0]), [0, 0, 1, 1])  # 1 + 1 + 1 + 1
    4.0
    >>> sse(np.array([[1.0, 0.0], [3.0, 2.0]]), [0, 0], per_column=True)
    {0: 2.0, 1: 2.0}
    """
    names, columns, single = _scaled_columns(data, standardize)
    codes = _labels(labels, next(iter(columns.values())).shape[0])
    sizes = np.bincount(codes).astype(np.float64)
    values = {}
    for name in names:
        column = columns[name]
        means = np.bincount(codes, weights=column) / sizes
        values[name] = float(np.sum((column - means[codes]) ** 2))
    return _total(values, single, per_column)


def sst(
    data: Any,
    *,
    standardize: bool = False,
    per_column: bool = False,
) -> float | dict[Hashable, float]:
    """Total sum of squares ``Σ_i ‖x_i - x̄‖²``: :func:`sse` of the one-group partition.

    Parameters
    ----------
    data : Series, DataFrame, Arrow or NumPy
        Numeric, finite.
    standardize, per_column : bool
        As for :func:`sse`; a table's value is the sum over its columns.

    Returns
    -------
    float or dict

    Raises
    ------
    DPFastValueError
        An empty column, or a NaN or infinite value.
    DPFastTypeError
        A column that is not numeric.

    Examples
    --------
    >>> sst(np.array([1.0, 3.0, 10.0, 12.0]))  # mean 6.5: 5.5² + 3.5² + 3.5² + 5.5²
    85.0
    """
    names, columns, single = _scaled_columns(data, standardize)
    values = {name: float(np.sum((c - c.mean()) ** 2)) for name, c in columns.items()}
    return _total({name: values[name] for name in names}, single, per_column)


def _total(
    values: dict[Hashable, float], single: bool, per_column: bool
) -> float | dict[Hashable, float]:
    if single or per_column:
        return aggregate(values, single, per_column)
    return float(math.fsum(values.values()))
