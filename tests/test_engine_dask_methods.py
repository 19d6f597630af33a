"""Every out-of-core method on Dask: the public functions given a Dask frame, and the CLI."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.datasets import adult, adult_taxonomy
from dpfast.exceptions import UnprovenReleaseWarning

pytest.importorskip("distributed", reason="dask is not installed (pip install 'dpfast[dask]')")

import dask
import dask.dataframe as dd

from dpfast.engines.dask import DaskSource
from dpfast.engines.dask._settings import MEMORY_KEY, SCRATCH_KEY, scratch_directory
from tests.engine_runs import apart_from_engine

#: 2,500 rows: at 30kB a numeric column's 2,500 values are sorted in 3 ranges (1,024
#: values each, the least the engine sorts at once), so small limits take the refining paths
N = 2500
BOUNDS = {"a": (0.0, 50.0), "b": (-10, 10)}
NUMERIC = {"bounds": BOUNDS, "columns": ["a", "b"], "seed": 3}


def _table(n: int = N) -> pd.DataFrame:
    """A float column (some values clamped), an integer one, a text one and a categorical
    one whose categories are not in sorted order (nor in the order the rows hold them)."""
    rng = np.random.default_rng(8)
    return pd.DataFrame(
        {
            "a": rng.uniform(-5, 55, n),
            "b": rng.integers(-12, 13, n),
            "note": [f"n{i % 5}" for i in range(n)],
            "tag": pd.Categorical([f"t{i % 3}" for i in range(n)], categories=["t2", "t0", "t1"]),
        }
    )


def _assert_same(got: Any, expected: Any, in_order: bool, category_order: bool = True) -> None:
    """The same release; ``category_order=False``: categories compared as sets."""
    assert type(got.data).__module__.startswith("dask.dataframe")
    data, want = got.data.compute(), expected.data
    assert list(data.columns) == list(want.columns)
    for name in want.columns:
        assert data[name].dtype == want[name].dtype, name  # categories: the same set
        if not category_order and isinstance(want[name].dtype, pd.CategoricalDtype):
            data[name], want[name] = data[name].astype(str), want[name].astype(str)
    if not in_order:  # the method shuffles: the same multiset of rows
        data = data.sort_values(list(data.columns), ignore_index=True)
        want = want.sort_values(list(want.columns), ignore_index=True)
    pd.testing.assert_frame_equal(data, want, check_dtype=True)
    assert apart_from_engine(got.report) == apart_from_engine(expected.report)
    assert got.private.clamped == expected.private.clamped
    assert got.private.clamped_output == expected.private.clamped_output
    assert got.private.input_rows == expected.private.input_rows


def _warns(unproven: bool) -> Any:
    if unproven:
        return pytest.warns(UnprovenReleaseWarning, match="NOT proven")
    return contextlib.nullcontext()


#: (public function, options, whether the release keeps the rows' order)
CASES = {
    "ir_dp records": (
        dpfast.ir_dp,
        {"k": 5, "epsilon": 4.0, "linkage": "records", "shuffle": False, **NUMERIC},
        True,
    ),
    "ir_dp records keep": (
        dpfast.ir_dp,
        {"k": 7, "epsilon": 4.0, "linkage": "records", "unprotected": "keep", **NUMERIC},
        False,
    ),
    "ir_dp columns shuffle": (
        dpfast.ir_dp,
        {"k": 4, "epsilon": 4.0, "unprotected": "shuffle", **NUMERIC},
        False,
    ),
    "ir_dp records in order": (
        dpfast.ir_dp,
        {"k": 4, "epsilon": 4.0, "linkage": "records", "shuffle": False, "unprotected": "keep"}
        | NUMERIC,
        True,
    ),
    "laplace keep": (dpfast.laplace_dp, {"epsilon": 8.0, "unprotected": "keep", **NUMERIC}, True),
    "laplace shuffle": (
        dpfast.laplace_dp,
        {"epsilon": 8.0, "unprotected": "shuffle", **NUMERIC},
        False,
    ),
    "individual_ranking": (dpfast.individual_ranking, {"k": 3, "columns": ["a", "b"]}, False),
    "randomized_response": (
        dpfast.randomized_response,
        {"column": "note", "domain": [f"n{i}" for i in range(6)], "epsilon": 1.0, "seed": 4},
        True,
    ),
    "k_noise": (dpfast.k_noise, {"k": 4, "columns": ["a", "b"], "seed": 5}, True),
    "k_pram": (dpfast.k_pram, {"k": 6, "columns": ["b"], "retention": 0.3, "seed": 6}, True),
    "mdav_dp": (dpfast.mdav_dp, {"k": 9, "epsilon": 3.0, **NUMERIC}, False),
    "mdav_dp cycling keep": (
        dpfast.mdav_dp,
        {"k": 9, "epsilon": 3.0, "reference": "cycling", "unprotected": "keep", **NUMERIC},
        False,
    ),
    "mdav_dp shuffle": (
        dpfast.mdav_dp,
        {"k": 9, "epsilon": 3.0, "unprotected": "shuffle"} | NUMERIC,
        False,
    ),
}


def _unproven(options: dict[str, Any]) -> bool:
    return options.get("linkage") == "records"


@pytest.mark.parametrize(
    ("partitions", "memory"),
    # the memory is the client's for the passes (a Dask setting); 30kB: several ranges
    [(1, None), (2, "30kB"), (7, "30kB")],
)
@pytest.mark.parametrize("case", list(CASES))
def test_a_dask_frame_gives_the_in_memory_release(client, case, partitions, memory):
    function, options, in_order = CASES[case]
    if case.startswith("mdav_dp") and memory is not None:
        # mdav_dp holds its 277 clusters' arrays and the merge's buffers (one per reference
        # point: four when cycling) within half the limit
        memory = "150kB" if "cycling" in case else "100kB"
    table = _table()
    frame = dd.from_pandas(table, npartitions=partitions)
    assert frame.npartitions == partitions
    with _warns(_unproven(options)):  # the same warning on Dask as in memory
        expected = function(table, **options)
    with dask.config.set({MEMORY_KEY: memory}), _warns(_unproven(options)):
        got = function(frame, **options)
    _assert_same(got, expected, in_order)
    # the frame is the written file, one partition per row group, rows numbered in order
    assert got.data.known_divisions
    assert got.data.divisions[0] == 0 and got.data.divisions[-1] == N - 1


def _write_files(table: pd.DataFrame, where: Path, cuts: list[int], group_rows: int) -> Path:
    """Write ``table`` cut at ``cuts`` into files whose names sort in row order."""
    where.mkdir()
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    bounds = [0, *cuts, len(table)]
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(
            arrow.slice(lo, hi - lo), where / f"part-{i:03d}.parquet", row_group_size=group_rows
        )
    return where


#: Parquet inputs: (cuts between files, rows per row group, batch rows, memory limit)
FILES = {
    "1 file": ([], 1 << 20, 1 << 20, 2**30),
    "2 files": ([1300], 500, 1000, 60_000),
    "7 files, 1-row ones": ([1, 2, 700, 1800, 1801, 2400], 128, 64, 30_000),
}


@pytest.mark.parametrize("files", list(FILES))
@pytest.mark.parametrize(
    "case", ["ir_dp records keep", "laplace shuffle", "k_noise", "k_pram", "mdav_dp"]
)
def test_parquet_files_give_the_in_memory_release(client, tmp_path, case, files):
    from dpfast.engines import EngineChoice

    function, options, in_order = CASES[case]
    cuts, group_rows, batch_rows, memory = FILES[files]
    if case == "mdav_dp":
        memory = max(memory, 100_000)  # its 277 clusters' arrays within half the limit
    where = _write_files(_table(), tmp_path / "in", cuts, group_rows)
    source = DaskSource.from_parquet(where)
    # the files read in memory. The copied categorical column "tag" comes back with its
    # categories in the order of the release file's dictionaries (the column engine's
    # output, which a source of Parquet files has no pandas categories to restore)
    table = pq.read_table(where).to_pandas()
    with _warns(_unproven(options)):
        expected = function(table, **options)
    with _warns(_unproven(options)):  # the public function over the Dask source
        engine = EngineChoice("dask", {"batch_rows": batch_rows})
        got = function(source, engine=engine, memory_limit=memory, **options)
    _assert_same(got, expected, in_order, category_order=False)


def test_diffgen_of_a_dask_frame_gives_the_in_memory_counts(client):
    names = ["age", "education", "sex", "income"]
    table = adult("train", drop_missing=True).iloc[:800][names].reset_index(drop=True)
    options = {
        "target": "income",
        "epsilon": 1.0,
        "steps": 6,
        "taxonomies": {n: adult_taxonomy(n) for n in ("education", "sex")},
        "bounds": {"age": (17, 90)},
        "classes": ["<=50K", ">50K"],
        "seed": 7,
    }
    frame = dd.from_pandas(table, npartitions=7)
    expected = dpfast.diffgen(table, **options)
    got = dpfast.diffgen(frame, **options)
    assert type(got.counts).__module__.startswith("dask.dataframe")
    # the counts of the in-memory release of the frame's table, with their dtypes
    pd.testing.assert_frame_equal(got.counts.compute(), expected.counts, check_dtype=True)
    assert got.cut.to_dict() == expected.cut.to_dict()
    assert apart_from_engine(got.report) == apart_from_engine(expected.report)
    assert got.private.input_rows == expected.private.input_rows


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_diffgen_on_dask_brings_no_row_to_the_driver(client):
    """The passes' counts are added on the workers: the driver's bytes do not grow with n."""
    names = ["age", "hours-per-week", "education", "sex", "income"]
    whole = adult("train", drop_missing=True)[names]
    options = {
        "target": "income",
        "epsilon": 1.0,
        "steps": 6,
        "taxonomies": {n: adult_taxonomy(n) for n in ("education", "sex")},
        "bounds": {"age": (17, 90), "hours-per-week": (1.0, 99.0)},
        "classes": ["<=50K", ">50K"],
        "seed": 7,
    }
    got = {}
    for n in (20_000, 200_000):
        rows = np.random.default_rng(n).integers(0, len(whole), n)
        table = whole.iloc[rows].reset_index(drop=True)
        engine = dpfast.engines.EngineChoice("dask", {"batch_rows": 4096})
        release = dpfast.diffgen(dd.from_pandas(table, npartitions=4), engine=engine, **options)
        expected = dpfast.diffgen(table, **options)
        pd.testing.assert_frame_equal(release.counts.compute(), expected.counts)
        got[n] = release.private.to_dict()["work"]["driver_bytes"]
    assert got[200_000] <= 1.5 * got[20_000], got
    assert got[200_000] < 200_000, got  # count tables, not a byte a row


def test_release_files_live_in_the_configured_scratch_directory(client, tmp_path):
    frame = dd.from_pandas(_table(50), npartitions=2)
    with dask.config.set({SCRATCH_KEY: str(tmp_path / "shared")}):
        # a release the client writes (ranks linked to their rows), not a lazy frame
        got = dpfast.individual_ranking(frame, k=3, columns=["a"])
        where = scratch_directory()
    assert where.parent == tmp_path / "shared"
    assert [p.suffix for p in where.iterdir()] == [".parquet"]
    assert len(got.data) == 50
    assert scratch_directory() != where  # without the setting: the temporary directory's


def test_k_noise_of_every_column_is_computed_by_the_workers(client, tmp_path):
    # every column released row by row: a lazy frame of the input's partitions, no file
    table = _table()[["a", "b"]]
    frame = dd.from_pandas(table, npartitions=3)
    expected = dpfast.k_noise(table, k=4, seed=5)
    with dask.config.set({SCRATCH_KEY: str(tmp_path)}):
        got = dpfast.k_noise(frame, k=4, seed=5)
        _assert_same(got, expected, True)
        assert list(scratch_directory().iterdir()) == []


@pytest.mark.parametrize(
    ("function", "options", "named"),
    [
        (dpfast.individual_ranking, {"k": 3, "metrics": True}, "metrics=True"),
        (dpfast.ir_dp, {"k": 3, "epsilon": 1.0, "bounds": BOUNDS, "metrics": True}, "metrics"),
    ],
)
def test_what_dask_cannot_run_is_refused_by_name(function, options, named):
    frame = dd.from_pandas(_table(20), npartitions=2)
    with pytest.raises(
        ValueError, match="which a release on a Dask DataFrame does not hold"
    ) as refused:
        function(frame, **options)
    assert named in str(refused.value)
    assert "frame.compute()" in str(refused.value)


def test_mdav_dp_with_bounds_from_the_data_gives_the_in_memory_release(client):
    # bounds="data": the columns' ranges from a pass on the workers, warned of as in memory
    table = _table()
    frame = dd.from_pandas(table, npartitions=3)
    options = {"k": 9, "epsilon": 3.0, "bounds": "data", "columns": ["a", "b"], "seed": 3}
    with pytest.warns(dpfast.PrivacyLeakWarning):
        expected = dpfast.mdav_dp(table, **options)
    with pytest.warns(dpfast.PrivacyLeakWarning):
        got = dpfast.mdav_dp(frame, **options)
    _assert_same(got, expected, False)
    assert got.report.guarantee_level == "none"


def test_mdav_refuses_a_dask_frame_and_names_what_runs_there():
    frame = dd.from_pandas(_table(20), npartitions=2)
    with pytest.raises(ValueError, match=r"runs in memory only.*dask engine.*ir_dp.*mdav_dp"):
        dpfast.mdav(frame, k=3, columns=["a", "b"])


def test_bad_input_on_a_worker_reaches_the_caller_with_its_row(client, tmp_path):
    table = _table()
    table.loc[1234, "a"] = np.nan
    frame = dd.from_pandas(table, npartitions=3)
    with dask.config.set({SCRATCH_KEY: str(tmp_path)}):
        with pytest.raises(ValueError, match="row 1234"):
            dpfast.k_noise(frame, k=4, columns=["a"], seed=5)
        with pytest.raises(ValueError, match="k"):
            dpfast.individual_ranking(frame, k=0, columns=["b"])
        assert list(scratch_directory().iterdir()) == []  # nothing written, nothing left


def _killing(part: pd.DataFrame, calls: str, row: int, kill_at: int) -> pd.DataFrame:
    """Return ``part``; the ``kill_at``-th read of the partition holding ``row`` kills its
    worker process first (each read leaves a file in ``calls``)."""
    if row in part.index:
        done = len(os.listdir(calls))
        Path(calls, f"read-{done}").touch()
        if done + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    return part


@pytest.mark.parametrize("case", ["k_noise", "ir_dp records keep"])
def test_a_worker_killed_mid_run_gives_the_same_release(client, tmp_path, case):
    function, options, in_order = CASES[case]
    calls = tmp_path / "calls"
    calls.mkdir()
    table = _table()
    frame = dd.from_pandas(table, npartitions=3)
    # read 1 counts the rows, then come the passes: kill the worker in the third read
    flaky = frame.map_partitions(_killing, str(calls), 1500, 3, meta=frame._meta)
    with _warns(_unproven(options)):
        expected = function(table, **options)
    with _warns(_unproven(options)):
        got = function(flaky, **options)
    assert len(os.listdir(calls)) >= 4  # the killed read was run again
    _assert_same(got, expected, in_order)


def _failing(part: pd.DataFrame, row: int, reads: str) -> pd.DataFrame:
    """Fail the fourth read of the partition holding ``row``: read 1 counts its rows, 2
    checks the column, 3 and later ones run in the release's scratch directory."""
    if row in part.index:
        Path(reads, f"read-{len(os.listdir(reads))}").touch()
        if len(os.listdir(reads)) == 4:
            raise RuntimeError("a lost disk, simulated")
    return part


