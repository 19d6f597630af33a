"""The release skeleton that every method follows: validate → plan → draw → assemble → report.

A method opens a :class:`Run` on its input, validates its arguments and the protected
columns (:func:`split_columns`), plans its spend on the run's :class:`~dpfast.accounting.Ledger`
before any noise is drawn, draws and keeps each released column (:meth:`Run.keep`,
:meth:`Run.keep_codes`), assembles the output table of the input's kind
(:meth:`Run.assemble`), and ends with :meth:`Run.finish`, which builds the report's common
fields once for every method.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpfast import metrics as utility
from dpfast import noise
from dpfast._kernels import mechanisms as _mechanism_kernels
from dpfast._validation import (
    all_finite,
    as_numeric_column,
    check_columns,
    check_threads,
    is_integer_column,
)
from dpfast.accounting import GuaranteeLevel, Ledger, LedgerEntry, PhaseTimer, Report, names
from dpfast.io import TableData, as_table_data
from dpfast.partitions.grid import Grid
from dpfast.taxonomy import Taxonomy

Progress = Callable[[str, int, int], None]

SEEDED_NOTE = "reproducible — not for publication: noise was drawn from a seeded generator"

METRICS_WARNING = (
    "computed on the original data: keep this report private, do not publish it with the release"
)


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
class NumericColumn:
    """A protected numeric column as float64 values (never written), and its dtype."""

    name: Hashable
    values: np.ndarray
    integer: bool
    dtype: np.dtype[Any]

    def restore_dtype(self, released: np.ndarray) -> np.ndarray:
        """Give an integer column its dtype back (values are already rounded and in bounds)."""
        return released.astype(self.dtype) if self.integer else released


@dataclass(frozen=True)
class CategoricalColumn:
    """A protected categorical column as int64 codes of its taxonomy's leaves."""

    name: Hashable
    codes: np.ndarray
    taxonomy: Taxonomy


def numeric_columns(table: TableData, columns: Any) -> list[NumericColumn]:
    """Return the selected columns as validated :class:`NumericColumn` (no NaN or inf)."""
    selected = check_columns(columns, table.names)
    finite = table.kind == "numpy" and all_finite(table.source)
    result = []
    for name in selected:
        raw = table.column(name)
        values = as_numeric_column(raw, name, known_finite=finite)
        result.append(NumericColumn(name, values, is_integer_column(raw), raw.dtype))
    return result


def _check_taxonomies(taxonomies: Any) -> Mapping[Hashable, Taxonomy]:
    if taxonomies is None:
        return {}
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
    return taxonomies


def _check_numeric_dtype(table: TableData, name: Hashable) -> None:
    raw = table.column(name)
    if raw.dtype == object or not (np.issubdtype(raw.dtype, np.number) or raw.dtype == np.bool_):
        raise TypeError(
            f"column {name!r} must be numeric to be protected, got dtype {raw.dtype}; "
            "pass its taxonomy in taxonomies= to protect it as a categorical column, "
            "or leave it out of columns"
        )


def split_columns(
    table: TableData, columns: Any, taxonomies: Any
) -> tuple[list[NumericColumn], list[CategoricalColumn]]:
    """Protected numeric columns, and categorical columns (those with a taxonomy)."""
    checked = _check_taxonomies(taxonomies)
    selected = check_columns(columns, table.names)
    stray = [name for name in checked if name not in selected]
    if stray:
        raise ValueError(
            f"taxonomies names column(s) {stray} that are not protected; the protected "
            f"columns are {selected}: add them to columns or drop their taxonomies"
        )
    categorical = []
    for name in selected:
        if name in checked:
            codes, categories = table.category_codes(name)
            codes = checked[name].encode_categories(codes, categories, column=name)
            categorical.append(CategoricalColumn(name, codes, checked[name]))
    numeric = [name for name in selected if name not in checked]
    for name in numeric:
        _check_numeric_dtype(table, name)
    return (numeric_columns(table, numeric) if numeric else []), categorical


def column_names(
    numeric: Sequence[NumericColumn], categorical: Sequence[CategoricalColumn] = ()
) -> list[Hashable]:
    """Return the protected columns' names, numeric first."""
    return [c.name for c in numeric] + [c.name for c in categorical]


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


def partition_inputs(
    numeric: Sequence[NumericColumn], categorical: Sequence[CategoricalColumn], n_records: int
) -> tuple[np.ndarray, np.ndarray, list[Taxonomy]]:
    """Numeric matrix ``(n, m)``, categorical codes ``(n, c)`` and their taxonomies."""
    matrix = np.column_stack([c.values for c in numeric]) if numeric else np.zeros((n_records, 0))
    codes = (
        np.column_stack([c.codes for c in categorical])
        if categorical
        else np.zeros((n_records, 0), dtype=np.int64)
    )
    return matrix, codes, [c.taxonomy for c in categorical]


def taxonomy_parameters(categorical: Sequence[CategoricalColumn]) -> dict[str, Any]:
    """Describe each categorical column's taxonomy for the report."""
    return {
        str(c.name): {"name": c.taxonomy.name, "leaves": len(c.taxonomy.domain)}
        for c in categorical
    }


