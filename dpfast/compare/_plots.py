"""Plots of one column, original against release, as PNG bytes (matplotlib, Agg canvas).

Figures are drawn on their own Agg canvas, never through ``pyplot``: the host program's
backend and its open figures are left alone. matplotlib is the optional ``plots`` extra.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import numpy as np

from dpfast.compare._columns import ColumnComparison, category_shares
from dpfast.exceptions import DPFastImportError

#: The install command the error names when matplotlib is missing.
INSTALL_HINT = "pip install 'dpfast[plots]'"

#: Bars in a categorical chart before the rest are summed into one.
MAX_CATEGORIES = 30

#: Integer columns with at most this many values get one bar per value; others are binned.
MAX_INTEGER_BARS = 100

#: Bins of a histogram of a continuous (or wide integer) column.
BINS = 50

_ORIGINAL_COLOUR = "#1f5fa8"
_RELEASED_COLOUR = "#d9731a"


def require_matplotlib() -> Any:
    """Return the ``matplotlib.figure`` module, or raise ImportError saying how to install it."""
    try:
        from matplotlib import figure
        from matplotlib.backends import backend_agg
    except ImportError as exc:
        raise DPFastImportError(
            f"the comparison page draws its plots with matplotlib, which is not installed; "
            f"install the plotting extra: {INSTALL_HINT}"
        ) from exc
    del backend_agg  # imported only to fail early if the Agg backend is missing
    return figure


def _plain(text: str) -> str:
    """``text`` with mathtext switched off: a ``$`` in a column name is shown as is."""
    return text.replace("$", r"\$")


def _histogram_edges(column: ColumnComparison) -> np.ndarray:
    values = np.concatenate([column.original, column.released])
    if column.bounds is not None:
        lower, upper = float(column.bounds[0]), float(column.bounds[1])
    else:
        lower, upper = float(values.min()), float(values.max())
    integer = column.original.dtype.kind in "iu" and column.released.dtype.kind in "iu"
    if integer and upper - lower + 1 <= MAX_INTEGER_BARS:
        return np.arange(lower - 0.5, upper + 1.5, 1.0)
    if upper == lower:
        upper = lower + 1.0
    return np.linspace(lower, upper, BINS + 1)


def _draw_numeric(axes: Any, column: ColumnComparison) -> None:
    edges = _histogram_edges(column)
    for values, colour, label in (
        (column.original, _ORIGINAL_COLOUR, "original"),
        (column.released, _RELEASED_COLOUR, "released"),
    ):
        # values outside the edges go to the end bins, as the JSD histogram counts them
        clipped = np.clip(values.astype(np.float64), edges[0], edges[-1])
        weights = np.full(clipped.shape[0], 1.0 / max(clipped.shape[0], 1))
        axes.hist(
            clipped, bins=edges, weights=weights, histtype="step", linewidth=1.6,
            color=colour, label=label,
        )  # fmt: skip
    axes.set_xlabel(_plain(column.name))
    axes.set_ylabel("share of rows")


def _draw_categorical(axes: Any, column: ColumnComparison) -> None:
    names, share_original, share_released = category_shares(
        column.original, column.released, MAX_CATEGORIES
    )
    positions = np.arange(len(names))
    width = 0.4
    axes.bar(positions - width / 2, share_original, width, color=_ORIGINAL_COLOUR, label="original")
    axes.bar(positions + width / 2, share_released, width, color=_RELEASED_COLOUR, label="released")
    axes.set_xticks(positions)
    axes.set_xticklabels([_plain(name) for name in names], rotation=60, ha="right", fontsize=7)
    axes.set_ylabel("share of rows")


def column_png(column: ColumnComparison) -> bytes:
    """Return the PNG of one column's plot: histograms, or bars for categories."""
    figure = require_matplotlib()
    fig = figure.Figure(figsize=(6.4, 3.6), dpi=96, layout="constrained")
    axes = fig.add_subplot()
    if column.kind == "categorical":
        _draw_categorical(axes, column)
    else:
        _draw_numeric(axes, column)
    axes.set_title(_plain(column.name))
    axes.legend(frameon=False)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # a label in a script the default font lacks is drawn as boxes: not worth a warning
        warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
        fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
