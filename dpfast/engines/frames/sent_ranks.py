"""Rank-group values made by the tasks that sort a column, sent through the exchange.

``ir_dp`` releases a column in rank groups: rank ``r`` of the sorted column (its grid values)
holds the value of group ``layout.group(r)`` (:class:`~dpfast.partitions.ranking.RankGroups`),
and output row ``i`` holds rank ``order[i]``, ``order`` being :func:`dpfast.noise.permutation`
``(key, n)``. The tasks holding the sorted ranks compute those values and send them to the
output parts: neither the groups' sums nor their values pass through the driver
(docs/scale.md, "Rank groups through the exchange"):

1. **Emit**, on a task holding ranks ``[a, a + c)`` sorted (:meth:`RankedColumn.emit`): the
   groups whose ranks all lie there get their sums and values there (``values(sums,
   first_group)`` draws each group's noise from its own nonce). Each rank's value goes, with
   its bucket (:func:`dpfast.noise.permutation_buckets` of the ranks), to the parts holding
   its bucket. A group cut between two tasks (at most two a task) is sent as the ranks'
   places and, to every part holding one of its ranks, this task's share of its sum.
2. **Assemble**, in output part ``p`` (:meth:`RankedColumn.assemble`): each cut group's
   shares are added (exact integers) and its value computed; the part's buckets' items are
   put in the permutation's order (:func:`dpfast.noise.permutation_order`).

Every value is a function of the column's sums and keyed draws alone, so the parts are the
release that holds every group's value on the driver, bit for bit, however the ranks are
cut into tasks and in whatever order the pieces arrive. A categorical column needs no sort
(:func:`ranks_of_counts`, :class:`CodedGroups`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dpfast import noise
from dpfast._kernels import ranking
from dpfast._validation import quoted
from dpfast.dataflow.on_bound import OnBound
from dpfast.dataflow.rank_plans import RankPlan
from dpfast.dataflow.sorted_ranges import Ranges
from dpfast.dataflow.values import GroupCodes, RangeValues
from dpfast.engines.frames.parts import GroupsColumn, bucket_pieces, bucket_span
from dpfast.exceptions import DPFastRuntimeError, DPFastValueError
from dpfast.partitions.ranking import RankGroups

__all__ = [
    "BYTES_PER_SENT_RANK",
    "CHANGED_PART",
    "CodedGroups",
    "RankedColumn",
    "RankedPiece",
    "RankedState",
    "no_keys",
    "part_places",
    "ranks_of_counts",
    "tie_chunks",
]

#: Ranks of a run of ties one task sends (:func:`tie_chunks`).
RUN_CHUNK = 1 << 20

#: Bytes of a sort task's memory per key it sends (the pieces of the range's keys, the
#: sorted keys, their buckets, order and values, and the pieces sent: 47 bytes a key
#: beyond the keys measured with ``tracemalloc`` at 2.5M keys, 2026-11-29), so that a
#: range of ``memory // BYTES_PER_SENT_RANK`` keys fits a task's memory limit.
BYTES_PER_SENT_RANK = 80


@dataclass(frozen=True)
class RankedPiece:
    """What one task of sorted ranks sends to one output part, for one column.

    ``buckets`` and ``values``: the part's items among the task's ranks, by bucket (ranks
    increasing within one); ``pending``: their places whose group is cut between tasks, of
    groups ``pending_groups``; ``shares``: this task's ``(group, sum, ranks)`` of each cut group
    with a rank in the part; ``before``: whether each item's group value before the noise is on
    a bound (a cut group's is set where the part computes it), or ``None`` for none.
    """

    first_rank: int
    buckets: np.ndarray
    values: np.ndarray
    pending: np.ndarray
    pending_groups: np.ndarray
    shares: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    before: np.ndarray | None = None


@dataclass(frozen=True)
class RankedColumn:
    """A column released in the rank groups of ``layout`` by the tasks that hold its ranks.

    ``key`` is the permutation's key and ``starts`` its bucket starts (and ``n``); ``values``
    computes groups' released values from their exact sums, ``before`` (a numeric column's)
    their values before the noise; ``lower`` and ``upper`` bound the released values
    (:meth:`assemble` counts the rows on either: :class:`~dpfast.dataflow.on_bound.OnBound`).
    The methods' ``bounds`` are the output parts' first rows, and ``n``.
    """

    layout: RankGroups
    key: np.ndarray
    starts: np.ndarray
    values: RangeValues
    lower: float
    upper: float
    before: RangeValues | None = None

    @property
    def n(self) -> int:
        """The column's ranks (rows)."""
        return self.layout.n

    # -- on the tasks holding sorted ranks ----------------------------------------------

    def emit(
        self, bounds: np.ndarray, first_rank: int, words: np.ndarray
    ) -> list[tuple[int, RankedPiece]]:
        """Return the pieces the sorted ranks ``first_rank ..`` (grid values ``words``) send."""
        count = int(words.shape[0])
        a, b = int(first_rank), int(first_rank) + count
        if count == 0:
            return []
        if a < 0 or b > self.n:
            raise DPFastValueError(f"ranks {a} .. {b - 1} lie outside the column's {self.n}")
        layout = self.layout
        g0, g1 = layout.group(a), layout.group(b - 1)
        sums = np.zeros(g1 - g0 + 1, dtype=np.int64)
        ranking.add_group_sums(words, 0, a, *layout.scalars, sums, g0)
        spans = layout.span(g0), layout.span(g1)
        held = [min(hi, b) - max(lo, a) for lo, hi in spans]
        first_whole = g0 if spans[0][0] >= a else g0 + 1
        last_whole = g1 if spans[1][1] <= b else g1 - 1
        per_group = np.zeros(g1 - g0 + 1, dtype=np.float64)
        was = np.zeros(g1 - g0 + 1, dtype=bool)  # the groups on a bound before the noise
        if last_whole >= first_whole:
            inside = sums[first_whole - g0 : last_whole - g0 + 1]
            per_group[first_whole - g0 : last_whole - g0 + 1] = self.values(inside, first_whole)
            was[first_whole - g0 : last_whole - g0 + 1] = self._on_bound_before(inside, first_whole)
        sizes = layout.sizes_of(g0, g1 + 1)
        sizes[0], sizes[-1] = held[0], held[1]
        values = np.repeat(per_group, sizes) if g1 > g0 else np.full(count, per_group[0])
        before = np.repeat(was, sizes) if g1 > g0 else np.full(count, was[0])
        cut = [g for g in sorted({g0, g1}) if not (first_whole <= g <= last_whole)]
        # the places of the cut groups' ranks: a head and a tail of the task's ranks
        head = held[0] if g0 in cut else 0
        tail = count - held[1] if g1 in cut and g1 > g0 else count
        return self._pieces(bounds, a, (values, before), (head, tail), sums, g0, cut)

    def _on_bound_before(self, sums: np.ndarray, first_group: int) -> np.ndarray:
        """Return whether each group's value before the noise is on a bound (``before``)."""
        if self.before is None:
            return np.zeros(sums.shape[0], dtype=bool)
        values = self.before(sums, first_group)
        return (values <= self.lower) | (values >= self.upper)

    def emit_run(
        self, bounds: np.ndarray, first_rank: int, count: int, word: int
    ) -> list[tuple[int, RankedPiece]]:
        """Return the pieces of ``count`` ranks from ``first_rank`` that all hold ``word``.

        A run of ties needs no data; :func:`tie_chunks` cuts a long one into tasks.
        """
        return self.emit(bounds, first_rank, np.full(int(count), word, dtype=np.uint64))

    def _pieces(
        self,
        bounds: np.ndarray,
        a: int,
        held: tuple[np.ndarray, np.ndarray],
        whole: tuple[int, int],
        sums: np.ndarray,
        g0: int,
        cut: list[int],
    ) -> list[tuple[int, RankedPiece]]:
        values, before = held
        count = values.shape[0]
        shares = self._shares(bounds, a, a + count, sums, g0, cut)
        out = []
        pieces = bucket_pieces(self.key, self.n, self.starts, bounds, a, count, [*shares])
        for part, taken, run in pieces:
            pending = np.flatnonzero((taken < whole[0]) | (taken >= whole[1])).astype(np.int32)
            groups = self.layout.group_of(a + taken[pending])
            piece = RankedPiece(
                a,
                run,
                values[taken],
                pending,
                groups,
                shares.get(part, np.zeros((0, 3), dtype=np.int64)),
                before[taken] if self.before is not None else None,
            )
            out.append((part, piece))
        return out

    def _shares(
        self, bounds: np.ndarray, a: int, b: int, sums: np.ndarray, g0: int, cut: list[int]
    ) -> dict[int, np.ndarray]:
        """Return, by part, this task's shares of the cut groups with a rank in the part."""
        firsts, lasts = bucket_span(self.starts, bounds[:-1], bounds[1:])
        rows: dict[int, list[tuple[int, int, int]]] = {}
        for group in cut:
            lo, hi = self.layout.span(group)
            held = min(hi, b) - max(lo, a)
            ub = np.unique(noise.permutation_buckets(self.key, self.n, lo, hi - lo))
            present = np.searchsorted(ub, lasts) > np.searchsorted(ub, firsts)
            for part in np.flatnonzero(present).tolist():
                rows.setdefault(part, []).append((group, int(sums[group - g0]), held))
        return {part: np.array(r, dtype=np.int64) for part, r in rows.items()}

    # -- on the output's tasks ----------------------------------------------------------

    def assemble(
        self, bounds: np.ndarray, part: int, pieces: Iterable[RankedPiece]
    ) -> tuple[np.ndarray, OnBound]:
        """Return part ``part``'s values and rows on a bound, from ``pieces`` in any order."""
        held = sorted(pieces, key=lambda piece: piece.first_rank)
        lo, hi = int(bounds[part]), int(bounds[part + 1])
        values = np.concatenate([p.values for p in held]) if held else np.empty(0)
        before = np.zeros(values.shape[0], dtype=bool)
        if self.before is not None and held:
            before = np.concatenate([_flags(p) for p in held])
        self._fill_cut(part, held, values, before)
        at = part_places(self.key, self.n, self.starts, (lo, hi, part), [p.buckets for p in held])
        out, was = values[at], before[at]
        on = (out <= self.lower) | (out >= self.upper)
        counted = OnBound(
            int(np.count_nonzero(on)), int(np.count_nonzero(was)), int(np.count_nonzero(on & ~was))
        )
        return out, counted

    def _fill_cut(
        self, part: int, held: list[RankedPiece], values: np.ndarray, before: np.ndarray
    ) -> None:
        """Give the cut groups' places their values (and flags), from the shares of their sums."""
        shares = [p.shares for p in held if p.shares.shape[0]]
        if not shares:
            if any(p.pending.shape[0] for p in held):
                raise DPFastRuntimeError(CHANGED_PART.format(part=part))
            return
        rows = np.concatenate(shares)
        groups, index = np.unique(rows[:, 0], return_inverse=True)
        totals = np.zeros(groups.shape[0], dtype=np.int64)
        ranks = np.zeros(groups.shape[0], dtype=np.int64)
        np.add.at(totals, index, rows[:, 1])
        np.add.at(ranks, index, rows[:, 2])
        group_values = np.empty(groups.shape[0], dtype=np.float64)
        group_before = np.zeros(groups.shape[0], dtype=bool)
        for i, group in enumerate(groups.tolist()):
            lo, hi = self.layout.span(group)
            if ranks[i] != hi - lo:
                raise DPFastRuntimeError(CHANGED_PART.format(part=part))
            group_values[i] = self.values(totals[i : i + 1], group)[0]
            group_before[i] = self._on_bound_before(totals[i : i + 1], group)[0]
        offset = 0
        for piece in held:
            if piece.pending.shape[0]:
                found = np.searchsorted(groups, piece.pending_groups)
                if np.any(found >= groups.shape[0]) or np.any(
                    groups[np.minimum(found, groups.shape[0] - 1)] != piece.pending_groups
                ):
                    raise DPFastRuntimeError(CHANGED_PART.format(part=part))
                values[offset + piece.pending] = group_values[found]
                before[offset + piece.pending] = group_before[found]
            offset += piece.values.shape[0]


