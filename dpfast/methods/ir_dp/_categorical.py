"""Categorical columns of ``ir_dp`` (Algorithm 2 of Sánchez et al. 2016).

Each column is ordered by its taxonomy's data-independent order, cut into rank groups,
and every group's value is drawn from the taxonomy's leaves by the exponential mechanism
with quality ``-Σ semantic distance`` to the group's values (docs/design.md#em-centroid).
The distances are rounded to units of ``2**-DISTANCE_BITS`` (a public table), so the
mechanism is exact (docs/design.md#em-sampler).
"""

from __future__ import annotations

import numpy as np

from dpfast import noise
from dpfast._release import CategoricalColumn, choice_entry, option
from dpfast.accounting import GuaranteeLevel, LedgerEntry
from dpfast.partitions.categorical import DISTANCE_BITS, distance_units
from dpfast.partitions.ranking import RankGroups
from dpfast.taxonomy import Taxonomy

_UNIT = 2.0**-DISTANCE_BITS


def categorical_entry(
    column: CategoricalColumn, epsilon: float, n_groups: int, sensitivity: str
) -> LedgerEntry:
    """Plan one categorical column's exponential mechanism (Algorithm 2)."""
    units = int(distance_units(column.taxonomy.distance_matrix()).max(initial=0))
    effective = units if sensitivity == "paper" else n_groups * units
    rule = (
        "paper: Δq = max semantic distance per group (heuristic: no proof covers the "
        "groups shifting when one record changes, docs/design.md#em-centroid)"
        if sensitivity == "paper"
        else "proven: n_groups * Δq (each group's quality moves by at most Δq)"
    )
    details: dict[str, object] = {
        "n_groups": n_groups,
        "sensitivity_rule": rule,
        "order": "semantic distance to the most marginal value, ties by label",
    }
    scale = 0.0  # a one-value domain: nothing is drawn
    if effective > 0:
        base = noise.exponential_base(epsilon=epsilon, sensitivity=effective)
        details.update(base.details(_UNIT))
        scale = base.scale(_UNIT)
    return choice_entry(
        column,
        epsilon=epsilon,
        unit="rank group",
        sensitivity=effective * _UNIT,
        noise_scale=scale,
        details=details,
    )


def group_codes(
    taxonomy: Taxonomy,
    rank_counts: np.ndarray,
    layout: RankGroups,
    key: np.ndarray,
    entry: LedgerEntry,
    groups: tuple[int, int] | None = None,
) -> np.ndarray:
    """Draw the rank groups' (``layout``'s) released codes from the records per taxonomy rank.

    Every group's, or groups ``first .. stop - 1`` where ``groups`` is ``(first, stop)``:
    each group's draw is the same either way.
    """
    first, stop = (0, layout.n_groups) if groups is None else groups
    if entry.sensitivity == 0:  # a one-value domain: nothing to choose
        return np.zeros(stop - first, dtype=np.int64)
    chosen = noise.exponential_mechanism_sorted_groups(
        key,
        rank_counts,
        layout.k,
        distance_units(taxonomy.rank_distance_matrix()),
        epsilon=entry.epsilon,
        sensitivity=int(entry.details["sensitivity_units"]),
        groups=groups,
        big=layout.big,
    )
    return np.asarray(taxonomy.order_codes)[chosen]  # type: ignore[no-any-return]


def categorical_guarantee(
    guarantee: str, level: GuaranteeLevel, columns: list[str], sensitivity: str
) -> tuple[str, GuaranteeLevel]:
    """Qualify ``guarantee`` for the categorical columns' exponential mechanism."""
    if level == "none":
        return guarantee, level
    if sensitivity == "proven":
        return (
            guarantee + f" Categorical column(s) {columns}: each rank group's value is drawn "
            "by the exponential mechanism with sensitivity n_groups * Δq (proven).",
            level,
        )
    if level == "proven":
        guarantee = "NOT proven differentially private (heuristic): " + guarantee
    return (
        guarantee + f" Categorical column(s) {columns} use the paper's "
        f"exponential-mechanism sensitivity Δq per rank group "
        f"({option('sensitivity', 'paper')}); no proof covers the groups shifting when one "
        "record changes (docs/design.md#em-centroid), so their share of epsilon is "
        f"heuristic. Choose {option('sensitivity', 'proven')} (n_groups * Δq) for a proven "
        "bound.",
        "as_published" if level == "as_published" else "heuristic",
    )
