"""The command line with categorical columns: schema taxonomies, --sensitivity, demo --mixed."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from dpfast.datasets import adult_hierarchy_path
from tests.test_cli import assert_one_line_error, dpfast, people

JOBS = "clerk;Office;*\nnurse;Care;*\npilot;Transport;*\n"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    people().to_parquet(tmp_path / "people.parquet", index=False)
    (tmp_path / "jobs.csv").write_text(JOBS, encoding="utf-8")
    schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "income": {"type": "float", "protect": False},
            "job": {"type": "categorical", "taxonomy": "jobs.csv"},
        }
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("rule", ["paper", "proven"])
def test_ir_dp_protects_categorical_columns_with_a_taxonomy(workdir: Path, rule: str) -> None:
    result = dpfast(
        "release",
        "ir-dp",
        "people.parquet",
        "-o",
        "out.parquet",
        "--k",
        "5",
        "--epsilon",
        "2",
        "--schema",
        "schema.json",
        "--sensitivity",
        rule,
        "--seed",
        "3",
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr
    released = pq.read_table(workdir / "out.parquet").to_pandas()
    assert set(released["job"]) <= {"clerk", "nurse", "pilot"}
    report = json.loads((workdir / "out.parquet.public-report.json").read_text(encoding="utf-8"))
    assert report["protected_columns"] == ["age", "job"]
    assert report["parameters"]["sensitivity"] == rule
    assert [e["epsilon"] for e in report["ledger"]] == [1.0, 1.0]
    assert report["guarantee_level"] == ("heuristic" if rule == "paper" else "proven")


def test_protected_categorical_without_taxonomy_is_refused(workdir: Path) -> None:
    schema = {
        "columns": {"age": {"type": "integer", "bounds": [17, 90]}, "job": {"type": "categorical"}}
    }
    (workdir / "bad.json").write_text(json.dumps(schema), encoding="utf-8")
    result = dpfast(
        "release",
        "ir-dp",
        "people.parquet",
        "-o",
        "out.parquet",
        "--k",
        "5",
        "--epsilon",
        "1",
        "--schema",
        "bad.json",
        cwd=workdir,
    )
    assert_one_line_error(result, "categorical column(s) 'job' without a taxonomy")
    assert not (workdir / "out.parquet").exists()


def test_value_missing_from_the_taxonomy_fails_cleanly(workdir: Path) -> None:
    (workdir / "jobs.csv").write_text("clerk;Office;*\nnurse;Care;*\n", encoding="utf-8")
    result = dpfast(
        "release",
        "ir-dp",
        "people.parquet",
        "-o",
        "out.parquet",
        "--k",
        "30",  # under the noise warning's threshold: the error is the one line
        "--epsilon",
        "1",
        "--schema",
        "schema.json",
        cwd=workdir,
    )
    assert_one_line_error(result, "missing from the taxonomy: 'pilot'")
    assert not (workdir / "out.parquet").exists()


def test_laplace_still_refuses_categorical_columns(workdir: Path) -> None:
    result = dpfast(
        "release",
        "laplace",
        "people.parquet",
        "-o",
        "out.parquet",
        "--epsilon",
        "1",
        "--schema",
        "schema.json",
        cwd=workdir,
    )
    assert_one_line_error(result, "laplace protects numeric columns only")


def test_demo_mixed(tmp_path: Path) -> None:
    result = dpfast(
        "demo",
        "--mixed",
        "--sensitivity",
        "paper",
        "--out",
        "demo",
        "--k",
        "50",
        "--epsilon",
        "10",
        "--seed",
        "1",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "demo" / "adult_ir_dp.parquet.public-report.json").read_text())
    assert report["protected_columns"] == ["age", "hours-per-week", "occupation", "native-country"]
    assert [e["step"] for e in report["ledger"]] == ["centroid noise"] * 2 + [
        "centroid selection"
    ] * 2
    released = pd.read_parquet(tmp_path / "demo" / "adult_ir_dp.parquet")
    assert released.shape == (30_162, 4)
    assert "centroid selection" in result.stdout and "native-country" in result.stdout
    private = json.loads(
        (tmp_path / "demo" / "adult_ir_dp.parquet.private-report.json").read_text()
    )
    assert private["metrics"]["relative_error"]["occupation"] < 0.2
    assert "dpfast: warning: NOT proven differentially private" in result.stderr


def test_bundled_hierarchy_is_a_package_file() -> None:
    assert adult_hierarchy_path("occupation").is_file()
    notice = adult_hierarchy_path("occupation").parent / "NOTICE"
    assert "Apache License" in notice.read_text(encoding="utf-8")