def _flags(piece: RankedPiece) -> np.ndarray:
    """Return a piece's items' flags: on a bound before the noise (none where not sent)."""
    if piece.before is None:
        return np.zeros(piece.values.shape[0], dtype=bool)
    return piece.before


@dataclass(frozen=True)
class CodedGroups:
    """A categorical column's group values: ``codes(counts, first, stop)`` as floats.

    Codes depend on the column's records per taxonomy rank (``counts``) and the groups'
    numbers alone, not the ranks' sums: any task sending ranks draws their groups' codes.
    """

    codes: GroupCodes
    counts: np.ndarray

    def __call__(self, sums: np.ndarray, first_group: int) -> np.ndarray:
        """Return the codes of groups ``first_group ..`` (as many as ``sums``), as floats."""
        stop = first_group + int(sums.shape[0])
        return np.asarray(self.codes(self.counts, first_group, stop), dtype=np.float64)


def ranks_of_counts(counts: np.ndarray) -> RankPlan:
    """Return the plan of a column whose sorted ranks ``counts`` gives: runs of ties only.

    Taxonomy rank ``r`` holds ranks ``sum(counts[:r]) ..``, ``counts[r]`` of them; no
    task sorts or reads the column.
    """
    ends = np.cumsum(counts)
    runs = tuple(
        (r, int(end - count), int(count))
        for r, (end, count) in enumerate(zip(ends.tolist(), counts.tolist(), strict=True))
        if count > 0
    )
    none, no_ranks = np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    return RankPlan(Ranges(none, none, no_ranks), no_ranks, runs, 0, 0)


