"""The release skeleton that every method follows: validate → plan → draw → assemble → report.

A method opens a :class:`Run` on its input, validates its arguments and the protected
columns (:func:`split_columns`), plans its spend on the run's :class:`~dpfast.accounting.Ledger`
before any noise is drawn, draws and keeps each released column (:meth:`Run.keep`,
:meth:`Run.keep_codes`), assembles the output table of the input's kind
(:meth:`Run.assemble`), and ends with :meth:`Run.finish`, which builds the report's common
fields once for every method.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._release._metrics import release_metrics
from dpfast._release.columns import (
    CategoricalColumn,
    NumericColumn,
    column_names,
    numeric_columns,
    partition_inputs,
    split_columns,
    taxonomy_parameters,
    value_range,
)
from dpfast._validation import check_threads
from dpfast.accounting import GuaranteeLevel, Ledger, LedgerEntry, PhaseTimer, Report, names
from dpfast.io import as_table_data
from dpfast.partitions.grid import Grid

__all__ = [
    "SEEDED_NOTE",
    "CategoricalColumn",
    "NumericColumn",
    "Progress",
    "Release",
    "Run",
    "choice_entry",
    "column_names",
    "column_threads",
    "grid_noise_entry",
    "inverse_permutation",
    "keep_numerator",
    "noise_source",
    "not_dp_guarantee",
    "numeric_columns",
    "partition_inputs",
    "split_columns",
    "taxonomy_parameters",
    "unprotected_note",
    "value_range",
]

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


def noise_source(seed: int | None) -> noise.NoiseSource:
    """Return the OS entropy source, or a seeded one (reproducible, not for publication)."""
    return noise.NoiseSource.secure() if seed is None else noise.NoiseSource.from_seed(seed)


def column_threads(n_threads: Any, n_columns: int | None = None) -> int:
    """Return a valid thread count; the default is one per core (at most one per column)."""
    cores = os.cpu_count() or 1
    return check_threads(n_threads, cores if n_columns is None else min(n_columns, cores))


def inverse_permutation(permutation: np.ndarray) -> np.ndarray:
    """Return the inverse of a permutation of ``0 .. n-1``."""
    inverse = np.empty_like(permutation)
    inverse[permutation] = np.arange(permutation.shape[0], dtype=permutation.dtype)
    return inverse


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


@dataclass
class Run:
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
        self, row_order: np.ndarray | None = None, base: Any = None, reindex: bool = False
    ) -> Any:
        """Build the output table of the input's kind: released columns, the others copied."""
        with self.phase("assemble"):
            result = self.table.rebuild(self.released, row_order, base, reindex=reindex)
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

    def unprotected(self) -> list[str]:
        """Return the input's columns that the release copies unchanged."""
        return [str(n) for n in self.table.names if n not in self.released]

    def finish(self, result: Any, **fields: Any) -> Release:
        """Return the :class:`Release` of ``result`` with the report of :meth:`report`."""
        return Release(result, self.report(**fields))

    def report(
        self,
        *,
        parameters: dict[str, Any],
        guarantee: tuple[str, GuaranteeLevel],
        ledger: Ledger | None = None,
        seed: int | None = None,
        sampler: str | None = None,
        notes: Sequence[str] = (),
        extra: dict[str, Any] | None = None,
        n_rows: int | None = None,
        protected: Sequence[str] | None = None,
        unprotected: Sequence[str] | None = None,
        emphasis: bool = False,
    ) -> Report:
        """Build the report, filling the fields every release shares.

        ``guarantee`` is the text and level of what holds for the protected columns (by
        default the released ones); the unprotected columns (by default those copied
        unchanged) are named after it (with ``emphasis``, in capitals: NOT protected). A
        seeded run is noted as not for publication. The report's ε is the ledger's total.
        """
        text, level = guarantee
        copied = self.unprotected() if unprotected is None else list(unprotected)
        return Report(
            method=self.method,
            parameters=parameters,
            epsilon=None if ledger is None else ledger.total,
            ledger=[] if ledger is None else list(ledger.entries),
            guarantee=text + unprotected_note(copied, emphasis=emphasis),
            guarantee_level=level,
            protected_columns=names(list(self.released)) if protected is None else list(protected),
            unprotected_columns=copied,
            clamped=dict(self.clamped),
            seeded=seed is not None,
            sampler=sampler,
            timings={**self.timer.timings, **self.timings_extra},
            n_rows=self.table.n_rows if n_rows is None else n_rows,
            notes=([SEEDED_NOTE] if seed is not None else []) + list(notes),
            extra=dict(extra or {}),
        )


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
