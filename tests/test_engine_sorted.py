"""Ranks on a cluster: ranges sorted on the workers, rank group sums added there.

The pieces (:mod:`dpfast.dataflow.sorted_ranges`) against slow references, each range in
its own Spark partition, and ``ir_dp`` on Spark and Dask, where the workers sort
and the driver only plans, against the in-memory release under limits that force every
path: balanced ranges, refined buckets, ties added on the driver, the remainder group.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpfast
from dpfast._kernels import ranking
from dpfast.dataflow.sorted_ranges import (
    GroupSums,
    KeyBuffers,
    Ranges,
    add_parts,
    keys_by_range,
    sorted_runs,
)
from dpfast.exceptions import DPFastTypeError
from dpfast.partitions.ranking import RankGroups
from tests.engine_runs import apart_from_engine, on_engine
from tests.reference import ir_reference

K, EPSILON, SEED = 7, 4.0, 23
BOUNDS = {"u": (0.0, 100.0), "tie": (0.0, 100.0), "top": (0.0, 10.0), "i": (-50, 50)}


def _ranges(cuts: list[tuple[int, int]]) -> Ranges:
    table = np.array(cuts, dtype=np.uint64)
    return Ranges(table[:, 0].copy(), table[:, 1].copy())


# --------------------------------------------------------------------------- pieces


def test_ranges_refuse_overlapping_or_empty_ranges():
    with pytest.raises(ValueError, match="lo < hi"):
        _ranges([(3, 3)])
    with pytest.raises(ValueError, match="disjoint"):
        _ranges([(0, 5), (4, 9)])
    lo, hi = np.array([0, 5], np.uint64), np.array([5, 9], np.uint64)
    assert Ranges(lo, hi, np.array([3, 0])).counts.tolist() == [3, 0]
    for counts in (np.array([3]), np.array([3, -1])):
        with pytest.raises(ValueError, match="counts must give every range"):
            Ranges(lo, hi, counts)


def _slow_range(x: int, ranges: Ranges) -> int:
    """The range holding ``x`` (-1 for none), found by looking at every range."""
    return next(
        (i for i, (lo, hi) in enumerate(zip(ranges.lo, ranges.hi, strict=True)) if lo <= x < hi),
        -1,
    )


def test_range_index_and_keys_by_range_match_a_slow_reference():
    rng = np.random.default_rng(1)
    ranges = _ranges([(3, 10), (10, 11), (40, 90), (100, 1 << 40)])
    keys = rng.integers(0, 200, 5000).astype(np.uint64)
    keys[:5] = [1 << 41, 10, 99, 0, (1 << 64) - 1]
    expected = np.array([_slow_range(x, ranges) for x in keys.tolist()])
    np.testing.assert_array_equal(ranges.index(keys), expected)
    groups = keys_by_range(keys, ranges)
    assert len(groups) == len(ranges)
    for i, group in enumerate(groups):  # each range's keys, in their input order
        np.testing.assert_array_equal(group, keys[expected == i])
        assert group.dtype == np.uint64
    assert sum(g.shape[0] for g in groups) == int((expected >= 0).sum())


@pytest.mark.parametrize("count", [1, 2, 5, 40, 333])
def test_keys_by_range_matches_a_slow_reference_for_many_ranges(count):
    rng = np.random.default_rng(count)
    cuts = np.unique(rng.integers(0, 1 << 50, 2 * count + 2).astype(np.uint64))
    ranges = Ranges(cuts[0:-1:2].copy(), cuts[1::2].copy())  # gaps between the ranges
    keys = rng.integers(0, 1 << 50, 3000).astype(np.uint64)
    keys[:count] = ranges.lo[:count]  # on every lower bound (inside)
    keys[count : 2 * count] = ranges.hi[:count]  # on every upper bound (outside: gaps between)
    expected = np.array([_slow_range(x, ranges) for x in keys.tolist()])
    groups = keys_by_range(keys, ranges)
    assert len(groups) == len(ranges)
    for i, group in enumerate(groups):
        np.testing.assert_array_equal(group, keys[expected == i])


def test_keys_by_one_range_keeps_all_keys_or_drops_those_outside():
    ranges = _ranges([(10, 20)])
    inside = np.array([10, 19, 15, 10], dtype=np.uint64)
    (kept,) = keys_by_range(inside, ranges)  # every key inside: kept as they are
    assert kept is inside
    for outside in ([9, 10, 15], [10, 20, 15]):
        keys = np.array(outside, dtype=np.uint64)
        (kept,) = keys_by_range(keys, ranges)
        np.testing.assert_array_equal(kept, keys[(keys >= 10) & (keys < 20)])
    empty = keys_by_range(np.empty(0, dtype=np.uint64), _ranges([(0, 5), (5, 9)]))
    assert [g.shape[0] for g in empty] == [0, 0]


@pytest.mark.parametrize(("lo", "hi", "shift"), [(0, 1 << 40, 24), (5, 5000, 0), (1000, 1001, 3)])
def test_bucket_counts_match_a_slow_reference(lo, hi, shift):
    from dpfast.dataflow.rank_plans import _BucketCounts

    rng = np.random.default_rng(hi)
    keys = rng.integers(0, 2 * hi, 20_000).astype(np.uint64)
    keys[:4] = [lo, hi - 1, hi, max(0, lo - 1)]  # both ends inside, one past each end
    size = ((hi - 1 - lo) >> shift) + 1
    expected = np.zeros(size, dtype=np.int64)
    for x in keys.tolist():
        if lo <= x < hi:
            expected[(x - lo) >> shift] += 1
    np.testing.assert_array_equal(_BucketCounts(lo, hi, shift, size)(keys), expected)


def test_sorted_runs_give_each_present_range_its_sorted_keys():
    rng = np.random.default_rng(2)
    ranges = _ranges([(0, 50), (50, 60), (70, 200), (300, 400)])
    keys = rng.choice(np.r_[0:60, 70:200], 3000).astype(np.uint64)  # range 3 absent
    runs = [(i, part.copy()) for i, part in sorted_runs(keys.copy(), 9, ranges)]
    assert [i for i, _ in runs] == [0, 1, 2]
    for i, part in runs:
        inside = keys[(keys >= ranges.lo[i]) & (keys < ranges.hi[i])]
        np.testing.assert_array_equal(part, np.sort(inside))
    assert list(sorted_runs(np.empty(0, dtype=np.uint64), 9, ranges)) == []


@pytest.mark.parametrize(("n", "k"), [(1000, 7), (1001, 10), (64, 64), (130, 64), (1009, 9)])
@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_group_sums_of_ranges_add_up_to_the_whole_columns(n, k, remainder):
    rng = np.random.default_rng(n + k)
    layout = RankGroups(n, k, remainder)
    values = np.sort(rng.integers(0, 1 << 20, n).astype(np.uint64))
    groups = np.repeat(np.arange(n // k), ir_reference.group_sizes(n, k, remainder))
    expected = np.bincount(groups, values.astype(np.int64)).astype(np.int64)
    big_lo, big_hi = layout.span(layout.big)
    for parts in (1, 2, 5, 17):
        cuts = np.r_[0, np.sort(rng.integers(1, n, parts - 1)), n]
        if parts == 5:  # ranges that start and end inside the big group
            cuts = np.r_[cuts, big_lo + 1, big_hi - 1]
        cuts = np.unique(cuts)
        reduce = GroupSums(cuts[:-1].astype(np.int64), layout)
        results = [
            reduce(i, values[lo:hi].copy()) for i, (lo, hi) in enumerate(itertools.pairwise(cuts))
        ]
        got = np.zeros(n // k, dtype=np.int64)
        add_parts(results[::-1], got, np.diff(cuts), lambda: AssertionError("counts"))
        np.testing.assert_array_equal(got, expected)


def test_quantise_flagged_is_quantise_column_with_the_clamped_flag_in_the_low_bit():
    rng = np.random.default_rng(3)
    values = np.r_[rng.uniform(-20, 120, 5000), 0.0, 100.0, -0.0, 1e300, -1e300]
    lower, upper, gamma = 0.0, 100.0, 2.0**-10
    d_int = round((upper - lower) / gamma)
    warp = None  # no transform
    flagged = ranking.quantise_flagged(values, lower, upper, gamma, d_int, warp)
    q, clamped = ranking.quantise_column(values, lower, upper, gamma, d_int, warp)
    np.testing.assert_array_equal(flagged >> np.uint64(1), q)
    outside = (values < lower) | (values > upper)  # the reference: clamped into the domain
    np.testing.assert_array_equal((flagged & np.uint64(1)).astype(bool), outside)
    assert int(outside.sum()) == clamped > 0


@pytest.mark.parametrize("n", [0, 1, 7, 5000])
def test_drop_flags_counts_the_odd_words_and_shifts_them_in_place(n):
    rng = np.random.default_rng(n)
    words = rng.integers(0, 1 << 62, n, dtype=np.int64).astype(np.uint64)
    words[: n // 3] |= np.uint64(1)  # and some words with the top bit set
    words[n // 2 :: 5] |= np.uint64(1) << np.uint64(63)
    expected = int(sum(int(w) & 1 for w in words))  # the reference, word by word
    shifted = [int(w) >> 1 for w in words]
    given = words
    assert ranking.drop_flags(words) == expected
    assert words is given and words.tolist() == shifted


@pytest.mark.parametrize(("n", "k"), [(1000, 7), (130, 64)])
def test_flagged_group_sums_count_the_flags_and_sum_the_grid_values(n, k):
    rng = np.random.default_rng(n)
    q = rng.integers(0, 1 << 20, n).astype(np.uint64)
    flags = rng.integers(0, 2, n).astype(np.uint64)
    keys = np.sort((q << np.uint64(1)) | flags)
    layout = RankGroups(n, k)
    expected = np.zeros(n // k, dtype=np.int64)
    ranking.add_group_sums(np.sort(q), 0, 0, *layout.scalars, expected)
    reduce = GroupSums(np.zeros(1, dtype=np.int64), layout, flagged=True)
    got = np.zeros(n // k, dtype=np.int64)
    assert add_parts([reduce(0, keys.copy())], got, np.array([n]), None) == int(flags.sum())
    np.testing.assert_array_equal(got, expected)
    unflagged = GroupSums(np.zeros(1, dtype=np.int64), layout)
    assert unflagged(0, np.sort(q))[4] == 0


def test_key_buffers_give_back_the_smallest_that_fits_and_keep_the_largest_two():
    buffers = KeyBuffers()
    first = buffers.take(100)
    assert first.dtype == np.uint64 and first.shape == (100,) and buffers.kept_bytes == 0
    second = buffers.take(60)
    buffers.give(first, second[:10])  # a view goes back as the buffer it came from
    assert buffers.kept_bytes == 8 * 160
    again = buffers.take(50)  # the smallest that fits: the 60-word buffer's start
    assert again.shape == (50,) and again.base is second
    assert buffers.take(80).base is first
    buffers.give(again, first)
    larger = buffers.take(1000)  # none fits: the kept buffers are freed, not held beside it
    assert buffers.kept_bytes == 0 and larger.shape == (1000,)
    buffers.give(larger, buffers.take(5), buffers.take(7))
    assert buffers.kept_bytes == 8 * (1000 + 7)  # the largest two
    buffers.clear()
    assert buffers.kept_bytes == 0
    # a pickled pool is an empty one: its buffers stay with the process that took them
    buffers.give(buffers.take(9))
    copied = pickle.loads(pickle.dumps(buffers))
    assert copied.kept_bytes == 0 and copied.most == buffers.most and buffers.kept_bytes == 72


def test_a_sort_with_kept_buffers_is_the_sort_without():
    rng = np.random.default_rng(4)
    ranges = _ranges([(0, 400), (400, 1 << 20)])
    buffers = KeyBuffers()
    for n in (3000, 2000, 3000):  # a smaller sort reuses the start of the buffers
        keys = rng.integers(0, 1 << 20, n).astype(np.uint64)
        expected = [(i, run.copy()) for i, run in sorted_runs(keys.copy(), 20, ranges)]
        held, scratch = buffers.take(n), buffers.take(n)
        held[:] = keys
        got = [(i, run.copy()) for i, run in sorted_runs(held, 20, ranges, scratch)]
        buffers.give(held, scratch)
        assert [i for i, _ in got] == [i for i, _ in expected]
        for (_, a), (_, b) in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)
    assert buffers.kept_bytes == 2 * 8 * 3000


def test_add_parts_refuses_changed_counts_and_a_range_sorted_twice():
    reduce = GroupSums(np.array([0, 10]), RankGroups(20, 5))
    values = np.arange(20, dtype=np.uint64)
    parts = [reduce(0, values[:10]), reduce(1, values[10:])]
    changed = RuntimeError("changed")
    with pytest.raises(RuntimeError, match="changed"):
        add_parts(parts, np.zeros(4, dtype=np.int64), np.array([10, 9]), lambda: changed)
    with pytest.raises(RuntimeError, match="changed"):  # a range whose keys vanished
        add_parts(parts[:1], np.zeros(4, dtype=np.int64), np.array([10, 10]), lambda: changed)
    with pytest.raises(RuntimeError, match="two tasks"):
        add_parts([*parts, parts[0]], np.zeros(4, dtype=np.int64), np.array([10, 10]), None)


def test_a_schema_checked_source_sorts_where_its_source_does_over_checked_batches(tmp_path):
    from dpfast.engines.outofcore._sources import ArrowSource, SchemaCheckedSource
    from dpfast.schema import Schema

    schema = Schema.from_dict({"columns": {"i": {"type": "integer", "bounds": [-5, 5]}}})
    table = pa.table({"i": pa.array([1.0, 2.0, 2.5, None], pa.float64())})

    class Sorting(ArrowSource):
        """A source whose sort runs ``keys`` on its batches and returns the results."""

        sorts_in_place = True
        sort_tasks = 3

        def sort_ranges(self, name, batch_rows, keys, ranges, key_bits, reduce):
            return [
                keys(self.table.column(name).slice(lo, 1).combine_chunks(), lo) for lo in (0, 1)
            ]

    plain = SchemaCheckedSource(ArrowSource(table), schema)
    assert (plain.sorts_in_place, plain.sort_tasks) == (False, 1)
    with pytest.raises(DPFastTypeError, match="ArrowSource does not sort ranges"):
        plain.sort_ranges("i", 1, lambda a, first: a, _ranges([(0, 8)]), 3, None)
    checked = SchemaCheckedSource(Sorting(table), schema)
    assert (checked.sorts_in_place, checked.sort_tasks) == (True, 3)
    ranges = _ranges([(0, 8)])
    seen = checked.sort_ranges("i", 1, lambda a, first: (a.type, a.to_pylist()), ranges, 3, None)
    assert seen == [(pa.int64(), [1]), (pa.int64(), [2])]  # cast to the declared integers

    def failing(lo):
        class One(Sorting):
            def sort_ranges(self, name, batch_rows, keys, ranges, key_bits, reduce):
                return [keys(self.table.column(name).slice(lo, 1).combine_chunks(), lo)]

        source = SchemaCheckedSource(One(table), schema)
        return source.sort_ranges("i", 1, lambda a, first: a, ranges, 3, None)

    with pytest.raises(ValueError, match="row 2"):  # 2.5 is no integer
        failing(2)
    with pytest.raises(ValueError, match="missing value at row 3"):
        failing(3)


# --------------------------------------------------------------------------- releases


def _table(n: int = 6001) -> pd.DataFrame:
    """Columns forcing each path at a 1024-value sort limit, n % K == 2 (a remainder)."""
    rng = np.random.default_rng(9)
    tie = rng.uniform(0, 100, n)
    tie[rng.permutation(n)[:2600]] = 37.25  # one grid value above the limit: a driver run
    top = rng.uniform(-1, 12, n)
    top[: n // 2] = 10.0  # half of the rows on the upper bound
    return pd.DataFrame(
        {
            "u": rng.uniform(-3, 103, n),  # dense: many ranges, groups straddling them
            "tie": tie,
            "top": top,
            "i": rng.integers(-60, 61, n),
        }
    )


def _expected(table: pd.DataFrame, remainder: str) -> dpfast.Release:
    return dpfast.ir_dp(table, k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED, remainder=remainder)


def _assert_same(data: pd.DataFrame, report, private, expected: dpfast.Release) -> None:
    assert list(data.columns) == list(expected.data.columns)
    for name in expected.data.columns:  # in order: the rows are in ir_dp's shuffled order
        assert data[name].dtype == expected.data[name].dtype
        np.testing.assert_array_equal(data[name].to_numpy(), expected.data[name].to_numpy())
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped


def _assert_sorted_where_needed(calls: list[int], memory_limit: int) -> None:
    """Every column is sorted on the workers: whole within the limit, else by ranges."""
    if memory_limit == 1 << 15:  # at most 1024 values a range: one sort job a column,
        assert len(calls) == 4  # the tie's too, and 6001 values in at least 6 ranges
        assert max(calls) >= 6 and min(calls) >= 3
    else:  # one job a column, its one range the whole column
        assert calls == [1, 1, 1, 1]


class _Recorder:
    """Wrap a source class's ``sort_ranges`` and record how many ranges each call had."""

    def __init__(self, monkeypatch, cls):
        self.calls: list[int] = []
        original = cls.sort_ranges

        def recorded(source, name, batch_rows, keys, ranges, key_bits, reduce):
            self.calls.append(len(ranges))
            return original(source, name, batch_rows, keys, ranges, key_bits, reduce)

        monkeypatch.setattr(cls, "sort_ranges", recorded)