def test_a_failed_run_leaves_no_output(client, tmp_path):
    reads = tmp_path / "reads"
    reads.mkdir()
    frame = dd.from_pandas(_table(), npartitions=3)
    flaky = frame.map_partitions(_failing, 2000, str(reads), meta=frame._meta)
    with dask.config.set({SCRATCH_KEY: str(tmp_path / "scratch")}):
        with pytest.raises(RuntimeError, match="a lost disk, simulated"):
            dpfast.k_pram(flaky, k=6, columns=["b"], seed=6)
        assert list(scratch_directory().iterdir()) == []  # neither a file nor scratch
    assert len(os.listdir(reads)) == 4


def test_an_interrupted_run_leaves_no_output(client, tmp_path):
    frame = dd.from_pandas(_table(), npartitions=3)
    seen = []

    def interrupt(phase: str, done: int, total: int) -> None:
        seen.append(phase)
        if phase.startswith("writing"):  # the data is complete: stop before it is published
            raise KeyboardInterrupt

    options = {"k": 5, "epsilon": 4.0, "linkage": "records", "progress": interrupt, **NUMERIC}
    with dask.config.set({SCRATCH_KEY: str(tmp_path)}):
        with _warns(True), pytest.raises(KeyboardInterrupt):
            dpfast.ir_dp(frame, **options)
        assert list(scratch_directory().iterdir()) == []
    assert any(phase.startswith("writing") for phase in seen)


