"""The forecasts of ``mdav_dp``: from public values only, and from the data (docs/forecast.md).

The forecast from the data (PRIVATE) forms the release's insensitive-MDAV clusters with
the release's steps (:func:`~dpfast.steps.insensitive_clusters`,
:func:`~dpfast.steps.cluster_totals`), draws nothing and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from dpfast._release import (
    THRESHOLD,
    ColumnDataForecast,
    ColumnForecast,
    DataForecast,
    Engine,
    Forecast,
    TableView,
    advise_k,
    advise_k_from_data,
    bounds_note,
    choice_forecast,
    current_shares,
    distinct_groups,
    group_means,
    group_tvd,
    likely_bounds,
    likely_note,
    linear_grid,
    numeric_forecast,
    numeric_outcome,
    over_bounds,
    pushed_share,
    suggest_weights,
    transform_notes,
    transformed_note,
)
from dpfast.methods.mdav_dp._arguments import (
    Arguments,
    Plan,
    geometry,
    make_plan,
    validate,
    with_remedies,
)
from dpfast.partitions.categorical import distance_units
from dpfast.partitions.grid import Grid
from dpfast.steps import cluster_totals, insensitive_clusters


def mdav_dp_forecast(table: TableView, arguments: Mapping[str, Any]) -> Forecast:
    """Return the forecast of :func:`mdav_dp` with ``arguments`` (all its keywords) on ``table``.

    The release's own checks and plan (:func:`make_plan`), from the row count, the names and
    the arguments only; nothing is spent or written (docs/forecast.md).
    """
    a, n = arguments, table.n_rows
    args = validate(
        table, a["k"], a["epsilon"], a["bounds"], a["taxonomies"], a["columns"],
        a["calibration"], a["seed"],
    )  # fmt: skip
    args = with_remedies(args, a["epsilon_weights"], a["transforms"])
    geometry(args, a["reference"], n)
    return release_forecast(args, n, make_plan(args, n, n // args.k), advice=True)


def release_forecast(args: Arguments, n: int, plan: Plan, *, advice: bool = False) -> Forecast:
    """Return ``plan``'s forecast; the smallest ``k`` too with ``advice`` or a swamped column."""
    columns = numeric_forecasts(args, plan) + tuple(
        choice_forecast(plan.entries[c.name], "each cluster's value, by the exponential mechanism")
        for c in args.categorical
    )
    note = (
        "each cluster's centroid gets one noise draw per column, shared by its rows, of a "
        "scale that grows with the number of clusters n // k; the forecast takes the "
        "centroids as spread evenly over the bounds"
    )
    notes = (note, *transform_notes(plan.grids), *bounds_note(args.dp_bounds))
    forecast = Forecast("mdav_dp", plan.ledger.total, n, columns, k=args.k, notes=notes)
    if args.numeric and (advice or forecast.affected):
        m = len(columns)
        worst = lambda k: worst_share(replace(args, k=k), n)  # noqa: E731
        suggested, text = advise_k(worst, n, m, args.epsilon, "cluster")
        forecast = replace(forecast, suggested_k=suggested, k_advice=text)
    return forecast


def numeric_forecasts(args: Arguments, plan: Plan) -> tuple[ColumnForecast, ...]:
    """Return the numeric columns' forecasts: their entries, grids and scales in ``plan``."""
    draw = "each cluster's centroid, one draw for its rows, clamped to the bounds"
    return tuple(
        numeric_forecast(plan.entries[c.name], *plan.grids[c.name], draw, c.integer)
        for c in args.numeric
    )


