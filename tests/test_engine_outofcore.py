"""The out-of-core engine gives the in-memory release bit for bit, whatever the split."""

from __future__ import annotations

import hashlib
import os
import socket
from itertools import chain, pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.datasets import adult, adult_taxonomy
from dpfast.engines import parse_memory
from dpfast.engines import scratch_dirs as outofcore_scratch
from dpfast.engines.outofcore._sources import ArrowSource, ParquetDataset
from tests.engine_runs import apart_from_engine, ir_dp_dataset

BOUNDS = {"age": (17, 90), "hours-per-week": (1, 99), "capital-gain": (0, 100_000)}
FLOAT_BOUNDS = {"share": (0.0, 100.0), "tiny": (0.0, 1e6)}


def _table(n: int) -> pd.DataFrame:
    frame = adult("train", drop_missing=True)
    frame = frame[["age", "hours-per-week", "capital-gain", "occupation"]].iloc[:n]
    frame = frame.reset_index(drop=True)
    rng = np.random.default_rng(n)
    # beyond the bounds on both sides (clamped), and many ties on a coarse grid
    frame["share"] = np.round(rng.uniform(-5, 105, len(frame)), 1)
    # every value in the lowest sliver of a wide domain: refined histograms, one big tie
    frame["tiny"] = np.where(rng.random(len(frame)) < 0.5, 0.0, rng.uniform(0, 1e-3, len(frame)))
    return frame


def _write_parts(frame: pd.DataFrame, directory: Path, cuts: list[int]) -> None:
    directory.mkdir()
    edges = [0, *cuts, len(frame)]
    for i, (first, last) in enumerate(pairwise(edges)):
        part = pa.Table.from_pandas(frame.iloc[first:last], preserve_index=False)
        pq.write_table(part, directory / f"part-{i:03d}.parquet")


def _in_memory(
    frame: pd.DataFrame, k: int, seed: int = 3, remainder: str = "middle"
) -> dpfast.Release:
    return dpfast.ir_dp(
        frame,
        k=k,
        epsilon=2.0,
        bounds={**BOUNDS, **FLOAT_BOUNDS},
        taxonomies={"occupation": adult_taxonomy("occupation")},
        seed=seed,
        remainder=remainder,
    )


def _out_of_core(
    source,
    output: Path,
    k: int,
    memory: int,
    batch_rows: int,
    seed: int = 3,
    threads=None,
    remainder: str = "middle",
):
    return ir_dp_dataset(
        source,
        output,
        k=k,
        epsilon=2.0,
        bounds={**BOUNDS, **FLOAT_BOUNDS},
        taxonomies={"occupation": adult_taxonomy("occupation")},
        seed=seed,
        memory_limit=memory,
        batch_rows=batch_rows,
        n_threads=threads,
        remainder=remainder,
    )


def _assert_same(output: Path, expected: dpfast.Release, report, private) -> None:
    got = pq.read_table(output).to_pandas()
    assert list(got.columns) == list(expected.data.columns)
    for name in got.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
        assert got[name].dtype == expected.data[name].dtype
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped
    assert private.clamped_output == expected.private.clamped_output
    assert private.input_rows == expected.private.input_rows


@pytest.mark.parametrize(
    ("cuts", "memory", "batch_rows", "remainder"),
    [
        ([], 2**30, 1 << 20, "middle"),  # one file, everything in memory
        ([4000], 200_000, 1000, "last"),  # two files, ranges of about 6,000 values
        ([1, 2, 999, 5000, 5001, 9000], 110_000, 777, "middle"),  # seven files, 1-row ones
        ([1, 2, 999, 5000, 5001, 9000], 110_000, 777, "last"),
    ],
)
def test_parquet_dataset_release_equals_in_memory(tmp_path, cuts, memory, batch_rows, remainder):
    frame = _table(12_007)  # n % k != 0: a remainder group
    _write_parts(frame, tmp_path / "in", cuts)
    expected = _in_memory(frame, k=7, remainder=remainder)
    output = tmp_path / "out.parquet"
    report, private = _out_of_core(
        ParquetDataset.open(tmp_path / "in"), output, 7, memory, batch_rows, remainder=remainder
    )
    _assert_same(output, expected, report, private)


