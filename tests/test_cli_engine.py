"""``dpfast release ir-dp`` through the column engine: datasets, --memory-limit, same release."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import cli
from dpfast._release import cli_spelling
from dpfast.datasets import adult, adult_taxonomy
from tests.engine_runs import apart_from_engine

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "hours-per-week": {"type": "float", "bounds": [1, 99]},
        "occupation": {
            "type": "categorical",
            "taxonomy": str(
                Path(dpfast.__file__).parent / "datasets/hierarchies/adult_hierarchy_occupation.csv"
            ),
        },
        "sex": {"type": "categorical", "protect": False},
    }
}
N = 5003


@pytest.fixture(autouse=True)
def engine_for_small_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    # the engine runs one-file inputs from 64 MiB on; these tests run it on small ones
    from dpfast.cli import _inputs

    monkeypatch.setattr(_inputs, "ENGINE_FROM_BYTES", 0)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    frame = adult("train", drop_missing=True)[["age", "hours-per-week", "occupation", "sex"]]
    frame = frame.iloc[:N].reset_index(drop=True)
    (tmp_path / "parts").mkdir()
    for i, (first, last) in enumerate([(0, 1000), (1000, 1001), (1001, N)]):
        table = pa.Table.from_pandas(frame.iloc[first:last], preserve_index=False)
        pq.write_table(table, tmp_path / "parts" / f"p{i}.parquet")
    frame.to_parquet(tmp_path / "people.parquet", index=False)
    frame.to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    return tmp_path


def _expected(workdir: Path) -> dpfast.Release:
    frame = pd.read_parquet(workdir / "people.parquet")
    frame["hours-per-week"] = frame["hours-per-week"].astype(np.float64)  # declared float
    with cli_spelling():  # the report's texts name the CLI's flags, as the CLI's do
        return _ir_dp(frame)


def _ir_dp(frame: pd.DataFrame) -> dpfast.Release:
    return dpfast.ir_dp(
        frame,
        k=9,
        epsilon=1.5,
        bounds={"age": (17, 90), "hours-per-week": (1, 99)},
        taxonomies={"occupation": adult_taxonomy("occupation")},
        columns=["age", "hours-per-week", "occupation"],
        seed=5,
    )


def _release(workdir: Path, source: str, output: str, *extra: str) -> int:
    paths = [str(workdir / source), "-o", str(workdir / output)]
    options = ["--k", "9", "--epsilon", "1.5", "--schema", str(workdir / "schema.json")]
    return cli.main(["release", "ir-dp", *paths, *options, "--seed", "5", "--quiet", *extra])


def _check(workdir: Path, output: str, expected: dpfast.Release) -> None:
    got = pq.read_table(workdir / output).to_pandas()
    assert list(got.columns) == list(expected.data.columns)
    for name in got.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    report = json.loads((workdir / f"{output}.public-report.json").read_text(encoding="utf-8"))
    want = json.loads(json.dumps(expected.report.to_dict()))
    assert apart_from_engine(report) == apart_from_engine(want)
    private = json.loads((workdir / f"{output}.private-report.json").read_text(encoding="utf-8"))
    assert private["clamped"] == expected.private.clamped
    assert private["input_rows"] == N


@pytest.mark.parametrize(
    ("source", "output", "extra"),
    [
        ("parts", "released", ["--memory-limit", "300KB"]),  # a dataset in, a dataset out
        ("parts/*.parquet", "released.parquet", []),  # a glob: out of core at 4GiB
        ("people.parquet", "released.parquet", ["--memory-limit", "200KB"]),
        ("people.parquet", "released.parquet", []),  # in memory, one column at a time
        ("people.csv", "released.parquet", []),  # text: read whole, in memory
    ],
)
def test_every_path_gives_the_in_memory_release(workdir, source, output, extra):
    assert _release(workdir, source, output, *extra) == 0
    _check(workdir, output, _expected(workdir))
    assert not [p for p in workdir.iterdir() if p.name.startswith(".released")]


def test_a_file_output_of_a_dataset_is_replaced_when_forced(workdir, capsys):
    (workdir / "released.parquet").write_bytes(b"old")
    assert _release(workdir, "parts", "released.parquet") == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert _release(workdir, "parts", "released.parquet", "--force") == 0
    _check(workdir, "released.parquet", _expected(workdir))


def test_a_dataset_output_is_refused_when_it_exists_unless_forced(workdir, capsys):
    (workdir / "released").mkdir()
    (workdir / "released" / "old.parquet").write_bytes(b"x")
    assert _release(workdir, "parts", "released") == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert _release(workdir, "parts", "released", "--force") == 0
    assert sorted(p.name for p in (workdir / "released").iterdir()) == ["part-00000.parquet"]
    _check(workdir, "released", _expected(workdir))


@pytest.mark.parametrize(
    ("source", "output", "extra", "message"),
    [
        ("people.parquet", "r.csv", ["--memory-limit", "1GiB"], "out of core writes Parquet"),
        ("people.csv", "r.parquet", ["--engine", "dask"], "convert it to Parquet"),
        ("people.parquet", "r.parquet", ["--memory-limit", "lots"], "memory size"),
        # the bad value first, then the output's format
        ("people.parquet", "r.csv", ["--memory-limit", "lots"], "--memory-limit: cannot read"),
        ("people.parquet", "r.parquet", ["--memory-limit", "1KiB"], "at least 96KiB"),
        ("people.parquet", "r.parquet", ["--memory-limit", "98303"], "got 98,303 bytes"),
        ("nothing/*.parquet", "r.parquet", [], "no file matches"),
    ],
)
def test_engine_refusals_are_one_line(
    workdir, capsys, source, output, extra, message, smallest_memory_limit
):
    before = {p.name for p in workdir.iterdir()}
    assert _release(workdir, source, output, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpfast: error: ") and message in err[0], err
    assert {p.name for p in workdir.iterdir()} == before


def test_a_directory_with_parquet_files_below_it_is_refused_naming_the_globs(workdir, capsys):
    # an earlier release written into the input directory is never picked up silently
    (workdir / "parts" / "old").mkdir()
    assert _release(workdir, "parts", "parts/old/released") == 0
    before = sorted(str(p) for p in workdir.rglob("*"))
    assert _release(workdir, "parts", "again") == 2
    err = capsys.readouterr().err
    assert "subdirectories holding Parquet files ('old')" in err
    assert f"'{workdir / 'parts'}/**/*.parquet'" in err
    assert sorted(str(p) for p in workdir.rglob("*")) == before
    assert _release(workdir, str(workdir / "parts" / "*.parquet"), "again") == 0
    _check(workdir, "again", _expected(workdir))


def test_a_missing_value_in_a_dataset_is_refused_without_output(workdir, capsys):
    table = pq.read_table(workdir / "parts" / "p2.parquet")
    ages = table.column("age").to_pylist()
    ages[17] = None
    table = table.set_column(0, "age", pa.array(ages, pa.int64()))
    pq.write_table(table, workdir / "parts" / "p2.parquet")
    before = {p.name for p in workdir.iterdir()}
    assert _release(workdir, "parts", "released") == 2
    err = capsys.readouterr().err
    assert "protected column 'age' has a missing value at row 1018" in err
    assert {p.name for p in workdir.iterdir()} == before


def test_the_budget_is_spent_once_on_the_engine(workdir):
    budget = workdir / "b.json"
    assert cli.main(["budget", "init", str(budget), "--total-epsilon", "2"]) == 0
    assert _release(workdir, "parts", "released", "--budget", str(budget)) == 0
    assert _release(workdir, "parts", "again", "--budget", str(budget)) == 2
    from dpfast.budget import BudgetFile

    assert BudgetFile(budget).remaining() == pytest.approx(0.5)


def test_laplace_out_of_core_gives_the_in_memory_release(workdir):
    schema = {"columns": {k: v for k, v in SCHEMA["columns"].items() if k != "occupation"}}
    (workdir / "numeric.json").write_text(json.dumps(schema), encoding="utf-8")
    frame = pd.read_parquet(workdir / "people.parquet")
    frame["hours-per-week"] = frame["hours-per-week"].astype(np.float64)
    with cli_spelling():
        expected = dpfast.laplace_dp(
            frame,
            epsilon=2.0,
            bounds={"age": (17, 90), "hours-per-week": (1, 99)},
            columns=["age", "hours-per-week"],
            seed=4,
        )
    for source, output, extra in [
        ("parts", "lap", []),
        ("people.parquet", "lap.parquet", ["--memory-limit", "1MiB"]),
    ]:
        paths = [str(workdir / source), "-o", str(workdir / output)]
        options = ["--epsilon", "2", "--schema", str(workdir / "numeric.json"), "--seed", "4"]
        assert cli.main(["release", "laplace", *paths, *options, "--quiet", *extra]) == 0
        _check(workdir, output, expected)


def test_laplace_out_of_core_refuses_a_categorical_schema_like_in_memory(workdir, capsys):
    paths = [str(workdir / "parts"), "-o", str(workdir / "lap")]
    options = ["--epsilon", "2", "--schema", str(workdir / "schema.json")]
    assert cli.main(["release", "laplace", *paths, *options]) == 2
    err = capsys.readouterr().err
    assert "laplace protects numeric columns only" in err and "'occupation'" in err
    assert not (workdir / "lap").exists()


def test_mdav_refuses_data_beyond_its_memory_naming_the_alternatives(workdir, capsys):
    paths = [str(workdir / "people.parquet"), "-o", str(workdir / "k.parquet")]
    paths += ["--columns", "age,hours-per-week", "--quiet"]
    # 5,003 rows x 2 columns x 48 bytes = 480 kB
    assert cli.main(["release", "mdav", *paths, "--k", "5", "--memory-limit", "400kB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "mdav would need about" in err[0] and "runs in memory only" in err[0]
    assert "use ir-dp" in err[0] and "--memory-limit" in err[0]
    assert cli.main(["release", "mdav", *paths, "--k", "5", "--memory-limit", "600kB"]) == 0


@pytest.mark.parametrize(("method", "extra"), [("mdav", [])])
def test_in_memory_methods_refuse_a_dataset_naming_the_out_of_core_ones(
    workdir, capsys, method, extra
):
    paths = [str(workdir / "parts"), "-o", str(workdir / "k.parquet")]
    assert cli.main(["release", method, *paths, "--k", "5", *extra]) == 2
    err = capsys.readouterr().err
    assert "is a directory or a glob" in err and "run out of core" in err and "ir-dp" in err
    assert "mdav-dp" in err and "diffgen" in err
    assert "k-pram" in err and "randomized-response" in err
    assert "individual-ranking" in err


def test_budget_refunded_on_interrupt_before_publishing_kept_after(workdir, monkeypatch):
    from dpfast.budget import BudgetFile
    from dpfast.engines.outofcore._output import Output

    budget = workdir / "b.json"
    assert cli.main(["budget", "init", str(budget), "--total-epsilon", "2"]) == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Output, "_stitch", interrupted)
        assert _release(workdir, "parts", "released", "--budget", str(budget)) == 130
    assert BudgetFile(budget).remaining() == pytest.approx(2.0)
    assert not (workdir / "released").exists()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr("dpfast.io.write_json_atomic", disk_full)
        assert _release(workdir, "parts", "released", "--budget", str(budget)) == 2
    # the data was published before the reports failed: its spend stays recorded
    assert BudgetFile(budget).remaining() == pytest.approx(0.5)
    assert not (workdir / "released").exists()
    assert not [p for p in workdir.iterdir() if p.name.startswith(".released")]


def test_small_inputs_take_the_in_memory_function(workdir, monkeypatch):
    from dpfast.cli import _inputs, _runner

    monkeypatch.setattr(_inputs, "ENGINE_FROM_BYTES", 64 * 2**20)
    calls: list[str] = []
    original = _runner._in_passes
    monkeypatch.setattr(_runner, "_in_passes", lambda *a: calls.append("engine") or original(*a))
    assert _release(workdir, "people.parquet", "small.parquet") == 0
    assert calls == []
    _check(workdir, "small.parquet", _expected(workdir))
    monkeypatch.setattr(_inputs, "ENGINE_FROM_BYTES", N * 4 * 8)  # exactly this table's size
    assert _release(workdir, "people.parquet", "large.parquet") == 0
    assert calls == ["engine"]
    _check(workdir, "large.parquet", _expected(workdir))


@pytest.mark.parametrize("engine", ["spark", "dask"])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_a_cluster_engine_that_is_not_installed_is_a_usage_error(
    workdir, capsys, monkeypatch, engine, dry_run
):
    for module in ("pyspark", "pyspark.sql", "dask", "dask.dataframe", "distributed"):
        monkeypatch.setitem(sys.modules, module, None)  # as if they were not installed
    before = {p.name for p in workdir.iterdir()}
    code = _release(workdir, "people.parquet", "r.parquet", "--engine", engine, *dry_run)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"--engine {engine} needs" in err[0] and f"pip install 'dpfast[{engine}]'" in err[0]
    assert {p.name for p in workdir.iterdir()} == before
