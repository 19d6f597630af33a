"""The forecasts of ``ir_dp``: from public values only, and from the data (docs/forecast.md).

The forecast from the data (PRIVATE) reads the column's rank groups as the release does
(the :func:`~dpfast.steps.group_sums` step on the release's grid, the
:func:`~dpfast.steps.rank_counts` step), draws nothing and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from dpfast._release import (
    THRESHOLD,
    CategoricalColumn,
    ColumnDataForecast,
    ColumnForecast,
    DataForecast,
    Engine,
    Forecast,
    NumericColumn,
    TableView,
    advise_k,
    advise_k_from_data,
    bounds_note,
    check_unprotected,
    choice_forecast,
    current_shares,
    group_means,
    group_tvd,
    likely_bounds,
    likely_note,
    linear_grid,
    numeric_forecast,
    numeric_outcome,
    option,
    over_bounds,
    pushed_share,
    sorted_group_kinds,
    suggest_weights,
    transform_notes,
    transformed_note,
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
from dpfast.partitions.categorical import distance_units
from dpfast.steps import group_sums, rank_counts

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
        a["epsilon_weights"], a["transforms"],
    )  # fmt: skip
    return release_forecast(args, table.n_rows, make_plan(args, table.n_rows), advice=True)


def release_forecast(args: Arguments, n: int, plan: Plan, *, advice: bool = False) -> Forecast:
    """Return ``plan``'s forecast; the smallest ``k`` too with ``advice`` or a swamped column."""
    columns = numeric_forecasts(args, plan) + tuple(
        choice_forecast(plan.entries[c.name], CATEGORICAL_DRAW) for c in args.categorical
    )
    notes = forecast_notes(args.numeric, args.categorical, args.linkage)
    notes += transform_notes({c.name: plan.grids[c.name] for c in args.numeric})
    notes += bounds_note(args.dp_bounds)
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


def ir_dp_data_forecast(engine: Engine, arguments: Mapping[str, Any]) -> DataForecast:
    """Return the forecast from the data of :func:`ir_dp` with ``arguments`` on ``engine``'s table.

    PRIVATE (docs/forecast.md#from-the-data): the release's checks and plan, then its rank
    groups read with the engine's primitives; nothing is drawn, spent or written. The
    smallest ``k`` whose forecast from the data brings every numeric column under 10 %
    is found too.
    """
    a = arguments
    args = validate(
        engine, a["k"], a["epsilon"], a["bounds"], a["taxonomies"], a["sensitivity"],
        a["columns"], a["linkage"], a["shuffle"], a["seed"], a["remainder"],
        a["epsilon_weights"], a["transforms"],
    )  # fmt: skip
    return data_forecast(engine, args, make_plan(args, engine.n_rows), advice=THRESHOLD)


def data_forecast(
    engine: Engine,
    args: Arguments,
    plan: Plan,
    *,
    advice: float | None = None,
    limit: float | None = None,
) -> DataForecast:
    """Return ``plan``'s forecast from the data on ``engine``'s table (PRIVATE).

    With ``advice`` (a share), where a numeric column reaches :data:`THRESHOLD`, or where
    one exceeds ``limit`` (a release's ``max_on_bound``), the smallest ``k`` whose
    forecast from the data brings every numeric column under ``advice`` (``limit``, else
    :data:`THRESHOLD`) is found by bisection, one pass over each numeric column a step.
    """
    n, k = engine.n_rows, args.k
    if args.dp_bounds:  # at the bounds the release most likely draws (PRIVATE)
        chosen = likely_bounds(engine, args.numeric, args.dp_bounds)
        args, plan = over_bounds(args, chosen, lambda over: make_plan(over, n))
    layout = args.layout(n)
    sizes = layout.sizes
    columns = []
    for column in args.numeric:
        grid, steps = plan.grids[column.name]
        sums, clamped = group_sums(engine.dataflow, column, grid, layout)
        means = None
        if grid.transform is not None:  # the groups' means in the data's units
            linear = linear_grid(grid, n, args.k)
            linear_sums = group_sums(engine.dataflow, column, linear, layout)[0]
            means = group_means(linear_sums, sizes, linear)
        outcome = numeric_outcome(sums, sizes, grid, steps, column.integer, means)
        columns.append(ColumnDataForecast.numeric(column.name, outcome, clamped))
    for cat in args.categorical:
        columns.append(_categorical(engine, cat, sizes, plan))
    names = [c.name for c in args.numeric] + [c.name for c in args.categorical]
    found = suggest_weights(columns, current_shares(names, args.weights))
    forecast = DataForecast("ir_dp", n, tuple(columns), k=k, notes=_data_notes(args), weights=found)
    over = limit is not None and bool(forecast.above(limit))
    if args.numeric and (advice is not None or forecast.affected or over):
        threshold = advice if advice is not None else limit if limit is not None else THRESHOLD
        worst = lambda k: worst_pushed(engine, replace(args, k=k), n)  # noqa: E731
        suggested, text = advise_k_from_data(worst, n, "rank group", threshold)
        forecast = replace(forecast, suggested_k=suggested, k_advice=text)
    return forecast


def _categorical(
    engine: Engine, cat: CategoricalColumn, sizes: np.ndarray, plan: Plan
) -> ColumnDataForecast:
    """Return a categorical column's expected TVD: its rank groups' exact chances."""
    entry = plan.entries[cat.name]
    counts = rank_counts(engine.dataflow, cat)
    if entry.sensitivity == 0:  # a one-value domain: nothing is drawn, nothing moves
        return ColumnDataForecast(str(cat.name), tvd=0.0)
    histograms, kind_sizes, multiplicity = sorted_group_kinds(counts, sizes)
    distance = distance_units(cat.taxonomy.rank_distance_matrix())
    choice = (entry.epsilon, int(entry.details["sensitivity_units"]))
    tvd, exact = group_tvd(histograms, kind_sizes, multiplicity, distance, choice)
    return ColumnDataForecast(str(cat.name), tvd=tvd, exact=exact)


def worst_pushed(engine: Engine, args: Arguments, n: int) -> float:
    """Return the numeric columns' largest expected share pushed onto a bound, from the data."""
    plan = make_plan(args, n)
    layout = args.layout(n)
    sizes = layout.sizes
    worst = 0.0
    for column in args.numeric:
        grid, steps = plan.grids[column.name]
        sums, _ = group_sums(engine.dataflow, column, grid, layout)
        worst = max(worst, pushed_share(sums, sizes, grid, steps, column.integer)[0])
    return worst


def _data_notes(args: Arguments) -> tuple[str, ...]:
    """Say what the forecast from the data read, and how."""
    notes = []
    if args.numeric:
        notes.append(
            "numeric columns: each rank group's true mean on the release's grid (clamped "
            "and rounded as released) and the discrete Laplace's exact tail sums and moments"
        )
    if args.categorical:
        notes.append(
            "categorical columns: the expected total-variation distance between the "
            "column's distribution and the release's, from each rank group's exact "
            "exponential-mechanism chances"
        )
    notes.extend(transformed_note([c for c, g in args.transforms.items() if g]))
    return (*notes, *likely_note(args.dp_bounds))
