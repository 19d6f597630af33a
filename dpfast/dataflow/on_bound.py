"""A released numeric column's rows on a bound, and the rows the noise pushed there.

Every DP release of a numeric column with public bounds counts, per column and alike on
every engine (a seeded release's counts are the same everywhere: the conformance suite
compares them), three sets of rows (docs/forecast.md#pushed), a group's rows counted
together (a rank group, a cluster, or one cell for a release row by row):

* **released** on a bound: the group's released value is ``<= lower`` or ``>= upper``;
* **before the noise** on a bound: the group's value with a draw of 0 (the release's own
  arithmetic: its mean on the grid, rounded half to even, clamped, rounded for an integer
  column) is on a bound;
* **pushed** onto a bound by the noise: released on a bound, and not on one before the
  noise. Values on a bound in the original and an integer column's rounding floor (a
  group whose mean rounds onto a bound) are left out, so a domain of a few values, whose
  rounding puts every group on a bound, has none pushed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dpfast._kernels import ranking
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups

__all__ = [
    "BoundCount",
    "OnBound",
    "RankGroupValues",
    "noiseless_group_values",
    "rank_groups_on_bound",
]


@dataclass(frozen=True)
class OnBound:
    """Rows of a released numeric column on a bound (module docstring).

    ``released`` on a bound, on one ``before`` the noise, and ``pushed`` there by the noise.

    Examples
    --------
    >>> released = np.array([0.0, 5.0, 10.0, 10.0])
    >>> noiseless = np.array([0.0, 4.0, 9.0, 10.0])
    >>> OnBound.of(released, noiseless, np.array([3, 3, 3, 4]), 0.0, 10.0)
    OnBound(released=10, before=7, pushed=3)
    """

    released: int = 0
    before: int = 0
    pushed: int = 0

    def __add__(self, other: OnBound) -> OnBound:
        return OnBound(
            self.released + other.released, self.before + other.before, self.pushed + other.pushed
        )

    @classmethod
    def of(
        cls,
        released: np.ndarray,
        noiseless: np.ndarray,
        sizes: np.ndarray,
        lower: float,
        upper: float,
    ) -> OnBound:
        """Count the rows of groups of ``sizes`` rows released as ``released``.

        ``noiseless`` holds each group's value before the noise, in the same units.
        """
        on = (released <= lower) | (released >= upper)
        was = (noiseless <= lower) | (noiseless >= upper)
        return cls(int(sizes[on].sum()), int(sizes[was].sum()), int(sizes[on & ~was].sum()))

    @classmethod
    def of_counts(cls, counts: tuple[int, int, int] | list[int] | np.ndarray) -> OnBound:
        """Return the counts ``(released, before, pushed)`` as an :class:`OnBound`."""
        released, before, pushed = (int(c) for c in counts)
        return cls(released, before, pushed)

    def counts(self) -> tuple[int, int, int]:
        """Return ``(released, before, pushed)``: plain integers, as a cluster's tasks send them."""
        return self.released, self.before, self.pushed


#: A column's counts known now, or once the release is written (called then, once).
BoundCount = OnBound | Callable[[], OnBound]


class RankGroupValues(Protocol):
    """A numeric column's rank groups' values from their exact sums, with and without noise.

    Each group's noise is keyed by the group, so a task holding some of the groups computes
    theirs; the values before the noise give the counts of :class:`OnBound`.
    """

    def __call__(self, sums: np.ndarray, first_group: int = 0) -> np.ndarray:
        """Return the released values of groups ``first_group ..``."""
        ...

    def before_noise(self, sums: np.ndarray, first_group: int = 0) -> np.ndarray:
        """Return the values of groups ``first_group ..`` before the noise."""
        ...


def noiseless_group_values(
    sums: np.ndarray, layout: RankGroups, grid: Grid, integer: bool, first_group: int = 0
) -> np.ndarray:
    """Return rank groups' values as ``ir_dp`` releases them with a draw of 0.

    ``layout``'s groups from ``first_group``: each one's mean on ``grid`` rounded half to
    even, mapped back to the data's units (rounded for an ``integer`` column) and clamped,
    by the release's own kernel.
    """
    zeros = np.zeros(sums.shape[0], dtype=np.int64)
    return ranking.noisy_group_values(  # type: ignore[no-any-return]
        sums,
        layout.k,
        layout.big,
        layout.r,
        zeros,
        grid.d_int,
        grid.lower,
        grid.upper,
        grid.gamma,
        integer,
        grid.warp,
        first_group,
    )


def rank_groups_on_bound(
    released: np.ndarray,
    before: np.ndarray,
    layout: RankGroups,
    domain: tuple[float, float],
    first_group: int = 0,
) -> OnBound:
    """Count the rows of rank groups ``first_group ..`` released as ``released``.

    ``before`` holds the same groups' values before the noise; every row holds its group's
    value, so each group counts its size (``layout.sizes``).
    """
    sizes = layout.sizes[first_group : first_group + released.shape[0]]
    return OnBound.of(released, before, sizes, *domain)
