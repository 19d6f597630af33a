"""``dpfast schema init``: a skeleton from a data file, placeholders, and values from data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfast.cli import main
from dpfast.schema import Schema


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rng = np.random.default_rng(4)
    n = 50
    frame = pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 80, n),
            "income": rng.uniform(0, 9e4, n),
            "job": rng.choice(["clerk", "nurse", "pilot"], n),
            "when": pd.date_range("2020-01-01", periods=n),
        }
    )
    path = tmp_path / "people.parquet"
    frame.to_parquet(path)
    return path


def _init(data: Path, *options: str) -> tuple[int, dict]:
    out = data.with_name("s.json")
    code = main(["schema", "init", str(data), "-o", str(out), *options])
    return code, json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}


def test_init_writes_every_column_with_its_type_and_placeholders(data, capsys):
    code, schema = _init(data, "--unprotected", "id")
    assert code == 0
    columns = schema["columns"]
    assert list(columns) == ["id", "age", "income", "job", "when"]
    assert columns["id"] == {"type": "integer", "protect": False}
    assert columns["age"]["type"] == "integer" and columns["income"]["type"] == "float"
    assert columns["age"]["bounds"].startswith("FILL IN")
    assert columns["job"]["type"] == "categorical" and columns["job"]["protect"] is False
    assert columns["when"] == {"type": "string", "protect": False}
    assert "fill in the public bounds of 2 column(s)" in capsys.readouterr().out
    # printed to stdout without -o
    assert main(["schema", "init", str(data)]) == 0
    assert json.loads(capsys.readouterr().out)["columns"]["age"]["bounds"].startswith("FILL IN")


def test_releases_refuse_placeholders_and_say_what_to_fill_in(data, capsys):
    _init(data, "--unprotected", "id")
    out = data.with_name("out.parquet")
    argv = ["release", "laplace", str(data), "-o", str(out), "--epsilon", "1"]
    assert main([*argv, "--schema", str(data.with_name("s.json"))]) == 2
    err = capsys.readouterr().err
    # every placeholder is named at once, in one line
    assert len(err.strip().splitlines()) == 1
    assert "2 value(s) still the placeholder 'FILL IN'" in err
    assert "column 'age' \"bounds\", column 'income' \"bounds\"" in err
    assert 'each "bounds" with [lower, upper], taken from public knowledge' in err
    assert not out.exists()


def test_values_from_the_data_are_marked_and_the_release_says_it_is_not_private(data, capsys):
    code, schema = _init(data, "--bounds-from-data", "--domains-from-data", "--unprotected", "id")
    assert code == 0
    columns = schema["columns"]
    assert columns["age"]["from_data"] == ["bounds"]
    frame = pd.read_parquet(data)
    assert columns["age"]["bounds"] == [int(frame["age"].min()), int(frame["age"].max())]
    assert columns["job"]["taxonomy"] == ["clerk", "nurse", "pilot"]
    assert columns["job"]["from_data"] == ["taxonomy"]
    capsys.readouterr()
    out = data.with_name("out.parquet")
    argv = ["release", "ir-dp", str(data), "-o", str(out), "--k", "5", "--epsilon", "1"]
    assert main([*argv, "--schema", str(data.with_name("s.json")), "--seed", "1"]) == 0
    captured = capsys.readouterr()
    assert "dpfast: warning: NOT differentially private" in captured.err
    assert "guarantee: NOT differentially private" in captured.out
    report = json.loads(Path(f"{out}.public-report.json").read_text(encoding="utf-8"))
    assert report["guarantee_level"] == "none" and '"from_data"' in report["guarantee"]


def test_a_release_not_using_marked_values_keeps_its_label(data):
    _init(data, "--bounds-from-data")
    path = data.with_name("s.json")
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["columns"]["income"] = {"type": "float", "bounds": [0, 100000]}  # public
    path.write_text(json.dumps(schema), encoding="utf-8")
    out = data.with_name("out.parquet")
    argv = ["release", "laplace", str(data), "-o", str(out), "--epsilon", "1", "--quiet"]
    assert main([*argv, "--schema", str(path), "--columns", "income", "--seed", "1"]) == 0
    report = json.loads(Path(f"{out}.public-report.json").read_text(encoding="utf-8"))
    assert report["guarantee_level"] == "proven"


def test_init_refuses_an_existing_schema_without_force(data, capsys):
    assert _init(data)[0] == 0
    assert _init(data)[0] == 2
    assert "pass --force" in capsys.readouterr().err
    assert _init(data, "--force")[0] == 0


def test_the_schema_parser_checks_from_data(tmp_path):
    path = tmp_path / "s.json"
    for entry, match in [
        ({"type": "integer", "bounds": [0, 1], "from_data": ["bounds", "x"]}, "must list"),
        ({"type": "integer", "bounds": [0, 1], "from_data": "bounds"}, "must list"),
        ({"type": "categorical", "from_data": ["taxonomy"]}, "does not have"),
    ]:
        path.write_text(json.dumps({"columns": {"c": entry}}), encoding="utf-8")
        with pytest.raises(ValueError, match=match):
            Schema.from_json(path)
    entry = {"type": "integer", "bounds": [0, 9], "from_data": ["bounds"]}
    path.write_text(json.dumps({"columns": {"c": entry, "d": {"type": "float", "bounds": [0, 1]}}}))
    schema = Schema.from_json(path)
    assert schema.from_data(["c", "d"]) == {"c": ["bounds"]}
    assert schema.to_dict()["columns"]["c"]["from_data"] == ["bounds"]


def test_init_reads_text_files_with_their_delimiter(tmp_path, capsys):
    path = tmp_path / "people.csv"
    path.write_text("age;job\n31;clerk\n45;nurse\n", encoding="utf-8")
    assert main(["schema", "init", str(path)]) == 2
    assert "--delimiter" in capsys.readouterr().err
    assert main(["schema", "init", str(path), "--delimiter", ";"]) == 0
    columns = json.loads(capsys.readouterr().out)["columns"]
    assert columns["age"]["type"] == "integer" and columns["job"]["type"] == "categorical"
