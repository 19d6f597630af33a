"""Releases: compose validation, microaggregation, noise and accounting into one call.

Every function here takes a pandas DataFrame, an Arrow table or a 2-D NumPy array and
returns a :class:`Release` whose ``data`` is of the same kind, with a :class:`Report`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast import metrics as utility
from dpfast import noise
from dpfast._validation import (
    all_finite,
    as_numeric_column,
    check_bounds,
    check_choice,
    check_columns,
    check_epsilon,
    check_int,
    check_k,
    check_seed,
    is_integer_column,
)
from dpfast.accounting import Ledger, LedgerEntry, PhaseTimer, Report, names
from dpfast.grid import Grid
from dpfast.io import TableData, as_table_data
from dpfast.microaggregation import (
    centroid_sensitivity,
    group_means,
    ir_column,
    noise_scale_steps,
)
from dpfast.perturbation import laplace_column
from dpfast.taxonomy import Taxonomy

Progress = Callable[[str, int, int], None]

SEEDED_NOTE = "reproducible — not for publication: noise was drawn from a seeded generator"


@dataclass(frozen=True)
class Release:
    """Released data and the report of how it was made.

    Attributes
    ----------
    data : pandas.DataFrame, pyarrow.Table or numpy.ndarray
        The released table, of the same kind as the input.
    report : Report
        Method, parameters, ε ledger, guarantee, clamped counts, timings.
    """

    data: Any
    report: Report


@dataclass(frozen=True)
class _Column:
    name: Hashable
    values: np.ndarray  # float64, read-only use
    integer: bool
    dtype: np.dtype[Any]


def _protected_columns(table: TableData, columns: Any) -> list[_Column]:
    selected = check_columns(columns, table.names)
    finite = table.kind == "numpy" and all_finite(table.source)
    result = []
    for name in selected:
        raw = table.column(name)
        result.append(
            _Column(
                name,
                as_numeric_column(raw, name, known_finite=finite),
                is_integer_column(raw),
                raw.dtype,
            )
        )
    return result


@dataclass(frozen=True)
class _Categorical:
    name: Hashable
    codes: np.ndarray  # int64 domain codes
    taxonomy: Taxonomy


def _split_columns(
    table: TableData, columns: Any, taxonomies: Any
) -> tuple[list[_Column], list[_Categorical]]:
    """Protected numeric columns, and categorical columns (those with a taxonomy)."""
    if taxonomies is None:
        taxonomies = {}
    if not isinstance(taxonomies, Mapping):
        raise TypeError(
            f"taxonomies must be a mapping {{column: Taxonomy}}, got {type(taxonomies).__name__}"
        )
    for name, taxonomy in taxonomies.items():
        if not isinstance(taxonomy, Taxonomy):
            raise TypeError(
                f"taxonomies[{name!r}] must be a dpfast.Taxonomy (Taxonomy.from_arx(path) or "
                f"Taxonomy.from_mapping(...)), got {type(taxonomy).__name__}"
            )
    selected = check_columns(columns, table.names)
    stray = [name for name in taxonomies if name not in selected]
    if stray:
        raise ValueError(
            f"taxonomies names column(s) {stray} that are not protected; the protected "
            f"columns are {selected}: add them to columns or drop their taxonomies"
        )
    numeric = [name for name in selected if name not in taxonomies]
    categorical = []
    for name in selected:
        if name in taxonomies:
            codes, categories = table.category_codes(name)
            codes = taxonomies[name].encode_categories(codes, categories, column=name)
            categorical.append(_Categorical(name, codes, taxonomies[name]))
    for name in numeric:
        raw = table.column(name)
        if raw.dtype == object or not (
            np.issubdtype(raw.dtype, np.number) or raw.dtype == np.bool_
        ):
            raise TypeError(
                f"column {name!r} must be numeric to be protected, got dtype {raw.dtype}; "
                "pass its taxonomy in taxonomies= to protect it as a categorical column, "
                "or leave it out of columns"
            )
    return (_protected_columns(table, numeric) if numeric else []), categorical


def _names(protected: Sequence[_Column], categorical: Sequence[_Categorical]) -> list[Hashable]:
    return [c.name for c in protected] + [c.name for c in categorical]


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


def _noise_source(seed: int | None) -> noise.NoiseSource:
    return noise.NoiseSource.secure() if seed is None else noise.NoiseSource.from_seed(seed)


def _threads(n_threads: Any, n_columns: int) -> int:
    if n_threads is None:
        return max(1, min(n_columns, os.cpu_count() or 1))
    value = check_int(n_threads, "n_threads")
    if value < 1:
        raise ValueError(f"n_threads must be >= 1 or None, got {value}")
    return value


def _inverse(permutation: np.ndarray) -> np.ndarray:
    inverse = np.empty_like(permutation)
    inverse[permutation] = np.arange(permutation.shape[0], dtype=permutation.dtype)
    return inverse


def _finish(column: _Column, released: np.ndarray) -> np.ndarray:
    """Give an integer column its dtype back (values are already rounded and in bounds)."""
    if column.integer:
        return released.astype(column.dtype)
    return released


def _utility_metrics(
    protected: Sequence[_Column],
    released: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
    domains: Mapping[Hashable, tuple[float, float]] | None,
) -> dict[str, Any]:
    """Relative error, JSD and variance variation of each protected numeric column.

    Rows are matched through the shuffle, so the relative error is record-linked.
    """
    relative: dict[str, float] = {}
    divergence: dict[str, float] = {}
    variation: dict[str, float] = {}
    for column in protected:
        original = column.values
        destination = destinations.get(column.name)
        if destination is not None and destination.shape[0] == original.shape[0]:
            aligned = np.empty_like(original)
            aligned[destination] = original
            original = aligned
        if column.integer:
            original = original.astype(column.dtype)
        out = released[column.name]
        pair = (
            domains[column.name]
            if domains is not None
            else (float(original.min()), float(original.max()))
        )
        relative[str(column.name)] = utility.column_metric(
            utility.relative_error(original, out, pair)
        )
        divergence[str(column.name)] = utility.column_metric(
            utility.jensen_shannon(original, out, pair)
        )
        variation[str(column.name)] = utility.column_metric(
            utility.variance_variation(original, out)
        )
    return {
        "warning": "computed on the original data: keep this report private, do not "
        "publish it with the release",
        "relative_error": relative,
        "jensen_shannon": divergence,
        "mean_relative_error": float(np.mean(list(relative.values()))) if relative else math.nan,
        "mean_jensen_shannon": float(np.mean(list(divergence.values()))) if relative else math.nan,
        # Numeric columns only: a categorical column has no variance.
        "variance_variation": variation,
        "mean_variance_variation": (
            float(np.mean(list(variation.values()))) if variation else math.nan
        ),
    }


def _report_progress(progress: Progress | None, phase: str, done: int, total: int) -> None:
    if progress is not None:
        progress(phase, done, total)


def _unprotected_note(unprotected: Sequence[str]) -> str:
    if not unprotected:
        return ""
    return (
        f" Column(s) {list(unprotected)} are released unchanged and are not protected by "
        "any guarantee."
    )


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


def _categorical_metrics(
    metrics: dict[str, Any],
    categorical: Sequence[_Categorical],
    released_codes: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
) -> None:
    """Add categorical columns: relative error = mean semantic distance; JSD per category."""
    for column in categorical:
        original = column.codes
        destination = destinations.get(column.name)
        if destination is not None and destination.shape[0] == original.shape[0]:
            aligned = np.empty_like(original)
            aligned[destination] = original
            original = aligned
        out = released_codes[column.name]
        m = len(column.taxonomy.domain)
        metrics["relative_error"][str(column.name)] = float(
            np.mean(column.taxonomy.distances_between(original, out))
        )
        metrics["jensen_shannon"][str(column.name)] = utility.jensen_shannon_counts(
            np.bincount(original, minlength=m).astype(np.float64),
            np.bincount(out, minlength=m).astype(np.float64),
        )
    metrics["mean_relative_error"] = float(np.mean(list(metrics["relative_error"].values())))
    metrics["mean_jensen_shannon"] = float(np.mean(list(metrics["jensen_shannon"].values())))


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
