"""Smoke tests of scripts/reproduce_ir_dp.py (the paper's experiments), on a few points."""

import importlib.util
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast.partitions.categorical import cluster_centroids

ROOT = Path(__file__).resolve().parents[1]
CENSUS = ROOT.parent / "shared" / "data" / "census" / "census.csv"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location(
        "reproduce_ir_dp", ROOT / "scripts" / "reproduce_ir_dp.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plain_categorical_ir_replaces_each_rank_group_by_its_centroid(script):
    taxonomy = dpfast.datasets.adult_taxonomy("occupation")
    values = pd.Series(dpfast.datasets.adult(drop_missing=True)["occupation"].head(300))
    np.testing.assert_array_equal(
        script.plain_categorical_ir(values, taxonomy, 1), values.to_numpy()
    )
    out = script.plain_categorical_ir(values, taxonomy, 30)
    assert len(set(out)) <= 10 and set(out) <= set(taxonomy.domain)
    whole = script.plain_categorical_ir(values, taxonomy, 300)
    codes = taxonomy.encode(values)
    centroid = cluster_centroids(taxonomy, codes, np.zeros(300, dtype=np.int64), 1)[0]
    assert set(whole) == {taxonomy.domain[centroid]}


def test_adult_rows_hold_every_method(script):
    rows = pd.DataFrame(script.run_adult([100], 1, 7, time.perf_counter()))
    assert set(rows["method"]) == {
        "individual_ranking",
        "laplace_em (ir_dp k=1)",
        "ir_dp",
        "ir_dp_numeric",
        "mdav_dp_as_published",
    }
    assert set(rows["attribute"]) == {
        "all",
        "age",
        "hours-per-week",
        "occupation",
        "native-country",
    }
    assert (rows["mean"] >= 0).all()
    assert (rows.loc[rows["metric"] == "jsd", "mean"] <= 1.0).all()


@pytest.mark.skipif(not CENSUS.exists(), reason="needs ../shared/data/census/census.csv")
def test_census_run_writes_curves_table_and_findings(script, tmp_path, capsys):
    script.main(
        [
            "--census",
            str(CENSUS),
            "--out",
            str(tmp_path),
            "--quick",
            "--runs",
            "1",
            "--skip-adult",
            "--no-plots",
        ]
    )
    out = capsys.readouterr().out
    assert "NON-PRIVATE convenience" in out and "never for publication" in out
    curves = pd.read_csv(tmp_path / "census_curves.csv")
    assert set(curves["method"]) == {
        "individual_ranking",
        "laplace_dp",
        "ir_dp",
        "mdav_dp_as_published",
        "mdav_dp_l1",
    }
    table = pd.read_csv(tmp_path / "census_table1.csv")
    assert len(table) == 4 * 8  # k in {2, 25, 50, 100} x the first 8 attributes
    findings = (tmp_path / "findings.txt").read_text()
    assert "1. IR-DP has lower RE than plain Laplace" in findings
    census = pd.read_csv(CENSUS)
    bounds = script.census_bounds(census)
    assert bounds["AGI"] == (0.0, 1.5 * census["AGI"].max())


@pytest.mark.slow
@pytest.mark.skipif(not CENSUS.exists(), reason="needs ../shared/data/census/census.csv")
def test_plots_are_redrawn_from_the_csv_files(script, tmp_path):
    pytest.importorskip("matplotlib")
    common = [
        "--census",
        str(CENSUS),
        "--out",
        str(tmp_path),
        "--quick",
        "--runs",
        "1",
        "--skip-adult",
    ]
    script.main([*common, "--no-plots"])
    script.main([*common, "--plot-only"])
    for name in ("census_fig1_re", "census_fig1_jsd", "census_fig3_re", "census_fig3_jsd"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    assert "redrawn from the CSV files" in (tmp_path / "findings.txt").read_text()
