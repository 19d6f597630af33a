"""What the methods share besides the run: noise sources, ledger entries, small checks."""

from __future__ import annotations

import warnings
from fractions import Fraction
from typing import Any, cast

from dpfast import noise
from dpfast._validation import check_choice
from dpfast.accounting import GuaranteeLevel, LedgerEntry, UnprotectedPolicy
from dpfast.dataflow.values import CategoricalColumn, NumericColumn
from dpfast.exceptions import UnprovenReleaseWarning
from dpfast.partitions.grid import Grid

__all__ = [
    "check_unprotected",
    "choice_entry",
    "grid_noise_entry",
    "keep_numerator",
    "noise_source",
    "not_dp_guarantee",
    "warn_unproven",
]


def warn_unproven(message: str) -> None:
    """Warn that the chosen mode is not proven differentially private (its own category)."""
    warnings.warn(message, UnprovenReleaseWarning, stacklevel=3)


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
    the data's units, with the grid step, the scale in steps and whether the released
    values are rounded to integers after the noise (the column's declared type) among the
    details. A transformed grid's steps are on the transformed scale, and so are the
    entry's sensitivity and scale: the details name the transform.
    """
    if grid.transform is not None:
        function = "log1p" if grid.transform == "log" else "asinh"
        details = {
            **details,
            "transform": grid.transform,
            "units": f"sensitivity and noise_scale are on the {function} scale of the data",
        }
    return LedgerEntry(
        step=step,
        columns=(str(column.name),),
        epsilon=epsilon,
        mechanism=mechanism,
        sensitivity=float(sensitivity) * grid.gamma,
        noise_scale=steps * grid.gamma,
        sampler=noise.SAMPLER_NAME,
        details={
            **details,
            "grid_step": grid.gamma,
            "scale_in_grid_steps": steps,
            "rounded_to_integers": bool(column.integer),
        },
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
