"""Spark: global row numbers, laplace_dp, the public functions and the executors' output."""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.dataflow.flow import FAN
from dpfast.engines.outofcore._sources import ParquetDataset
from dpfast.partitions.ranking import RankGroups
from tests.engine_runs import apart_from_engine, on_engine

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install dpfast[spark])")

from dpfast.engines.spark import SparkEngine, SparkSource
from dpfast.engines.spark._rows import FileTasks

BOUNDS = {"a": (0.0, 50.0), "b": (-10, 10)}
EPSILON, SEED = 8.0, 11


def _table(n: int = 3001) -> pd.DataFrame:
    """A float column (some values clamped), an integer one and a text one not protected."""
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "a": rng.uniform(-5, 55, n),
            "b": rng.integers(-12, 13, n),
            "note": [f"n{i % 7}" for i in range(n)],
        }
    )


def _write_files(table: pd.DataFrame, where: Path, cuts: list[int], group_rows: int = 200) -> Path:
    """Write ``table`` cut at ``cuts`` into files whose names sort in row order."""
    where.mkdir()
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    bounds = [0, *cuts, len(table)]
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(
            arrow.slice(lo, hi - lo), where / f"part-{i:03d}.parquet", row_group_size=group_rows
        )
    return where


def _frame(spark, table: pd.DataFrame):
    """A Spark frame of ``table``, made through Arrow."""
    return spark.createDataFrame(pa.Table.from_pandas(table, preserve_index=False))


def _rows(frame) -> pd.DataFrame:
    """A Spark frame's rows in order, through Arrow (toPandas warns of pandas >= 3)."""
    return frame.toArrow().to_pandas()


def _numbered(source, batch_rows: int) -> list[tuple[int, np.ndarray]]:
    """Every batch of column "a" with its first row number, in row order."""
    got = source.map_column("a", batch_rows, lambda a, first: (first, a.to_numpy().copy()))
    return sorted(got, key=lambda pair: pair[0])


def _assert_numbered_as(got: list[tuple[int, np.ndarray]], expected: np.ndarray, rows: int):
    assert all(len(values) <= rows for _, values in got)
    for first, values in got:  # each batch is the rows its number names
        np.testing.assert_array_equal(values, expected[first : first + len(values)])
    assert sum(len(values) for _, values in got) == len(expected)


@pytest.mark.parametrize(
    ("cuts", "split_bytes"),
    [
        ([1, 2, 1000, 1001, 2000, 2999], None),  # seven files, three of one row
        ([1000, 2000], 1024),  # about 64 partitions: files cut between row groups
    ],
)
def test_parquet_rows_are_numbered_as_parquet_dataset_numbers_them(
    spark, tmp_path, cuts, split_bytes
):
    table = _table()
    files = _write_files(table, tmp_path / "in", cuts, 40 if split_bytes else 200)
    # Spark reads the files in an order of its own (largest first): the numbers do not
    # depend on it
    expected = np.concatenate(
        list(ParquetDataset.open(files).map_column("a", 1 << 20, lambda a, f: a.to_numpy()))
    )
    key = "spark.sql.files.maxPartitionBytes"
    saved = spark.conf.get(key)
    if split_bytes is not None:
        spark.conf.set(key, str(split_bytes))
    try:
        source = SparkSource.from_parquet(spark, files, reader="spark")
        partitions = source.frame.rdd.getNumPartitions()
        got = _numbered(source, 64)
    finally:
        spark.conf.set(key, saved)
    assert source.n_rows == len(table)
    if split_bytes is not None:
        assert partitions >= 48
    _assert_numbered_as(got, expected, 64)


