"""Individual-ranking DP (Algorithms 1 and 2 of Sánchez et al. 2016), numeric and categorical."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._validation import (
    check_bounds,
    check_choice,
    check_epsilon,
    check_k,
    check_seed,
)
from dpfast.accounting import Ledger, LedgerEntry, PhaseTimer, Report, names
from dpfast.grid import Grid
from dpfast.io import as_table_data
from dpfast.microaggregation import (
    centroid_sensitivity,
    ir_column,
    noise_scale_steps,
)
from dpfast.release._common import (
    SEEDED_NOTE,
    Progress,
    Release,
    _Categorical,
    _categorical_metrics,
    _Column,
    _finish,
    _inverse,
    _names,
    _noise_source,
    _report_progress,
    _split_columns,
    _threads,
    _unprotected_note,
    _utility_metrics,
)
from dpfast.taxonomy import Taxonomy


def _categorical_entry(
    column: _Categorical, epsilon: float, n_groups: int, sensitivity: str
) -> LedgerEntry:
    taxonomy = column.taxonomy
    delta = taxonomy.max_distance
    effective = delta if sensitivity == "paper" else n_groups * delta
    v_star, t_star = taxonomy.boundary
    rule = (
        "paper: Δq = max semantic distance per group (heuristic: no proof covers the "
        "groups shifting when one record changes, SPEC §3.4)"
        if sensitivity == "paper"
        else "proven: n_groups * Δq (each group's quality moves by at most Δq)"
    )
    return LedgerEntry(
        step="centroid selection",
        columns=(str(column.name),),
        epsilon=epsilon,
        mechanism="exponential mechanism, one draw per rank group, quality = -Σ semantic "
        "distance, candidates = the taxonomy's leaves",
        sensitivity=effective,
        noise_scale=2.0 * effective / epsilon,
        sampler=noise.EM_SAMPLER_NAME,
        details={
            "n_groups": n_groups,
            "sensitivity_rule": rule,
            "max_distance": delta,
            "candidates": len(taxonomy.domain),
            "taxonomy": taxonomy.name,
            "most_marginal": v_star,
            "farthest_from_most_marginal": t_star,
            "order": "semantic distance to the most marginal value, ties by label",
            "noise_scale_meaning": "Pr[c] ∝ exp(q(c) / noise_scale)",
        },
    )


def _categorical_group_codes(
    column: _Categorical, k: int, key: np.ndarray, entry: LedgerEntry
) -> np.ndarray:
    taxonomy = column.taxonomy
    n_groups = column.codes.shape[0] // k
    if entry.sensitivity == 0:  # a one-value domain: nothing to choose
        return np.zeros(n_groups, dtype=np.int64)
    chosen = noise.exponential_mechanism_sorted_groups(
        key,
        taxonomy.rank_counts(column.codes),
        k,
        taxonomy.rank_distance_matrix(),
        epsilon=entry.epsilon,
        sensitivity=entry.sensitivity,
    )
    return np.asarray(taxonomy.order_codes)[chosen]  # type: ignore[no-any-return]


def ir_dp(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    sensitivity: str = "paper",
    columns: Sequence[Hashable] | None = None,
    linkage: str = "records",
    shuffle: bool = True,
    seed: int | None = None,
    n_threads: int | None = None,
    metrics: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Differential privacy via individual-ranking microaggregation (Algorithm 1).

    Each protected column is clamped to its public bounds, sorted, and cut into rank groups
    of ``k`` (the remainder joins the last group). Every row gets its group's mean plus one
    discrete Laplace draw shared by the whole group, with scale ``m * Δ / (k * ε)`` for
    ``m`` protected columns of domain width ``Δ``: ``k`` times less noise than plain
    Laplace. Integer columns are rounded after the noise.

    Categorical columns (those given a taxonomy) are ordered by the taxonomy's
    data-independent order (semantic distance to the most marginal value), cut into rank
    groups the same way, and every group gets one value drawn from the taxonomy's leaves by
    the exponential mechanism with quality ``-Σ semantic distance`` to the group's values
    (Algorithm 2). The budget is split equally over numeric and categorical columns.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table or 2-D numpy.ndarray
        The table. It is never modified. NumPy columns are named by integer position.
    k : int
        Group size, ``1 <= k <= n_rows``.
    epsilon : float
        Total privacy budget, split equally over the protected columns.
    bounds : mapping
        Public ``{column: (lower, upper)}`` for every protected column. Values outside are
        clamped (the report counts them). ``"data"`` derives them from the data: not
        private, warns with :class:`~dpfast.exceptions.PrivacyLeakWarning`. May be omitted
        when every protected column is categorical.
    taxonomies : mapping, optional
        ``{column: Taxonomy}``: the protected categorical columns and their taxonomies
        (:class:`~dpfast.taxonomy.Taxonomy`). Every value must be a leaf of its taxonomy.
        The released column keeps its kind (strings, or categories for pandas
        categoricals and Arrow dictionaries).
    sensitivity : {"paper", "proven"}
        Sensitivity of the categorical exponential mechanism. ``"paper"`` (default) uses
        ``Δq``, the taxonomy's largest distance, per group as Sánchez et al. (2016) do; no
        proof covers it, so the report labels the guarantee *heuristic*. ``"proven"`` uses
        ``n_groups * Δq``: provable, but far flatter.
    columns : sequence, optional
        Columns to protect; ``None`` protects every column. Others pass through unchanged.
    linkage : {"records", "columns"}
        ``"records"`` (the paper's release) keeps each row's values together; its guarantee
        is the paper's claim, which no proof covers for two or more columns.
        ``"columns"`` shuffles each protected column independently: provably ε-DP, but rows
        are no longer linked across columns.
    shuffle : bool
        Release rows in a random order (default). Must stay on for ``linkage="columns"``.
    seed : int, optional
        Draw noise from a seeded generator: reproducible, not for publication.
    n_threads : int, optional
        Threads over columns (default: one per core). Results do not depend on it.
    metrics : bool
        Add relative error, Jensen-Shannon divergence and variance variation per column
        to the report (``report.extra["metrics"]``). Costs no budget: the report is for
        the data holder and must then not be published with the data.
    progress : callable, optional
        Called as ``progress(phase, done, total)``.

    Returns
    -------
    Release

    Raises
    ------
    TypeError
        Wrong argument or column types.
    ValueError
        Bad values: NaN or inf in a protected column, ``k`` outside ``[1, n]``,
        ``epsilon <= 0``, missing or inverted bounds, unknown columns, an empty table,
        categorical values missing from their taxonomy
        (:class:`~dpfast.taxonomy.TaxonomyError`).

    References
    ----------
    Sánchez, Domingo-Ferrer, Martínez, Soria-Comas. Utility-preserving differentially
    private data releases via individual ranking microaggregation. Information Fusion 30,
    2016. arXiv:1512.02897.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"age": [23, 35, 41, 52, 67, 30]})
    >>> release = ir_dp(table, k=3, epsilon=1.0, bounds={"age": (17, 90)}, seed=7)
    >>> release.data.shape, release.report.epsilon
    ((6, 1), 1.0)
    >>> release.report.ledger[0].noise_scale > 73 / 3
    True
    >>> from dpfast.taxonomy import Taxonomy
    >>> jobs = Taxonomy.from_mapping({"*": {"Technical": ["Tech-support", "Craft-repair"],
    ...                                     "Other": ["Sales", "Adm-clerical"]}})
    >>> table = table.assign(job=["Sales", "Tech-support", "Sales", "Craft-repair",
    ...                           "Adm-clerical", "Sales"])
    >>> release = ir_dp(table, k=3, epsilon=2.0, bounds={"age": (17, 90)},
    ...                 taxonomies={"job": jobs}, seed=7)
    >>> [entry.epsilon for entry in release.report.ledger], release.report.guarantee_level
    ([1.0, 1.0], 'heuristic')
    >>> set(release.data["job"]) <= set(jobs.domain)
    True
    """
    timer = PhaseTimer()
    with timer.phase("validate"):
        table = as_table_data(data)
        k = check_k(k, table.n_rows)
        epsilon = check_epsilon(epsilon)
        linkage = check_choice(linkage, "linkage", ("records", "columns"))
        if not isinstance(shuffle, (bool, np.bool_)):
            raise TypeError(f"shuffle must be True or False, got {shuffle!r}")
        if linkage == "columns" and not shuffle:
            raise ValueError(
                "linkage='columns' shuffles every protected column; drop shuffle=False"
            )
        seed = check_seed(seed)
        em_sensitivity = check_choice(sensitivity, "sensitivity", ("paper", "proven"))
        protected, categorical = _split_columns(table, columns, taxonomies)
        if protected or bounds is not None:
            domains, derived = check_bounds(
                bounds, [c.name for c in protected], {c.name: c.values for c in protected}
            )
        else:
            domains, derived = {}, False
        threads = _threads(n_threads, len(protected) + len(categorical))

    n_records = table.n_rows
    n_groups = n_records // k
    m = len(protected) + len(categorical)
    epsilon_column = epsilon / m
    source = _noise_source(seed)
    ledger = Ledger(epsilon)
    plans: dict[Hashable, tuple[Grid, int, LedgerEntry]] = {}
    with timer.phase("plan"):
        for column in protected:
            lower, upper = domains[column.name]
            grid = Grid.for_column(lower, upper, n_records, k)
            list_sensitivity = centroid_sensitivity(grid, n_records, k)
            steps = noise_scale_steps(list_sensitivity, epsilon_column) if grid.d_int else 0
            entry = LedgerEntry(
                step="centroid noise",
                columns=(str(column.name),),
                epsilon=epsilon_column,
                mechanism="discrete Laplace, one draw per rank group",
                sensitivity=float(list_sensitivity) * grid.gamma,
                noise_scale=steps * grid.gamma,
                sampler=noise.SAMPLER_NAME,
                details={
                    "n_groups": n_groups,
                    "nominal_sensitivity": (upper - lower) / k,
                    "grid_step": grid.gamma,
                    "grid_rounding_term": n_groups * grid.gamma,
                    "scale_in_grid_steps": steps,
                },
            )
            ledger.check(math.fsum(p[2].epsilon for p in plans.values()) + epsilon_column)
            plans[column.name] = (grid, steps, entry)
        categorical_plans: dict[Hashable, LedgerEntry] = {}
        for cat in categorical:
            ledger.check(
                math.fsum(p[2].epsilon for p in plans.values())
                + math.fsum(e.epsilon for e in categorical_plans.values())
                + epsilon_column
            )
            categorical_plans[cat.name] = _categorical_entry(
                cat, epsilon_column, n_groups, em_sensitivity
            )

    with timer.phase("shuffle"):
        row_order: np.ndarray | None = None
        destinations: dict[Hashable, np.ndarray] = {}
        empty = np.empty(0, dtype=np.int64)
        if shuffle:
            # The inverse of a uniform permutation is uniform, so the output position of
            # every row is drawn directly; the row order is only needed for the columns
            # that are copied.
            shared = noise.permutation(source.key("ir_dp", "row-order"), n_records)
            for name in _names(protected, categorical):
                destinations[name] = shared
            if len(protected) + len(categorical) < len(table.names):
                row_order = _inverse(shared)
        if linkage == "columns":
            for name in _names(protected, categorical):
                destinations[name] = noise.permutation(
                    source.key("ir_dp", "column-order", str(name)), n_records
                )

    released: dict[Hashable, np.ndarray] = {}
    clamped: dict[str, int] = {}
    thread_seconds = {"noise": 0.0, "microaggregation": 0.0}
    if categorical:
        thread_seconds["exponential mechanism"] = 0.0
    with timer.phase("columns"):
        outputs, base = table.output_columns([c.name for c in protected])

        def run_categorical(cat: _Categorical) -> tuple[_Categorical, np.ndarray, float, float]:
            start = time.perf_counter()
            group_codes = _categorical_group_codes(
                cat,
                k,
                source.key("ir_dp", "centroid-choice", str(cat.name)),
                categorical_plans[cat.name],
            )
            middle = time.perf_counter()
            out = cat.taxonomy.broadcast_rank_groups(
                cat.codes, k, group_codes, destinations.get(cat.name)
            )
            return cat, out, middle - start, time.perf_counter() - middle

        def run(column: _Column) -> tuple[_Column, int, float, float]:
            grid, steps, _ = plans[column.name]
            start = time.perf_counter()
            # columns already run in parallel: one thread per draw request then
            draws = noise.discrete_laplace(
                source.key("ir_dp", "centroid-noise", str(column.name)),
                steps,
                n_groups,
                n_threads=1 if threads > 1 else None,
            )
            middle = time.perf_counter()
            count = ir_column(
                column.values,
                grid,
                k,
                draws,
                destinations.get(column.name, empty),
                column.integer,
                outputs[column.name],
            )
            return column, count, middle - start, time.perf_counter() - middle

        released_codes: dict[Hashable, np.ndarray] = {}
        with ThreadPoolExecutor(max_workers=threads) as pool:
            categorical_runs = pool.map(run_categorical, categorical)
            done = 0
            for column, count, noise_s, ranking_s in pool.map(run, protected):
                ledger.spend(plans[column.name][2])
                released[column.name] = _finish(column, outputs[column.name])
                clamped[str(column.name)] = count
                thread_seconds["noise"] += noise_s
                thread_seconds["microaggregation"] += ranking_s
                done += 1
                _report_progress(progress, "columns", done, m)
            for cat, codes, choice_s, ranking_s in categorical_runs:
                ledger.spend(categorical_plans[cat.name])
                released_codes[cat.name] = codes
                released[cat.name] = table.categorical_output(cat.name, codes, cat.taxonomy.domain)
                clamped[str(cat.name)] = 0
                thread_seconds["exponential mechanism"] += choice_s
                thread_seconds["microaggregation"] += ranking_s
                done += 1
                _report_progress(progress, "columns", done, m)

    with timer.phase("assemble"):
        result = table.rebuild(released, row_order, base, reindex=shuffle)
        _report_progress(progress, "assemble", 1, 1)
    extra = {}
    if metrics:
        with timer.phase("metrics"):
            extra["metrics"] = _utility_metrics(protected, released, destinations, domains)
            if categorical:
                _categorical_metrics(extra["metrics"], categorical, released_codes, destinations)

    protected_names = names([c.name for c in protected] + [c.name for c in categorical])
    unprotected = [str(n) for n in table.names if n not in released]
    guarantee, level = _ir_dp_guarantee(
        epsilon, epsilon_column, protected_names, linkage, shuffle, derived
    )
    if categorical:
        guarantee, level = _categorical_guarantee(
            guarantee, level, names([c.name for c in categorical]), em_sensitivity
        )
    parameters: dict[str, Any] = {}
    if categorical:
        parameters = {
            "sensitivity": em_sensitivity,
            "taxonomies": {
                str(c.name): {"name": c.taxonomy.name, "leaves": len(c.taxonomy.domain)}
                for c in categorical
            },
        }
    sampler = noise.SAMPLER_NAME
    if categorical:
        sampler = (
            noise.EM_SAMPLER_NAME
            if not protected
            else f"{noise.SAMPLER_NAME}; {noise.EM_SAMPLER_NAME}"
        )
    notes = []
    if seed is not None:
        notes.append(SEEDED_NOTE)
    report = Report(
        method="ir_dp",
        parameters={
            "k": k,
            "epsilon": epsilon,
            "linkage": linkage,
            "shuffle": bool(shuffle),
            "bounds": {str(c): list(b) for c, b in domains.items()},
            "bounds_from_data": derived,
            "remainder": "last group",
            "budget_split": "equal over protected columns",
            **parameters,
        },
        epsilon=epsilon,
        ledger=list(ledger.entries),
        guarantee=guarantee + _unprotected_note(unprotected),
        guarantee_level=level,
        protected_columns=protected_names,
        unprotected_columns=unprotected,
        clamped=clamped,
        seeded=seed is not None,
        sampler=sampler,
        timings={
            **timer.timings,
            **{f"{phase} (thread seconds)": seconds for phase, seconds in thread_seconds.items()},
        },
        n_rows=n_records,
        notes=notes,
        extra=extra,
    )
    return Release(result, report)


