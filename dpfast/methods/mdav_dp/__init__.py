"""``mdav_dp``: DP release via insensitive MDAV, noisy cluster centroids, rows shuffled."""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._release import (
    DPBounds,
    DPMetricsReleaseOptions,
    NumericColumn,
    Release,
    Run,
    Unpack,
    bounds_guarantee,
    bounds_parameters,
    check_unprotected,
    choose_bounds,
    column_names,
    noise_source,
    open_run,
    option,
    over_bounds,
    taxonomy_parameters,
    transform_parameters,
    warn_uncorrected,
    weight_parameters,
)
from dpfast.accounting import GuaranteeLevel, LedgerEntry, UnprotectedPolicy, names
from dpfast.dataflow.values import ProtectedColumn
from dpfast.dataflow.writes import WriteClusters
from dpfast.engines import Clusters, OnBound
from dpfast.exceptions import PrivacyLeakWarning
from dpfast.methods.mdav_dp._arguments import (
    Arguments,
    Calibration,
    Plan,
    Transform,
    cluster_values,
    geometry,
    make_plan,
    validate,
    with_remedies,
)
from dpfast.methods.mdav_dp._categorical import choose_codes
from dpfast.methods.mdav_dp._forecast import data_forecast, release_forecast
from dpfast.methods.mdav_dp._forecast import mdav_dp_data_forecast as mdav_dp_data_forecast
from dpfast.methods.mdav_dp._forecast import mdav_dp_forecast as mdav_dp_forecast
from dpfast.partitions.insensitive_mdav import Reference
from dpfast.steps import cluster_totals, insensitive_clusters
from dpfast.taxonomy import Taxonomy


