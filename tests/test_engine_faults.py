"""Faults lose nothing (issue 15): a full disk, a lost executor or worker, an interrupt.

A run that meets a fault ends with its error (the command line's says what to do), leaves
no output, no scratch directory and its input as it was; a task retried after its worker
died gives the same seeded release (docs/engines.md, "Faults").

How each fault is made, and why that way:

* **Full disk, in this process.** The engine's scratch files (and a single-file output)
  are made links to ``/dev/full`` as their scratch directory is made, so the kernel
  itself answers ``ENOSPC`` to the engine's own write calls (``os.pwrite``, file writes,
  Arrow's writer); no test hook is added to the engine. A dataset directory's part files
  have no name before they are made: there, Arrow's ``ParquetWriter.write_table`` raises
  ``ENOSPC`` after the first part. A patched ``os.pwrite`` writes short, as a write does
  when the disk fills up during it.
* **Full disk, for real.** The command line runs in a user and mount namespace whose
  OUTPUT directory is a tmpfs of 64 KiB (skipped where unprivileged user namespaces are
  off): out of core, and on Spark, where it is the only way to give the JVM an
  ``ENOSPC`` without root (Dask's workers write with Arrow, as out of core; a cluster
  more would cost CI time for no other path).
* **Spark's executors, everywhere.** A file size limit (``RLIMIT_FSIZE``, set on the
  running JVM with ``prlimit``): the JVM ignores ``SIGXFSZ``, so its writes fail with
  ``EFBIG`` through the same ``IOException`` as a full disk.
* **Dask's workers.** ``ParquetWriter.write_table`` patched in the worker processes
  (``client.run``) to raise ``ENOSPC``.
* **A lost executor.** Local Spark runs its executor inside the driver's JVM, so the
  process that can die alone is the Python worker running a task: it kills itself with
  ``SIGKILL``, and Spark sees a crashed task as it sees a lost executor's tasks.
* **Interrupt.** ``SIGINT`` sent to this process from inside a task or a batch, as Ctrl-C
  would, at a pass, while writing, or at publication.
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.dataflow.scratch_files import scratch_name
from dpfast.dataflow.source import Source
from dpfast.engines import scratch_dirs as scratch_files
from dpfast.engines.outofcore import _output as outofcore
from dpfast.engines.outofcore._sources import ParquetDataset
from tests.engine_runs import apart_from_engine, ir_dp_dataset, laplace_dp_dataset, on_engine

BOUNDS = {"a": (0.0, 50.0), "b": (-10, 10)}
COLUMNS = ["a", "b"]
EPSILON, SEED, K = 8.0, 11, 5
FULL = Path("/dev/full")

needs_dev_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")


def _table(n: int = 3001) -> pd.DataFrame:
    """A float column (some values clamped) and an integer one."""
    rng = np.random.default_rng(5)
    return pd.DataFrame({"a": rng.uniform(-5, 55, n), "b": rng.integers(-12, 13, n)})


def _write_files(table: pd.DataFrame, where: Path, cuts: Iterable[int] = (1, 1000, 2000)) -> Path:
    """Write ``table`` cut at ``cuts`` into files whose names sort in row order."""
    where.mkdir()
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    bounds = [0, *cuts, len(table)]
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(
            arrow.slice(lo, hi - lo), where / f"part-{i:03d}.parquet", row_group_size=400
        )
    return where


def _contents(where: Path) -> dict[str, bytes]:
    """Every file under ``where``, with its bytes."""
    return {str(p.relative_to(where)): p.read_bytes() for p in sorted(where.rglob("*"))}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    return _write_files(_table(), tmp_path / "in")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """An empty directory for the output: it must be empty again after a fault."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out"


def _expected(method: str, table: pd.DataFrame) -> dpfast.Release:
    if method == "ir_dp":
        return dpfast.ir_dp(table, k=K, epsilon=EPSILON, bounds=BOUNDS, columns=COLUMNS, seed=SEED)
    return dpfast.laplace_dp(table, epsilon=EPSILON, bounds=BOUNDS, columns=COLUMNS, seed=SEED)


