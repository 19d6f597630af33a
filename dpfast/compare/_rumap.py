"""Duncan's risk-utility map as an inline SVG: one marked, labelled point per release.

Information loss runs along the horizontal axis (0, no loss, at the left) and disclosure
risk up the vertical one (0 at the bottom), so the best releases sit lower left. A point's
shape says what its public report guarantees (:data:`SHAPES`: a circle for proven
differential privacy, a triangle for DP of part of the table, a square for no DP, a
diamond when no report says), and a point that another release dominates (no more loss,
no more risk, less of one) is drawn hollow; a legend beside the plot says so. Labels are
placed by :func:`place_labels` so that no two overlap and none covers a point: a label
that finds no free place is replaced by the point's number, which the page's table of
points lists. Plain SVG, no plotting library (docs/risk.md#the-risk-utility-map).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpfast.compare._format import rounded

WIDTH, HEIGHT = 680, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 190, 20, 55
TICKS = 5
#: Font size of the labels, in pixels.
FONT = 11
#: Half the size of a point's marker, in pixels.
MARKER = 6

#: What a point's shape says, by the kind of guarantee (see ``guarantee_kind``).
SHAPES: dict[str, tuple[str, str]] = {
    "dp": ("circle", "DP (proven)"),
    "dp_part": ("triangle", "DP of part of it"),
    "not_dp": ("square", "not DP"),
    "unknown": ("diamond", "no public report"),
}

# gaps from a point's centre to its label, nearest first; directions, right first
_GAPS = (9.0, 16.0, 26.0, 40.0, 58.0, 80.0, 110.0)
_DIRECTIONS = ((1, 0), (1, -1), (1, 1), (-1, 0), (-1, -1), (-1, 1), (0, -1), (0, 1))


@dataclass(frozen=True)
class Box:
    """An axis-aligned rectangle in SVG pixels (``top`` above ``bottom``)."""

    left: float
    top: float
    right: float
    bottom: float

    def intersects(self, other: Box) -> bool:
        """Whether the two rectangles share more than an edge."""
        return (
            self.left < other.right
            and other.left < self.right
            and self.top < other.bottom
            and other.top < self.bottom
        )

    def within(self, other: Box) -> bool:
        """Whether this rectangle lies inside ``other``."""
        return (
            self.left >= other.left
            and self.right <= other.right
            and self.top >= other.top
            and self.bottom <= other.bottom
        )


@dataclass(frozen=True)
class Label:
    """A placed label: its text, where its baseline starts (``x``, ``y``), and its box.

    ``leader`` says that it lies far enough from its point to need a line to it.
    """

    text: str
    x: float
    y: float
    box: Box
    leader: bool


def text_width(text: str, size: float = FONT) -> float:
    """Return a generous estimate of ``text``'s width in a sans-serif font of ``size`` px."""
    wide = sum(1 for c in text if c in "mwMW@%")
    capital = sum(1 for c in text if c.isupper() and c not in "MW")
    return size * (0.92 * wide + 0.72 * capital + 0.62 * (len(text) - wide - capital))


def label_box(x: float, y: float, text: str, size: float = FONT) -> Box:
    """Return the box of ``text`` drawn from baseline start ``(x, y)`` (ascent and descent)."""
    return Box(x, y - size, x + text_width(text, size), y + 0.3 * size)


def marker_box(x: float, y: float) -> Box:
    """Return the box a point's marker covers, with a pixel to spare."""
    half = MARKER + 1.0
    return Box(x - half, y - half, x + half, y + half)


def _candidate(x: float, y: float, text: str, gap: float, direction: tuple[int, int]) -> Label:
    width, height = text_width(text), 1.3 * FONT
    dx, dy = direction
    left = x + gap if dx > 0 else x - gap - width if dx < 0 else x - width / 2
    top = y - gap - height if dy < 0 else y + gap if dy > 0 else y - height / 2
    baseline = top + FONT
    return Label(text, left, baseline, label_box(left, baseline, text), gap > _GAPS[0])


