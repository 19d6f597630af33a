"""Individual ranking: the rank groups of one column (docs/design.md#ranking-partition).

Rows are ordered by value (ties by row index) and cut into ``n // k`` groups of ``k``
consecutive ranks; one group also holds the ``r = n mod k`` ranks left over, chosen from
``(n, k)`` alone by the remainder rule (:class:`RankGroups`): the middle group by
default, or the last (sdcMicro's rule). The grouping depends on the ranks alone, so one
changed value moves the groups' means by a telescoping amount of at most ``Δ / k``
(Lemma 1 of Sánchez et al. 2016), whichever group holds the remainder
(docs/privacy.md, "Which rank group holds the remainder"). The DP release of these
groups, on an exact integer grid, is :func:`dpfast.ir_dp`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dpfast._kernels import ranking
from dpfast._validation import check_int, option
from dpfast.exceptions import DPFastValueError

__all__ = ["REMAINDER_RULES", "RankGroups", "Remainder", "group_means", "ranking_labels"]

#: Which rank group holds the remainder ``n mod k``: ``"middle"`` (group ``n_c // 2``,
#: the default) or ``"last"`` (group ``n_c - 1``, sdcMicro's and the paper authors' rule).
Remainder = Literal["middle", "last"]

#: The remainder rules, the default first.
REMAINDER_RULES: tuple[Remainder, ...] = ("middle", "last")


def check_remainder(remainder: Any) -> Remainder:
    """Check a remainder rule: one of :data:`REMAINDER_RULES`."""
    if not isinstance(remainder, str) or remainder not in REMAINDER_RULES:
        raise DPFastValueError(
            f"{option('remainder')} must be one of {list(REMAINDER_RULES)} (the rank group "
            f"that holds the n mod k values left over), got {remainder!r}"
        )
    return remainder


@dataclass(frozen=True)
class RankGroups:
    """The layout of ``n`` sorted values in rank groups of ``k``: a public rule of ``(n, k)``.

    There are ``n_groups = n // k`` groups of ``k`` consecutive ranks, and group
    :attr:`big` also holds the ``r = n - n_groups * k`` ranks left over: group ``g``
    starts at rank ``g * k`` up to ``big`` and at ``g * k + r`` after it. ``remainder``
    chooses ``big``: ``"middle"`` (``n_groups // 2``, the default: the extra values join
    a group of typical values instead of the tail's) or ``"last"`` (``n_groups - 1``, as
    sdcMicro and the paper's authors do). Every group holds at least ``k`` values and the
    sizes depend on ``(n, k)`` only, so the sensitivity of the groups' means is ``Δ / k``
    under either rule (docs/privacy.md, "Which rank group holds the remainder").

    Engines receive the layout and execute it; kernels take its :attr:`scalars`
    ``(k, big, r)`` (:mod:`dpfast._kernels.groups`).

    Examples
    --------
    >>> layout = RankGroups(11, 3)
    >>> layout.n_groups, layout.r, layout.big, layout.sizes.tolist()
    (3, 2, 1, [3, 5, 3])
    >>> layout.group_of(np.arange(11)).tolist()
    [0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2]
    >>> RankGroups(11, 3, "last").sizes.tolist()
    [3, 3, 5]
    """

    n: int
    k: int
    remainder: Remainder = "middle"

    def __post_init__(self) -> None:
        n = check_int(self.n, "n", low=1)
        k = check_int(self.k, option("k"), low=1, high=n)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "remainder", check_remainder(self.remainder))

    @property
    def n_groups(self) -> int:
        """The number of groups, ``n // k``."""
        return self.n // self.k

    @property
    def r(self) -> int:
        """The ranks left over, ``n mod k``, which group :attr:`big` holds beyond its ``k``."""
        return self.n - self.n_groups * self.k

    @property
    def big(self) -> int:
        """The group that holds the remainder: ``n_groups // 2`` or ``n_groups - 1``."""
        return self.n_groups // 2 if self.remainder == "middle" else self.n_groups - 1

    @property
    def scalars(self) -> tuple[int, int, int]:
        """``(k, big, r)``: the layout as the kernels take it."""
        return self.k, self.big, self.r

    @property
    def sizes(self) -> np.ndarray:
        """Every group's size (``int64[n_groups]``): ``k``, and ``k + r`` for group ``big``."""
        return self.sizes_of(0, self.n_groups)

    def sizes_of(self, first: int, stop: int) -> np.ndarray:
        """Return the sizes of groups ``first .. stop - 1`` (a new ``int64`` array)."""
        sizes = np.full(stop - first, self.k, dtype=np.int64)
        if first <= self.big < stop:
            sizes[self.big - first] += self.r
        return sizes

    @property
    def starts(self) -> np.ndarray:
        """Every group's first rank, and ``n`` (``int64[n_groups + 1]``)."""
        starts = np.zeros(self.n_groups + 1, dtype=np.int64)
        np.cumsum(self.sizes, out=starts[1:])
        return starts

    def start(self, group: int) -> int:
        """Return group ``group``'s first rank (``group = n_groups`` gives ``n``)."""
        return group * self.k + (self.r if group > self.big else 0)

    def span(self, group: int) -> tuple[int, int]:
        """Return group ``group``'s ranks ``[lo, hi)``."""
        return self.start(group), self.start(group + 1)

    def group(self, rank: int) -> int:
        """Return the group of rank ``rank`` (``0 <= rank < n``)."""
        if rank < self.start(self.big + 1):
            return min(rank // self.k, self.big)
        return (rank - self.r) // self.k

    def group_of(self, ranks: np.ndarray) -> np.ndarray:
        """Return the group of every rank in ``ranks`` (integers in ``[0, n)``), as ``int64``."""
        ranks = np.asarray(ranks, dtype=np.int64)
        before = ranks < self.start(self.big + 1)
        return np.where(
            before, np.minimum(ranks // self.k, self.big), (ranks - self.r) // self.k
        ).astype(np.int64, copy=False)


def ranking_labels(values: np.ndarray, k: int, remainder: Remainder = "middle") -> np.ndarray:
    """Rank groups of individual ranking for one column.

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
    k : int
        Minimum group size, ``1 <= k <= n``.
    remainder : {"middle", "last"}
        The group that holds the ``n mod k`` values left over (:class:`RankGroups`).

    Returns
    -------
    ndarray of int64, shape (n,)
        Group of each row, numbered ``0 .. n // k - 1`` in increasing value order. Rows are
        ordered by value, ties by row index; groups have ``k`` rows, one of them
        ``k .. 2k-1``.

    Examples
    --------
    >>> values = np.array([5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0])
    >>> ranking_labels(values, 2).tolist()
    [1, 0, 1, 0, 1, 2, 2]
    >>> ranking_labels(values, 2, "last").tolist()
    [2, 0, 1, 0, 1, 2, 2]
    """
    layout = RankGroups(values.shape[0], k, remainder)
    order = np.argsort(values, kind="stable")
    _, labels = ranking.float_group_means(values, order, *layout.scalars)
    return labels  # type: ignore[no-any-return]


def group_means(values: np.ndarray, k: int, remainder: Remainder = "middle") -> np.ndarray:
    """Replace each value of a column by the mean of its rank group (no noise, not DP).

    Parameters
    ----------
    values : ndarray of float64, shape (n,)
    k : int
    remainder : {"middle", "last"}
        The group that holds the ``n mod k`` values left over (:class:`RankGroups`).

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    layout = RankGroups(values.shape[0], k, remainder)
    order = np.argsort(values, kind="stable")
    means, labels = ranking.float_group_means(values, order, *layout.scalars)
    return means[labels]  # type: ignore[no-any-return]