#: (memory limit, remainder rule): ranges under the tiny limit for both rules
LIMITS = [(1 << 15, "middle"), (1 << 15, "last"), (1 << 30, "middle")]


@pytest.mark.parametrize(("memory_limit", "remainder"), LIMITS)
@pytest.mark.parametrize("partitions", [1, 3])
def test_ir_dp_on_spark_sorts_on_the_executors_and_gives_the_in_memory_release(
    spark, monkeypatch, memory_limit, remainder, partitions
):
    from dpfast.engines.spark import SparkSource

    table = _table()
    recorder = _Recorder(monkeypatch, SparkSource)
    frame = spark.createDataFrame(pa.Table.from_pandas(table, preserve_index=False))
    # ir_dp's output order comes from its keys alone, not from the input's row order
    frame = frame.repartition(partitions) if partitions > 1 else frame.coalesce(1)
    data, report, private = on_engine("spark", dpfast.ir_dp,
        frame, k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED, memory_limit=memory_limit,
        batch_rows=500, n_threads=1,  # one column thread: its group values fit in 32 KiB
        remainder=remainder,
    )  # fmt: skip
    got = data.toArrow().to_pandas()
    _assert_same(got, report, private, _expected(table, remainder))
    _assert_sorted_where_needed(recorder.calls, memory_limit)