@pytest.mark.parametrize("tasks", [None, 1, 2, 7, 64])
def test_files_read_by_pyarrow_tasks_are_numbered_as_parquet_dataset_numbers_them(
    spark, tmp_path, tasks
):
    table = _table()
    # seven files, four of one or two rows; row groups of 200 rows (19 in all)
    files = _write_files(table, tmp_path / "in", [1, 2, 1000, 1001, 2000, 2999])
    dataset = ParquetDataset.open(files)
    expected = np.concatenate(list(dataset.map_column("a", 1 << 20, lambda a, f: a.to_numpy())))
    source = SparkSource.from_parquet(spark, files, tasks=tasks)
    plan = source.numbering()
    assert isinstance(plan, FileTasks)
    assert plan.tasks == (2 if tasks is None else min(tasks, 19))  # 3001 rows: one per slot
    for batch_rows in (64, 1000):  # batches joined across row groups and files
        _assert_numbered_as(_numbered(source, batch_rows), expected, batch_rows)
    assert source.n_rows == len(table)
    assert source.schema == dataset.schema
    assert source._frame is None  # Spark read no file
    # the values keep the files' types: the text column as pyarrow wrote it
    texts = list(source.map_column("note", 500, lambda a, first: (first, a.type)))
    assert {kind for _, kind in texts} == {dataset.schema.field("note").type}


def test_file_tasks_cut_row_groups_into_consecutive_runs(tmp_path):
    table = _table()
    files = _write_files(table, tmp_path / "in", [1, 2, 1000, 1001, 2000, 2999])
    dataset = ParquetDataset.open(files)
    for tasks, parallelism in [(1, 2), (2, 2), (5, 3), (19, 2), (64, 2), (None, 3)]:
        plan = FileTasks.plan(dataset, parallelism, tasks)
        first = 0  # every row group once, in row order, and each task gets some
        for task in range(plan.tasks):
            run = plan.groups[plan.bounds[task] : plan.bounds[task + 1]]
            assert run
            for index, group, start in run:
                assert start == first
                first += pq.read_metadata(plan.files[index]).row_group(group).num_rows
        assert first == dataset.n_rows
        assert plan.tasks == (parallelism if tasks is None else min(tasks, 19))
    # a task's rows: read back with pyarrow, without Spark, against the dataset's rows
    expected = np.concatenate(list(dataset.map_column("b", 1 << 20, lambda a, f: a.to_numpy())))
    plan = FileTasks.plan(dataset, 2, 7).reading(["b", "a"], 150)
    for task in range(plan.tasks):
        ids = pa.RecordBatch.from_arrays([pa.array([task], pa.int64())], names=["id"])
        for batch, start in plan.pieces([ids], task):
            assert batch.schema.names == ["b", "a"] and batch.num_rows <= 150
            np.testing.assert_array_equal(
                batch.column(0).to_numpy(), expected[start : start + batch.num_rows]
            )
    with pytest.raises(ValueError, match="tasks must be at least 1"):
        FileTasks.plan(dataset, 2, 0)
    # one task reading every row group: the whole column, in row order
    whole = FileTasks.plan(dataset, 2, 7).whole().reading(["b"], 150)
    assert whole.tasks == 1
    ids = pa.RecordBatch.from_arrays([pa.array([0], pa.int64())], names=["id"])
    pieces = list(whole.pieces([ids], 0))
    assert [start for _, start in pieces] == list(
        np.cumsum([0] + [b.num_rows for b, _ in pieces[:-1]])
    )
    np.testing.assert_array_equal(
        np.concatenate([b.column(0).to_numpy() for b, _ in pieces]), expected
    )


def _sort_task_results(monkeypatch, plan, ranges, key_bits):
    """Run a sort task over ``plan`` without Spark: its reductions (the sorted keys) and
    how often it concatenated arrays."""
    import pickle

    from dpfast.engines.spark import _sort as _source

    joined = []
    concatenate = np.concatenate

    def counted(arrays, *args, **kwargs):
        joined.append(len(arrays))
        return concatenate(arrays, *args, **kwargs)

    monkeypatch.setattr(_source.np, "concatenate", counted)
    ids = pa.RecordBatch.from_arrays([pa.array([0], pa.int64())], names=["id"])
    out = _source.read_sorted(
        [ids], keys=lambda a, first: a.to_numpy().astype(np.uint64), ranges=ranges,
        key_bits=key_bits, reduce=lambda i, ordered: (i, ordered.copy()), batch_rows=150,
        numbering=plan,
    )  # fmt: skip
    results = [pickle.loads(batch.column(1)[0].as_py()) for batch in out]
    monkeypatch.undo()
    return results, joined