def place_labels(
    anchors: Sequence[tuple[float, float]], texts: Sequence[Sequence[str]], area: Box
) -> list[Label | None]:
    """Place one label per anchor, in order, so that no two overlap and none covers a point.

    ``texts[i]`` are the texts anchor ``i`` may show, in order of preference (its label,
    then its number); each is tried at growing distances (:data:`_GAPS`) in eight
    directions, right of the point first, and the first place inside ``area`` that meets
    no marker and no label already placed is taken. None when no text fits anywhere.
    Deterministic: the same anchors give the same places.
    """
    taken = [marker_box(x, y) for x, y in anchors]
    placed: list[Label | None] = []
    for (x, y), choices in zip(anchors, texts, strict=True):
        found = _first_free(x, y, choices, area, taken)
        if found is not None:
            taken.append(found.box)
        placed.append(found)
    return placed


def _first_free(
    x: float, y: float, choices: Sequence[str], area: Box, taken: Sequence[Box]
) -> Label | None:
    """Return the first candidate place of a text of ``choices`` that is free, or None."""
    for text in choices:
        for gap in _GAPS:
            for direction in _DIRECTIONS:
                label = _candidate(x, y, text, gap, direction)
                if label.box.within(area) and not any(label.box.intersects(t) for t in taken):
                    return label
    return None


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
            f'font-size="11">{rounded(x_top * i / TICKS)}</text>'
            f'<line x1="{LEFT - 5}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#888"/>'
            f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end" '
            f'font-size="11">{rounded(y_top * i / TICKS)}</text>'
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


def marker(kind: str, x: float, y: float, hollow: bool, attributes: str = "") -> str:
    """Return the SVG element of a point of ``kind`` (:data:`SHAPES`) at ``(x, y)``.

    ``attributes`` are added to the element, which is left open for a ``<title>``: close
    it with the tag its shape uses (:func:`closing`).
    """
    style = f'fill="{"#fff" if hollow else "#1f5fa8"}" stroke="#1f5fa8" stroke-width="2"'
    shape = SHAPES.get(kind, SHAPES["unknown"])[0]
    m = MARKER - 1
    if shape == "circle":
        return f'<circle cx="{x:.2f}" cy="{y:.2f}" r="{m}" {style}{attributes}>'
    if shape == "square":
        return (
            f'<rect x="{x - m:.2f}" y="{y - m:.2f}" width="{2 * m}" height="{2 * m}" '
            f"{style}{attributes}>"
        )
    corners = (
        [(x, y - MARKER), (x + MARKER, y + m), (x - MARKER, y + m)]
        if shape == "triangle"
        else [(x, y - MARKER), (x + MARKER, y), (x, y + MARKER), (x - MARKER, y)]
    )
    points = " ".join(f"{a:.2f},{b:.2f}" for a, b in corners)
    return f'<polygon points="{points}" {style}{attributes}>'


def closing(kind: str) -> str:
    """Return the closing tag of :func:`marker`'s element for ``kind``."""
    shape = SHAPES.get(kind, SHAPES["unknown"])[0]
    return {"circle": "</circle>", "square": "</rect>"}.get(shape, "</polygon>")


def _legend(kinds: Sequence[str]) -> list[str]:
    """Return the legend in the right margin: the shapes drawn, then filled and hollow."""
    x, y = WIDTH - RIGHT + 16, TOP + 12
    parts = [f'<g class="legend"><text x="{x - 6}" y="{y}" font-size="11">marker:</text>']
    rows = [(kind, False, SHAPES[kind][1]) for kind in SHAPES if kind in kinds]
    sample = rows[0][0] if rows else "unknown"
    rows += [(sample, False, "filled: on the frontier"), (sample, True, "hollow: dominated")]
    for i, (kind, hollow, text) in enumerate(rows):
        line = y + 18 * (i + 1)
        parts.append(
            marker(kind, x + 2, line - 4, hollow, f' data-legend="{_text(text)}"')
            + closing(kind)
            + f'<text x="{x + 14}" y="{line}" font-size="11">{_text(text)}</text>'
        )
    parts.append("</g>")
    return parts


