"""The outputs written once for every engine (row_outputs, resampled_rows, ranked_rows,
clustered_rows).

Each is run two ways on the same column: held (the in-memory fast path, whole) and read
in passes of a few rows (what every engine that reads in passes runs), and both are
checked against a slow reference written here row by row.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpfast import noise
from dpfast.dataflow.cluster_files import Attributes, ClusterLimits, Partition
from dpfast.dataflow.clustered_rows import clustered_rows
from dpfast.dataflow.flow import Dataflow, HeldTable, Limits, bucket_runs
from dpfast.dataflow.ranked_rows import grouped_rows, linked_codes, linked_rows, ranked_rows
from dpfast.dataflow.resampled_rows import resampled_rows
from dpfast.dataflow.row_outputs import FileRows, HeldRows, coded_rows, released_rows
from dpfast.dataflow.scratch_files import read_rows
from dpfast.dataflow.values import (
    Bins,
    CategoricalColumn,
    Clusters,
    NumericColumn,
    inverse_permutation,
)
from dpfast.exceptions import DPFastValueError
from dpfast.io import as_table_data
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups
from dpfast.taxonomy import Taxonomy

KEY = noise.NoiseSource.from_seed(20261207).key("tests", "row outputs")


def _flows(frame: pd.DataFrame, tmp_path, *, batch_rows=7, memory=1 << 20):
    """Return the held dataflow of ``frame`` and one reading it in passes of ``batch_rows``."""
    table = as_table_data(frame)
    held = Dataflow.held(table)
    # as Arrow reads them: a missing value is a null
    source = HeldTable(
        tuple(table.names), lambda name: pa.Array.from_pandas(frame[name]), len(frame)
    )
    passes = Dataflow(
        source, Limits(memory=memory, batch_rows=batch_rows), scratch=lambda: tmp_path
    )
    assert held.holds and not passes.holds
    return held, passes


def _column(frame: pd.DataFrame, name: str) -> NumericColumn:
    values = frame[name].to_numpy(dtype=np.float64)
    return NumericColumn(name, values, False, np.dtype(np.float64))


# -- where the rows go -------------------------------------------------------------------


def test_held_rows_put_in_parts_in_any_order_give_the_column():
    rows = HeldRows(10)
    for first in (6, 0, 3):
        rows.put(first, np.arange(first, min(10, first + 3 + (first == 6))) * 2)
    assert rows.values.tolist() == list(range(0, 20, 2))


def test_held_rows_keep_a_whole_column_without_copying_it():
    whole = np.arange(5.0)
    rows = HeldRows(5)
    rows.put(0, whole)
    assert rows.values is whole


def test_file_rows_write_each_part_at_its_rows_place_owner_only(tmp_path):
    path = tmp_path / "column.bin"
    with FileRows(path) as rows:
        rows.put(4, np.array([4.5, 5.5]))
        rows.put(0, np.array([0.5, 1.5, 2.5, 3.5]))
    assert read_rows(path, np.float64, 0, 6).tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
    assert path.stat().st_mode & 0o777 == 0o600


# -- a numeric column released by cells --------------------------------------------------


def _clamp_cells(values: np.ndarray, first_row: int) -> tuple[np.ndarray, np.ndarray]:
    """Clamp to [0, 10], add each row's number, and count the clamped values."""
    out = np.clip(values, 0.0, 10.0) + np.arange(first_row, first_row + values.shape[0])
    return out, np.array([int(((values < 0) | (values > 10)).sum())])


@pytest.mark.parametrize("n", [0, 1, 7, 50])
def test_released_rows_held_and_in_passes_match_the_row_by_row_reference(tmp_path, n):
    rng = np.random.default_rng(n)
    frame = pd.DataFrame({"x": rng.lognormal(1.0, 1.5, n) - 2.0})
    expected = [min(max(v, 0.0), 10.0) + i for i, v in enumerate(frame["x"])]
    clamped = sum(1 for v in frame["x"] if v < 0 or v > 10)
    for flow in _flows(frame, tmp_path):
        rows = HeldRows(n)
        counts = released_rows(flow, _column(frame, "x"), _clamp_cells, rows)
        assert rows.values.tolist() == expected
        assert counts.tolist() == ([clamped] if n or flow.holds else [])


