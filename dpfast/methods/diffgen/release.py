"""``diffgen``: differentially private generalisation for classification.

See docs/design.md#diffgen.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from dpfast import noise
from dpfast._release import DPReleaseOptions, Run, Unpack, method_call, noise_source, open_run
from dpfast._validation import check_choice, check_epsilon, check_seed, in_cli, option, quoted
from dpfast.accounting import GuaranteeLevel, Ledger, PrivateReport, Report
from dpfast.dataflow.writes import WriteTable
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.io import released_categories, repeat_rows
from dpfast.methods.diffgen._budget import Budget, Spender, Utility, check_steps, counts_entry
from dpfast.methods.diffgen._columns import CategoricalColumn, NumericColumn, Prepared, prepare
from dpfast.methods.diffgen._scores import UTILITIES
from dpfast.methods.diffgen._tree import Builder
from dpfast.methods.diffgen.cut import Cut, CutColumn
from dpfast.taxonomy import Taxonomy

COUNT_COLUMN = "count"


@dataclass(frozen=True)
class DiffGenRelease:
    """A DiffGen release: the noisy generalised contingency table, its cut and report.

    Attributes
    ----------
    counts : pandas.DataFrame, pyarrow.Table, Spark or Dask DataFrame, pyarrow dataset
        One row per (leaf partition, class value), empty partitions included: the
        generalised predictor values (categorical columns whose categories are the cut's
        values), the class, and a non-negative integer ``count``. Same kind as the input
        (a Spark or Dask DataFrame: a frame of the same kind, text for categories on
        Spark); out of core, the Parquet dataset written at ``output``.
    cut : Cut
        The final cut; ``cut.apply(data)`` generalises new data the same way.
    report : Report
        Public: method, parameters, ε ledger (split values, selections, counts),
        guarantee. Safe to publish with the counts.
    private : PrivateReport
        NOT for publication: the input's row count and clamped values, timings.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"age": [23, 35, 41, 52, 67, 30],
    ...                       "income": ["<=50K", ">50K", "<=50K", ">50K", "<=50K", "<=50K"]})
    >>> release = diffgen(table, target="income", epsilon=1.0, steps=1,
    ...                   bounds={"age": (17, 90)}, classes=["<=50K", ">50K"], seed=3)
    >>> list(release.counts.columns), len(release.counts) == 2 * release.cut.n_cells
    (['age', 'income', 'count'], True)
    >>> len(release.microdata()) == int(release.counts["count"].sum())
    True
    >>> release.report.guarantee_level, release.private.input_rows
    ('proven', 6)
    """

    counts: Any
    cut: Cut
    report: Report
    private: PrivateReport

    def microdata(self) -> Any:
        """Expand :attr:`counts` into records: each row repeated ``count`` times.

        Returns
        -------
        pandas.DataFrame or pyarrow.Table
            The predictors and the class (no ``count`` column), in the order of
            :attr:`counts`; its total row count is ``counts["count"].sum()``. Only of
            counts in memory: expand a frame's ``toArrow()`` or ``compute()``, or release
            with ``microdata=True`` and ``output=``.
        """
        return repeat_rows(self.counts, COUNT_COLUMN)


def diffgen(
    data: Any,
    *,
    target: Hashable,
    epsilon: float,
    steps: int,
    taxonomies: Mapping[Hashable, Any] | None = None,
    bounds: Mapping[Hashable, tuple[float, float]] | str | None = None,
    utility: Utility = "max",
    classes: Sequence[Any] | None = None,
    microdata: bool = False,
    **options: Unpack[DPReleaseOptions],
) -> DiffGenRelease:
    """Differentially private generalisation for classification: DiffGen (docs/design.md#diffgen).

    Starting from the top of every predictor's taxonomy (categorical) or public root
    interval (numeric), DiffGen specialises ``steps`` times a value chosen by the
    exponential mechanism with the utility ``Max`` or ``InfoGain``, and releases a noisy
    count for every (leaf partition, class value). With ``ε' = ε / (2 (n_numeric +
    2 steps))`` it spends ``ε'`` on each numeric root's split value, ``ε'`` on each
    selection, ``ε'`` on the split values of each step's new intervals (charged in every
    step, as in the paper) and ``ε / 2`` on the counts: ``ε`` in all.

    Guarantee: proven ε-differential privacy of everything released (the cut, the split
    values and the noisy counts) under unbounded DP (neighbouring tables differ by adding
    or removing one record; the number of rows is not public), hence 2ε under bounded DP;
    report level ``"proven"``. NOT differentially private (level ``"none"``) with
    ``bounds="data"`` or with class values read from the data (no ``classes`` and no
    taxonomy for the target).

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table, Parquet path, Spark or Dask DataFrame
        The table; never modified. A Parquet file, directory or glob (or
        ``engine="outofcore"``) is released out of core, in passes over one column at a
        time, into ``output``; a Spark or Dask DataFrame on its cluster, its counts a
        frame of the same kind. Each gives the in-memory release (docs/engines.md).
    target : hashable
        The class column.
    epsilon : float
        Total privacy budget (unbounded DP: one record added or removed).
    steps : int
        Number of specialisations ``h >= 0``. The loop stops early when no value can be
        specialised any more; the budget of the steps not taken goes to the counts.
    taxonomies : mapping, optional
        ``{column: taxonomy}`` for the categorical predictors: a
        :class:`~dpfast.taxonomy.Taxonomy`, an ARX hierarchy file path, or a nested
        mapping. A taxonomy for ``target`` gives the public class domain (its leaves).
    bounds : mapping, optional
        Public ``{column: (lower, upper)}`` for the numeric predictors. Integer columns
        get the root interval ``[lower, upper + 1)`` and integer split points; float
        columns ``[lower, upper]``. Values outside are clamped (the report counts them).
        ``"data"`` takes every other numeric column with bounds from the data: NOT
        private, warns with :class:`~dpfast.exceptions.PrivacyLeakWarning` (a pass over
        each numeric column where the table is not in memory).
    utility : {"max", "info_gain"}
        ``Max`` (sensitivity 1, the default; the paper finds it better under DP) or
        ``InfoGain`` (sensitivity ``log2`` of the number of classes).
    classes : sequence, optional
        The public class values. Without it (or a taxonomy for ``target``) they are read
        from the data, which is not private and warns.
    microdata : bool
        Write the counts expanded into records (:meth:`DiffGenRelease.microdata`) to
        ``output`` instead of the counts table (out of core, range by range); needs
        ``output``. ``counts`` is the table still, except out of core, where it is what
        was written.
    **options : Unpack[DPReleaseOptions]
        The options the releases share (:class:`dpfast.DPReleaseOptions`): ``seed``,
        ``budget``, ``risk``, ``progress``, ``engine``, ``output`` and
        ``memory_limit``. ``output`` receives the counts (or records); ``progress``
        phases include a pass over a column out of core (``"pass 3 (column age)"``) and
        the writing of ``output``.

    Returns
    -------
    DiffGenRelease

    Raises
    ------
    TypeError
        Wrong argument types, a NumPy input, a non-numeric predictor given bounds.
    ValueError
        ``epsilon <= 0``, ``steps < 0``, unknown columns, NaN in a numeric predictor, no
        predictor, a class value outside ``classes``, InfoGain with one class, a result
        above 2**24 leaf partitions, or ``microdata`` without ``output``.
    TaxonomyError
        Categorical values missing from their taxonomy.

    Notes
    -----
    Columns that are neither the target nor a predictor are not released. Counts get
    exact discrete Laplace noise whose guarantee is at most ``ε_counts``
    (:func:`dpfast.noise.add_count_noise`: base ``p = m/2**16`` just above
    ``exp(-ε_counts)``, or for budgets below 1/32 a rate ``s/t`` just below ``ε_counts``)
    and are clamped at 0. Selections and split values use the exponential mechanism with
    float64 weights (docs/design.md#em-sampler).

    References
    ----------
    N. Mohammed, R. Chen, B. C. M. Fung and P. S. Yu, "Differentially Private Data Release
    for Data Mining", KDD 2011.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpfast.taxonomy import Taxonomy
    >>> jobs = Taxonomy.from_mapping({"*": {"Technical": ["Tech-support", "Craft-repair"],
    ...                                     "Other": ["Sales", "Adm-clerical"]}})
    >>> table = pd.DataFrame({
    ...     "age": [23, 35, 41, 52, 67, 30],
    ...     "job": ["Sales", "Tech-support", "Sales", "Craft-repair", "Adm-clerical", "Sales"],
    ...     "income": ["<=50K", ">50K", "<=50K", ">50K", "<=50K", "<=50K"]})
    >>> release = diffgen(table, target="income", epsilon=1.0, steps=2,
    ...                   taxonomies={"job": jobs}, bounds={"age": (17, 90)},
    ...                   classes=["<=50K", ">50K"], seed=3)
    >>> list(release.counts.columns)
    ['age', 'job', 'income', 'count']
    >>> release.cut.n_cells * 2 == len(release.counts)
    True
    >>> round(sum(e.epsilon for e in release.report.ledger), 12)
    1.0
    >>> generalised = release.cut.apply(table)
    >>> list(generalised.columns)
    ['age', 'job', 'income']
    """
    with open_run("diffgen", data, options, DPReleaseOptions) as run:
        with run.phase("validate"):
            epsilon = check_epsilon(epsilon)
            steps = check_steps(steps)
            utility = cast(Utility, check_choice(utility, "utility", UTILITIES))
            seed = check_seed(run.seed)
            _check_microdata(microdata, run.output)
            _check_risk(run)
            if isinstance(data, np.ndarray):
                raise DPFastTypeError(
                    "diffgen needs named columns: pass a pandas DataFrame or a pyarrow Table, "
                    "not a NumPy array"
                )
        with run.phase("encode"):
            prepared = prepare(
                run.engine,
                target,
                taxonomies,
                bounds,
                classes,
                reserve=lambda columns: run.reserve(epsilon, columns),
            )
        return _release(run, prepared, (epsilon, steps, utility, seed), microdata)


def _check_risk(run: Run) -> None:
    """Refuse ``risk`` that would measure nothing: DiffGen's rows are cells, not records.

    Only the uniqueness of the released cells applies (``quasi_identifiers``); without
    them the private report would hold no measure, and nothing would say so.
    """
    options = run.risk_options
    if options is None or options.quasi_identifiers:
        return
    fix = (
        "drop --risk"
        if in_cli()
        else "measure the uniqueness of the released cells with "
        "risk={'quasi_identifiers': [...], 'k': 5}, or leave risk out"
    )
    raise DPFastValueError(
        f"{option('risk', True)} measures nothing for {method_call('diffgen')}: its released "
        "rows are generalised cells with counts, none of them paired with a source record, "
        f"so record linkage, interval disclosure and neighbourhood counts do not apply; {fix}"
    )


def _check_microdata(microdata: Any, output: Any) -> None:
    if not isinstance(microdata, bool):
        raise DPFastTypeError(
            f"{option('microdata')} must be True or False, got {quoted(microdata)}"
        )
    if microdata and output is None:
        raise DPFastValueError(
            f"{option('microdata', True)} writes the records to {option('output')}; give one, "
            "or expand the counts in memory with release.microdata()"
        )


def _release(
    run: Run,
    prepared: Prepared,
    arguments: tuple[float, int, Utility, int | None],
    microdata: bool,
) -> DiffGenRelease:
    """Specialise, count, report and publish: the steps after the encoding, on every engine.

    ``arguments`` (``epsilon``, ``steps``, ``utility``, ``seed``) are checked already.
    """
    epsilon, steps, utility, seed = arguments
    check_prepared(prepared, utility)
    budget = Budget.split(epsilon, prepared, steps, utility)
    budget.check_range(steps, run.n_rows)
    ledger = Ledger(epsilon)
    source = noise_source(seed)
    builder = Builder(
        prepared,
        epsilon_prime=float(budget.unit),
        utility=utility,
        delta_u=budget.delta_u,
        source=source,
    )
    with run.phase("specialise"):
        done = _specialise(builder, steps, Spender(ledger, prepared, budget, utility))
    with run.phase("counts"):
        cuts, cell_counts, plan = _noisy_counts(builder, ledger, budget, steps, done, source)
    with run.phase("assemble"):
        cut = _make_cut(builder, cuts)
        columns = _counts_columns(prepared, builder, cuts, cell_counts)
        run.engine.write(WriteTable(columns, COUNT_COLUMN if microdata else None))
    run.clamped.update({str(c.name): c.clamped for c in budget.numeric})
    run.policy = "drop"  # the columns neither predictors nor the target are not released
    run.risk_counts = COUNT_COLUMN  # each row of the counts stands for `count` records
    release = run.finish(
        parameters=_parameters(prepared, builder, budget, epsilon, steps, utility),
        guarantee=_guarantee(epsilon, prepared),
        ledger=ledger,
        seed=seed,
        sampler=f"{plan.sampler}; {noise.EM_SAMPLER_NAME}",
        notes=_notes(prepared, budget, steps, done),
        extra={
            "steps_done": done,
            "early_stop": done < steps,
            "leftover_budget": "counts" if done < steps else "none",
            "cut": cut.to_dict(),
            "n_cells": int(cell_counts.size),
            "n_leaf_partitions": int(cell_counts.shape[0]),
            "dropped_columns": [str(c) for c in prepared.dropped],
        },
        released_rows=int(cell_counts.size),
        protected=[*(str(c.name) for c in prepared.columns), str(prepared.target)],
        unprotected=[],
    )
    return DiffGenRelease(release.data, cut, release.report, release.private)


def check_prepared(prepared: Prepared, utility: Utility) -> None:
    """Refuse a released column named like the counts, and InfoGain with one class."""
    if COUNT_COLUMN in [c.name for c in prepared.columns] or prepared.target == COUNT_COLUMN:
        raise DPFastValueError(
            f"a released column is named {quoted(COUNT_COLUMN)}, the name of the released counts; "
            "rename it"
        )
    if utility == "info_gain" and len(prepared.class_labels) < 2:
        raise DPFastValueError(
            f"InfoGain is identically 0 with a single class value; use {option('utility', 'max')}"
        )


def _specialise(builder: Builder, steps: int, spend: Spender) -> int:
    """Draw the root split values, then up to ``steps`` specialisations; return how many."""
    builder.roots(spend)
    for i in range(steps):
        if not builder.step(i, spend):
            break
    return builder.steps_done


def _noisy_counts(
    builder: Builder,
    ledger: Ledger,
    budget: Budget,
    steps: int,
    done: int,
    source: noise.NoiseSource,
) -> tuple[list[list[int]], np.ndarray, noise.CountNoise]:
    """Every (leaf partition, class) count with exact noise, in place; clamped at 0."""
    cuts, cell_counts = builder.leaf_counts()
    plan = noise.count_noise_plan(budget.counts(done))
    entry = ledger.plan(
        counts_entry(builder.prepared, budget, plan, int(cell_counts.size), steps, done)
    )
    # in place on the true counts; large tables are split over the cores inside the
    # sampler (same draws whatever the split)
    noisy = cell_counts.reshape(-1)
    noise.apply_count_noise(source.key("diffgen", "counts"), noisy, plan, floor=0)
    ledger.spend(entry)
    return cuts, cell_counts, plan


def _parameters(
    prepared: Prepared,
    builder: Builder,
    budget: Budget,
    epsilon: float,
    steps: int,
    utility: Utility,
) -> dict[str, Any]:
    return {
        "target": str(prepared.target),
        "epsilon": epsilon,
        "steps": steps,
        "utility": utility,
        "utility_sensitivity": budget.delta_u,
        "epsilon_prime": float(budget.unit),
        "bounds": {str(c.name): [c.lower, c.upper] for c in budget.numeric},
        "root_intervals": {
            str(c.name): builder.values[i].label
            for i, c in enumerate(prepared.columns)
            if isinstance(c, NumericColumn)
        },
        "integer_columns": [str(c.name) for c in budget.numeric if c.integer],
        "taxonomies": {
            str(c.name): {"name": c.taxonomy.name, "leaves": len(c.taxonomy.domain)}
            for c in prepared.columns
            if isinstance(c, CategoricalColumn)
        },
        "classes": [str(v) for v in prepared.class_labels],
        "class_domain": prepared.class_domain,
        "bounds_from_data": prepared.bounds_from_data,
        "budget_split": "ε' = ε / (2 (n_numeric + 2 steps)): n_numeric root split values, "
        "per step one selection and one split-value draw, ε/2 counts",
    }


def _notes(prepared: Prepared, budget: Budget, steps: int, done: int) -> list[str]:
    notes = []
    if done < steps:
        notes.append(
            f"early stop after {done} of {steps} steps: no value of the cut could be "
            f"specialised further. The budget of the {steps - done} steps not taken "
            f"({float(budget.unit * 2 * (steps - done)):.6g}) went to the counts "
            "(docs/design.md#diffgen-edge-cases): whether a step can run depends only on the cut, "
            "itself the output of earlier private steps and public taxonomies and bounds, so the "
            "total stays epsilon."
        )
    if prepared.dropped:
        notes.append(f"column(s) {[str(c) for c in prepared.dropped]} are not released")
    return notes


def _guarantee(epsilon: float, prepared: Any) -> tuple[str, GuaranteeLevel]:
    if prepared.bounds_from_data:
        return (
            "NOT differentially private: the numeric bounds were derived from the data "
            "(bounds='data').",
            "none",
        )
    if prepared.class_domain == "data":
        return (
            "NOT differentially private as released: the set of class values was read "
            "from the data (pass the public classes= or a taxonomy for the target).",
            "none",
        )
    return (
        f"{epsilon:g}-differential privacy under unbounded DP: neighbouring tables differ by "
        "adding or removing one record, and the number of rows is not public. It covers "
        "everything released (the cut, the split values and the noisy counts) given the "
        "public taxonomies, numeric bounds and class values; under bounded DP (one record "
        f"replaced) the same release is {2 * epsilon:g}-DP. Columns that are neither "
        "predictors nor the target are not released.",
        "proven",
    )


def _make_cut(builder: Builder, cuts: list[list[int]]) -> Cut:
    columns = []
    for j, col in enumerate(builder.columns):
        values = [builder.values[v] for v in cuts[j]]
        labels = tuple(v.label for v in values)
        if isinstance(col, NumericColumn):
            edges = np.array([v.lo for v in values], dtype=np.float64)
            edges.setflags(write=False)
            columns.append(CutColumn(col.name, labels, edges=edges, bounds=(col.lower, col.upper)))
        else:
            taxonomy: Taxonomy = col.taxonomy
            position = np.full(len(taxonomy.domain), -1, dtype=np.int64)
            for p, v in enumerate(values):
                position[taxonomy.leaves_under(v.node)] = p
            position.setflags(write=False)
            columns.append(CutColumn(col.name, labels, taxonomy=taxonomy, leaf_position=position))
    return Cut(columns, builder.prepared.target)


def _small_codes(codes: np.ndarray, n_labels: int) -> np.ndarray:
    dtype = np.int8 if n_labels < 2**7 else np.int16 if n_labels < 2**15 else np.int32
    return codes.astype(dtype, copy=False)


def _counts_columns(
    prepared: Prepared, builder: Builder, cuts: list[list[int]], noisy: np.ndarray
) -> dict[Hashable, Any]:
    """Return the counts table's columns: each cell's generalised values, class, count."""
    n_cells, n_classes = noisy.shape
    sizes = [len(c) for c in cuts]
    out: dict[Hashable, Any] = {}
    inner = n_classes * math.prod(sizes)
    outer = 1
    for j, col in enumerate(prepared.columns):
        inner //= sizes[j]
        labels = [builder.values[v].label for v in cuts[j]]
        codes = _small_codes(np.arange(sizes[j]), sizes[j])
        out[col.name] = (np.tile(np.repeat(codes, inner), outer), labels)
        outer *= sizes[j]
    declared = prepared.class_categories
    categories, classes = released_categories(np.arange(n_classes), prepared.class_labels, declared)
    classes = _small_codes(classes, len(categories))
    out[prepared.target] = (np.tile(classes, n_cells), categories, declared is not None)
    out[COUNT_COLUMN] = noisy.reshape(-1)  # int64, owned by the release only
    return out
