"""Individual-ranking DP (Algorithms 1 and 2 of Sánchez et al. 2016), numeric and categorical.

:func:`ir_dp` reads top to bottom as the release skeleton: validate the arguments, plan
each column's grid, noise scale and ledger entry, draw the row and column orders and
every column's noise and groups (numeric columns: :mod:`._numeric`; categorical columns:
:mod:`._categorical`), assemble the table, and report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._kernels import ranking
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
    over_bounds,
    taxonomy_parameters,
    transform_parameters,
    warn_uncorrected,
    warn_unproven,
    weight_parameters,
)
from dpfast.accounting import GuaranteeLevel, LedgerEntry, UnprotectedPolicy, names
from dpfast.dataflow.on_bound import RankGroupValues, noiseless_group_values, rank_groups_on_bound
from dpfast.dataflow.writes import WriteGroups, WriteLinked
from dpfast.engines import BoundCount
from dpfast.engines.base import Engine
from dpfast.exceptions import DPFastValueError
from dpfast.methods.ir_dp._arguments import (
    Arguments,
    Linkage,
    Plan,
    Sensitivity,
    Transform,
    check_linkage,
    make_plan,
    policy,
    validate,
)
from dpfast.methods.ir_dp._categorical import categorical_guarantee, group_codes
from dpfast.methods.ir_dp._forecast import data_forecast, release_forecast
from dpfast.methods.ir_dp._forecast import ir_dp_data_forecast as ir_dp_data_forecast
from dpfast.methods.ir_dp._forecast import ir_dp_forecast as ir_dp_forecast
from dpfast.methods.ir_dp._numeric import numeric_guarantee
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups, Remainder
from dpfast.steps import group_sums, rank_counts
from dpfast.taxonomy import Taxonomy


def ir_dp(
    data: Any,
    *,
    k: int,
    epsilon: float,
    bounds: Mapping[Hashable, tuple[float, float] | DPBounds] | str | None = None,
    taxonomies: Mapping[Hashable, Taxonomy] | None = None,
    sensitivity: Sensitivity = "proven",
    columns: Sequence[Hashable] | None = None,
    unprotected: UnprotectedPolicy = "drop",
    linkage: Linkage = "columns",
    shuffle: bool = True,
    n_threads: int | None = None,
    remainder: Remainder = "middle",
    epsilon_weights: Mapping[Hashable, float] | None = None,
    transforms: Mapping[Hashable, Transform] | None = None,
    **options: Unpack[DPMetricsReleaseOptions],
) -> Release:
    """Differential privacy via individual-ranking microaggregation (Algorithm 1).

    Each protected column is clamped to its public bounds, sorted, and cut into rank groups
    of ``k``, one of which also holds the ``n mod k`` values left over (``remainder``: the
    middle group by default). Every row gets its group's mean plus one
    discrete Laplace draw shared by the whole group, with scale ``m * Δ / (k * ε)`` for
    ``m`` protected columns of domain width ``Δ``: ``k`` times less noise than plain
    Laplace. Integer columns are rounded after the noise.

    Categorical columns (those given a taxonomy) are ordered by the taxonomy's
    data-independent order (semantic distance to the most marginal value), cut into rank
    groups the same way, and every group gets one value drawn from the taxonomy's leaves by
    the exponential mechanism with quality ``-Σ semantic distance`` to the group's values
    (Algorithm 2). The budget is split equally over numeric and categorical columns, or
    by ``epsilon_weights``.

    A skewed numeric column may take a public monotone transform (``transforms``): its
    values are ranked, grouped and noised on the ``log1p`` (or ``asinh``) scale, with the
    bounds in the data's units, and each released value is mapped back and corrected for
    the noise's mean (docs/privacy.md#transforms).

    Guarantee: with the defaults (``linkage="columns"``, ``sensitivity="proven"``, public
    bounds) the release is proven ε-differentially private (bounded DP: neighbouring
    tables differ in one record's values, and the number of rows is public; report level
    ``"proven"``, ``"protected_only"`` with ``unprotected="shuffle"``). The paper's
    record-linked release (``linkage="records"``) is labelled ``"as_published"`` and
    ``sensitivity="paper"`` ``"heuristic"``: no proof covers them. ``bounds="data"`` and
    ``unprotected="keep"`` are NOT differentially private (level ``"none"``).

    Parameters
    ----------
    data : table, pyarrow.dataset.Dataset, Parquet path or glob, Spark or Dask DataFrame
        The table (pandas, polars, Arrow, 2-D NumPy), never modified; NumPy columns are
        named by integer position. A dataset or path is released out of core, a Spark or
        Dask DataFrame on its cluster: the same release for a seed, with every option
        but ``metrics`` and ``risk`` (docs/engines.md).
    k : int
        Group size, ``1 <= k <= n_rows``.
    epsilon : float
        Total privacy budget, split equally over the protected columns (or by
        ``epsilon_weights``).
    bounds : mapping
        Public ``{column: (lower, upper)}`` for every protected column. Values outside are
        clamped (the report counts them). ``"data"`` derives them from the data: not
        private, warns with :class:`~dpfast.exceptions.PrivacyLeakWarning`. May be omitted
        when every protected column is categorical.
        A :class:`~dpfast.DPBounds` in place of a column's pair chooses its clamping bounds
        with DP inside a public outer range, for a share of the column's ε (its own
        ledger entry; the release stays proven; docs/privacy.md#bounds-chosen-with-dp).
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
        then NOT differentially private (level ``"none"``). ``"keep"`` needs
        ``linkage="records"``: under ``linkage="columns"`` no output row is an input
        record, so it is refused.
    linkage : {"columns", "records"}
        ``"columns"`` (default) shuffles each protected column independently: provably
        ε-DP, but rows are not linked across columns. ``"records"`` (the paper's release)
        keeps each row's values together: an explicit opt-in that no proof covers for two
        or more columns (or with ``shuffle=False``); it warns with
        :class:`~dpfast.exceptions.UnprovenReleaseWarning` and the report labels it
        ``"as_published"``. For linked records with a proof, use :func:`dpfast.mdav_dp`.
    shuffle : bool
        Release rows in a random order (default). Must stay on for ``linkage="columns"``.
    n_threads : int, optional
        Threads over columns (default: one per core). Results do not depend on it.
    remainder : {"middle", "last"}
        The rank group that holds the ``n mod k`` values left over, in every protected
        column: ``"middle"`` (default; group ``n // k // 2``, among typical values, where
        the larger group costs least) or ``"last"`` (the group of the largest values, as
        sdcMicro and the paper's authors do; for comparison with them). A public rule of
        ``(n, k)`` that keeps the sensitivity ``Δ / k`` either way (docs/privacy.md,
        "Which rank group holds the remainder").
    epsilon_weights : mapping, optional
        Public ``{column: weight}``, a finite weight ``> 0`` for every protected column:
        column ``j`` spends ``w_j / Σ w · ε`` (its own ledger entry), and its noise scale
        is ``Δ_j / (k ε_j)``. Default: an equal split (docs/privacy.md#weights).
    transforms : mapping, optional
        Public ``{column: "log" | "asinh"}`` for numeric columns: ``"log"`` (``log1p``,
        for a lower bound ``>= 0``) or ``"asinh"`` (signed values). Values are clamped to
        the bounds (in the data's units), transformed, grouped by rank (the ranking is
        unchanged) and noised on the transformed scale, where the sensitivity is
        ``(T(U) - T(L)) / k``; each released value ``z`` is mapped back through
        ``T^-1`` and divided by the noise's mean factor ``E[e^Y]`` (post-processing), so
        that where nothing is clamped the noise adds no bias. ``E[e^Y]`` is infinite
        once the noise scale reaches 1 on the transformed scale: the release then maps
        back uncorrected and warns (:class:`~dpfast.exceptions.TransformBiasWarning`).
        The report's ``transforms`` parameter names each transform and its correction.
    **options : Unpack[DPMetricsReleaseOptions]
        The options the releases share (:class:`dpfast.DPMetricsReleaseOptions`):
        ``seed``, ``metrics``, ``budget``, ``max_on_bound``, ``risk``, ``progress``,
        ``engine``, ``output`` and ``memory_limit``.

    Returns
    -------
    Release

    Raises
    ------
    TypeError
        Wrong argument or column types.
    ValueError
        Bad values: NaN or inf in a protected column, ``k`` outside ``[1, n]``,
        ``epsilon <= 0``, an unknown ``remainder``, missing or inverted bounds, unknown
        columns, an empty table,
        categorical values missing from their taxonomy
        (:class:`~dpfast.taxonomy.TaxonomyError`); weights that are not positive or do not
        cover exactly the protected columns; an unknown transform, a transform of a
        categorical column, ``"log"`` with a negative lower bound.

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
    >>> incomes = pd.DataFrame({"income": [0.0, 12e3, 30e3, 41e3, 95e3, 2e6]})
    >>> release = ir_dp(incomes, k=3, epsilon=20.0, bounds={"income": (0, 5e6)},
    ...                 transforms={"income": "log"}, seed=7)
    >>> transform = release.report.parameters["transforms"]["income"]
    >>> transform["function"], transform["corrected"], round(transform["noise_scale"], 3)
    ('log1p', True, 0.257)
    """
    with open_run("ir_dp", data, options, DPMetricsReleaseOptions) as run:
        with run.phase("validate"):
            # before any pass over the data
            run.policy = policy(check_unprotected(unprotected), check_linkage(linkage))
            args = validate(
                run.engine, k, epsilon, bounds, taxonomies, sensitivity, columns, linkage,
                shuffle, run.seed, remainder, epsilon_weights, transforms,
            )  # fmt: skip
            guarantee = _guarantee(args)
            if guarantee[1] in ("as_published", "heuristic"):
                warn_unproven(guarantee[0])
        with run.phase("plan"):
            plan = make_plan(args, run.n_rows)
            protected = column_names(args.numeric, args.categorical)
            run.protect(protected)
            _check_groups_fit(run, args, n_threads)
            expected = release_forecast(args, run.n_rows, plan)
            run.expect(  # before any ε is reserved; reads the data with max_on_bound
                expected, lambda limit: data_forecast(run.engine, args, plan, limit=limit)
            )
            warn_uncorrected(run.alerts, plan.grids)
            run.reserve(args.epsilon, protected)
        source = noise_source(args.seed)
        if args.dp_bounds:  # the whole epsilon is reserved: choose them, plan over them
            args, plan = _with_dp_bounds(run, args, plan, source)
        linked = args.linkage == "records"
        row_key = source.key("ir_dp", "row-order") if linked and args.shuffle else None
        with run.phase("columns"):
            # the categorical columns' counts first: a cheap pass each, which checks their
            # values against the taxonomies before the long numeric passes
            flow = run.engine.dataflow
            counts = {} if linked else {c.name: rank_counts(flow, c) for c in args.categorical}
            _release_numeric(run, args, plan, source, row_key, n_threads)
            _release_categorical(run, args, plan, source, row_key, counts)
        return run.finish(
            source=source,
            order_key=row_key,
            reindex=args.shuffle,
            parameters=_parameters(args, plan),
            guarantee=(bounds_guarantee(guarantee[0], plan.bounds), guarantee[1]),
            ledger=plan.ledger,
            seed=args.seed,
            sampler=_sampler(args),
            metrics=run.metrics(args.numeric, args.categorical, args.domains),
            groups="rank group" if linked else None,
            domains=args.domains,
            notes=args.notes,
        )


def _with_dp_bounds(
    run: Run, args: Arguments, plan: Plan, source: noise.NoiseSource
) -> tuple[Arguments, Plan]:
    """Choose the bounds of ``args.dp_bounds``, plan over them, and spend their entries.

    ``plan`` is the plan over the outer ranges, whose ε the run has reserved; the bounds
    chosen are DP outputs, so the plan over them (noise scales, grids) is public.
    """
    with run.phase("bounds"):
        chosen = choose_bounds(
            run.engine, "ir_dp", args.numeric, args.dp_bounds, plan.bounds, source
        )
    args, plan = over_bounds(args, chosen, lambda over: make_plan(over, run.n_rows))
    for entry in plan.bounds.values():  # drawn above, with the same epsilon
        plan.ledger.spend(entry)
    return args, plan


def _group_bytes(run: Run, args: Arguments) -> int:
    """Bytes this process holds for a column's rank groups while it is released.

    Its groups' sums, draws and values: three 8-byte numbers a group; nothing where the
    rows are not linked and the engine's tasks send the groups
    (:meth:`~dpfast.engines.base.Engine.rank_sender`).
    """
    n, k = run.n_rows, args.k
    if args.linkage == "columns" and run.rank_sender() is not None:
        return 0
    return (n // k) * 8 * 3


def _check_groups_fit(run: Run, args: Arguments, n_threads: int | None) -> None:
    """Refuse a memory limit whose share per column cannot hold the column's group values."""
    n = run.n_rows
    needed = _group_bytes(run, args)
    count = len(args.numeric) or 1
    if needed > run.engine.column_memory(count, n_threads=n_threads, held_bytes=needed):
        raise DPFastValueError(
            f"{n:,} rows with k={args.k} make {n // args.k:,} rank groups per column, whose "
            f"values need {needed:,} bytes, more than the memory limit; raise the "
            "memory limit or k"
        )


@dataclass(frozen=True)
class _NoisyCentroids:
    """A numeric column's rank groups' released values from their exact integer sums.

    Each group's mean, on the grid, plus one discrete Laplace draw of the column's key
    (nonce: the group), clamped to the domain and rounded for an integer column.
    """

    name: str
    grid: Grid
    layout: RankGroups
    steps: int
    integer: bool
    key: np.ndarray

    def __call__(self, sums: np.ndarray, first_group: int = 0) -> np.ndarray:
        """Return the values of groups ``first_group ..`` from their sums."""
        g = self.grid
        draws = noise.discrete_laplace(self.key, self.steps, sums.shape[0], start=first_group)
        return ranking.noisy_group_values(  # type: ignore[no-any-return]
            sums,
            *self.layout.scalars,
            draws,
            g.d_int,
            g.lower,
            g.upper,
            g.gamma,
            self.integer,
            g.warp,
            first_group,
        )

    def before_noise(self, sums: np.ndarray, first_group: int = 0) -> np.ndarray:
        """Return the values of groups ``first_group ..`` with no noise (their counts)."""
        return noiseless_group_values(sums, self.layout, self.grid, self.integer, first_group)


@dataclass(frozen=True)
class _ChosenCodes:
    """A categorical column's rank groups' codes, from the records per taxonomy rank."""

    taxonomy: Taxonomy
    layout: RankGroups
    key: np.ndarray
    entry: LedgerEntry

    def __call__(self, counts: np.ndarray, first: int = 0, stop: int | None = None) -> np.ndarray:
        """Return the codes of groups ``first .. stop - 1`` (default: every group)."""
        groups = None if stop is None else (first, stop)
        return group_codes(self.taxonomy, counts, self.layout, self.key, self.entry, groups)


@dataclass
class _Clock:
    """A group-values function that adds up the seconds spent in it (the report's timings)."""

    inner: Callable[..., np.ndarray]
    seconds: float = 0.0

    def __call__(self, sums: np.ndarray, *first_group: int) -> np.ndarray:
        start = time.perf_counter()
        try:
            return self.inner(sums, *first_group)
        finally:
            self.seconds += time.perf_counter() - start


@dataclass
class _TimedCentroids:
    """A numeric column's :class:`_NoisyCentroids`, timed, and its values before the noise.

    Timed as :class:`_Clock` times. It keeps the last sums it was given (a record-linked
    release gives every group's at once, on this process) for the column's counts on a
    bound.
    """

    inner: _NoisyCentroids
    seconds: float = 0.0
    sums: np.ndarray | None = None

    def __call__(self, sums: np.ndarray, first_group: int = 0) -> np.ndarray:
        self.sums = sums
        start = time.perf_counter()
        try:
            return self.inner(sums, first_group)
        finally:
            self.seconds += time.perf_counter() - start

    def before_noise(self, sums: np.ndarray, first_group: int = 0) -> np.ndarray:
        """Return the groups' values with no noise (:meth:`_NoisyCentroids.before_noise`)."""
        return self.inner.before_noise(sums, first_group)


def _release_numeric(
    run: Run,
    args: Arguments,
    plan: Plan,
    source: noise.NoiseSource,
    row_key: np.ndarray | None,
    n_threads: int | None,
) -> None:
    """Release every numeric column, columns at once as the engine runs them; spend in order."""
    engine, layout = run.engine, args.layout(run.n_rows)
    total = len(args.numeric) + len(args.categorical)

    def release(column: NumericColumn) -> tuple[int, BoundCount]:
        start = time.perf_counter()
        grid, steps = plan.grids[column.name]
        name = str(column.name)
        key = source.key("ir_dp", "centroid-noise", name)
        centroids = _TimedCentroids(_NoisyCentroids(name, grid, layout, steps, column.integer, key))
        lower, upper = args.domains[column.name]
        bound: BoundCount
        if args.linkage == "records":
            linked = WriteLinked(column, grid, layout, row_key, centroids)
            values, clamped = engine.write(linked)
            assert centroids.sums is not None  # every group's sums, given on this process
            before = centroids.before_noise(centroids.sums)
            bound = rank_groups_on_bound(values, before, layout, (lower, upper))
        else:
            order = source.key("ir_dp", "column-order", name)
            sender, domain = run.rank_sender(), (lower, upper)
            if sender is not None:
                clamped, bound = sender.write_rank_groups(
                    column, grid, layout, centroids, order, domain
                )
            else:
                clamped, bound = _rank_groups(
                    engine, column, grid, layout, centroids, order, domain
                )
        run.add_seconds("noise (thread seconds)", centroids.seconds)
        elapsed = time.perf_counter() - start - centroids.seconds
        run.add_seconds("microaggregation (thread seconds)", elapsed)
        return clamped, bound

    held = _group_bytes(run, args)
    done = engine.each_column(args.numeric, release, n_threads=n_threads, held_bytes=held)
    for i, (column, (clamped, bound)) in enumerate(done):
        plan.ledger.spend(plan.entries[column.name])
        run.keep(column.name, clamped=clamped, on_bound=bound)
        run.tick("columns", i + 1, total)


def _rank_groups(
    engine: Engine,
    column: NumericColumn,
    grid: Grid,
    layout: RankGroups,
    values: RankGroupValues,
    key: np.ndarray,
    domain: tuple[float, float],
) -> tuple[int, BoundCount]:
    """Release a numeric column in rank groups here; return its clamped and on-bound counts.

    The :func:`~dpfast.steps.group_sums` step's sums, ``values(sums, 0)`` for every
    group, written by the engine in ``key``'s order; the rows on a bound of ``domain``
    (released there, there before the noise, pushed there by the noise).
    """
    sums, clamped = group_sums(engine.dataflow, column, grid, layout)
    group_values = values(sums, 0)
    engine.write(WriteGroups(column, group_values, layout, key))
    before = values.before_noise(sums, 0)
    return clamped, rank_groups_on_bound(group_values, before, layout, domain)


def _release_categorical(
    run: Run,
    args: Arguments,
    plan: Plan,
    source: noise.NoiseSource,
    row_key: np.ndarray | None,
    counts: Mapping[Hashable, np.ndarray],
) -> None:
    """Release every categorical column: one exponential-mechanism draw per rank group.

    ``counts`` holds each column's records per taxonomy rank (rows not linked).
    """
    engine, layout = run.engine, args.layout(run.n_rows)
    total = len(args.numeric) + len(args.categorical)
    for i, cat in enumerate(args.categorical, start=len(args.numeric)):
        start = time.perf_counter()
        name = str(cat.name)
        entry = plan.entries[cat.name]
        key = source.key("ir_dp", "centroid-choice", name)
        choose = _Clock(_ChosenCodes(cat.taxonomy, layout, key, entry))
        if args.linkage == "records":
            engine.write(WriteLinked(cat, None, layout, row_key, choose))
        else:
            order = source.key("ir_dp", "column-order", name)
            sender = run.rank_sender()
            if sender is not None:
                sender.write_category_groups(cat, counts[cat.name], layout, choose, order)
            else:
                codes = choose(counts[cat.name], 0, layout.n_groups)
                engine.write(WriteGroups(cat, codes, layout, order))
        run.add_seconds("exponential mechanism (thread seconds)", choose.seconds)
        elapsed = time.perf_counter() - start - choose.seconds
        run.add_seconds("microaggregation (thread seconds)", elapsed)
        plan.ledger.spend(entry)
        run.keep(cat.name, clamped=0)
        run.tick("columns", i + 1, total)


def _parameters(args: Arguments, plan: Plan) -> dict[str, Any]:
    parameters: dict[str, Any] = {
        "k": args.k,
        "epsilon": args.epsilon,
        "linkage": args.linkage,
        "shuffle": bool(args.shuffle),
        "bounds": {str(c): list(b) for c, b in args.domains.items()},
        "bounds_from_data": args.derived,
        "remainder": args.remainder,
        **weight_parameters(args.weights),
        **transform_parameters({c.name: plan.grids[c.name] for c in args.numeric}),
        **bounds_parameters(args.dp_bounds, args.domains),
    }
    if args.categorical:
        parameters["sensitivity"] = args.sensitivity
        parameters["taxonomies"] = taxonomy_parameters(args.categorical)
    return parameters


def _sampler(args: Arguments) -> str:
    if not args.categorical:
        return noise.SAMPLER_NAME
    if not args.numeric:
        return noise.EM_SAMPLER_NAME
    return f"{noise.SAMPLER_NAME}; {noise.EM_SAMPLER_NAME}"


def _guarantee(args: Arguments) -> tuple[str, GuaranteeLevel]:
    protected = names(column_names(args.numeric, args.categorical))
    share = args.epsilon_column if args.weights is None else None
    guarantee, level = numeric_guarantee(
        args.epsilon, share, protected, args.linkage, args.shuffle, args.derived
    )
    if args.categorical:
        categorical = names([c.name for c in args.categorical])
        guarantee, level = categorical_guarantee(guarantee, level, categorical, args.sensitivity)
    return guarantee, level
