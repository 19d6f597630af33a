"""The verdict at the top of the private pages: which releases are DP, and which is best.

One paragraph a data holder reads first, built from the public reports (method, ε, level
of guarantee) and the measures below it: on ``dpfast evaluate``'s page the releases'
guarantees and the best release on the risk-utility map; on ``dpfast compare``'s page
the release's guarantee, its utility, its values on a bound and its risk. Every figure
is rounded (:mod:`dpfast.compare._format`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from dpfast.compare._format import percent, rounded

#: The kind of guarantee a public report's level gives (the map's markers follow it).
KINDS = {
    "proven": "dp",
    "protected_only": "dp_part",
    "local": "dp_part",
    "as_published": "not_dp",
    "heuristic": "not_dp",
    "none": "not_dp",
}

_LEVEL_WORDS = {
    "proven": "proven, of everything released",
    "protected_only": "of its protected columns only; the others are NOT protected",
    "local": "local DP of one column; the others are NOT protected",
    "as_published": "NOT proven DP (the paper's claim only)",
    "heuristic": "NOT proven DP (heuristic)",
    "none": "NOT DP",
}


def guarantee_kind(level: Any) -> str:
    """Return ``"dp"``, ``"dp_part"``, ``"not_dp"`` or ``"unknown"`` for a guarantee level.

    Examples
    --------
    >>> guarantee_kind("proven"), guarantee_kind("local"), guarantee_kind(None)
    ('dp', 'dp_part', 'unknown')
    """
    return KINDS.get(str(level), "unknown") if level is not None else "unknown"


def level_words(epsilon: Any, level: Any) -> str:
    """Return what a guarantee level says, with the ε of a DP one: ``ε = 4, proven, ...``.

    Examples
    --------
    >>> level_words(4.0, "proven")
    'ε = 4, proven, of everything released'
    >>> level_words(None, None)
    'no public report: its guarantee is unknown'
    """
    if level is None:
        return "no public report: its guarantee is unknown"
    words = _LEVEL_WORDS.get(str(level), str(level))
    if guarantee_kind(level) in ("dp", "dp_part") and isinstance(epsilon, (int, float)):
        return f"ε = {rounded(float(epsilon))}, {words}"
    return words


def guarantee_words(method: Any, epsilon: Any, level: Any) -> str:
    """Return a release's method and guarantee: ``ir_dp, ε = 4, proven, ...``.

    Examples
    --------
    >>> guarantee_words("mdav", None, "none")
    'mdav: NOT DP'
    >>> guarantee_words("ir_dp", 0.30000000000000004, "proven")
    'ir_dp, ε = 0.3, proven, of everything released'
    """
    words = level_words(epsilon, level)
    if level is None:
        return words
    return f"{method}, {words}" if guarantee_kind(level) != "not_dp" else f"{method}: {words}"


def _listed(labels: Sequence[str]) -> str:
    return ", ".join(labels)


#: What the verdict's list says of each level, shortly (the page's tables say more).
_SHORT = {
    "proven": "proven",
    "protected_only": "its protected columns only",
    "local": "local, of one column",
    "as_published": "not proven: the paper's claim only",
    "heuristic": "not proven: heuristic",
    "none": "",
}


def _grouped(releases: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Return, per kind of guarantee, its releases as text, those alike named together.

    ``irdp.csv, irdp2.csv (ir_dp, ε = 2, proven)``: releases of one method, ε and level
    share one parenthesis, in the order of their first release.
    """
    alike: dict[tuple[str, str], list[str]] = {}
    for release in releases:
        level = release.get("guarantee_level")
        kind = guarantee_kind(level)
        details = [] if kind == "unknown" else [str(release.get("method"))]
        epsilon = release.get("epsilon")
        if kind in ("dp", "dp_part") and isinstance(epsilon, (int, float)):
            details.append(f"ε = {rounded(float(epsilon))}")
        details.append(_SHORT.get(str(level), "") if level is not None else "")
        words = ", ".join(d for d in details if d)
        alike.setdefault((kind, words), []).append(str(release["label"]))
    groups: dict[str, list[str]] = {"dp": [], "dp_part": [], "not_dp": [], "unknown": []}
    for (kind, words), labels in alike.items():
        groups[kind].append(_listed(labels) + (f" ({words})" if words else ""))
    return groups


