"""Out of core, record-linked ``ir_dp`` and the unprotected columns give the in-memory release.

Every case compares the Parquet output with what ``dpfast.ir_dp`` (or ``laplace_dp``)
returns for the same Arrow table: the same columns in the same order, the same values in
the same rows, the same Arrow types, the same public report and private counts.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.datasets import adult, adult_taxonomy
from dpfast.engines.outofcore._sources import ArrowSource, ParquetDataset
from dpfast.exceptions import UnprovenReleaseWarning
from tests.engine_runs import apart_from_engine, ir_dp_dataset, laplace_dp_dataset

BOUNDS = {
    "age": (17, 90),
    "hours-per-week": (1, 99),
    "share": (0.0, 100.0),
    "tiny": (0.0, 1e6),
}
PROTECTED = ["age", "hours-per-week", "share", "tiny", "occupation"]
# (linkage, shuffle, unprotected)
MODES = [
    ("records", True, "keep"),
    ("records", False, "keep"),
    ("records", True, "shuffle"),
    ("records", False, "drop"),
    ("columns", True, "shuffle"),
]


def _table(n: int) -> pa.Table:
    """Adult rows with protected columns of every kind and unprotected ones of many types."""
    frame = adult("train", drop_missing=True).iloc[:n].reset_index(drop=True)
    rng = np.random.default_rng(n)
    table = pa.table(
        {
            "age": pa.array(frame["age"].to_numpy(np.int64)),
            "education": pa.array(
                [None if i % 9 == 0 else v for i, v in enumerate(frame["education"])],
                pa.string(),
            ),
            "hours-per-week": pa.array(frame["hours-per-week"].to_numpy(np.int64)),
            "occupation": pa.array(frame["occupation"].astype(str), pa.string()),
            "race": pa.array(frame["race"].astype(str)).dictionary_encode(),
            "fnlwgt": pa.array(frame["fnlwgt"].to_numpy(np.int64)),
            # beyond the bounds on both sides (clamped), and many ties on a coarse grid
            "share": pa.array(np.round(rng.uniform(-5, 105, n), 1)),
            "weight": pa.array(rng.random(n).astype(np.float32)),
            # every value in the lowest sliver of a wide domain: refined histograms, a big tie
            "tiny": pa.array(np.where(rng.random(n) < 0.5, 0.0, rng.uniform(0, 1e-3, n))),
            "nothing": pa.nulls(n, pa.int32()),
        }
    )
    return table


def _write_parts(table: pa.Table, directory: Path, cuts: list[int]) -> pa.Table:
    """Write ``table`` as files cut at ``cuts``; return the table the dataset reads back."""
    directory.mkdir()
    edges = [0, *cuts, table.num_rows]
    for i, (first, last) in enumerate(pairwise(edges)):
        pq.write_table(table.slice(first, last - first), directory / f"part-{i:03d}.parquet")
    files = sorted(directory.iterdir())
    return pa.concat_tables([pq.read_table(f) for f in files])


def _arguments(linkage: str, shuffle: bool, unprotected: str, seed: int = 3) -> dict:
    return {
        "k": 7,
        "epsilon": 2.0,
        "bounds": BOUNDS,
        "taxonomies": {"occupation": adult_taxonomy("occupation")},
        "columns": PROTECTED,
        "linkage": linkage,
        "shuffle": shuffle,
        "unprotected": unprotected,
        "seed": seed,
    }


def _release(call, *args, **kwargs):
    """Call a release, expecting the unproven-release warning where the mode has it."""
    if kwargs.get("linkage") == "records":
        with pytest.warns(UnprovenReleaseWarning):
            return call(*args, **kwargs)
    return call(*args, **kwargs)


def _plain(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column's values: its dictionary's order is the writer's, not data."""
    if pa.types.is_dictionary(column.type):
        return pa.chunked_array([c.dictionary_decode() for c in column.chunks])
    return column


def _assert_same(output: Path, expected: dpfast.Release, report, private) -> None:
    got = pq.read_table(output)
    assert got.column_names == expected.data.column_names
    for name in got.column_names:
        assert got.schema.field(name).type == expected.data.schema.field(name).type, name
        assert _plain(got.column(name)).equals(_plain(expected.data.column(name))), name
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped
    assert private.clamped_output == expected.private.clamped_output
    assert private.input_rows == expected.private.input_rows


