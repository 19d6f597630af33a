"""Out-of-core benchmark harness: synthetic Parquet data, the DuckDB baseline, measurement.

Issue 15 compares dpfast's out-of-core ir_dp engine with the same job written in DuckDB
SQL, in the same run, on Parquet datasets larger than memory. This script holds every piece
of that comparison except dpfast's engine itself, and does not import it:

``gen``
    Write a synthetic Parquet dataset directory (``part-00000.parquet``, ...; columns
    ``x0..x{C-1}``, float64, inside the public bounds [0, 1000]) one row group at a time,
    with its dpfast schema file ``DIR.schema.json``.
``duckdb``
    The naive out-of-core ir_dp job in DuckDB SQL: per column a window rank, group ids,
    group means, Laplace noise per group, a join back to the rows. Its noise comes from
    DuckDB's ``random()``, which is NOT a cryptographically secure source: this job is a
    baseline for speed only and its output must never be published.
``floor``
    The floor of an out-of-core ir_dp release: per column, pyarrow reads it,
    dpfast's own kernels quantise it to its grid and radix-sort it, and pyarrow writes
    as many float64 values as Parquet, as a release does. No noise, no ranks.
``measure -- CMD ...``
    Run CMD as a child process; report wall seconds and the peak resident memory of its
    whole process tree as one JSON line.
``run``
    Run each job (``duckdb``, ``dpfast``, or any job added to ``JOBS``) several times,
    each in its own measured process, and write the medians to a JSON file.

Every memory figure is also quoted as a multiple of the in-memory table,
``n_rows * n_columns * 8`` bytes. See ``docs/engines.md``.

Examples
--------
::

    python benchmarks/outofcore.py gen --rows 10_000_000 --columns 10 --out /data/r10m_c10
    python benchmarks/outofcore.py duckdb --data /data/r10m_c10 --out /data/out.parquet \\
        --k 10 --epsilon 1 --memory-limit 4GiB
    python benchmarks/outofcore.py measure -- sleep 1
    python benchmarks/outofcore.py run --data /data/r10m_c10 --jobs duckdb,dpfast \\
        --repeat 2 --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LOWER = 0.0
UPPER = 1000.0
MANIFEST = "_manifest.json"
NOT_SECURE = (
    "noise drawn from DuckDB's random(), which is NOT a cryptographically secure source: "
    "a baseline for speed only, never publish this output"
)
POLL_SECONDS = 0.05


# --------------------------------------------------------------------------- gen


def dataset_manifest(
    rows: int, columns: int, seed: int, file_rows: int, group_rows: int
) -> dict[str, Any]:
    """The manifest that identifies a generated dataset (compared before regenerating)."""
    return {
        "generator": "benchmarks/outofcore.py gen, format 1",
        "rows": rows,
        "columns": columns,
        "seed": seed,
        "file_rows": file_rows,
        "row_group_rows": group_rows,
    }


def column_values(rng: np.random.Generator, column: int, n: int) -> np.ndarray:
    """``n`` synthetic values of column ``column``, inside [LOWER, UPPER].

    Every third column (x2, x5, ...) holds the integers 0..99 stored as float (many ties);
    the others a lognormal (median about 55) mixed with 10 % uniform values on the whole
    domain, clipped to the bounds.
    """
    if column % 3 == 2:
        return rng.integers(0, 100, size=n).astype(np.float64)
    values = rng.lognormal(mean=4.0, sigma=1.0, size=n)
    uniform = rng.random(n) < 0.1
    values[uniform] = rng.uniform(LOWER, UPPER, size=int(uniform.sum()))
    return np.clip(values, LOWER, UPPER)


def row_group_table(seed: int, first_row: int, n: int, columns: int) -> pa.Table:
    """The rows ``first_row .. first_row + n - 1`` of the dataset, as an Arrow table.

    Each column of each row group has its own generator keyed by (seed, first row,
    column), so a column's values do not depend on how many columns are generated.
    """
    arrays = {}
    for column in range(columns):
        rng = np.random.default_rng([seed, first_row, column])
        arrays[f"x{column}"] = column_values(rng, column, n)
    return pa.table(arrays)


def schema_document(columns: int) -> dict[str, Any]:
    """dpfast's schema (docs/schema.md) for the generated columns: float, bounds [0, 1000]."""
    description = "synthetic; bounds [0, 1000] are public by construction (the generator's)"
    return {
        "version": 1,
        "description": "Synthetic out-of-core benchmark data (benchmarks/outofcore.py gen)",
        "columns": {
            f"x{j}": {"type": "float", "bounds": [LOWER, UPPER], "description": description}
            for j in range(columns)
        },
    }


