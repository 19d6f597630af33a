"""Dask: global row numbers, ir_dp and laplace_dp on the workers, atomic output, lost workers."""

from __future__ import annotations

import itertools
import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.engines.outofcore._sources import ParquetDataset
from tests.engine_runs import apart_from_engine, on_engine

pytest.importorskip("distributed", reason="dask is not installed (pip install 'dpfast[dask]')")

import dask.dataframe as dd

from dpfast.engines.dask import DaskEngine, DaskSource

BOUNDS = {"a": (0.0, 50.0), "b": (-10, 10)}
EPSILON, SEED = 8.0, 11
COLUMNS = ["a", "b"]


def _table(n: int = 3001) -> pd.DataFrame:
    """A float column (some values clamped), an integer one and a text one not protected."""
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "a": rng.uniform(-5, 55, n),
            "b": rng.integers(-12, 13, n),
            "note": [f"n{i % 7}" for i in range(n)],
        }
    )


def _write_files(table: pd.DataFrame, where: Path, cuts: list[int], group_rows: int = 200) -> Path:
    """Write ``table`` cut at ``cuts`` into files whose names sort in row order."""
    where.mkdir()
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    bounds = [0, *cuts, len(table)]
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(
            arrow.slice(lo, hi - lo), where / f"part-{i:03d}.parquet", row_group_size=group_rows
        )
    return where


def _assert_numbered_as(source, expected: np.ndarray, rows: int) -> None:
    got = sorted(source.map_column("a", rows, lambda a, first: (first, a.to_numpy().copy())))
    assert all(len(values) <= rows for _, values in got)
    for first, values in got:  # each batch is the rows its number names
        np.testing.assert_array_equal(values, expected[first : first + len(values)])
    assert sum(len(values) for _, values in got) == len(expected)


@pytest.mark.parametrize("partitions", [1, 2, 7])
def test_frame_rows_are_numbered_in_the_frames_order(client, partitions):
    table = _table()
    source = DaskSource(dd.from_pandas(table, npartitions=partitions))
    assert source.n_rows == len(table)
    assert len(source.counts()) == partitions
    _assert_numbered_as(source, table["a"].to_numpy(), 64)


def test_a_task_reads_its_row_group_batch_by_batch_and_refuses_a_changed_file(client, tmp_path):
    table = _table()
    files = _write_files(table, tmp_path / "in", [1000], 2000)
    source = DaskSource.from_parquet(files)
    _assert_numbered_as(source, table["a"].to_numpy(), 300)  # batches of 300 rows, read so
    assert source.n_rows == len(table)  # counted from the footers, when planned
    shorter = pa.Table.from_pandas(table.iloc[:900], preserve_index=False)
    pq.write_table(shorter, files / "part-000.parquet", row_group_size=2000)
    with pytest.raises(ValueError, match="gave other rows than when its partitions were counted"):
        list(source.map_column("a", 300, lambda array, first: len(array)))


@pytest.mark.parametrize("reader", ["from_parquet", "dd.read_parquet"])
def test_parquet_rows_are_numbered_as_parquet_dataset_numbers_them(client, tmp_path, reader):
    table = _table()
    files = _write_files(table, tmp_path / "in", [1, 2, 1000, 1001, 2000, 2999], 40)
    dataset = ParquetDataset.open(files)
    expected = np.concatenate(list(dataset.map_column("a", 1 << 20, lambda a, f: a.to_numpy())))
    if reader == "from_parquet":
        source = DaskSource.from_parquet(files)
        assert len(source.counts()) > len(dataset.files)  # one partition per row group
    else:  # Dask reads a list of files in the list's order, row groups in file order
        source = DaskSource(dd.read_parquet(list(dataset.files)))
    assert source.n_rows == len(table)
    _assert_numbered_as(source, expected, 1000)


def test_from_parquet_numbers_files_in_sorted_path_order(client, tmp_path):
    # dd.read_parquet orders files naturally (p1, p2, p10), even given a list in another
    # order; ParquetDataset and the in-memory reader sort paths as strings (p1, p10, p2)
    for i in (1, 2, 10):
        pq.write_table(pa.table({"a": np.full(3, float(i))}), tmp_path / f"p{i}.parquet")
    expected = np.repeat([1.0, 10.0, 2.0], 3)
    source = DaskSource.from_parquet(tmp_path)
    _assert_numbered_as(source, expected, 2)
    np.testing.assert_array_equal(source.frame["a"].compute().to_numpy(), expected)


