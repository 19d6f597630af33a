"""The Spark benchmark script (benchmarks/spark.py): the naive job, the profile, the run.

The naive PySpark job is checked without noise against the NumPy version of the same job
(exact group means; tied rows may swap groups, so the columns are compared sorted); the
run's bookkeeping with stand-in commands, so that no timing is asserted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import outofcore  # noqa: E402
import spark as spark_bench  # noqa: E402

BOUNDS = (0.0, 1000.0)


def _data(tmp_path: Path, rows: int = 2003, columns: int = 3) -> Path:
    data = tmp_path / "data"
    outofcore.generate(data, rows=rows, columns=columns, seed=4, file_rows=700, group_rows=300)
    return data


def _job(data: Path, k: int, noise: bool) -> outofcore.IrDpJob:
    names = outofcore.dataset_shape(data)[1]
    return outofcore.IrDpJob(k=k, epsilon=1.0, bounds=dict.fromkeys(names, BOUNDS), noise=noise)


def _read(path: Path):
    return ds.dataset(path, format="parquet").to_table()


@pytest.mark.parametrize("variant", spark_bench.VARIANTS)
def test_naive_job_without_noise_gives_the_exact_group_means(spark, tmp_path, variant):
    data = _data(tmp_path)
    k = 10  # 2003 = 10 * 200 + 3: the remainder joins the last group
    out = tmp_path / "naive"
    summary = spark_bench.naive_release(
        spark, data, out, _job(data, k, noise=False), variant=variant
    )
    assert summary["rows"] == 2003 and summary["columns"] == 3
    table, got = _read(data), _read(out)
    assert got.column_names == table.column_names
    assert got.num_rows == table.num_rows
    for name in table.column_names:
        exact = outofcore.numpy_ir_dp_exact(table[name].to_numpy(), k, *BOUNDS)
        np.testing.assert_allclose(np.sort(got[name].to_numpy()), np.sort(exact), rtol=1e-12)


def test_naive_job_adds_one_laplace_draw_per_group(spark, tmp_path):
    data = _data(tmp_path, rows=3000, columns=1)
    job = outofcore.IrDpJob(k=10, epsilon=100.0, bounds={"x0": BOUNDS})  # scale 1000 / 1000
    summary = spark_bench.naive_release(spark, data, tmp_path / "noisy", job, variant="window")
    assert "NOT a cryptographically secure source" in summary["noise"]
    got = _read(tmp_path / "noisy")["x0"].to_numpy()
    exact = outofcore.numpy_ir_dp_exact(_read(data)["x0"].to_numpy(), 10, *BOUNDS)
    assert got.min() >= 0.0 and got.max() <= 1000.0
    assert len(np.unique(got)) == len(np.unique(exact)) == 300  # one noisy value a group
    inside = (np.sort(exact) > 50) & (np.sort(exact) < 950)
    # E|Laplace(0, 1)| = 1: the mean absolute noise of ~2,800 rows is near it
    error = np.abs(np.sort(got) - np.sort(exact))[inside]
    assert 0.5 < error.mean() < 2.0


def test_naive_job_refuses_an_unknown_variant(spark, tmp_path):
    data = _data(tmp_path, rows=100, columns=1)
    with pytest.raises(ValueError, match="choose among window, partitioned"):
        spark_bench.naive_release(spark, data, tmp_path / "o", _job(data, 5, False), variant="x")


def test_profile_times_every_pass_of_dpfast_on_spark(spark, tmp_path):
    data = _data(tmp_path)
    profile = spark_bench.Profile()
    out = tmp_path / "released.parquet"
    summary = spark_bench.dpfast_release(
        spark, data, out, _job(data, 10, noise=True), profile=profile
    )
    got = summary["profile"]
    # one sort job a column on the executors, every row read once
    assert got["passes"] == 3
    assert [p["kind"] for p in got["per_pass"]] == ["sort"] * 3
    assert sorted(p["column"] for p in got["per_pass"]) == ["x0", "x1", "x2"]
    assert sum(p["rows"] for p in got["per_pass"]) == 3 * 2003
    # the grid values stay on the executors: only one integer sum a group comes back, and
    # a column's range its index, first group, count and flags (four integers)
    assert got["result_bytes"] == 3 * (2003 // 10) * 8 + 3 * 4 * 8
    assert 0 < got["spark_wall_s"] <= min(got["total_s"], got["spark_jobs_s"])
    assert got["driver_s"] == pytest.approx(got["total_s"] - got["spark_wall_s"])
    assert sorted(got["floor_pass_s"]) == ["x0", "x1", "x2"]
    assert "columns" in got["engine_timings_s"]
    assert _read(out).num_rows == 2003


def test_the_timed_release_is_the_executors_release_of_the_files(spark, tmp_path):
    # the path the benchmark times: the executors compute and write the release
    data = _data(tmp_path)
    job = _job(data, 10, noise=True)
    summary = spark_bench.dpfast_release(spark, data, tmp_path / "released.parquet", job)
    assert summary["seconds"] > 0
    written = tmp_path / "released"  # Spark writes a dataset directory
    assert written.is_dir() and _read(written).num_rows == 2003


def test_union_length_counts_overlapping_passes_once():
    assert spark_bench.union_length([]) == 0.0
    assert spark_bench.union_length([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]) == 4.0


def test_ratios_compare_with_the_issue_targets():
    jobs = [
        {"job": "dpfast-local1", "ok": True, "wall_s_median": 30.0},
        {"job": "dpfast-local2", "ok": True, "wall_s_median": 20.0},
        {"job": "naive-window", "ok": True, "wall_s_median": 120.0},
        {"job": "naive-partitioned", "ok": True, "wall_s_median": 60.0},
        {"job": "dpfast-cluster", "ok": True, "wall_s_median": 25.0},
    ]
    got = spark_bench.ratios(jobs)
    assert got["cluster_over_local2"] == 1.25
    assert got["naive-window_over_dpfast"] == 6.0 and got["naive-window_target_met"]
    assert got["naive-partitioned_over_dpfast"] == 3.0
    assert not got["naive-partitioned_target_met"]
    assert got["local1_over_local2"] == 1.5 and not got["scaling_target_met"]
    assert spark_bench.ratios([{**jobs[1], "ok": False}, jobs[2]]) == {}


def test_job_commands_share_the_session_settings(tmp_path):
    args = spark_bench.parser().parse_args(
        ["run", "--data", "d", "--json", "r.json", "--driver-memory", "3g", "--k", "50"]
    )
    specs = spark_bench.job_specs()
    assert sorted(specs) == sorted(
        [
            "dpfast-local1",
            "dpfast-1cpu",
            "dpfast-local2",
            "dpfast-cluster",
            "naive-window",
            "naive-partitioned",
        ]
    )
    assert [name for name, spec in specs.items() if spec.cpus is not None] == ["dpfast-1cpu"]
    for name, spec in specs.items():
        command = spark_bench.job_command(spec, Path("d"), Path("s.json"), Path("o"), args)
        assert command[2] == spec.name
        assert command[command.index("--driver-memory") + 1] == "3g"
        assert command[command.index("--k") + 1] == "50"
        assert ("--memory-limit" in command) == (spec.name == "dpfast")
        masters = {"dpfast-local1": "local[1]", "dpfast-1cpu": "local[1]"}
        masters["dpfast-cluster"] = "local-cluster[2,1,2048]"
        assert command[len(command) - command[::-1].index("--master")] == masters.get(
            name, "local[2]"
        )


def test_measure_pins_the_command_to_the_cpus_asked(tmp_path):
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("pinning is seen only with two CPUs or more")
    out = tmp_path / "affinity.txt"
    probe = f"import os; open({str(out)!r}, 'w').write(str(len(os.sched_getaffinity(0))))"
    command = [sys.executable, "-c", probe]
    one = spark_bench.measure(command, cpus=1)
    assert one["returncode"] == 0 and one["pinned_cpus"] == 1
    assert out.read_text() == "1"
    spark_bench.measure(command)
    assert out.read_text() == str(len(os.sched_getaffinity(0)))
    with pytest.raises(SystemExit, match="--cpus must be 1 to"):
        spark_bench.measure(command, cpus=10_000)


def test_run_writes_medians_and_ratios(tmp_path, monkeypatch):
    data = _data(tmp_path, rows=500, columns=2)
    seconds = {"dpfast-local1": 0.4, "dpfast-local2": 0.2, "naive-window": 1.1}

    def stand_in(spec, data, schema, out, args):
        name = next(n for n, s in spark_bench.job_specs().items() if s == spec)
        return [sys.executable, "-c", f"import time; time.sleep({seconds[name]})"]

    monkeypatch.setattr(spark_bench, "job_command", stand_in)
    results = tmp_path / "results" / "s13-spark-test.json"
    argv = ["run", "--data", str(data), "--repeat", "2", "--json", str(results)]
    assert spark_bench.main([*argv, "--jobs", ",".join(seconds)]) == 0
    got = json.loads(results.read_text())
    assert (got["rows"], got["columns"], got["table_bytes"]) == (500, 2, 8000)
    assert [entry["job"] for entry in got["jobs"]] == list(seconds)
    for entry in got["jobs"]:
        assert entry["ok"] and entry["repeat"] == 2
        assert entry["wall_s_median"] >= seconds[entry["job"]]
        assert entry["peak_over_table"] == entry["peak_rss_bytes_median"] / 8000
    assert got["ratios"]["local1_over_local2"] > 1.0
    assert "naive-partitioned_over_dpfast" not in got["ratios"]
    assert "NOT a cryptographically secure source" in got["naive_noise"]


def test_measure_counts_the_cpu_of_descendants_nobody_waits_for():
    # a grandchild spins 0.5 CPU seconds; its parent never waits for it, as a Spark
    # driver does not wait for its JVM, so getrusage alone would miss that time
    spin = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    child = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {spin!r}])\n"
        "time.sleep(4)\n"
    )
    got = spark_bench.measure([sys.executable, "-c", child])
    assert got["returncode"] == 0
    assert got["tree_cpu_s"] >= 0.4  # /proc counts whole clock ticks
    assert got["cpu_s"] >= got["tree_cpu_s"]
    assert got["other_cpu_s"] >= 0.0