def _cli(tmp_path: Path, method: str, extra: list[str]) -> list[str]:
    where = _write_files(_table(), tmp_path / "in", [250], 64)
    schema = {
        "columns": {
            "a": {"type": "float", "bounds": [0, 50]},
            "b": {"type": "integer", "bounds": [-10, 10]},
            "note": {"type": "string", "protect": False},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    args = ["release", method, str(where), "--schema", str(tmp_path / "s.json")]
    return [*args, *extra, "--quiet"]


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("ir-dp", ["--k", "5", "--epsilon", "4", "--linkage", "records", "--unprotected", "keep"]),
        ("ir-dp", ["--k", "5", "--epsilon", "4", "--linkage", "records", "--no-shuffle"]),
        ("laplace", ["--epsilon", "4", "--unprotected", "shuffle"]),
        ("k-noise", ["--k", "4"]),
        ("individual-ranking", ["--k", "4"]),
        ("mdav-dp", ["--k", "9", "--epsilon", "3"]),
        ("mdav-dp", ["--k", "9", "--epsilon", "3", "--unprotected", "keep"]),
    ],
)
def test_cli_on_dask_writes_the_local_engine_release(client, tmp_path, method, extra):
    from dpfast import cli

    args = _cli(
        tmp_path, method, extra if method == "individual-ranking" else [*extra, "--seed", "3"]
    )
    on_dask = [*args, "--engine", "dask", "--scheduler", client.scheduler.address]
    assert cli.main([*on_dask, "-o", str(tmp_path / "out")]) == 0
    assert cli.main([*args, "-o", str(tmp_path / "local")]) == 0
    got, want = pq.read_table(tmp_path / "out"), pq.read_table(tmp_path / "local")
    assert got.equals(want)
    report = json.loads((tmp_path / "out.public-report.json").read_text("utf-8"))
    want = json.loads((tmp_path / "local.public-report.json").read_text("utf-8"))
    assert apart_from_engine(report) == apart_from_engine(want)
    client.wait_for_workers(2, timeout=60)  # the module's cluster is still up