def value_range(values: np.ndarray, name: Hashable) -> tuple[float, float]:
    """Return a column's ``(min, max)``; refuse a width that float64 cannot divide by."""
    lo, hi = _mechanism_kernels.min_max(values)
    width = float(hi) - float(lo)
    if not math.isfinite(width):
        raise ValueError(
            f"column {name!r}: max - min overflows float64 ({lo!r} to {hi!r}); rescale the "
            "column first"
        )
    if width > 0 and not math.isfinite(values.shape[0] / width):
        raise ValueError(
            f"column {name!r}: its values differ by less than float64 can divide "
            f"(range {width!r}); rescale the column first"
        )
    return float(lo), float(hi)


def keep_numerator(retention: float) -> int:
    """Largest ``a`` with ``a / noise.KEEP_DENOMINATOR <= retention`` (exact)."""
    exact = Fraction(retention)
    return exact.numerator * noise.KEEP_DENOMINATOR // exact.denominator


def unprotected_note(unprotected: Sequence[str]) -> str:
    """Return the sentence a guarantee ends with when columns are released unchanged."""
    if not unprotected:
        return ""
    return (
        f" Column(s) {list(unprotected)} are released unchanged and are not protected by "
        "any guarantee."
    )


def _aligned(original: np.ndarray, destination: np.ndarray | None) -> np.ndarray:
    """``original`` moved to the released row order (rows matched through the shuffle)."""
    if destination is None or destination.shape[0] != original.shape[0]:
        return original
    aligned = np.empty_like(original)
    aligned[destination] = original
    return aligned


def _mean(values: Mapping[str, float]) -> float:
    return float(np.mean(list(values.values()))) if values else math.nan


def _numeric_metrics(
    out: dict[str, Any],
    numeric: Sequence[NumericColumn],
    released: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
    domains: Mapping[Hashable, tuple[float, float]] | None,
) -> None:
    for column in numeric:
        original = _aligned(column.values, destinations.get(column.name))
        if column.integer:
            original = original.astype(column.dtype)
        got = released[column.name]
        pair = (
            domains[column.name]
            if domains is not None
            else (float(original.min()), float(original.max()))
        )
        name = str(column.name)
        out["relative_error"][name] = utility.column_metric(
            utility.relative_error(original, got, pair)
        )
        out["jensen_shannon"][name] = utility.column_metric(
            utility.jensen_shannon(original, got, pair)
        )
        out["variance_variation"][name] = utility.column_metric(
            utility.variance_variation(original, got)
        )


def _categorical_metrics(
    out: dict[str, Any],
    categorical: Sequence[CategoricalColumn],
    released_codes: Mapping[Hashable, np.ndarray],
    destinations: Mapping[Hashable, np.ndarray],
) -> None:
    """Relative error = mean semantic distance; JSD over the taxonomy's leaves."""
    for column in categorical:
        original = _aligned(column.codes, destinations.get(column.name))
        got = released_codes[column.name]
        m = len(column.taxonomy.domain)
        out["relative_error"][str(column.name)] = float(
            np.mean(column.taxonomy.distances_between(original, got))
        )
        out["jensen_shannon"][str(column.name)] = utility.jensen_shannon_counts(
            np.bincount(original, minlength=m).astype(np.float64),
            np.bincount(got, minlength=m).astype(np.float64),
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
            out: dict[str, Any] = {
                "warning": METRICS_WARNING,
                "relative_error": {},
                "jensen_shannon": {},
                "variance_variation": {},
            }
            _numeric_metrics(out, numeric, self.released, self.destinations, domains)
            variation = out.pop("variance_variation", {})
            out["mean_relative_error"] = _mean(out["relative_error"])
            out["mean_jensen_shannon"] = _mean(out["jensen_shannon"])
            # Numeric columns only: a categorical column has no variance.
            out["variance_variation"] = variation
            out["mean_variance_variation"] = _mean(variation)
            if categorical:
                _categorical_metrics(out, categorical, self.released_codes, self.destinations)
                out["mean_relative_error"] = _mean(out["relative_error"])
                out["mean_jensen_shannon"] = _mean(out["jensen_shannon"])
            return out

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
        note_unprotected: bool = True,
    ) -> Report:
        """Build the report, filling the fields every release shares.

        ``guarantee`` is the text and level of what holds for the protected columns (by
        default the released ones); the unprotected columns (by default those copied
        unchanged) are named after it, unless ``note_unprotected`` is false and the text
        names them itself. A seeded run is noted as not for publication. The report's ε
        is the ledger's total.
        """
        text, level = guarantee
        copied = self.unprotected() if unprotected is None else list(unprotected)
        return Report(
            method=self.method,
            parameters=parameters,
            epsilon=None if ledger is None else ledger.total,
            ledger=[] if ledger is None else list(ledger.entries),
            guarantee=text + (unprotected_note(copied) if note_unprotected else ""),
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