def mdav_dp(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float] | DPBounds] | str | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    columns: Sequence[Hashable] | None = None,
    unprotected: UnprotectedPolicy = "drop",
    reference: Reference = "corners",
    calibration: Calibration = "l1",
    epsilon_weights: Mapping[Hashable, float] | None = None,
    transforms: Mapping[Hashable, Transform] | None = None,
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
        categorical (or by ``epsilon_weights``).
    bounds : mapping
        Public ``{column: (lower, upper)}`` of the numeric columns; ``"data"`` is not
        private and warns. May be omitted when every protected column is categorical.
        A :class:`~dpfast.DPBounds` in place of a column's pair chooses its clamping bounds
        with DP inside a public outer range, for a share of the column's ε (its own
        ledger entry; the release stays proven; docs/privacy.md#bounds-chosen-with-dp).
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
    epsilon_weights : mapping, optional
        Public ``{column: weight}`` for every protected column (``calibration="l1"``
        only): column ``j`` spends ``ε_j = w_j / Σ w · ε``, with scale
        ``n_c Δ_j / (k ε_j)`` for a numeric column and ``ε_j`` with sensitivity
        ``n_c · Δq`` for a categorical one (docs/privacy.md#weights). Default: an equal
        split.
    transforms : mapping, optional
        Public ``{column: "log" | "asinh"}`` for numeric columns, as in
        :func:`dpfast.ir_dp`: each cluster's centroid is the mean of the transformed
        values, noised on that scale (``Δ_j = T(U) - T(L)``) and mapped back corrected
        for the noise's mean (docs/privacy.md#transforms). The clusters themselves are
        formed on the data's units, as without a transform.
    **options : Unpack[DPMetricsReleaseOptions]
        The options the releases share (:class:`dpfast.DPMetricsReleaseOptions`):
        ``seed``, ``metrics``, ``budget``, ``max_on_bound``, ``risk``, ``progress``,
        ``engine``, ``output`` and ``memory_limit``. Out of core, the per-cluster arrays (``n // k``
        clusters) and a bitset of the rows take at most half of ``memory_limit``.

    Returns
    -------
    Release

    Raises
    ------
    TypeError, ValueError
        Bad arguments, as :func:`dpfast.ir_dp`; an unknown ``reference`` or
        ``calibration``; ``epsilon_weights`` with ``calibration="as_published"``; out of
        core, a reference sequence of more than 64 distinct points, or per-cluster arrays
        that take more than half of ``memory_limit``.

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
            args = validate(
                run.engine, k, epsilon, bounds, taxonomies, columns, calibration, run.seed
            )
            args = with_remedies(args, epsilon_weights, transforms)
            run.policy = check_unprotected(unprotected)
            plan = make_plan(args, run.n_rows, run.n_rows // args.k)  # an unusable ε fails here
            points = geometry(args, reference, run.n_rows)
            run.expect(  # before any ε is reserved; reads the data with max_on_bound
                release_forecast(args, run.n_rows, plan),
                lambda limit: data_forecast(run.engine, args, plan, reference, limit=limit),
            )
            warn_uncorrected(run.alerts, plan.grids)
            run.reserve(plan.ledger.total, column_names(args.numeric, args.categorical))
        source = noise_source(args.seed)
        if args.dp_bounds:  # the bounds chosen with DP first, then the plan over them
            args, plan = _with_dp_bounds(run, args, plan, source)
            points = geometry(args, reference, run.n_rows)
        with run.phase("partition"):
            clusters = insensitive_clusters(
                run.engine.dataflow, args.numeric, args.categorical, points, args.k
            )
            run.tick("partition", 1, 1)
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
            parameters=_parameters(args, total, reference, clusters.count, plan),
            guarantee=_guarantee(
                args.epsilon,
                total,
                names(run.released_names()),
                args.calibration,
                args.derived,
                names([c.name for c in args.categorical]),
                plan.bounds,
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


def _with_dp_bounds(
    run: Run, args: Arguments, plan: Plan, source: noise.NoiseSource
) -> tuple[Arguments, Plan]:
    """Choose the bounds of ``args.dp_bounds``, plan over them, and spend their entries.

    ``plan`` is the plan over the outer ranges, whose ε the run has reserved; the bounds
    chosen are DP outputs, so the plan over them (noise scales, grids, the reference
    corners) is public.
    """
    with run.phase("bounds"):
        chosen = choose_bounds(
            run.engine, "mdav_dp", args.numeric, args.dp_bounds, plan.bounds, source
        )
    n = run.n_rows
    args, plan = over_bounds(args, chosen, lambda over: make_plan(over, n, n // over.k))
    for entry in plan.bounds.values():  # drawn above, with the same epsilon
        plan.ledger.spend(entry)
    return args, plan


def _release_columns(
    run: Run,
    args: Arguments,
    plan: Plan,
    source: noise.NoiseSource,
    clusters: Clusters,
    row_key: np.ndarray,
) -> None:
    """Release every protected column: each cluster's noisy centroid or chosen leaf."""
    engine = run.engine
    grids = [plan.grids[c.name][0] for c in args.numeric]
    totals = cluster_totals(engine.dataflow, clusters, args.numeric, grids, args.categorical)
    values = [
        _numeric_values(column, plan, source, clusters, sums)
        for column, sums in zip(args.numeric, totals.sums, strict=True)
    ]
    for cat, counts in zip(args.categorical, totals.counts, strict=True):
        em_epsilon, em_sensitivity = plan.choices[cat.name]
        key = source.key("mdav_dp", "centroid-choice", str(cat.name))
        values.append(choose_codes(cat, em_epsilon, em_sensitivity, key, counts))
    released: list[ProtectedColumn] = [*args.numeric, *args.categorical]
    engine.write(WriteClusters(released, clusters, values, row_key))
    total = len(args.numeric) + len(args.categorical)
    for i, column in enumerate(args.numeric):
        plan.ledger.spend(plan.entries[column.name])
        before = cluster_values(column, plan.grids[column.name][0], clusters.sizes, totals.sums[i])
        bound = OnBound.of(values[i], before, clusters.sizes, *args.domains[column.name])
        run.keep(column.name, clamped=totals.clamped[i], on_bound=bound)
        run.tick("columns", i + 1, total)
    for i, cat in enumerate(args.categorical, start=len(args.numeric)):
        plan.ledger.spend(plan.entries[cat.name])
        run.keep(cat.name, clamped=0)
        run.tick("columns", i + 1, total)


def _numeric_values(
    column: NumericColumn,
    plan: Plan,
    source: noise.NoiseSource,
    clusters: Clusters,
    sums: np.ndarray,
) -> np.ndarray:
    """Each cluster's noisy centroid, as released (float64, rounded where integer)."""
    grid, steps = plan.grids[column.name]
    draws = noise.discrete_laplace(
        source.key("mdav_dp", "centroid-noise", str(column.name)), steps, clusters.count
    )
    return cluster_values(column, grid, clusters.sizes, sums, draws)


def _parameters(
    args: Arguments, total: float, reference: Any, n_clusters: int, plan: Plan
) -> dict[str, Any]:
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
        **bounds_parameters(args.dp_bounds, args.domains),
        "n_clusters": n_clusters,
        "remainder": "last cluster",
        "shuffle": True,
        **(
            weight_parameters(args.weights)
            if args.calibration == "l1"
            else {"budget_split": "none (the paper's per-column scale)"}
        ),
        **transform_parameters(plan.grids),
    }
    if args.categorical:
        parameters["taxonomies"] = taxonomy_parameters(args.categorical)
    return parameters


def _notes(args: Arguments, total: float) -> list[str]:
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
    bounds: Mapping[Hashable, LedgerEntry],
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
    return bounds_guarantee(text, bounds), "proven"
