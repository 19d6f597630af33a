"""``--columns`` on every release command: one schema serves several methods."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfast.cli import main
from dpfast.cli._parsing import column_list as _column_list

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "a,b": {"type": "float", "bounds": [0, 10]},
        "job": {"type": "categorical"},  # protected, no taxonomy: fine when not selected
    }
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 60
    pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.uniform(0, 150_000, n),
            "a,b": rng.uniform(0, 10, n),
            "job": rng.choice(["clerk", "nurse"], n),
        }
    ).to_parquet(tmp_path / "in.parquet")
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    return tmp_path


def _run(files: Path, method: str, *options: str) -> tuple[int, dict, pd.DataFrame | None]:
    out = files / f"{method}.parquet"
    argv = ["release", method, str(files / "in.parquet"), "-o", str(out), "--quiet"]
    argv += ["--schema", str(files / "s.json"), "--seed", "1", *options]
    code = main(argv)
    if code != 0:
        return code, {}, None
    report = json.loads(Path(f"{out}.public-report.json").read_text(encoding="utf-8"))
    return code, report, pd.read_parquet(out)


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("ir-dp", ["--k", "5", "--epsilon", "1"]),
        ("laplace", ["--epsilon", "1"]),
        ("mdav-dp", ["--k", "10", "--epsilon", "1"]),
    ],
)
def test_columns_choose_what_a_dp_method_protects(files, method, options):
    code, report, data = _run(files, method, *options, "--columns", "age")
    assert code == 0
    assert report["protected_columns"] == ["age"]
    assert set(report["unprotected_columns"]) == {"income", "a,b", "job"}
    assert list(data.columns) == ["age"]  # the others are left out by default
    assert report["parameters"]["bounds"] == {"age": [17.0, 90.0]}
    # without --columns the schema's categorical column without a taxonomy is refused
    assert _run(files, method, *options)[0] == 2


def test_a_json_list_names_columns_with_commas(files):
    code, report, data = _run(files, "laplace", "--epsilon", "1", "--columns", '["a,b", "income"]')
    assert code == 0
    assert sorted(report["protected_columns"]) == ["a,b", "income"]
    assert list(data.columns) == ["income", "a,b"]  # in the input's order


def test_columns_outside_the_schema_are_refused_with_the_fix(files, capsys):
    code, _, _ = _run(files, "ir-dp", "--k", "5", "--epsilon", "1", "--columns", "age,height")
    assert code == 2
    err = capsys.readouterr().err
    assert "--columns names 'height'" in err and "declare it there" in err
    assert len(err.strip().splitlines()) == 1
    assert not list(files.glob("ir-dp.parquet*"))
    # a declared column of the wrong kind for the method is refused too
    assert _run(files, "laplace", "--epsilon", "1", "--columns", "job")[0] == 2
    assert "protects numeric columns only" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "names"),
    [("age,income", ["age", "income"]), (' ["a,b", "c"] ', ["a,b", "c"]), ("x", ["x"])],
)
def test_column_list_reads_commas_or_json(text, names):
    assert _column_list(text) == names


@pytest.mark.parametrize("text", ["age,,income", "[1, 2]", '["a", ""]', "[not json"])
def test_column_list_refuses_malformed_lists(text):
    with pytest.raises(argparse.ArgumentTypeError):
        _column_list(text)


def test_mdav_columns_need_no_taxonomy_for_the_columns_left_out(files):
    out = files / "mdav.parquet"
    argv = ["release", "mdav", str(files / "in.parquet"), "-o", str(out), "--quiet", "--k", "5"]
    assert main([*argv, "--schema", str(files / "s.json"), "--columns", "age"]) == 0
    report = json.loads(Path(f"{out}.public-report.json").read_text(encoding="utf-8"))
    assert report["protected_columns"] == ["age"]
