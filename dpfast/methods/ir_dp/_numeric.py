"""Numeric columns of ``ir_dp`` (Algorithm 1 of Sánchez et al. 2016) and their guarantee.

Each column is quantised to its public grid, sorted, cut into rank groups of ``k``, and
every group's exact mean gets one discrete Laplace draw (docs/design.md#ranking-partition,
#exact-grid).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpfast._kernels import ranking
from dpfast._release import method_call, option
from dpfast.accounting import GuaranteeLevel
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups


def centroid_sensitivity(grid: Grid, n_records: int, k: int) -> Fraction:
    """L1 sensitivity, in grid steps, of one column's rounded centroid list.

    Lemma 1 of Sánchez et al. (2016) bounds the exact centroids' change by ``d_int / k``
    (docs/design.md#lemma-1). Rounding each centroid to the grid adds at most one step per group
    that changes, hence ``d_int / k + n_groups`` (docs/design.md#exact-grid).
    """
    return Fraction(grid.d_int, k) + (n_records // k)


def release_shuffled(
    values: np.ndarray,
    grid: Grid,
    layout: RankGroups,
    draws: np.ndarray,
    order: np.ndarray,
    round_values: bool,
    out: np.ndarray,
) -> int:
    """Individual-ranking release of one column in its own row order; returns the clamped count.

    Only the sorted values matter: output row ``r`` gets the value of the rank group of
    rank ``order[r]`` (docs/engines.md#ir-dp: the same on every engine).

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
        Never written.
    grid : Grid
    layout : RankGroups
        The rank groups (``n // k`` of them; which holds the remainder).
    draws : ndarray of int64, shape (n // k,)
        One noise draw per rank group, in grid steps.
    order : ndarray of int64, shape (n,)
        A permutation of the ranks: ``noise.permutation`` of the column's order key.
    round_values : bool
        Round released values to integers (post-processing).
    out : ndarray of float64, shape (n,)
        Receives the released column.
    """
    quantised, n_clamped = ranking.quantise_column(
        values, grid.lower, grid.upper, grid.gamma, grid.d_int, grid.warp
    )
    ordered = ranking.radix_sort_packed(quantised, 0, max(1, grid.d_int.bit_length()))
    del quantised
    groups = group_values(ordered, 0, grid, layout, draws, round_values)
    ranking.take_groups(groups, order, *layout.scalars, out)
    return int(n_clamped)


def grid_ranks(values: np.ndarray, grid: Grid) -> np.ndarray:
    """Return the rows in rank order on ``grid``: by grid value, ties by row (for metrics)."""
    g = grid
    quantised, _ = ranking.quantise_column(values, g.lower, g.upper, g.gamma, g.d_int, g.warp)
    return np.argsort(quantised, kind="stable").astype(np.int64, copy=False)


def group_values(
    sorted_words: np.ndarray,
    shift: int,
    grid: Grid,
    layout: RankGroups,
    draws: np.ndarray,
    round_values: bool,
) -> np.ndarray:
    """Every rank group's released value, from the column's sorted grid values."""
    sums = np.zeros(draws.shape[0], dtype=np.int64)
    ranking.add_group_sums(sorted_words, shift, 0, *layout.scalars, sums)
    return ranking.noisy_group_values(  # type: ignore[no-any-return]
        sums,
        *layout.scalars,
        draws,
        grid.d_int,
        grid.lower,
        grid.upper,
        grid.gamma,
        round_values,
        grid.warp,
    )


def release_linked(
    values: np.ndarray,
    grid: Grid,
    layout: RankGroups,
    draws: np.ndarray,
    destination: np.ndarray,
    round_values: bool,
    out: np.ndarray,
) -> int:
    """Individual-ranking release of one column, record-linked; returns the clamped count.

    Parameters
    ----------
    values, grid, layout, draws, round_values, out
        As for :func:`release_shuffled`.
    destination : ndarray of int64, shape (n,) or (0,)
        Output position of each input row (empty: input order). Ranking ties go to the
        lower input row.
    """
    g = grid
    packed, n_clamped = ranking.pack_quantised(
        values, g.lower, g.upper, g.gamma, g.d_int, g.index_bits, destination, g.warp
    )
    key_bits = max(1, grid.d_int.bit_length())
    packed = ranking.radix_sort_packed(packed, grid.index_bits, key_bits)
    groups = group_values(packed, grid.index_bits, grid, layout, draws, round_values)
    ranking.scatter_groups(packed, grid.index_bits, *layout.scalars, groups, out)
    return int(n_clamped)


def numeric_guarantee(
    epsilon: float,
    epsilon_column: float | None,
    protected: list[str],
    linkage: str,
    shuffle: bool,
    derived: bool,
) -> tuple[str, GuaranteeLevel]:
    """State what holds for the protected columns, by linkage and shuffling.

    ``epsilon_column`` is each column's equal share, ``None`` for shares by weight.
    """
    spending = (
        f"spending {epsilon_column:g}"
        if epsilon_column is not None
        else "spending its share of it by the public epsilon_weights (the ledger lists each)"
    )
    each = (
        f"{epsilon_column:g}-DP"
        if epsilon_column is not None
        else "DP for its share by the public epsilon_weights (the ledger lists each)"
    )
    bounded = (
        "bounded DP: neighbouring tables differ in one record's values, and the number of "
        "rows is public"
    )
    if derived:
        return (
            "NOT differentially private: the bounds were derived from the data "
            "(bounds='data'), so the noise scale depends on the data.",
            "none",
        )
    if linkage == "columns":
        return (
            f"{epsilon:g}-differential privacy ({bounded}) for columns {protected}: each "
            f"column is an independently shuffled list of noisy centroids {spending}; rows "
            "are not linked across these columns.",
            "proven",
        )
    if len(protected) == 1 and shuffle:
        return (
            f"{epsilon:g}-differential privacy ({bounded}) for column {protected}: with one "
            "protected column and rows in random order the release is equivalent to the "
            "noisy centroid list.",
            "proven",
        )
    why = (
        "which rows share a rank group in each column"
        if len(protected) > 1
        else "which rows share a rank group (rows are not shuffled)"
    )
    return (
        f"NOT proven differentially private: the record-linked release of Sánchez et al. "
        f"(2016), who claim {epsilon:g}-differential privacy ({bounded}). Each column's list "
        f"of noisy centroids is {each}, but the record-linked release also "
        f"shows {why}, and no proof covers that pattern (docs/design.md#record-linkage). "
        f"For a proven release choose {option('linkage', 'columns')} (rows not linked "
        f"across columns), or {method_call('mdav_dp')} for linked records.",
        "as_published",
    )
