"""A toy method, written in the tests alone, to show that a method needs no engine code.

``toy_groups`` replaces each protected column by its rank groups' exact means on the
column's public grid, each column in an order of its own (not differentially private: no
noise). It is written over the engine protocol and the steps only
(``dpfast._release.open_run``, the primitive ``numeric_columns`` and the record ``WriteGroups``,
the step ``dpfast.steps.group_sums``), registered nowhere but in the conformance suite's
cases, and runs on every engine.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast import steps
from dpfast._release import SeededReleaseOptions, Unpack, open_run
from dpfast._validation import check_bounds, check_columns, check_k, check_seed
from dpfast.dataflow.writes import WriteGroups
from dpfast.noise import NoiseSource
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups


@dataclass(frozen=True)
class GridMeans:
    """Every rank group's mean, from its exact integer sum of grid steps."""

    grid: Grid
    layout: RankGroups

    def __call__(self, sums: np.ndarray) -> np.ndarray:
        return self.grid.lower + self.grid.gamma * (sums / self.layout.sizes)


def toy_groups(
    data: Any,
    *,
    k: int,
    bounds: Mapping[Hashable, tuple[float, float]],
    columns: Sequence[Hashable] | None = None,
    **options: Unpack[SeededReleaseOptions],
) -> Any:
    """Each protected column's rank groups' means, in a keyed order of the column's own."""
    with open_run("toy_groups", data, options, SeededReleaseOptions) as run:
        k = check_k(k, run.n_rows)
        layout = RankGroups(run.n_rows, k)  # the remainder in the middle group
        seed = check_seed(run.seed)
        run.policy = "drop"
        selected = check_columns(columns, run.engine.names)
        protected = run.engine.numeric_columns(selected, categorical=False)
        domains, _ = check_bounds(bounds, [c.name for c in protected], {})
        source = NoiseSource.secure() if seed is None else NoiseSource.from_seed(seed)
        for column in protected:
            lower, upper = domains[column.name]
            grid = Grid.for_column(lower, upper, run.n_rows, k)
            sums, clamped = steps.group_sums(run.engine.dataflow, column, grid, layout)
            values = GridMeans(grid, layout)(sums)
            order = source.key("toy_groups", "column-order", str(column.name))
            run.engine.write(WriteGroups(column, values, layout, order))
            run.keep(column.name, clamped=clamped)
        return run.finish(
            source=source,
            parameters={"k": k},
            guarantee=("NOT differentially private: exact rank-group means (a toy).", "none"),
            seed=seed,
        )