def _assert_released(got: pd.DataFrame, expected: dpfast.Release) -> None:
    assert list(got.columns) == COLUMNS
    for name in COLUMNS:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())


def _out_of_core(method: str, source: Any, output: Path, **extra: Any) -> Any:
    """Release ``source`` with ``method`` out of core, within a memory limit of 64 KiB."""
    common = {"epsilon": EPSILON, "bounds": BOUNDS, "columns": COLUMNS, "seed": SEED}
    common |= {"memory_limit": 1 << 16, "batch_rows": 500} | extra
    if method == "ir_dp":
        return ir_dp_dataset(source, output, k=K, **common)
    return laplace_dp_dataset(source, output, **common)


def _full_disk_at(monkeypatch: pytest.MonkeyPatch, names: Iterable[str]) -> list[Path]:
    """Make every hidden scratch directory made from now on hold ``names`` as links to
    ``/dev/full``, whose writes the kernel fails with ENOSPC; return the directories."""
    made: list[Path] = []
    names = list(names)
    real = tempfile.mkdtemp

    def mkdtemp(*args: Any, **kwargs: Any) -> str:
        path = real(*args, **kwargs)
        if Path(path).name.startswith("."):  # the engine's scratch beside its output
            for name in names:
                (Path(path) / name).symlink_to(FULL)
            made.append(Path(path))
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    return made


def _scratch(column: str) -> str:
    return scratch_name(column)


# ---------------------------------------------------------------------------------------
# Full disk, out of core


@needs_dev_full
@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
@pytest.mark.parametrize("name", ["out.parquet", "out"])
def test_a_full_disk_under_the_scratch_files_stops_cleanly(monkeypatch, files, out, method, name):
    before = _contents(files)
    made = _full_disk_at(monkeypatch, [_scratch("b")])  # the second column's file
    with pytest.raises(OSError) as failed:
        _out_of_core(method, ParquetDataset.open(files), out / name)
    assert failed.value.errno == errno.ENOSPC
    assert made  # the scratch directory was made, and its file failed
    assert list(out.iterdir()) == []  # no output, no scratch directory
    assert _contents(files) == before


@needs_dev_full
@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
def test_a_full_disk_under_the_parquet_output_stops_cleanly(monkeypatch, files, out, method):
    before = _contents(files)
    made = _full_disk_at(monkeypatch, ["release.parquet"])  # the file being stitched
    with pytest.raises(OSError) as failed:
        _out_of_core(method, ParquetDataset.open(files), out / "out.parquet")
    assert failed.value.errno == errno.ENOSPC
    assert made
    assert list(out.iterdir()) == []
    assert _contents(files) == before


