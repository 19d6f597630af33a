"""The release skeleton that every method follows: validate → plan → draw → assemble → report.

A method opens a :class:`Run` on its input, validates its arguments and the protected
columns (:func:`split_columns`), plans its spend on the run's :class:`~dpfast.accounting.Ledger`
before any noise is drawn, draws and keeps each released column (:meth:`TableRun.keep`,
:meth:`TableRun.keep_codes`), assembles the output table of the input's kind
(:meth:`TableRun.assemble`), and ends with :meth:`TableRun.finish`, which builds the report's common
fields once for every method.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol, cast

import numpy as np

from dpfast import noise
from dpfast._release.columns import (
    CategoricalColumn,
    NumericColumn,
    check_taxonomies,
    check_width,
    column_domains,
    column_names,
    numeric_columns,
    numeric_ranges,
    protected_columns,
    split_columns,
    taxonomy_parameters,
    value_range,
)
from dpfast._validation import check_choice, cli_spelling, method_call, option
from dpfast.accounting import (
    GuaranteeLevel,
    Ledger,
    LedgerEntry,
    PhaseTimer,
    PrivateReport,
    Report,
    UnprotectedPolicy,
    names,
)
from dpfast.engines import EngineChoice, open_engine
from dpfast.engines._metrics import release_metrics
from dpfast.engines.base import (
    Bins,
    CodeCells,
    CodedNumeric,
    Contingency,
    Engine,
    PublishHook,
    column_threads,
    inverse_permutation,
    partition_inputs,
)
from dpfast.exceptions import (
    IndexDroppedWarning,
    NoiseDominatesWarning,
    UnprovenReleaseWarning,
)
from dpfast.io import as_table_data
from dpfast.partitions.grid import Grid

__all__ = [
    "SEEDED_NOTE",
    "Bins",
    "BudgetLike",
    "CategoricalColumn",
    "CodeCells",
    "CodedNumeric",
    "Contingency",
    "Engine",
    "EngineChoice",
    "NumericColumn",
    "Progress",
    "Release",
    "Reservation",
    "Run",
    "TableRun",
    "check_taxonomies",
    "check_unprotected",
    "check_width",
    "choice_entry",
    "cli_spelling",
    "column_domains",
    "column_names",
    "column_threads",
    "grid_noise_entry",
    "inverse_permutation",
    "keep_numerator",
    "method_call",
    "noise_source",
    "not_dp_guarantee",
    "numeric_columns",
    "numeric_ranges",
    "open_run",
    "option",
    "partition_inputs",
    "protected_columns",
    "split_columns",
    "taxonomy_parameters",
    "unprotected_note",
    "value_range",
    "warn_index_dropped",
    "warn_unproven",
]

Progress = Callable[[str, int, int], None]

SEEDED_NOTE = "reproducible — not for publication: noise was drawn from a seeded generator"


@dataclass(frozen=True)
class Release:
    """Released data, its public report, and the data holder's private report.

    Attributes
    ----------
    data : pandas.DataFrame, pyarrow.Table, polars.DataFrame or numpy.ndarray
        The released table, of the same kind as the input (a pyarrow Table for another
        object read through the Arrow C stream interface).
    report : Report
        Public: method, parameters, ε ledger, guarantee. Safe to publish with the data.
    private : PrivateReport
        NOT for publication: exact clamped counts, timings, utility metrics.
    """

    data: Any
    report: Report
    private: PrivateReport


def warn_unproven(message: str) -> None:
    """Warn that the chosen mode is not proven differentially private (its own category)."""
    warnings.warn(message, UnprovenReleaseWarning, stacklevel=3)


def warn_index_dropped(index: Any) -> None:
    """Warn that a release in a new row order gives its rows a fresh index, and why.

    The caller's index cannot follow its rows there: output row ``i`` would then show
    which input row it came from, the permutation the release hides.
    """
    shown = type(index).__name__ + ("" if index.name is None else f" {index.name!r}")
    message = (
        f"the input's index ({shown}) is dropped: this release puts the rows (or its "
        "unprotected columns) in a new random order, which the index would undo by showing "
        "where each output row came from; the output gets a fresh RangeIndex. To release the "
        "labels, make them a column first (frame.reset_index()): like every unprotected "
        f"column it is then released as {option('unprotected')} says "
        f"({option('unprotected', 'shuffle')}: in an order of its own)."
    )
    warnings.warn(message, IndexDroppedWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """Return the ``stacklevel`` of the first frame outside dpfast, for a warning here."""
    frame = sys._getframe(2)
    level = 2
    while frame.f_back is not None and _in_dpfast(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    return level


def _in_dpfast(module: str) -> bool:
    return module == "dpfast" or module.startswith("dpfast.")


def check_unprotected(value: Any) -> UnprotectedPolicy:
    """Validate ``unprotected``: what to do with the columns a release does not protect."""
    return cast(UnprotectedPolicy, check_choice(value, "unprotected", ("drop", "shuffle", "keep")))


def noise_source(seed: int | None) -> noise.NoiseSource:
    """Return the OS entropy source, or a seeded one (reproducible, not for publication)."""
    return noise.NoiseSource.secure() if seed is None else noise.NoiseSource.from_seed(seed)


def keep_numerator(retention: float) -> int:
    """Largest ``a`` with ``a / noise.KEEP_DENOMINATOR <= retention`` (exact)."""
    exact = Fraction(retention)
    return exact.numerator * noise.KEEP_DENOMINATOR // exact.denominator


def unprotected_note(unprotected: Sequence[str], *, emphasis: bool = False) -> str:
    """Return the sentence a guarantee ends with when columns are released unchanged."""
    if not unprotected:
        return ""
    word = "NOT" if emphasis else "not"
    return (
        f" Column(s) {list(unprotected)} are released unchanged and are {word} protected by "
        "any guarantee."
    )


def unprotected_guarantee(
    guarantee: tuple[str, GuaranteeLevel],
    copied: Sequence[str],
    policy: UnprotectedPolicy,
    groups: str | None,
) -> tuple[str, GuaranteeLevel]:
    """State what holds once the unprotected columns ``copied`` are handled by ``policy``.

    ``groups`` names what rows share in the method (``"rank group"``, ``"cluster"``), or is
    ``None`` when every row is released on its own (noise drawn independently per row), so
    that keeping a row's unprotected values beside its protected ones reveals nothing more
    about the protected ones (docs/design.md#unprotected-columns).
    """
    text, level = guarantee
    if not copied:
        return text, level
    shown = list(copied)
    if policy == "drop":
        return (
            f"{text} Column(s) {shown} are not released ({option('unprotected', 'drop')}).",
            level,
        )
    weaker = "protected_only" if level == "proven" else level
    if policy == "shuffle" or groups is None:
        how = (
            "in a random row order drawn independently of the protected columns"
            if policy == "shuffle"
            else "in their rows; each row's protected values get noise independent of "
            "every other row, so this shows nothing more about them"
        )
        return (
            f"{text} Column(s) {shown} are released unchanged, {how}: they are NOT "
            "protected (their exact values are published), and the guarantee above holds "
            "for a change of one record's protected values only.",
            weaker,
        )
    if level == "none":
        return text + unprotected_note(shown, emphasis=True), level
    return (
        f"NOT differentially private as released: column(s) {shown} are kept in their "
        f"rows ({option('unprotected', 'keep')}), so they show which rows share a {groups}, "
        f"which no epsilon covers. Choose {option('unprotected', 'drop')} or "
        f"{option('unprotected', 'shuffle')} for the guarantee the protected columns have "
        f"on their own: {text}",
        "none",
    )


class _Reporting:
    """The report builder that every release's run shares (the fields every report has).

    A run gives ``method``, ``policy``, ``timer``, ``clamped``, ``timings_extra``,
    :meth:`unprotected`, :meth:`input_rows`, :meth:`released_names` and
    :meth:`clamped_output`.
    """

    method: str
    policy: UnprotectedPolicy | None
    timer: PhaseTimer
    clamped: dict[str, int]
    timings_extra: dict[str, float]

    def unprotected(self) -> list[str]:
        raise NotImplementedError

    def input_rows(self) -> int:
        raise NotImplementedError

    def released_names(self) -> list[Hashable]:
        raise NotImplementedError

    def clamped_output(self, domains: Mapping[Hashable, tuple[float, float]]) -> dict[str, int]:
        raise NotImplementedError

    def reports(
        self,
        *,
        parameters: dict[str, Any],
        guarantee: tuple[str, GuaranteeLevel],
        ledger: Ledger | None = None,
        seed: int | None = None,
        sampler: str | None = None,
        notes: Sequence[str] = (),
        extra: dict[str, Any] | None = None,
        private: dict[str, Any] | None = None,
        metrics: dict[str, Any] | None = None,
        released_rows: int | None = None,
        protected: Sequence[str] | None = None,
        unprotected: Sequence[str] | None = None,
        groups: str | None = None,
        domains: Mapping[Hashable, tuple[float, float]] | None = None,
        emphasis: bool = False,
    ) -> tuple[Report, PrivateReport]:
        """Build the public and the private report, filling the fields every release shares.

        ``guarantee`` is the text and level of what holds for the protected columns (by
        default the released ones). The unprotected columns (by default those not
        released) are then stated by :attr:`policy` (:func:`unprotected_guarantee`, with
        ``groups`` naming what rows share); a method that takes no ``unprotected``
        argument keeps them in their rows and names them after the guarantee (with
        ``emphasis``, in capitals: NOT protected). ``domains`` (public bounds of the
        numeric columns) let the report warn when a column's noise swamps its domain and
        count the released values on a bound. A seeded run is noted as not for
        publication. The report's ε is the ledger's total.
        """
        copied = self.unprotected() if unprotected is None else list(unprotected)
        if self.policy is None:
            text, level = guarantee
            stated = (text + unprotected_note(copied, emphasis=emphasis), level)
        else:
            stated = unprotected_guarantee(guarantee, copied, self.policy, groups)
        alerts = noise_alerts(ledger, domains or {})
        for alert in alerts:
            warnings.warn(alert, NoiseDominatesWarning, stacklevel=4)
        report = Report(
            method=self.method,
            parameters=parameters,
            epsilon=None if ledger is None else ledger.total,
            ledger=[] if ledger is None else list(ledger.entries),
            guarantee=stated[0],
            guarantee_level=stated[1],
            protected_columns=names(self.released_names())
            if protected is None
            else list(protected),
            unprotected_columns=copied,
            unprotected=(self.policy or "keep") if copied else None,
            seeded=seed is not None,
            sampler=sampler,
            released_rows=self.input_rows() if released_rows is None else released_rows,
            notes=([SEEDED_NOTE] if seed is not None else []) + list(notes),
            warnings=alerts,
            extra=dict(extra or {}),
        )
        private_report = PrivateReport(
            method=self.method,
            input_rows=self.input_rows(),
            clamped=dict(self.clamped),
            clamped_output=self.clamped_output(domains or {}),
            timings={**self.timer.timings, **self.timings_extra},
            metrics=metrics,
            extra=dict(private or {}),
        )
        return report, private_report


@dataclass
class TableRun(_Reporting):
    """One release in progress: its table, timer, progress callback and released columns.

    Parameters
    ----------
    method : str
        The public function's name, as the report shows it.
    data : table
        The caller's input (never modified).
    progress : callable, optional
        Called as ``progress(phase, done, total)``.
    """

    method: str
    data: Any
    progress: Progress | None = None
    timer: PhaseTimer = field(default_factory=PhaseTimer)
    released: dict[Hashable, np.ndarray] = field(default_factory=dict)
    released_codes: dict[Hashable, np.ndarray] = field(default_factory=dict)
    clamped: dict[str, int] = field(default_factory=dict)
    destinations: dict[Hashable, np.ndarray] = field(default_factory=dict)
    timings_extra: dict[str, float] = field(default_factory=dict)
    #: What the method's ``unprotected`` argument asks for; ``None`` for a method that takes
    #: none (it keeps the other columns in their rows and names them as not protected).
    policy: UnprotectedPolicy | None = None

    def __post_init__(self) -> None:
        with self.timer.phase("validate"):
            self.table = as_table_data(self.data)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as phase ``name`` of the report's timings."""
        with self.timer.phase(name):
            yield

    def tick(self, phase: str, done: int, total: int) -> None:
        """Report progress to the caller's callback, if any."""
        if self.progress is not None:
            self.progress(phase, done, total)

    def keep(self, column: NumericColumn, values: np.ndarray, clamped: int | None = None) -> None:
        """Keep a released numeric column (float64 values, already rounded where integer)."""
        self.released[column.name] = column.restore_dtype(values)
        if clamped is not None:
            self.clamped[str(column.name)] = int(clamped)

    def keep_codes(self, column: CategoricalColumn, codes: np.ndarray, clamped: bool) -> None:
        """Keep a released categorical column, given as codes of its taxonomy's leaves."""
        self.released_codes[column.name] = codes
        self.released[column.name] = self.table.categorical_output(
            column.name, codes, column.taxonomy.domain
        )
        if clamped:
            self.clamped[str(column.name)] = 0

    def assemble(
        self,
        row_order: np.ndarray | None = None,
        base: Any = None,
        reindex: bool = False,
        source: noise.NoiseSource | None = None,
    ) -> Any:
        """Build the output table of the input's kind: the released columns, and the others.

        The columns not released follow :attr:`policy`: left out (``"drop"``), in a
        random order of their own drawn from ``source`` (``"shuffle"``), or in
        ``row_order`` (``"keep"``, or no policy: output row ``i`` holds input row
        ``row_order[i]``).
        """
        with self.phase("assemble"):
            keep = None
            if self.policy == "drop":
                keep = [n for n in self.table.names if n in self.released]
            elif self.policy == "shuffle" and self.unprotected():
                if source is None:
                    raise AssertionError("a shuffle of the unprotected columns needs a source")
                key = source.key(self.method, "unprotected-order")
                row_order, reindex = noise.permutation(key, self.table.n_rows), True
            if (reindex or row_order is not None) and self.table.has_row_labels():
                warn_index_dropped(self.table.source.index)
            result = self.table.rebuild(self.released, row_order, base, reindex=reindex, keep=keep)
            self.tick("assemble", 1, 1)
        return result

    def metrics(
        self,
        numeric: Sequence[NumericColumn],
        categorical: Sequence[CategoricalColumn] = (),
        domains: Mapping[Hashable, tuple[float, float]] | None = None,
    ) -> dict[str, Any]:
        """Compute utility metrics of the released columns against the original (private).

        Rows are matched through the shuffle, so the relative error is record-linked.
        """
        with self.phase("metrics"):
            return release_metrics(
                numeric,
                categorical,
                self.released,
                self.released_codes,
                self.destinations,
                domains,
            )

    def input_rows(self) -> int:
        """Return the number of rows of the input."""
        return int(self.table.n_rows)

    def unprotected(self) -> list[str]:
        """Return the input's columns that no mechanism of the release protects."""
        return [str(n) for n in self.table.names if n not in self.released]

    def released_names(self) -> list[Hashable]:
        """Return the protected columns released, in the order they were kept."""
        return list(self.released)

    def finish(self, result: Any, **fields: Any) -> Release:
        """Return the :class:`Release` of ``result`` with the reports of :meth:`reports`."""
        return Release(result, *self.reports(**fields))

    def clamped_output(self, domains: Mapping[Hashable, tuple[float, float]]) -> dict[str, int]:
        """Count, per released numeric column with public bounds, the values on a bound."""
        counts = {}
        for name, (lower, upper) in domains.items():
            values = self.released.get(name)
            if values is not None and isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
                on_bound = np.count_nonzero(values <= lower) + np.count_nonzero(values >= upper)
                counts[str(name)] = int(on_bound)
        return counts


def noise_alerts(
    ledger: Ledger | None, domains: Mapping[Hashable, tuple[float, float]]
) -> list[str]:
    """Say, from public quantities only, which columns' noise scale exceeds half their domain.

    The noise scale of a ledger entry and the public bounds of its column are both
    public, so the warning reveals nothing about the data (docs/design.md#noise-warning).
    """
    if ledger is None:
        return []
    by_name = {str(name): domain for name, domain in domains.items()}
    alerts = []
    for entry in ledger.entries:
        if len(entry.columns) != 1 or entry.columns[0] not in by_name:
            continue
        lower, upper = by_name[entry.columns[0]]
        width = upper - lower
        if width > 0 and entry.noise_scale > 0.5 * width:
            alerts.append(
                f"column {entry.columns[0]!r}: the noise scale ({entry.noise_scale:.4g}) is "
                f"more than half the width of its public domain ({width:.4g}), so the "
                "released values are mostly noise and many will sit on a bound. Protect "
                f"fewer columns (each gets a share of {option('epsilon')}), raise "
                f"{option('k')} where the method has one, or raise {option('epsilon')}."
            )
    return alerts


def grid_noise_entry(
    column: NumericColumn,
    *,
    step: str,
    epsilon: float,
    mechanism: str,
    grid: Grid,
    sensitivity: Fraction | int,
    steps: int,
    details: dict[str, Any],
) -> LedgerEntry:
    """Return the ledger entry of discrete Laplace noise on a column's grid.

    ``sensitivity`` and ``steps`` (the scale) are in grid steps; the entry states them in
    the data's units, with the grid step and the scale in steps among the details.
    """
    return LedgerEntry(
        step=step,
        columns=(str(column.name),),
        epsilon=epsilon,
        mechanism=mechanism,
        sensitivity=float(sensitivity) * grid.gamma,
        noise_scale=steps * grid.gamma,
        sampler=noise.SAMPLER_NAME,
        details={**details, "grid_step": grid.gamma, "scale_in_grid_steps": steps},
    )


def choice_entry(
    column: CategoricalColumn,
    *,
    epsilon: float,
    unit: str,
    sensitivity: float,
    noise_scale: float,
    details: dict[str, Any],
) -> LedgerEntry:
    """Return the ledger entry of an exponential-mechanism choice per ``unit`` (group).

    The candidates are the taxonomy's leaves and the quality is ``-Σ semantic distance``;
    the details name the taxonomy, its largest distance and its boundary values.
    """
    taxonomy = column.taxonomy
    v_star, t_star = taxonomy.boundary
    return LedgerEntry(
        step="centroid selection",
        columns=(str(column.name),),
        epsilon=epsilon,
        mechanism=f"exponential mechanism, one draw per {unit}, quality = -Σ semantic "
        "distance, candidates = the taxonomy's leaves",
        sensitivity=sensitivity,
        noise_scale=noise_scale,
        sampler=noise.EM_SAMPLER_NAME,
        details={
            **details,
            "max_distance": taxonomy.max_distance,
            "candidates": len(taxonomy.domain),
            "taxonomy": taxonomy.name,
            "most_marginal": v_star,
            "farthest_from_most_marginal": t_star,
            "noise_scale_meaning": "Pr[c] ∝ exp(q(c) / noise_scale)",
        },
    )


def not_dp_guarantee(what: str) -> tuple[str, GuaranteeLevel]:
    """Return the guarantee of k-noise and k-PRAM: none, in plain words."""
    return (
        f"NOT differential privacy: {what} A k-anonymity-style heuristic (Biswal, Arbuckle "
        "and Kulik); it gives no formal guarantee.",
        "none",
    )


class Reservation(Protocol):
    """A release's spend held in a budget: committed before its output is visible."""

    def commit(self, report: Report) -> None:
        """Record the spend as final, from the release's public report."""
        ...

    def abandon(self) -> None:
        """Give the spend back: the release failed before any output became visible."""
        ...


class BudgetLike(Protocol):
    """A privacy budget a release spends from (:class:`dpfast.budget.BudgetFile`)."""

    def reserve(
        self, epsilon: float, *, method: str, output: str | None, columns: Sequence[str]
    ) -> Reservation:
        """Hold ``epsilon`` for a release, refusing it if it does not fit."""
        ...


class Run(_Reporting):
    """One release in progress over an engine: its timer, progress and released columns.

    A method opens it with :func:`open_run`, asks :attr:`engine` for every step that
    touches the data, records each released column with :meth:`keep`, and ends with
    :meth:`finish`, which places the columns it did not protect (:attr:`policy`), builds
    the two reports and publishes the data.
    """

    def __init__(
        self,
        method: str,
        engine: Engine,
        progress: Progress | None = None,
        budget: BudgetLike | None = None,
        output: str | os.PathLike[str] | None = None,
    ) -> None:
        self.method = method
        self.engine = engine
        self.progress = progress
        self.budget = budget
        self.output = None if output is None else os.fspath(output)
        self.reservation: Reservation | None = None
        self.committed = False
        self.timer = PhaseTimer()
        self.policy: UnprotectedPolicy | None = None
        self.clamped: dict[str, int] = {}
        self.on_bound: dict[str, int] = {}
        self.timings_extra: dict[str, float] = {}
        self._released: list[Hashable] = []
        self._start = time.perf_counter()

    @property
    def n_rows(self) -> int:
        """The number of input rows."""
        return self.engine.n_rows

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as phase ``name`` of the report's timings."""
        with self.timer.phase(name):
            yield

    def tick(self, phase: str, done: int, total: int) -> None:
        """Report progress to the caller's callback, if any."""
        if self.progress is not None:
            self.progress(phase, done, total)

    def reserve(self, epsilon: float, columns: Sequence[Hashable]) -> None:
        """Hold ``epsilon`` in the run's budget, if it has one, before any work.

        Called once the arguments are checked; a budget that cannot hold it refuses the
        release here, before any pass over the data.
        """
        if self.budget is not None and self.reservation is None:
            self.reservation = self.budget.reserve(
                float(epsilon),
                method=self.method,
                output=self.output,
                columns=[str(c) for c in columns],
            )

    def keep(
        self, name: Hashable, *, clamped: int | None = None, on_bound: int | None = None
    ) -> None:
        """Record a released protected column: its clamped inputs and its outputs on a bound."""
        self._released.append(name)
        if clamped is not None:
            self.clamped[str(name)] = int(clamped)
        if on_bound is not None:
            self.on_bound[str(name)] = int(on_bound)

    def released_names(self) -> list[Hashable]:
        """Return the protected columns released, in the order they were kept."""
        return list(self._released)

    def unprotected(self) -> list[str]:
        """Return the input's columns that no mechanism of the release protects."""
        released = set(self._released)
        return [str(n) for n in self.engine.names if n not in released]

    def input_rows(self) -> int:
        """Return the number of rows of the input."""
        return self.n_rows

    def clamped_output(self, domains: Mapping[Hashable, tuple[float, float]]) -> dict[str, int]:
        """Return the released values on a bound, as the method counted them."""
        return {str(n): self.on_bound[str(n)] for n in domains if str(n) in self.on_bound}

    def metrics(
        self,
        numeric: Sequence[NumericColumn],
        categorical: Sequence[CategoricalColumn] = (),
        domains: Mapping[Hashable, tuple[float, float]] | None = None,
    ) -> dict[str, Any]:
        """Compute utility metrics of the released columns against the original (private).

        Rows are matched through the shuffle, so the relative error is record-linked.
        """
        with self.phase("metrics"):
            return self.engine.metrics(numeric, categorical, domains)

    def finish(
        self,
        *,
        source: noise.NoiseSource | None = None,
        order_key: np.ndarray | None = None,
        reindex: bool = False,
        before_publish: PublishHook | None = None,
        **fields: Any,
    ) -> Release:
        """Place the unprotected columns, report, publish; return the :class:`Release`.

        The columns not released follow :attr:`policy`: left out (``"drop"``), in a
        random order of their own drawn from ``source`` (``"shuffle"``), or in the rows'
        order (``"keep"``, or a method with no policy): the permutation of ``order_key``
        (``None``: the input order). ``reindex``: the released rows are in a new order.
        ``fields`` go to :meth:`reports`.
        """
        copied = self.unprotected()
        with self.phase("assemble"):
            if copied and self.policy == "shuffle":
                if source is None:
                    raise AssertionError("a shuffle of the unprotected columns needs a source")
                self.engine.copy_columns(copied, source.key(self.method, "unprotected-order"))
                reindex = True
            elif copied and self.policy != "drop":
                self.engine.copy_columns(copied, order_key)
                reindex = reindex or order_key is not None
        report, private = self.reports(**fields)
        if self.budget is not None and self.reservation is None:
            raise AssertionError(f"{self.method} was given a budget but reserved nothing")

        def before(final: Report) -> None:
            if self.reservation is not None:  # final before any output is visible
                self.reservation.commit(final)
                self.committed = True
            if before_publish is not None:
                before_publish(final)

        with self.phase("write"):
            data = self.engine.publish(report, reindex=reindex, before=before)
        self.tick("assemble", 1, 1)
        private.timings["total"] = time.perf_counter() - self._start
        return Release(data, report, private)


@contextmanager
def open_run(
    method: str,
    data: Any,
    *,
    engine: str | EngineChoice | None = None,
    output: str | os.PathLike[str] | None = None,
    memory_limit: str | int | None = None,
    progress: Progress | None = None,
    metrics: bool = False,
    budget: BudgetLike | None = None,
) -> Iterator[Run]:
    """Open the engine that releases ``data`` and a :class:`Run` of ``method`` over it.

    However the block ends, the engine removes what the release left behind, and a
    budget's reservation not yet committed is given back (nothing was published); an
    error that an engine can state better (a bad value found in a pass, named as the
    in-memory release names it; an interrupt a cluster reported as a failed job) is
    raised so.
    """
    opened = open_engine(
        data,
        method=method,
        engine=engine,
        output=output,
        memory_limit=memory_limit,
        progress=progress,
        metrics=metrics,
    )
    run = Run(method, opened, progress, budget, output)
    try:
        yield run
    except Exception as exc:
        better = opened.explain(exc)
        if better is exc:
            raise
        raise better from None
    finally:
        try:
            if run.reservation is not None and not run.committed:
                run.reservation.abandon()
        finally:
            opened.close()
