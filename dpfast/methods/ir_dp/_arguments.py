"""ir_dp's arguments, checked as every engine checks them, and its plan: grids, noise, ledger."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Literal, cast

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
)
from dpfast._validation import (
    check_bool,
    check_choice,
    check_em_epsilon,
    check_epsilon,
    check_k,
    check_seed,
    quoted,
)
from dpfast.accounting import (
    Ledger,
    LedgerEntry,
    UnprotectedPolicy,
    scale_steps,
)
from dpfast.exceptions import DPFastValueError
from dpfast.methods.ir_dp._categorical import (
    categorical_entry,
)
from dpfast.methods.ir_dp._numeric import centroid_sensitivity
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups, Remainder, check_remainder

Linkage = Literal["records", "columns"]
Sensitivity = Literal["paper", "proven"]
Transform = Literal["log", "asinh"]


def check_linkage(linkage: Any) -> Linkage:
    return cast(Linkage, check_choice(linkage, "linkage", ("records", "columns")))


def policy(policy: UnprotectedPolicy, linkage: Linkage) -> UnprotectedPolicy:
    """Return ``policy``, refusing ``"keep"`` under ``linkage="columns"``.

    That linkage releases every protected column in an order of its own, so no output row
    is an input record: there is no row to keep an unprotected value in.
    """
    if policy == "keep" and linkage == "columns":
        raise DPFastValueError(
            f"{option('unprotected', 'keep')} keeps the unprotected columns in their rows, "
            f"but {option('linkage', 'columns')} releases every protected column in an "
            "order of its own, so no output row is an input record and there are no rows "
            f"to keep them in. Choose {option('unprotected', 'shuffle')} (unchanged, NOT "
            f"protected, in a random order of their own; the guarantee of the protected "
            f"columns holds), {option('unprotected', 'drop')} (the default: left out), or "
            f"{option('linkage', 'records')} to keep rows whole (NOT proven differentially "
            "private)"
        )
    return policy


@dataclass(frozen=True)
class Arguments:
    k: int
    epsilon: float
    linkage: Linkage
    shuffle: bool
    seed: int | None
    sensitivity: Sensitivity
    remainder: Remainder
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
    def epsilon_column(self) -> float:
        """The equal share of ε of each protected column."""
        return self.epsilon / (len(self.numeric) + len(self.categorical))

    @property
    def shares(self) -> dict[Hashable, float]:
        """Each protected column's ε: its weight's share, or the equal one."""
        return epsilon_shares(
            self.epsilon, column_names(self.numeric, self.categorical), self.weights
        )

    def parts(self, column: Hashable) -> float:
        """How many of ``column``'s shares make the total (for the error messages)."""
        return budget_parts(column, column_names(self.numeric, self.categorical), self.weights)

    def layout(self, n_records: int) -> RankGroups:
        """Return the rank groups of every protected column, by the remainder rule."""
        return RankGroups(n_records, self.k, self.remainder)


def validate(
    table: TableView,
    k: Any,
    epsilon: Any,
    bounds: Any,
    taxonomies: Any,
    sensitivity: Any,
    columns: Any,
    linkage: Any,
    shuffle: Any,
    seed: Any,
    remainder: Any,
    epsilon_weights: Any = None,
    transforms: Any = None,
) -> Arguments:
    k = check_k(k, table.n_rows)
    epsilon = check_epsilon(epsilon)
    linkage = check_linkage(linkage)
    shuffle = check_bool(shuffle, "shuffle")
    if linkage == "columns" and not shuffle:
        raise DPFastValueError(
            f"{option('linkage', 'columns')} shuffles every protected column; "
            f"drop {option('shuffle', False)} or choose {option('linkage', 'records')}"
        )
    seed = check_seed(seed)
    sensitivity = check_choice(sensitivity, "sensitivity", ("paper", "proven"))
    bounds, specs = split_bounds(bounds)
    found = protected_domains(table, columns, taxonomies, bounds)
    args = Arguments(
        k,
        epsilon,
        cast(Linkage, linkage),
        shuffle,
        seed,
        cast(Sensitivity, sensitivity),
        check_remainder(remainder),
        *found,
        dp_bounds=protected_specs(specs, found[0]),
    )
    return _with_remedies(args, epsilon_weights, transforms)


def _with_remedies(args: Arguments, epsilon_weights: Any, transforms: Any) -> Arguments:
    """Return ``args`` with the checked ``epsilon_weights`` and ``transforms``."""
    categorical = [c.name for c in args.categorical]
    return replace(
        args,
        weights=check_epsilon_weights(
            epsilon_weights, column_names(args.numeric, args.categorical)
        ),
        transforms=check_transforms(transforms, args.numeric, categorical, args.domains),
    )


@dataclass(frozen=True)
class Plan:
    ledger: Ledger
    grids: dict[Hashable, tuple[Grid, int]]
    entries: dict[Hashable, LedgerEntry]
    bounds: dict[Hashable, LedgerEntry] = field(default_factory=dict)  # bounds chosen with DP


def make_plan(args: Arguments, n_records: int) -> Plan:
    plan = Plan(Ledger(args.epsilon), {}, {})
    n_groups = n_records // args.k
    shares = args.shares
    for column in args.numeric:
        lower, upper = args.domains[column.name]
        transform = args.transforms.get(column.name)
        grid = Grid.for_column(lower, upper, n_records, args.k, transform)
        list_sensitivity = centroid_sensitivity(grid, n_records, args.k)
        what, share, parts = (
            f"column {quoted(column.name)}",
            shares[column.name],
            args.parts(column.name),
        )
        noise_share, bounds = bounds_share(args.dp_bounds, column, share)
        if bounds is not None:  # the bounds chosen with DP take their part of the share
            plan.bounds[column.name] = plan.ledger.plan(bounds)
        steps = (
            scale_steps(list_sensitivity, noise_share, what=what, shares=parts) if grid.d_int else 0
        )
        grid = noise_grid(grid, steps)  # the mapping back of a transformed column
        plan.grids[column.name] = (grid, steps)
        plan.entries[column.name] = plan.ledger.plan(
            grid_noise_entry(
                column,
                step="centroid noise",
                epsilon=noise_share,
                mechanism="discrete Laplace, one draw per rank group",
                grid=grid,
                sensitivity=list_sensitivity,
                steps=steps,
                details={
                    "n_groups": n_groups,
                    "nominal_sensitivity": grid.width / args.k,
                    "grid_rounding_term": n_groups * grid.gamma,
                },
            )
        )
    for cat in args.categorical:
        share, parts = shares[cat.name], args.parts(cat.name)
        check_em_epsilon(share, n_records, what=f"column {quoted(cat.name)}", shares=parts)
        entry = categorical_entry(cat, share, n_groups, args.sensitivity)
        plan.entries[cat.name] = plan.ledger.plan(entry)
    return plan
