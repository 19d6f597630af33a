"""``mdav_dp``: DP release via insensitive MDAV, noisy cluster centroids, rows shuffled."""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np

from dpfast import noise
from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._release import (
    CategoricalColumn,
    NumericColumn,
    Progress,
    Release,
    TableRun,
    check_unprotected,
    grid_noise_entry,
    inverse_permutation,
    noise_source,
    option,
    partition_inputs,
    split_columns,
    taxonomy_parameters,
)
from dpfast._release.dispatch import is_dask_frame, is_spark_frame, on_dask, on_spark
from dpfast._validation import check_bounds, check_choice, check_epsilon, check_k, check_seed
from dpfast.accounting import (
    GuaranteeLevel,
    Ledger,
    LedgerEntry,
    UnprotectedPolicy,
    epsilon_of_scale,
    names,
    scale_steps,
)
from dpfast.exceptions import PrivacyLeakWarning
from dpfast.methods.mdav_dp._categorical import categorical_plan, draw_categorical
from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import Reference, insensitive_mdav_labels
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
    seed: int | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
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

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
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
    seed : int, optional
        Reproducible noise and shuffle: not for publication.
    metrics : bool
        Add utility metrics (computed on the original data) to the private report.
    progress : callable, optional

    Returns
    -------
    Release

    Raises
    ------
    TypeError, ValueError
        Bad arguments, as :func:`dpfast.ir_dp`; an unknown ``reference`` or
        ``calibration``.

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
    if is_spark_frame(data):  # runs on Spark, docs/engines.md
        return on_spark("mdav_dp", locals())  # type: ignore[no-any-return]
    if is_dask_frame(data):  # runs on Dask, docs/engines.md
        return on_dask("mdav_dp", locals())  # type: ignore[no-any-return]
    run = TableRun("mdav_dp", data, progress)
    with run.phase("validate"):
        args = _validate(run, k, epsilon, bounds, taxonomies, columns, calibration, seed)
        run.policy = check_unprotected(unprotected)
        _plan(args, run.table.n_rows, run.table.n_rows // args.k)  # unusable ε: fail before work
    with run.phase("partition"):
        labels = _partition(run, args, reference)
    n_clusters = int(labels.max()) + 1
    with run.phase("plan"):
        plan = _plan(args, run.table.n_rows, n_clusters)
    source = noise_source(args.seed)
    with run.phase("shuffle"):
        row_order = noise.permutation(source.key("mdav_dp", "row-order"), run.table.n_rows)
        destination = inverse_permutation(row_order)
        run.destinations.update({c: destination for c in run.table.names})
    with run.phase("columns"):
        base = _draw_columns(run, args, plan, source, labels, destination)
    result = run.assemble(row_order, base, source=source)
    notes = _notes(args, plan.ledger.total)
    if notes and plan.ledger.total > args.epsilon * (1 + 1e-9):
        warnings.warn(notes[0], PrivacyLeakWarning, stacklevel=2)
    return run.finish(
        result,
        parameters=_parameters(args, plan.ledger.total, reference, n_clusters),
        guarantee=_guarantee(
            args.epsilon,
            plan.ledger.total,
            names(list(run.released)),
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
        notes=notes,
        metrics=run.metrics(args.numeric, args.categorical, args.domains) if metrics else None,
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


def _validate(
    run: TableRun,
    k: Any,
    epsilon: Any,
    bounds: Any,
    taxonomies: Any,
    columns: Any,
    calibration: Any,
    seed: Any,
) -> _Arguments:
    k = check_k(k, run.table.n_rows)
    epsilon = check_epsilon(epsilon)
    calibration = check_choice(calibration, "calibration", CALIBRATIONS)
    seed = check_seed(seed)
    numeric, categorical = split_columns(run.table, columns, taxonomies)
    domains: dict[Hashable, tuple[float, float]] = {}
    derived = False
    if numeric or bounds is not None:
        domains, derived = check_bounds(
            bounds, [c.name for c in numeric], {c.name: c.values for c in numeric}
        )
    return _Arguments(
        k, epsilon, cast(Calibration, calibration), seed, numeric, categorical, domains, derived
    )


def _partition(run: TableRun, args: _Arguments, reference: Reference) -> np.ndarray:
    matrix, codes, found = partition_inputs(args.numeric, args.categorical, run.table.n_rows)
    labels = insensitive_mdav_labels(
        matrix,
        args.k,
        [args.domains[c.name] for c in args.numeric],
        reference,
        codes=codes,
        taxonomies=found,
    )
    run.tick("partition", 1, 1)
    return labels


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
        what = f"column {column.name!r}"
        steps = scale_steps(sensitivity, spent, what=what, shares=m) if grid.d_int else 0
    else:
        paper = Fraction(n_records * grid.d_int, args.k**2)
        steps = scale_steps(paper, args.epsilon, what=f"column {column.name!r}")
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


def _draw_numeric(
    column: NumericColumn,
    plan: _Plan,
    source: noise.NoiseSource,
    labels: np.ndarray,
    destination: np.ndarray,
    out: np.ndarray,
) -> int:
    grid, steps = plan.grids[column.name]
    n_clusters = int(labels.max()) + 1
    draws = noise.discrete_laplace(
        source.key("mdav_dp", "centroid-noise", str(column.name)), steps, n_clusters
    )
    sums, sizes, count = mdav_kernels.cluster_grid_sums(
        column.values, labels, n_clusters, grid.lower, grid.upper, grid.gamma, grid.d_int
    )
    values = mdav_kernels.noisy_cluster_values(sums, sizes, draws, grid.d_int)
    mdav_kernels.broadcast_clusters(
        labels, values, grid.lower, grid.upper, grid.gamma, column.integer, destination, out
    )
    return int(count)


def _draw_columns(
    run: TableRun,
    args: _Arguments,
    plan: _Plan,
    source: noise.NoiseSource,
    labels: np.ndarray,
    destination: np.ndarray,
) -> Any:
    outputs, base = run.table.output_columns([c.name for c in args.numeric])
    total = len(args.numeric) + len(args.categorical)
    for i, column in enumerate(args.numeric):
        out = outputs[column.name]
        count = _draw_numeric(column, plan, source, labels, destination, out)
        plan.ledger.spend(plan.entries[column.name])
        run.keep(column, out, count)
        run.tick("columns", i + 1, total)
    for i, cat in enumerate(args.categorical):
        em_epsilon, em_sensitivity = plan.choices[cat.name]
        codes = draw_categorical(cat, em_epsilon, em_sensitivity, source, labels, destination)
        plan.ledger.spend(plan.entries[cat.name])
        run.keep_codes(cat, codes, clamped=True)
        run.tick("columns", len(args.numeric) + i + 1, total)
    return base


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
