"""``individual_ranking`` out of core equals ``dpfast.individual_ranking`` bit for bit.

Exact float group means: the same float additions in the same order, ties by row, rows in
their order, integer columns rounded and of their own type; the other columns kept in
their rows. Across files, batches and memory limits that split the ranking into ranges
and long ties.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import cli
from dpfast.dataflow.rank_files import float_keys, float_values
from dpfast.engines import EngineChoice
from dpfast.engines.outofcore import ArrowSource, ParquetDataset
from dpfast.partitions.ranking import RankGroups
from tests.engine_runs import apart_from_engine

COLUMNS = ["small", "wide", "count"]


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(n)
    wide = rng.lognormal(0, 4, n) * rng.choice([-1.0, 1.0], n)
    wide[::3] = 0.0  # a long tie
    wide[1::7] = -0.0  # ties with 0.0, by row
    wide[2::11] = 5e-324  # the smallest subnormal
    small = np.round(rng.normal(10, 3, n), 2)  # sums whose rounding depends on the order
    return pa.table(
        {
            "small": small,
            "label": pa.array([None if i % 5 == 0 else f"r{i}" for i in range(n)]),
            "wide": wide,
            "count": pa.array(rng.integers(-40, 40, n), pa.int32()),
        }
    )


def individual_ranking_dataset(
    source: object, output: Path, *, memory_limit: int, batch_rows: int = 1 << 20, **kwargs: object
) -> tuple[object, object]:
    """``dpfast.individual_ranking`` out of core over ``source`` into ``output``; its reports."""
    engine = EngineChoice("outofcore", {"batch_rows": batch_rows})
    release = dpfast.individual_ranking(
        source, engine=engine, output=output, memory_limit=memory_limit, **kwargs
    )
    return release.report, release.private


def _write_parts(table: pa.Table, directory: Path, cuts: list[int]) -> pa.Table:
    directory.mkdir()
    for i, (first, last) in enumerate(pairwise([0, *cuts, table.num_rows])):
        pq.write_table(table.slice(first, last - first), directory / f"part-{i:03d}.parquet")
    return pa.concat_tables([pq.read_table(f) for f in sorted(directory.iterdir())])


def test_float_keys_keep_the_order_of_floats():
    values = np.array([-np.inf, -1e308, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 1e308, np.inf])
    keys = float_keys(values)
    assert (np.diff(keys.astype(object)) >= 0).all()
    assert keys[4] == keys[5]  # -0.0 ties with 0.0, as in a sort
    np.testing.assert_array_equal(float_values(keys), values + 0.0)


@pytest.mark.parametrize(
    ("cuts", "memory", "batch_rows"),
    [
        ([], 2**30, 1 << 20),
        ([4000], 200_000, 1000),
        ([1, 2, 999, 5000, 5001, 9000], 110_000, 64),
    ],
)
def test_release_equals_in_memory(tmp_path, cuts, memory, batch_rows):
    table = _write_parts(_table(12_007), tmp_path / "in", cuts)
    expected = dpfast.individual_ranking(table, k=6, columns=COLUMNS)
    output = tmp_path / "out.parquet"
    report, private = individual_ranking_dataset(
        ParquetDataset.open(tmp_path / "in"),
        output,
        k=6,
        columns=COLUMNS,
        memory_limit=memory,
        batch_rows=batch_rows,
    )
    got = pq.read_table(output)
    assert got.schema == expected.data.schema
    assert got.equals(expected.data)
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped
    assert private.input_rows == expected.private.input_rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out.parquet"]


def test_group_sums_follow_the_rank_order(tmp_path, monkeypatch):
    # guards the test above: it must sum in parts and through long ties, and the order of
    # the additions must matter for its data (else any order would pass)
    from dpfast._kernels import outofcore

    runs: list[int] = []
    original = outofcore.add_float_run
    monkeypatch.setattr(outofcore, "add_float_run", lambda *a: (runs.append(a[1]), original(*a)))
    table = _table(12_007)
    individual_ranking_dataset(
        ArrowSource(table),
        tmp_path / "out.parquet",
        k=6,
        memory_limit=110_000,
        batch_rows=64,
        columns=COLUMNS,
    )
    assert max(runs) > 110_000 // 40
    groups = np.sort(table.column("small").to_numpy())[:12_000].reshape(-1, 6).tolist()
    assert any(sum(g) != sum(reversed(g)) for g in groups)


@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_ranges_cut_inside_the_larger_group_give_the_in_memory_release(
    tmp_path, monkeypatch, remainder
):
    from dpfast._kernels import outofcore

    table = _table(12_007)
    k = 2900  # 4 groups: group 2 (middle) or 3 (last) of 2,900 + 407 ranks, wider than a range
    expected = dpfast.individual_ranking(table, k=k, columns=COLUMNS, remainder=remainder)
    parts: list[tuple[int, int]] = []
    original = outofcore.add_float_group_sums
    monkeypatch.setattr(
        outofcore,
        "add_float_group_sums",
        lambda *a: (parts.append((int(a[1]), int(a[0].shape[0]))), original(*a))[1],
    )
    output = tmp_path / "out.parquet"
    report, _ = individual_ranking_dataset(
        ArrowSource(table),
        output,
        k=k,
        columns=COLUMNS,
        remainder=remainder,
        memory_limit=110_000,
        batch_rows=64,
    )
    assert pq.read_table(output).equals(expected.data)
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert report.parameters["remainder"] == remainder
    layout = RankGroups(12_007, k, remainder)
    lo, hi = layout.span(layout.big)
    # a sorted range begins or ends inside the larger group
    assert any(lo < first < hi or lo < first + m < hi for first, m in parts), (lo, hi, parts)


def test_k_one_is_refused_as_in_memory(tmp_path):
    table = _table(100)
    with pytest.raises(ValueError) as in_memory:
        dpfast.individual_ranking(table, k=1, columns=COLUMNS)
    with pytest.raises(ValueError) as out_of_core:
        individual_ranking_dataset(
            ArrowSource(table), tmp_path / "o.parquet", k=1, columns=COLUMNS, memory_limit=2**30
        )
    assert str(out_of_core.value) == str(in_memory.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("schema", [False, True])
def test_cli_dataset_gives_the_in_memory_release(tmp_path, schema):
    table = _table(3001)
    _write_parts(table, tmp_path / "parts", [1, 1500])
    pq.write_table(table, tmp_path / "all.parquet")
    options = ["--k", "4", "--quiet"]
    if schema:
        declared = {
            "columns": {
                "small": {"type": "float", "bounds": [0, 30]},
                "count": {"type": "integer", "bounds": [-40, 40]},
            }
        }
        (tmp_path / "s.json").write_text(json.dumps(declared), encoding="utf-8")
        options += ["--schema", str(tmp_path / "s.json")]
    else:
        options += ["--columns", ",".join(COLUMNS)]
    base = ["release", "individual-ranking"]
    assert (
        cli.main(
            [*base, str(tmp_path / "all.parquet"), "-o", str(tmp_path / "m.parquet"), *options]
        )
        == 0
    )
    limit = ["--memory-limit", "100KB"]
    assert (
        cli.main([*base, str(tmp_path / "parts"), "-o", str(tmp_path / "d"), *options, *limit]) == 0
    )
    got, expected = pq.read_table(tmp_path / "d"), pq.read_table(tmp_path / "m.parquet")
    assert got.schema == expected.schema
    assert got.equals(expected)
    reports = [
        json.loads((tmp_path / f"{o}.public-report.json").read_text()) for o in ("d", "m.parquet")
    ]
    assert apart_from_engine(reports[0]) == apart_from_engine(reports[1])


def test_bad_value_leaves_no_output_and_no_scratch(tmp_path):
    table = _table(3000)
    values = table.column("small").to_numpy().copy()
    values[2500] = np.inf
    table = table.set_column(0, "small", pa.array(values))
    _write_parts(table, tmp_path / "in", [1000])
    before = {p.name for p in tmp_path.iterdir()}
    with pytest.raises(
        ValueError, match=r"column 'small' has \d+ non-finite value\(s\) \(first at row 2500: "
    ):
        individual_ranking_dataset(
            ParquetDataset.open(tmp_path / "in"),
            tmp_path / "out.parquet",
            k=3,
            columns=COLUMNS,
            memory_limit=100_000,
            batch_rows=64,
        )
    assert {p.name for p in tmp_path.iterdir()} == before