@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_ranges_cut_inside_the_larger_group_give_the_in_memory_release(
    tmp_path, monkeypatch, remainder
):
    from dpfast._kernels import ranking
    from dpfast.partitions.ranking import RankGroups

    frame = _table(12_007)
    k = 997  # 12 groups: group 6 (middle) or 11 (last) of 997 + 43 ranks
    expected = _in_memory(frame, k=k, remainder=remainder)
    parts: list[tuple[int, int]] = []
    original = ranking.add_group_sums
    monkeypatch.setattr(
        ranking,
        "add_group_sums",
        lambda *a: (parts.append((int(a[2]), int(a[0].shape[0]))), original(*a))[1],
    )
    table = pa.Table.from_pandas(frame, preserve_index=False)
    output = tmp_path / "out.parquet"
    report, private = _out_of_core(ArrowSource(table), output, k, 110_000, 777, remainder=remainder)
    _assert_same(output, expected, report, private)
    assert report.parameters["remainder"] == remainder
    layout = RankGroups(12_007, k, remainder)
    lo, hi = layout.span(layout.big)
    # a sorted range begins or ends inside the larger group
    assert any(lo < first < hi or lo < first + m < hi for first, m in parts), (lo, hi, parts)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_arrow_source_and_64_batches_give_the_same_release(tmp_path, threads):
    frame = _table(6400)
    expected = _in_memory(frame, k=25, seed=11)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    output = tmp_path / "out.parquet"
    report, private = _out_of_core(
        ArrowSource(table), output, 25, 60_000, 100, seed=11, threads=threads
    )
    _assert_same(output, expected, report, private)


def test_dataset_directory_output(tmp_path, monkeypatch):
    from dpfast.engines.outofcore import _output as outofcore

    monkeypatch.setattr(outofcore, "FILE_ROWS", 2000)
    monkeypatch.setattr(outofcore, "WRITE_ROWS", 500)
    frame = _table(5003)
    expected = _in_memory(frame, k=10)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    output = tmp_path / "released"
    _out_of_core(ArrowSource(table), output, 10, 2**30, 1 << 20)
    files = sorted(p.name for p in output.iterdir())
    assert files == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    got = pq.read_table(output).to_pandas()
    for name in got.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())


def test_a_killed_runs_scratch_is_removed_by_the_next_run_saying_so(tmp_path):
    import subprocess
    import sys

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # its process id names a scratch directory whose run is gone
    stale = tmp_path / f".released.dpfast{ended.pid}-x1y2"
    stale.mkdir()
    (stale / "column").write_bytes(b"\0" * 64)
    # a name with its host: the first 8 hex digits of the SHA-256 of the host's name
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    stale_file = tmp_path / f".released.dpfast{ended.pid}h{host}-k3j4.tmp"
    stale_file.write_bytes(b"\0" * 8)
    elsewhere = tmp_path / f".released.dpfast{ended.pid}h00000000-e5f6"  # another host's
    elsewhere.mkdir()
    alive = tmp_path / f".released.dpfast{os.getppid()}-a1b2"  # its process still runs
    alive.mkdir()
    other = tmp_path / ".released.ab12"  # not named by a dpfast run: never touched
    other.mkdir()
    table = pa.Table.from_pandas(_table(300), preserve_index=False)
    with pytest.warns(UserWarning, match="killed before it could remove it") as caught:
        _out_of_core(ArrowSource(table), tmp_path / "released", 10, 2**30, 64)
    # one warning names this test's stale directory (others may name other runs' leftovers
    # in the system's temporary directory)
    ours = sorted(str(w.message) for w in caught if str(tmp_path) in str(w.message))
    assert len(ours) == 2
    assert str(stale) in ours[0] and str(stale_file) in ours[1]
    assert not stale.exists() and not stale_file.exists()
    assert alive.is_dir() and other.is_dir() and elsewhere.is_dir()
    scratch = outofcore_scratch.make_scratch(tmp_path / "x")
    assert scratch.name.startswith(f".x.dpfast{os.getpid()}h{host}-")
    assert scratch.stat().st_mode & 0o777 == 0o700  # readable by its owner only


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, r"column 'share' has 1 non-finite value\(s\) \(first at row 2500: NaN or missing\)"),
        (
            np.nan,
            r"column 'share' has 1 non-finite value\(s\) \(first at row 2500: NaN or missing\)",
        ),
        (np.inf, r"column 'share' has 1 non-finite value\(s\) \(first at row 2500: infinite\)"),
    ],
)
def test_bad_value_leaves_no_output_and_no_scratch(tmp_path, value, message):
    table = pa.Table.from_pandas(_table(3000), preserve_index=False)
    share = table.column("share").to_pylist()
    share[2500] = value
    table = table.set_column(table.schema.get_field_index("share"), "share", pa.array(share))
    (tmp_path / "in").mkdir()
    pq.write_table(table.slice(0, 1000), tmp_path / "in" / "a.parquet")
    pq.write_table(table.slice(1000), tmp_path / "in" / "b.parquet")
    before = {p.name for p in tmp_path.iterdir()}
    with pytest.raises(ValueError, match=message):
        _out_of_core(ParquetDataset.open(tmp_path / "in"), tmp_path / "out.parquet", 5, 2**30, 700)
    assert {p.name for p in tmp_path.iterdir()} == before