def schema_path(data: Path) -> Path:
    """Where ``gen`` writes the schema of dataset ``data``: ``DIR.schema.json`` beside it."""
    return data.with_name(data.name + ".schema.json")


def write_file(
    path: Path, seed: int, first_row: int, n: int, columns: int, group_rows: int
) -> None:
    """Write rows ``first_row ..`` of the dataset into one Parquet file, a row group at a time."""
    writer = None
    try:
        for start in range(first_row, first_row + n, group_rows):
            size = min(group_rows, first_row + n - start)
            table = row_group_table(seed, start, size, columns)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=size)
    finally:
        if writer is not None:
            writer.close()


def generate(
    out: Path,
    *,
    rows: int,
    columns: int,
    seed: int = 0,
    file_rows: int = 10_000_000,
    group_rows: int = 1_000_000,
    force: bool = False,
) -> bool:
    """Write the synthetic dataset ``out`` and its schema; return False if it was kept.

    A directory holding the same manifest (rows, columns, seed, file and row-group sizes)
    is kept as it is. Memory stays at one row group, whatever ``rows``.
    """
    if rows < 1 or columns < 1 or file_rows < 1 or group_rows < 1:
        raise ValueError(
            f"rows, columns, file rows and row-group rows must be >= 1, "
            f"got {rows}, {columns}, {file_rows}, {group_rows}"
        )
    manifest = dataset_manifest(rows, columns, seed, file_rows, group_rows)
    if out.exists():
        if read_manifest(out) == manifest:
            return False
        if not force:
            raise FileExistsError(
                f"{out} exists but was not generated with these settings ({manifest}); "
                "remove it, choose another --out, or pass --force to replace its Parquet files"
            )
        clear_dataset(out)
    out.mkdir(parents=True, exist_ok=True)
    for index, first_row in enumerate(range(0, rows, file_rows)):
        n = min(file_rows, rows - first_row)
        write_file(out / f"part-{index:05d}.parquet", seed, first_row, n, columns, group_rows)
    schema_path(out).write_text(json.dumps(schema_document(columns), indent=2) + "\n")
    # Written last: a directory with a manifest is a complete dataset.
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return True


def read_manifest(data: Path) -> dict[str, Any] | None:
    """The manifest of a generated dataset, or None when there is none."""
    path = data / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def clear_dataset(data: Path) -> None:
    """Remove what ``gen`` writes in ``data`` (Parquet parts and manifest), nothing else."""
    for path in [*data.glob("part-*.parquet"), data / MANIFEST]:
        path.unlink(missing_ok=True)


