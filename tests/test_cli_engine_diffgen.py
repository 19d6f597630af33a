"""``dpfast release diffgen`` out of core: datasets and --memory-limit give the in-memory output."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfast import cli, datasets
from dpfast.datasets import adult
from tests.engine_runs import apart_from_engine

SCHEMA = str(Path(datasets.__file__).with_name("adult_diffgen.schema.json"))
N = 3000


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    frame = adult("train", drop_missing=True).iloc[:N].reset_index(drop=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    (tmp_path / "parts").mkdir()
    for i, (first, last) in enumerate([(0, 1), (1, 1200), (1200, N)]):
        pq.write_table(table.slice(first, last - first), tmp_path / "parts" / f"p{i}.parquet")
    pq.write_table(table, tmp_path / "adult.parquet")
    frame.to_csv(tmp_path / "adult.csv", index=False)
    return tmp_path


def _release(workdir: Path, source: str, output: str, *extra: str) -> int:
    paths = [str(workdir / source), "-o", str(workdir / output)]
    options = ["--target", "income", "--steps", "10", "--epsilon", "1", "--schema", SCHEMA]
    return cli.main(["release", "diffgen", *paths, *options, "--seed", "3", "--quiet", *extra])


def _read(workdir: Path, output: str) -> tuple[pa.Table, dict, dict]:
    data = pq.read_table(workdir / output)
    public = json.loads((workdir / f"{output}.public-report.json").read_text(encoding="utf-8"))
    private = json.loads((workdir / f"{output}.private-report.json").read_text(encoding="utf-8"))
    return data, public, private


@pytest.mark.parametrize("microdata", [[], ["--microdata"]], ids=["counts", "microdata"])
@pytest.mark.parametrize(
    ("source", "output", "extra"),
    [
        ("parts", "released", ["--memory-limit", "300KB"]),  # a dataset in, a dataset out
        ("parts/*.parquet", "released.parquet", []),  # a glob: out of core at 4GiB
        ("adult.parquet", "released.parquet", ["--memory-limit", "200KB"]),
    ],
)
def test_out_of_core_writes_the_in_memory_release(workdir, source, output, extra, microdata):
    assert _release(workdir, "adult.parquet", "memory.parquet", *microdata) == 0
    assert _release(workdir, source, output, *extra, *microdata) == 0
    data, public, private = _read(workdir, output)
    expected, expected_public, expected_private = _read(workdir, "memory.parquet")
    assert data.schema == expected.schema and data.equals(expected)
    assert apart_from_engine(public) == apart_from_engine(expected_public)
    assert private["clamped"] == expected_private["clamped"]
    assert private["input_rows"] == expected_private["input_rows"] == N
    assert not [p for p in workdir.iterdir() if p.name.startswith(".released")]


@pytest.mark.parametrize(
    ("source", "output", "extra", "message"),
    [
        ("adult.parquet", "r.csv", ["--memory-limit", "1GiB"], "out of core writes Parquet"),
        ("adult.csv", "r.parquet", ["--engine", "dask"], "convert it to Parquet"),
        ("parts", "r.parquet", ["--memory-limit", "lots"], "memory size"),
        ("nothing/*.parquet", "r.parquet", [], "no file matches"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(workdir, capsys, source, output, extra, message):
    before = {p.name for p in workdir.iterdir()}
    assert _release(workdir, source, output, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpfast: error: ") and message in err[0], err
    assert {p.name for p in workdir.iterdir()} == before


def test_budget_is_refunded_on_an_interrupt_before_publishing(workdir, monkeypatch):
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
    assert not [p for p in workdir.iterdir() if p.name.startswith(".released")]
    assert _release(workdir, "parts", "released", "--budget", str(budget)) == 0
    assert BudgetFile(budget).remaining() == pytest.approx(1.0)


def test_in_memory_methods_name_diffgen_among_the_out_of_core_ones(workdir, capsys):
    paths = [str(workdir / "parts"), "-o", str(workdir / "k.parquet")]
    assert cli.main(["release", "mdav", *paths, "--k", "5"]) == 2
    err = capsys.readouterr().err
    assert "run out of core" in err and "diffgen" in err.split("run out of core")[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--master", "local[1]"], "--master applies to --engine spark"),
        (["--scheduler", "tcp://localhost:1"], "--scheduler applies to --engine dask"),
    ],
)
def test_engine_options_diffgen_cannot_take_are_refused(workdir, capsys, extra, message):
    assert _release(workdir, "parts", "d", *extra) == 2
    assert message in capsys.readouterr().err
    assert not (workdir / "d").exists()