def _status(releases: Sequence[Mapping[str, Any]]) -> str:
    """Return the first sentences: which releases are DP, at what ε, and which are not."""
    groups = _grouped(releases)
    total = len(releases)
    dp = sum(1 for r in releases if guarantee_kind(r.get("guarantee_level")) in ("dp", "dp_part"))
    parts = [
        f"{dp} of {total} release{'s' if total != 1 else ''} "
        f"{'is' if dp == 1 else 'are'} differentially private"
        + (f": {'; '.join(groups['dp'] + groups['dp_part'])}." if dp else ".")
    ]
    if groups["not_dp"]:
        parts.append(f"Not differentially private: {'; '.join(groups['not_dp'])}.")
    if groups["unknown"]:
        parts.append(
            f"No public report, so whether they are DP is unknown: {'; '.join(groups['unknown'])}."
        )
    return " ".join(parts)


def _scaled_distance(point: Mapping[str, Any], top_loss: float, top_risk: float) -> float:
    """Return the distance to the lower-left corner, each axis scaled to its largest value."""
    loss = point["utility"] / top_loss if top_loss > 0 else 0.0
    risk = point["risk"] / top_risk if top_risk > 0 else 0.0
    return math.hypot(loss, risk)


def best_point(points: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Return the best point: the frontier's closest to the lower-left corner.

    Each axis is scaled to the largest value among ``points``; the frontier is the points
    no other dominates; the first in order wins a tie. None without points.
    """
    frontier = [p for p in points if not p.get("dominated")]
    if not frontier:
        return None
    top_loss = max(float(p["utility"]) for p in points)
    top_risk = max(float(p["risk"]) for p in points)
    return min(frontier, key=lambda p: _scaled_distance(p, top_loss, top_risk))


def _figures(point: Mapping[str, Any]) -> str:
    return f"loss {rounded(point['utility'])}, risk {rounded(point['risk'])}"


def _map_sentence(found: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    """Return the map's sentence, and the best point on it."""
    points = found["points"]
    axes = f"{found['utility_title']} against {found['risk_title']}"
    best = best_point(points)
    if best is None:
        return f"No release is on the map ({axes}): none has both measures.", None
    frontier = [p for p in points if not p.get("dominated")]
    if len(points) == 1:
        return f"Only {best['label']} is on the map ({axes}: {_figures(best)}).", best
    if len(frontier) == 1:
        return (
            f"Best on the map ({axes}): {best['label']} ({_figures(best)}); no other "
            "release has less information loss or less risk.",
            best,
        )
    least_loss = min(frontier, key=lambda p: (p["utility"], p["risk"]))
    least_risk = min(frontier, key=lambda p: (p["risk"], p["utility"]))
    return (
        f"On the map ({axes}) no release is best on both: {least_loss['label']} has the "
        f"least information loss ({rounded(least_loss['utility'])}), "
        f"{least_risk['label']} the least risk ({rounded(least_risk['risk'])}). "
        f"Best balance (closest to the lower-left corner, each axis scaled to its largest "
        f"value): {best['label']} ({_figures(best)}).",
        best,
    )


def _dp_sentence(found: Mapping[str, Any], best: Mapping[str, Any] | None, any_dp: bool) -> str:
    """Which differentially private release is best on the map, if it is not the best."""
    dp_points = [p for p in found["points"] if p.get("kind") in ("dp", "dp_part")]
    if not dp_points:
        return (
            "No differentially private release is on the map; each one's section says why."
            if any_dp
            else ""
        )
    if best is not None and best.get("kind") in ("dp", "dp_part"):
        return "It is differentially private."
    frontier = [{**p, "dominated": any(dominates(o, p) for o in dp_points)} for p in dp_points]
    best_dp = best_point(frontier)
    if best_dp is None:  # pragma: no cover - a finite set has a point no other dominates
        return ""
    return (
        f"Best differentially private release on the map: {best_dp['label']} ({_figures(best_dp)})."
    )


def dominates(other: Mapping[str, Any], point: Mapping[str, Any]) -> bool:
    """Whether ``other`` has no more loss and no more risk than ``point``, and less of one."""
    return bool(
        other["utility"] <= point["utility"]
        and other["risk"] <= point["risk"]
        and (other["utility"] < point["utility"] or other["risk"] < point["risk"])
    )


def evaluation_verdict(
    releases: Sequence[Mapping[str, Any]], found: Mapping[str, Any]
) -> dict[str, Any]:
    """Return the evaluation's verdict: its paragraph (``text``) and what it names.

    ``releases`` are the measured releases (label, method, epsilon, guarantee_level);
    ``found`` is the map (points with kind and dominated, left_out, axis titles).
    """
    map_text, best = _map_sentence(found)
    any_dp = any(guarantee_kind(r.get("guarantee_level")) in ("dp", "dp_part") for r in releases)
    sentences = [_status(releases), map_text, _dp_sentence(found, best, any_dp)]
    if found["left_out"]:
        sentences.append(f"Not on the map: {_listed(list(found['left_out']))} (why below).")
    return {
        "text": " ".join(s for s in sentences if s),
        "differentially_private": [
            r["label"]
            for r in releases
            if guarantee_kind(r.get("guarantee_level")) in ("dp", "dp_part")
        ],
        "best": None if best is None else best["label"],
        "frontier": [p["label"] for p in found["points"] if not p.get("dominated")],
    }


def _share_sentence(what: str, counts: Mapping[str, Any] | None, rows: int) -> str | None:
    """Return ``what``'s share of all values and its largest column; None without counts."""
    if not counts or rows <= 0:
        return None
    numbers = {str(k): float(v) for k, v in counts.items() if isinstance(v, (int, float))}
    if not numbers:
        return None
    overall = sum(numbers.values()) / (rows * len(numbers))
    if overall == 0:
        return f"{what}: none"
    most = max(numbers, key=lambda name: numbers[name])
    return f"{what}: {percent(overall)} of them (most: {most}, {percent(numbers[most] / rows)})"


def comparison_verdict(
    public: Mapping[str, Any] | None,
    private: Mapping[str, Any] | None,
    metrics: Mapping[str, Mapping[str, float]],
    risk: Mapping[str, Any] | None,
    rows: tuple[int, int],
) -> dict[str, Any]:
    """Return the comparison's verdict: its paragraph (``text``) and its guarantee's kind.

    ``metrics`` are the page's per-column metrics, ``rows`` the rows of the original and
    of the release.
    """
    level = None if public is None else public.get("guarantee_level")
    kind = guarantee_kind(level)
    method = "" if public is None else public.get("method")
    if kind in ("dp", "dp_part"):
        words = level_words(None if public is None else public.get("epsilon"), level)
        first = f"This {method} release is differentially private: {words}."
    elif kind == "not_dp":
        scope = "" if level == "none" else f" ({_LEVEL_WORDS[str(level)]})"
        first = (
            f"This {method} release is not differentially private{scope}: it protects only "
            "as much as its risk figures show."
        )
    else:
        first = "Whether this release is differentially private is unknown: no public report."
    sentences = [first]
    divergences = {n: m["jensen_shannon"] for n, m in metrics.items() if "jensen_shannon" in m}
    finite = {n: v for n, v in divergences.items() if math.isfinite(v)}
    if finite:
        worst = max(finite, key=lambda name: finite[name])
        mean = rounded(sum(finite.values()) / len(finite))
        sentences.append(
            f"Utility: mean Jensen-Shannon divergence {mean} "
            f"over {len(finite)} column{'s' if len(finite) != 1 else ''} (0: the same "
            f"distribution, 1: disjoint; largest: {worst}, {rounded(finite[worst])})."
        )
    on_bound = _share_sentence(
        "Released values on a bound",
        None if private is None else private.get("clamped_output"),
        rows[1],
    )
    clamped = _share_sentence(
        "input values clamped", None if private is None else private.get("clamped"), rows[0]
    )
    shares = "; ".join(s for s in (on_bound, clamped) if s)
    if shares:
        sentences.append(f"{shares[0].upper()}{shares[1:]}.")
    elif private is None:
        sentences.append("Values on a bound and clamped: unknown, no private report.")
    sentences.append(_risk_sentence(risk))
    return {"text": " ".join(sentences), "kind": kind}


def _risk_sentence(risk: Mapping[str, Any] | None) -> str:
    linkage = None if risk is None else risk.get("record_linkage")
    if isinstance(linkage, Mapping) and isinstance(linkage.get("distance"), (int, float)):
        return (
            f"Risk: {percent(float(linkage['distance']))} of the records are re-identified "
            "by distance-based record linkage."
        )
    return "Risk: record linkage not measured (the risk section says why)."