@pytest.mark.parametrize(("linkage", "shuffle", "unprotected"), MODES)
@pytest.mark.parametrize(
    ("cuts", "memory", "batch_rows"),
    [
        ([], 2**30, 1 << 20),  # one file, everything in memory
        ([4000], 200_000, 1000),  # two files, several ranges per column
        ([1, 2, 999, 5000, 5001, 9000], 110_000, 64),  # seven files, 1-row ones too
    ],
)
def test_linked_and_unprotected_release_equals_in_memory(
    tmp_path, linkage, shuffle, unprotected, cuts, memory, batch_rows
):
    table = _write_parts(_table(12_007), tmp_path / "in", cuts)  # a remainder group
    arguments = _arguments(linkage, shuffle, unprotected)
    expected = _release(dpfast.ir_dp, table, **arguments)
    output = tmp_path / "out.parquet"
    report, private = _release(
        ir_dp_dataset,
        ParquetDataset.open(tmp_path / "in"),
        output,
        memory_limit=memory,
        batch_rows=batch_rows,
        **arguments,
    )
    _assert_same(output, expected, report, private)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out.parquet"]


def test_keep_under_column_linkage_is_refused_out_of_core_as_in_memory(tmp_path):
    table = _write_parts(_table(1_000), tmp_path / "in", [400])
    arguments = _arguments("columns", True, "keep")
    with pytest.raises(ValueError) as expected:
        dpfast.ir_dp(table, **arguments)
    with pytest.raises(ValueError) as got:
        ir_dp_dataset(
            ParquetDataset.open(tmp_path / "in"),
            tmp_path / "out.parquet",
            memory_limit=2**30,
            batch_rows=1000,
            **arguments,
        )
    assert (type(got.value), str(got.value)) == (type(expected.value), str(expected.value))
    assert "no output row is an input record" in str(got.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


@pytest.mark.parametrize(("linkage", "shuffle", "unprotected"), MODES[:3])
@pytest.mark.parametrize(("memory", "batch_rows"), [(2**30, 1 << 20), (1_500_000, 1000)])
def test_permutation_buckets_spread_over_ranges(
    tmp_path, linkage, shuffle, unprotected, memory, batch_rows
):
    # 150,001 rows: a permutation of 4 buckets, each range of the small limit one bucket
    n = 150_001
    rng = np.random.default_rng(5)
    labels = [None if i % 7 == 0 else f"id{i}" for i in rng.integers(0, 10**6, n)]
    table = pa.table(
        {
            "a": rng.integers(0, 50, n),
            "b": rng.normal(50, 20, n),
            "s": pa.array(labels, pa.large_string()),
            "f": rng.random(n).astype(np.float32),
        }
    )
    arguments = {
        "k": 5,
        "epsilon": 1.0,
        "bounds": {"a": (0, 49), "b": (0.0, 100.0)},
        "columns": ["a", "b"],
        "linkage": linkage,
        "shuffle": shuffle,
        "unprotected": unprotected,
        "seed": 9,
    }
    expected = _release(dpfast.ir_dp, table, **arguments)
    output = tmp_path / "out.parquet"
    report, private = _release(
        ir_dp_dataset,
        ArrowSource(table),
        output,
        memory_limit=memory,
        batch_rows=batch_rows,
        n_threads=2,
        **arguments,
    )
    _assert_same(output, expected, report, private)


def test_small_memory_takes_ties_and_several_ranges(tmp_path, monkeypatch):
    # guards the tests above: their tiny limit takes the paths of long ties and of
    # placements in several ranges
    from dpfast._kernels import ranking
    from dpfast.dataflow import placement

    runs: list[int] = []
    original = ranking.add_group_run
    monkeypatch.setattr(
        ranking, "add_group_run", lambda *a: (runs.append(int(a[1])), original(*a))[1]
    )
    ranges: list[int] = []
    finish = placement.Placer.finish

    def counted(self, sink):
        ranges.append(len(self.bounds) - 1)
        return finish(self, sink)

    monkeypatch.setattr(placement.Placer, "finish", counted)
    table = _table(12_007)
    _release(
        ir_dp_dataset,
        ArrowSource(table),
        tmp_path / "out.parquet",
        memory_limit=110_000,
        batch_rows=64,
        **_arguments("records", True, "keep"),
    )
    assert max(runs) > 110_000 // 40  # a tie longer than a sorted range
    assert max(ranges) > 1


@pytest.mark.parametrize("unprotected", ["keep", "shuffle"])
@pytest.mark.parametrize(
    ("cuts", "batch_rows"), [([], 1 << 20), ([1, 2, 999, 5000, 9000], 777), ([6000], 64)]
)
def test_laplace_unprotected_columns_equal_in_memory(tmp_path, unprotected, cuts, batch_rows):
    table = _write_parts(_table(12_007).drop_columns(["occupation"]), tmp_path / "in", cuts)
    arguments = {
        "epsilon": 3.0,
        "bounds": BOUNDS,
        "columns": ["age", "hours-per-week", "share", "tiny"],
        "unprotected": unprotected,
        "seed": 8,
    }
    expected = dpfast.laplace_dp(table, **arguments)
    output = tmp_path / "out.parquet"
    report, private = laplace_dp_dataset(
        ParquetDataset.open(tmp_path / "in"),
        output,
        memory_limit=150_000,
        batch_rows=batch_rows,
        **arguments,
    )
    _assert_same(output, expected, report, private)


def test_bad_value_leaves_no_output_and_no_scratch(tmp_path):
    table = _table(3000)
    share = table.column("share").to_pylist()
    share[2500] = float("nan")
    table = table.set_column(table.schema.get_field_index("share"), "share", pa.array(share))
    _write_parts(table, tmp_path / "in", [1000])
    before = {p.name for p in tmp_path.iterdir()}
    with pytest.raises(
        ValueError, match=r"column 'share' has \d+ non-finite value\(s\) \(first at row 2500: "
    ):
        _release(
            ir_dp_dataset,
            ParquetDataset.open(tmp_path / "in"),
            tmp_path / "out.parquet",
            memory_limit=2**30,
            batch_rows=700,
            **_arguments("records", True, "keep"),
        )
    assert {p.name for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("where", ["placing", "writing"])
def test_interrupt_leaves_no_output_and_no_scratch(tmp_path, monkeypatch, where):
    from dpfast.dataflow import placement

    if where == "placing":

        def interrupted(self, sink):
            raise KeyboardInterrupt

        monkeypatch.setattr(placement.Placer, "finish", interrupted)
    progress = None
    if where == "writing":

        def progress(phase: str, done: int, total: int) -> None:
            if phase.startswith("writing"):
                raise KeyboardInterrupt

    before = {p.name for p in tmp_path.iterdir()}
    with pytest.raises(KeyboardInterrupt):
        _release(
            ir_dp_dataset,
            ArrowSource(_table(3000)),
            tmp_path / "out.parquet",
            memory_limit=2**30,
            progress=progress,
            **_arguments("records", True, "shuffle"),
        )
    assert {p.name for p in tmp_path.iterdir()} == before


def test_bad_linkage_arguments_are_refused_as_in_memory(tmp_path):
    table = _table(100)
    for bad in [{"linkage": "columns", "shuffle": False}, {"unprotected": "copy"}]:
        arguments = {**_arguments("columns", True, "drop"), **bad}
        with pytest.raises(ValueError) as in_memory:
            dpfast.ir_dp(table, **arguments)
        with pytest.raises(ValueError) as out_of_core:
            ir_dp_dataset(
                ArrowSource(table), tmp_path / "out.parquet", memory_limit=2**30, **arguments
            )
        assert str(out_of_core.value) == str(in_memory.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("n", [70_000, 300_001, (1 << 33) + 5])
def test_bucket_ids_are_the_buckets_of_the_permutation(n):
    from dpfast import noise
    from dpfast.dataflow.placement import bucket_ids

    key = noise.NoiseSource.from_seed(12).key("test", "buckets")
    if n < 1 << 20:  # every item's bucket, from the permutation's own parts
        sizes = noise.permutation_bucket_sizes(key, n)
        expected = np.empty(n, dtype=np.int64)
        for b in range(sizes.shape[0]):
            expected[noise.permutation_part(key, n, b, b + 1, sizes)] = b
        for first, count in [(0, n), (1, 999), (n - 5, 5), (12_345, 40_000)]:
            np.testing.assert_array_equal(
                bucket_ids(key, n, first, count), expected[first : first + count]
            )
    else:  # 32-bit lanes: any window equals the same items read from another start
        whole = bucket_ids(key, n, 1_000_000, 1024)
        np.testing.assert_array_equal(bucket_ids(key, n, 1_000_100, 10), whole[100:110])
        assert whole.max() < 1 << noise.permutation_bucket_bits(n)
        assert len(np.unique(whole)) > 1000


def test_record_linked_tie_beyond_a_range_above_empty_buckets_ends(tmp_path):
    # every value on the upper bound: a tie larger than a sorted range, with only empty
    # histogram buckets below it (each refinement must narrow the range)
    frame = pd.DataFrame({"share": np.full(5000, 100.0), "age": np.arange(5000) % 70 + 17})
    bounds = {"share": (0.0, 100.0), "age": (17, 90)}
    expected = _release(
        dpfast.ir_dp, frame, k=7, epsilon=2.0, bounds=bounds, linkage="records", seed=3
    )
    output = tmp_path / "out.parquet"
    _release(
        ir_dp_dataset,
        ArrowSource(pa.Table.from_pandas(frame, preserve_index=False)),
        output,
        k=7,
        epsilon=2.0,
        bounds=bounds,
        linkage="records",
        seed=3,
        memory_limit=40_000,
        batch_rows=512,
    )
    got = pq.read_table(output).to_pandas()
    pd.testing.assert_frame_equal(got, expected.data)
