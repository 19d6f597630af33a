"""The rank-group layout in kernels: the group of a rank, the first rank of a group.

``n`` sorted values are cut into ``n_c = n // k`` groups of ``k`` consecutive ranks, and
one group, number ``big``, also holds the ``r = n - n_c * k`` ranks left over (group sizes
``k`` and one ``k + r``). :class:`dpfast.partitions.ranking.RankGroups` chooses ``big``
from ``(n, k)`` alone ("middle": ``n_c // 2``; "last": ``n_c - 1``, sdcMicro's rule) and
hands its ``(k, big, r)`` to the kernels; every kernel that maps ranks to groups goes
through these two helpers (docs/privacy.md, "Which rank group holds the remainder").
"""

from __future__ import annotations

from dpfast._jit import jit_inline


@jit_inline
def rank_group(rank, k, big, r):
    """Return the group of ``rank`` (``0 <= rank < n``) in the layout ``(k, big, r)``.

    Ranks up to the end of group ``big`` are in ``min(rank // k, big)``; the ranks after
    it are shifted back by group ``big``'s ``r`` extra ranks, ``(rank - r) // k``. O(1):
    one division, and selects instead of a branch, so that ranks in random order
    (:func:`~dpfast._kernels.ranking.take_groups`) cost no mispredicted jumps.
    """
    after = rank >= (big + 1) * k + r
    shifted = rank - r if after else rank
    cap = shifted if after else big  # after the big group, shifted // k <= shifted
    g = shifted // k
    return g if g < cap else cap


@jit_inline
def group_start(g, k, big, r):
    """Return the first rank of group ``g`` (``0 <= g <= n_c``; ``g = n_c`` gives ``n``)."""
    return g * k if g <= big else g * k + r
