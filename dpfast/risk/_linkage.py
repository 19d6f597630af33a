"""Distance-based and rank-based record linkage (docs/risk.md#record-linkage)."""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._kernels import kdtree as _kdtree
from dpfast._kernels import linkage as _kernels
from dpfast._validation import check_bool, check_choice, check_threads
from dpfast.risk._common import (
    Pair,
    check_taxonomies,
    dpfast_errors,
    numeric_values,
    paired,
    standardising_weight,
    taxonomy_codes,
)
from dpfast.taxonomy import Taxonomy

#: Records per leaf of the k-d tree (32 was the fastest of 8-64 at 1,000,000 x 8).
LEAF_SIZE = 32
#: Released records per task when the queries are spread over threads.
CHUNK = 16_384

_TEXT_HINT = (
    "pass its taxonomy in taxonomies= to compare it by semantic distance, or leave it out "
    "of columns"
)


def mid_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks ``1 .. n`` of ``values``; tied values share the mean of their ranks (float64).

    Examples
    --------
    >>> mid_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist()
    [3.5, 1.0, 3.5, 2.0]
    """
    n = values.shape[0]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.ones(n, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], n)
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


@dataclass(frozen=True)
class LinkageInputs:
    """The kernel's arrays: numeric values, their weights, categorical codes and costs."""

    points: np.ndarray  # float64[n, m], original
    queries: np.ndarray  # float64[n, m], released
    weights: np.ndarray  # float64[m], 1 / variance
    codes: np.ndarray  # int64[n, c], original
    query_codes: np.ndarray  # int64[n, c], released
    table: np.ndarray  # float64[c, q, q], (δ / Δq)²


def _numeric_columns(
    pair: Pair, names: list[Hashable], rank: bool, released: bool
) -> list[np.ndarray]:
    table, role = (pair.released, "released") if released else (pair.original, "original")
    columns = []
    for name in names:
        values = numeric_values(table, name, role, _TEXT_HINT)
        columns.append(mid_ranks(values) if rank else values)
    return columns


def _stack(columns: list[np.ndarray], n: int) -> np.ndarray:
    return np.column_stack(columns) if columns else np.zeros((n, 0))


def _cost_table(taxonomies: list[Taxonomy]) -> np.ndarray:
    """``table[c, a, b] = (δ(a, b) / Δq)²`` per taxonomy, zero-padded to one size."""
    size = max((len(t.domain) for t in taxonomies), default=1)
    table = np.zeros((len(taxonomies), size, size), dtype=np.float64)
    for c, taxonomy in enumerate(taxonomies):
        distances = taxonomy.distance_matrix()
        largest = taxonomy.max_distance
        if largest > 0:
            m = distances.shape[0]
            table[c, :m, :m] = (distances / largest) ** 2
    return table


def linkage_inputs(
    pair: Pair, taxonomies: Mapping[Hashable, Taxonomy], rank: bool
) -> LinkageInputs:
    """Read, check and weight the compared columns (ranks for ``rank``) of both tables."""
    numeric = [name for name in pair.names if name not in taxonomies]
    categorical = [name for name in pair.names if name in taxonomies]
    n = pair.n_records
    columns = _numeric_columns(pair, numeric, rank, released=False)
    weights = np.array([standardising_weight(values) for values in columns])
    kept = [name for name, weight in zip(numeric, weights, strict=True) if weight > 0]
    points = _stack([values for values, w in zip(columns, weights, strict=True) if w > 0], n)
    del columns
    queries = _stack(_numeric_columns(pair, kept, rank, released=True), n)
    for name in numeric:
        if name not in kept:  # left out, but still checked
            numeric_values(pair.released, name, "released", _TEXT_HINT)
    codes = [taxonomy_codes(pair.original, name, taxonomies[name]) for name in categorical]
    query_codes = [taxonomy_codes(pair.released, name, taxonomies[name]) for name in categorical]
    return LinkageInputs(
        points,
        queries,
        weights[weights > 0],
        np.column_stack(codes) if codes else np.zeros((n, 0), dtype=np.int64),
        np.column_stack(query_codes) if query_codes else np.zeros((n, 0), dtype=np.int64),
        _cost_table([taxonomies[name] for name in categorical]),
    )