# -- a column coded by a public domain ---------------------------------------------------


def _shift_cells(m: int):
    def cells(codes: np.ndarray, first_row: int) -> np.ndarray:
        """Each row's code moved on by its row number, modulo ``m``: the row is read."""
        rows = np.arange(first_row, first_row + codes.shape[0])
        return ((codes.astype(np.int64) + rows) % m).astype(codes.dtype)

    return cells


DOMAIN = ["low", "mid", "high", "top"]


def _coded(flow, name, domain=DOMAIN) -> list[int]:
    rows = HeldRows(flow.source.n_rows)
    coded_rows(flow, name, domain, _shift_cells(len(domain)), rows)
    return rows.values.tolist()


@pytest.mark.parametrize("categorical", [False, True])
def test_coded_rows_held_and_in_passes_match_the_row_by_row_reference(tmp_path, categorical):
    rng = np.random.default_rng(3)
    values = rng.choice(DOMAIN, size=40, p=[0.7, 0.2, 0.07, 0.03])
    column = (
        pd.Categorical(values, categories=["top", "low", "high", "mid"]) if categorical else values
    )
    frame = pd.DataFrame({"c": column})
    expected = [(DOMAIN.index(v) + i) % 4 for i, v in enumerate(values)]
    for flow in _flows(frame, tmp_path):
        assert _coded(flow, "c") == expected


def test_coded_rows_of_integers_look_up_the_domains_values(tmp_path):
    frame = pd.DataFrame({"n": [30, 10, 20, 10, 40]})
    domain = [10, 20, 30, 40]
    for flow in _flows(frame, tmp_path, batch_rows=2):
        assert _coded(flow, "n", domain) == [
            (domain.index(v) + i) % 4 for i, v in enumerate(frame["n"])
        ]


@pytest.mark.parametrize("categorical", [False, True])
def test_values_outside_the_domain_are_named_in_row_order_on_both_paths(tmp_path, categorical):
    values = ["low", "odd", "mid", "rare", "odd", "low", "else"] * 3
    column = (
        pd.Categorical(values, categories=["rare", "else", "odd", "low", "mid"])
        if categorical
        else values
    )
    frame = pd.DataFrame({"c": column})
    for flow in _flows(frame, tmp_path, batch_rows=3):
        with pytest.raises(DPFastValueError, match=r"'odd', 'rare', 'else'"):
            _coded(flow, "c")


@pytest.mark.parametrize("categorical", [False, True])
def test_a_missing_value_is_refused_on_both_paths(tmp_path, categorical):
    values = ["low", None, "mid", None, "top"]
    column = pd.Categorical(values, categories=DOMAIN) if categorical else values
    frame = pd.DataFrame({"c": column})
    for flow in _flows(frame, tmp_path, batch_rows=2):
        with pytest.raises(DPFastValueError, match="has 2 missing value"):
            _coded(flow, "c")


# -- rows replaced by draws from their bins ----------------------------------------------


def _reference_resampled(values, bins: Bins, keep: int) -> list[float]:
    """Row by row: the pool lists the values bin by bin in row order; draws as the noise's."""
    groups = [min(int((v - bins.lo) * bins.scale), bins.m - 1) for v in values]
    pool = [v for g in range(bins.m) for v, h in zip(values, groups, strict=True) if h == g]
    starts = bins.starts
    draws = noise.retain_draws(KEY, keep, np.array(groups), bins.counts)
    return [
        v if u < 0 else pool[int(starts[g]) + int(u)]
        for v, g, u in zip(values, groups, draws, strict=True)
    ]


def _bins(values: np.ndarray, most: int) -> Bins:
    """The most equal-width bins, up to ``most``, of which none is empty (as k-PRAM's)."""
    lo, hi = float(values.min()), float(values.max())
    for m in range(most, 0, -1):
        scale = m / (hi - lo)
        index = np.minimum(((values - lo) * scale).astype(np.int64), m - 1)
        counts = np.bincount(index, minlength=m).astype(np.int64)
        if counts.min() > 0:
            return Bins(lo, scale, counts)
    raise AssertionError("one bin always holds every value")