def dataset_files(data: Path) -> list[Path]:
    """The Parquet files of dataset ``data`` in row order (a single file is its own list)."""
    if data.is_file():
        return [data]
    files = sorted(data.glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no *.parquet file in {data}: run `gen --out {data}` first")
    return files


def dataset_shape(data: Path) -> tuple[int, list[str]]:
    """Number of rows and column names, read from the Parquet footers only."""
    files = dataset_files(data)
    rows = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
    return rows, list(pq.ParquetFile(files[0]).schema_arrow.names)


# --------------------------------------------------------------------------- duckdb


@dataclass(frozen=True)
class IrDpJob:
    """The parameters of one ir_dp release: group size, budget, public bounds per column."""

    k: int
    epsilon: float
    bounds: dict[str, tuple[float, float]]
    noise: bool = True

    def scale(self, lower: float, upper: float) -> float:
        """Laplace scale per group mean: ``m * (upper - lower) / (k * epsilon)``."""
        return len(self.bounds) * (upper - lower) / (self.k * self.epsilon)


def read_bounds(schema: Path, names: Sequence[str]) -> dict[str, tuple[float, float]]:
    """The public bounds of every column in ``names``, read from a dpfast schema file."""
    declared = json.loads(schema.read_text())["columns"]
    bounds = {}
    for name in names:
        settings = declared.get(name)
        if settings is None or not isinstance(settings.get("bounds"), list):
            raise ValueError(
                f"column {name!r} has no numeric bounds in {schema}: declare it there as "
                '{"type": "float", "bounds": [lower, upper]}'
            )
        lower, upper = (float(b) for b in settings["bounds"])
        bounds[name] = (lower, upper)
    return bounds


def sql_string(value: object) -> str:
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def source_sql(files: Sequence[Path], names: Sequence[str]) -> str:
    """Every row of the dataset with a row id: its position in the files' order."""
    selects = []
    offset = 0
    quoted = ", ".join(f'"{name}"' for name in names)
    for path in files:
        selects.append(
            f"SELECT file_row_number + {offset} AS rid, {quoted} "
            f"FROM read_parquet({sql_string(path)}, file_row_number = true)"
        )
        offset += pq.ParquetFile(path).metadata.num_rows
    return "\nUNION ALL\n".join(selects)


def rank_sql(column: str, bounds: tuple[float, float], k: int, n_groups: int) -> str:
    """Clamp ``column``, rank it (ties by row id) and give each row its group id."""
    lower, upper = bounds
    return f"""
        SELECT rid, v,
               least((row_number() OVER (ORDER BY v, rid) - 1) // {k}, {n_groups - 1}) AS g
        FROM (SELECT rid, least(greatest("{column}", {lower!r}), {upper!r}) AS v FROM source)
    """


def release_sql(ranked: Path, bounds: tuple[float, float], scale: float) -> str:
    """Noisy group means joined back to the rows, in row-id order.

    Laplace noise by inversion, ``-scale * sign(u) * ln(1 - 2|u|)`` with ``u`` uniform on
    [-1/2, 1/2) from ``random()`` (NOT a secure source); the noisy mean is clamped to the
    bounds, as ir_dp does.
    """
    lower, upper = bounds
    noise = f"- {scale!r} * sign(u) * ln(greatest(1 - 2 * abs(u), 1e-300))" if scale > 0 else ""
    source = f"read_parquet({sql_string(ranked)})"
    return f"""
        WITH means AS (SELECT g, avg(v) AS mean, random() - 0.5 AS u FROM {source} GROUP BY g),
             noisy AS (SELECT g, least(greatest(mean {noise}, {lower!r}), {upper!r}) AS value
                       FROM means)
        SELECT r.rid, n.value FROM {source} r JOIN noisy n USING (g) ORDER BY r.rid
    """


def configure(connection: Any, *, memory_limit: str, threads: int, temp: Path) -> None:
    """Memory limit, spill directory and threads of a DuckDB connection."""
    connection.execute(f"SET memory_limit = {sql_string(memory_limit)}")
    connection.execute(f"SET temp_directory = {sql_string(temp / 'spill')}")
    connection.execute(f"SET threads = {int(threads)}")


def copy_to(connection: Any, query: str, path: Path, metadata: str = "") -> None:
    """``COPY (query) TO path`` as Parquet."""
    options = "FORMAT parquet" + (f", KV_METADATA {{{metadata}}}" if metadata else "")
    connection.execute(f"COPY ({query}) TO {sql_string(path)} ({options})")


def release_column(connection: Any, job: IrDpJob, column: str, n_rows: int, temp: Path) -> Path:
    """Release one column into ``temp/col-NAME.parquet`` (row id, value) in row-id order."""
    n_groups = max(n_rows // job.k, 1)
    bounds = job.bounds[column]
    ranked = temp / f"ranked-{column}.parquet"
    released = temp / f"col-{column}.parquet"
    # Unordered intermediate results may be written in any order; ORDER BY is still kept.
    connection.execute("SET preserve_insertion_order = false")
    copy_to(connection, rank_sql(column, bounds, job.k, n_groups), ranked)
    scale = job.scale(*bounds) if job.noise else 0.0
    copy_to(connection, release_sql(ranked, bounds, scale), released)
    ranked.unlink()
    return released


def assemble(connection: Any, columns: dict[str, Path], out: Path, noise: str) -> None:
    """Put the released columns side by side (all in row-id order) into ``out``."""
    # The positional join relies on each file being read back in its written order.
    connection.execute("SET preserve_insertion_order = true")
    names = list(columns)
    select = ", ".join(f'c{i}.value AS "{name}"' for i, name in enumerate(names))
    joins = " POSITIONAL JOIN ".join(
        f"read_parquet({sql_string(path)}) c{i}" for i, path in enumerate(columns.values())
    )
    metadata = f"noise_source: {sql_string(noise)}"
    copy_to(connection, f"SELECT {select} FROM {joins}", out, metadata)


def duckdb_ir_dp(
    data: Path,
    out: Path,
    job: IrDpJob,
    *,
    memory_limit: str = "4GiB",
    threads: int = 2,
    seed: float | None = None,
) -> dict[str, Any]:
    """Run the naive out-of-core ir_dp job in DuckDB SQL; return a summary.

    Per column: clamp to the public bounds, ``row_number() OVER (ORDER BY value, row id)``,
    group id ``least(rank // k, n_groups - 1)`` (the remainder joins the last group), group
    means, Laplace noise per group of scale ``m * (upper - lower) / (k * epsilon)``, clamp,
    join back to the rows by row id; each column goes to its own Parquet file in row-id
    order, and a positional join writes ``out`` (one row per input row, in input order,
    the columns' values kept on their rows: no shuffle).

    The noise comes from DuckDB's ``random()``, which is NOT a cryptographically secure
    source (nor reproducible with several threads, even with ``seed``): the job is a
    baseline for speed only. ``job.noise=False`` releases the exact group means (tests).
    Spill files and intermediates live in a directory beside ``out``, removed at the end.
    """
    import duckdb

    n_rows, names = dataset_shape(data)
    noise = NOT_SECURE if job.noise else "none (no noise: exact group means, for testing)"
    missing = [name for name in names if name not in job.bounds]
    if missing:
        raise ValueError(f"columns {missing} have no bounds: declare them in the schema")
    out.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{out.name}.duckdb-", dir=out.parent))
    started = time.perf_counter()
    try:
        connection = duckdb.connect()
        configure(connection, memory_limit=memory_limit, threads=threads, temp=temp)
        if seed is not None:
            connection.execute("SELECT setseed(?)", [seed])
        connection.execute(f"CREATE VIEW source AS {source_sql(dataset_files(data), names)}")
        columns = {name: release_column(connection, job, name, n_rows, temp) for name in names}
        assemble(connection, columns, out, noise)
        connection.close()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return {
        "job": "duckdb ir_dp",
        "rows": n_rows,
        "columns": len(names),
        "k": job.k,
        "epsilon": job.epsilon,
        "noise": noise,
        "seconds": time.perf_counter() - started,
        "memory_limit": memory_limit,
        "threads": threads,
        "duckdb": duckdb.__version__,
        "out": str(out),
    }


def numpy_ir_dp_exact(values: np.ndarray, k: int, lower: float, upper: float) -> np.ndarray:
    """The noise-free reference of one column: what ``duckdb_ir_dp`` releases without noise.

    Ties are ranked by row position (a stable sort), as the SQL orders by row id.
    """
    column = np.clip(values, lower, upper)
    n = len(column)
    order = np.argsort(column, kind="stable")
    groups = np.minimum(np.arange(n) // k, max(n // k, 1) - 1)
    means = np.bincount(groups, weights=column[order]) / np.bincount(groups)
    out = np.empty(n)
    out[order] = means[groups]
    return out


# --------------------------------------------------------------------------- measure


def children_map() -> dict[int, list[int]]:
    """Every process's children, from /proc/PID/stat (the parent pid is field 4)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after it.
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    return children


def tree_rss(root: int) -> int:
    """Resident bytes of process ``root`` and all its descendants (0 once they are gone)."""
    children = children_map()
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    pending = [root]
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
                total += int(handle.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (first line of /proc/stat)."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(value) for value in handle.readline().split()[1:9]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """User and system CPU seconds of the children this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_for_quiet(timeout: float, *, window: float = 5.0, max_busy: float = 0.2) -> bool:
    """Wait until the machine used under ``max_busy`` cores over ``window`` seconds.

    Return False if ``timeout`` seconds passed first (the run then goes ahead, and its
    ``other_cpu_s`` shows the contention).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = busy_cpu_seconds()
        time.sleep(window)
        if (busy_cpu_seconds() - before) / window < max_busy:
            return True
    return False


def measure(command: Sequence[str], **popen: Any) -> dict[str, Any]:
    """Run ``command``; return its exit code, wall seconds, CPU seconds and peak memory.

    ``peak_rss_tree_bytes`` is the largest sum of the resident memory of the child and its
    descendants, polled every 50 ms (a peak shorter than that can be missed);
    ``maxrss_children_bytes`` is ``getrusage(RUSAGE_CHILDREN).ru_maxrss``, the largest
    single process among the children this process has waited for (run ``measure`` in a
    fresh process, as the ``measure`` command does, so that no earlier child counts).
    ``peak_rss_bytes`` is the larger of the two.

    ``cpu_s`` is the CPU time of the command (its waited-for descendants included) and
    ``other_cpu_s`` the CPU time the rest of the machine used meanwhile: well above zero,
    something else competed for the cores and the wall time is not clean.
    """
    cpu_before, busy_before = children_cpu_seconds(), busy_cpu_seconds()
    started = time.perf_counter()
    process = subprocess.Popen(list(command), **popen)
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        time.sleep(POLL_SECONDS)
    wall = time.perf_counter() - started
    cpu = children_cpu_seconds() - cpu_before
    maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {
        "command": list(command),
        "returncode": process.returncode,
        "wall_s": wall,
        "cpu_s": cpu,
        "other_cpu_s": max(busy_cpu_seconds() - busy_before - cpu, 0.0),
        "peak_rss_bytes": max(peak, maxrss),
        "peak_rss_tree_bytes": peak,
        "maxrss_children_bytes": maxrss,
        "cpus": os.cpu_count(),
    }


# --------------------------------------------------------------------------- run


@dataclass(frozen=True)
class RunSettings:
    """What every job of a ``run`` receives: the data, its schema, the release parameters."""

    data: Path
    schema: Path
    k: int
    epsilon: float
    memory_limit: str
    threads: int


# A job turns the settings and an output path into the command that does the release.
JobCommand = Callable[[RunSettings, Path], list[str]]
JOBS: dict[str, JobCommand] = {}


def job(name: str) -> Callable[[JobCommand], JobCommand]:
    """Register a job under ``name`` for ``run --jobs``."""

    def register(command: JobCommand) -> JobCommand:
        JOBS[name] = command
        return command

    return register


@job("duckdb")
def duckdb_command(settings: RunSettings, out: Path) -> list[str]:
    """The DuckDB baseline, run by this script in its own process."""
    return [
        sys.executable, __file__, "duckdb", "--data", str(settings.data), "--out", str(out),
        "--schema", str(settings.schema), "--k", str(settings.k),
        "--epsilon", repr(settings.epsilon), "--memory-limit", settings.memory_limit,
        "--threads", str(settings.threads),
    ]  # fmt: skip


@job("dpfast")
def dpfast_command(settings: RunSettings, out: Path) -> list[str]:
    """dpfast's out-of-core engine through its command line."""
    return [
        sys.executable, "-m", "dpfast", "release", "ir-dp", str(settings.data), "-o", str(out),
        "--k", str(settings.k), "--epsilon", repr(settings.epsilon),
        "--schema", str(settings.schema), "--seed", "1",
        "--memory-limit", settings.memory_limit, "--force",
    ]  # fmt: skip


@job("floor")
def floor_command(settings: RunSettings, out: Path) -> list[str]:
    """The floor (``floor``), run by this script in its own process."""
    return [
        sys.executable, __file__, "floor", "--data", str(settings.data), "--out", str(out),
        "--schema", str(settings.schema), "--k", str(settings.k),
    ]  # fmt: skip


def floor(data: Path, out: Path, schema: Path, k: int) -> dict[str, float]:
    """Read, sort and write every column once, one column at a time; return seconds by step.

    Each column is read whole with pyarrow, quantised to the grid ``ir_dp`` uses
    (``Grid.for_column``) and sorted by ``radix_sort_packed`` on its key bits, as dpfast
    sorts a column that fits in memory; the column is then written as one Parquet file
    under ``out``, float64 in zstd without a dictionary, as dpfast writes a release. A
    column must fit in memory (three times its values at the peak).
    """
    from dpfast._kernels import ranking
    from dpfast.partitions.grid import Grid

    files = [str(path) for path in dataset_files(data)]
    n_rows, names = dataset_shape(data)
    bounds = read_bounds(schema, names)
    out.mkdir(parents=True, exist_ok=True)
    seconds = {"read": 0.0, "sort": 0.0, "write": 0.0}
    for name in names:
        start = time.perf_counter()
        values = pq.read_table(files, columns=[name]).column(0).to_numpy()
        read = time.perf_counter()
        grid = Grid.for_column(*bounds[name], n_rows, k)
        keys, _ = ranking.quantise_column(
            values, grid.lower, grid.upper, grid.gamma, grid.d_int, grid.warp
        )
        ranking.radix_sort_packed(keys, 0, max(1, grid.d_int.bit_length()))
        del keys
        sort = time.perf_counter()
        # the input's values, in their order: a release's bytes are in a random order too,
        # and sorted values would compress far better than any release
        pq.write_table(
            pa.table({name: values}), out / f"{name}.parquet", compression="zstd",
            use_dictionary=False,
        )  # fmt: skip
        del values
        seconds["read"] += read - start
        seconds["sort"] += sort - read
        seconds["write"] += time.perf_counter() - sort
    return seconds


def measured_run(command: list[str], log: Path) -> dict[str, Any]:
    """Measure ``command`` in a fresh ``measure`` process; keep the tail of its stderr."""
    record = log.with_suffix(".jsonl")
    record.unlink(missing_ok=True)
    wrapper = [sys.executable, __file__, "measure", "--json", str(record), "--", *command]
    with open(log, "w") as handle:
        subprocess.run(wrapper, stdout=handle, stderr=subprocess.STDOUT, check=False)
    output = log.read_text(errors="replace")
    if not record.is_file():
        return {"command": command, "returncode": -1, "error": output[-4000:]}
    result: dict[str, Any] = json.loads(record.read_text().splitlines()[-1])
    if result["returncode"] != 0:
        result["error"] = output[-4000:]
    return result


def summarise(name: str, runs: list[dict[str, Any]], table_bytes: int) -> dict[str, Any]:
    """Medians of the successful runs of one job, or its error when one failed.

    ``ns_per_value`` (median wall nanoseconds per released value, ``table_bytes / 8``
    values) is what should stay flat as the table grows. On a shared machine the fastest
    run (``wall_s_min``) with the least ``other_cpu_s`` is the cleanest figure.
    """
    failed = [run for run in runs if run["returncode"] != 0]
    if failed:
        return {"job": name, "ok": False, "error": failed[0].get("error", ""), "runs": runs}
    wall = statistics.median(run["wall_s"] for run in runs)
    cpu = statistics.median(run["cpu_s"] for run in runs)
    peak = statistics.median(run["peak_rss_bytes"] for run in runs)
    return {
        "job": name,
        "ok": True,
        "repeat": len(runs),
        "wall_s_median": wall,
        "wall_s_min": min(run["wall_s"] for run in runs),
        "cpu_s_median": cpu,
        "other_cpu_s_max": max(run["other_cpu_s"] for run in runs),
        "peak_rss_bytes_median": peak,
        "peak_over_table": peak / table_bytes,
        "ns_per_value": wall * 1e9 / (table_bytes // 8),
        "runs": runs,
    }


def run_jobs(
    settings: RunSettings, names: Sequence[str], repeat: int, work: Path, quiet_wait: float = 0.0
) -> dict[str, Any]:
    """Run each job ``repeat`` times one after the other; return the results document.

    With ``quiet_wait`` > 0, each run first waits up to that many seconds for the machine
    to be idle (``wait_for_quiet``).
    """
    unknown = [name for name in names if name not in JOBS]
    if unknown:
        raise ValueError(f"unknown jobs {unknown}: choose among {sorted(JOBS)}")
    n_rows, columns = dataset_shape(settings.data)
    table_bytes = n_rows * len(columns) * 8
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for name in names:
        runs = []
        for attempt in range(repeat):
            out = work / f"{name}-released.parquet"
            if quiet_wait > 0 and not wait_for_quiet(quiet_wait):
                print(f"{name}: the machine stayed busy, measuring anyway", file=sys.stderr)
            run = measured_run(JOBS[name](settings, out), work / f"{name}-{attempt}.log")
            remove(out)
            runs.append(run)
            print(describe(name, run, table_bytes), file=sys.stderr, flush=True)
            if run["returncode"] != 0:
                break
        results.append(summarise(name, runs, table_bytes))
    return {
        "data": str(settings.data),
        "rows": n_rows,
        "columns": len(columns),
        "table_bytes": table_bytes,
        "k": settings.k,
        "epsilon": settings.epsilon,
        "memory_limit": settings.memory_limit,
        "threads": settings.threads,
        "cpus": os.cpu_count(),
        "memory_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "duckdb_noise": NOT_SECURE,
        "jobs": results,
    }


def remove(path: Path) -> None:
    """Remove a released file or directory, if there is one."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def describe(name: str, run: dict[str, Any], table_bytes: int) -> str:
    """One line for the terminal about a measured run."""
    if run["returncode"] != 0:
        return f"{name}: FAILED (exit {run['returncode']}):\n{run.get('error', '')}"
    peak = run["peak_rss_bytes"]
    return (
        f"{name}: {run['wall_s']:.1f} s ({run['cpu_s']:.1f} CPU s; others used "
        f"{run['other_cpu_s']:.1f} CPU s meanwhile), peak RSS {peak / 2**30:.2f} GiB "
        f"= {peak / table_bytes:.2f} x the table"
    )


# --------------------------------------------------------------------------- command line


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1, underscores allowed (``10_000_000``)."""
    value = int(text.replace("_", ""))
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    main = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = main.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("gen", help="write a synthetic Parquet dataset and its schema")
    gen.add_argument("--rows", type=positive_int, required=True)
    gen.add_argument("--columns", type=positive_int, required=True)
    gen.add_argument("--out", type=Path, required=True, help="dataset directory")
    gen.add_argument("--file-rows", type=positive_int, default=10_000_000)
    gen.add_argument("--row-group-rows", type=positive_int, default=1_000_000)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--force", action="store_true", help="replace a different dataset")

    duck = commands.add_parser("duckdb", help="the ir_dp job in DuckDB SQL (insecure noise)")
    duck.add_argument("--data", type=Path, required=True)
    duck.add_argument("--out", type=Path, required=True, help="released Parquet file")
    duck.add_argument("--schema", type=Path, help="dpfast schema (default DATA.schema.json)")
    duck.add_argument("--k", type=positive_int, required=True)
    duck.add_argument("--epsilon", type=float, required=True)
    duck.add_argument("--memory-limit", default="4GiB")
    duck.add_argument("--threads", type=positive_int, default=2)
    duck.add_argument("--seed", type=float, help="setseed() in [0, 1]; not reproducible")
    duck.add_argument("--no-noise", action="store_true", help="exact group means (testing)")

    low = commands.add_parser("floor", help="read, radix-sort and write each column once")
    low.add_argument("--data", type=Path, required=True)
    low.add_argument("--out", type=Path, required=True, help="directory of sorted columns")
    low.add_argument("--schema", type=Path, help="dpfast schema (default DATA.schema.json)")
    low.add_argument("--k", type=positive_int, default=10)

    meas = commands.add_parser("measure", help="wall time and peak RSS of a command")
    meas.add_argument("--json", type=Path, help="append the JSON line to this file, not stdout")
    meas.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ...")

    run = commands.add_parser("run", help="measure jobs on a dataset, write the medians")
    run.add_argument("--data", type=Path, required=True)
    run.add_argument("--jobs", default="duckdb", help=f"comma-separated, among {sorted(JOBS)}")
    run.add_argument("--repeat", type=positive_int, default=1)
    run.add_argument("--json", type=Path, required=True, help="results file")
    run.add_argument("--schema", type=Path, help="dpfast schema (default DATA.schema.json)")
    run.add_argument("--k", type=positive_int, default=10)
    run.add_argument("--epsilon", type=float, default=1.0)
    run.add_argument("--memory-limit", default="4GiB")
    run.add_argument("--threads", type=positive_int, default=2)
    run.add_argument("--work", type=Path, help="outputs and logs (default DATA.runs/)")
    run.add_argument(
        "--quiet-wait", type=float, default=0.0, metavar="SECONDS",
        help="before each run, wait up to SECONDS for the machine to be idle (shared machines)",
    )  # fmt: skip
    return main


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return the exit code."""
    args = parser().parse_args(argv)
    if args.command == "gen":
        made = generate(
            args.out, rows=args.rows, columns=args.columns, seed=args.seed,
            file_rows=args.file_rows, group_rows=args.row_group_rows, force=args.force,
        )  # fmt: skip
        print(f"{'wrote' if made else 'kept (same manifest)'} {args.out}")
        return 0
    if args.command == "duckdb":
        schema = args.schema or schema_path(args.data)
        bounds = read_bounds(schema, dataset_shape(args.data)[1])
        job = IrDpJob(k=args.k, epsilon=args.epsilon, bounds=bounds, noise=not args.no_noise)
        summary = duckdb_ir_dp(
            args.data, args.out, job,
            memory_limit=args.memory_limit, threads=args.threads, seed=args.seed,
        )  # fmt: skip
        print(json.dumps(summary))
        return 0
    if args.command == "floor":
        steps = floor(args.data, args.out, args.schema or schema_path(args.data), args.k)
        print(json.dumps({"seconds": steps}))
        return 0
    if args.command == "measure":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not command:
            raise SystemExit("measure: give the command after --: measure -- CMD ...")
        result = measure(command)
        line = json.dumps(result)
        if args.json:
            with open(args.json, "a") as handle:
                handle.write(line + "\n")
        else:
            print(line, flush=True)
        return 0 if result["returncode"] == 0 else 1
    settings = RunSettings(
        data=args.data, schema=args.schema or schema_path(args.data), k=args.k,
        epsilon=args.epsilon, memory_limit=args.memory_limit, threads=args.threads,
    )  # fmt: skip
    work = args.work or args.data.with_name(args.data.name + ".runs")
    results = run_jobs(settings, args.jobs.split(","), args.repeat, work, args.quiet_wait)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(entry["ok"] for entry in results["jobs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