def test_a_sort_task_over_files_reads_the_keys_into_one_array_of_the_ranges_counts(
    tmp_path, monkeypatch
):
    from dpfast.dataflow.sorted_ranges import Ranges

    rng = np.random.default_rng(3)
    table = pd.DataFrame({"k": rng.integers(0, 1000, 2500)})
    dataset = ParquetDataset.open(_write_files(table, tmp_path / "in", [700, 701, 1800]))
    plan = FileTasks.plan(dataset, 2, 3).whole().reading(["k"], 150)
    keys = table["k"].to_numpy().astype(np.uint64)

    def ranges(lo, hi, count):
        counts = None if count is None else np.array([count], dtype=np.int64)
        return Ranges(np.array([lo], np.uint64), np.array([hi], np.uint64), counts)

    inside = keys[(keys >= 100) & (keys < 900)]
    cases = [
        (ranges(0, 1000, 2500), keys, 0),  # the counts known: one array, nothing joined
        (ranges(100, 900, inside.size), inside, 0),  # keys outside the range dropped
        (ranges(0, 1000, None), keys, 1),  # no counts: the pieces are joined
        (ranges(0, 1000, 2000), keys, 1),  # more keys than counted: kept, then joined
        (ranges(0, 1000, 3000), keys, 0),  # fewer: the driver's count check refuses them
    ]
    for given, expected, joins in cases:
        results, joined = _sort_task_results(monkeypatch, plan, given, 10)
        assert len(results) == 1 and results[0][0] == 0
        np.testing.assert_array_equal(results[0][1], np.sort(expected))
        assert len(joined) == joins, (given.counts, joined)
    # a task reading nothing yields nothing
    empty = FileTasks.plan(dataset, 2, 3).whole().reading(["k"], 150)
    empty = type(empty)(empty.files, (), (0, 0), empty.names, empty.batch_rows)
    assert _sort_task_results(monkeypatch, empty, ranges(0, 1000, 0), 10)[0] == []


def test_a_worker_keeps_its_sort_buffers_until_it_computes_output(tmp_path, monkeypatch):
    from dpfast.dataflow.sorted_ranges import WORKER_BUFFERS, Ranges
    from dpfast.engines.frames import GeneratedParts

    table = pd.DataFrame({"k": np.arange(2500) % 1000})
    dataset = ParquetDataset.open(_write_files(table, tmp_path / "in", [1000]))
    plan = FileTasks.plan(dataset, 2, 2).whole().reading(["k"], 150)
    one = Ranges(np.array([0], np.uint64), np.array([1000], np.uint64), np.array([2500]))
    WORKER_BUFFERS.clear()
    try:
        _sort_task_results(monkeypatch, plan, one, 10)
        assert WORKER_BUFFERS.kept_bytes == 2 * 8 * 2500  # the keys and the sort's scratch
        _sort_task_results(monkeypatch, plan, one, 10)  # the next sort takes them back
        assert WORKER_BUFFERS.kept_bytes == 2 * 8 * 2500
        GeneratedParts((), 2500, RankGroups(2500, 10), 1000).table(0)  # an output task frees them
        assert WORKER_BUFFERS.kept_bytes == 0
    finally:
        WORKER_BUFFERS.clear()