@pytest.mark.parametrize("skewed", [False, True])
def test_resampled_rows_held_and_in_windows_match_the_reference(tmp_path, skewed):
    rng = np.random.default_rng(11)
    n = 5_000
    values = rng.lognormal(3.0, 2.0, n) if skewed else rng.uniform(0.0, 100.0, n)
    frame = pd.DataFrame({"x": values})
    bins = _bins(values, 8)
    assert bins.m >= 3
    keep = int(0.6 * noise.KEEP_DENOMINATOR)
    expected = _reference_resampled(values.tolist(), bins, keep)
    # 64 KiB of memory: windows of 1,024 pool positions, five windows over 5,000 rows
    held, passes = _flows(frame, tmp_path, batch_rows=333, memory=1 << 16)
    for flow in (held, passes):
        rows = HeldRows(n)
        resampled_rows(flow, _column(frame, "x"), bins, KEY, keep, rows, n_threads=2)
        assert rows.values.tolist() == expected
    assert not list(tmp_path.iterdir())  # the replacements' scratch files are removed
    assert sum(a != b for a, b in zip(expected, values, strict=True)) > n // 4


# -- each row given its rank group's value -----------------------------------------------


def _group_values(sums: np.ndarray) -> np.ndarray:
    """A group's value from its sum, and its number (so that no two groups share one)."""
    return np.asarray(sums, dtype=np.float64) * 0.5 + np.arange(sums.shape[0])


def _ranked(values: list, key_of) -> list[int]:
    """The rows in rank order: by key, ties by row (a stable sort)."""
    return sorted(range(len(values)), key=lambda i: (key_of(values[i]), i))


def _placed(n: int, rank_order: list[int], layout: RankGroups, group_values, key) -> list:
    """Row ``rank_order[p]`` gets its group's value, at its own row or its keyed place."""
    groups = layout.group_of(np.arange(n, dtype=np.int64))
    destination = list(range(n))
    if key is not None:
        destination = inverse_permutation(noise.permutation(key, n)).tolist()
    out = [None] * n
    for p, row in enumerate(rank_order):
        out[destination[row]] = group_values[groups[p]]
    return out


