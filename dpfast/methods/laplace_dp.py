"""Plain per-cell Laplace noise: the baseline of the individual-ranking paper."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from dpfast import noise
from dpfast._kernels import perturb
from dpfast._release import (
    DPBounds,
    DPMetricsReleaseOptions,
    Forecast,
    NumericColumn,
    Release,
    Run,
    TableView,
    Unpack,
    bounds_guarantee,
    bounds_note,
    bounds_parameters,
    bounds_share,
    budget_parts,
    check_epsilon_weights,
    check_transforms,
    check_unprotected,
    choose_bounds,
    epsilon_shares,
    fit_domains,
    grid_noise_entry,
    noise_grid,
    noise_source,
    numeric_forecast,
    open_run,
    protected_specs,
    split_bounds,
    transform_notes,
    transform_parameters,
    warn_uncorrected,
    weight_parameters,
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
from dpfast.dataflow.writes import WriteRows
from dpfast.engines import OnBound
from dpfast.partitions.grid import Grid
from dpfast.steps import value_range

Transform = Literal["log", "asinh"]


def laplace_dp(
    data: Any,
    *,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float] | DPBounds] | str,
    columns: Sequence[Hashable] | None = None,
    unprotected: UnprotectedPolicy = "drop",
    epsilon_weights: Mapping[Hashable, float] | None = None,
    transforms: Mapping[Hashable, Transform] | None = None,
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
        A :class:`~dpfast.DPBounds` in place of a column's pair chooses its clamping bounds
        with DP inside a public outer range, for a share of the column's ε (its own
        ledger entry; the release stays proven; docs/privacy.md#bounds-chosen-with-dp).
    columns : sequence, optional
        Columns to protect (default all).
    unprotected : {"drop", "shuffle", "keep"}
        What to do with the columns not protected: ``"drop"`` (default) leaves them out;
        ``"shuffle"`` releases them unchanged in a random row order of their own and
        ``"keep"`` keeps them in their rows. Both publish them unprotected, and the
        guarantee becomes ``"protected_only"``: ε-DP for a change of one record's protected
        values (each row's noise is independent of the other rows, so keeping them in
        place shows nothing more).
    epsilon_weights : mapping, optional
        Public ``{column: weight}`` for every protected column: column ``j`` spends
        ``w_j / Σ w · ε`` with scale ``Δ_j / ε_j`` (docs/privacy.md#weights). Default: an
        equal split.
    transforms : mapping, optional
        Public ``{column: "log" | "asinh"}``: each cell is noised on the ``log1p`` (lower
        bound ``>= 0``) or ``asinh`` scale, with sensitivity ``T(U) - T(L)``, and mapped
        back corrected for the noise's mean, as in :func:`ir_dp`
        (docs/privacy.md#transforms).
    **options : Unpack[DPMetricsReleaseOptions]
        The options the releases share (:class:`dpfast.DPMetricsReleaseOptions`):
        ``seed``, ``metrics``, ``budget``, ``max_on_bound``, ``risk``, ``progress``,
        ``engine``, ``output`` and ``memory_limit``. ``progress`` is called as
        ``progress("noise", done, total)`` after each column.

    Returns
    -------
    Release
        The ledger has one entry per column, ``ε / m`` each (or by ``epsilon_weights``).

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
            epsilon, protected, domains, derived, specs = _validate(
                run.engine, epsilon, bounds, columns, run.seed
            )
            seed = check_seed(run.seed)
            run.policy = check_unprotected(unprotected)
            protected, notes = fit_domains(protected, domains)
            split = _split(protected, domains, epsilon_weights, transforms)
            plan = _plans(protected, domains, epsilon, run.n_rows, specs, split)
            run.expect(_forecast(epsilon, run.n_rows, protected, plan))  # before any ε is reserved
            warn_uncorrected(run.alerts, _grids(protected, plan), k=False)
            run.reserve(epsilon, [c.name for c in protected])
        ledger = plan.ledger(epsilon)  # every column's spend reserved before any draw
        source = noise_source(seed)
        if specs:  # the bounds chosen with DP first, then the plan over them
            protected, domains, plan, ledger = _with_dp_bounds(
                run, epsilon, protected, domains, plan, source
            )
        with run.phase("noise"):
            for i, (column, (grid, steps, entry)) in enumerate(
                zip(protected, plan.columns, strict=True)
            ):
                key = source.key("laplace_dp", "cell-noise", str(column.name))
                cells = LaplaceCells(grid, key, steps, column.integer, domains[column.name])
                clamped, *counts = run.engine.write(WriteRows(column, cells))
                ledger.spend(entry)
                run.keep(column.name, clamped=int(clamped), on_bound=OnBound.of_counts(counts))
                run.tick("noise", i + 1, len(protected))
        return run.finish(
            source=source,
            parameters=_parameters(
                epsilon, domains, derived, specs, split, _grids(protected, plan)
            ),
            guarantee=_guarantee(epsilon, protected, derived, plan.bounds, split.weights),
            ledger=ledger,
            seed=seed,
            sampler=noise.SAMPLER_NAME,
            metrics=run.metrics(protected, domains=domains),
            domains=domains,
            notes=notes,
        )


def _with_dp_bounds(
    run: Run,
    epsilon: float,
    protected: list[NumericColumn],
    domains: dict[Hashable, tuple[float, float]],
    plan: _Plans,
    source: noise.NoiseSource,
) -> tuple[list[NumericColumn], dict[Hashable, tuple[float, float]], _Plans, Ledger]:
    """Choose the bounds of ``plan.specs``, plan over them; the ledger with their spend.

    ``plan`` is over the outer ranges, its ε reserved; the chosen bounds are DP outputs.
    """
    with run.phase("bounds"):
        chosen = choose_bounds(run.engine, "laplace_dp", protected, plan.specs, plan.bounds, source)
    domains = {**domains, **chosen}
    protected, _ = fit_domains(protected, domains)  # their types hold the outer ranges
    plan = _plans(protected, domains, epsilon, run.n_rows, plan.specs, plan.split)
    ledger = Ledger(epsilon)
    for entry in plan.bounds.values():  # drawn above, with the same epsilon
        ledger.spend(entry)
    for _, _, entry in plan.columns:
        ledger.plan(entry)
    return protected, domains, plan, ledger


def _validate(
    table: TableView, epsilon: Any, bounds: Any, columns: Any, seed: Any
) -> tuple[
    float, list[NumericColumn], dict[Hashable, tuple[float, float]], bool, dict[Hashable, DPBounds]
]:
    """Check the arguments; return ε, the protected columns, their bounds and more.

    After the bounds: whether the data gave them, and the columns whose bounds are chosen
    with DP.
    """
    check_nonempty(table.n_rows)
    epsilon = check_epsilon(epsilon)
    check_seed(seed)
    selected = check_columns(columns, table.names)
    protected = table.numeric_columns(selected, categorical=False)
    bounds, specs = split_bounds(bounds)
    protected_names = [c.name for c in protected]
    domains, derived = check_bounds(bounds, protected_names, _ranges(table, protected), table.names)
    return epsilon, protected, domains, derived, protected_specs(specs, protected)


@dataclass(frozen=True)
class _Plans:
    """Every protected column's grid, scale in steps and noise entry; the bounds' entries."""

    columns: list[tuple[Grid, int, LedgerEntry]]
    specs: dict[Hashable, DPBounds] = field(default_factory=dict)
    bounds: dict[Hashable, LedgerEntry] = field(default_factory=dict)  # chosen with DP
    split: _Split = field(default_factory=lambda: _Split(None, {}))  # weights, transforms

    def ledger(self, epsilon: float) -> Ledger:
        """Return a ledger of ``epsilon`` with every entry planned, the bounds' first."""
        ledger = Ledger(epsilon)
        for entry in [*self.bounds.values(), *(entry for _, _, entry in self.columns)]:
            ledger.plan(entry)
        return ledger