def linkage_scores(inputs: LinkageInputs, n_threads: int) -> np.ndarray:
    """Per released record: ``1 / t`` when its source is among its ``t`` nearest, else 0."""
    points, queries, weights = inputs.points, inputs.queries, inputs.weights
    n = points.shape[0]
    if points.shape[1] == 0:  # no numeric attribute: a flat column, every box bound 0
        points, queries, weights = np.zeros((n, 1)), np.zeros((n, 1)), np.zeros(1)
    tree = _kdtree.tree_over(points, np.arange(n), LEAF_SIZE, np.sqrt(weights))
    out = np.empty(n, dtype=np.float64)

    def score(first: int) -> None:
        last = min(first + CHUNK, n)
        _kernels.linkage_scores(
            tree,
            weights,
            inputs.codes,
            inputs.table,
            queries,
            inputs.query_codes,
            first,
            last,
            out,
        )

    starts = range(0, n, CHUNK)
    if n_threads == 1 or n <= CHUNK:
        for first in starts:
            score(first)
    else:
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            list(pool.map(score, starts))
    return out


def record_linkage(
    original: Any,
    released: Any,
    *,
    columns: Any = None,
    method: str = "distance",
    taxonomies: Mapping[Hashable, Any] | None = None,
    per_record: bool = False,
    n_threads: int | None = None,
) -> float | np.ndarray:
    """Share of released records whose nearest original record is their own source.

    Distance-based record linkage (Domingo-Ferrer and Torra): released record ``i`` is
    linked to the original record nearest to it, and the link is right when that record is
    ``i``, its source. When ``t`` original records tie for nearest and the source is among
    them, the link is right with probability ``1/t``. Nearest neighbours are exact (a k-d
    tree, no approximation). See docs/risk.md#record-linkage.

    The squared distance between a released record ``y`` and an original record ``x`` is

        d(y, x) = Σ_j (y_j - x_j)² / s_j²  +  Σ_c (δ_c(y_c, x_c) / Δq_c)²

    over the numeric columns ``j`` (``s_j²``: the original's population variance, i.e. the
    Euclidean distance on standardised attributes; a column constant in the original is
    left out, since it adds the same to every distance) and the categorical columns ``c``
    given a taxonomy (``δ_c``: its semantic distance, ``Δq_c``: the largest, as in MDAV).

    Parameters
    ----------
    original, released : table
        Row-aligned tables of any kind dpfast reads (pandas, Arrow, polars, 2-D NumPy; a
        1-D array is one column): row ``i`` of the release comes from row ``i`` of the
        original. ``released`` may be a :class:`dpfast.Release` whose report shows the row
        order kept (docs/risk.md#alignment).
    columns : list, optional
        The attributes the intruder compares; default: every column of the release.
    method : {"distance", "rank"}
        ``"distance"``: on the values. ``"rank"``: rank-based record linkage (Muralidhar and
        Domingo-Ferrer 2016): each numeric column is replaced by its ranks (mid-ranks for
        ties) within its own table, then linked the same way.
    taxonomies : mapping, optional
        ``{column: Taxonomy}``: text columns compared by semantic distance. A text column
        without one is refused (it has no distance).
    per_record : bool
        Return each released record's score (``1/t`` or 0) instead of their mean.
    n_threads : int, optional
        Threads for the searches (default: one per core); the result does not depend on it.

    Returns
    -------
    float or ndarray of float64
        The expected share of correct links in ``[0, 1]``, or the ``n`` scores.

    Raises
    ------
    ValueError
        Tables of different lengths, a shuffled Release, unknown columns, NaN or infinite
        values, labels missing from a taxonomy (all also ``dpfast.exceptions.DPFastError``).
    TypeError
        A text column without a taxonomy, or an unreadable table.

    References
    ----------
    Domingo-Ferrer, J. and Torra, V. (2001). A quantitative comparison of disclosure
    control methods for microdata. Muralidhar, K. and Domingo-Ferrer, J. (2016).
    Rank-based record linkage for re-identification risk assessment. PSD 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from dpfast import risk
    >>> original = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    >>> risk.record_linkage(original, original)
    1.0
    >>> released = np.array([[1.5, 15.0], [1.5, 15.0], [3.0, 31.0], [4.0, 36.0]])
    >>> risk.record_linkage(original, released, per_record=True).tolist()
    [0.5, 0.5, 1.0, 1.0]
    """
    with dpfast_errors():
        method = check_choice(method, "method", ("distance", "rank"))
        per_record = check_bool(per_record, "per_record")
        threads = check_threads(n_threads, os.cpu_count() or 1)
    pair = paired(original, released, columns, "record_linkage")
    inputs = linkage_inputs(pair, check_taxonomies(taxonomies, pair), rank=method == "rank")
    scores = linkage_scores(inputs, threads)
    return scores if per_record else float(np.mean(scores))