def _categorical_guarantee(
    guarantee: str, level: str, columns: list[str], sensitivity: str
) -> tuple[str, str]:
    if level == "none":
        return guarantee, level
    if sensitivity == "proven":
        return (
            guarantee + f" Categorical column(s) {columns}: each rank group's value is drawn "
            "by the exponential mechanism with sensitivity n_groups * Δq (proven).",
            level,
        )
    if guarantee.startswith("as published: "):
        guarantee = "heuristic and as published: " + guarantee.removeprefix("as published: ")
    else:
        guarantee = "heuristic: " + guarantee
    return (
        guarantee + f" Categorical column(s) {columns} use the paper's "
        "exponential-mechanism sensitivity Δq per rank group (sensitivity='paper'); no proof "
        "covers the groups shifting when one record changes (SPEC §3.4), so their share of "
        "epsilon is heuristic. Use sensitivity='proven' (n_groups * Δq) for a proven bound.",
        "heuristic",
    )


def _ir_dp_guarantee(
    epsilon: float,
    epsilon_column: float,
    protected: list[str],
    linkage: str,
    shuffle: bool,
    derived: bool,
) -> tuple[str, str]:
    bounded = (
        "bounded DP: neighbouring tables differ in one record's values, and the number of "
        "rows is public"
    )
    if derived:
        return (
            "NOT differentially private: the bounds were derived from the data "
            "(bounds='data'), so the noise scale depends on the data.",
            "none",
        )
    if linkage == "columns":
        return (
            f"{epsilon:g}-differential privacy ({bounded}) for columns {protected}: each "
            f"column is an independently shuffled list of noisy centroids spending "
            f"{epsilon_column:g}; rows are not linked across these columns.",
            "proven",
        )
    if len(protected) == 1 and shuffle:
        return (
            f"{epsilon:g}-differential privacy ({bounded}) for column {protected}: with one "
            "protected column and rows in random order the release is equivalent to the "
            "noisy centroid list.",
            "proven",
        )
    why = (
        "which rows share a rank group in each column"
        if len(protected) > 1
        else "which rows share a rank group (rows are not shuffled)"
    )
    return (
        f"as published: {epsilon:g}-differential privacy as claimed by Sánchez et al. (2016) "
        f"({bounded}). Each column's list of noisy centroids is {epsilon_column:g}-DP, but the "
        f"record-linked release also shows {why}, and no proof covers that pattern "
        "(see 'Privacy model and caveats' in the dpfast README). Use linkage='columns' for a "
        "proven guarantee.",
        "as_published",
    )