def test_a_frame_that_changes_between_passes_is_refused(client):
    frame = dd.from_pandas(_table(), npartitions=3)
    source = DaskSource(frame)
    assert source.n_rows == 3001  # partitions counted
    source.frame = frame[frame["b"] > 0]  # as an unseeded sample would read other rows
    with pytest.raises(ValueError, match=r"gave other rows.*persist it"):
        list(source.map_column("a", 1000, lambda a, first: len(a)))


def _assert_same_release(got: dpfast.Release, expected: dpfast.Release) -> None:
    data = got.data.compute()
    assert list(data.columns) == list(expected.data.columns)
    for name in expected.data.columns:  # in order: ir_dp's rows are in its shuffled order
        assert data[name].dtype == expected.data[name].dtype
        np.testing.assert_array_equal(data[name].to_numpy(), expected.data[name].to_numpy())
    assert apart_from_engine(got.report) == apart_from_engine(expected.report)
    assert got.private.clamped == expected.private.clamped
    assert got.private.clamped_output == expected.private.clamped_output
    assert got.private.input_rows == expected.private.input_rows


@pytest.mark.parametrize("partitions", [1, 2, 7])
def test_laplace_dp_of_a_dask_frame_is_the_in_memory_release(client, partitions):
    table = _table()
    frame = dd.from_pandas(table, npartitions=partitions)
    args = {"epsilon": EPSILON, "bounds": BOUNDS, "columns": COLUMNS, "seed": SEED}
    got = dpfast.laplace_dp(frame, **args)
    assert type(got.data).__module__.startswith("dask.dataframe")
    _assert_same_release(got, dpfast.laplace_dp(table, **args))