def _values(shape: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(21)
    if shape == "skewed":
        return rng.lognormal(8.0, 1.8, n)
    if shape == "ties":  # one value held by half the rows: a run longer than a sorted range
        return np.where(rng.random(n) < 0.5, 100.0, rng.integers(0, 50, n).astype(np.float64))
    return rng.uniform(0.0, 1000.0, n)


@pytest.mark.parametrize("shape", ["uniform", "skewed", "ties"])
@pytest.mark.parametrize("keyed", [False, True])
def test_linked_rows_held_and_in_passes_match_the_reference(tmp_path, shape, keyed):
    n, k = 6_000, 7
    values = _values(shape, n)
    frame = pd.DataFrame({"x": values})
    upper = float(np.quantile(values, 0.9))  # the top tenth is clamped
    grid = Grid.for_column(0.0, upper, n, k)
    layout = RankGroups(n, k)
    key = KEY if keyed else None
    q = [round((min(max(v, 0.0), upper) - 0.0) / grid.gamma) for v in values.tolist()]
    order = _ranked(q, lambda value: value)
    groups = layout.group_of(np.arange(n, dtype=np.int64))
    sums = np.zeros(layout.n_groups, dtype=np.int64)
    for p, row in enumerate(order):
        sums[groups[p]] += q[row]
    expected = _placed(n, order, layout, _group_values(sums), key)
    clamped = int((values > upper).sum())
    # 64 KiB: sorted ranges of 1,638 rows, and placement in ranges of 1,024
    for flow in _flows(frame, tmp_path, batch_rows=1_000, memory=1 << 16):
        rows = HeldRows(n)
        linked = linked_rows(flow, _column(frame, "x"), grid, layout, key, _group_values, rows)
        assert rows.values.tolist() == expected
        assert linked.clamped == clamped
        assert linked.values.tolist() == _group_values(sums).tolist()
        assert (linked.destination is not None) == (keyed and flow.holds)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("shape", ["uniform", "skewed", "ties"])
def test_ranked_rows_held_and_in_passes_match_the_reference(tmp_path, shape):
    n, k = 6_000, 5
    values = _values(shape, n)
    frame = pd.DataFrame({"x": values})
    layout = RankGroups(n, k)
    order = _ranked(values.tolist(), lambda value: value)
    groups = layout.group_of(np.arange(n, dtype=np.int64))
    sums = [0.0] * layout.n_groups
    for p, row in enumerate(order):  # in rank order, one float addition at a time
        sums[groups[p]] += float(values[row])
    expected = _placed(n, order, layout, _group_values(np.array(sums)), None)
    for flow in _flows(frame, tmp_path, batch_rows=1_000, memory=1 << 16):
        rows = HeldRows(n)
        ranked_rows(flow, _column(frame, "x"), layout, _group_values, rows)
        assert rows.values.tolist() == expected
    assert not list(tmp_path.iterdir())


SECTORS = Taxonomy.from_mapping(
    {"*": {"industry": ["mining", "energy", "building"], "services": ["trade", "finance"]}}
)


@pytest.mark.parametrize("keyed", [False, True])
def test_linked_codes_held_and_in_passes_match_the_reference(tmp_path, keyed):
    n, k = 3_000, 4
    leaves = list(SECTORS.domain)
    weights = 1.0 / np.arange(1, len(leaves) + 1) ** 2.5  # a long tail
    labels = np.random.default_rng(8).choice(leaves, size=n, p=weights / weights.sum())
    frame = pd.DataFrame({"s": labels})
    codes = SECTORS.encode(labels)
    column = CategoricalColumn("s", codes, SECTORS)
    layout = RankGroups(n, k)
    key = KEY if keyed else None
    rank = SECTORS.rank
    order = _ranked(codes.tolist(), lambda code: rank[code])
    counts = np.bincount(rank[codes], minlength=len(leaves))

    def choose(rank_counts: np.ndarray) -> np.ndarray:
        """Group g's code: the leaf at rank g modulo the domain, after the counts are seen."""
        assert rank_counts.tolist() == counts.tolist()
        return np.arange(layout.n_groups, dtype=np.int64) % len(leaves)

    expected = _placed(n, order, layout, choose(counts), key)
    for flow in _flows(frame, tmp_path, batch_rows=500, memory=1 << 16):
        rows = HeldRows(n)
        linked = linked_codes(flow, column, layout, key, choose, rows)
        assert rows.values.tolist() == expected
        assert linked.clamped == 0
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("seed", range(20))
def test_bucket_runs_are_greedy_runs_that_fit(seed):
    # each run is as long as it can be: the next bucket would not fit beside it
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 40, rng.integers(1, 30))
    most = int(rng.integers(1, 60))
    runs = bucket_runs(sizes, most)
    assert runs[0] == 0 and runs[-1] == len(sizes) and runs == sorted(set(runs))
    for lo, hi in itertools.pairwise(runs):
        held = int(sizes[lo:hi].sum())
        assert held <= most or hi == lo + 1
        assert hi == len(sizes) or held + sizes[hi] > most


@pytest.mark.parametrize("codes", [False, True])
def test_grouped_rows_held_and_in_parts_match_the_reference(tmp_path, codes):
    n, k = 300_001, 6  # 8 buckets of the permutation (above 2**16 rows)
    layout = RankGroups(n, k)
    values = _group_values(np.arange(layout.n_groups) * 3.0)
    if codes:
        values = np.arange(layout.n_groups, dtype=np.int64) % 5
    order = noise.permutation(KEY, n).tolist()
    groups = layout.group_of(np.arange(n, dtype=np.int64))
    expected = [values[groups[order[r]]] for r in range(n)]
    frame = pd.DataFrame({"x": np.zeros(n)})
    puts = []
    # 64 KiB: parts of at most 2,730 rows (24 bytes a row), so each bucket is one part
    for flow in _flows(frame, tmp_path, memory=1 << 16):
        rows = HeldRows(n)
        rows_put = rows.put
        rows.put = lambda first, part, put=rows_put: (puts.append(first), put(first, part))[1]
        found = grouped_rows(flow, values, layout, KEY, rows)
        assert rows.values.tolist() == expected
        assert rows.values.dtype == values.dtype
        assert (found is not None) == flow.holds
    assert puts[0] == 0 and len(puts) == 1 + 8  # held: one put; in parts: one a bucket


