"""The forecast of ``ir_dp`` from public values only: numbers and notes (docs/forecast.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dpfast._release import (
    CategoricalColumn,
    ColumnForecast,
    Forecast,
    NumericColumn,
    TableView,
    advise_k,
    check_unprotected,
    choice_forecast,
    numeric_forecast,
    option,
)
from dpfast.accounting import names
from dpfast.methods.ir_dp._arguments import (
    Arguments,
    Plan,
    check_linkage,
    make_plan,
    policy,
    validate,
)

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


def ir_dp_forecast(table: TableView, arguments: Mapping[str, Any]) -> Forecast:
    """Return the forecast of :func:`ir_dp` with ``arguments`` (all its keywords) on ``table``.

    The release's own checks and plan (:func:`make_plan`) from the row count, the names and
    the arguments only; nothing is spent or written (docs/forecast.md).
    """
    a = arguments
    policy(check_unprotected(a["unprotected"]), check_linkage(a["linkage"]))  # as the release
    args = validate(
        table, a["k"], a["epsilon"], a["bounds"], a["taxonomies"], a["sensitivity"],
        a["columns"], a["linkage"], a["shuffle"], a["seed"], a["remainder"],
    )  # fmt: skip
    return release_forecast(args, table.n_rows, make_plan(args, table.n_rows), advice=True)


def release_forecast(args: Arguments, n: int, plan: Plan, *, advice: bool = False) -> Forecast:
    """Return ``plan``'s forecast; the smallest ``k`` too with ``advice`` or a swamped column."""
    columns = numeric_forecasts(args, plan) + tuple(
        choice_forecast(plan.entries[c.name], CATEGORICAL_DRAW) for c in args.categorical
    )
    notes = forecast_notes(args.numeric, args.categorical, args.linkage)
    forecast = Forecast("ir_dp", args.epsilon, n, columns, k=args.k, notes=notes)
    if args.numeric and (advice or forecast.affected):
        worst = lambda k: worst_share(replace(args, k=k), n)  # noqa: E731
        suggested, text = advise_k(worst, n, len(columns), args.epsilon, "rank group")
        forecast = replace(forecast, suggested_k=suggested, k_advice=text)
    return forecast


def numeric_forecasts(args: Arguments, plan: Plan) -> tuple[ColumnForecast, ...]:
    """Return the numeric columns' forecasts: their entries, grids and scales in ``plan``."""
    return tuple(
        numeric_forecast(plan.entries[c.name], *plan.grids[c.name], NUMERIC_DRAW, c.integer)
        for c in args.numeric
    )


def worst_share(args: Arguments, n: int) -> float:
    """Return the largest forecast share on a bound of ``args``' numeric columns."""
    return max(c.on_bound or 0.0 for c in numeric_forecasts(args, make_plan(args, n)))