def _range_keys(array: pa.Array, first_row: int) -> np.ndarray:
    return np.asarray(array).astype(np.uint64)


def _where_sorted(index: int, keys: np.ndarray) -> tuple[int, int, list[int]]:
    from pyspark import TaskContext

    return index, TaskContext.get().partitionId(), keys.tolist()


EIGHT_RANGES = [(i * 100, i * 100 + 50) for i in range(8)]


@pytest.mark.parametrize("cuts", [[(0, 1000)], [(0, 10), (200, 300), (500, 1000)], EIGHT_RANGES])
def test_spark_sorts_each_range_in_its_own_partition(spark, cuts):
    from dpfast.engines.spark import SparkSource

    rng = np.random.default_rng(len(cuts))
    values = rng.integers(0, 1000, 4000)
    values[(values >= 200) & (values < 300)] = 7  # none in [200, 300): a range with no key
    frame = spark.createDataFrame(pa.table({"v": values})).repartition(5)
    ranges = _ranges(cuts)
    found = SparkSource(frame).sort_ranges("v", 300, _range_keys, ranges, 10, _where_sorted)
    expected = [
        (i, sorted(int(x) for x in values if lo <= x < hi))
        for i, (lo, hi) in enumerate(cuts)
        if any(lo <= x < hi for x in values)
    ]
    assert [(i, keys) for i, _, keys in found] == expected
    assert [partition for _, partition, _ in found] == [i for i, _ in expected]


@pytest.mark.parametrize(("memory_limit", "remainder"), LIMITS)
@pytest.mark.parametrize("partitions", [1, 7])
def test_ir_dp_on_dask_sorts_on_the_workers_and_gives_the_in_memory_release(
    client, monkeypatch, memory_limit, remainder, partitions
):
    import dask.dataframe as dd

    from dpfast.engines.dask import DaskSource

    table = _table()
    recorder = _Recorder(monkeypatch, DaskSource)
    frame = dd.from_pandas(table, npartitions=partitions, sort=False)
    data, report, private = on_engine("dask", dpfast.ir_dp,
        frame, k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED, memory_limit=memory_limit,
        batch_rows=500, n_threads=1,  # one column thread: its group values fit in 32 KiB
        remainder=remainder,
    )  # fmt: skip
    _assert_same(data.compute(), report, private, _expected(table, remainder))
    _assert_sorted_where_needed(recorder.calls, memory_limit)
