"""Rank-group values made by the sorting tasks and sent through the exchange.

The code under test: dpfast/engines/frames/sent_ranks.py.

Checked against the obvious reading: every group's sum over the whole sorted column, every
group's value from one call, and output row ``i`` holding rank ``permutation(key, n)[i]``'s
group value.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from dpfast import noise
from dpfast._kernels import ranking
from dpfast.dataflow.on_bound import OnBound, rank_groups_on_bound
from dpfast.engines.frames import sent_ranks
from dpfast.engines.frames.parts import bucket_starts
from dpfast.engines.frames.sent_ranks import RankedColumn
from dpfast.exceptions import DPFastRuntimeError
from dpfast.methods.ir_dp import _NoisyCentroids
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups
from tests.reference import ir_reference


def _values(layout: RankGroups, d_int: int, scale: int, key: np.ndarray) -> _NoisyCentroids:
    """``ir_dp``'s group values on the grid ``[0, d_int]`` of step 1 (noise of ``scale``)."""
    grid = Grid(0.0, float(d_int), 1.0, d_int, 0)
    return _NoisyCentroids("x", grid, layout, scale, False, key)


def _column(
    n: int, k: int, d_int: int, scale: int, seed: int, remainder: str = "middle"
) -> RankedColumn:
    """A column of ``n`` ranks in groups of ``k``, its values and its order keyed by ``seed``."""
    source = noise.NoiseSource.from_seed(seed)
    layout = RankGroups(n, k, remainder)
    values = _values(layout, d_int, scale, source.key("values"))
    key = source.key("order")
    lower, upper = 0.0, float(d_int)
    return RankedColumn(
        layout, key, bucket_starts(key, n), values, lower, upper, values.before_noise
    )


def _groups(n: int, k: int, remainder: str) -> np.ndarray:
    """Each rank's group, from the reference's group sizes."""
    return np.repeat(np.arange(n // k), ir_reference.group_sizes(n, k, remainder))


def _expected(words: np.ndarray, column: RankedColumn) -> np.ndarray:
    n, k = words.shape[0], column.layout.k
    groups = _groups(n, k, column.layout.remainder)
    sums = np.zeros(n // k, dtype=np.int64)
    np.add.at(sums, groups, words.astype(np.int64))
    group_values = column.values(sums, 0)
    order = noise.permutation(column.key, n)
    return group_values[groups[order]]


def _cuts(rng: random.Random, n: int, most: int) -> list[int]:
    points = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(0, most)))) if n > 1 else []
    return [0, *points, n]


def _release(
    column: RankedColumn, words: np.ndarray, tasks: list[int], bounds: np.ndarray, seed: int
) -> tuple[list[list[sent_ranks.RankedPiece]], int]:
    """Emit every task's ranks (a run of ties with ``emit_run``); return the pieces by part."""
    by_part: list[list[sent_ranks.RankedPiece]] = [[] for _ in range(bounds.shape[0] - 1)]
    for a, b in itertools.pairwise(tasks):
        if words[a] == words[b - 1]:  # a run of ties, in chunks as the tasks send them
            chunks = sent_ranks.tie_chunks([(int(words[a]), a, b - a)])
            assert sum(count for _, _, count in chunks) == b - a
            sent = [
                sent_piece
                for word, first, count in chunks
                for sent_piece in column.emit_run(bounds, first, count, word)
            ]
        else:
            sent = column.emit(bounds, a, words[a:b].copy())
        for part, piece in sent:
            by_part[part].append(piece)
    for pieces in by_part:
        random.Random(seed).shuffle(pieces)
    return by_part, len(tasks) - 1


