"""mdav_dp's privacy plan: real ε of a scale, categorical plans and the guarantee text."""

from __future__ import annotations

import math
from fractions import Fraction

from dpfast import noise
from dpfast.accounting import LedgerEntry
from dpfast.release._common import _Categorical


def _real_epsilon(sensitivity: Fraction, steps: int) -> float:
    """``sensitivity / steps`` as a float rounded up (the ε a scale really spends)."""
    exact = sensitivity / steps
    value = float(exact)
    return value if Fraction(value) >= exact else math.nextafter(value, math.inf)


def _categorical_plan(
    column: _Categorical,
    epsilon: float,
    m: int,
    n_records: int,
    k: int,
    n_clusters: int,
    calibration: str,
) -> tuple[float, float, LedgerEntry]:
    """Plan one categorical column: the exponential mechanism's ε, sensitivity, and entry.

    ``"l1"``: ``ε / m`` with the proven sensitivity ``n_c · Δq`` (SPEC §4.6).
    ``"as_published"``: the thesis code's ``ε`` with ``(n / k) · Δq``; the same
    distribution is ``ε n_c k / n`` with ``n_c · Δq``, which is what it really spends.
    """
    taxonomy = column.taxonomy
    delta = taxonomy.max_distance
    proven = n_clusters * delta
    if calibration == "l1":
        em_epsilon, em_sensitivity = epsilon / m, proven
        spent = em_epsilon
    else:
        em_epsilon, em_sensitivity = epsilon, n_records / k * delta
        exact = Fraction(epsilon) * n_clusters * k / n_records
        spent = float(exact)
        if Fraction(spent) < exact:
            spent = math.nextafter(spent, math.inf)
    v_star, t_star = taxonomy.boundary
    entry = LedgerEntry(
        step="centroid selection",
        columns=(str(column.name),),
        epsilon=spent,
        mechanism="exponential mechanism, one draw per insensitive-MDAV cluster, quality = "
        "-Σ semantic distance, candidates = the taxonomy's leaves",
        sensitivity=proven,
        noise_scale=2.0 * em_sensitivity / em_epsilon,
        sampler=noise.EM_SAMPLER_NAME,
        details={
            "n_clusters": n_clusters,
            "calibration": calibration,
            "sensitivity_rule": "n_clusters * Δq: up to n_clusters clusters change by one "
            "record, each moving its quality by at most Δq (SPEC §4.6)",
            "mechanism_epsilon": em_epsilon,
            "mechanism_sensitivity": em_sensitivity,
            "max_distance": delta,
            "candidates": len(taxonomy.domain),
            "taxonomy": taxonomy.name,
            "most_marginal": v_star,
            "farthest_from_most_marginal": t_star,
            "noise_scale_meaning": "Pr[c] ∝ exp(q(c) / noise_scale)",
        },
    )
    return em_epsilon, em_sensitivity, entry


def _guarantee(
    requested: float,
    total: float,
    protected: list[str],
    calibration: str,
    derived: bool,
    categorical: list[str],
) -> tuple[str, str]:
    if derived:
        return (
            "NOT differentially private: the bounds were derived from the data "
            "(bounds='data'), so the partition and the noise scale depend on the data.",
            "none",
        )
    numeric = [name for name in protected if name not in categorical]
    parts = []
    if numeric:
        parts.append(
            f"the centroids of {numeric} get discrete Laplace noise calibrated to "
            "their L1 sensitivity"
        )
    if categorical:
        parts.append(
            f"each cluster's value of {categorical} is drawn by the exponential "
            "mechanism with sensitivity n_clusters * Δq"
        )
    text = (
        f"{total:g}-differential privacy (bounded DP: neighbouring tables differ in one "
        f"record's values, and the number of rows is public) for columns {protected}: "
        "insensitive MDAV with data-independent reference points changes each cluster by "
        f"at most one record, {' and '.join(parts)}, and rows are released in random order."
    )
    if calibration == "as_published":
        text += (
            f" calibration='as_published' asked for epsilon={requested:g} with the paper's "
            f"noise scale, which really spends epsilon={total:g}; the figure above is the "
            "real one."
        )
    return text, "proven"