def test_cli_diffgen_on_dask_writes_the_local_engine_release(client, tmp_path):
    from dpfast import cli, datasets

    frame = adult("train", drop_missing=True).iloc[:1500].reset_index(drop=True)
    _write_files(frame, tmp_path / "in", [1, 600], 256)
    schema = str(Path(datasets.__file__).with_name("adult_diffgen.schema.json"))
    options = ["--target", "income", "--steps", "6", "--epsilon", "1", "--schema", schema]
    args = ["release", "diffgen", str(tmp_path / "in"), *options, "--seed", "3", "--quiet"]
    on_dask = [*args, "--engine", "dask", "--scheduler", client.scheduler.address]
    assert cli.main([*on_dask, "-o", str(tmp_path / "out")]) == 0
    assert cli.main([*args, "-o", str(tmp_path / "local")]) == 0
    assert pq.read_table(tmp_path / "out").equals(pq.read_table(tmp_path / "local"))
    report = json.loads((tmp_path / "out.public-report.json").read_text("utf-8"))
    want = json.loads((tmp_path / "local.public-report.json").read_text("utf-8"))
    assert apart_from_engine(report) == apart_from_engine(want)


def test_cli_on_dask_refuses_a_text_output_before_dask_starts(tmp_path, capsys):
    from dpfast import cli

    args = _cli(tmp_path, "mdav-dp", ["--k", "9", "--epsilon", "3", "--unprotected", "keep"])
    assert cli.main([*args, "--engine", "dask", "-o", str(tmp_path / "out.csv")]) == 2
    assert "out of core writes Parquet" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()


