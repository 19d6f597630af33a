"""Smoke tests of scripts/reproduce_ir_dp.py (the paper's experiments), on a few points."""

import contextlib
import importlib.util
import io
import shutil
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


#: The quick census run's options, without its output folder.
QUICK_CENSUS = ["--census", str(CENSUS), "--quick", "--runs", "1", "--skip-adult"]


@pytest.fixture(scope="module")
def census_run(script, tmp_path_factory):
    """The quick census run without plots, made once: its folder and what it printed.

    Both tests below read it (the plots are redrawn in a copy of the folder), so the
    experiments, the slow part, run once for the module.
    """
    if not CENSUS.exists():
        pytest.skip("needs ../shared/data/census/census.csv")
    folder = tmp_path_factory.mktemp("census")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        script.main([*QUICK_CENSUS, "--out", str(folder), "--no-plots"])
    return folder, printed.getvalue()


def test_census_run_writes_curves_table_and_findings(script, census_run):
    folder, out = census_run
    assert "NON-PRIVATE convenience" in out and "never for publication" in out
    curves = pd.read_csv(folder / "census_curves.csv")
    assert set(curves["method"]) == {
        "individual_ranking",
        "laplace_dp",
        "ir_dp",
        "mdav_dp_as_published",
        "mdav_dp_l1",
    }
    table = pd.read_csv(folder / "census_table1.csv")
    assert len(table) == 4 * 8  # k in {2, 25, 50, 100} x the first 8 attributes
    findings = (folder / "findings.txt").read_text()
    assert "1. IR-DP has lower RE than plain Laplace" in findings
    census = pd.read_csv(CENSUS)
    bounds = script.census_bounds(census)
    assert bounds["AGI"] == (0.0, 1.5 * census["AGI"].max())


@pytest.mark.slow  # matplotlib draws four figures: about 30 s on the 2-core VM
def test_plots_are_redrawn_from_the_csv_files(script, census_run, tmp_path):
    pytest.importorskip("matplotlib")
    folder = tmp_path / "census"
    shutil.copytree(census_run[0], folder)  # the run's CSV files, no plot yet
    assert not list(folder.glob("*.png"))
    script.main([*QUICK_CENSUS, "--out", str(folder), "--plot-only"])
    for name in ("census_fig1_re", "census_fig1_jsd", "census_fig3_re", "census_fig3_jsd"):
        assert (folder / f"{name}.png").stat().st_size > 10_000
    assert "redrawn from the CSV files" in (folder / "findings.txt").read_text()
