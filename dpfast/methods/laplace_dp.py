"""Plain per-cell Laplace noise: the baseline of the individual-ranking paper."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._kernels import perturb
from dpfast._release import (
    DPMetricsReleaseOptions,
    Forecast,
    NumericColumn,
    Release,
    TableView,
    Unpack,
    check_unprotected,
    fit_domains,
    grid_noise_entry,
    noise_source,
    numeric_forecast,
    open_run,
)
from dpfast._validation import (
    check_bounds,
    check_columns,
    check_epsilon,
    check_nonempty,
    check_seed,
    quoted,
)
from dpfast.accounting import (
    GuaranteeLevel,
    Ledger,
    LedgerEntry,
    UnprotectedPolicy,
    names,
    scale_steps,
)
from dpfast.partitions.grid import Grid


def laplace_dp(
    data: Any,
    *,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str,
    columns: Sequence[Hashable] | None = None,
    unprotected: UnprotectedPolicy = "drop",
    **options: Unpack[DPMetricsReleaseOptions],
) -> Release:
    """Plain per-cell Laplace noise: the baseline of Sánchez et al. (2016).

    Every protected cell gets its own discrete Laplace draw with scale ``m * Δ / ε`` (``m``
    protected columns, domain width ``Δ``), then is clamped to the domain. Rows keep their
    order: each record's output depends on that record alone.

    Guarantee: proven ε-differential privacy of the protected columns (bounded DP:
    neighbouring tables differ in one record's values; report level ``"proven"``, or
    ``"protected_only"`` when unprotected columns are shuffled or kept beside them). With
    ``bounds="data"`` the release is NOT differentially private (level ``"none"``).

    Parameters
    ----------
    data : table, pyarrow.dataset.Dataset, Parquet path or glob, Spark or Dask DataFrame
        Never modified. A dataset or path is released out of core, a Spark or Dask
        DataFrame on its cluster (cache the frame), rows in its order: the same release
        for a seed, with every option but ``metrics`` and ``risk`` (docs/engines.md).
    epsilon : float
    bounds : mapping
        Public ``{column: (lower, upper)}``; see :func:`ir_dp`.
    columns : sequence, optional
        Columns to protect (default all).
    unprotected : {"drop", "shuffle", "keep"}
        What to do with the columns not protected: ``"drop"`` (default) leaves them out;
        ``"shuffle"`` releases them unchanged in a random row order of their own and
        ``"keep"`` keeps them in their rows. Both publish them unprotected, and the
        guarantee becomes ``"protected_only"``: ε-DP for a change of one record's protected
        values (each row's noise is independent of the other rows, so keeping them in
        place shows nothing more).
    **options : Unpack[DPMetricsReleaseOptions]
        The options the releases share (:class:`dpfast.DPMetricsReleaseOptions`):
        ``seed``, ``metrics``, ``budget``, ``risk``, ``progress``, ``engine``,
        ``output`` and ``memory_limit``. ``progress`` is called as
        ``progress("noise", done, total)`` after each column.

    Returns
    -------
    Release
        The ledger has one entry per column, ``ε / m`` each.

    Raises
    ------
    TypeError, ValueError
        As :func:`ir_dp`, and for an empty table.

    Examples
    --------
    >>> import numpy as np
    >>> release = laplace_dp(np.array([[1.0], [2.0]]), epsilon=1.0, bounds={0: (0, 4)}, seed=1)
    >>> release.data.shape
    (2, 1)
    """
    with open_run("laplace_dp", data, options, DPMetricsReleaseOptions) as run:
        with run.phase("validate"):
            epsilon, protected, domains, derived = _validate(
                run.engine, epsilon, bounds, columns, run.seed
            )
            seed = check_seed(run.seed)
            run.policy = check_unprotected(unprotected)
            protected, notes = fit_domains(protected, domains)
            plans = _plans(protected, domains, epsilon, run.n_rows)
            run.expect(_forecast(epsilon, run.n_rows, protected, plans))  # before any ε is reserved
            run.reserve(epsilon, [c.name for c in protected])
        ledger = Ledger(epsilon)
        for _, _, entry in plans:  # every column's spend reserved before any draw
            ledger.plan(entry)
        source = noise_source(seed)
        with run.phase("noise"):
            for i, (column, (grid, steps, entry)) in enumerate(zip(protected, plans, strict=True)):
                key = source.key("laplace_dp", "cell-noise", str(column.name))
                cells = LaplaceCells(grid, key, steps, column.integer, domains[column.name])
                clamped, on_bound = run.engine.write_rows(column, cells)
                ledger.spend(entry)
                run.keep(column.name, clamped=int(clamped), on_bound=int(on_bound))
                run.tick("noise", i + 1, len(protected))
        return run.finish(
            source=source,
            parameters=_parameters(epsilon, domains, derived),
            guarantee=_guarantee(epsilon, protected, derived),
            ledger=ledger,
            seed=seed,
            sampler=noise.SAMPLER_NAME,
            metrics=run.metrics(protected, domains=domains),
            domains=domains,
            notes=notes,
        )


def _validate(
    table: TableView, epsilon: Any, bounds: Any, columns: Any, seed: Any
) -> tuple[float, list[NumericColumn], dict[Hashable, tuple[float, float]], bool]:
    """Check the arguments; return ε, the protected columns, their bounds, and whether derived."""
    check_nonempty(table.n_rows)
    epsilon = check_epsilon(epsilon)
    check_seed(seed)
    selected = check_columns(columns, table.names)
    protected = table.numeric_columns(selected, categorical=False)
    protected_names = [c.name for c in protected]
    domains, derived = check_bounds(bounds, protected_names, _ranges(table, protected), table.names)
    return epsilon, protected, domains, derived


def _plans(
    protected: Sequence[NumericColumn],
    domains: Mapping[Hashable, tuple[float, float]],
    epsilon: float,
    n_records: int,
) -> list[tuple[Grid, int, LedgerEntry]]:
    """Every protected column's grid, scale in steps and ledger entry (:func:`_plan`)."""
    m = len(protected)
    return [_plan(c, domains[c.name], epsilon, m, n_records) for c in protected]


