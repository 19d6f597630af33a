"""Which rows share a noise draw: rank groups and clusters, from ``(n, k)`` and a public rule."""

from __future__ import annotations

from dpfast._validation import quoted
from dpfast.exceptions import DPFastValueError
from dpfast.intervals._quantiles import Weights
from dpfast.partitions.ranking import RankGroups

__all__ = ["group_sizes", "layout", "remainder_rule"]

# The rules the reports name (``parameters["remainder"]``), by their first word.
_RULES = ("last", "middle")


def remainder_rule(recorded: object) -> str:
    """Return ``"last"`` or ``"middle"`` from a report's ``remainder`` parameter.

    Reports name it ``"last group"``, ``"last cluster"``, ``"last"`` or ``"middle"``.

    Examples
    --------
    >>> remainder_rule("last group"), remainder_rule("middle")
    ('last', 'middle')
    """
    word = str(recorded).split(" ", 1)[0].lower() if recorded is not None else ""
    if word not in _RULES:
        raise DPFastValueError(
            f"the report's remainder rule {quoted(recorded)} is not one this version of dpfast "
            f"knows (expected one of {list(_RULES)}); read the report with the dpfast "
            "version that wrote it"
        )
    return word


def group_sizes(n: int, k: int, rule: str) -> tuple[tuple[int, int], ...]:
    """Return the sizes of the ``n // k`` groups of ``k`` rows, in rank order, as runs.

    The ``n mod k`` rows left over join one group, as ``rule`` says: the last
    (``"last"``: sdcMicro's and the paper's rule) or the middle one, group
    ``n_groups // 2`` (``"middle"``), as the release's
    :class:`~dpfast.partitions.ranking.RankGroups` lays them out. Every layout a report
    can state comes from here; the intervals depend on the sizes only (:func:`layout`),
    not on which group is the larger.

    Parameters
    ----------
    n : int
        Rows, ``n >= k``.
    k : int
        Group size, ``k >= 1``.
    rule : {"last", "middle"}
        Where the remainder goes (:func:`remainder_rule` reads it from a report).

    Returns
    -------
    tuple of (int, int)
        ``(groups, size)`` runs in rank order: ``groups`` consecutive groups of ``size``
        rows each (so a column of ten million groups takes three pairs).

    Examples
    --------
    >>> group_sizes(11, 3, "last"), group_sizes(11, 3, "middle")
    (((2, 3), (1, 5)), ((1, 3), (1, 5), (1, 3)))
    >>> group_sizes(9, 3, "middle")
    ((1, 3), (1, 3), (1, 3))
    """
    if not 1 <= k <= n:
        raise DPFastValueError(f"rank groups need 1 <= k <= n, got k={k} and n={n}")
    groups = RankGroups(n, k, "last" if rule == "last" else "middle")  # the release's layout
    runs = ((groups.big, k), (1, k + groups.r), (groups.n_groups - groups.big - 1, k))
    return tuple(run for run in runs if run[0] > 0)


def layout(n: int, k: int, rule: str) -> Weights:
    """Return the groups as ``(size, count)`` pairs: the multiset of :func:`group_sizes`.

    Examples
    --------
    >>> layout(103, 10, "last"), layout(103, 10, "middle")
    (((10, 9), (13, 1)), ((10, 9), (13, 1)))
    """
    counted: dict[int, int] = {}
    for groups, size in group_sizes(n, k, rule):
        counted[size] = counted.get(size, 0) + groups
    return tuple(sorted(counted.items()))
