"""The baselines of the individual-ranking paper: plain Laplace and microaggregation only."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._validation import (
    check_bounds,
    check_epsilon,
    check_k,
    check_seed,
)
from dpfast.accounting import Ledger, LedgerEntry, PhaseTimer, Report, names
from dpfast.grid import Grid
from dpfast.io import as_table_data
from dpfast.microaggregation import (
    group_means,
)
from dpfast.perturbation import laplace_column
from dpfast.release._common import (
    SEEDED_NOTE,
    Progress,
    Release,
    _finish,
    _noise_source,
    _protected_columns,
    _report_progress,
    _unprotected_note,
    _utility_metrics,
)


def laplace_dp(
    data: Any,
    *,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str,
    columns: Sequence[Hashable] | None = None,
    seed: int | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Plain per-cell Laplace noise: the baseline of Sánchez et al. (2016).

    Every protected cell gets its own discrete Laplace draw with scale ``m * Δ / ε`` (``m``
    protected columns, domain width ``Δ``), then is clamped to the domain. Rows keep their
    order: each record's output depends on that record alone.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
    epsilon : float
    bounds : mapping
        Public ``{column: (lower, upper)}``; see :func:`ir_dp`.
    columns : sequence, optional
        Columns to protect (default all).
    seed : int, optional
        Reproducible, not for publication.
    metrics : bool
        Add relative error, Jensen-Shannon divergence and variance variation per column
        to the report (``report.extra["metrics"]``). Costs no budget: the report is for
        the data holder and must then not be published with the data.
    progress : callable, optional

    Returns
    -------
    Release

    Raises
    ------
    TypeError, ValueError
        As :func:`ir_dp`.

    Examples
    --------
    >>> import numpy as np
    >>> release = laplace_dp(np.array([[1.0], [2.0]]), epsilon=1.0, bounds={0: (0, 4)}, seed=1)
    >>> release.data.shape
    (2, 1)
    """
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        if table.n_rows == 0:
            raise ValueError("the table is empty (0 rows); nothing to release")
        epsilon = check_epsilon(epsilon)
        seed = check_seed(seed)
        protected = _protected_columns(table, columns)
        domains, derived = check_bounds(
            bounds, [c.name for c in protected], {c.name: c.values for c in protected}
        )
    n_records = table.n_rows
    m = len(protected)
    epsilon_column = epsilon / m
    source = _noise_source(seed)
    ledger = Ledger(epsilon)
    released: dict[Hashable, np.ndarray] = {}
    clamped: dict[str, int] = {}
    with timer.phase("noise"):
        for i, column in enumerate(protected):
            lower, upper = domains[column.name]
            grid = Grid.for_column(lower, upper, n_records)
            steps = math.ceil(grid.d_int / epsilon_column) if grid.d_int else 0
            ledger.check(epsilon_column)
            draws = noise.discrete_laplace(
                source.key("laplace_dp", "cell-noise", str(column.name)), steps, n_records
            )
            out, clamped[str(column.name)] = laplace_column(
                column.values, grid, draws, column.integer
            )
            ledger.spend(
                LedgerEntry(
                    step="cell noise",
                    columns=(str(column.name),),
                    epsilon=epsilon_column,
                    mechanism="discrete Laplace, one draw per cell",
                    sensitivity=grid.d_int * grid.gamma,
                    noise_scale=steps * grid.gamma,
                    sampler=noise.SAMPLER_NAME,
                    details={
                        "grid_step": grid.gamma,
                        "scale_in_grid_steps": steps,
                        "nominal_sensitivity": upper - lower,
                    },
                )
            )
            released[column.name] = _finish(column, out)
            _report_progress(progress, "noise", i + 1, m)
    with timer.phase("assemble"):
        result = table.rebuild(released, None)
    extra = {}
    if metrics:
        with timer.phase("metrics"):
            extra["metrics"] = _utility_metrics(protected, released, {}, domains)
    protected_names = names([c.name for c in protected])
    unprotected = [str(n) for n in table.names if n not in released]
    if derived:
        guarantee, level = (
            "NOT differentially private: the bounds were derived from the data (bounds='data').",
            "none",
        )
    else:
        guarantee, level = (
            f"{epsilon:g}-differential privacy (bounded DP: neighbouring tables differ in one "
            f"record's values) for columns {protected_names}: each record's {m} cell(s) get "
            f"independent noise spending {epsilon_column:g} each.",
            "proven",
        )
    report = Report(
        method="laplace_dp",
        parameters={
            "epsilon": epsilon,
            "bounds": {str(c): list(b) for c, b in domains.items()},
            "bounds_from_data": derived,
            "budget_split": "equal over protected columns",
        },
        epsilon=epsilon,
        ledger=list(ledger.entries),
        guarantee=guarantee + _unprotected_note(unprotected),
        guarantee_level=level,
        protected_columns=protected_names,
        unprotected_columns=unprotected,
        clamped=clamped,
        seeded=seed is not None,
        sampler=noise.SAMPLER_NAME,
        timings=timer.timings,
        n_rows=n_records,
        notes=[SEEDED_NOTE] if seed is not None else [],
        extra=extra,
    )
    return Release(result, report)


def individual_ranking(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Individual-ranking microaggregation without noise. Not differentially private.

    Each protected column is sorted (ties by row index) and every value is replaced by the
    mean of its rank group of ``k`` (the remainder joins the last group). Rows keep their
    order. Integer columns are rounded.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
    k : int
    columns : sequence, optional
    metrics : bool
        Add relative error, Jensen-Shannon divergence and variance variation per column
        to the report (``report.extra["metrics"]``). Costs no budget: the report is for
        the data holder and must then not be published with the data.
    progress : callable, optional

    Returns
    -------
    Release
        Its report says the release is not differentially private.

    Examples
    --------
    >>> import numpy as np
    >>> individual_ranking(np.array([[1.0], [9.0], [2.0], [8.0]]), k=2).data.ravel().tolist()
    [1.5, 8.5, 1.5, 8.5]
    """
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        k = check_k(k, table.n_rows)
        protected = _protected_columns(table, columns)
    released: dict[Hashable, np.ndarray] = {}
    with timer.phase("microaggregation"):
        for i, column in enumerate(protected):
            means = group_means(column.values, k)
            released[column.name] = _finish(column, np.rint(means) if column.integer else means)
            _report_progress(progress, "microaggregation", i + 1, len(protected))
    with timer.phase("assemble"):
        result = table.rebuild(released, None)
    extra = {}
    if metrics:
        with timer.phase("metrics"):
            extra["metrics"] = _utility_metrics(protected, released, {}, None)
    protected_names = names([c.name for c in protected])
    unprotected = [str(n) for n in table.names if n not in released]
    report = Report(
        method="individual_ranking",
        parameters={"k": k, "remainder": "last group"},
        epsilon=None,
        ledger=[],
        guarantee=(
            "NOT differentially private: values are replaced by exact group means of the "
            f"original data (groups of at least {k} per column), with no noise."
            + _unprotected_note(unprotected)
        ),
        guarantee_level="none",
        protected_columns=protected_names,
        unprotected_columns=unprotected,
        clamped={},
        seeded=False,
        sampler=None,
        timings=timer.timings,
        n_rows=table.n_rows,
        extra=extra,
    )
    return Release(result, report)
