"""Individual-ranking DP (Algorithms 1 and 2 of Sánchez et al. 2016), numeric and categorical.

:func:`ir_dp` reads top to bottom as the release skeleton: validate the arguments, plan
each column's grid, noise scale and ledger entry, draw the row and column orders and
every column's noise and groups (numeric columns: :mod:`._numeric`; categorical columns:
:mod:`._categorical`), assemble the table, and report.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from dpfast import noise
from dpfast._release import (
    CategoricalColumn,
    NumericColumn,
    Progress,
    Release,
    Run,
    check_unprotected,
    column_names,
    column_threads,
    grid_noise_entry,
    inverse_permutation,
    noise_source,
    option,
    split_columns,
    taxonomy_parameters,
    warn_unproven,
)
from dpfast._release.dispatch import is_dask_frame, is_spark_frame, on_dask, on_spark
from dpfast._validation import (
    check_bool,
    check_bounds,
    check_choice,
    check_em_epsilon,
    check_epsilon,
    check_k,
    check_seed,
)
from dpfast.accounting import (
    GuaranteeLevel,
    Ledger,
    LedgerEntry,
    UnprotectedPolicy,
    names,
    scale_steps,
)
from dpfast.methods.ir_dp._categorical import (
    categorical_entry,
    categorical_guarantee,
    draw_categorical,
)
from dpfast.methods.ir_dp._numeric import (
    centroid_sensitivity,
    draw_numeric,
    grid_ranks,
    numeric_guarantee,
)
from dpfast.partitions.grid import Grid
from dpfast.taxonomy import Taxonomy

Linkage = Literal["records", "columns"]
Sensitivity = Literal["paper", "proven"]


def ir_dp(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    sensitivity: Sensitivity = "proven",
    columns: Sequence[Hashable] | None = None,
    unprotected: UnprotectedPolicy = "drop",
    linkage: Linkage = "columns",
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
    data : pandas.DataFrame, pyarrow.Table, 2-D numpy.ndarray, Spark or Dask DataFrame
        The table. It is never modified. NumPy columns are named by integer position. A
        Spark DataFrame runs on Spark (``linkage="columns"``, ``unprotected="drop"``, no
        metrics) and the release's data is a Spark DataFrame computed on the executors,
        the same rows for a seed (docs/engines.md, "Spark").
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
    sensitivity : {"proven", "paper"}
        Sensitivity of the categorical exponential mechanism. ``"proven"`` (default) uses
        ``n_groups * Δq``: provable, but flat. ``"paper"`` uses ``Δq``, the taxonomy's
        largest distance, per group as Sánchez et al. (2016) do: an explicit opt-in that no
        proof covers; it warns with :class:`~dpfast.exceptions.UnprovenReleaseWarning` and
        the report labels the guarantee *heuristic*.
    columns : sequence, optional
        Columns to protect; ``None`` protects every column.
    unprotected : {"drop", "shuffle", "keep"}
        What to do with the columns not protected. ``"drop"`` (default) leaves them out.
        ``"shuffle"`` releases them unchanged in a random row order of their own: they are
        not protected, and the guarantee becomes ``"protected_only"``. ``"keep"`` keeps
        them in their rows, where they show which rows share a rank group: the release is
        then NOT differentially private (level ``"none"``).
    linkage : {"columns", "records"}
        ``"columns"`` (default) shuffles each protected column independently: provably
        ε-DP, but rows are not linked across columns. ``"records"`` (the paper's release)
        keeps each row's values together: an explicit opt-in that no proof covers for two
        or more columns (or with ``shuffle=False``); it warns with
        :class:`~dpfast.exceptions.UnprovenReleaseWarning` and the report labels it
        ``"as_published"``. For linked records with a proof, use :func:`dpfast.mdav_dp`.
    shuffle : bool
        Release rows in a random order (default). Must stay on for ``linkage="columns"``.
    seed : int, optional
        Draw noise from a seeded generator: reproducible, not for publication.
    n_threads : int, optional
        Threads over columns (default: one per core). Results do not depend on it.
    metrics : bool
        Add relative error, Jensen-Shannon divergence and variance variation per column
        to the private report (``release.private.metrics``), which must not be published.
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
    ([1.0, 1.0], 'proven')
    >>> set(release.data["job"]) <= set(jobs.domain)
    True
    """
    if is_spark_frame(data):  # runs on Spark, docs/engines.md
        return on_spark("ir_dp", locals())  # type: ignore[no-any-return]
    if is_dask_frame(data):  # runs on Dask, docs/engines.md
        return on_dask("ir_dp", locals())  # type: ignore[no-any-return]
    run = Run("ir_dp", data, progress)
    with run.phase("validate"):
        args = _validate(
            run, k, epsilon, bounds, taxonomies, sensitivity, columns, linkage, shuffle, seed
        )
        run.policy = _policy(check_unprotected(unprotected), args.linkage)
        threads = column_threads(n_threads, len(args.numeric) + len(args.categorical))
        guarantee = _guarantee(args)
        if guarantee[1] in ("as_published", "heuristic"):
            warn_unproven(guarantee[0])
    source = noise_source(args.seed)
    with run.phase("plan"):
        plan = _plan(args, run.table.n_rows)
    with run.phase("shuffle"):
        row_order = _draw_orders(run, args, source)
    with run.phase("columns"):
        base = _draw_columns(run, args, plan, source, threads, metrics)
    result = run.assemble(row_order, base, reindex=args.shuffle, source=source)
    return run.finish(
        result,
        parameters=_parameters(args),
        guarantee=guarantee,
        ledger=plan.ledger,
        seed=args.seed,
        sampler=_sampler(args),
        metrics=run.metrics(args.numeric, args.categorical, args.domains) if metrics else None,
        groups=None if args.linkage == "columns" else "rank group",
        domains=args.domains,
    )