def no_keys(batch: Any, first_row: int) -> np.ndarray:
    """Refuse to read a column whose ranks need no sort (:func:`ranks_of_counts`)."""
    raise DPFastRuntimeError("a column planned by its counts is never read")


@dataclass(frozen=True)
class RankedState:
    """What the tasks of a release need to sort a column and send its rank groups.

    ``plan`` cuts the column's grid values into the ranges the workers sort (and ties that
    need none); ``keys(batch, first_row)`` maps a batch to its grid values; ``column`` places
    the values; ``output`` gives the output type (not its group values).
    """

    name: str
    column: RankedColumn
    plan: RankPlan
    keys: Callable[[Any, int], np.ndarray]
    output: GroupsColumn

    def emit_sorted(
        self, bounds: np.ndarray, index: int, ordered: np.ndarray
    ) -> list[tuple[int, RankedPiece]]:
        """Return the pieces of range ``index``'s sorted keys; check the range's count."""
        counts = self.plan.ranges.counts
        if counts is not None and ordered.shape[0] != int(counts[index]):
            raise DPFastRuntimeError(_CHANGED_RANGE.format(name=quoted(self.name)))
        return self.column.emit(bounds, int(self.plan.first_ranks[index]), ordered)

    @functools.cached_property
    def ties(self) -> list[tuple[int, int, int]]:
        """The plan's runs of ties cut into chunks: ``(grid value, first rank, count)``."""
        return tie_chunks(self.plan.runs)

    def emit_ties(self, bounds: np.ndarray, index: int) -> list[tuple[int, RankedPiece]]:
        """Return the pieces of chunk ``index`` of the runs of ties (no data is read)."""
        word, first_rank, count = self.ties[index]
        return self.column.emit_run(bounds, first_rank, count, word)

    def arrow(self, values: np.ndarray) -> pa.Array:
        """Return released values as the column's output array."""
        return self.output.array(values)