def plot_area() -> Box:
    """Return the plot's frame, inside which points and labels lie."""
    return Box(LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM)


def _point(point: Mapping[str, Any], x: float, y: float) -> str:
    kind = str(point.get("kind", "unknown"))
    attributes = (
        f' class="point" data-number="{point.get("number", "")}" '
        f'data-label="{_text(point["label"])}" data-kind="{_text(kind)}" '
        f'data-utility="{_text(repr(float(point["utility"])))}" '
        f'data-risk="{_text(repr(float(point["risk"])))}" '
        f'data-dominated="{str(bool(point.get("dominated"))).lower()}"'
    )
    return (
        marker(kind, x, y, bool(point.get("dominated")), attributes)
        + f"<title>{_text(point['label'])}: loss {rounded(float(point['utility']))}, risk "
        f"{rounded(float(point['risk']))}</title>{closing(kind)}"
    )


def _label(label: Label | None, x: float, y: float, number: Any) -> str:
    if label is None:
        return ""
    line = ""
    if label.leader:
        end_x = min(max(x, label.box.left), label.box.right)
        end_y = min(max(y, label.box.top), label.box.bottom)
        line = (
            f'<line class="leader" x1="{x:.2f}" y1="{y:.2f}" x2="{end_x:.2f}" '
            f'y2="{end_y:.2f}" stroke="#999" stroke-width="0.8"/>'
        )
    return (
        f'{line}<text class="point-label" data-number="{number}" x="{label.x:.2f}" '
        f'y="{label.y:.2f}" font-size="{FONT}">{_text(label.text)}</text>'
    )


def positions(
    points: Sequence[Mapping[str, Any]], x_top: float, y_top: float
) -> list[tuple[float, float]]:
    """Return each point's place on the map, in SVG pixels, for axes up to the tops."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    return [
        (
            LEFT + plot_w * float(p["utility"]) / x_top,
            TOP + plot_h - plot_h * float(p["risk"]) / y_top,
        )
        for p in points
    ]


def ru_map_svg(points: Sequence[Mapping[str, Any]], *, risk_title: str, utility_title: str) -> str:
    """Return the map of ``points`` as SVG.

    ``points`` have ``label``, ``utility``, ``risk``, ``dominated``, ``kind`` and
    ``number`` (:func:`dpfast.compare.map_points`). Each point is an element of class
    ``point`` carrying its label, its kind and both values exactly (``data-label``,
    ``data-kind``, ``data-utility``, ``data-risk``); its label (or number) is a
    ``<text class="point-label">`` placed by :func:`place_labels`.
    """
    x_top = _axis_top([float(p["utility"]) for p in points], None)
    y_top = _axis_top([float(p["risk"]) for p in points], 1.0)
    places = positions(points, x_top, y_top)
    texts = [(str(p["label"]), str(p.get("number", i + 1))) for i, p in enumerate(points)]
    labels = place_labels(places, texts, plot_area())
    kinds = [str(p.get("kind", "unknown")) for p in points]
    parts = [
        f'<svg class="ru-map" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="risk-utility map: {_text(risk_title)} against {_text(utility_title)}">',
        *_axes(x_top, y_top, utility_title, risk_title),
        *_legend(kinds),
    ]
    for point, (x, y) in zip(points, places, strict=True):
        parts.append(_point(point, x, y))
    for point, label, (x, y) in zip(points, labels, places, strict=True):
        parts.append(_label(label, x, y, point.get("number", "")))
    parts.append("</svg>")
    return "".join(parts)
