"""Spark benchmark: dpfast's ir_dp on Spark against the naive job in plain PySpark.

Issue 15 asks that dpfast on Spark be at least 5x faster than plain PySpark doing the
naive ir_dp job on the same local cluster and the same Parquet data, and that
``local[2]`` be at least 1.6x faster than ``local[1]``. This script runs each side in its
own process and measures it with ``benchmarks/outofcore.py``'s ``measure`` (wall time,
CPU time, the CPU the rest of the machine used meanwhile, and the peak resident memory of
the whole process tree: the Python driver, the JVM and the Python workers).

``naive --variant window|partitioned``
    The naive job in PySpark, as a user would write it. Per column: clamp to the public
    bounds, rank by (value, row id), group id ``least((rank - 1) // k, n // k - 1)``,
    group means, Laplace noise per group, joined back to the rows on the group id.
    ``window`` ranks with ``row_number().over(Window.orderBy(value, rid))``, which Spark
    runs in ONE partition (it warns so); ``partitioned`` sorts with ``orderBy`` (range
    partitions) and ranks each partition with a window partitioned by the partition id,
    plus the counts of the partitions before it. The noise comes from Spark's ``rand()``,
    which is NOT a cryptographically secure source: a baseline for speed only, never
    publish its output.
``dpfast``
    ``dpfast.ir_dp(source, ..., output=...)`` on the Spark engine on the same data, with
    ``--profile FILE`` timing its passes: the Spark jobs (executor work, pickling and the
    transfer of the results to the driver), the time of the engine's functions on the
    executors, the bytes they send back, and the driver's own work.
``run``
    Run the jobs (``dpfast-local1``, ``dpfast-1cpu``: ``local[1]`` pinned to one CPU,
    ``dpfast-local2``, ``naive-window``, ``naive-partitioned``) ``--repeat`` times each,
    one after the other, and write the medians and the ratios the issue targets to a
    JSON file.

Every memory figure is quoted as a multiple of the in-memory table,
``n_rows * n_columns * 8`` bytes. The data comes from ``outofcore.py gen``. See
``docs/engines.md`` ("Benchmarks on Spark").

Examples
--------
::

    python benchmarks/outofcore.py gen --rows 2_000_000 --columns 4 --out /data/r2m_c4
    python benchmarks/spark.py run --data /data/r2m_c4 --repeat 3 --json s13-spark-r2m.json
    python benchmarks/spark.py naive --data /data/r2m_c4 --out /data/naive --variant window
    python benchmarks/spark.py dpfast --data /data/r2m_c4 --out /data/dp --master 'local[2]'
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import resource
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import outofcore

NOT_SECURE = (
    "noise drawn from Spark's rand(), which is NOT a cryptographically secure source: "
    "a baseline for speed only, never publish this output"
)
VARIANTS = ("window", "partitioned")
#: Spark's local cluster: two executors of one core and 2 GiB, each a JVM of its own.
CLUSTER_MASTER = "local-cluster[2,1,2048]"
#: The issue's targets: dpfast against the naive job, and local[2] against local[1].
TARGET_SPEEDUP = 5.0
TARGET_SCALING = 1.6


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class SessionSettings:
    """What every job's Spark session gets: master, driver memory, shuffle partitions."""

    master: str = "local[2]"
    driver_memory: str = "2g"
    shuffle_partitions: int = 8

    def config(self) -> dict[str, str]:
        """The Spark settings shared by the naive job and dpfast's session."""
        return {
            "spark.driver.memory": self.driver_memory,
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        }

    def arguments(self) -> list[str]:
        """The command-line options that give these settings to a subcommand."""
        return [
            "--master", self.master, "--driver-memory", self.driver_memory,
            "--shuffle-partitions", str(self.shuffle_partitions),
        ]  # fmt: skip