def tie_chunks(runs: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Cut runs of ties ``(grid value, first rank, count)`` into chunks of :data:`RUN_CHUNK`.

    A run of ties may hold most of a column; a chunk is what one task sends.
    """
    return [
        (word, start, min(RUN_CHUNK, first + count - start))
        for word, first, count in runs
        for start in range(first, first + count, RUN_CHUNK)
    ]


_CHANGED_RANGE = (
    "column {name} gave other values than when it was counted: a release reads it "
    "several times, so make it deterministic (persist it) and release it again"
)


def part_places(
    key: np.ndarray,
    n: int,
    starts: np.ndarray,
    span: tuple[int, int, int],
    buckets: list[np.ndarray],
) -> np.ndarray:
    """Return where output rows ``[lo, hi)`` of part ``part`` stand among its items.

    ``span`` is ``(lo, hi, part)``; ``buckets``: in ``permutation(key, n)`` (bucket starts
    ``starts``, and ``n``), those of the items the part received, piece by piece in order of
    their first items (each piece by bucket). Item ``at[i]`` holds output row ``lo + i``.
    """
    lo, hi, part = span
    first, last = bucket_span(starts, lo, hi)
    held = np.concatenate(buckets) if buckets else np.empty(0, dtype=np.int32)
    try:
        at = noise.permutation_order(key, n, int(first), int(last), held, np.diff(starts))
    except DPFastValueError as exc:
        raise DPFastRuntimeError(CHANGED_PART.format(part=part)) from exc
    offset = lo - int(starts[first])
    return at[offset : offset + hi - lo]


#: Why an output part did not receive all of its items (rows, or ranks).
CHANGED_PART = (
    "part {part} of the release did not receive its rows: the input gave other rows than "
    "when it was counted; make it deterministic (persist it) and release it again"
)
