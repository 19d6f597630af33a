"""mdav_dp's arguments, checked as every engine checks them, and its plan.

The plan gives each numeric column its grid, noise scale and ledger entry, and each
categorical column its exponential mechanism; :func:`cluster_values` is the release's
arithmetic from a cluster's sums to its released value (with a draw, or before the noise).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np

from dpfast._kernels import insensitive_mdav as mdav_kernels
from dpfast._release import (
    CategoricalColumn,
    DPBounds,
    NumericColumn,
    TableView,
    bounds_share,
    budget_parts,
    check_epsilon_weights,
    check_transforms,
    column_names,
    epsilon_shares,
    grid_noise_entry,
    noise_grid,
    option,
    protected_domains,
    protected_specs,
    split_bounds,
    weights_option,
)
from dpfast._validation import check_choice, check_epsilon, check_k, check_seed, quoted
from dpfast.accounting import Ledger, LedgerEntry, epsilon_of_scale, names, scale_steps
from dpfast.exceptions import DPFastValueError
from dpfast.methods.mdav_dp._categorical import categorical_plan
from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import Reference, ReferenceGeometry, reference_geometry

Calibration = Literal["l1", "as_published"]
Transform = Literal["log", "asinh"]
CALIBRATIONS: tuple[Calibration, ...] = ("l1", "as_published")


@dataclass(frozen=True)
class Arguments:
    k: int
    epsilon: float
    calibration: Calibration
    seed: int | None
    numeric: list[NumericColumn]
    categorical: list[CategoricalColumn]
    domains: dict[Hashable, tuple[float, float]]
    derived: bool
    notes: list[str]  # the columns released in a wider type than their own
    # the columns whose clamping bounds are chosen with DP within their outer range
    dp_bounds: dict[Hashable, DPBounds] = field(default_factory=dict)
    # the public remedies for skewed columns (docs/privacy.md#weights, #transforms)
    weights: dict[Hashable, Fraction] | None = None
    transforms: dict[Hashable, str] = field(default_factory=dict)

    @property
    def shares(self) -> dict[Hashable, float]:
        """Each protected column's ε under ``"l1"``: its weight's share, or the equal one."""
        return epsilon_shares(
            self.epsilon, column_names(self.numeric, self.categorical), self.weights
        )


def with_remedies(args: Arguments, epsilon_weights: Any, transforms: Any) -> Arguments:
    """Return ``args`` with the checked ``epsilon_weights`` and ``transforms``."""
    categorical = [c.name for c in args.categorical]
    if epsilon_weights is not None and args.calibration != "l1":
        raise DPFastValueError(
            f"{weights_option()} splits epsilon over the columns, but "
            f"{option('calibration', 'as_published')} gives every column the paper's scale "
            f"with no split; drop {weights_option()} or use {option('calibration', 'l1')}"
        )
    return replace(
        args,
        weights=check_epsilon_weights(
            epsilon_weights, column_names(args.numeric, args.categorical)
        ),
        transforms=check_transforms(transforms, args.numeric, categorical, args.domains),
    )


def validate(
    table: TableView,
    k: Any,
    epsilon: Any,
    bounds: Any,
    taxonomies: Any,
    columns: Any,
    calibration: Any,
    seed: Any,
) -> Arguments:
    k = check_k(k, table.n_rows)
    epsilon = check_epsilon(epsilon)
    calibration = check_choice(calibration, "calibration", CALIBRATIONS)
    seed = check_seed(seed)
    bounds, specs = split_bounds(bounds)
    found = protected_domains(table, columns, taxonomies, bounds)
    specs = protected_specs(specs, found[0])
    if specs and calibration != "l1":
        raise DPFastValueError(
            f"bounds of column(s) {names(list(specs))} are to be chosen with DP, which "
            f"takes its share of each column's epsilon; {option('calibration', calibration)} "
            f"spends the paper's per-column epsilon instead. Use {option('calibration', 'l1')} "
            "(the default), or give public bounds (lower, upper)"
        )
    return Arguments(k, epsilon, cast(Calibration, calibration), seed, *found, dp_bounds=specs)


def geometry(args: Arguments, reference: Reference, n: int) -> ReferenceGeometry:
    """Return the reference sequence of the ``n // k - 1`` clusters formed before the last."""
    lower = np.array([args.domains[c.name][0] for c in args.numeric], dtype=np.float64)
    upper = np.array([args.domains[c.name][1] for c in args.numeric], dtype=np.float64)
    taxonomies = [c.taxonomy for c in args.categorical]
    return reference_geometry(reference, lower, upper, taxonomies, max(n // args.k - 1, 0))


@dataclass(frozen=True)
class Plan:
    ledger: Ledger
    grids: dict[Hashable, tuple[Grid, int]]
    entries: dict[Hashable, LedgerEntry]
    choices: dict[Hashable, tuple[float, Fraction]]
    bounds: dict[Hashable, LedgerEntry] = field(default_factory=dict)  # chosen with DP


def numeric_entry(
    column: NumericColumn, args: Arguments, n_records: int, n_clusters: int
) -> tuple[Grid, int, LedgerEntry, LedgerEntry | None]:
    lower, upper = args.domains[column.name]
    transform = args.transforms.get(column.name)
    grid = Grid.for_column(lower, upper, n_records, args.k, transform)
    # n_c centroids each move by at most d_int / k, plus one step of rounding.
    sensitivity = Fraction(n_clusters * grid.d_int, args.k) + n_clusters
    bounds = None  # the entry of bounds chosen with DP, which take their part of the share
    if args.calibration == "l1":
        protected = column_names(args.numeric, args.categorical)
        parts = budget_parts(column.name, protected, args.weights)
        spent, bounds = bounds_share(args.dp_bounds, column, args.shares[column.name])
        what = f"column {quoted(column.name)}"
        steps = scale_steps(sensitivity, spent, what=what, shares=parts) if grid.d_int else 0
    else:
        paper = Fraction(n_records * grid.d_int, args.k**2)
        steps = scale_steps(paper, args.epsilon, what=f"column {quoted(column.name)}")
        spent = (
            epsilon_of_scale(sensitivity, steps)
            if steps
            else args.epsilon * n_clusters * args.k / n_records
        )
    grid = noise_grid(grid, steps)  # the mapping back of a transformed column
    entry = grid_noise_entry(
        column,
        step="centroid noise",
        epsilon=spent,
        mechanism="discrete Laplace, one draw per insensitive-MDAV cluster",
        grid=grid,
        sensitivity=sensitivity,
        steps=steps,
        details={
            "n_clusters": n_clusters,
            "calibration": args.calibration,
            "nominal_sensitivity": n_clusters * grid.width / args.k,
            "grid_rounding_term": n_clusters * grid.gamma,
        },
    )
    return grid, steps, entry, bounds


def make_plan(args: Arguments, n_records: int, n_clusters: int) -> Plan:
    """Every column's scale and entry; the ledger's total is what they really spend."""
    grids, entries, choices, bounds = {}, {}, {}, {}
    shares = args.shares
    for column in args.numeric:
        grid, steps, entry, chosen = numeric_entry(column, args, n_records, n_clusters)
        grids[column.name] = (grid, steps)
        entries[column.name] = entry
        if chosen is not None:
            bounds[column.name] = chosen
    for cat in args.categorical:
        em_epsilon, em_sensitivity, entry = categorical_plan(
            cat, args.epsilon, shares[cat.name], n_records, args.k, n_clusters, args.calibration
        )
        choices[cat.name] = (em_epsilon, em_sensitivity)
        entries[cat.name] = entry
    planned = [*bounds.values(), *entries.values()]
    ledger = Ledger(math.fsum(entry.epsilon for entry in planned))
    for entry in planned:
        ledger.plan(entry)
    return Plan(ledger, grids, entries, choices, bounds)


def cluster_values(
    column: NumericColumn,
    grid: Grid,
    sizes: np.ndarray,
    sums: np.ndarray,
    draws: np.ndarray | None = None,
) -> np.ndarray:
    """Each cluster's value as released with ``draws`` (default: none, before the noise).

    The cluster's mean on ``grid`` rounded half to even, plus its draw, clamped, mapped
    back to the data's units (rounded where integer): float64, one per cluster.
    """
    count = sums.shape[0]
    if draws is None:
        draws = np.zeros(count, dtype=np.int64)
    noisy = mdav_kernels.noisy_cluster_values(sums, sizes, draws, grid.d_int)
    out = np.empty(count, dtype=np.float64)
    mdav_kernels.broadcast_clusters(
        np.arange(count, dtype=np.int64),
        noisy,
        grid.lower,
        grid.upper,
        grid.gamma,
        column.integer,
        np.empty(0, dtype=np.int64),
        out,
        grid.d_int,
        grid.warp,
    )
    return out