# -- clusters of rows --------------------------------------------------------------------


def _partition(tmp_path, formed: np.ndarray, work: int) -> Partition:
    """Every row's cluster (numbered as formed) in a scratch file, as the step leaves it."""
    path = tmp_path / "labels.bin"
    formed = np.unique(formed, return_inverse=True)[1]  # every cluster number used
    formed.astype(np.int64).tofile(path)
    _, first_rows = np.unique(formed, return_index=True)
    rank = np.empty(first_rows.shape[0], dtype=np.int64)
    rank[np.argsort(first_rows, kind="stable")] = np.arange(first_rows.shape[0])
    n = formed.shape[0]
    limits = ClusterLimits(work=work, batch_rows=1000, attributes=0, merge_rows=1024)
    return Partition(path, rank, Attributes((), (), n, 10_000), limits, ())


@pytest.mark.parametrize("skewed", [False, True])
@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("work", [40 * 4096, 1 << 30])  # parts of 4,096 rows, gathered; whole
def test_clustered_rows_held_and_from_files_match_the_reference(tmp_path, skewed, keyed, work):
    n, count = 300_001, 2_000  # 8 buckets of the permutation
    rng = np.random.default_rng(int(skewed) + 2 * int(keyed))
    weights = 1.0 / np.arange(1, count + 1) ** (1.5 if skewed else 0.0)
    formed = rng.choice(count, n, p=weights / weights.sum())
    partition = _partition(tmp_path, formed, work)
    labels = partition.read(0, n)
    held = Clusters.of(labels)
    in_files = Clusters(held.count, held.sizes, np.empty(0, dtype=np.int64), partition)
    values = [rng.lognormal(3.0, 2.0, held.count), np.arange(held.count, dtype=np.int64) % 7]
    key = KEY if keyed else None
    order = noise.permutation(KEY, n).tolist() if keyed else range(n)
    expected = [[column[labels[row]] for row in order] for column in values]
    ticks: list[int] = []
    flow = Dataflow(
        HeldTable(("x",), lambda name: pa.array(np.zeros(n)), n),
        Limits(memory=1 << 20, batch_rows=1000),
        lambda phase, done, total: ticks.append(done),
    )
    for clusters in (held, in_files):
        rows = [HeldRows(n), HeldRows(n)]
        found = clustered_rows(flow, clusters, values, key, rows)
        assert [r.values.tolist() for r in rows] == expected
        assert [r.values.dtype for r in rows] == [np.float64, np.int64]
        if clusters is held:
            assert found is not None and found.shape[0] == (n if keyed else 0)
            if keyed:
                assert (found[np.asarray(order)] == np.arange(n)).all()
        else:
            assert found is None
    # from the files: one tick a part, the last at every row. A part is a run of the
    # permutation's buckets that fits in ``work`` (a bucket of ~37,500 rows is a part of its
    # own), or without a key a range of at most 4,096 rows
    steps = np.diff([0, *ticks])
    assert ticks[-1] == n and (steps > 0).all()
    if work == 1 << 30:
        assert len(ticks) == 1
    elif keyed:
        assert len(ticks) == 8
    else:
        assert steps.max() == 4096 and len(ticks) == -(-n // 4096)


def test_clustered_rows_from_files_write_file_rows_part_by_part(tmp_path):
    n = 70_000
    formed = np.arange(n) % 9
    partition = _partition(tmp_path, formed, 40 * 1024)
    clusters = Clusters(9, np.bincount(partition.read(0, n)), np.empty(0, np.int64), partition)
    flow = Dataflow(HeldTable(("x",), lambda name: pa.array(np.zeros(n)), n), Limits(1 << 20, 1000))
    values = np.arange(9) * 1.5
    with FileRows(tmp_path / "out.bin") as rows:
        assert clustered_rows(flow, clusters, [values], KEY, [rows]) is None
    order = noise.permutation(KEY, n)
    got = read_rows(tmp_path / "out.bin", np.float64, 0, n)
    assert got.tolist() == values[partition.read(0, n)[order]].tolist()
