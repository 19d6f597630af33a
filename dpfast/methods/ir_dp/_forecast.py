"""What the forecast of ``ir_dp`` says besides its numbers (docs/forecast.md)."""

from __future__ import annotations

from collections.abc import Sequence

from dpfast._release import CategoricalColumn, NumericColumn, option
from dpfast.accounting import names

#: What one noise draw covers, in each kind of column.
NUMERIC_DRAW = "each rank group's mean, one draw for its rows, clamped to the bounds"
CATEGORICAL_DRAW = "each rank group's value, drawn by the exponential mechanism"


def forecast_notes(
    numeric: Sequence[NumericColumn], categorical: Sequence[CategoricalColumn], linkage: str
) -> tuple[str, ...]:
    """Say how the columns are noised, what is not forecast, and what column linkage keeps."""
    notes = []
    if numeric:
        notes.append(
            "numeric columns: each rank group's mean gets one noise draw shared by its rows "
            "and is clamped to the bounds; the forecast takes the means as spread evenly "
            "over the bounds"
        )
    if categorical:
        notes.append(
            f"categorical column(s) {names([c.name for c in categorical])}: each rank "
            "group's value is drawn from the taxonomy's leaves (exponential mechanism); they "
            "have no bounds, so nothing is clamped and no share on a bound is forecast"
        )
    if linkage == "columns" and len(numeric) + len(categorical) > 1:
        notes.append(
            f"{option('linkage', 'columns')}: each column is shuffled on its own, so rows are "
            "not records and relationships between columns are not kept"
        )
    return tuple(notes)
