"""``mdav_dp``: DP release via insensitive MDAV, noisy cluster centroids, rows shuffled."""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np

from dpfast import noise
from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._release import (
    CategoricalColumn,
    ColumnForecast,
    DPMetricsReleaseOptions,
    Forecast,
    NumericColumn,
    Release,
    Run,
    TableView,
    Unpack,
    advise_k,
    check_unprotected,
    choice_forecast,
    column_names,
    grid_noise_entry,
    noise_source,
    numeric_forecast,
    open_run,
    option,
    protected_domains,
    taxonomy_parameters,
)
from dpfast._validation import check_choice, check_epsilon, check_k, check_seed, quoted
from dpfast.accounting import (
    GuaranteeLevel,
    Ledger,
    LedgerEntry,
    UnprotectedPolicy,
    epsilon_of_scale,
    names,
    scale_steps,
)
from dpfast.engines import Clusters
from dpfast.exceptions import PrivacyLeakWarning
from dpfast.methods.mdav_dp._categorical import categorical_plan, choose_codes
from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import Reference, ReferenceGeometry, reference_geometry
from dpfast.taxonomy import Taxonomy

Calibration = Literal["l1", "as_published"]
CALIBRATIONS: tuple[Calibration, ...] = ("l1", "as_published")


def mdav_dp(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    columns: Sequence[Hashable] | None = None,
    unprotected: UnprotectedPolicy = "drop",
    reference: Reference = "corners",
    calibration: Calibration = "l1",
    **options: Unpack[DPMetricsReleaseOptions],
) -> Release:
    """Release with DP via insensitive MDAV: noisy cluster centroids, rows shuffled.

    Values are clamped to their public bounds and partitioned by insensitive MDAV
    (:func:`~dpfast.partitions.insensitive_mdav.insensitive_mdav_labels`): one changed record
    changes each of the ``n_c = n // k`` clusters by at most one record. Each cluster's
    centroid, on the exact integer grid of the column, gets one discrete Laplace draw per
    column, shared by the cluster's rows; outputs are clamped and integer columns rounded.
    Rows are released in random order, so the release is the multiset of noisy centroid
    records.

    Categorical columns (given a taxonomy) enter the distance as
    ``(δ(x, R) / δ(v*, t*)) ** 2``, with the taxonomy's ``v*`` and ``t*`` as their lower
    and upper domain corners (docs/design.md#imdav-order). Each cluster's released value is drawn
    from the taxonomy's leaves by the exponential mechanism with quality ``-Σ δ(c, x)`` over the
    cluster and sensitivity ``n_c · Δq`` (docs/design.md#imdav-categorical: up to ``n_c`` clusters
    change by one record, each moving the quality by at most ``Δq``, the largest distance).

    Guarantee: proven ε-differential privacy of the protected columns (bounded DP:
    neighbouring tables differ in one record's values, and the number of rows is public;
    report level ``"proven"``, ``"protected_only"`` with ``unprotected="shuffle"``), the ε
    being the ledger's total: what the noise really spends, also under
    ``calibration="as_published"``. NOT differentially private with ``bounds="data"`` or
    ``unprotected="keep"`` (level ``"none"``).

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table, 2-D numpy.ndarray, Parquet path, Spark or Dask DataFrame
        The table, never modified. A Parquet path or ``pyarrow.dataset.Dataset`` (or
        ``engine="outofcore"``) is released out of core, written to ``output``; a Spark
        or Dask DataFrame on its cluster (no metrics). Every engine gives the same
        release for a seed (docs/engines.md). Out of core, the reference sequence may
        hold at most 64 distinct points.
    k : int
        Minimum cluster size, ``1 <= k <= n_rows``.
    epsilon : float
        Total privacy budget, split equally over the protected columns, numeric and
        categorical.
    bounds : mapping
        Public ``{column: (lower, upper)}`` of the numeric columns; ``"data"`` is not
        private and warns. May be omitted when every protected column is categorical.
    taxonomies : mapping, optional
        ``{column: Taxonomy}``: the protected categorical columns, as in
        :func:`dpfast.ir_dp`. Their values must be leaves of the taxonomy; the released
        column keeps its kind.
    columns : sequence, optional
        Columns to protect (default all).
    unprotected : {"drop", "shuffle", "keep"}
        What to do with the columns not protected: ``"drop"`` (default) leaves them out;
        ``"shuffle"`` releases them unchanged in a random row order of their own (not
        protected; the guarantee becomes ``"protected_only"``); ``"keep"`` keeps them in
        their rows, where they show which rows share a cluster: NOT differentially
        private (level ``"none"``).
    reference : {"corners", "cycling"} or array_like
        Data-independent reference points (see
        :func:`~dpfast.partitions.insensitive_mdav.reference_sequence`).
    calibration : {"l1", "as_published"}
        ``"l1"``: scale ``m * n_c * Δ_j / (k ε)`` per numeric column, the L1 sensitivity
        of all centroids (docs/design.md#imdav-noise), and ``ε / m`` with sensitivity ``n_c · Δq``
        per categorical column. ``"as_published"``: the paper's ``(n / k) Δ_j / (k ε)`` per
        numeric column and, per categorical column, the thesis code's
        ``Pr[c] ∝ exp(ε q / (2 (n / k) Δq))`` with the whole ``ε`` (no split), for
        comparison; it really spends about ``m`` times more (``ε n_c k / n`` per
        categorical column), and the ledger and guarantee state the ε it really spends.
        An explicit opt-in: it warns with :class:`~dpfast.exceptions.PrivacyLeakWarning`
        whenever it spends more than ``epsilon``.
    **options : Unpack[DPMetricsReleaseOptions]
        The options the releases share (:class:`dpfast.DPMetricsReleaseOptions`):
        ``seed``, ``metrics``, ``budget``, ``risk``, ``progress``, ``engine``,
        ``output`` and ``memory_limit``. Out of core, the per-cluster arrays (``n // k``
        clusters) and a bitset of the rows take at most half of ``memory_limit``.

    Returns
    -------
    Release

    Raises
    ------
    TypeError, ValueError
        Bad arguments, as :func:`dpfast.ir_dp`; an unknown ``reference`` or
        ``calibration``; out of core, a reference sequence of more than 64 distinct
        points, or per-cluster arrays that take more than half of ``memory_limit``.

    References
    ----------
    J. Soria-Comas, J. Domingo-Ferrer, D. Sánchez and S. Martínez, "Enhancing data utility
    in differential privacy via microaggregation-based k-anonymity", The VLDB Journal
    23(5), 2014 (insensitive microaggregation, Section 4).

    Examples
    --------
    >>> import numpy as np
    >>> data = np.random.default_rng(0).uniform(0, 10, size=(40, 2))
    >>> release = mdav_dp(data, k=10, epsilon=1.0, bounds={0: (0, 10), 1: (0, 10)}, seed=1)
    >>> release.data.shape, release.report.epsilon
    ((40, 2), 1.0)
    >>> len(np.unique(release.data, axis=0)) <= 4
    True
    """
    with open_run("mdav_dp", data, options, DPMetricsReleaseOptions) as run:
        with run.phase("validate"):
            args = _validate(
                run.engine, k, epsilon, bounds, taxonomies, columns, calibration, run.seed
            )
            run.policy = check_unprotected(unprotected)
            plan = _plan(args, run.n_rows, run.n_rows // args.k)  # an unusable ε fails here
            geometry = _geometry(args, reference, run.n_rows)
            run.expect(_forecast(args, run.n_rows, plan))  # before any ε is reserved
            run.reserve(plan.ledger.total, column_names(args.numeric, args.categorical))
        with run.phase("partition"):
            clusters = run.engine.insensitive_clusters(
                args.numeric, args.categorical, geometry, args.k
            )
            run.tick("partition", 1, 1)
        source = noise_source(args.seed)
        row_key = source.key("mdav_dp", "row-order")
        with run.phase("columns"):
            _release_columns(run, args, plan, source, clusters, row_key)
        total = plan.ledger.total
        notes = _notes(args, total)
        if notes and total > args.epsilon * (1 + 1e-9):
            warnings.warn(notes[0], PrivacyLeakWarning, stacklevel=2)
        return run.finish(
            source=source,
            order_key=row_key,
            reindex=True,
            parameters=_parameters(args, total, reference, clusters.count),
            guarantee=_guarantee(
                args.epsilon,
                total,
                names(run.released_names()),
                args.calibration,
                args.derived,
                names([c.name for c in args.categorical]),
            ),
            ledger=plan.ledger,
            seed=args.seed,
            sampler="; ".join(
                ([noise.SAMPLER_NAME] if args.numeric else [])
                + ([noise.EM_SAMPLER_NAME] if args.categorical else [])
            ),
            notes=[*notes, *args.notes],
            metrics=run.metrics(args.numeric, args.categorical, args.domains),
            groups="cluster",
            domains=args.domains,
        )


@dataclass(frozen=True)
class _Arguments:
    k: int
    epsilon: float
    calibration: Calibration
    seed: int | None
    numeric: list[NumericColumn]
    categorical: list[CategoricalColumn]
    domains: dict[Hashable, tuple[float, float]]
    derived: bool
    notes: list[str]  # the columns released in a wider type than their own


def _validate(
    table: TableView,
    k: Any,
    epsilon: Any,
    bounds: Any,
    taxonomies: Any,
    columns: Any,
    calibration: Any,
    seed: Any,
) -> _Arguments:
    k = check_k(k, table.n_rows)
    epsilon = check_epsilon(epsilon)
    calibration = check_choice(calibration, "calibration", CALIBRATIONS)
    seed = check_seed(seed)
    return _Arguments(
        k,
        epsilon,
        cast(Calibration, calibration),
        seed,
        *protected_domains(table, columns, taxonomies, bounds),
    )


def mdav_dp_forecast(table: TableView, arguments: Mapping[str, Any]) -> Forecast:
    """Return the forecast of :func:`mdav_dp` with ``arguments`` (all its keywords) on ``table``.

    The release's own checks and plan (:func:`_plan`), from the row count, the names and
    the arguments only; nothing is spent or written (docs/forecast.md).
    """
    a, n = arguments, table.n_rows
    args = _validate(
        table, a["k"], a["epsilon"], a["bounds"], a["taxonomies"], a["columns"],
        a["calibration"], a["seed"],
    )  # fmt: skip
    _geometry(args, a["reference"], n)
    return _forecast(args, n, _plan(args, n, n // args.k), advice=True)


def _forecast(args: _Arguments, n: int, plan: _Plan, *, advice: bool = False) -> Forecast:
    """Return ``plan``'s forecast; the smallest ``k`` too with ``advice`` or a swamped column."""
    columns = _numeric_forecasts(args, plan) + tuple(
        choice_forecast(plan.entries[c.name], "each cluster's value, by the exponential mechanism")
        for c in args.categorical
    )
    note = (
        "each cluster's centroid gets one noise draw per column, shared by its rows, of a "
        "scale that grows with the number of clusters n // k; the forecast takes the "
        "centroids as spread evenly over the bounds"
    )
    forecast = Forecast("mdav_dp", plan.ledger.total, n, columns, k=args.k, notes=(note,))
    if args.numeric and (advice or forecast.affected):
        m = len(columns)
        worst = lambda k: _worst_share(replace(args, k=k), n)  # noqa: E731
        suggested, text = advise_k(worst, n, m, args.epsilon, "cluster")
        forecast = replace(forecast, suggested_k=suggested, k_advice=text)
    return forecast


def _numeric_forecasts(args: _Arguments, plan: _Plan) -> tuple[ColumnForecast, ...]:
    """Return the numeric columns' forecasts: their entries, grids and scales in ``plan``."""
    draw = "each cluster's centroid, one draw for its rows, clamped to the bounds"
    return tuple(
        numeric_forecast(plan.entries[c.name], *plan.grids[c.name], draw, c.integer)
        for c in args.numeric
    )


def _worst_share(args: _Arguments, n: int) -> float:
    """Return the largest forecast share on a bound of ``args``' numeric columns."""
    return max(c.on_bound or 0.0 for c in _numeric_forecasts(args, _plan(args, n, n // args.k)))


def _geometry(args: _Arguments, reference: Reference, n: int) -> ReferenceGeometry:
    """Return the reference sequence of the ``n // k - 1`` clusters formed before the last."""
    lower = np.array([args.domains[c.name][0] for c in args.numeric], dtype=np.float64)
    upper = np.array([args.domains[c.name][1] for c in args.numeric], dtype=np.float64)
    taxonomies = [c.taxonomy for c in args.categorical]
    return reference_geometry(reference, lower, upper, taxonomies, max(n // args.k - 1, 0))


@dataclass(frozen=True)
class _Plan:
    ledger: Ledger
    grids: dict[Hashable, tuple[Grid, int]]
    entries: dict[Hashable, LedgerEntry]
    choices: dict[Hashable, tuple[float, Fraction]]


def _numeric_entry(
    column: NumericColumn, args: _Arguments, n_records: int, n_clusters: int
) -> tuple[Grid, int, LedgerEntry]:
    lower, upper = args.domains[column.name]
    grid = Grid.for_column(lower, upper, n_records, args.k)
    # n_c centroids each move by at most d_int / k, plus one step of rounding.
    sensitivity = Fraction(n_clusters * grid.d_int, args.k) + n_clusters
    if args.calibration == "l1":
        m = len(args.numeric) + len(args.categorical)
        spent = args.epsilon / m
        what = f"column {quoted(column.name)}"
        steps = scale_steps(sensitivity, spent, what=what, shares=m) if grid.d_int else 0
    else:
        paper = Fraction(n_records * grid.d_int, args.k**2)
        steps = scale_steps(paper, args.epsilon, what=f"column {quoted(column.name)}")
        spent = (
            epsilon_of_scale(sensitivity, steps)
            if steps
            else args.epsilon * n_clusters * args.k / n_records
        )
    entry = grid_noise_entry(
        column,
        step="centroid noise",
        epsilon=spent,
        mechanism="discrete Laplace, one draw per insensitive-MDAV cluster",
        grid=grid,
        sensitivity=sensitivity,
        steps=steps,
        details={
            "n_clusters": n_clusters,
            "calibration": args.calibration,
            "nominal_sensitivity": n_clusters * (upper - lower) / args.k,
            "grid_rounding_term": n_clusters * grid.gamma,
        },
    )
    return grid, steps, entry


def _plan(args: _Arguments, n_records: int, n_clusters: int) -> _Plan:
    """Every column's scale and entry; the ledger's total is what they really spend."""
    m = len(args.numeric) + len(args.categorical)
    grids, entries, choices = {}, {}, {}
    for column in args.numeric:
        grid, steps, entry = _numeric_entry(column, args, n_records, n_clusters)
        grids[column.name] = (grid, steps)
        entries[column.name] = entry
    for cat in args.categorical:
        em_epsilon, em_sensitivity, entry = categorical_plan(
            cat, args.epsilon, m, n_records, args.k, n_clusters, args.calibration
        )
        choices[cat.name] = (em_epsilon, em_sensitivity)
        entries[cat.name] = entry
    ledger = Ledger(math.fsum(entry.epsilon for entry in entries.values()))
    for entry in entries.values():
        ledger.plan(entry)
    return _Plan(ledger, grids, entries, choices)


def _release_columns(
    run: Run,
    args: _Arguments,
    plan: _Plan,
    source: noise.NoiseSource,
    clusters: Clusters,
    row_key: np.ndarray,
) -> None:
    """Release every protected column: each cluster's noisy centroid or chosen leaf."""
    engine = run.engine
    grids = [plan.grids[c.name][0] for c in args.numeric]
    totals = engine.cluster_totals(clusters, args.numeric, grids, args.categorical)
    values = [
        _numeric_values(column, plan, source, clusters, sums)
        for column, sums in zip(args.numeric, totals.sums, strict=True)
    ]
    for cat, counts in zip(args.categorical, totals.counts, strict=True):
        em_epsilon, em_sensitivity = plan.choices[cat.name]
        key = source.key("mdav_dp", "centroid-choice", str(cat.name))
        values.append(choose_codes(cat, em_epsilon, em_sensitivity, key, counts))
    engine.write_clusters([*args.numeric, *args.categorical], clusters, values, row_key)
    total = len(args.numeric) + len(args.categorical)
    for i, column in enumerate(args.numeric):
        plan.ledger.spend(plan.entries[column.name])
        lower, upper = args.domains[column.name]
        on_bound = (values[i] <= lower) | (values[i] >= upper)
        bound = int(clusters.sizes[on_bound].sum())
        run.keep(column.name, clamped=totals.clamped[i], on_bound=bound)
        run.tick("columns", i + 1, total)
    for i, cat in enumerate(args.categorical, start=len(args.numeric)):
        plan.ledger.spend(plan.entries[cat.name])
        run.keep(cat.name, clamped=0)
        run.tick("columns", i + 1, total)


def _numeric_values(
    column: NumericColumn,
    plan: _Plan,
    source: noise.NoiseSource,
    clusters: Clusters,
    sums: np.ndarray,
) -> np.ndarray:
    """Each cluster's noisy centroid, as released (float64, rounded where integer)."""
    grid, steps = plan.grids[column.name]
    count = clusters.count
    draws = noise.discrete_laplace(
        source.key("mdav_dp", "centroid-noise", str(column.name)), steps, count
    )
    noisy = mdav_kernels.noisy_cluster_values(sums, clusters.sizes, draws, grid.d_int)
    out = np.empty(count, dtype=np.float64)
    mdav_kernels.broadcast_clusters(
        np.arange(count, dtype=np.int64),
        noisy,
        grid.lower,
        grid.upper,
        grid.gamma,
        column.integer,
        np.empty(0, dtype=np.int64),
        out,
    )
    return out


def _parameters(args: _Arguments, total: float, reference: Any, n_clusters: int) -> dict[str, Any]:
    parameters: dict[str, Any] = {
        "k": args.k,
        "epsilon": total,
        "epsilon_requested": args.epsilon,
        "calibration": args.calibration,
        "reference": reference
        if isinstance(reference, str)
        else np.asarray(reference, dtype=float).tolist(),
        "bounds": {str(c): list(b) for c, b in args.domains.items()},
        "bounds_from_data": args.derived,
        "n_clusters": n_clusters,
        "remainder": "last cluster",
        "shuffle": True,
        "budget_split": "equal over protected columns"
        if args.calibration == "l1"
        else "none (the paper's per-column scale)",
    }
    if args.categorical:
        parameters["taxonomies"] = taxonomy_parameters(args.categorical)
    return parameters


def _notes(args: _Arguments, total: float) -> list[str]:
    if args.calibration != "as_published":
        return []
    return [
        f"{option('calibration', 'as_published')} uses the paper's noise scale; it was asked "
        f"for epsilon={args.epsilon:g} and really spends epsilon={total:.6g}"
    ]


def _guarantee(
    requested: float,
    total: float,
    protected: list[str],
    calibration: str,
    derived: bool,
    categorical: list[str],
) -> tuple[str, GuaranteeLevel]:
    if derived:
        return (
            "NOT differentially private: the bounds were derived from the data "
            "(bounds='data'), so the partition and the noise scale depend on the data.",
            "none",
        )
    numeric = [name for name in protected if name not in categorical]
    parts = []
    if numeric:
        parts.append(
            f"the centroids of {numeric} get discrete Laplace noise calibrated to "
            "their L1 sensitivity"
        )
    if categorical:
        parts.append(
            f"each cluster's value of {categorical} is drawn by the exponential "
            "mechanism with sensitivity n_clusters * Δq"
        )
    text = (
        f"{total:g}-differential privacy (bounded DP: neighbouring tables differ in one "
        f"record's values, and the number of rows is public) for columns {protected}: "
        "insensitive MDAV with data-independent reference points changes each cluster by "
        f"at most one record, {' and '.join(parts)}, and rows are released in random order."
    )
    if calibration == "as_published":
        text += (
            f" {option('calibration', 'as_published')} asked for epsilon={requested:g} with "
            "the paper's "
            f"noise scale, which really spends epsilon={total:g}; the figure above is the "
            "real one."
        )
    return text, "proven"
