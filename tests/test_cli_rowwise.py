"""``dpfast release k-noise|k-pram|randomized-response`` on Parquet datasets, out of core."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import cli
from dpfast._release import cli_spelling
from dpfast.datasets import adult
from tests.engine_runs import apart_from_engine

N = 5003
TAXONOMY = Path(dpfast.__file__).parent / "datasets/hierarchies/adult_hierarchy_occupation.csv"
SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "hours-per-week": {"type": "integer", "bounds": [1, 99]},
        "occupation": {"type": "categorical", "taxonomy": str(TAXONOMY)},
        "sex": {"type": "categorical", "protect": False},
    }
}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    frame = adult("train", drop_missing=True)[["age", "hours-per-week", "occupation", "sex"]]
    table = pa.Table.from_pandas(frame.iloc[:N].reset_index(drop=True), preserve_index=False)
    (tmp_path / "parts").mkdir()
    for i, (first, last) in enumerate([(0, 1000), (1000, 1001), (1001, N)]):
        pq.write_table(table.slice(first, last - first), tmp_path / "parts" / f"p{i}.parquet")
    pq.write_table(table, tmp_path / "people.parquet")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    return tmp_path


def _run(workdir: Path, method: str, source: str, output: str, *options: str) -> int:
    paths = [str(workdir / source), "-o", str(workdir / output)]
    return cli.main(["release", method, *paths, "--seed", "5", "--quiet", *options])


def _assert_same(workdir: Path, output: str, expected: dpfast.Release) -> None:
    got = pq.read_table(workdir / output)
    assert got.schema == expected.data.schema
    assert got.equals(expected.data)
    public = json.loads(Path(f"{workdir / output}.public-report.json").read_text("utf-8"))
    want = json.loads(json.dumps(expected.report.to_dict()))
    assert apart_from_engine(public) == apart_from_engine(want)


def _people(workdir: Path) -> pa.Table:
    return pq.read_table(workdir / "people.parquet")


@pytest.mark.parametrize(
    ("source", "output", "extra"),
    [
        ("parts", "noisy", []),  # a directory in, a dataset directory out
        ("parts/*.parquet", "noisy.parquet", ["--memory-limit", "64kB"]),  # a glob, tiny limit
        ("people.parquet", "noisy.parquet", ["--memory-limit", "1GiB"]),  # one file
    ],
)
def test_k_noise_out_of_core_equals_in_memory(workdir, source, output, extra):
    options = ["--k", "4", "--columns", "age,hours-per-week", *extra]
    assert _run(workdir, "k-noise", source, output, *options) == 0
    with cli_spelling():
        expected = dpfast.k_noise(_people(workdir), k=4, columns=["age", "hours-per-week"], seed=5)
    _assert_same(workdir, output, expected)


@pytest.mark.parametrize("limit", ["64kB", "4GiB"])
def test_k_pram_out_of_core_with_a_schema_equals_in_memory(workdir, limit):
    schema = json.loads(json.dumps(SCHEMA))
    schema["columns"]["occupation"]["protect"] = False  # k-PRAM protects numbers only
    (workdir / "numeric.json").write_text(json.dumps(schema), encoding="utf-8")
    options = ["--k", "7", "--retention", "0.25", "--schema", str(workdir / "numeric.json")]
    assert _run(workdir, "k-pram", "parts", "pram", *options, "--memory-limit", limit) == 0
    with cli_spelling():
        expected = dpfast.k_pram(
            _people(workdir), k=7, columns=["age", "hours-per-week"], retention=0.25, seed=5
        )
    _assert_same(workdir, "pram", expected)


@pytest.mark.parametrize(
    "domain_options",
    [
        ["--schema", "schema.json"],  # the taxonomy's leaves
        ["--domain", "Sales,Tech-support,Craft-repair,Exec-managerial,Prof-specialty,"
         "Other-service,Handlers-cleaners,Adm-clerical,Machine-op-inspct,Transport-moving,"
         "Farming-fishing,Protective-serv,Priv-house-serv,Armed-Forces"],
    ],
)  # fmt: skip
def test_randomized_response_out_of_core_equals_in_memory(workdir, domain_options):
    from dpfast.taxonomy import as_taxonomy

    options = [o if o != "schema.json" else str(workdir / o) for o in domain_options]
    args = ["--column", "occupation", "--epsilon", "0.9", "--memory-limit", "1MiB", *options]
    assert _run(workdir, "randomized-response", "parts", "rr.parquet", *args) == 0
    if "--domain" in options:
        domain = options[options.index("--domain") + 1].split(",")
    else:
        domain = as_taxonomy(str(TAXONOMY), "occupation")
    with cli_spelling():
        expected = dpfast.randomized_response(
            _people(workdir), column="occupation", domain=domain, epsilon=0.9, seed=5
        )
    _assert_same(workdir, "rr.parquet", expected)


def test_randomized_response_spends_its_budget_out_of_core(workdir):
    from dpfast.budget import BudgetFile

    budget = workdir / "b.json"
    assert cli.main(["budget", "init", str(budget), "--total-epsilon", "2"]) == 0
    args = ["--column", "sex", "--domain", "Male,Female", "--epsilon", "0.5"]
    assert _run(workdir, "randomized-response", "parts", "rr", *args, "--budget", str(budget)) == 0
    assert BudgetFile(budget).remaining() == pytest.approx(1.5)


def test_a_bad_value_gets_the_in_memory_message_and_no_output(workdir, capsys):
    table = _people(workdir)
    hours = table.column("hours-per-week").to_numpy().astype(np.float64)
    hours[3000] = np.nan
    table = table.set_column(1, "hours-per-week", pa.array(hours))
    (workdir / "bad").mkdir()
    pq.write_table(table.slice(0, 2000), workdir / "bad" / "a.parquet")
    pq.write_table(table.slice(2000), workdir / "bad" / "b.parquet")
    pq.write_table(table, workdir / "bad.parquet")
    options = ["--k", "4", "--columns", "age,hours-per-week"]
    assert _run(workdir, "k-noise", "bad.parquet", "in_memory.parquet", *options) == 2
    in_memory = capsys.readouterr().err.strip().splitlines()
    assert _run(workdir, "k-noise", "bad", "out", *options) == 2
    out_of_core = capsys.readouterr().err.strip().splitlines()
    assert out_of_core[-1] == in_memory[-1]
    assert "row 3000" in out_of_core[-1]
    assert not (workdir / "out").exists() and not (workdir / "in_memory.parquet").exists()
    assert not [p for p in workdir.iterdir() if p.name.startswith(".out")]


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("k-noise", ["--k", "3", "--columns", "age"]),
        ("k-pram", ["--k", "3", "--columns", "age"]),
        (
            "randomized-response",
            ["--column", "sex", "--domain", "Male,Female", "--retention", ".5"],
        ),
    ],
)
def test_engine_refusals_name_the_fix(workdir, capsys, method, options):
    frame = _people(workdir).to_pandas()
    frame.to_csv(workdir / "people.csv", index=False)
    assert _run(workdir, method, "people.csv", "o.parquet", *options, "--engine", "dask") == 2
    assert "convert it to Parquet first" in capsys.readouterr().err
    # out of core, a CSV input is converted to Parquet first (tests/test_csv_input.py)
    assert _run(workdir, method, "people.csv", "o.parquet", *options, "--memory-limit", "1GiB") == 0
    assert pq.read_table(workdir / "o.parquet").num_rows == N
    (workdir / "taken").mkdir()
    assert _run(workdir, method, "parts", "taken", *options) == 2
    assert "--force" in capsys.readouterr().err
    assert _run(workdir, method, "parts", "taken", *options, "--force") == 0
    assert pq.read_table(workdir / "taken").num_rows == N


def test_an_interrupt_while_writing_refunds_the_budget_and_leaves_no_output(workdir, monkeypatch):
    from dpfast.budget import BudgetFile
    from dpfast.engines.outofcore._output import Output

    budget = workdir / "b.json"
    assert cli.main(["budget", "init", str(budget), "--total-epsilon", "2"]) == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Output, "_stitch", interrupted)
    args = ["--column", "sex", "--domain", "Male,Female", "--epsilon", "0.5"]
    assert (
        _run(workdir, "randomized-response", "parts", "rr", *args, "--budget", str(budget)) == 130
    )
    assert BudgetFile(budget).remaining() == pytest.approx(2.0)
    assert not [p.name for p in workdir.iterdir() if p.name.lstrip(".").startswith("rr")]
