"""Categorical columns of ``mdav_dp``: each cluster's value by the exponential mechanism.

Up to ``n_c`` clusters change by one record when one record changes, so each cluster's
quality moves by at most ``Δq`` and the proven sensitivity is ``n_c · Δq``
(docs/design.md#imdav-categorical). Distances are rounded to a public table of integer
units, so the mechanism is exact (docs/design.md#em-sampler).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpfast import noise
from dpfast._release import CategoricalColumn, choice_entry
from dpfast._validation import check_em_epsilon, quoted
from dpfast.accounting import LedgerEntry
from dpfast.partitions.categorical import DISTANCE_BITS, distance_units

_UNIT = 2.0**-DISTANCE_BITS


def categorical_plan(
    column: CategoricalColumn,
    epsilon: float,
    share: float,
    n_records: int,
    k: int,
    n_clusters: int,
    calibration: str,
) -> tuple[float, Fraction, LedgerEntry]:
    """Plan one categorical column: the exponential mechanism's ε, sensitivity, and entry.

    Distances are in units of ``2**-DISTANCE_BITS`` (:func:`distance_units`), so the
    sensitivity is the largest distance in units, ``Δq``.
    ``"l1"``: the column's ``share`` of ε (``ε / m``, or by weight) with the proven
    sensitivity ``n_c · Δq`` (docs/design.md#imdav-categorical).
    ``"as_published"``: the thesis code's ``ε`` with ``(n / k) · Δq``; the same
    distribution is ``ε n_c k / n`` with ``n_c · Δq``, which is what it really spends.
    """
    units = int(distance_units(column.taxonomy.distance_matrix()).max(initial=0))
    proven = n_clusters * units
    if calibration == "l1":
        em_epsilon, em_sensitivity = share, Fraction(proven)
        spent = em_epsilon
    else:
        em_epsilon, em_sensitivity = epsilon, Fraction(n_records, k) * units
        exact = Fraction(epsilon) * n_clusters * k / n_records
        spent = float(exact)
        if Fraction(spent) < exact:
            spent = math.nextafter(spent, math.inf)
    details: dict[str, object] = {
        "n_clusters": n_clusters,
        "calibration": calibration,
        "sensitivity_rule": "n_clusters * Δq: up to n_clusters clusters change by one "
        "record, each moving its quality by at most Δq (docs/design.md#imdav-categorical)",
    }
    scale = 0.0  # a one-value domain: nothing is drawn
    if proven > 0:
        base = noise.exponential_base(epsilon=em_epsilon, sensitivity=em_sensitivity)
        details.update(base.details(_UNIT))
        details["mechanism_sensitivity"] = float(em_sensitivity) * _UNIT
        details["sensitivity_units"] = proven
        # what the draws spend against the proven sensitivity: 2 n_c Δq ln(1/b) <= spent
        details["effective_epsilon"] = min(
            base.effective_epsilon * proven / float(em_sensitivity), spent
        )
        scale = base.scale(_UNIT)
    entry = choice_entry(
        column,
        epsilon=spent,
        unit="insensitive-MDAV cluster",
        sensitivity=proven * _UNIT,
        noise_scale=scale,
        details=details,
    )
    check_em_epsilon(
        em_epsilon, n_records, what=f"column {quoted(column.name)}", shares=epsilon / em_epsilon
    )
    return em_epsilon, em_sensitivity, entry


def choose_codes(
    cat: CategoricalColumn,
    em_epsilon: float,
    em_sensitivity: Fraction,
    key: np.ndarray,
    counts: np.ndarray,
) -> np.ndarray:
    """Draw each cluster's value by the exponential mechanism; return the clusters' codes.

    ``counts`` (``(clusters, leaves)``) are each cluster's records per leaf; the quality
    of leaf ``c`` is ``-Σ units(c, x)`` over the cluster's records ``x``.
    """
    if em_sensitivity <= 0:  # a one-value domain: nothing to choose
        return np.zeros(counts.shape[0], dtype=np.int64)
    quality = -(counts @ distance_units(cat.taxonomy.distance_matrix()))
    chosen = noise.exponential_mechanism(
        key, quality, epsilon=em_epsilon, sensitivity=em_sensitivity
    )
    return np.asarray(chosen, dtype=np.int64)