def laplace_dp_forecast(table: TableView, arguments: Mapping[str, Any]) -> Forecast:
    """Return the forecast of :func:`laplace_dp` with ``arguments`` (all its keywords) on ``table``.

    The release's own checks and plan, from the row count, the names and the arguments
    only; nothing is spent or written (docs/forecast.md).
    """
    a = arguments
    epsilon, protected, domains, _ = _validate(
        table, a["epsilon"], a["bounds"], a["columns"], a["seed"]
    )
    plans = _plans(protected, domains, epsilon, table.n_rows)
    return _forecast(epsilon, table.n_rows, protected, plans)


def _forecast(
    epsilon: float,
    n: int,
    protected: Sequence[NumericColumn],
    plans: Sequence[tuple[Grid, int, LedgerEntry]],
) -> Forecast:
    """Return the forecast of the columns' plans: every cell gets its own draw."""
    columns = tuple(
        numeric_forecast(entry, grid, steps, _CELL, column.integer)
        for column, (grid, steps, entry) in zip(protected, plans, strict=True)
    )
    note = (
        "every cell gets its own noise draw and is clamped to its column's bounds; no k: "
        "only fewer protected columns or a larger epsilon lower the noise"
    )
    return Forecast("laplace_dp", epsilon, n, columns, notes=(note,))


_CELL = "every cell, clamped to the bounds"


def _ranges(engine: Any, protected: Sequence[NumericColumn]) -> Any:
    """Return a column's ``(min, max)``, for bounds derived from the data (``bounds="data"``)."""
    by_name = {c.name: c for c in protected}
    return lambda name: engine.value_range(by_name[name])


@dataclass(frozen=True)
class LaplaceCells:
    """One column's cells noised: row ``i`` gets the draw of nonce ``i`` of the column's key.

    Returns the released values, and the counts ``[clamped inputs, outputs on a bound]``.
    """

    grid: Grid
    key: np.ndarray
    steps: int
    integer: bool
    domain: tuple[float, float]

    def __call__(self, values: np.ndarray, first_row: int) -> tuple[np.ndarray, np.ndarray]:
        """Release the rows from ``first_row`` on; count the clamped and on-bound values."""
        draws = noise.discrete_laplace(self.key, self.steps, values.shape[0], start=first_row)
        out, clamped = laplace_column(values, self.grid, draws, self.integer)
        lower, upper = self.domain
        on_bound = np.count_nonzero(out <= lower) + np.count_nonzero(out >= upper)
        return out, np.array([clamped, on_bound], dtype=np.int64)


def _parameters(
    epsilon: float, domains: Mapping[Hashable, tuple[float, float]], derived: bool
) -> dict[str, Any]:
    return {
        "epsilon": epsilon,
        "bounds": {str(c): list(b) for c, b in domains.items()},
        "bounds_from_data": derived,
        "budget_split": "equal over protected columns",
    }


def _plan(
    column: NumericColumn, domain: tuple[float, float], epsilon: float, m: int, n_records: int
) -> tuple[Grid, int, LedgerEntry]:
    lower, upper = domain
    grid = Grid.for_column(lower, upper, n_records)
    share = epsilon / m
    steps = scale_steps(grid.d_int, share, what=f"column {quoted(column.name)}", shares=m)
    entry = grid_noise_entry(
        column,
        step="cell noise",
        epsilon=share,
        mechanism="discrete Laplace, one draw per cell",
        grid=grid,
        sensitivity=grid.d_int,
        steps=steps,
        details={"nominal_sensitivity": upper - lower},
    )
    return grid, steps, entry


def laplace_column(
    values: np.ndarray, grid: Grid, draws: np.ndarray, round_values: bool
) -> tuple[np.ndarray, int]:
    """Add one discrete Laplace draw (grid steps) to every cell of a column.

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
        Never written.
    grid : Grid
    draws : ndarray of int64, shape (n,)
    round_values : bool
        Round to integers after the noise (post-processing).

    Returns
    -------
    released : ndarray of float64, shape (n,)
    n_clamped : int
        Inputs that lay outside the domain.
    """
    out = np.empty(values.shape[0], dtype=np.float64)
    n_clamped = perturb.laplace_cells(
        values, grid.lower, grid.upper, grid.gamma, grid.d_int, draws, round_values, out
    )
    return out, int(n_clamped)


def _guarantee(
    epsilon: float, protected: Sequence[NumericColumn], derived: bool
) -> tuple[str, GuaranteeLevel]:
    if derived:
        return (
            "NOT differentially private: the bounds were derived from the data (bounds='data').",
            "none",
        )
    m = len(protected)
    return (
        f"{epsilon:g}-differential privacy (bounded DP: neighbouring tables differ in one "
        f"record's values) for columns {names([c.name for c in protected])}: each record's "
        f"{m} cell(s) get independent noise spending {epsilon / m:g} each.",
        "proven",
    )
