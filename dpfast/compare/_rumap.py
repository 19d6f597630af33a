"""Duncan's risk-utility map as an inline SVG: one labelled point per release.

Information loss runs along the horizontal axis (0, no loss, at the left) and disclosure
risk up the vertical one (0 at the bottom), so the best releases sit lower left. A point
that another release dominates (no more loss, no more risk, less of one) is drawn hollow.
Plain SVG text, no plotting library (docs/risk.md#the-risk-utility-map).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

WIDTH, HEIGHT = 640, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 20, 55
TICKS = 5


def nice_ceiling(value: float) -> float:
    """Return the smallest of 1, 2, 2.5, 5 times a power of ten that is ``>= value``."""
    if not value > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value * (1 - 1e-12):
            return step * power
    return 10.0 * power  # pragma: no cover - the loop ends at 10


def _axis_top(values: Sequence[float], cap: float | None) -> float:
    top = nice_ceiling(max(values, default=0.0) * 1.05)
    return min(top, cap) if cap is not None and max(values, default=0.0) <= cap else top


def _text(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _axes(x_top: float, y_top: float, x_title: str, y_title: str) -> list[str]:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>'
    ]
    for i in range(TICKS + 1):
        x = LEFT + plot_w * i / TICKS
        y = TOP + plot_h - plot_h * i / TICKS
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP + plot_h}" x2="{x:.1f}" y2="{TOP + plot_h + 5}" '
            'stroke="#888"/>'
            f'<text x="{x:.1f}" y="{TOP + plot_h + 18}" text-anchor="middle" '
            f'font-size="11">{x_top * i / TICKS:.3g}</text>'
            f'<line x1="{LEFT - 5}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#888"/>'
            f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end" '
            f'font-size="11">{y_top * i / TICKS:.3g}</text>'
        )
    parts.append(
        f'<text class="axis-title" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 12}" '
        f'text-anchor="middle" font-size="12">information loss: {_text(x_title)} '
        "(left: more utility)</text>"
        f'<text class="axis-title" x="16" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
        f'font-size="12" transform="rotate(-90 16 {TOP + plot_h / 2:.1f})">disclosure risk: '
        f"{_text(y_title)}</text>"
    )
    return parts


def ru_map_svg(points: Sequence[Mapping[str, Any]], *, risk_title: str, utility_title: str) -> str:
    """Return the map of ``points`` (``label``, ``utility``, ``risk``, ``dominated``) as SVG.

    Each point is a ``<circle class="point">`` carrying its label and both values exactly
    (``data-label``, ``data-utility``, ``data-risk``), with its label beside it.
    """
    x_top = _axis_top([float(p["utility"]) for p in points], None)
    y_top = _axis_top([float(p["risk"]) for p in points], 1.0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg class="ru-map" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="risk-utility map: {_text(risk_title)} against {_text(utility_title)}">',
        *_axes(x_top, y_top, utility_title, risk_title),
    ]
    for point in points:
        x = LEFT + plot_w * float(point["utility"]) / x_top
        y = TOP + plot_h - plot_h * float(point["risk"]) / y_top
        fill = "#fff" if point.get("dominated") else "#1f5fa8"
        parts.append(
            f'<circle class="point" cx="{x:.2f}" cy="{y:.2f}" r="5" fill="{fill}" '
            f'stroke="#1f5fa8" stroke-width="2" data-label="{_text(point["label"])}" '
            f'data-utility="{_text(repr(float(point["utility"])))}" '
            f'data-risk="{_text(repr(float(point["risk"])))}" '
            f'data-dominated="{str(bool(point.get("dominated"))).lower()}">'
            f"<title>{_text(point['label'])}: loss {float(point['utility']):.4g}, risk "
            f"{float(point['risk']):.4g}</title></circle>"
            f'<text class="point-label" x="{x + 8:.2f}" y="{y - 6:.2f}" '
            f'font-size="11">{_text(point["label"])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