def _policy(policy: UnprotectedPolicy, linkage: Linkage) -> UnprotectedPolicy:
    """Under ``linkage="columns"`` no row is kept whole: ``"keep"`` means ``"shuffle"``."""
    return "shuffle" if policy == "keep" and linkage == "columns" else policy


@dataclass(frozen=True)
class _Arguments:
    k: int
    epsilon: float
    linkage: Linkage
    shuffle: bool
    seed: int | None
    sensitivity: Sensitivity
    numeric: list[NumericColumn]
    categorical: list[CategoricalColumn]
    domains: dict[Hashable, tuple[float, float]]
    derived: bool

    @property
    def epsilon_column(self) -> float:
        """The equal share of ε of each protected column."""
        return self.epsilon / (len(self.numeric) + len(self.categorical))


def _validate(
    run: Run,
    k: Any,
    epsilon: Any,
    bounds: Any,
    taxonomies: Any,
    sensitivity: Any,
    columns: Any,
    linkage: Any,
    shuffle: Any,
    seed: Any,
) -> _Arguments:
    table = run.table
    k = check_k(k, table.n_rows)
    epsilon = check_epsilon(epsilon)
    linkage = check_choice(linkage, "linkage", ("records", "columns"))
    shuffle = check_bool(shuffle, "shuffle")
    if linkage == "columns" and not shuffle:
        raise ValueError(
            f"{option('linkage', 'columns')} shuffles every protected column; "
            f"drop {option('shuffle', False)} or choose {option('linkage', 'records')}"
        )
    seed = check_seed(seed)
    sensitivity = check_choice(sensitivity, "sensitivity", ("paper", "proven"))
    numeric, categorical = split_columns(table, columns, taxonomies)
    domains: dict[Hashable, tuple[float, float]] = {}
    derived = False
    if numeric or bounds is not None:
        domains, derived = check_bounds(
            bounds, [c.name for c in numeric], {c.name: c.values for c in numeric}
        )
    return _Arguments(
        k,
        epsilon,
        cast(Linkage, linkage),
        shuffle,
        seed,
        cast(Sensitivity, sensitivity),
        numeric,
        categorical,
        domains,
        derived,
    )


@dataclass(frozen=True)
class _Plan:
    ledger: Ledger
    grids: dict[Hashable, tuple[Grid, int]]
    entries: dict[Hashable, LedgerEntry]


def _plan(args: _Arguments, n_records: int) -> _Plan:
    plan = _Plan(Ledger(args.epsilon), {}, {})
    n_groups = n_records // args.k
    share, m = args.epsilon_column, len(args.numeric) + len(args.categorical)
    for column in args.numeric:
        lower, upper = args.domains[column.name]
        grid = Grid.for_column(lower, upper, n_records, args.k)
        list_sensitivity = centroid_sensitivity(grid, n_records, args.k)
        what = f"column {column.name!r}"
        steps = scale_steps(list_sensitivity, share, what=what, shares=m) if grid.d_int else 0
        plan.grids[column.name] = (grid, steps)
        plan.entries[column.name] = plan.ledger.plan(
            grid_noise_entry(
                column,
                step="centroid noise",
                epsilon=share,
                mechanism="discrete Laplace, one draw per rank group",
                grid=grid,
                sensitivity=list_sensitivity,
                steps=steps,
                details={
                    "n_groups": n_groups,
                    "nominal_sensitivity": (upper - lower) / args.k,
                    "grid_rounding_term": n_groups * grid.gamma,
                },
            )
        )
    for cat in args.categorical:
        check_em_epsilon(share, n_records, what=f"column {cat.name!r}", shares=m)
        entry = categorical_entry(cat, share, n_groups, args.sensitivity)
        plan.entries[cat.name] = plan.ledger.plan(entry)
    return plan


def _draw_orders(run: Run, args: _Arguments, source: noise.NoiseSource) -> np.ndarray | None:
    """Draw the shared row order of record-linked rows; return it for the copied columns.

    Output row ``r`` holds input row ``order[r]``. Under ``linkage="columns"`` each column
    draws its own order of ranks while it is released (:func:`_column_order`), so only one
    order per thread is in memory at a time.
    """
    if not args.shuffle or args.linkage == "columns":
        return None
    protected = column_names(args.numeric, args.categorical)
    order = noise.permutation(source.key("ir_dp", "row-order"), run.table.n_rows)
    destination = inverse_permutation(order)
    run.destinations.update({name: destination for name in protected})
    if run.policy == "keep" and len(protected) < len(run.table.names):
        return order
    return None


