"""The risk-utility map's data: its measures, and one point per release that has both.

The map is Duncan's R-U confidentiality map (docs/risk.md#the-risk-utility-map); its
drawing is :mod:`dpfast.compare._rumap`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from dpfast.compare._verdict import dominates, guarantee_kind

#: The risk measures the map can show: name -> (axis title, where in a release's risk).
RISK_MEASURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "record_linkage": (
        "record linkage (distance)",
        ("record_linkage", "distance"),
    ),
    "rank_linkage": (
        "record linkage (rank)",
        ("record_linkage", "rank"),
    ),
    "interval_disclosure": (
        "interval disclosure (rank, mean)",
        ("interval_disclosure", "rank_mean"),
    ),
    "uniqueness": (
        "share in classes below k",
        ("uniqueness", "released", "share_below_k"),
    ),
}

#: The information-loss measures the map can show: name -> (axis title, key of the utility).
UTILITY_MEASURES: dict[str, tuple[str, str]] = {
    "relative_error": ("mean relative error", "mean_relative_error"),
    "jensen_shannon": ("mean Jensen-Shannon divergence", "mean_jensen_shannon"),
    "variance_variation": ("mean variance variation", "mean_variance_variation"),
    "correlation_error": ("correlation error", "correlation_error"),
}


def _dig(value: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def map_points(
    releases: Sequence[Mapping[str, Any]], risk_measure: str, utility_measure: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Return the R-U map's points and why the other releases are not on it.

    Each point has the release's ``label``, its ``number`` on the map (1, 2, ... in the
    order of ``releases``), its ``utility`` (the information loss) and ``risk``, the
    ``kind`` of its guarantee (``"dp"``, ``"dp_part"``, ``"not_dp"`` or ``"unknown"``,
    from its public report's level) and whether it is ``dominated``: another release has
    no more risk and no more information loss, and less of one of them, so it is never
    the better choice.
    """
    risk_title, risk_keys = RISK_MEASURES[risk_measure]
    utility_title, utility_key = UTILITY_MEASURES[utility_measure]
    points: list[dict[str, Any]] = []
    left_out: dict[str, str] = {}
    for release in releases:
        x, y = release["utility"].get(utility_key), _dig(release["risk"], risk_keys)
        if not isinstance(x, (int, float)) or not math.isfinite(x):
            why = release["utility"]["not_measured"].get(utility_key, f"it is {x}")
            left_out[release["label"]] = f"no {utility_title}: {why}"
        elif not isinstance(y, (int, float)):
            why = release["risk"]["not_measured"].get(risk_keys[0], "not measured")
            left_out[release["label"]] = f"no {risk_title}: {why}"
        else:
            points.append(
                {
                    "label": release["label"],
                    "number": len(points) + 1,
                    "utility": float(x),
                    "risk": float(y),
                    "kind": guarantee_kind(release.get("guarantee_level")),
                }
            )
    for point in points:
        point["dominated"] = any(dominates(other, point) for other in points)
    return points, left_out