def test_cli_on_dask_shows_the_passes_progress(client, tmp_path, capsys, monkeypatch):
    from dpfast import cli
    from dpfast.cli import _progress

    monkeypatch.setattr(_progress, "IO_PROGRESS_DELAY", 0.0)  # every phase, however quick
    args = [a for a in _cli(tmp_path, "k-pram", ["--k", "6", "--seed", "3"]) if a != "--quiet"]
    on_dask = [*args, "--engine", "dask", "--scheduler", client.scheduler.address]
    assert cli.main([*on_dask, "-o", str(tmp_path / "out")]) == 0
    shown = capsys.readouterr().err
    assert "dpfast: checking a..." in shown  # a pass on the workers
    assert "dpfast: writing out..." in shown  # the client writing OUTPUT


def test_a_failed_or_interrupted_cli_run_on_dask_leaves_no_output(
    client, tmp_path, capsys, monkeypatch
):
    from dpfast import cli
    from dpfast.engines.outofcore import _output

    table = _table()
    table.loc[2222, "a"] = np.nan
    bad = _write_files(table, tmp_path / "bad", [1000], 128)
    args = _cli(tmp_path, "k-noise", ["--k", "4", "--seed", "3"])
    on_dask = [*args, "--engine", "dask", "--scheduler", client.scheduler.address]
    at = on_dask.index(str(tmp_path / "in"))
    failing = [*on_dask[:at], str(bad), *on_dask[at + 1 :]]
    assert cli.main([*failing, "-o", str(tmp_path / "out")]) == 2  # refused on a worker
    assert "'a' has a missing value at row 2222" in capsys.readouterr().err

    def interrupted(written: Path, target: Path) -> None:  # the output is complete
        assert written.exists()
        raise KeyboardInterrupt

    monkeypatch.setattr(_output, "publish_at", interrupted)
    assert cli.main([*on_dask, "-o", str(tmp_path / "out")]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "in", "s.json"]