def plain_session(settings: SessionSettings, app_name: str) -> Any:
    """A SparkSession as a PySpark user would build it (the workers run this Python)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(settings.master).appName(app_name)
    for key, value in {**settings.config(), "spark.pyspark.python": sys.executable}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# --------------------------------------------------------------------------- naive job


def laplace_noise(scale: float, seed: int) -> Any:
    """A Laplace(0, scale) draw by inversion from Spark's ``rand(seed)`` (NOT secure).

    ``-scale * sign(u) * ln(1 - 2|u|)`` with ``u = rand() - 1/2``; zero when ``scale`` is 0.
    """
    from pyspark.sql import functions as F

    if scale <= 0:
        return F.lit(0.0)
    u = F.rand(seed) - F.lit(0.5)
    return -F.lit(scale) * F.signum(u) * F.log(F.greatest(1 - 2 * F.abs(u), F.lit(1e-300)))


def clamped(column: str, bounds: tuple[float, float]) -> Any:
    """``column`` clamped to its public bounds."""
    from pyspark.sql import functions as F

    lower, upper = bounds
    return F.least(F.greatest(F.col(column), F.lit(lower)), F.lit(upper))


def window_ranks(frame: Any, value: str) -> Any:
    """``frame`` with ``_rank``: ``row_number() OVER (ORDER BY value, rid)`` (one partition)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    return frame.withColumn("_rank", F.row_number().over(Window.orderBy(value, "rid")))


