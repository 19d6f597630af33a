"""The out-of-core benchmark harness (benchmarks/outofcore.py): data, DuckDB job, measure.

The DuckDB job is checked without noise against a NumPy version of the same job (exact
group means); ``measure`` against children whose memory use is known.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import outofcore  # noqa: E402

MB = 1_000_000


def read_dataset(path: Path) -> pa.Table:
    return ds.dataset(path, format="parquet").to_table()


def released_exact(data: Path, out: Path, k: int) -> pa.Table:
    """The DuckDB job on ``data`` without noise, through its command line."""
    pytest.importorskip("duckdb", reason="the DuckDB baseline needs duckdb (pip install duckdb)")
    argv = ["duckdb", "--data", str(data), "--out", str(out), "--k", str(k)]
    assert outofcore.main([*argv, "--epsilon", "1", "--threads", "2", "--no-noise"]) == 0
    return pq.read_table(out)


def test_gen_writes_files_schema_and_bounded_values(tmp_path):
    data = tmp_path / "data"
    assert outofcore.main(
        ["gen", "--rows", "20_000", "--columns", "3", "--out", str(data), "--file-rows", "7000",
         "--row-group-rows", "3000"]
    ) == 0  # fmt: skip
    files = sorted(path.name for path in data.glob("*.parquet"))
    assert files == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert pq.ParquetFile(data / "part-00000.parquet").metadata.num_row_groups == 3
    table = read_dataset(data)
    assert table.num_rows == 20_000
    assert table.schema == pa.schema([(f"x{j}", pa.float64()) for j in range(3)])
    values = np.column_stack([table[name].to_numpy() for name in table.column_names])
    assert values.min() >= 0.0 and values.max() <= 1000.0
    assert len(np.unique(values[:, 2])) == 100  # the column with ties: 0..99
    assert len(np.unique(values[:, 0])) > 19_000
    schema = json.loads((tmp_path / "data.schema.json").read_text())
    assert schema["columns"]["x1"] == {
        "type": "float",
        "bounds": [0.0, 1000.0],
        "description": schema["columns"]["x1"]["description"],
    }


def test_gen_is_deterministic_and_skips_a_matching_dataset(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert outofcore.generate(first, rows=5000, columns=2, seed=3, file_rows=2000)
    assert outofcore.generate(second, rows=5000, columns=2, seed=3, file_rows=2000)
    assert read_dataset(first).equals(read_dataset(second))
    stamp = (first / "part-00000.parquet").stat().st_mtime_ns
    assert not outofcore.generate(first, rows=5000, columns=2, seed=3, file_rows=2000)
    assert (first / "part-00000.parquet").stat().st_mtime_ns == stamp
    with pytest.raises(FileExistsError, match="--force"):
        outofcore.generate(first, rows=5000, columns=2, seed=4, file_rows=2000)
    assert outofcore.generate(first, rows=5000, columns=2, seed=4, file_rows=2000, force=True)
    assert not read_dataset(first).equals(read_dataset(second))


def test_duckdb_job_without_noise_matches_numpy(tmp_path):
    data = tmp_path / "data"
    outofcore.generate(data, rows=20_000, columns=3, seed=1, file_rows=7000, group_rows=3000)
    k = 7  # 20_000 = 7 * 2857 + 1: the remainder row joins the last group
    got = released_exact(data, tmp_path / "released.parquet", k)
    table = read_dataset(data)
    assert got.column_names == table.column_names
    for name in table.column_names:
        expected = outofcore.numpy_ir_dp_exact(table[name].to_numpy(), k, 0.0, 1000.0)
        np.testing.assert_allclose(got[name].to_numpy(), expected, rtol=1e-12, atol=0)
    assert not list(tmp_path.glob(".released.parquet.duckdb-*"))  # temporary files removed


def test_duckdb_job_clamps_and_breaks_ties_by_row(tmp_path):
    data = tmp_path / "hand"
    data.mkdir()
    pq.write_table(pa.table({"a": [5.0, -3.0, 5.0, 12.0, 5.0]}), data / "part-00000.parquet")
    pq.write_table(pa.table({"a": [7.0, 5.0, 0.5]}), data / "part-00001.parquet")
    (tmp_path / "hand.schema.json").write_text(
        json.dumps({"columns": {"a": {"type": "float", "bounds": [0, 10]}}})
    )
    got = released_exact(data, tmp_path / "out.parquet", 3)["a"].to_numpy()
    # clamped, rows 0..7: 5 0 5 10 5 | 7 5 0.5. Sorted by (value, row): rows 1 7 0 | 2 4 6
    # 5 3. Groups of 3, the remainder (2 rows) joins the last: the first 5 (row 0) falls in
    # group 0 with mean 5.5 / 3, the other rows in group 1 with mean 32 / 5.
    expected = np.array([5.5 / 3 if row in (0, 1, 7) else 6.4 for row in range(8)])
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_duckdb_job_adds_laplace_noise_per_group(tmp_path):
    pytest.importorskip("duckdb", reason="the DuckDB baseline needs duckdb (pip install duckdb)")
    data = tmp_path / "data"
    outofcore.generate(data, rows=3000, columns=2, seed=2)
    bounds = {"x0": (0.0, 1000.0), "x1": (0.0, 1000.0)}
    job = outofcore.IrDpJob(k=10, epsilon=100.0, bounds=bounds)  # scale 2 * 1000 / 1000 = 2
    summary = outofcore.duckdb_ir_dp(data, tmp_path / "noisy.parquet", job, threads=1, seed=0.5)
    assert "NOT a cryptographically secure source" in summary["noise"]
    metadata = pq.ParquetFile(tmp_path / "noisy.parquet").metadata.metadata
    assert b"NOT a cryptographically secure" in metadata[b"noise_source"]
    got = pq.read_table(tmp_path / "noisy.parquet")["x0"].to_numpy()
    exact = outofcore.numpy_ir_dp_exact(read_dataset(data)["x0"].to_numpy(), 10, 0.0, 1000.0)
    assert got.min() >= 0.0 and got.max() <= 1000.0
    means, groups = np.unique(exact, return_inverse=True)
    assert len(means) == 300
    noisy = np.array([np.unique(got[groups == g]) for g in range(300)])  # one value a group
    inside = (means > 50.0) & (means < 950.0)  # no clamping there
    # E|Laplace(0, 2)| = 2; the mean of ~280 draws is within 25 % with ample margin
    assert abs(np.mean(np.abs(noisy[inside, 0] - means[inside])) - 2.0) < 0.5


def test_measure_reports_the_peak_of_a_child():
    child = "import numpy as np, time; a = np.ones(200_000_000 // 8); time.sleep(0.3)"
    got = outofcore.measure([sys.executable, "-c", child])
    assert got["returncode"] == 0
    assert got["peak_rss_bytes"] >= 200 * MB
    assert got["peak_rss_tree_bytes"] >= 200 * MB
    assert got["wall_s"] >= 0.3


def test_measure_counts_cpu_time_not_sleep():
    spin = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
    busy = outofcore.measure([sys.executable, "-c", spin])
    idle = outofcore.measure([sys.executable, "-c", "import time; time.sleep(0.5)"])
    assert busy["cpu_s"] >= 0.5
    assert idle["cpu_s"] < 0.3 < 0.5 <= idle["wall_s"]
    assert busy["other_cpu_s"] >= 0.0


def test_wait_for_quiet_compares_the_machine_load_with_its_threshold():
    assert outofcore.wait_for_quiet(1.0, window=0.1, max_busy=1e9)
    assert not outofcore.wait_for_quiet(0.3, window=0.1, max_busy=0.0)


def test_measure_sums_the_whole_process_tree(tmp_path):
    # Two grandchildren of 150 MB at once: the tree peaks above 300 MB, no process does.
    script = tmp_path / "tree.py"
    script.write_text(
        textwrap.dedent(
            """
            import subprocess, sys
            grow = "import numpy as np, time; a = np.ones(150_000_000 // 8); time.sleep(1.0)"
            workers = [subprocess.Popen([sys.executable, "-c", grow]) for _ in range(2)]
            sys.exit(max(worker.wait() for worker in workers))
            """
        )
    )
    record = tmp_path / "measure.jsonl"
    command = [sys.executable, str(BENCHMARKS / "outofcore.py"), "measure", "--json", str(record)]
    subprocess.run([*command, "--", sys.executable, str(script)], check=True, capture_output=True)
    got = json.loads(record.read_text())
    assert got["peak_rss_tree_bytes"] >= 300 * MB
    assert 150 * MB <= got["maxrss_children_bytes"] < 300 * MB


def test_run_measures_the_duckdb_job(tmp_path):
    pytest.importorskip("duckdb", reason="the DuckDB baseline needs duckdb (pip install duckdb)")
    data = tmp_path / "data"
    outofcore.generate(data, rows=2000, columns=2)
    results = tmp_path / "results.json"
    argv = ["run", "--data", str(data), "--jobs", "duckdb", "--repeat", "2", "--threads", "1"]
    assert outofcore.main([*argv, "--json", str(results)]) == 0
    got = json.loads(results.read_text())
    assert (got["rows"], got["columns"], got["table_bytes"]) == (2000, 2, 32_000)
    (entry,) = got["jobs"]
    assert entry["ok"] and entry["repeat"] == 2
    assert entry["wall_s_median"] == np.median([run["wall_s"] for run in entry["runs"]])
    assert entry["peak_rss_bytes_median"] > 20 * MB  # a Python process with duckdb loaded
    assert entry["peak_over_table"] == entry["peak_rss_bytes_median"] / 32_000
    assert entry["ns_per_value"] == pytest.approx(entry["wall_s_median"] * 1e9 / 4000)
    assert not (tmp_path / "data.runs" / "duckdb-released.parquet").exists()


def test_run_reports_a_failing_job_with_its_stderr(tmp_path, monkeypatch):
    data = tmp_path / "data"
    outofcore.generate(data, rows=1000, columns=2)

    def failing(settings, out):
        return [sys.executable, "-c", "import sys; sys.exit('engine says: no such command')"]

    monkeypatch.setitem(outofcore.JOBS, "failing", failing)
    results = tmp_path / "results.json"
    argv = ["run", "--data", str(data), "--jobs", "failing", "--repeat", "2"]
    assert outofcore.main([*argv, "--json", str(results)]) == 1
    (entry,) = json.loads(results.read_text())["jobs"]
    assert not entry["ok"]
    assert "engine says: no such command" in entry["error"]
    assert len(entry["runs"]) == 1  # a failed job is not repeated