def test_interrupt_while_writing_leaves_no_output(tmp_path, monkeypatch):
    from dpfast.engines.outofcore import _output as outofcore

    monkeypatch.setattr(outofcore, "WRITE_ROWS", 500)
    table = pa.Table.from_pandas(_table(3000), preserve_index=False)
    before = {p.name for p in tmp_path.iterdir()}

    def progress(phase: str, done: int, total: int) -> None:
        if phase.startswith("writing") and done >= 1000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ir_dp_dataset(
            ArrowSource(table),
            tmp_path / "out.parquet",
            k=5,
            epsilon=1.0,
            bounds={**BOUNDS, **FLOAT_BOUNDS},
            taxonomies={"occupation": adult_taxonomy("occupation")},
            seed=1,
            memory_limit=2**30,
            progress=progress,
        )
    assert {p.name for p in tmp_path.iterdir()} == before


def test_group_values_must_fit_in_the_memory_limit(tmp_path):
    table = pa.table({"x": np.arange(100_000, dtype=np.float64)})
    message = r"33,333 rank groups per column.*raise the memory limit or k"
    with pytest.raises(ValueError, match=message):
        ir_dp_dataset(
            ArrowSource(table),
            tmp_path / "out.parquet",
            k=3,
            epsilon=1.0,
            bounds={"x": (0.0, 1e5)},
            memory_limit=200_000,
        )
    assert list(tmp_path.iterdir()) == []


def test_dataset_open_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        ParquetDataset.open(tmp_path / "missing.parquet")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"holds no \.parquet file"):
        ParquetDataset.open(tmp_path / "empty")
    with pytest.raises(ValueError, match="no file matches"):
        ParquetDataset.open(tmp_path / "*.parquet")
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"a": [1.5]}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match="another schema"):
        ParquetDataset.open(tmp_path / "*.parquet")
    one = ParquetDataset.open(tmp_path / "a.parquet")
    assert (one.n_rows, one.names) == (2, ["a"])


def test_a_directory_input_is_its_own_files_and_never_read_recursively(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), data / "part-0.parquet")
    pq.write_table(pa.table({"a": [3]}), data / "part-1.parquet")
    # hidden and metadata files and directories are not data
    pq.write_table(pa.table({"a": [99]}), data / "_common.parquet")
    (data / ".scratch").mkdir()
    pq.write_table(pa.table({"a": [98]}), data / ".scratch" / "x.parquet")
    assert ParquetDataset.open(data).n_rows == 3
    # a subdirectory holding Parquet files (an earlier release, a partition) is refused,
    # naming it and the globs that choose
    (data / "old" / "deeper").mkdir(parents=True)
    pq.write_table(pa.table({"a": [7, 7]}), data / "old" / "deeper" / "part-0.parquet")
    with pytest.raises(ValueError, match=r"subdirectories holding Parquet files \('old'\)") as info:
        ParquetDataset.open(data)
    assert f"'{data}/*.parquet'" in str(info.value) and f"'{data}/**/*.parquet'" in str(info.value)
    assert ParquetDataset.open(data / "*.parquet").n_rows == 4  # _common.parquet: named
    assert ParquetDataset.open(data / "**" / "*.parquet").n_rows == 6  # every level, not hidden


