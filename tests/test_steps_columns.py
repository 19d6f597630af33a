"""The column steps: what a column's type says (``dpfast/steps/column_types.py``), a
numeric column's rank groups' sums and a categorical column's records per taxonomy rank
(``dpfast/steps/ranks.py``).

Each step runs on the in-memory engine (its fast path), on its one-batch source read in
passes of a few rows (the path every other engine takes), and on the out-of-core engine
in batches of a few rows; the answers are compared with each other and with what the
records say, counted by brute force.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from itertools import pairwise

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpfast import steps
from dpfast.dataflow.flow import Dataflow, Limits
from dpfast.engines import EngineChoice, open_engine
from dpfast.engines.base import Engine
from dpfast.exceptions import DPFastValueError
from dpfast.taxonomy import Taxonomy

N = 500
#: Leaves listed out of their rank order, so that a code is not its rank.
SECTORS = Taxonomy.from_mapping(
    {"*": {"industry": ["mining", "energy", "building"], "services": ["trade", "finance"]}}
)


def _table(shape: str) -> pa.Table:
    """A categorical column whose leaves occur uniformly, or with a long tail (Zipf)."""
    rng = np.random.default_rng(5)
    leaves = list(SECTORS.domain)
    if shape == "uniform":
        chances = np.full(len(leaves), 1.0 / len(leaves))
    else:
        weights = 1.0 / np.arange(1, len(leaves) + 1) ** 2.5  # the last leaf is rare
        chances = weights / weights.sum()
    return pa.table(
        {
            "sector": rng.choice(leaves, N, p=chances),
            "turnover": rng.pareto(1.2, N) * 1000.0,
            "staff": pa.array(rng.integers(1, 50, N), pa.int32()),
        }
    )


def _passes(flow: Dataflow, batch_rows: int = 7) -> Dataflow:
    """A held dataflow read in passes of ``batch_rows`` rows (no fast path)."""
    return dataclasses.replace(flow, table=None, limits=Limits(memory=2**20, batch_rows=batch_rows))


@pytest.fixture
def opened(tmp_path) -> Iterator[list[Engine]]:
    engines: list[Engine] = []

    def open_both(table: pa.Table) -> tuple[Engine, Engine]:
        memory = open_engine(table, method="test")
        choice = EngineChoice("outofcore", {"batch_rows": 7})
        out = tmp_path / f"o{len(engines)}.parquet"
        outofcore = open_engine(table, method="test", engine=choice, output=out)
        engines.extend([memory, outofcore])
        return memory, outofcore

    yield open_both  # type: ignore[misc]
    for engine in engines:
        engine.close()


@pytest.mark.parametrize("shape", ["uniform", "zipf"])
def test_rank_counts_are_the_records_per_taxonomy_rank(opened, shape):
    table = _table(shape)
    memory, outofcore = opened(table)
    values = table.column("sector").to_pylist()
    leaves = list(SECTORS.domain)
    want = np.zeros(len(leaves), dtype=np.int64)
    for value in values:  # brute force: each record's leaf, at its rank
        want[SECTORS.rank[leaves.index(value)]] += 1
    by_code = np.bincount([leaves.index(v) for v in values], minlength=len(leaves))
    assert want.sum() == N and not np.array_equal(want, by_code)  # a code is not its rank
    (held,) = memory.categorical_columns({"sector": SECTORS})
    (read,) = outofcore.categorical_columns({"sector": SECTORS})
    assert memory.dataflow.holds and not outofcore.dataflow.holds
    for flow, column in [
        (memory.dataflow, held),
        (_passes(memory.dataflow), held),
        (outofcore.dataflow, read),
    ]:
        got = steps.rank_counts(flow, column)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    if shape == "zipf":
        assert want.min() < N // 50  # the tail is there


def test_rank_counts_in_passes_refuse_a_value_outside_the_taxonomy(opened):
    table = _table("uniform")
    sectors = table.column("sector").to_pylist()
    sectors[123] = "fishing"
    memory, outofcore = opened(table.set_column(0, "sector", pa.array(sectors)))
    (column,) = outofcore.categorical_columns({"sector": SECTORS})  # reads no value
    with pytest.raises(DPFastValueError, match="fishing") as refused:
        steps.rank_counts(outofcore.dataflow, column)
    assert "sector" in str(refused.value)
    with pytest.raises(DPFastValueError, match="fishing"):  # held: refused on reading
        memory.categorical_columns({"sector": SECTORS})


def test_rank_counts_tick_the_column_before_its_pass(tmp_path):
    table = _table("zipf")
    seen: list[tuple[str, int, int]] = []
    choice = EngineChoice("outofcore", {"batch_rows": 50})
    engine = open_engine(
        table,
        method="test",
        engine=choice,
        output=tmp_path / "o.parquet",
        progress=lambda *tick: seen.append(tick),
    )
    try:
        (column,) = engine.categorical_columns({"sector": SECTORS})
        steps.rank_counts(engine.dataflow, column)
    finally:
        engine.close()
    assert ("column sector", 0, 1) in seen


def test_value_dtype_is_the_dtype_a_release_reads(opened):
    table = _table("uniform").append_column(
        "shade", pa.array(["a", "b"] * (N // 2)).dictionary_encode()
    )
    memory, outofcore = opened(table)
    want = {
        "sector": np.dtype(object),
        "turnover": np.dtype(np.float64),
        "staff": np.dtype(np.int32),
        "shade": np.dtype(object),
    }
    for flow in (memory.dataflow, _passes(memory.dataflow), outofcore.dataflow):
        assert {name: steps.value_dtype(flow, name) for name in want} == want


def test_value_dtype_of_a_pandas_categorical_is_object():
    frame = pd.DataFrame(
        {
            "size": pd.Categorical(["s", "l", "s"], categories=["s", "m", "l"], ordered=True),
            "count": np.array([1, 2, 3], dtype=np.int16),
        }
    )
    flow = open_engine(frame, method="test").dataflow
    for read in (flow, _passes(flow, 2)):
        assert steps.value_dtype(read, "size") == np.dtype(object)
        assert steps.value_dtype(read, "count") == np.dtype(np.int16)


def _ordered(codes: list[int], categories: list[str]) -> pa.DictionaryArray:
    indices = pa.array(codes, pa.int32())
    return pa.DictionaryArray.from_arrays(indices, pa.array(categories), ordered=True)


def test_declared_categories_are_an_ordered_dictionarys_in_their_order(opened):
    size = _ordered([0, 2, 1, 0] * 5, ["small", "medium", "large"])
    table = pa.table(
        {
            "size": pa.chunked_array([size[:9], size[9:]]),  # two parts, one dictionary
            "shade": pa.array(["b", "a"] * 10).dictionary_encode(),  # not ordered
            "text": pa.array(["x"] * 20),
            "x": np.arange(20.0),
        }
    )
    memory, outofcore = opened(table)
    for flow in (memory.dataflow, outofcore.dataflow):
        assert steps.declared_categories(flow, "size") == ("small", "medium", "large")
        assert steps.declared_categories(flow, "shade") is None
        assert steps.declared_categories(flow, "text") is None
        assert steps.declared_categories(flow, "x") is None


def test_declared_categories_of_a_pandas_ordered_categorical():
    frame = pd.DataFrame(
        {
            "size": pd.Categorical(["s", "l"], categories=["s", "m", "l"], ordered=True),
            "mood": pd.Categorical(["up", "down"]),  # not ordered: declares none
        }
    )
    flow = open_engine(frame, method="test").dataflow
    assert steps.declared_categories(flow, "size") == ("s", "m", "l")
    assert steps.declared_categories(flow, "mood") is None


def test_declared_categories_refuse_parts_that_disagree(opened):
    first = _ordered([0, 1] * 7, ["low", "high"])  # two batches of 7 rows out of core
    second = _ordered([0, 1, 1], ["high", "low"])
    table = pa.table({"level": pa.chunked_array([first, second]), "x": np.arange(17.0)})
    memory, outofcore = opened(table)
    for flow in (memory.dataflow, outofcore.dataflow):
        with pytest.raises(DPFastValueError, match="different categories"):
            steps.declared_categories(flow, "level")


@pytest.mark.parametrize("batch_rows", [3, 17, 100])
def test_a_batch_across_parts_that_disagree_is_refused(tmp_path, batch_rows):
    # one batch over both parts would unify their dictionaries under the first's order
    first = _ordered([0, 1] * 7, ["low", "high"])
    second = _ordered([0, 1, 1], ["high", "low"])
    table = pa.table({"level": pa.chunked_array([first, second]), "x": np.arange(17.0)})
    choice = EngineChoice("outofcore", {"batch_rows": batch_rows})
    engine = open_engine(table, method="test", engine=choice, output=tmp_path / "o.parquet")
    try:
        with pytest.raises(DPFastValueError, match=r"'level'.*different categories"):
            steps.declared_categories(engine.dataflow, "level")
    finally:
        engine.close()


@pytest.mark.parametrize("remainder", ["middle", "last"])
@pytest.mark.parametrize("shape", ["uniform", "lognormal", "pareto"])
def test_group_sums_are_the_rank_groups_sums_of_the_grid_values(tmp_path, shape, remainder):
    from dpfast._kernels import ranking
    from dpfast.partitions.grid import Grid
    from dpfast.partitions.ranking import RankGroups

    rng = np.random.default_rng(23)
    n, k = 5003, 7
    values = {
        "uniform": rng.uniform(0.0, 1000.0, n),
        "lognormal": rng.lognormal(6.0, 1.8, n),
        "pareto": (rng.pareto(1.1, n) + 1.0) * 50.0,
    }[shape]
    values = np.round(values, 1)  # ties in the grid values
    table = pa.table({"x": values})
    grid = Grid.for_column(0.0, float(np.quantile(values, 0.95)), n, k)  # the tail clamped
    layout = RankGroups(n, k, remainder)
    # brute force: every value's grid step, sorted, cut into the layout's groups
    q, clamped = ranking.quantise_column(
        values, grid.lower, grid.upper, grid.gamma, grid.d_int, grid.warp
    )
    ordered = np.sort(q.astype(np.int64))
    starts = layout.starts
    want = np.array([ordered[a:b].sum() for a, b in pairwise(starts)])
    assert clamped >= n // 25
    kept: dict = {}
    memory = open_engine(table, method="test")
    memory_flow = dataclasses.replace(memory.dataflow, keep_order=kept.__setitem__)
    choice = EngineChoice("outofcore", {"batch_rows": 512})
    out = tmp_path / "o.parquet"
    outofcore = open_engine(table, method="test", engine=choice, output=out, memory_limit=40_000)
    try:
        (held,) = memory.numeric_columns(["x"])
        (read,) = outofcore.numeric_columns(["x"])
        flows = [
            (memory_flow, held),
            (_passes(memory.dataflow, 512), held),  # sorted whole
            (dataclasses.replace(_passes(memory.dataflow, 512), limits=Limits(40_000, 512)), held),
            (outofcore.dataflow, read),  # 1,250 values a sort: ranges
        ]
        for flow, column in flows:
            sums, found = steps.group_sums(flow, column, grid, layout)
            np.testing.assert_array_equal(sums, want)
            assert found == clamped
    finally:
        outofcore.close()
    assert outofcore.dataflow.limits.sorted_values < n  # the passes cut the column
    np.testing.assert_array_equal(kept["x"], np.argsort(q, kind="stable"))