@dataclass(frozen=True)
class _Split:
    """The public remedies: each column's weight (``None``: equal) and transform."""

    weights: dict[Hashable, Fraction] | None
    transforms: dict[Hashable, str]


def _split(
    protected: Sequence[NumericColumn],
    domains: Mapping[Hashable, tuple[float, float]],
    epsilon_weights: Any,
    transforms: Any,
) -> _Split:
    """Check ``epsilon_weights`` and ``transforms`` against the protected columns."""
    weights = check_epsilon_weights(epsilon_weights, [c.name for c in protected])
    return _Split(weights, check_transforms(transforms, protected, [], domains))


def _plans(
    protected: Sequence[NumericColumn],
    domains: Mapping[Hashable, tuple[float, float]],
    epsilon: float,
    n_records: int,
    specs: Mapping[Hashable, DPBounds],
    split: _Split,
) -> _Plans:
    """Every protected column's grid, scale in steps and ledger entry (:func:`_plan`).

    Each column's share of ε is its weight's (``split``), or the equal one; a column in
    ``specs`` gives its bounds' part of that share to their entry.
    """
    names = [c.name for c in protected]
    shares = epsilon_shares(epsilon, names, split.weights)
    plans = _Plans([], dict(specs), split=split)
    for column in protected:
        share, bounds = bounds_share(specs, column, shares[column.name])
        if bounds is not None:
            plans.bounds[column.name] = bounds
        parts = budget_parts(column.name, names, split.weights)
        transform = split.transforms.get(column.name)
        plans.columns.append(
            _plan(column, domains[column.name], share, parts, n_records, transform)
        )
    return plans


def _grids(protected: Sequence[NumericColumn], plans: _Plans) -> dict[Hashable, tuple[Grid, int]]:
    columns = zip(protected, plans.columns, strict=True)
    return {c.name: (grid, steps) for c, (grid, steps, _) in columns}