def _generated_parts(n=200_000, k=10, part_rows=70_000):
    """Parts of a release of n rows: float, int and label columns (no Spark needed)."""
    from dpfast import noise
    from dpfast.dataflow.values import CategoricalColumn, NumericColumn
    from dpfast.engines.frames import GeneratedParts, GroupsColumn
    from dpfast.taxonomy import as_taxonomy

    keys = noise.NoiseSource.from_seed(SEED)

    def column(name: str, values: np.ndarray, kind: str) -> GroupsColumn:
        key = keys.key("ir_dp", "column-order", name)
        if kind == "labels":
            released: Any = CategoricalColumn(name, np.empty(0), as_taxonomy(["a", "b", "c"]))
            return GroupsColumn.of(key, n, values, released, pa.string())
        dtype = np.dtype(np.int64 if kind == "int" else np.float64)
        released = NumericColumn(name, np.empty(0), kind == "int", dtype)
        return GroupsColumn.of(key, n, values, released, pa.from_numpy_dtype(dtype))

    rng = np.random.default_rng(5)
    columns = (
        column("x", rng.normal(size=n // k), "float"),
        column("i", rng.integers(0, 99, n // k).astype(float), "int"),
        column("c", rng.integers(0, 3, n // k), "labels"),
        column("y", rng.normal(size=n // k), "float"),
    )
    return GeneratedParts(columns, n, RankGroups(n, k), part_rows)


def test_a_part_computed_into_a_buffer_is_the_part_and_views_the_buffer():
    from dpfast.dataflow.sorted_ranges import KeyBuffers

    parts = _generated_parts()
    assert parts.count == 3
    words = parts.most_words()
    assert words == max(parts.words(p) for p in range(3))
    for part in range(parts.count):
        lo, hi = parts.span(part)
        # the float columns' buckets around the part, end to end
        assert (
            parts.words(part)
            == sum(c.bucket_items(lo, hi) for c in parts.columns if c.kind == "float")
            >= 2 * (hi - lo)
        )
        buffer = KeyBuffers().take(words)
        got = parts.table(part, buffer)
        assert got.equals(parts.table(part))
        start, end = buffer.ctypes.data, buffer.ctypes.data + buffer.nbytes
        for name in ("x", "y"):
            assert start <= got.column(name).chunk(0).buffers()[1].address < end
        assert got.column("i").type == pa.int64() and got.column("c").type == pa.string()


def test_a_worker_writes_its_parts_through_one_kept_buffer(tmp_path, monkeypatch):
    from dpfast.dataflow.sorted_ranges import WORKER_BUFFERS
    from dpfast.engines.spark import _write

    parts = _generated_parts()
    task = [pa.RecordBatch.from_arrays([pa.array([2, 0, 1], pa.int64())], names=["id"])]
    taken = []
    take = WORKER_BUFFERS.take
    monkeypatch.setattr(WORKER_BUFFERS, "take", lambda n: taken.append(take(n)) or taken[-1])
    WORKER_BUFFERS.clear()
    WORKER_BUFFERS.give(WORKER_BUFFERS.take(10), WORKER_BUFFERS.take(20))  # a sort's, small
    taken.clear()
    try:
        done = list(_write._write_part(task, parts, str(tmp_path)))
        assert [b.to_pydict()["part"] for b in done] == [[2], [0], [1]]
        # the sort buffers freed, then one buffer: made for the first part, kept after each
        assert WORKER_BUFFERS.kept_bytes == 8 * parts.most_words()
        assert len({b.ctypes.data for b in taken}) == 1 and len(taken) == 3
        for part in range(3):  # (a table without a buffer frees the kept ones)
            assert pq.read_table(tmp_path / f"part-{part:06d}.parquet").equals(parts.table(part))
        WORKER_BUFFERS.give(WORKER_BUFFERS.take(parts.most_words()))

        def full(table, where, **kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(_write.pq, "write_table", full)
        with pytest.raises(OSError, match="No space left"):
            list(_write._write_part(task, parts, str(tmp_path)))
        assert WORKER_BUFFERS.kept_bytes == 0  # a failed part drops its buffer
    finally:
        WORKER_BUFFERS.clear()


def test_file_tasks_of_empty_files_read_nothing(tmp_path):
    where = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"a": pa.array([], pa.float64())}), where)
    plan = FileTasks.plan(ParquetDataset.open(where), 2)
    assert plan.tasks == 1 and plan.groups == ()
    ids = pa.RecordBatch.from_arrays([pa.array([0], pa.int64())], names=["id"])
    assert list(plan.reading(["a"], 10).pieces([ids], 0)) == []


def test_from_parquet_refuses_an_unknown_reader_or_tasks_for_spark(spark, tmp_path):
    files = _write_files(_table(), tmp_path / "in", [1000])
    with pytest.raises(ValueError, match="reader must be 'pyarrow' or 'spark'"):
        SparkSource.from_parquet(spark, files, reader="arrow")
    with pytest.raises(ValueError, match="tasks applies to reader='pyarrow' only"):
        SparkSource.from_parquet(spark, files, reader="spark", tasks=2)


def test_a_frame_that_changes_between_passes_is_refused(spark):
    frame = _frame(spark, _table()).repartition(3)
    source = SparkSource(frame)
    assert source.n_rows == 3001  # partitions counted
    source.frame = frame.filter("b > 0")  # as an unseeded sample would read other rows
    with pytest.raises(ValueError, match=r"gave other rows.*cache it"):
        list(source.map_column("a", 1000, lambda a, first: len(a)))


def _in_memory(table: pd.DataFrame) -> dpfast.Release:
    return dpfast.laplace_dp(table, epsilon=EPSILON, bounds=BOUNDS, columns=["a", "b"], seed=SEED)


def _assert_same_release(got: dpfast.Release, expected: dpfast.Release) -> None:
    data = _rows(got.data)
    assert list(data.columns) == list(expected.data.columns)
    for name in expected.data.columns:  # in order: laplace keeps rows in place
        assert data[name].dtype == expected.data[name].dtype
        np.testing.assert_array_equal(data[name].to_numpy(), expected.data[name].to_numpy())
    assert apart_from_engine(got.report) == apart_from_engine(expected.report)
    assert got.private.clamped == expected.private.clamped
    assert got.private.clamped_output == expected.private.clamped_output
    assert got.private.input_rows == expected.private.input_rows


@pytest.mark.parametrize(
    ("partitions", "columns"),
    # FAN + 1 partitions: the partial totals are added in two rounds
    [(1, ["a", "b"]), (2, ["a", "b"]), (7, ["a", "b"]), (FAN + 1, ["b"])],
)
def test_laplace_dp_of_a_spark_frame_is_the_in_memory_release(spark, partitions, columns):
    # cells are keyed by row number: a numbering other than the frame's order (rows
    # counted within each partition, say) gives other noise
    frame = _frame(spark, _table()).repartition(partitions).cache()
    args = {"epsilon": EPSILON, "bounds": BOUNDS, "columns": columns, "seed": SEED}
    expected = dpfast.laplace_dp(_rows(frame), **args)  # the frame's order
    _assert_same_release(dpfast.laplace_dp(frame, **args), expected)
    assert frame.rdd.getNumPartitions() == partitions
    frame.unpersist()


#: The arguments of the ir_dp releases of ``_table()``.
IR_DP = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": ["a", "b"], "seed": SEED}


@pytest.fixture(scope="module")
def released_files(tmp_path_factory):
    """``_table()`` in five files (two of one row), and its laplace_dp and ir_dp in memory.

    Written and released once for the module: the tests only read them.
    """
    table = _table()
    files = _write_files(table, tmp_path_factory.mktemp("released") / "in", [1, 1000, 1001, 2500])
    return files, _in_memory(table), dpfast.ir_dp(table, **IR_DP)


@pytest.mark.parametrize(("reader", "tasks"), [("spark", None), ("pyarrow", None), ("pyarrow", 7)])
def test_laplace_dp_of_parquet_files_keys_rows_as_in_memory(spark, released_files, reader, tasks):
    files, expected, _ = released_files
    source = SparkSource.from_parquet(spark, files, reader=reader, tasks=tasks)
    data, report, private = on_engine(
        "spark",
        dpfast.laplace_dp,
        source,
        epsilon=EPSILON,
        bounds=BOUNDS,
        columns=["a", "b"],
        seed=SEED,
        batch_rows=64,
    )
    _assert_same_release(dpfast.Release(data, report, private), expected)


@pytest.mark.parametrize(("reader", "tasks"), [("spark", None), ("pyarrow", 1), ("pyarrow", 7)])
def test_ir_dp_of_parquet_files_is_the_in_memory_release(spark, released_files, reader, tasks):
    files, _, expected = released_files
    source = SparkSource.from_parquet(spark, files, reader=reader, tasks=tasks)
    # batches of 64 rows: groups straddle batches, row groups and files
    data, report, private = on_engine("spark", dpfast.ir_dp, source, batch_rows=64, **IR_DP)
    _assert_same_release(dpfast.Release(data, report, private), expected)


@pytest.mark.parametrize(("memory_limit", "shuffled"), [(None, False), (1 << 15, True)])
def test_ir_dp_of_parquet_files_sorts_a_column_that_fits_without_a_shuffle(
    spark, released_files, monkeypatch, memory_limit, shuffled
):

    plans: list[str] = []
    collect = SparkSource._reductions

    def recorded(planned):
        plans.append(planned._jdf.queryExecution().executedPlan().toString())
        return collect(planned)

    monkeypatch.setattr(SparkSource, "_reductions", staticmethod(recorded))
    files, _, expected = released_files
    source = SparkSource.from_parquet(spark, files, tasks=7)
    limit = {} if memory_limit is None else {"memory_limit": memory_limit, "n_threads": 1}
    data, report, private = on_engine(
        "spark", dpfast.ir_dp, source, batch_rows=64, **IR_DP, **limit
    )
    _assert_same_release(dpfast.Release(data, report, private), expected)
    # a column within a task's limit is one range: one task reads and sorts it, while
    # 3001 values over a 32 KiB limit are cut into ranges, brought to their tasks by Spark
    assert len(plans) == 2
    assert all(("Exchange" in plan) == shuffled for plan in plans)


def test_spark_runs_a_column_per_task_slot_and_one_more_as_the_memory_limit_allows():
    from dpfast.engines.outofcore import ArrowSource, OutOfCoreEngine
    from dpfast.engines.spark import SparkEngine

    class Slots(SparkEngine):
        tasks = 2  # no session: only its task slots are asked

    def engine(kind: type, memory: int) -> Any:
        opened = kind.__new__(kind)
        OutOfCoreEngine.__init__(
            opened, ArrowSource(pa.table({"a": [1.0]})), "o", memory_limit=memory
        )
        return opened

    held = (10**8 // 100) * 24  # a rank group is 24 bytes on the driver
    big = engine(Slots, 1 << 32)
    assert big.column_workers(10, None, held) == 3
    assert big.column_workers(10, 1, held) == 1  # n_threads decides
    assert big.column_workers(2, None, held) == 2
    # 10**6 groups fit twice in 50 MB, not three times
    assert engine(Slots, 50_000_000).column_workers(10, None, held) == 2
    assert engine(Slots, 1000).column_workers(10, None, held) == 1
    # an engine not on Spark (Dask's, here out of core) keeps one column per core
    plain = engine(OutOfCoreEngine, 1 << 32)
    assert plain.column_workers(10, None, held) == min(10, os.cpu_count() or 1)


def test_a_parquet_file_gone_before_the_pass_fails_it_cleanly(spark, tmp_path):

    files = _write_files(_table(), tmp_path / "in", [1000, 2000])
    source = SparkSource.from_parquet(spark, files)
    (files / "part-001.parquet").unlink()  # after the footers were read
    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": ["a", "b"], "seed": SEED}
    with pytest.raises(Exception, match=r"part-001\.parquet"):
        data, report, _ = on_engine("spark", dpfast.ir_dp, source, **args)
        SparkEngine.write_release(data, tmp_path / "out", report)
    assert not (tmp_path / "out").exists()


def test_ir_dp_of_a_spark_frame_is_the_in_memory_release(spark):
    table = _table()
    frame = _frame(spark, table).repartition(3).cache()
    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": ["a", "b"], "seed": SEED}
    got = dpfast.ir_dp(frame, **args)
    expected = dpfast.ir_dp(table, **args)
    _assert_same_release(got, expected)  # rows shuffled, in the same order
    frame.unpersist()


def test_an_ir_dp_frame_is_written_part_by_part_by_the_executors(spark, tmp_path):

    table = _table()
    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": ["a", "b"], "seed": SEED}
    data, report, _ = on_engine("spark", dpfast.ir_dp, _frame(spark, table), part_rows=700, **args)
    SparkEngine.write_release(data, tmp_path / "parts", report)
    expected = dpfast.ir_dp(table, **args).data
    names = sorted(p.name for p in (tmp_path / "parts").iterdir())
    assert names == [f"part-{i:06d}.parquet" for i in range(5)]  # pyarrow, a file a part
    written = pq.read_table(tmp_path / "parts")
    assert written.schema.field("b").type == pa.int64()
    pd.testing.assert_frame_equal(written.to_pandas(), expected)  # rows in the same order
    # a transformed frame goes through Spark's own writer, and gives the same rows
    SparkEngine.write_release(data.select("a", "b"), tmp_path / "spark", report)
    assert not any(p.name.startswith("part-0000000") for p in (tmp_path / "spark").iterdir())
    pd.testing.assert_frame_equal(pq.read_table(tmp_path / "spark").to_pandas(), expected)


def test_a_part_written_again_or_failing_midway_leaves_one_whole_file(spark, tmp_path, monkeypatch):
    from dpfast.engines.frames import WritePlan, plan_of
    from dpfast.engines.spark import _write

    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": ["a", "b"], "seed": SEED}
    data, _, _ = on_engine("spark", dpfast.ir_dp, _frame(spark, _table()), part_rows=700, **args)
    parts = plan_of(data).generated
    assert parts is not None and parts.count == 5
    assert not [name for name in vars(data) if name.startswith("_dpfast")]  # nothing set on it
    assert plan_of(data.select("a")) == WritePlan()
    task = [pa.RecordBatch.from_arrays([pa.array([3], pa.int64())], names=["id"])]
    done = list(_write._write_part(task, parts, str(tmp_path)))  # as a task, in process
    first = (tmp_path / "part-000003.parquet").read_bytes()
    assert done[0].to_pydict() == {"part": [3], "rows": [700]}
    list(_write._write_part(task, parts, str(tmp_path)))  # a retried or speculative attempt
    assert (tmp_path / "part-000003.parquet").read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-000003.parquet"]

    def full(table, where, **kwargs):
        Path(where).write_bytes(b"PAR1 cut short")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_write.pq, "write_table", full)
    (tmp_path / "none").mkdir()
    with pytest.raises(OSError, match="No space left"):
        list(_write._write_part(task, parts, str(tmp_path / "none")))
    assert list((tmp_path / "none").iterdir()) == []  # neither the part nor its temporary


def test_an_interrupt_while_the_executors_write_ir_dp_parts_leaves_nothing(spark, tmp_path):
    import os
    import signal

    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": ["a", "b"], "seed": SEED}
    data, report, _ = on_engine(
        "spark", dpfast.ir_dp, _frame(spark, _table(40_000)), part_rows=100, **args
    )
    sent = []

    def progress(phase, done, total):  # the poller's thread, while the tasks run
        if not sent and done < total:
            sent.append(phase)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        SparkEngine.write_release(data, tmp_path / "out", report, progress=progress)
    assert sent == ["writing out"]
    tracker = spark.sparkContext.statusTracker()
    for _ in range(300):  # cancelled tasks end after their job does
        if not tracker.getActiveStageIds():
            break
        time.sleep(0.1)
    assert list(tmp_path.iterdir()) == []
    assert spark.range(5).count() == 5


@pytest.mark.parametrize("reader", ["spark", "pyarrow"])
@pytest.mark.parametrize(("bad", "value"), [(2500, np.nan), (1500, -np.inf)])
def test_a_bad_value_in_parquet_files_names_its_row_as_in_memory(
    spark, tmp_path, bad, value, reader
):

    table = _table()
    table.loc[bad, "a"] = value
    files = _write_files(table, tmp_path / "in", [1000, 2000])
    source = SparkSource.from_parquet(spark, files, reader=reader)
    args = {"k": 5, "epsilon": EPSILON, "bounds": BOUNDS, "columns": ["a", "b"], "seed": SEED}
    with pytest.raises(ValueError) as expected:
        dpfast.ir_dp(table, **args)
    with pytest.raises(ValueError) as got:  # the sort does not number rows; the error does
        on_engine("spark", dpfast.ir_dp, source, **args)
    assert str(got.value) == str(expected.value)
    assert str(bad) in str(got.value)


@pytest.mark.parametrize(
    ("method", "kwargs", "named"),
    [
        # linkage, shuffle and unprotected run (tests/test_engine_spark_methods.py)
        (dpfast.ir_dp, {"k": 5, "linkage": "records", "metrics": True}, "metrics=True"),
        (dpfast.laplace_dp, {"metrics": True}, "metrics=True"),
    ],
)
def test_what_spark_cannot_run_is_refused_by_name(spark, method, kwargs, named):
    frame = _frame(spark, _table(20))
    arguments = {"epsilon": 1.0, "bounds": BOUNDS, "columns": ["a", "b"], **kwargs}
    with pytest.raises(
        ValueError, match="which a release on a Spark DataFrame does not hold"
    ) as refused:
        method(frame, **arguments)
    assert named in str(refused.value)
    assert "frame.toPandas()" in str(refused.value)


def test_risk_is_refused_on_spark_before_any_job(spark):
    frame = _frame(spark, _table(20))
    with pytest.raises(
        ValueError, match="risk=True pairs each released row with its source"
    ) as got:
        dpfast.laplace_dp(frame, epsilon=1.0, bounds=BOUNDS, columns=["a", "b"], risk=True)
    assert "on a Spark DataFrame" in str(got.value) and "frame.toPandas()" in str(got.value)


def test_an_executor_error_of_laplace_reaches_the_caller(spark):
    table = _table()
    table.loc[2345, "a"] = np.inf
    frame = _frame(spark, table).repartition(3).cache()
    with pytest.raises(
        ValueError, match=r"column 'a' has \d+ non-finite value\(s\) \(first at row \d+: "
    ):
        dpfast.laplace_dp(frame, epsilon=EPSILON, bounds=BOUNDS, columns=["a"], seed=SEED)
    frame.unpersist()


def _flaky_frame(spark, marker: Path | None):
    """A frame of column "a" whose first task fails once (always, without a marker)."""
    source = SparkSource(_frame(spark, _table()).repartition(2).cache())
    where = None if marker is None else str(marker)

    def copy(batch, first_row):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == 0 and (where is None or context.attemptNumber() == 0):
            if where is not None:
                Path(where).touch()
            raise RuntimeError("a lost executor, simulated")
        return batch

    return source, source.map_batches(["a"], 500, copy, "a double")


def test_a_task_of_the_output_failing_once_writes_the_same_rows(spark, tmp_path):
    marker = tmp_path / "failed-once"
    source, data = _flaky_frame(spark, marker)
    calls = []
    SparkEngine.write_release(
        data, tmp_path / "out", None, progress=lambda *call: calls.append(call)
    )
    assert marker.exists()  # a task did fail, and was retried
    got = pq.read_table(tmp_path / "out").column("a").to_numpy()
    np.testing.assert_array_equal(got, _rows(source.frame)["a"].to_numpy())
    assert calls[-1] == ("writing out", 1, 1)


def test_a_failed_write_leaves_no_output(spark, tmp_path):
    _, data = _flaky_frame(spark, None)
    published = []
    with pytest.raises(Exception, match="a lost executor, simulated"):
        SparkEngine.write_release(data, tmp_path / "out", None, before_publish=published.append)
    assert published == []
    assert list(tmp_path.iterdir()) == []  # neither the output nor the scratch directory
    # the write ran in a job group of its own, and the thread's is as it was
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


@pytest.mark.parametrize("stop", [RuntimeError("the budget is spent"), KeyboardInterrupt()])
def test_a_refused_or_interrupted_publication_leaves_no_output(spark, tmp_path, stop):
    data = _frame(spark, _table(50))

    def refuse(report) -> None:
        raise stop

    with pytest.raises(type(stop)):
        SparkEngine.write_release(data, tmp_path / "out", None, before_publish=refuse)
    assert list(tmp_path.iterdir()) == []
    # an output named .parquet is a dataset directory too, as Spark's own writer makes it
    SparkEngine.write_release(data, tmp_path / "out.parquet", None)
    assert (tmp_path / "out.parquet").is_dir()
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 50


def test_cli_laplace_on_spark_writes_the_in_memory_release(spark, tmp_path, capsys):
    from dpfast import cli
    from dpfast._release import cli_spelling

    table = _table()
    files = _write_files(table, tmp_path / "in", [1, 1700])
    schema = {
        "columns": {
            "a": {"type": "float", "bounds": [0, 50]},
            "b": {"type": "integer", "bounds": [-10, 10]},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    args = ["release", "laplace", str(files), "--epsilon", str(EPSILON), "--seed", str(SEED)]
    args += ["--schema", str(tmp_path / "s.json"), "--engine", "spark", "--master", "local[2]"]
    assert cli.main([*args, "-o", str(tmp_path / "out.parquet"), "--quiet"]) == 0
    assert (tmp_path / "out.parquet").is_dir()  # a dataset directory, whatever its suffix
    assert cli.main([*args, "-o", str(tmp_path / "out"), "--quiet"]) == 0
    assert pq.read_table(tmp_path / "out.parquet").equals(pq.read_table(tmp_path / "out"))
    with cli_spelling():
        expected = _in_memory(table)
    got = pq.read_table(tmp_path / "out").to_pandas()
    for name in expected.data.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    report = json.loads((tmp_path / "out.public-report.json").read_text("utf-8"))
    want = json.loads(json.dumps(expected.report.to_dict()))
    assert apart_from_engine(report) == apart_from_engine(want)