def test_dataset_rows_are_numbered_by_file_then_row(tmp_path):
    _write_parts(pd.DataFrame({"v": np.arange(10.0)}), tmp_path / "in", [3, 4])
    dataset = ParquetDataset.open(tmp_path / "in")
    got = list(dataset.map_column("v", 2, lambda array, first: (first, array.to_pylist())))
    assert [first for first, _ in got] == [0, 2, 3, 4, 6, 8]
    assert list(chain.from_iterable(v for _, v in got)) == list(np.arange(10.0))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4GiB", 4 * 2**30), ("512MiB", 512 * 2**20), ("2GB", 2 * 10**9), ("1.5 GB", 1_500_000_000)],
)
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["", "4 GiBs", "-1GB", "0", "lots"])
def test_parse_memory_refuses_nonsense(text):
    with pytest.raises(ValueError, match="memory size"):
        parse_memory(text)


def test_small_memory_takes_refined_histograms_and_runs_of_ties(tmp_path, monkeypatch):
    # guards the test above: its tiny limit must take every path of the range splitting
    from dpfast._kernels import ranking

    runs: list[int] = []
    original = ranking.add_group_run
    monkeypatch.setattr(
        ranking, "add_group_run", lambda *a: (runs.append(int(a[1])), original(*a))[1]
    )
    phases: list[str] = []
    table = pa.Table.from_pandas(_table(12_007), preserve_index=False)
    ir_dp_dataset(
        ArrowSource(table),
        tmp_path / "out.parquet",
        k=7,
        epsilon=2.0,
        bounds={**BOUNDS, **FLOAT_BOUNDS},
        taxonomies={"occupation": adult_taxonomy("occupation")},
        seed=3,
        memory_limit=110_000,
        batch_rows=777,
        progress=lambda phase, done, total: phases.append(phase),
    )
    assert phases.count("column tiny") >= 4  # a histogram, a refined one, then ranges
    assert max(runs) > 110_000 // 32  # a tie larger than a sorted range: added as a run


@pytest.mark.parametrize(
    ("cuts", "batch_rows"), [([], 1 << 20), ([1, 2, 999, 5000, 9000], 777), ([6000], 64)]
)
def test_laplace_dataset_release_equals_in_memory(tmp_path, cuts, batch_rows):
    from tests.engine_runs import laplace_dp_dataset

    frame = _table(12_007).drop(columns=["occupation"])
    bounds = {**BOUNDS, **FLOAT_BOUNDS}
    expected = dpfast.laplace_dp(frame, epsilon=3.0, bounds=bounds, seed=8)
    _write_parts(frame, tmp_path / "in", cuts)
    output = tmp_path / "out.parquet"
    report, private = laplace_dp_dataset(
        ParquetDataset.open(tmp_path / "in"),
        output,
        epsilon=3.0,
        bounds=bounds,
        seed=8,
        memory_limit=2**30,
        batch_rows=batch_rows,
    )
    _assert_same(output, expected, report, private)


@pytest.mark.parametrize("top", [100.0, 99.5])
def test_a_tie_beyond_a_sorted_range_above_empty_buckets_ends(tmp_path, top):
    # every value on (or near) the upper bound: the histogram's buckets below the tie are
    # empty, and a range must start at the tie, or refining it gives the same range again
    frame = pd.DataFrame({"share": np.full(5000, top), "age": np.arange(5000) % 70 + 17})
    expected = dpfast.ir_dp(
        frame, k=7, epsilon=2.0, bounds={"share": (0.0, 100.0), "age": (17, 90)}, seed=3
    )
    output = tmp_path / "out.parquet"
    report, private = ir_dp_dataset(
        ArrowSource(pa.Table.from_pandas(frame, preserve_index=False)),
        output,
        k=7,
        epsilon=2.0,
        bounds={"share": (0.0, 100.0), "age": (17, 90)},
        seed=3,
        memory_limit=40_000,  # ranges of 1,250 values: the tie of 5,000 is larger
        batch_rows=512,
    )
    _assert_same(output, expected, report, private)


def test_a_text_output_is_refused_out_of_core_before_any_pass(tmp_path):
    from dpfast.exceptions import DPFastValueError

    table = pa.Table.from_pandas(_table(50), preserve_index=False)
    for name in ("x.csv", "x.tsv.gz"):
        with pytest.raises(DPFastValueError, match=r"names a text file; name it \.parquet"):
            dpfast.laplace_dp(
                ArrowSource(table),
                epsilon=1.0,
                bounds={"age": (17, 90)},
                columns=["age"],
                engine="outofcore",
                output=tmp_path / name,
            )
    assert list(tmp_path.iterdir()) == []