def test_output_part_rows_keeps_every_task_busy_within_the_byte_cap():
    # four parts per slot, each at most max(PART_BYTES, memory_limit / 4) of values
    from dpfast.engines.frames.parts import PART_BYTES, PART_ROWS, output_part_rows

    assert output_part_rows(1000, 3, 2) == PART_ROWS  # small: one part
    assert output_part_rows(10_000_000, 10, 2) == 1_250_000  # four parts per task slot
    assert output_part_rows(10_000_001, 10, 2) == 1_250_001
    big = output_part_rows(100_000_000, 10, 2)  # capped: 512 MiB of values a task
    assert big <= PART_BYTES // 80
    assert -(-100_000_000 // big) == 16  # 15 parts under the cap: one more for the 2nd slot
    assert output_part_rows(100_000_000, 10, 3) == PART_BYTES // 80  # 15 parts: 5 rounds
    assert output_part_rows(100_000_000, 10, 1) == PART_BYTES // 80
    assert output_part_rows(100_000_000, 10, 1000) == PART_ROWS  # never below the floor
    assert output_part_rows(100_000_000, 1000, 2) == PART_ROWS
    # a memory limit above 4 * PART_BYTES raises the cap to a quarter of it
    gib = 1 << 30
    assert output_part_rows(100_000_000, 10, 2, gib) == big  # below: the floor decides
    assert output_part_rows(100_000_000, 10, 2, 4 * gib) == 12_500_000  # 8 parts of 1 GB
    assert output_part_rows(100_000_000, 10, 1, 4 * gib) == gib // 80  # capped: 8 parts
    assert output_part_rows(100_000_000, 10, 2, 64 * gib) == 12_500_000  # four a slot
    assert output_part_rows(100_000_000, 10, 3, 4 * gib) == -(-100_000_000 // 12)  # four a slot


@pytest.mark.parametrize(("partitions", "part_rows"), [(1, 1 << 20), (2, 1000), (7, 64)])
def test_ir_dp_of_a_dask_frame_is_the_in_memory_release(client, partitions, part_rows):
    table = _table()
    frame = dd.from_pandas(table, npartitions=partitions)
    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": COLUMNS, "seed": SEED}
    expected = dpfast.ir_dp(table, **args)
    if part_rows == 1 << 20:
        got = dpfast.ir_dp(frame, **args)
    else:  # output parts cutting the permutation's buckets
        got = dpfast.Release(
            *on_engine("dask", dpfast.ir_dp, frame, part_rows=part_rows, batch_rows=64, **args)
        )
        assert got.data.npartitions == -(-len(table) // part_rows)
        # the group values are one node of the graph, not a copy in every task
        keys = [str(key) for key in dict(got.data.__dask_graph__())]
        assert sum(key.startswith("dpfast-release-state") for key in keys) == 1
    _assert_same_release(got, expected)


def test_an_ir_dp_frame_is_written_part_by_part_as_its_partitions_would_be(client, tmp_path):
    from dpfast.engines.dask import _write
    from dpfast.engines.frames import WritePlan, plan_of

    table = _table()
    table["c"] = pd.Series([f"c{i % 5}" for i in range(len(table))])  # labels: text type
    taxonomy = {"c": [f"c{i}" for i in range(5)]}  # a flat list of leaves
    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "seed": SEED, "taxonomies": taxonomy}
    frame = dd.from_pandas(table[["a", "b", "c"]], npartitions=3)
    data, report, _ = on_engine("dask", dpfast.ir_dp, frame, part_rows=700, **args)
    parts = plan_of(data).generated
    assert parts is not None and parts.count == 5
    assert not [name for name in vars(data) if name.startswith("_dpfast")]  # nothing set on it
    assert plan_of(data[["a", "c"]]) == WritePlan()  # a transformed frame: its partitions
    calls = []
    DaskEngine.write_release(
        data, tmp_path / "parts", report, progress=lambda *call: calls.append(call)
    )
    DaskEngine.write_release(data[["a", "b", "c"]], tmp_path / "frame", report)
    names = sorted(p.name for p in (tmp_path / "parts").iterdir())
    assert names == [f"part-{i:06d}.parquet" for i in range(5)]
    assert names == sorted(p.name for p in (tmp_path / "frame").iterdir())
    for name in names:  # the same rows and values, whichever way they were written
        direct = pq.read_table(tmp_path / "parts" / name)
        assert direct.schema.field("c").type == pa.string()  # as Spark's and the column engine's
        assert direct.equals(pq.read_table(tmp_path / "frame" / name).cast(direct.schema))
    assert calls[-1] == ("writing parts", 5, 5)
    got = pq.read_table(tmp_path / "parts").to_pandas()
    expected = dpfast.ir_dp(table[["a", "b", "c"]], **args).data
    pd.testing.assert_frame_equal(got, expected.reset_index(drop=True), check_dtype=False)
    assert got["c"].map(type).eq(str).all()
    # a task as the workers run it, here: the same bytes as the file they wrote
    assert _write._write_generated(parts, 3, str(tmp_path / "again.parquet")) == 700
    assert (tmp_path / "again.parquet").read_bytes() == (tmp_path / "parts" / names[3]).read_bytes()


@pytest.mark.parametrize("batch_rows", [64, 1000])
def test_parquet_files_release_as_in_memory(client, tmp_path, batch_rows):
    table = _table()
    files = _write_files(table, tmp_path / "in", [1, 1000, 1001, 2500])
    source = DaskSource.from_parquet(files)
    common = {"epsilon": EPSILON, "bounds": BOUNDS, "columns": COLUMNS, "seed": SEED}
    got = on_engine("dask", dpfast.laplace_dp, source, batch_rows=batch_rows, **common)
    _assert_same_release(dpfast.Release(*got), dpfast.laplace_dp(table, **common))
    got = on_engine(
        "dask",
        dpfast.ir_dp,
        source,
        k=7,
        memory_limit=60_000,
        n_threads=2,
        batch_rows=batch_rows,
        **common,
    )
    _assert_same_release(dpfast.Release(*got), dpfast.ir_dp(table, k=7, **common))


@pytest.mark.parametrize(
    ("method", "kwargs", "named"),
    [
        (dpfast.ir_dp, {"k": 5, "metrics": True}, "metrics=True"),
        (dpfast.laplace_dp, {"metrics": True}, "metrics=True"),
    ],
)
def test_what_dask_cannot_run_is_refused_by_name(method, kwargs, named):
    frame = dd.from_pandas(_table(20), npartitions=2)
    arguments = {"epsilon": 1.0, "bounds": BOUNDS, "columns": COLUMNS, **kwargs}
    with pytest.raises(
        ValueError, match="which a release on a Dask DataFrame does not hold"
    ) as refused:
        method(frame, **arguments)
    assert named in str(refused.value)
    assert "frame.compute()" in str(refused.value)


@pytest.mark.parametrize("method", [dpfast.laplace_dp, dpfast.k_noise])
def test_risk_is_refused_on_dask_before_any_pass(method):
    frame = dd.from_pandas(_table(20), npartitions=2)
    arguments = {"epsilon": 1.0, "bounds": BOUNDS} if method is dpfast.laplace_dp else {"k": 3}
    with pytest.raises(
        ValueError, match="risk=True pairs each released row with its source"
    ) as got:
        method(frame, columns=COLUMNS, risk=True, **arguments)
    assert "on a Dask DataFrame" in str(got.value) and "frame.compute()" in str(got.value)


def test_bad_input_on_a_worker_reaches_the_caller_with_its_row(client):
    table = _table()
    table.loc[2345, "a"] = np.inf
    table.loc[2900, "a"] = np.inf  # a later partition fails too: the first row is named
    frame = dd.from_pandas(table, npartitions=3)
    with pytest.raises(
        ValueError, match=r"column 'a' has \d+ non-finite value\(s\) \(first at row 2345: "
    ):
        dpfast.laplace_dp(frame, epsilon=EPSILON, bounds=BOUNDS, columns=["a"], seed=SEED)
    with pytest.raises(TypeError, match="column 'note' must be numeric"):
        dpfast.ir_dp(frame, k=5, epsilon=EPSILON, bounds={**BOUNDS, "note": (0, 1)}, seed=SEED)
    with pytest.raises(ValueError, match="k"):
        dpfast.ir_dp(frame, k=0, epsilon=EPSILON, bounds=BOUNDS, columns=COLUMNS, seed=SEED)


def _killing(part: pd.DataFrame, calls: str, row: int, kill_at: int) -> pd.DataFrame:
    """Return ``part``; the ``kill_at``-th read of the partition holding ``row`` kills its
    worker process first (each read leaves a file in ``calls``)."""
    if row in part.index:
        done = len(os.listdir(calls))
        Path(calls, f"read-{done}").touch()
        if done + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    return part


def test_a_worker_killed_mid_run_gives_the_same_release(client, tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    table = _table()
    frame = dd.from_pandas(table, npartitions=3)
    # read 1 counts the rows, 2 and 3 are the columns' passes, 4 is the write: kill in 3
    flaky = frame.map_partitions(_killing, str(calls), 1500, 3, meta=frame._meta)
    args = {"epsilon": EPSILON, "bounds": BOUNDS, "columns": COLUMNS, "seed": SEED}
    data, report, private = on_engine("dask", dpfast.laplace_dp, flaky, **args)
    DaskEngine.write_release(data, tmp_path / "out", report)
    assert len(os.listdir(calls)) >= 4  # the killed read was run again
    expected = dpfast.laplace_dp(table, **args)
    got = pq.read_table(tmp_path / "out").to_pandas()
    for name in COLUMNS:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped


def _failing(part: pd.DataFrame, row: int) -> pd.DataFrame:
    if row in part.index:
        raise RuntimeError("a lost disk, simulated")
    return part


def test_a_failed_write_leaves_no_output(client, tmp_path):
    frame = dd.from_pandas(_table(), npartitions=3)
    data = frame[COLUMNS].map_partitions(_failing, 2000, meta=frame[COLUMNS]._meta)
    published = []
    with pytest.raises(RuntimeError, match="a lost disk, simulated"):
        DaskEngine.write_release(data, tmp_path / "out", None, before_publish=published.append)
    assert published == []
    assert list(tmp_path.iterdir()) == []  # neither the output nor the scratch directory


@pytest.mark.parametrize("stop", [RuntimeError("the budget is spent"), KeyboardInterrupt()])
def test_a_refused_or_interrupted_publication_leaves_no_output(client, tmp_path, stop):
    data = dd.from_pandas(_table(50), npartitions=2)[COLUMNS]

    def refuse(report) -> None:
        raise stop

    calls = []
    with pytest.raises(type(stop)):
        DaskEngine.write_release(
            data,
            tmp_path / "out",
            None,
            before_publish=refuse,
            progress=lambda *call: calls.append(call),
        )
    assert list(tmp_path.iterdir()) == []
    # an output named .parquet is a dataset directory too, as Dask's own writer makes it
    DaskEngine.write_release(data, tmp_path / "out.parquet", None)
    assert (tmp_path / "out.parquet").is_dir()
    assert pq.read_table(tmp_path / "out.parquet").num_rows == len(data)


def test_the_written_release_reads_back_in_row_order(client, tmp_path):
    table = _table()
    frame = dd.from_pandas(table, npartitions=12)  # part names must sort in row order
    args = {"epsilon": EPSILON, "bounds": BOUNDS, "columns": COLUMNS, "seed": SEED}
    data, report, _ = on_engine("dask", dpfast.laplace_dp, frame, **args)
    calls = []
    DaskEngine.write_release(
        data, tmp_path / "out", report, progress=lambda *call: calls.append(call)
    )
    got = ParquetDataset.open(tmp_path / "out")
    assert len(got.files) == 12
    values = np.concatenate(list(got.map_column("b", 1 << 20, lambda a, f: a.to_numpy())))
    np.testing.assert_array_equal(values, dpfast.laplace_dp(table, **args).data["b"].to_numpy())
    assert calls[-1] == ("writing out", 12, 12)


def _cli_args(tmp_path: Path, files: Path) -> list[str]:
    import json

    schema = {
        "columns": {
            "a": {"type": "float", "bounds": [0, 50]},
            "b": {"type": "integer", "bounds": [-10, 10]},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    args = ["release", "laplace", str(files), "--epsilon", str(EPSILON), "--seed", str(SEED)]
    return [*args, "--schema", str(tmp_path / "s.json"), "--engine", "dask"]


def test_cli_laplace_on_a_dask_scheduler_writes_the_in_memory_release(client, tmp_path, capsys):
    import json

    from dpfast import cli
    from dpfast._release import cli_spelling

    table = _table()
    files = _write_files(table, tmp_path / "in", [1, 1700])
    args = [*_cli_args(tmp_path, files), "--scheduler", client.scheduler.address]
    assert cli.main([*args, "-o", str(tmp_path / "out.parquet"), "--quiet"]) == 0
    assert (tmp_path / "out.parquet").is_dir()  # a dataset directory, whatever its suffix
    assert cli.main([*args, "-o", str(tmp_path / "out"), "--quiet"]) == 0
    assert pq.read_table(tmp_path / "out.parquet").equals(pq.read_table(tmp_path / "out"))
    with cli_spelling():
        expected = dpfast.laplace_dp(
            table, epsilon=EPSILON, bounds=BOUNDS, columns=COLUMNS, seed=SEED
        )
    got = pq.read_table(tmp_path / "out").to_pandas()
    for name in expected.data.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    report = json.loads((tmp_path / "out.public-report.json").read_text("utf-8"))
    want = json.loads(json.dumps(expected.report.to_dict()))
    assert apart_from_engine(report) == apart_from_engine(want)
    assert len(client.scheduler_info()["workers"]) == 2  # the module's cluster is untouched


def test_cli_on_dask_commits_the_budget_before_the_workers_output_is_published(
    client, tmp_path, monkeypatch
):
    from dpfast import cli
    from dpfast.budget import BudgetFile, Reservation
    from tests.test_budget import STEPS, _interrupt_at, assert_never_refunded_when_visible

    files = _write_files(_table(50), tmp_path / "in", [20])
    args = [*_cli_args(tmp_path, files), "--scheduler", client.scheduler.address, "--quiet"]
    for step in STEPS:
        budget, output = tmp_path / f"{step}.json", tmp_path / step.replace(" ", "-")
        BudgetFile.create(budget, EPSILON)
        before = budget.read_bytes()
        with monkeypatch.context() as patch:
            _interrupt_at(patch, step, output)
            got = cli.main([*args, "-o", str(output), "--budget", str(budget)])
        assert got == 130, step
        assert_never_refunded_when_visible(output, budget, before, step, EPSILON)
    seen, real = [], Reservation.commit

    def commit(self, report):
        seen.append(output.exists())  # published yet?
        return real(self, report)

    monkeypatch.setattr(Reservation, "commit", commit)
    BudgetFile.create(tmp_path / "b.json", EPSILON)
    output = tmp_path / "out"
    assert cli.main([*args, "-o", str(output), "--budget", str(tmp_path / "b.json")]) == 0
    assert seen == [False] and output.is_dir()
    (entry,) = BudgetFile(tmp_path / "b.json").entries()
    assert (entry.status, entry.epsilon, entry.guarantee_level) == ("committed", EPSILON, "proven")


def test_cli_refuses_dask_options_it_cannot_run(tmp_path, capsys):
    from dpfast import cli

    files = _write_files(_table(50), tmp_path / "in", [20])
    args = _cli_args(tmp_path, files)
    no_dask = [a for a in args if a not in ("--engine", "dask")]
    assert cli.main([*no_dask, "--scheduler", "tcp://x:1", "-o", str(tmp_path / "o")]) == 2
    assert "--scheduler applies to --engine dask" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_ir_dp_starts_and_closes_a_local_cluster(tmp_path, capsys, monkeypatch):
    from dpfast import cli
    from dpfast._release import cli_spelling
    from dpfast.engines import dask as engine

    started = []

    def spied(*args, **kwargs):
        started.append(engine_cluster(*args, **kwargs))
        return started[-1]

    engine_cluster = engine.local_cluster
    monkeypatch.setattr(engine, "local_cluster", spied)
    table = _table(400)
    files = _write_files(table, tmp_path / "in", [100])
    args = ["release", "ir-dp", *_cli_args(tmp_path, files)[2:], "--k", "5"]
    assert cli.main([*args, "-o", str(tmp_path / "out")]) == 0
    with cli_spelling():
        expected = dpfast.ir_dp(
            table, k=5, epsilon=EPSILON, bounds=BOUNDS, columns=COLUMNS, seed=SEED
        )
    got = pq.read_table(tmp_path / "out").to_pandas()
    for name in expected.data.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    assert len(started) == 1
    assert started[0].status.name == "closed"  # the command closed the cluster it started


@pytest.fixture(scope="module")
def adult_table() -> pd.DataFrame:
    """Adult's integer columns (many ties), a float column and a categorical one.

    30,162 rows: with k=7 the last rank group holds 13 rows (a remainder group).
    """
    from dpfast.datasets import adult

    data = adult("train", drop_missing=True)[["age", "capital-gain", "occupation"]]
    data = data.reset_index(drop=True)
    data["frac"] = np.random.default_rng(0).uniform(-5, 105, len(data))  # some clamped
    return data


@pytest.mark.parametrize(
    ("partitions", "memory_limit", "batch_rows"),
    # 300,000 bytes: 4,687 values to sort per column thread (2), several passes a column
    [(1, 2**30, 1 << 20), (2, 300_000, 1000), (7, 300_000, 64)],
)
def test_adult_with_a_categorical_column_is_the_in_memory_release(
    client, adult_table, partitions, memory_limit, batch_rows
):
    from dpfast.datasets import adult_taxonomy

    args = {
        "k": 7,
        "epsilon": 2.0,
        "bounds": {"age": (17, 90), "capital-gain": (0, 100_000), "frac": (0.0, 100.0)},
        "taxonomies": {"occupation": adult_taxonomy("occupation")},
        "seed": 3,
    }
    expected = dpfast.ir_dp(adult_table, **args)
    frame = dd.from_pandas(adult_table, npartitions=partitions)
    got = on_engine(
        "dask",
        dpfast.ir_dp,
        frame,
        memory_limit=memory_limit,
        n_threads=2,
        batch_rows=batch_rows,
        part_rows=4096,
        **args,
    )
    assert got[0].npartitions == 8  # 4,096 output rows per task, in the in-memory order
    _assert_same_release(dpfast.Release(*got), expected)