def partitioned_ranks(frame: Any, value: str) -> Any:
    """``frame`` with ``_rank`` from a range-partitioned sort and per-partition counts.

    ``orderBy`` range-partitions the rows (its bounds come from a sample, so the sorted
    frame is checkpointed once: the counts and the ranks must see the same partitions);
    each partition's rows are numbered by a window partitioned by the partition id, and
    a partition's first rank is the count of the rows of the partitions before it.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = frame.orderBy(value, "rid").withColumn("_pid", F.spark_partition_id())
    ordered = ordered.localCheckpoint()
    counts = ordered.groupBy("_pid").count().collect()
    offsets, total = [], 0
    for row in sorted(counts, key=lambda row: row["_pid"]):
        offsets.append((int(row["_pid"]), total))
        total += int(row["count"])
    spark = frame.sparkSession
    offset_frame = spark.createDataFrame(offsets, "_pid int, _offset long")
    local = F.row_number().over(Window.partitionBy("_pid").orderBy(value, "rid"))
    ranked = ordered.withColumn("_local", local).join(F.broadcast(offset_frame), "_pid")
    return ranked.withColumn("_rank", F.col("_offset") + F.col("_local")).drop(
        "_pid", "_offset", "_local"
    )


RANKS: dict[str, Callable[[Any, str], Any]] = {
    "window": window_ranks,
    "partitioned": partitioned_ranks,
}


def naive_release(
    spark: Any,
    data: Path,
    out: Path,
    job: outofcore.IrDpJob,
    *,
    variant: str = "window",
    seed: int = 0,
) -> dict[str, Any]:
    """Run the naive ir_dp job in PySpark on ``data``; write Parquet to ``out``.

    Rows get an id from ``monotonically_increasing_id()``, the usual PySpark idiom. Each
    column in turn is clamped, ranked by (value, row id) as ``variant`` says, cut into
    groups of ``k`` (the remainder joins the last group), averaged per group, noised by
    :func:`laplace_noise` (Spark's ``rand()``: NOT secure), clamped and joined back to
    the rows on the group id; the frame is checkpointed after each column so that the
    plan does not grow with the columns. The output keeps the rows' linkage (no shuffle).
    ``job.noise=False`` releases the exact group means (tests).
    """
    from pyspark.sql import functions as F

    if variant not in RANKS:
        raise ValueError(f"unknown variant {variant!r}: choose among {', '.join(VARIANTS)}")
    started = time.perf_counter()
    frame = spark.read.parquet(str(data))
    names = list(frame.columns)
    missing = [name for name in names if name not in job.bounds]
    if missing:
        raise ValueError(f"columns {missing} have no bounds: declare them in the schema")
    frame = frame.withColumn("rid", F.monotonically_increasing_id()).localCheckpoint()
    n_rows = frame.count()
    n_groups = max(n_rows // job.k, 1)
    for index, name in enumerate(names):
        bounds = job.bounds[name]
        value = f"_v_{name}"
        ranked = RANKS[variant](frame.withColumn(value, clamped(name, bounds)), value)
        group = F.least(F.floor((F.col("_rank") - 1) / job.k), F.lit(n_groups - 1))
        ranked = ranked.withColumn("_g", group.cast("long")).drop("_rank")
        scale = job.scale(*bounds) if job.noise else 0.0
        means = ranked.groupBy("_g").agg(F.avg(value).alias("_mean"))
        noisy = F.col("_mean") + laplace_noise(scale, seed + index)
        means = means.withColumn("_released", clamped_expr(noisy, bounds)).drop("_mean")
        joined = ranked.join(means, "_g").withColumn(name, F.col("_released"))
        frame = joined.drop("_g", "_released", value).localCheckpoint()
    frame.select(*names).write.mode("overwrite").parquet(str(out))
    return {
        "job": f"naive PySpark ir_dp ({variant})",
        "rows": n_rows,
        "columns": len(names),
        "k": job.k,
        "epsilon": job.epsilon,
        "noise": NOT_SECURE if job.noise else "none (no noise: exact group means, for testing)",
        "seconds": time.perf_counter() - started,
        "out": str(out),
    }


def clamped_expr(expression: Any, bounds: tuple[float, float]) -> Any:
    """``expression`` clamped to ``bounds``."""
    from pyspark.sql import functions as F

    lower, upper = bounds
    return F.least(F.greatest(expression, F.lit(lower)), F.lit(upper))


# --------------------------------------------------------------------------- dpfast job


class Profile:
    """Times of the Spark jobs, of the engine's functions on the executors, and the driver.

    :meth:`source` wraps a ``SparkSource`` so that every ``map_column`` is one timed
    Spark job (planning, executors, pickling, transfer and collection), and every call of
    the engine's function on an executor sends back its seconds, rows and pickled bytes;
    every ``sort_ranges`` (a column's sort on the executors) is one timed job too.
    """

    def __init__(self) -> None:
        self.passes: list[dict[str, Any]] = []
        self.floor: dict[str, float] = {}
        self.timings: dict[str, float] = {}

    def source(self, frame: Any) -> Any:
        """A ``SparkSource`` of ``frame`` whose passes are recorded in this profile."""
        from dpfast.engines.outofcore._work import result_bytes
        from dpfast.engines.spark import SparkSource

        profile = self

        class TimedSource(SparkSource):  # type: ignore[misc]
            def map_column(self, name: str, batch_rows: int, fn: Callable[..., Any]) -> Any:
                started = time.perf_counter()
                results = list(super().map_column(name, batch_rows, _timed(fn)))
                profile.passes.append(
                    {
                        "column": name,
                        "kind": "pass",
                        "start_s": started,
                        "job_s": time.perf_counter() - started,
                        "batches": len(results),
                        "executor_fn_s": sum(r[1] for r in results),
                        "rows": sum(r[2] for r in results),
                        "result_bytes": sum(r[3] for r in results),
                    }
                )
                return iter([r[0] for r in results])

            def sort_ranges(
                self, name: str, batch_rows: int, keys: Any, ranges: Any, bits: int, reduce: Any
            ) -> Any:
                started = time.perf_counter()
                results = super().sort_ranges(name, batch_rows, keys, ranges, bits, reduce)
                profile.passes.append(
                    {
                        "column": name,
                        "kind": "sort",  # one job: keys, shuffle by range, sorted sums
                        "start_s": started,
                        "job_s": time.perf_counter() - started,
                        "batches": len(ranges),
                        "executor_fn_s": float("nan"),  # not timed inside the tasks
                        # each result is (the range's rows, its reduction): the engine's
                        # counters wrap the reduction (dpfast/engines/outofcore/_work.py)
                        "rows": sum(int(r[0]) for r in results),
                        "result_bytes": sum(result_bytes(r[1]) for r in results),
                    }
                )
                return results

        return TimedSource(frame)

    def summary(self, total_s: float) -> dict[str, Any]:
        """Totals over the passes, and the driver's share of the wall time.

        The engine runs columns in threads, so passes overlap: ``spark_wall_s`` is the
        wall time during which at least one pass ran, and ``driver_s`` the rest.
        """
        busy = union_length([(p["start_s"], p["start_s"] + p["job_s"]) for p in self.passes])
        return {
            "total_s": total_s,
            "passes": len(self.passes),
            "spark_jobs_s": sum(p["job_s"] for p in self.passes),
            "spark_wall_s": busy,
            "executor_fn_s": sum(p["executor_fn_s"] for p in self.passes if p["kind"] == "pass"),
            "result_bytes": sum(p["result_bytes"] for p in self.passes),
            "driver_s": total_s - busy,
            "engine_timings_s": self.timings,
            "floor_pass_s": self.floor,
            "per_pass": self.passes,
        }


def union_length(intervals: Sequence[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def spark_floor(frame: Any) -> dict[str, float]:
    """Seconds of one plain ``mapInArrow`` pass per column that only counts the rows.

    Run before dpfast's release, in fresh Python workers that never import dpfast: what
    Spark itself costs for one pass (scheduling, the Parquet scan, the Arrow transfer to
    the Python workers, the results' way back), to compare with dpfast's passes.
    """
    import pyarrow as pa

    def count(batches: Any) -> Any:
        rows = sum(batch.num_rows for batch in batches)
        yield pa.RecordBatch.from_arrays([pa.array([rows], pa.int64())], names=["rows"])

    seconds = {}
    for name in frame.columns:
        started = time.perf_counter()
        with warnings.catch_warnings():  # pyspark's warning of pandas >= 3 (Arrow path)
            warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
            planned = frame.select(name).mapInArrow(count, "rows long")
        planned.collect()
        seconds[name] = time.perf_counter() - started
    return seconds


def _timed(fn: Callable[[Any, int], Any]) -> Callable[[Any, int], Any]:
    """``fn`` returning ``(result, seconds, rows, pickled bytes of the result)``."""

    def timed(array: Any, first_row: int) -> tuple[Any, float, int, int]:
        started = time.perf_counter()
        result = fn(array, first_row)
        seconds = time.perf_counter() - started
        return result, seconds, len(array), len(pickle.dumps(result, protocol=5))

    return timed


def dpfast_release(
    spark: Any,
    data: Path,
    out: Path,
    job: outofcore.IrDpJob,
    *,
    memory_limit: str = "4GiB",
    profile: Profile | None = None,
) -> dict[str, Any]:
    """Run ``dpfast.ir_dp`` on Spark over ``data`` (seed 1) into ``out``; return a summary."""
    import dpfast
    from dpfast.engines.spark import SparkSource

    started = time.perf_counter()
    if profile is None:  # as the CLI runs it: the executors compute and write the release
        release = dpfast.ir_dp(
            SparkSource.from_parquet(spark, data), k=job.k, epsilon=job.epsilon,
            bounds=job.bounds, seed=1, memory_limit=memory_limit,
            output=out.with_suffix("") if out.suffix == ".parquet" else out,
        )  # fmt: skip
        report = release.report
        work = release.private.to_dict().get("work")
    else:
        frame = spark.read.parquet(str(data))  # the profile times Spark's own reader
        floor = spark_floor(frame)
        started = time.perf_counter()
        release = dpfast.ir_dp(
            profile.source(frame), k=job.k, epsilon=job.epsilon, bounds=job.bounds, seed=1,
            engine="outofcore", output=out, memory_limit=memory_limit,
        )  # fmt: skip
        report = release.report
        work = release.private.to_dict().get("work")
        profile.floor, profile.timings = floor, dict(release.private.timings)
    seconds = time.perf_counter() - started
    summary = {
        "job": "dpfast ir_dp on Spark",
        "k": job.k,
        "epsilon": job.epsilon,
        "seconds": seconds,
        "epsilon_spent": report.to_dict().get("epsilon_spent"),
        "out": str(out),
        "work": work,  # the private report's counters (docs/scale.md#counters)
    }
    if profile is not None:
        summary["profile"] = profile.summary(seconds)
    return summary


# --------------------------------------------------------------------------- measure


def tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Record in ``seen`` the CPU seconds of ``root`` and each of its descendants so far.

    A Spark job's JVM and Python workers are not waited for by the process that measures
    them, so ``getrusage`` misses their CPU time: it is read from ``/proc/PID/stat``
    (user and system time, fields 14 and 15) at every poll, and the last value seen per
    process is kept (a process's last 50 ms can be missed).
    """
    children = outofcore.children_map()
    ticks = os.sysconf("SC_CLK_TCK")
    pending = [root]
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        seen[pid] = (int(fields[11]) + int(fields[12])) / ticks


def measure(command: Sequence[str], cpus: int | None = None) -> dict[str, Any]:
    """``outofcore.measure`` with the CPU time of the whole process tree.

    As :func:`outofcore.measure` (wall time, peak RSS of the tree, the machine's busy CPU),
    plus ``tree_cpu_s``, the CPU seconds of the command and all its descendants (the JVM
    and the Python workers included), and ``other_cpu_s`` computed from it: the CPU time
    the rest of the machine used meanwhile. ``cpus`` pins the command (and so every
    process it starts) to the machine's first ``cpus`` CPUs (Linux).
    """
    pinned = None
    if cpus is not None:
        allowed = sorted(os.sched_getaffinity(0))
        if not 1 <= cpus <= len(allowed):
            raise SystemExit(f"measure: --cpus must be 1 to {len(allowed)}, got {cpus}")
        pinned = set(allowed[:cpus])
    cpu_before = outofcore.children_cpu_seconds()
    busy_before = outofcore.busy_cpu_seconds()
    started = time.perf_counter()
    process = subprocess.Popen(
        list(command),
        preexec_fn=None if pinned is None else lambda: os.sched_setaffinity(0, pinned),
    )
    peak, seen = 0, dict[int, float]()
    while process.poll() is None:
        peak = max(peak, outofcore.tree_rss(process.pid))
        tree_cpu(process.pid, seen)
        time.sleep(outofcore.POLL_SECONDS)
    wall = time.perf_counter() - started
    cpu = max(outofcore.children_cpu_seconds() - cpu_before, sum(seen.values()))
    maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {
        "command": list(command),
        "returncode": process.returncode,
        "wall_s": wall,
        "cpu_s": cpu,
        "tree_cpu_s": sum(seen.values()),
        "other_cpu_s": max(outofcore.busy_cpu_seconds() - busy_before - cpu, 0.0),
        "peak_rss_bytes": max(peak, maxrss),
        "peak_rss_tree_bytes": peak,
        "maxrss_children_bytes": maxrss,
        "cpus": os.cpu_count(),
        "pinned_cpus": cpus,
    }


def measured_run(command: list[str], log: Path, cpus: int | None = None) -> dict[str, Any]:
    """Measure ``command`` in a fresh ``measure`` process; keep the tail of its output."""
    record = log.with_suffix(".jsonl")
    record.unlink(missing_ok=True)
    pin = [] if cpus is None else ["--cpus", str(cpus)]
    wrapper = [sys.executable, __file__, "measure", "--json", str(record), *pin, "--", *command]
    with open(log, "w") as handle:
        subprocess.run(wrapper, stdout=handle, stderr=subprocess.STDOUT, check=False)
    output = log.read_text(errors="replace")
    if not record.is_file():
        return {"command": command, "returncode": -1, "error": output[-4000:]}
    result: dict[str, Any] = json.loads(record.read_text().splitlines()[-1])
    if result["returncode"] != 0:
        result["error"] = output[-4000:]
    return result


# --------------------------------------------------------------------------- run


@dataclass(frozen=True)
class JobSpec:
    """One measured job: the subcommand, its own options, and the CPUs it may use."""

    name: str
    arguments: tuple[str, ...]
    cpus: int | None = None  # None: every CPU of the machine


def job_specs(master_cores: int = 2) -> dict[str, JobSpec]:
    """The jobs of ``run``: dpfast on local[1], local[2] and a local cluster, the naive jobs.

    ``dpfast-1cpu`` is ``local[1]`` pinned to one CPU: unpinned, ``local[1]``'s one task
    slot keeps more than one core busy (the JVM's task thread and the thread feeding its
    Python worker, the worker, the JIT compiler and the garbage collector run at once).
    ``dpfast-cluster`` runs on ``local-cluster[2,1,2048]``: two executors, each its own JVM
    (one core, 2 GiB) with its own Python workers, as on a cluster; only the driver's
    process and the executors' share the machine.
    """
    cores = f"local[{master_cores}]"
    return {
        "dpfast-local1": JobSpec("dpfast", ("--master", "local[1]")),
        "dpfast-1cpu": JobSpec("dpfast", ("--master", "local[1]"), cpus=1),
        "dpfast-local2": JobSpec("dpfast", ("--master", "local[2]")),
        "dpfast-cluster": JobSpec("dpfast", ("--master", CLUSTER_MASTER)),
        "naive-window": JobSpec("naive", ("--variant", "window", "--master", cores)),
        "naive-partitioned": JobSpec("naive", ("--variant", "partitioned", "--master", cores)),
    }


def job_command(
    spec: JobSpec, data: Path, schema: Path, out: Path, args: argparse.Namespace
) -> list[str]:
    """The command that runs one job in its own process."""
    settings = SessionSettings(
        driver_memory=args.driver_memory, shuffle_partitions=args.shuffle_partitions
    )
    command = [
        sys.executable, __file__, spec.name, "--data", str(data), "--out", str(out),
        "--schema", str(schema), "--k", str(args.k), "--epsilon", repr(args.epsilon),
        *settings.arguments(), *spec.arguments,
    ]  # fmt: skip
    if spec.name == "dpfast":
        command += ["--memory-limit", args.memory_limit]
    return command


def ratios(jobs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The issue's ratios from the jobs' median wall times (those that ran)."""
    wall = {entry["job"]: entry["wall_s_median"] for entry in jobs if entry.get("ok")}
    found: dict[str, Any] = {}
    if "dpfast-local2" in wall:
        for naive in ("naive-window", "naive-partitioned"):
            if naive in wall:
                speedup = wall[naive] / wall["dpfast-local2"]
                found[f"{naive}_over_dpfast"] = speedup
                found[f"{naive}_target_met"] = speedup >= TARGET_SPEEDUP
        if "dpfast-local1" in wall:
            scaling = wall["dpfast-local1"] / wall["dpfast-local2"]
            found["local1_over_local2"] = scaling
            found["scaling_target_met"] = scaling >= TARGET_SCALING
        if "dpfast-1cpu" in wall:
            found["one_cpu_over_local2"] = wall["dpfast-1cpu"] / wall["dpfast-local2"]
        if "dpfast-cluster" in wall:
            found["cluster_over_local2"] = wall["dpfast-cluster"] / wall["dpfast-local2"]
    return found


def run_jobs(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """Run each job ``args.repeat`` times, each in a measured process; the results document."""
    specs = job_specs()
    unknown = [name for name in names if name not in specs]
    if unknown:
        raise ValueError(f"unknown jobs {unknown}: choose among {sorted(specs)}")
    data = args.data
    schema = args.schema or outofcore.schema_path(data)
    n_rows, columns = outofcore.dataset_shape(data)
    table_bytes = n_rows * len(columns) * 8
    work = args.work or data.with_name(data.name + ".spark-runs")
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for name in names:
        runs = []
        for attempt in range(args.repeat):
            out = work / f"{name}-released"
            if args.quiet_wait > 0 and not outofcore.wait_for_quiet(args.quiet_wait):
                print(f"{name}: the machine stayed busy, measuring anyway", file=sys.stderr)
            command = job_command(specs[name], data, schema, out, args)
            run = measured_run(command, work / f"{name}-{attempt}.log", specs[name].cpus)
            outofcore.remove(out)
            runs.append(run)
            print(outofcore.describe(name, run, table_bytes), file=sys.stderr, flush=True)
            if run["returncode"] != 0:
                break
        results.append(outofcore.summarise(name, runs, table_bytes))
    return {
        "data": str(data),
        "rows": n_rows,
        "columns": len(columns),
        "table_bytes": table_bytes,
        "k": args.k,
        "epsilon": args.epsilon,
        "memory_limit": args.memory_limit,
        "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions,
        "cpus": os.cpu_count(),
        "memory_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "started_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "naive_noise": NOT_SECURE,
        "jobs": results,
        "ratios": ratios(results),
    }


# --------------------------------------------------------------------------- command line


def _common(command: argparse.ArgumentParser) -> None:
    """Options of every subcommand that runs a job."""
    command.add_argument("--data", type=Path, required=True, help="Parquet dataset directory")
    command.add_argument("--schema", type=Path, help="dpfast schema (default DATA.schema.json)")
    command.add_argument("--k", type=outofcore.positive_int, default=100)
    command.add_argument("--epsilon", type=float, default=1.0)
    command.add_argument("--driver-memory", default="2g", help="spark.driver.memory")
    command.add_argument("--shuffle-partitions", type=outofcore.positive_int, default=8)
    command.add_argument("--memory-limit", default="4GiB", help="dpfast's memory limit")


def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    main = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = main.add_subparsers(dest="command", required=True)

    naive = commands.add_parser("naive", help="the naive ir_dp job in PySpark (insecure noise)")
    _common(naive)
    naive.add_argument("--out", type=Path, required=True, help="released Parquet directory")
    naive.add_argument("--master", default="local[2]")
    naive.add_argument("--variant", choices=VARIANTS, default="window")
    naive.add_argument("--seed", type=int, default=0, help="seed of rand(); not secure")
    naive.add_argument("--no-noise", action="store_true", help="exact group means (testing)")

    dp = commands.add_parser("dpfast", help="dpfast's ir_dp on Spark")
    _common(dp)
    dp.add_argument("--out", type=Path, required=True, help="released Parquet directory")
    dp.add_argument("--master", default="local[2]")
    dp.add_argument("--profile", type=Path, help="write the passes' timings to this JSON file")

    meas = commands.add_parser("measure", help="wall time, CPU and peak RSS of a command tree")
    meas.add_argument("--json", type=Path, help="append the JSON line to this file, not stdout")
    meas.add_argument(
        "--cpus", type=outofcore.positive_int, help="pin the command to this many CPUs (Linux)"
    )
    meas.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ...")

    run = commands.add_parser("run", help="measure the jobs on a dataset, write the medians")
    _common(run)
    run.add_argument("--jobs", default=",".join(job_specs()), help="comma-separated")
    run.add_argument("--repeat", type=outofcore.positive_int, default=3)
    run.add_argument("--json", type=Path, required=True, help="results file")
    run.add_argument("--work", type=Path, help="outputs and logs (default DATA.spark-runs/)")
    run.add_argument("--quiet-wait", type=float, default=0.0, metavar="SECONDS")
    return main


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return the exit code."""
    args = parser().parse_args(argv)
    if args.command == "measure":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not command:
            raise SystemExit("measure: give the command after --: measure -- CMD ...")
        line = json.dumps(measure(command, args.cpus))
        if args.json:
            with open(args.json, "a") as handle:
                handle.write(line + "\n")
        else:
            print(line, flush=True)
        return 0
    if args.command == "run":
        results = run_jobs(args, args.jobs.split(","))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps(results["ratios"], indent=2))
        return 0 if all(entry["ok"] for entry in results["jobs"]) else 1
    schema = args.schema or outofcore.schema_path(args.data)
    bounds = outofcore.read_bounds(schema, outofcore.dataset_shape(args.data)[1])
    noise = not getattr(args, "no_noise", False)
    job = outofcore.IrDpJob(k=args.k, epsilon=args.epsilon, bounds=bounds, noise=noise)
    settings = SessionSettings(args.master, args.driver_memory, args.shuffle_partitions)
    if args.command == "naive":
        spark = plain_session(settings, "naive-ir-dp")
        summary = naive_release(spark, args.data, args.out, job, variant=args.variant)
    else:
        from dpfast.engines.spark import local_session

        spark = local_session(
            settings.master, app_name="dpfast-bench",
            shuffle_partitions=settings.shuffle_partitions, config=settings.config(),
        )  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        profile = Profile() if args.profile else None
        summary = dpfast_release(
            spark, args.data, args.out, job, memory_limit=args.memory_limit, profile=profile
        )
        if args.profile:
            args.profile.write_text(json.dumps(summary, indent=2) + "\n")
    summary["master"] = settings.master
    spark.stop()
    print(json.dumps({key: value for key, value in summary.items() if key != "profile"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