def _write_table_fails_after(monkeypatch: pytest.MonkeyPatch, calls: int) -> list[int]:
    """Make Arrow's ``ParquetWriter.write_table`` raise ENOSPC after ``calls`` calls."""
    seen: list[int] = []
    real = pq.ParquetWriter.write_table

    def write_table(self: Any, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        seen.append(table.num_rows)
        if len(seen) > calls:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    return seen


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
def test_a_disk_filling_up_between_output_files_stops_cleanly(monkeypatch, files, out, method):
    monkeypatch.setattr(outofcore, "WRITE_ROWS", 500)
    monkeypatch.setattr(outofcore, "FILE_ROWS", 1000)
    before = _contents(files)
    seen = _write_table_fails_after(monkeypatch, 3)  # two part files, then the third's start
    with pytest.raises(OSError) as failed:
        _out_of_core(method, ParquetDataset.open(files), out / "out")
    assert failed.value.errno == errno.ENOSPC
    assert len(seen) == 4
    assert list(out.iterdir()) == []
    assert _contents(files) == before


def test_a_short_write_of_a_scratch_file_is_finished(monkeypatch, files, out):
    # a disk filling up (or a signal) cuts a write short without an error: the rest must be
    # written, or its rows would read back as zeros
    real = os.pwrite
    short = []

    def pwrite(fd: int, data: Any, offset: int) -> int:
        data = memoryview(data).cast("B")
        if data.nbytes > 8:
            short.append(offset)
            data = data[: data.nbytes // 2]
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    _out_of_core("laplace_dp", ParquetDataset.open(files), out / "out.parquet")
    assert short
    _assert_released(pq.read_table(out / "out.parquet").to_pandas(), _expected("laplace", _table()))


def test_a_file_made_while_the_scratch_is_removed_is_removed_too(monkeypatch, out):
    # a cluster's write task cancelled while it runs goes on, and can make its file while
    # the scratch directory is being removed: the directory must go all the same
    real = shutil.rmtree
    late = []

    def rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        real(path, *args, **kwargs)
        if not late:  # made between the listing and the last rmdir
            late.append(Path(path) / "release" / "part-000001.parquet")
            late[0].parent.mkdir(parents=True)
            late[0].write_bytes(b"PAR1")

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with scratch_files.scratch_beside(out / "released") as scratch:
        assert scratch.parent == out
    assert late
    assert list(out.iterdir()) == []


# ---------------------------------------------------------------------------------------
# Interrupts out of core


class _Interrupting(Source):
    """A column source that sends this process SIGINT (Ctrl-C) from its ``at``-th batch."""

    def __init__(self, source: Any, at: int) -> None:
        self.source, self.at = source, at
        self.batches = itertools.count(1)

    @property
    def names(self) -> list[str]:
        return list(self.source.names)

    @property
    def schema(self) -> pa.Schema:
        return self.source.schema

    @property
    def n_rows(self) -> int:
        return int(self.source.n_rows)

    def map_column(self, name: str, batch_rows: int, fn: Callable[..., Any]) -> Any:
        def batch(array: pa.Array, first_row: int) -> Any:
            if next(self.batches) == self.at:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)  # the interrupt lands while the pass runs
            return fn(array, first_row)

        return self.source.map_column(name, batch_rows, batch)


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
@pytest.mark.parametrize("phase", ["pass", "publish"])
def test_an_interrupt_at_a_pass_or_at_publication_leaves_nothing(files, out, method, phase):
    before = _contents(files)
    source: Any = ParquetDataset.open(files)
    published = []

    def publish(report: Any) -> None:
        raise KeyboardInterrupt

    extra: dict[str, Any] = {"before_publish": publish}
    if phase == "pass":
        source = _Interrupting(source, at=9)  # a later pass: the first column's or the second's
        extra = {"after_publish": lambda: published.append(True)}
    with pytest.raises(KeyboardInterrupt):
        _out_of_core(method, source, out / "out.parquet", **extra)
    assert published == []
    assert list(out.iterdir()) == []
    assert _contents(files) == before


# ---------------------------------------------------------------------------------------
# The command line: what a full disk says


def _schema(tmp_path: Path) -> Path:
    schema = {
        "columns": {
            "a": {"type": "float", "bounds": [0, 50]},
            "b": {"type": "integer", "bounds": [-10, 10]},
        }
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema), encoding="utf-8")
    return path


def _cli_args(method: str, files: Path, output: Path, schema: Path) -> list[str]:
    args = ["release", method, str(files), "-o", str(output), "--schema", str(schema)]
    args += ["--epsilon", str(EPSILON), "--seed", str(SEED), "--quiet"]
    return args + (["--k", str(K)] if method == "ir-dp" else [])