def laplace_dp_forecast(table: TableView, arguments: Mapping[str, Any]) -> Forecast:
    """Return the forecast of :func:`laplace_dp` with ``arguments`` (all its keywords) on ``table``.

    The release's own checks and plan, from the row count, the names and the arguments
    only; nothing is spent or written (docs/forecast.md).
    """
    a = arguments
    epsilon, protected, domains, _, specs = _validate(
        table, a["epsilon"], a["bounds"], a["columns"], a["seed"]
    )
    split = _split(protected, domains, a["epsilon_weights"], a["transforms"])
    plans = _plans(protected, domains, epsilon, table.n_rows, specs, split)
    return _forecast(epsilon, table.n_rows, protected, plans)


def _forecast(
    epsilon: float, n: int, protected: Sequence[NumericColumn], plans: _Plans
) -> Forecast:
    """Return the forecast of the columns' plans: every cell gets its own draw."""
    columns = tuple(
        numeric_forecast(entry, grid, steps, _CELL, column.integer)
        for column, (grid, steps, entry) in zip(protected, plans.columns, strict=True)
    )
    note = (
        "every cell gets its own noise draw and is clamped to its column's bounds; no k: "
        "only fewer protected columns or a larger epsilon lower the noise"
    )
    notes = (note, *transform_notes(_grids(protected, plans), k=False), *bounds_note(plans.specs))
    return Forecast("laplace_dp", epsilon, n, columns, notes=notes)


_CELL = "every cell, clamped to the bounds"


def _ranges(engine: Any, protected: Sequence[NumericColumn]) -> Any:
    """Return a column's ``(min, max)``, for bounds derived from the data (``bounds="data"``)."""
    by_name = {c.name: c for c in protected}
    return lambda name: value_range(engine.dataflow, by_name[name])


@dataclass(frozen=True)
class LaplaceCells:
    """One column's cells noised: row ``i`` gets the draw of nonce ``i`` of the column's key.

    Returns the released values, and the counts ``[clamped inputs, released on a bound,
    on a bound before the noise, pushed onto a bound by the noise]`` (a cell is its own
    group: :class:`~dpfast.dataflow.on_bound.OnBound`).
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
        draws[:] = 0
        before, _ = laplace_column(values, self.grid, draws, self.integer)
        ones = np.ones(1, dtype=np.int64)
        counted = OnBound.of(out, before, np.broadcast_to(ones, out.shape), *self.domain)
        return out, np.array([clamped, *counted.counts()], dtype=np.int64)


def _parameters(
    epsilon: float,
    domains: Mapping[Hashable, tuple[float, float]],
    derived: bool,
    specs: Mapping[Hashable, DPBounds],
    split: _Split,
    grids: Mapping[Hashable, tuple[Grid, int]],
) -> dict[str, Any]:
    return {
        "epsilon": epsilon,
        "bounds": {str(c): list(b) for c, b in domains.items()},
        "bounds_from_data": derived,
        **weight_parameters(split.weights),
        **transform_parameters(grids),
        **bounds_parameters(specs, domains),
    }


def _plan(
    column: NumericColumn,
    domain: tuple[float, float],
    share: float,
    parts: float,
    n_records: int,
    transform: str | None,
) -> tuple[Grid, int, LedgerEntry]:
    """One column's grid, scale and entry: ``share`` of ε, ``parts`` of them the total."""
    lower, upper = domain
    grid = Grid.for_column(lower, upper, n_records, transform=transform)
    steps = scale_steps(grid.d_int, share, what=f"column {quoted(column.name)}", shares=parts)
    grid = noise_grid(grid, steps)  # the mapping back of a transformed column
    entry = grid_noise_entry(
        column,
        step="cell noise",
        epsilon=share,
        mechanism="discrete Laplace, one draw per cell",
        grid=grid,
        sensitivity=grid.d_int,
        steps=steps,
        details={"nominal_sensitivity": grid.width},
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
    g = grid
    n_clamped = perturb.laplace_cells(
        values, g.lower, g.upper, g.gamma, g.d_int, draws, round_values, out, g.warp
    )
    return out, int(n_clamped)


def _guarantee(
    epsilon: float,
    protected: Sequence[NumericColumn],
    derived: bool,
    bounds: Mapping[Hashable, LedgerEntry],
    weights: Mapping[Hashable, Fraction] | None,
) -> tuple[str, GuaranteeLevel]:
    if derived:
        return (
            "NOT differentially private: the bounds were derived from the data (bounds='data').",
            "none",
        )
    m = len(protected)
    each = (
        f"{epsilon / m:g} each"
        if weights is None
        else "their shares by the public epsilon_weights (the ledger lists each)"
    )
    text = (
        f"{epsilon:g}-differential privacy (bounded DP: neighbouring tables differ in one "
        f"record's values) for columns {names([c.name for c in protected])}: each record's "
        f"{m} cell(s) get independent noise spending {each}."
    )
    return bounds_guarantee(text, bounds), "proven"