@pytest.mark.parametrize("seed", range(40))
def test_the_parts_are_the_release_of_every_group_held_in_one_place(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    chunk = rng.choice([1, 3, 7, 1 << 20])
    n = rng.choice([1, 2, 5, 17, 300, 2_000, 70_000])
    # a run of ties is sent in chunks of RUN_CHUNK rows, one piece each, all in Python: at
    # 70,000 rows, chunks of at least 35 rows (2,000 pieces a run at most), the path that
    # chunks of 1 row take at 2,000 rows (70,000 pieces took 30 s)
    monkeypatch.setattr(sent_ranks, "RUN_CHUNK", max(chunk, n // 2_000))
    k = rng.randint(1, min(n, 40))
    d_int = rng.choice([1, 3, 50, 10_000])
    words = np.sort(np.random.default_rng(seed).integers(0, d_int + 1, n)).astype(np.uint64)
    column = _column(n, k, d_int, rng.choice([0, 1, 4]), seed, rng.choice(["middle", "last"]))
    tasks = _cuts(rng, n, rng.choice([0, 3, 40, 400]))
    big_lo, big_hi = column.layout.span(column.layout.big)
    if seed % 2 and big_hi - big_lo > 2:  # tasks that start or end inside the big group
        tasks = sorted({*tasks, big_lo + 1, big_hi - 1})
    bounds = np.array(_cuts(rng, n, rng.choice([0, 2, 30])), dtype=np.int64)
    by_part, _ = _release(column, words, tasks, bounds, seed)

    parts = [column.assemble(bounds, p, pieces) for p, pieces in enumerate(by_part)]
    released = np.concatenate([values for values, _ in parts])
    expected = _expected(words, column)
    assert np.array_equal(released, expected)
    on_bound = sum((count for _, count in parts), OnBound())
    sums = np.zeros(n // k, dtype=np.int64)
    ranking.add_group_sums(words, 0, 0, *column.layout.scalars, sums)
    assert isinstance(column.values, _NoisyCentroids)
    before = column.values.before_noise(sums)
    # every row counted as its group: released on a bound, there before, pushed there
    released_values = column.values(sums)
    assert on_bound == rank_groups_on_bound(released_values, before, column.layout, (0.0, d_int))
    assert on_bound.released == int(np.count_nonzero((expected <= 0) | (expected >= d_int)))


@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_a_group_cut_across_many_tasks_and_parts_gets_one_value(remainder: str) -> None:
    n, k = 1_099, 100  # ten groups, group 5 (middle) or 9 (last) of 199 ranks
    words = np.sort(np.random.default_rng(3).integers(0, 20, n)).astype(np.uint64)
    column = _column(n, k, 20, 2, 3, remainder)
    tasks = list(range(0, n + 1, 7)) + ([n] if n % 7 else [])
    bounds = np.r_[np.arange(0, n, 50), n]
    by_part, _ = _release(column, words, tasks, bounds, 0)
    assert all(any(p.pending.shape[0] for p in pieces) for pieces in by_part)
    released = np.concatenate([column.assemble(bounds, p, x)[0] for p, x in enumerate(by_part)])
    assert np.array_equal(released, _expected(words, column))


def test_values_of_a_slice_of_groups_are_those_of_all_groups() -> None:
    rng = np.random.default_rng(5)
    n, k = 1_003, 10
    sums = rng.integers(0, 100 * k, n // k)
    values = _values(RankGroups(n, k), 100, 3, noise.NoiseSource.from_seed(5).key("v"))
    whole = values(sums)
    for lo, hi in [(0, 1), (3, 40), (99, 100), (50, 100)]:
        assert np.array_equal(values(sums[lo:hi], lo), whole[lo:hi])


@pytest.mark.parametrize("drop", ["items", "share"])
def test_a_part_missing_a_piece_says_the_input_changed(drop: str) -> None:
    n, k = 5_000, 30
    words = np.sort(np.random.default_rng(9).integers(0, 1_000, n)).astype(np.uint64)
    column = _column(n, k, 1_000, 2, 9)
    tasks = [0, 1_001, 2_500, n]
    bounds = np.array([0, 2_000, n])
    by_part, _ = _release(column, words, tasks, bounds, 0)
    pieces = sorted(by_part[0], key=lambda p: p.first_rank)
    if drop == "items":
        pieces = pieces[1:]
    else:
        pieces = [
            sent_ranks.RankedPiece(p.first_rank, p.buckets, p.values, p.pending, p.pending_groups)
            if p.first_rank == 1_001
            else p
            for p in pieces
        ]
    with pytest.raises(DPFastRuntimeError, match="did not receive its rows"):
        column.assemble(bounds, 0, pieces)


def test_each_task_sends_its_shares_only_where_the_group_has_ranks() -> None:
    n, k = 100_000, 10
    words = np.arange(n, dtype=np.uint64)
    column = _column(n, k, n, 1, 1)
    key, starts = column.key, column.starts
    bounds = np.arange(0, n + 1, 1_000)
    sent = column.emit(bounds, 5, words[5:50_005])
    # the parts holding a bucket of each cut group's ranks, found one rank at a time
    where = np.argsort(noise.permutation(key, n))  # each rank's output row
    expected = set()
    for group in (0, 5_000):
        for rank in range(group * k, group * k + k):
            bucket = int(np.searchsorted(starts, where[rank], side="right")) - 1
            lo, hi = starts[bucket], starts[bucket + 1]
            for part in range(bounds.shape[0] - 1):
                if bounds[part] < hi and bounds[part + 1] > lo:
                    expected.add((part, group))
    shares = {(part, int(row[0])) for part, piece in sent for row in piece.shares}
    assert shares == expected
    held = {int(row[2]) for _, piece in sent for row in piece.shares}
    assert held == {5}  # ranks 5 .. 9 of group 0, and 50_000 .. 50_004 of group 5_000
    assert sum(piece.buckets.shape[0] for _, piece in sent) >= 50_000


@pytest.mark.parametrize("seed", range(6))
def test_the_order_by_bucket_is_a_stable_sort(seed: int) -> None:
    from dpfast.engines.frames.parts import bucket_order, bucket_run

    rng = np.random.default_rng(seed)
    n_buckets = int(rng.choice([1, 2, 256, 5_000]))
    buckets = rng.integers(0, n_buckets, int(rng.choice([0, 1, 1_000, 100_000])))
    order, at = bucket_order(buckets, n_buckets)
    assert np.array_equal(order, np.argsort(buckets, kind="stable"))
    assert np.array_equal(at, np.searchsorted(np.sort(buckets), np.arange(n_buckets + 1)))
    lo, hi = sorted(rng.integers(0, n_buckets + 1, 2).tolist())
    assert np.array_equal(bucket_run(at, lo, hi, np.int32), np.sort(buckets)[at[lo] : at[hi]])


# ---------------------------------------- a categorical column: its ranks from its counts


@pytest.mark.parametrize("seed", range(12))
def test_a_categorical_columns_parts_are_its_codes_drawn_in_one_place(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codes drawn by chunks of the counts' runs, as the tasks draw them, then assembled."""
    rng = random.Random(seed)
    monkeypatch.setattr(sent_ranks, "RUN_CHUNK", rng.choice([1, 5, 64, 1 << 20]))
    m = rng.randint(1, 6)
    counts = np.array([rng.choice([0, 1, 3, 40, 900]) for _ in range(m)], dtype=np.int64)
    counts[rng.randrange(m)] += 1
    n = int(counts.sum())
    k = rng.randint(1, min(n, 30))
    layout = RankGroups(n, k, "middle" if seed % 2 else "last")
    distance = np.abs(np.subtract.outer(np.arange(m), np.arange(m))) * 1_000
    source = noise.NoiseSource.from_seed(seed)
    draw_key, key = source.key("codes"), source.key("order")

    def codes(counts: np.ndarray, first: int, stop: int) -> np.ndarray:
        return noise.exponential_mechanism_sorted_groups(
            draw_key,
            counts,
            k,
            distance,
            epsilon=2.0,
            sensitivity=1_000,
            groups=(first, stop),
            big=layout.big,
        )

    values = sent_ranks.CodedGroups(codes, counts)
    column = RankedColumn(layout, key, bucket_starts(key, n), values, -np.inf, np.inf)
    plan = sent_ranks.ranks_of_counts(counts)
    assert len(plan.ranges) == 0 and sum(c for _, _, c in plan.runs) == n
    bounds = np.array(_cuts(rng, n, rng.choice([0, 2, 30])), dtype=np.int64)
    by_part: list[list[sent_ranks.RankedPiece]] = [[] for _ in range(bounds.shape[0] - 1)]
    for word, first, count in sent_ranks.tie_chunks(plan.runs):
        for part, piece in column.emit_run(bounds, first, count, word):
            by_part[part].append(piece)
    for pieces in by_part:
        random.Random(seed).shuffle(pieces)
    parts = [column.assemble(bounds, p, pieces) for p, pieces in enumerate(by_part)]
    whole = noise.exponential_mechanism_sorted_groups(
        draw_key, counts, k, distance, epsilon=2.0, sensitivity=1_000, big=layout.big
    )
    order = noise.permutation(key, n)
    expected = whole[_groups(n, k, layout.remainder)[order]]
    assert np.array_equal(np.concatenate([v for v, _ in parts]), expected)
    assert sum((on_bound for _, on_bound in parts), OnBound()) == OnBound()  # no bound


def test_a_column_planned_by_its_counts_is_never_read() -> None:
    with pytest.raises(DPFastRuntimeError, match="never read"):
        sent_ranks.no_keys(None, 0)