def _reports_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the reports' temporary files links to /dev/full as they are made."""
    real = tempfile.mkstemp

    def mkstemp(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, path = real(*args, **kwargs)
        if "report.json" in Path(path).name:
            Path(path).unlink()
            Path(path).symlink_to(FULL)
        return fd, path

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


@needs_dev_full
@pytest.mark.parametrize("where", ["scratch", "reports"])
def test_cli_says_the_disk_is_full_and_how_to_fix_it(
    monkeypatch, capsys, tmp_path, files, out, where
):
    from dpfast import cli
    from dpfast.budget import BudgetFile

    before = _contents(files)
    if where == "scratch":
        _full_disk_at(monkeypatch, [_scratch("a")])
    else:
        _reports_full(monkeypatch)
    budget = tmp_path / "budget.json"
    assert cli.main(["budget", "init", str(budget), "--total-epsilon", "20"]) == 0
    args = _cli_args("laplace", files, out / "released", _schema(tmp_path))
    got = cli.main([*args, "--memory-limit", "1MiB", "--budget", str(budget)])
    err = capsys.readouterr().err.splitlines()[-1]
    assert got == 2
    assert err.startswith("dpfast: error: ")
    assert "No space left on device" in err
    assert "the disk is full; free space on it, or write OUTPUT to a disk with room" in err
    assert list(out.iterdir()) == []  # neither the data, nor a report, nor scratch
    assert _contents(files) == before
    # the spend is returned if the data was never published, kept if it was
    spent = 0.0 if where == "scratch" else EPSILON
    assert BudgetFile(budget).remaining() == pytest.approx(20 - spent)


def test_cli_exits_as_interrupted_when_pyspark_reports_the_cancelled_job(
    monkeypatch, capsys, tmp_path, files, out
):
    # Ctrl-C while pyspark collects: its SIGINT handler cancels the jobs and raises
    # KeyboardInterrupt, then pyspark raises the job's cancellation while handling it
    from dpfast import cli
    from dpfast.cli import _runner

    def cancelled(*args: Any, **kwargs: Any) -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            # as pyspark raises it: the interrupt is the context, not the cause
            raise RuntimeError("Job 3 cancelled as part of cancellation of all jobs")  # noqa: B904

    monkeypatch.setattr(_runner, "_in_passes", cancelled)
    args = _cli_args("laplace", files, out / "released", _schema(tmp_path))
    assert cli.main([*args, "--memory-limit", "1MiB"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "dpfast: interrupted"


# ---------------------------------------------------------------------------------------
# A really full disk: a tmpfs of 64 KiB in a user and mount namespace


@functools.cache
def _namespaces_work() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or sys.platform != "linux":
        return False
    with tempfile.TemporaryDirectory() as where:
        try:
            done = subprocess.run(
                [unshare, "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where],
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


_RUN_ON_TMPFS = """
import json, os, subprocess, sys
where, args = sys.argv[1], sys.argv[2:]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where], check=True)
done = subprocess.run([sys.executable, "-m", "dpfast", *args], capture_output=True, text=True)
left = sorted(os.listdir(where))
print(json.dumps({"code": done.returncode, "err": done.stderr, "left": left}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(["--memory-limit", "1MiB"], id="out-of-core"),
        pytest.param(["--engine", "spark", "--master", "local[1]"], id="spark"),
    ],
)
def test_a_really_full_disk_ends_cleanly(request, tmp_path, engine):
    if not _namespaces_work():
        pytest.skip("unprivileged user namespaces (unshare -rm) are not available here")
    if engine[1] == "spark":
        request.getfixturevalue("spark")  # skips without pyspark or Java 17
    files = _write_files(_table(20_000), tmp_path / "in", [7000])  # 320 KB of scratch
    before = _contents(files)
    out = tmp_path / "out"
    out.mkdir()
    args = [*_cli_args("laplace", files, out / "released", _schema(tmp_path)), *engine]
    env = {**os.environ, "PYTHONPATH": str(Path(dpfast.__file__).parent.parent)}
    done = subprocess.run(
        ["unshare", "-rm", sys.executable, "-c", _RUN_ON_TMPFS, str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["code"] == 2, got["err"]
    assert "No space left on device" in got["err"]
    assert "the disk is full; free space on it" in got["err"]
    assert got["left"] == []
    assert _contents(files) == before


# ---------------------------------------------------------------------------------------
# Spark: a lost executor (its Python worker), a full disk, an interrupt


class _Faults:
    """Faults for the tasks of partition 0 to meet, set from the test through files.

    ``arm(n, fault)`` lets the next ``n`` batches of partition 0 meet ``fault``:
    ``"kill"`` (the Python worker running the task dies by SIGKILL) or ``"interrupt"``
    (this process gets SIGINT, as from Ctrl-C); ``hits`` counts the faults met.
    """

    def __init__(self, where: Path) -> None:
        where.mkdir()
        (where / "hits").mkdir()
        self.where = where
        self.arm(0, "kill")

    @property
    def hits(self) -> int:
        return len(os.listdir(self.where / "hits"))

    def arm(self, n: int, fault: str) -> None:
        (self.where / "fault").write_text(fault, encoding="utf-8")
        (self.where / "allowed").write_text(str(self.hits + n), encoding="utf-8")

    def frame(self, frame: Any) -> Any:
        """``frame`` through a step that meets the armed faults."""
        from dpfast.engines.spark._rows import quietly

        where, driver = str(self.where), os.getpid()

        def step(batches: Any) -> Any:
            from pyspark import TaskContext

            for batch in batches:
                if TaskContext.get().partitionId() == 0:
                    hits = len(os.listdir(os.path.join(where, "hits")))
                    if hits < int(Path(where, "allowed").read_text(encoding="utf-8")):
                        Path(where, "hits", str(hits)).touch()
                        if Path(where, "fault").read_text(encoding="utf-8") == "kill":
                            os.kill(os.getpid(), signal.SIGKILL)
                        os.kill(driver, signal.SIGINT)
                        time.sleep(2)  # still running when the driver cancels the job
                yield batch

        with quietly():  # pyspark warns of pandas >= 3 as it plans mapInArrow
            return frame.mapInArrow(step, frame.schema)


def _laplace_args(columns: list[str] = COLUMNS) -> dict[str, Any]:
    bounds = {c: BOUNDS[c] for c in columns}
    return {"epsilon": EPSILON, "bounds": bounds, "columns": columns, "seed": SEED}


def _wait_for_idle(spark: Any, seconds: float = 30.0) -> None:
    """Wait until no Spark stage runs (cancelled tasks end after their job does)."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + seconds
    while tracker.getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.fixture(scope="module")
def on_spark(spark, tmp_path_factory):
    """One laplace_dp release on Spark whose second pass lost its Python worker once.

    Returns the table, the faults (disarmed) and the release: its lazy frame of the
    executors, computed again (with its faults) by every write.
    """

    table = _table(20_000)
    faults = _Faults(tmp_path_factory.mktemp("spark") / "faults")

    def progress(*call: Any) -> None:  # after the first pass: the next one loses its worker
        if faults.hits == 0:
            faults.arm(1, "kill")

    frame = faults.frame(_spark_frame(spark, table))
    data, report, private = on_engine(
        "spark", dpfast.laplace_dp, frame, progress=progress, **_laplace_args()
    )
    hits = faults.hits
    faults.arm(0, "kill")
    return table, faults, (data, report, private), hits


def test_a_python_worker_killed_mid_pass_and_mid_write_gives_the_same_release(on_spark, out):
    from dpfast.engines.spark import SparkEngine

    table, faults, (data, report, private), killed_in_passes = on_spark
    assert killed_in_passes == 1  # a pass's task lost its worker, and ran again
    faults.arm(1, "kill")
    SparkEngine.write_release(data, out / "released", report)
    assert faults.hits == 2  # and a task of the write
    expected = _expected("laplace_dp", table)
    _assert_released(pq.read_table(out / "released").to_pandas(), expected)
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped
    assert private.clamped_output == expected.private.clamped_output


def test_a_python_worker_killed_at_every_attempt_fails_the_write_cleanly(spark, on_spark, out):
    from dpfast.engines.spark import SparkEngine

    _, faults, (data, report, _), _ = on_spark
    faults.arm(100, "kill")
    published = []
    try:
        with pytest.raises(Exception, match="Python worker exited unexpectedly"):
            SparkEngine.write_release(
                data, out / "released", report, before_publish=published.append
            )
    finally:
        faults.arm(0, "kill")
    assert published == []
    _wait_for_idle(spark)
    assert list(out.iterdir()) == []
    assert spark.range(5).count() == 5  # the session runs on


def test_an_interrupt_while_spark_writes_leaves_nothing(spark, on_spark, out):
    from dpfast.engines.spark import SparkEngine

    _, faults, (data, report, _), _ = on_spark
    hits = faults.hits
    faults.arm(1, "interrupt")
    try:
        with pytest.raises(KeyboardInterrupt):
            SparkEngine.write_release(data, out / "released", report)
    finally:
        faults.arm(0, "kill")
    assert faults.hits == hits + 1
    _wait_for_idle(spark)
    assert list(out.iterdir()) == []
    assert spark.range(5).count() == 5  # the session runs on


def test_an_interrupt_during_a_pass_on_spark_is_an_interrupt(spark, tmp_path):
    faults = _Faults(tmp_path / "faults")
    faults.arm(1, "interrupt")
    frame = faults.frame(_spark_frame(spark, _table()))
    with pytest.raises(KeyboardInterrupt):  # not the job's cancellation that follows it
        dpfast.laplace_dp(frame, **_laplace_args())
    assert faults.hits == 1
    _wait_for_idle(spark)
    assert spark.range(5).count() == 5


def test_an_interrupt_during_a_pass_of_an_engine_function_is_an_interrupt(spark, tmp_path):

    faults = _Faults(tmp_path / "faults")
    faults.arm(1, "interrupt")
    frame = faults.frame(_spark_frame(spark, _table()))
    with pytest.raises(KeyboardInterrupt):  # SparkSource itself, below the public function
        on_engine("spark", dpfast.laplace_dp, frame, **_laplace_args())
    assert faults.hits == 1
    _wait_for_idle(spark)
    assert spark.range(5).count() == 5


def _spark_frame(spark: Any, table: pd.DataFrame) -> Any:
    return spark.createDataFrame(pa.Table.from_pandas(table, preserve_index=False))


def _jvm_pid(spark: Any) -> int:
    """The process id of the session's JVM (local mode: driver and executor)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    if proc is None or not Path(f"/proc/{proc.pid}/comm").exists():
        pytest.skip("the session's JVM is not a child process of this one")
    assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "java"
    return int(proc.pid)


def _executor_jvms(spark: Any) -> list[int]:
    """The process ids of the session's executor JVMs.

    In local mode, the session's JVM itself; on a local cluster (``local-cluster[...]``),
    the executors' own JVMs, which the session's JVM starts as its descendants.
    """
    session = _jvm_pid(spark)
    found, frontier = [], [session]
    while frontier:
        pid = frontier.pop()
        threads = Path(f"/proc/{pid}/task").glob("*/children")  # each thread's children
        for child in (c for t in threads for c in t.read_text().split()):
            frontier.append(int(child))
            command = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"CoarseGrainedExecutorBackend" in command:
                found.append(int(child))
    return found or [session]


def test_a_file_size_limit_on_the_executors_stops_the_write_cleanly(spark, on_spark, out):
    import resource

    from dpfast.engines.spark import SparkEngine

    _, _, (data, report, _), _ = on_spark
    pids = _executor_jvms(spark)
    limits = {pid: resource.prlimit(pid, resource.RLIMIT_FSIZE) for pid in pids}
    try:
        for pid, (_, hard) in limits.items():  # parts are ~160 KB
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (32 * 1024, hard))
        with pytest.raises(OSError) as failed:
            SparkEngine.write_release(data, out / "released", report)
    finally:
        for pid, limit in limits.items():
            resource.prlimit(pid, resource.RLIMIT_FSIZE, limit)
    assert failed.value.errno == errno.EFBIG
    assert "on an executor writing" in str(failed.value)
    _wait_for_idle(spark)
    assert list(out.iterdir()) == []


@needs_dev_full
def test_a_full_disk_under_the_drivers_files_on_spark_stops_cleanly(spark, monkeypatch, tmp_path):
    from dpfast.engines.spark._settings import SCRATCH_KEY, scratch_directory

    spark.conf.set(SCRATCH_KEY, str(tmp_path / "shared"))
    try:
        where = scratch_directory(spark)
        _full_disk_at(monkeypatch, [_scratch("a")])
        table = _table()
        table["t"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(np.arange(len(table)), "s")
        frame = _spark_frame(spark, table)
        # the driver writes: "t" is kept, a timestamp, which no lazy frame of dpfast holds
        with pytest.raises(OSError) as failed:
            dpfast.laplace_dp(frame, unprotected="keep", **_laplace_args(["a"]))
        assert failed.value.errno == errno.ENOSPC
        assert list(where.iterdir()) == []  # no release file, no scratch directory
    finally:
        spark.conf.unset(SCRATCH_KEY)


# ---------------------------------------------------------------------------------------
# Dask: a full disk on a worker, an interrupt


def _disk_full_on_worker(full: bool) -> None:
    """On a worker: make Arrow's ``ParquetWriter.write_table`` raise ENOSPC, or not."""
    writer: Any = pq.ParquetWriter
    if not hasattr(writer, "dpfast_real_write_table"):
        writer.dpfast_real_write_table = writer.write_table

    def write_table(self: Any, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    writer.write_table = write_table if full else writer.dpfast_real_write_table


def _interrupting(part: pd.DataFrame, arm: str, sent: str, client_pid: int) -> pd.DataFrame:
    """Return ``part``; once ``arm`` exists, the first task to see it sends the client SIGINT."""
    if os.path.exists(arm) and not os.path.exists(sent):
        Path(sent).touch()
        os.kill(client_pid, signal.SIGINT)
        time.sleep(2)  # still running when the client cancels
    return part


def _dask_release(table: pd.DataFrame, step: Any = None) -> tuple[Any, Any]:
    import dask.dataframe as dd

    frame = dd.from_pandas(table, npartitions=3)
    if step is not None:
        frame = frame.map_partitions(step, meta=frame._meta)
    data, report, _ = on_engine("dask", dpfast.laplace_dp, frame, **_laplace_args())
    return data, report


def _wait_for_no_tasks(client: Any, seconds: float = 30.0) -> None:
    """Wait until no worker runs a task (cancelled tasks run to their end)."""
    deadline = time.monotonic() + seconds
    while any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_full_disk_on_a_dask_worker_stops_the_write_cleanly(client, out):
    from dpfast.engines.dask import DaskEngine

    data, report = _dask_release(_table())
    client.run(_disk_full_on_worker, True)
    try:
        with pytest.raises(OSError) as failed:
            DaskEngine.write_release(data, out / "released", report)
    finally:
        client.run(_disk_full_on_worker, False)
    assert failed.value.errno == errno.ENOSPC
    _wait_for_no_tasks(client)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("phase", ["pass", "write"])
def test_an_interrupt_on_dask_leaves_nothing(client, tmp_path, out, phase):
    from functools import partial

    from dpfast.engines.dask import DaskEngine

    arm, sent = tmp_path / "arm", tmp_path / "sent"
    step = partial(_interrupting, arm=str(arm), sent=str(sent), client_pid=os.getpid())
    if phase == "pass":
        arm.touch()
        with pytest.raises(KeyboardInterrupt):
            _dask_release(_table(), step)
    else:
        data, report = _dask_release(_table(), step)
        arm.touch()
        with pytest.raises(KeyboardInterrupt):
            DaskEngine.write_release(data, out / "released", report)
    assert sent.exists()
    _wait_for_no_tasks(client)
    assert list(out.iterdir()) == []
    assert client.submit(sum, [1, 2]).result() == 3  # the client runs on
