"""Multivariate microaggregation releases: ``mdav`` (k-anonymity) and ``mdav_dp`` (DP).

Both take a pandas DataFrame, an Arrow table or a 2-D NumPy array and return a
:class:`~dpfast.release.Release` of the same kind, like the other releases. Categorical
columns are protected with their taxonomies (``taxonomies=``), as in :func:`dpfast.ir_dp`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._validation import check_bounds, check_choice, check_epsilon, check_k, check_seed
from dpfast.accounting import Ledger, LedgerEntry, PhaseTimer, Report, names
from dpfast.grid import Grid
from dpfast.io import as_table_data
from dpfast.mdav import insensitive_mdav_labels, mdav_labels
from dpfast.microaggregation import noise_scale_steps
from dpfast.release._common import (
    SEEDED_NOTE,
    Progress,
    Release,
    _Categorical,
    _categorical_metrics,
    _Column,
    _finish,
    _inverse,
    _noise_source,
    _report_progress,
    _split_columns,
    _unprotected_note,
    _utility_metrics,
)
from dpfast.taxonomy import Taxonomy

CALIBRATIONS = ("l1", "as_published")


def _partition_inputs(
    protected: Sequence[_Column], categorical: Sequence[_Categorical], n_records: int
) -> tuple[np.ndarray, np.ndarray, list[Taxonomy]]:
    """Numeric matrix ``(n, m)``, categorical codes ``(n, c)`` and their taxonomies."""
    matrix = (
        np.column_stack([c.values for c in protected]) if protected else np.zeros((n_records, 0))
    )
    codes = (
        np.column_stack([c.codes for c in categorical])
        if categorical
        else np.zeros((n_records, 0), dtype=np.int64)
    )
    return matrix, codes, [c.taxonomy for c in categorical]


def _taxonomy_parameters(categorical: Sequence[_Categorical]) -> dict[str, Any]:
    return {
        str(c.name): {"name": c.taxonomy.name, "leaves": len(c.taxonomy.domain)}
        for c in categorical
    }


def mdav(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Release with standard MDAV microaggregation: k-anonymity on the chosen columns, not DP.

    The protected columns are standardised (population variance) and partitioned by
    MDAV-generic (:func:`dpfast.mdav.mdav_labels`); every value is replaced by its
    cluster's mean. Each released combination of these columns is then shared by at least
    ``k`` rows. Rows keep their order; integer columns are rounded.

    Categorical columns (given a taxonomy) join the distance with their semantic distance
    divided by the taxonomy's largest distance ``Δq`` (so a term lies in ``[0, 1]``, next
    to numeric terms in standard deviations), and are replaced by their cluster's
    marginality-based centroid: the taxonomy leaf of least total semantic distance to the
    cluster's values (SPEC §3.3; ties to the first leaf in label order). Mixed data take
    an exact O(n^2 / k) scan instead of the numeric k-d tree.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
    k : int
        Minimum cluster size, ``1 <= k <= n_rows``.
    columns : sequence, optional
        The quasi-identifiers to aggregate together (default all). Others pass through.
    taxonomies : mapping, optional
        ``{column: Taxonomy}``: the protected categorical columns, as in
        :func:`dpfast.ir_dp`. Their values must be leaves of the taxonomy; the released
        column keeps its kind.
    metrics : bool
        Add relative error and Jensen-Shannon divergence per column to the report.
    progress : callable, optional
        Called as ``progress(phase, done, total)``.

    Returns
    -------
    Release
        Its report states k-anonymity and says the release is not differentially private.

    Raises
    ------
    TypeError, ValueError
        As :func:`dpfast.ir_dp` (NaN, non-numeric columns, ``k`` outside ``[1, n]``, ...).

    Notes
    -----
    MDAV's clusters depend on every record: one changed record can change all of them.
    Never add DP noise to its output; use :func:`mdav_dp` for that.

    Examples
    --------
    >>> import numpy as np
    >>> data = np.array([[2.0, 1.0], [3.0, 2.0], [3.0, 2.0], [20.0, 19.0], [21.0, 20.0]])
    >>> mdav(data, k=2).data[:, 0].tolist()
    [2.6666666666666665, 2.6666666666666665, 2.6666666666666665, 20.5, 20.5]
    >>> import pandas as pd
    >>> from dpfast.taxonomy import Taxonomy
    >>> jobs = Taxonomy.from_mapping({"*": {"Care": ["nurse", "doctor"], "Air": ["pilot"]}})
    >>> table = pd.DataFrame({"age": [30, 32, 31, 60, 62, 61],
    ...                       "job": ["nurse", "doctor", "nurse", "pilot", "pilot", "nurse"]})
    >>> mdav(table, k=3, taxonomies={"job": jobs}).data["job"].tolist()
    ['nurse', 'nurse', 'nurse', 'pilot', 'pilot', 'pilot']
    """
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        k = check_k(k, table.n_rows)
        protected, categorical = _split_columns(table, columns, taxonomies)
    with timer.phase("partition"):
        matrix, codes, found = _partition_inputs(protected, categorical, table.n_rows)
        labels = mdav_labels(matrix, k, codes=codes, taxonomies=found)
        _report_progress(progress, "partition", 1, 1)
    n_clusters = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=n_clusters)
    released: dict[Hashable, np.ndarray] = {}
    with timer.phase("aggregate"):
        for i, column in enumerate(protected):
            means = np.bincount(labels, weights=column.values, minlength=n_clusters) / sizes
            out = means[labels]
            released[column.name] = _finish(column, np.rint(out) if column.integer else out)
            _report_progress(progress, "aggregate", i + 1, len(protected) + len(categorical))
        released_codes: dict[Hashable, np.ndarray] = {}
        for i, cat in enumerate(categorical):
            centre = cat.taxonomy.centroid(cat.codes, labels, n_clusters)
            released_codes[cat.name] = centre[labels]
            released[cat.name] = table.categorical_output(
                cat.name, centre[labels], cat.taxonomy.domain
            )
            _report_progress(
                progress, "aggregate", len(protected) + i + 1, len(protected) + len(categorical)
            )
    with timer.phase("assemble"):
        result = table.rebuild(released, None)
    extra: dict[str, Any] = {}
    if metrics:
        with timer.phase("metrics"):
            extra["metrics"] = _utility_metrics(protected, released, {}, None)
            if categorical:
                _categorical_metrics(extra["metrics"], categorical, released_codes, {})
    protected_names = names([c.name for c in protected] + [c.name for c in categorical])
    unprotected = [str(n) for n in table.names if n not in released]
    mixed: dict[str, Any] = {}
    if categorical:
        mixed = {
            "categorical_distance": "semantic distance / Δq (the taxonomy's largest "
            "distance), squared and added to the numeric terms",
            "categorical_centroid": "marginality-based (SPEC §3.3) over the taxonomy's leaves",
            "taxonomies": _taxonomy_parameters(categorical),
        }
    report = Report(
        method="mdav",
        parameters={
            "k": k,
            "n_clusters": n_clusters,
            "standardisation": "population variance (weight 1 for constant columns)",
            "ties": "lowest row index",
            **mixed,
        },
        epsilon=None,
        ledger=[],
        guarantee=(
            f"k-anonymity with k={k} on columns {protected_names}: every released "
            f"combination of these columns is shared by at least {k} rows. NOT "
            "differentially private: the clusters depend on every record, so this output "
            "must never feed a DP noise step (use mdav_dp)." + _unprotected_note(unprotected)
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


def _real_epsilon(sensitivity: Fraction, steps: int) -> float:
    """``sensitivity / steps`` as a float rounded up (the ε a scale really spends)."""
    exact = sensitivity / steps
    value = float(exact)
    return value if Fraction(value) >= exact else math.nextafter(value, math.inf)


def mdav_dp(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    columns: Sequence[Hashable] | None = None,
    reference: Any = "corners",
    calibration: str = "l1",
    seed: int | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Release with DP via insensitive MDAV: noisy cluster centroids, rows shuffled.

    Values are clamped to their public bounds and partitioned by insensitive MDAV
    (:func:`dpfast.mdav.insensitive_mdav_labels`): one changed record changes each of the
    ``n_c = n // k`` clusters by at most one record. Each cluster's centroid, on the exact
    integer grid of the column, gets one discrete Laplace draw per column, shared by the
    cluster's rows; outputs are clamped and integer columns rounded. Rows are released in
    random order, so the release is the multiset of noisy centroid records.

    Categorical columns (given a taxonomy) enter the distance as
    ``(δ(x, R) / δ(v*, t*)) ** 2``, with the taxonomy's ``v*`` and ``t*`` as their lower
    and upper domain corners (SPEC §4.2). Each cluster's released value is drawn from the
    taxonomy's leaves by the exponential mechanism with quality ``-Σ δ(c, x)`` over the
    cluster and sensitivity ``n_c · Δq`` (SPEC §4.6: up to ``n_c`` clusters change by one
    record, each moving the quality by at most ``Δq``, the largest distance).

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
        Columns to protect (default all). Others are shuffled with their rows, unprotected.
    reference : {"corners", "cycling"} or array_like
        Data-independent reference points (see :func:`dpfast.mdav.reference_sequence`).
    calibration : {"l1", "as_published"}
        ``"l1"``: scale ``m * n_c * Δ_j / (k ε)`` per numeric column, the L1 sensitivity
        of all centroids (SPEC §4.5), and ``ε / m`` with sensitivity ``n_c · Δq`` per
        categorical column. ``"as_published"``: the paper's ``(n / k) Δ_j / (k ε)`` per
        numeric column and, per categorical column, the thesis code's
        ``Pr[c] ∝ exp(ε q / (2 (n / k) Δq))`` with the whole ``ε`` (no split), for
        comparison; it really spends about ``m`` times more (``ε n_c k / n`` per
        categorical column), and the ledger and guarantee state the ε it really spends.
    seed : int, optional
        Reproducible noise and shuffle: not for publication.
    metrics : bool
        Add utility metrics (computed on the original data) to the report.
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
    Soria-Comas, Domingo-Ferrer, Sánchez, Martínez. Enhancing data utility in differential
    privacy via microaggregation-based k-anonymity. VLDB J 23(5), 2014.

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
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        k = check_k(k, table.n_rows)
        epsilon = check_epsilon(epsilon)
        calibration = check_choice(calibration, "calibration", CALIBRATIONS)
        seed = check_seed(seed)
        protected, categorical = _split_columns(table, columns, taxonomies)
        if protected or bounds is not None:
            domains, derived = check_bounds(
                bounds, [c.name for c in protected], {c.name: c.values for c in protected}
            )
        else:
            domains, derived = {}, False
    n_records = table.n_rows
    m = len(protected) + len(categorical)
    with timer.phase("partition"):
        matrix, codes, found = _partition_inputs(protected, categorical, n_records)
        labels = insensitive_mdav_labels(
            matrix,
            k,
            [domains[c.name] for c in protected],
            reference,
            codes=codes,
            taxonomies=found,
        )
        _report_progress(progress, "partition", 1, 1)
    n_clusters = int(labels.max()) + 1

    plans: dict[Hashable, tuple[Grid, int, LedgerEntry]] = {}
    with timer.phase("plan"):
        for column in protected:
            lower, upper = domains[column.name]
            grid = Grid.for_column(lower, upper, n_records, k)
            # n_c centroids each move by at most d_int / k, plus one step of rounding.
            sensitivity = Fraction(n_clusters * grid.d_int, k) + n_clusters
            if calibration == "l1":
                spent = epsilon / m
                steps = noise_scale_steps(sensitivity, spent) if grid.d_int else 0
            else:
                steps = math.ceil(Fraction(n_records * grid.d_int, k * k) / Fraction(epsilon))
                spent = (
                    _real_epsilon(sensitivity, steps)
                    if steps
                    else epsilon * n_clusters * k / n_records
                )
            plans[column.name] = (
                grid,
                steps,
                LedgerEntry(
                    step="centroid noise",
                    columns=(str(column.name),),
                    epsilon=spent,
                    mechanism="discrete Laplace, one draw per insensitive-MDAV cluster",
                    sensitivity=float(sensitivity) * grid.gamma,
                    noise_scale=steps * grid.gamma,
                    sampler=noise.SAMPLER_NAME,
                    details={
                        "n_clusters": n_clusters,
                        "calibration": calibration,
                        "nominal_sensitivity": n_clusters * (upper - lower) / k,
                        "grid_step": grid.gamma,
                        "grid_rounding_term": n_clusters * grid.gamma,
                        "scale_in_grid_steps": steps,
                    },
                ),
            )
        choices = {
            cat.name: _categorical_plan(cat, epsilon, m, n_records, k, n_clusters, calibration)
            for cat in categorical
        }
    total = math.fsum(
        [plan[2].epsilon for plan in plans.values()]
        + [plan[2].epsilon for plan in choices.values()]
    )
    ledger = Ledger(total)
    source = _noise_source(seed)

    with timer.phase("shuffle"):
        row_order = noise.permutation(source.key("mdav_dp", "row-order"), n_records)
        destination = _inverse(row_order)

    released: dict[Hashable, np.ndarray] = {}
    clamped: dict[str, int] = {}
    with timer.phase("columns"):
        outputs, base = table.output_columns([c.name for c in protected])
        for i, column in enumerate(protected):
            grid, steps, entry = plans[column.name]
            ledger.check(entry.epsilon)
            draws = noise.discrete_laplace(
                source.key("mdav_dp", "centroid-noise", str(column.name)), steps, n_clusters
            )
            sums, sizes, count = mdav_kernels.cluster_grid_sums(
                column.values,
                labels,
                n_clusters,
                grid.lower,
                grid.upper,
                grid.gamma,
                grid.d_int,
            )
            values = mdav_kernels.noisy_cluster_values(sums, sizes, draws, grid.d_int)
            mdav_kernels.broadcast_clusters(
                labels,
                values,
                grid.lower,
                grid.upper,
                grid.gamma,
                column.integer,
                destination,
                outputs[column.name],
            )
            ledger.spend(entry)
            released[column.name] = _finish(column, outputs[column.name])
            clamped[str(column.name)] = int(count)
            _report_progress(progress, "columns", i + 1, m)
        released_codes: dict[Hashable, np.ndarray] = {}
        for i, cat in enumerate(categorical):
            em_epsilon, em_sensitivity, entry = choices[cat.name]
            ledger.check(entry.epsilon)
            if em_sensitivity > 0:
                chosen = noise.exponential_mechanism(
                    source.key("mdav_dp", "centroid-choice", str(cat.name)),
                    cat.taxonomy.cluster_quality(cat.codes, labels, n_clusters),
                    epsilon=em_epsilon,
                    sensitivity=em_sensitivity,
                )
            else:  # a one-value domain: nothing to choose
                chosen = np.zeros(n_clusters, dtype=np.int64)
            out_codes = np.empty(n_records, dtype=np.int64)
            out_codes[destination] = chosen[labels]
            ledger.spend(entry)
            released_codes[cat.name] = out_codes
            released[cat.name] = table.categorical_output(cat.name, out_codes, cat.taxonomy.domain)
            clamped[str(cat.name)] = 0
            _report_progress(progress, "columns", len(protected) + i + 1, m)
    with timer.phase("assemble"):
        result = table.rebuild(released, row_order, base)
    extra: dict[str, Any] = {}
    if metrics:
        with timer.phase("metrics"):
            extra["metrics"] = _utility_metrics(
                protected, released, {c.name: destination for c in protected}, domains
            )
            if categorical:
                _categorical_metrics(
                    extra["metrics"],
                    categorical,
                    released_codes,
                    {c.name: destination for c in categorical},
                )
    protected_names = names([c.name for c in protected] + [c.name for c in categorical])
    unprotected = [str(n) for n in table.names if n not in released]
    guarantee, level = _guarantee(
        epsilon, total, protected_names, calibration, derived, names([c.name for c in categorical])
    )
    notes = [SEEDED_NOTE] if seed is not None else []
    if calibration == "as_published":
        notes.append(
            f"calibration='as_published' uses the paper's noise scale; it was asked for "
            f"epsilon={epsilon:g} and really spends epsilon={total:.6g}"
        )
    report = Report(
        method="mdav_dp",
        parameters={
            "k": k,
            "epsilon": total,
            "epsilon_requested": epsilon,
            "calibration": calibration,
            "reference": reference
            if isinstance(reference, str)
            else np.asarray(reference, dtype=float).tolist(),
            "bounds": {str(c): list(b) for c, b in domains.items()},
            "bounds_from_data": derived,
            "n_clusters": n_clusters,
            "remainder": "last cluster",
            "shuffle": True,
            "budget_split": "equal over protected columns"
            if calibration == "l1"
            else "none (the paper's per-column scale)",
            **({"taxonomies": _taxonomy_parameters(categorical)} if categorical else {}),
        },
        epsilon=total,
        ledger=list(ledger.entries),
        guarantee=guarantee + _unprotected_note(unprotected),
        guarantee_level=level,
        protected_columns=protected_names,
        unprotected_columns=unprotected,
        clamped=clamped,
        seeded=seed is not None,
        sampler="; ".join(
            ([noise.SAMPLER_NAME] if protected else [])
            + ([noise.EM_SAMPLER_NAME] if categorical else [])
        ),
        timings=timer.timings,
        n_rows=n_records,
        notes=notes,
        extra=extra,
    )
    return Release(result, report)


def _categorical_plan(
    column: _Categorical,
    epsilon: float,
    m: int,
    n_records: int,
    k: int,
    n_clusters: int,
    calibration: str,
) -> tuple[float, float, LedgerEntry]:
    """Plan one categorical column: the exponential mechanism's ε, sensitivity, and entry.

    ``"l1"``: ``ε / m`` with the proven sensitivity ``n_c · Δq`` (SPEC §4.6).
    ``"as_published"``: the thesis code's ``ε`` with ``(n / k) · Δq``; the same
    distribution is ``ε n_c k / n`` with ``n_c · Δq``, which is what it really spends.
    """
    taxonomy = column.taxonomy
    delta = taxonomy.max_distance
    proven = n_clusters * delta
    if calibration == "l1":
        em_epsilon, em_sensitivity = epsilon / m, proven
        spent = em_epsilon
    else:
        em_epsilon, em_sensitivity = epsilon, n_records / k * delta
        exact = Fraction(epsilon) * n_clusters * k / n_records
        spent = float(exact)
        if Fraction(spent) < exact:
            spent = math.nextafter(spent, math.inf)
    v_star, t_star = taxonomy.boundary
    entry = LedgerEntry(
        step="centroid selection",
        columns=(str(column.name),),
        epsilon=spent,
        mechanism="exponential mechanism, one draw per insensitive-MDAV cluster, quality = "
        "-Σ semantic distance, candidates = the taxonomy's leaves",
        sensitivity=proven,
        noise_scale=2.0 * em_sensitivity / em_epsilon,
        sampler=noise.EM_SAMPLER_NAME,
        details={
            "n_clusters": n_clusters,
            "calibration": calibration,
            "sensitivity_rule": "n_clusters * Δq: up to n_clusters clusters change by one "
            "record, each moving its quality by at most Δq (SPEC §4.6)",
            "mechanism_epsilon": em_epsilon,
            "mechanism_sensitivity": em_sensitivity,
            "max_distance": delta,
            "candidates": len(taxonomy.domain),
            "taxonomy": taxonomy.name,
            "most_marginal": v_star,
            "farthest_from_most_marginal": t_star,
            "noise_scale_meaning": "Pr[c] ∝ exp(q(c) / noise_scale)",
        },
    )
    return em_epsilon, em_sensitivity, entry


def _guarantee(
    requested: float,
    total: float,
    protected: list[str],
    calibration: str,
    derived: bool,
    categorical: list[str],
) -> tuple[str, str]:
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
            f" calibration='as_published' asked for epsilon={requested:g} with the paper's "
            f"noise scale, which really spends epsilon={total:g}; the figure above is the "
            "real one."
        )
    return text, "proven"
