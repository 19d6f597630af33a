"""scripts/plot_spark_scaling.py: pooled medians, failed jobs, the speed-up column, the PNG."""

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location(
        "plot_spark_scaling", ROOT / "scripts" / "plot_spark_scaling.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(wall, cpu, peak):
    # cpu_s differs from tree_cpu_s so that a CSV built from cpu_s would fail the checks
    return {"wall_s": wall, "tree_cpu_s": cpu, "cpu_s": cpu + 100.0, "peak_rss_bytes": peak}


def job(name, runs, ok=True):
    # the file's own medians, deliberately not what the pooled runs give
    return {"job": name, "ok": ok, "runs": runs, "wall_s_median": -1.0,
            "peak_rss_bytes_median": -1, "ns_per_value": -1.0}  # fmt: skip


def result(n_rows, jobs):
    return {"rows": n_rows, "columns": 2, "table_bytes": n_rows * 2 * 8,
            "started_utc": "2026-11-27 22:00", "jobs": jobs}  # fmt: skip


@pytest.fixture
def results(tmp_path):
    """1000 rows over two files (local2's runs split between them), 10000 rows in a third."""
    files = {
        "a.json": result(1000, [
            job("dpfast-local2", [run(20.0, 38.0, 8000)]),
            job("dpfast-local1", [run(30.0, 31.0, 4000), run(34.0, 35.0, 6000)]),
            job("dpfast-1cpu", [run(1.0, 1.0, 1)], ok=False),
        ]),
        "b.json": result(1000, [
            job("dpfast-local2", [run(16.0, 30.0, 16000), run(12.0, 26.0, 4000)]),
            job("dpfast-local1", [run(1000.0, 1000.0, 10**9)], ok=False),
        ]),
        "c.json": result(10000, [
            job("dpfast-local1", [run(90.0, 95.0, 64000)]),
            job("dpfast-local2", [run(60.0, 110.0, 96000)]),
        ]),
    }  # fmt: skip
    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content), encoding="utf-8")
    return [str(tmp_path / name) for name in files]


def test_load_pools_runs_over_files_and_skips_failed_jobs(script, results):
    rows = script.load(results)
    assert [(r["rows"], r["job"], r["runs"]) for r in rows] == [
        (1000, "dpfast-local2", 3),
        (1000, "dpfast-local1", 2),
        (10000, "dpfast-local2", 1),
        (10000, "dpfast-local1", 1),
    ]
    local2, local1, big2, big1 = rows
    # local2 at 1000 rows: walls 20 | 16, 12 -> median 16 (the files' medians would give 17)
    assert local2["wall_s_median"] == 16.0
    assert local2["cpu_s_median"] == 30.0  # tree_cpu_s 38, 30, 26
    assert local2["peak_gib"] == pytest.approx(8000 / 2**30)  # peaks 8000, 16000, 4000
    assert local2["peak_over_table"] == pytest.approx(8000 / 16000)
    assert local2["columns"] == 2
    # local1 at 1000 rows: the failed run of 1000 s in b.json is not pooled
    assert local1["wall_s_median"] == 32.0
    assert local1["cpu_s_median"] == 33.0
    assert local1["peak_gib"] == pytest.approx(5000 / 2**30)
    assert local2["speedup_over_local1"] == pytest.approx(2.0)  # 32 / 16
    assert big2["speedup_over_local1"] == pytest.approx(1.5)  # 90 / 60
    assert big2["peak_over_table"] == pytest.approx(96000 / 160000)
    assert local1["speedup_over_local1"] == ""
    assert big1["speedup_over_local1"] == ""


def test_speedup_is_empty_without_a_local1_run(script, tmp_path):
    path = tmp_path / "only_local2.json"
    path.write_text(json.dumps(result(1000, [job("dpfast-local2", [run(5.0, 9.0, 1)])])))
    (row,) = script.load([str(path)])
    assert row["job"] == "dpfast-local2"
    assert row["speedup_over_local1"] == ""


def test_same_rows_with_another_table_is_refused(script, tmp_path):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps(result(1000, [job("dpfast-local2", [run(5.0, 9.0, 1)])])))
    other = result(1000, [job("dpfast-local1", [run(5.0, 9.0, 1)])])
    other["columns"] = 3
    second.write_text(json.dumps(other))
    with pytest.raises(ValueError, match="1000 rows"):
        script.load([str(first), str(second)])


def test_csv_has_one_line_per_rows_and_job(script, results, tmp_path):
    out = tmp_path / "scaling.csv"
    script.write_csv(script.load(results), out)
    with open(out, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        lines = list(reader)
    assert reader.fieldnames == [
        "rows", "columns", "job", "runs", "wall_s_median", "cpu_s_median", "peak_gib",
        "peak_over_table", "speedup_over_local1",
    ]  # fmt: skip
    assert [(line["rows"], line["job"]) for line in lines] == [
        ("1000", "dpfast-local2"),
        ("1000", "dpfast-local1"),
        ("10000", "dpfast-local2"),
        ("10000", "dpfast-local1"),
    ]
    assert [line["speedup_over_local1"] for line in lines] == ["2.0", "", "1.5", ""]
    assert [float(line["wall_s_median"]) for line in lines] == [16.0, 32.0, 60.0, 90.0]
    assert [float(line["cpu_s_median"]) for line in lines] == [30.0, 33.0, 110.0, 95.0]
    assert [line["runs"] for line in lines] == ["3", "2", "1", "1"]


def test_main_writes_the_png_and_the_csv(script, results, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    png, table = tmp_path / "scaling.png", tmp_path / "scaling.csv"
    argv = ["plot_spark_scaling.py", *results, "--out", str(png), "--csv", str(table)]
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    assert len(table.read_text(encoding="utf-8").splitlines()) == 1 + 4