def worst_share(args: Arguments, n: int) -> float:
    """Return the largest forecast share on a bound of ``args``' numeric columns."""
    return max(c.on_bound or 0.0 for c in numeric_forecasts(args, make_plan(args, n, n // args.k)))


def mdav_dp_data_forecast(engine: Engine, arguments: Mapping[str, Any]) -> DataForecast:
    """Return the forecast from the data of :func:`mdav_dp` with ``arguments`` on a table.

    PRIVATE (docs/forecast.md#from-the-data): the release's checks and plan, then its
    clusters formed with the engine's primitives; nothing is drawn, spent or written. The
    smallest ``k`` whose forecast from the data brings every numeric column under 10 %
    is found too (the clusters formed again at each ``k`` the bisection tries).
    """
    a, n = arguments, engine.n_rows
    args = validate(
        engine, a["k"], a["epsilon"], a["bounds"], a["taxonomies"], a["columns"],
        a["calibration"], a["seed"],
    )  # fmt: skip
    args = with_remedies(args, a["epsilon_weights"], a["transforms"])
    plan = make_plan(args, n, n // args.k)
    return data_forecast(engine, args, plan, a["reference"], advice=THRESHOLD)


def data_forecast(
    engine: Engine,
    args: Arguments,
    plan: Plan,
    reference: Any,
    *,
    advice: float | None = None,
    limit: float | None = None,
) -> DataForecast:
    """Return ``plan``'s forecast from the data on ``engine``'s table (PRIVATE).

    The release's clusters (from its ``reference``), their sizes and exact sums on each
    numeric column's grid, and their records per leaf of each categorical column. With
    ``advice``, where a numeric column reaches :data:`THRESHOLD`, or where one exceeds
    ``limit``, the smallest ``k`` whose forecast from the data brings every numeric
    column under ``advice`` (``limit``, else :data:`THRESHOLD`) is found by bisection.
    """
    n = engine.n_rows
    if args.dp_bounds:  # at the bounds the release most likely draws (PRIVATE)
        chosen = likely_bounds(engine, args.numeric, args.dp_bounds)
        args, plan = over_bounds(args, chosen, lambda over: make_plan(over, n, n // over.k))
    points = geometry(args, reference, n)
    clusters = insensitive_clusters(engine.dataflow, args.numeric, args.categorical, points, args.k)
    grids = [plan.grids[c.name][0] for c in args.numeric]
    totals = cluster_totals(engine.dataflow, clusters, args.numeric, grids, args.categorical)
    means = _linear_means(engine, args, clusters, grids, n)
    columns = []
    for column, sums, clamped in zip(args.numeric, totals.sums, totals.clamped, strict=True):
        grid, steps = plan.grids[column.name]
        outcome = numeric_outcome(
            sums, clusters.sizes, grid, steps, column.integer, means.get(column.name)
        )
        columns.append(ColumnDataForecast.numeric(column.name, outcome, clamped))
    for cat, counts in zip(args.categorical, totals.counts, strict=True):
        em_epsilon, em_sensitivity = plan.choices[cat.name]
        if em_sensitivity <= 0:  # a one-value domain: nothing is drawn, nothing moves
            columns.append(ColumnDataForecast(str(cat.name), tvd=0.0))
            continue
        kinds = distinct_groups(np.asarray(counts), clusters.sizes)
        distance = distance_units(cat.taxonomy.distance_matrix())
        tvd, exact = group_tvd(*kinds, distance, (em_epsilon, em_sensitivity))
        columns.append(ColumnDataForecast(str(cat.name), tvd=tvd, exact=exact))
    note = (
        "each insensitive-MDAV cluster's true centroid on the release's grid (clamped and "
        "rounded as released), the discrete Laplace's exact tail sums and moments, and "
        "each cluster's exact exponential-mechanism chances for the categorical columns"
    )
    found = None
    if args.calibration == "l1":  # the one calibration that splits ε over the columns
        names = [c.name for c in args.numeric] + [c.name for c in args.categorical]
        found = suggest_weights(columns, current_shares(names, args.weights))
    forecast = DataForecast(
        "mdav_dp",
        n,
        tuple(columns),
        k=args.k,
        notes=(note, *transformed_note(list(args.transforms)), *likely_note(args.dp_bounds)),
        weights=found,
    )
    over = limit is not None and bool(forecast.above(limit))
    if args.numeric and (advice is not None or forecast.affected or over):
        threshold = advice if advice is not None else limit if limit is not None else THRESHOLD
        worst = _worst_pushed(engine, args, reference, n)
        suggested, text = advise_k_from_data(worst, n, "cluster", threshold)
        forecast = replace(forecast, suggested_k=suggested, k_advice=text)
    return forecast


def _linear_means(
    engine: Engine, args: Arguments, clusters: Any, grids: list[Grid], n: int
) -> dict[Hashable, np.ndarray]:
    """Return the transformed columns' cluster means in the data's units (one more pass)."""
    transformed = [(c, g) for c, g in zip(args.numeric, grids, strict=True) if g.transform]
    if not transformed:
        return {}
    linear = [linear_grid(g, n, args.k) for _, g in transformed]
    totals = cluster_totals(engine.dataflow, clusters, [c for c, _ in transformed], linear, [])
    return {
        c.name: group_means(sums, clusters.sizes, grid)
        for (c, _), sums, grid in zip(transformed, totals.sums, linear, strict=True)
    }


def _worst_pushed(
    engine: Engine, args: Arguments, reference: Any, n: int
) -> Callable[[int], float]:
    """Return ``worst(k)``: the numeric columns' largest share pushed at ``k``, from the data."""

    def worst(k: int) -> float:
        at = replace(args, k=k)
        plan = make_plan(at, n, n // k)
        clusters = insensitive_clusters(
            engine.dataflow, at.numeric, at.categorical, geometry(at, reference, n), k
        )
        grids = [plan.grids[c.name][0] for c in at.numeric]
        totals = cluster_totals(engine.dataflow, clusters, at.numeric, grids, [])
        return max(
            pushed_share(
                sums, clusters.sizes, plan.grids[c.name][0], plan.grids[c.name][1], c.integer
            )[0]
            for c, sums in zip(at.numeric, totals.sums, strict=True)
        )

    return worst
