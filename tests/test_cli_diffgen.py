"""The ``dpfast release diffgen`` command."""

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from dpfast import datasets
from dpfast.cli import main
from dpfast.datasets import adult


def _input(tmp_path, n=3000):
    path = tmp_path / "adult.parquet"
    adult(drop_missing=True).head(n).to_parquet(path)
    return path


SCHEMA = str(Path(datasets.__file__).with_name("adult_diffgen.schema.json"))


def test_release_diffgen_writes_counts_and_report(tmp_path, capsys):
    source = _input(tmp_path)
    out = tmp_path / "counts.parquet"
    code = main(
        [
            "release",
            "diffgen",
            str(source),
            "-o",
            str(out),
            "--target",
            "income",
            "--steps",
            "6",
            "--epsilon",
            "1",
            "--schema",
            SCHEMA,
            "--seed",
            "3",
        ]
    )
    assert code == 0
    counts = pq.read_table(out).to_pandas()
    report = json.loads((tmp_path / "counts.parquet.public-report.json").read_text())
    assert report["method"] == "diffgen" and report["guarantee_level"] == "proven"
    assert abs(sum(e["epsilon"] for e in report["ledger"]) - 1.0) < 1e-12
    assert len(counts) == report["n_cells"] and "count" in counts.columns
    assert "relationship" not in counts.columns
    assert set(report["cut"]) == set(counts.columns) - {"income", "count"}
    assert "wrote" in capsys.readouterr().out


def test_release_diffgen_microdata_csv(tmp_path):
    source = _input(tmp_path, 500)
    out = tmp_path / "records.csv"
    code = main(
        [
            "release",
            "diffgen",
            str(source),
            "-o",
            str(out),
            "--target",
            "income",
            "--steps",
            "3",
            "--epsilon",
            "2",
            "--schema",
            SCHEMA,
            "--microdata",
            "--utility",
            "info_gain",
            "--quiet",
        ]
    )
    assert code == 0
    records = pd.read_csv(out)
    assert "count" not in records.columns and set(records["income"]) <= {"<=50K", ">50K"}


def test_release_diffgen_needs_public_classes(tmp_path, capsys):
    source = _input(tmp_path, 200)
    schema = json.loads(Path(SCHEMA).read_text(encoding="utf-8"))
    schema["columns"]["income"] = {"type": "categorical"}
    for spec in schema["columns"].values():
        if "taxonomy" in spec:
            spec["taxonomy"] = SCHEMA.replace("adult_diffgen.schema.json", spec["taxonomy"])
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema), encoding="utf-8")
    out = tmp_path / "counts.csv"
    code = main(
        [
            "release",
            "diffgen",
            str(source),
            "-o",
            str(out),
            "--target",
            "income",
            "--steps",
            "3",
            "--epsilon",
            "1",
            "--schema",
            str(path),
        ]
    )
    assert code == 2
    assert "class values must be public" in capsys.readouterr().err
    assert not out.exists()
    code = main(
        [
            "release",
            "diffgen",
            str(source),
            "-o",
            str(out),
            "--target",
            "income",
            "--steps",
            "3",
            "--epsilon",
            "1",
            "--schema",
            str(path),
            "--classes",
            "<=50K,>50K",
            "--quiet",
        ]
    )
    assert code == 0 and out.exists()


def test_release_diffgen_bad_epsilon_leaves_no_file(tmp_path, capsys):
    source = _input(tmp_path, 200)
    out = tmp_path / "counts.parquet"
    code = main(
        [
            "release",
            "diffgen",
            str(source),
            "-o",
            str(out),
            "--target",
            "income",
            "--steps",
            "3",
            "--epsilon",
            "0",
            "--schema",
            SCHEMA,
        ]
    )
    assert code == 2 and not out.exists()
    assert "epsilon" in capsys.readouterr().err