def _column_order(
    run: Run, args: _Arguments, source: noise.NoiseSource, name: Hashable
) -> np.ndarray | None:
    """Return a column's own order of ranks under ``linkage="columns"``, else ``None``.

    Output row ``r`` gets the group value of rank ``order[r]``. Record-linked columns are
    placed by the rows' shared destinations instead.
    """
    if args.linkage != "columns":
        return None
    return noise.permutation(source.key("ir_dp", "column-order", str(name)), run.table.n_rows)


def _match_ranks(run: Run, name: Hashable, ranks: np.ndarray, order: np.ndarray) -> None:
    """For the metrics: match each released value to an original row of the same rank.

    ``ranks`` is the stable order of the column's rows; row ``ranks[p]`` has rank ``p``,
    whose value output row ``inverse(order)[p]`` holds.
    """
    destination = np.empty_like(order)
    destination[ranks] = inverse_permutation(order)
    run.destinations[name] = destination


def _draw_columns(
    run: Run,
    args: _Arguments,
    plan: _Plan,
    source: noise.NoiseSource,
    threads: int,
    metrics: bool,
) -> Any:
    """Draw and keep every protected column, in parallel over columns; spend as they end."""
    outputs, base = run.table.output_columns([c.name for c in args.numeric])
    seconds = {"noise": 0.0, "microaggregation": 0.0}
    if args.categorical:
        seconds["exponential mechanism"] = 0.0
    empty = np.empty(0, dtype=np.int64)
    total = len(args.numeric) + len(args.categorical)

    def numeric(column: NumericColumn) -> tuple[int, float, float]:
        order = _column_order(run, args, source, column.name)
        grid, steps = plan.grids[column.name]
        if metrics and order is not None:
            _match_ranks(run, column.name, grid_ranks(column.values, grid), order)
        destination = run.destinations.get(column.name, empty)
        out = outputs[column.name]
        return draw_numeric(column, args.k, grid, steps, source, order, destination, out, threads)

    def categorical(cat: CategoricalColumn) -> tuple[np.ndarray, float, float]:
        order = _column_order(run, args, source, cat.name)
        if metrics and order is not None:
            _match_ranks(run, cat.name, cat.taxonomy.rank_order(cat.codes), order)
        destination = run.destinations.get(cat.name)
        return draw_categorical(cat, args.k, plan.entries[cat.name], source, order, destination)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        categorical_runs = pool.map(categorical, args.categorical)
        done = 0
        for column, (count, noise_s, ranking_s) in zip(
            args.numeric, pool.map(numeric, args.numeric), strict=True
        ):
            plan.ledger.spend(plan.entries[column.name])
            run.keep(column, outputs[column.name], count)
            seconds["noise"] += noise_s
            seconds["microaggregation"] += ranking_s
            done += 1
            run.tick("columns", done, total)
        for cat, (codes, choice_s, ranking_s) in zip(
            args.categorical, categorical_runs, strict=True
        ):
            plan.ledger.spend(plan.entries[cat.name])
            run.keep_codes(cat, codes, clamped=True)
            seconds["exponential mechanism"] += choice_s
            seconds["microaggregation"] += ranking_s
            done += 1
            run.tick("columns", done, total)
    run.timings_extra.update({f"{p} (thread seconds)": s for p, s in seconds.items()})
    return base


def _parameters(args: _Arguments) -> dict[str, Any]:
    parameters: dict[str, Any] = {
        "k": args.k,
        "epsilon": args.epsilon,
        "linkage": args.linkage,
        "shuffle": bool(args.shuffle),
        "bounds": {str(c): list(b) for c, b in args.domains.items()},
        "bounds_from_data": args.derived,
        "remainder": "last group",
        "budget_split": "equal over protected columns",
    }
    if args.categorical:
        parameters["sensitivity"] = args.sensitivity
        parameters["taxonomies"] = taxonomy_parameters(args.categorical)
    return parameters


def _sampler(args: _Arguments) -> str:
    if not args.categorical:
        return noise.SAMPLER_NAME
    if not args.numeric:
        return noise.EM_SAMPLER_NAME
    return f"{noise.SAMPLER_NAME}; {noise.EM_SAMPLER_NAME}"


def _guarantee(args: _Arguments) -> tuple[str, GuaranteeLevel]:
    protected = names(column_names(args.numeric, args.categorical))
    guarantee, level = numeric_guarantee(
        args.epsilon, args.epsilon_column, protected, args.linkage, args.shuffle, args.derived
    )
    if args.categorical:
        categorical = names([c.name for c in args.categorical])
        guarantee, level = categorical_guarantee(guarantee, level, categorical, args.sensitivity)
    return guarantee, level
