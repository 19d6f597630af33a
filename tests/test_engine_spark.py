"""The Spark column source: a seeded release over Spark is the in-memory release, exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.dataflow.flow import FAN
from dpfast.datasets import adult, adult_taxonomy
from dpfast.engines.outofcore._sources import ArrowSource
from tests.engine_runs import apart_from_engine, ir_dp_dataset, on_engine

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install dpfast[spark])")

from dpfast.engines.spark import SparkSource
from dpfast.engines.spark._rows import regroup as _regroup

BOUNDS = {"age": (17, 90), "capital-gain": (0, 100_000), "frac": (0.0, 100.0)}
K, EPSILON, SEED = 7, 2.0, 3


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """Adult's integer columns (many ties), a float column and a categorical one.

    30,162 rows: with k=7 the last rank group holds 13 rows (a remainder group).
    """
    data = adult("train", drop_missing=True)[["age", "capital-gain", "occupation"]]
    data = data.reset_index(drop=True)
    data["frac"] = np.random.default_rng(0).uniform(-5, 105, len(data))  # some clamped
    assert len(data) % K != 0
    return data


@pytest.fixture(scope="module")
def parquet(table: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("spark-input") / "adult.parquet"
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path)
    return str(path)


@pytest.fixture(scope="module")
def expected(table: pd.DataFrame) -> dpfast.Release:
    taxonomies = {"occupation": adult_taxonomy("occupation")}
    return dpfast.ir_dp(
        table, k=K, epsilon=EPSILON, bounds=BOUNDS, taxonomies=taxonomies, seed=SEED
    )


def _release_args(memory_limit: int) -> dict:
    return {
        "k": K,
        "epsilon": EPSILON,
        "bounds": BOUNDS,
        "taxonomies": {"occupation": adult_taxonomy("occupation")},
        "seed": SEED,
        "memory_limit": memory_limit,
        "batch_rows": 1000,
    }


def _rows(frame) -> pd.DataFrame:
    """A Spark frame's rows in order, through Arrow (toPandas warns of pandas >= 3)."""
    return frame.toArrow().to_pandas()


def _assert_same_data(got: pd.DataFrame, expected) -> None:
    assert list(got.columns) == list(expected.data.columns)
    for name in expected.data.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())


def _assert_same_release(output: Path, report, expected) -> None:
    got = pq.read_table(output).to_pandas()
    assert list(got.columns) == list(expected.data.columns)
    for name in expected.data.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    assert apart_from_engine(report) == apart_from_engine(expected.report)


def test_source_describes_the_frame(spark, parquet, table):
    source = SparkSource(spark.read.parquet(parquet))
    assert source.names == ["age", "capital-gain", "occupation", "frac"]
    got = {f.name: f.type for f in source.schema}
    assert got["age"] == pa.int64()
    assert got["frac"] == pa.float64()
    assert got["occupation"] == pa.string()
    assert source.n_rows == len(table)
    narrow = SparkSource(spark.range(3).selectExpr("cast(id as int) as i", "cast(id as float) f"))
    assert [f.type for f in narrow.schema] == [pa.int32(), pa.float32()]


def test_an_older_pyspark_is_refused_with_how_to_upgrade(spark, monkeypatch):
    import pyspark

    from dpfast.exceptions import DPFastImportError

    frame = spark.range(3)
    monkeypatch.setattr(pyspark, "__version__", "4.0.1")
    with pytest.raises(DPFastImportError, match=r"pyspark 4.1 or later .* 4\.0\.1: pip install"):
        dpfast.laplace_dp(frame, epsilon=1.0, columns=["id"], bounds={"id": (0, 2)})
    monkeypatch.setattr(pyspark, "__version__", "4.1.0")
    assert SparkSource(frame).n_rows == 3


def test_regroup_gives_batches_of_consecutive_rows_of_at_most_batch_rows():
    values = pa.array(np.arange(23, dtype=np.int64))
    pieces = [
        (pa.record_batch([values.slice(a, b - a)], ["x"]), a) for a, b in [(0, 5), (5, 5), (5, 23)]
    ]
    got = list(_regroup(pieces, 4))
    assert [(len(b), first) for b, first in got] == [
        (4, 0),
        (4, 4),
        (4, 8),
        (4, 12),
        (4, 16),
        (3, 20),
    ]
    assert pa.concat_arrays([b.column(0) for b, _ in got]).equals(values)
    # rows that jump (10 follows 2) are never joined in one batch
    jumping = [
        (pa.record_batch([values.slice(0, 3)], ["x"]), 0),
        (pa.record_batch([values.slice(10, 3)], ["x"]), 10),
    ]
    assert [(len(b), first) for b, first in _regroup(jumping, 4)] == [(3, 0), (3, 10)]


def test_results_are_collected_through_arrow_in_order(spark):
    from dpfast.engines.spark import _rows

    results = spark.createDataFrame(
        [(1, 0, False, b"a"), (0, 5, True, b"b")],
        "partition int, first_row long, failed boolean, payload binary",
    )
    expected = [(1, 0, False, b"a"), (0, 5, True, b"b")]
    assert _rows.collected(results) == expected
    assert _rows.collected(results, ("payload", "partition")) == [(b"a", 1), (b"b", 0)]


@pytest.mark.parametrize(
    ("partitions", "memory_limit"),
    # 300_000 bytes: 4,687 values to sort per worker (2 workers), several passes a column;
    # FAN + 1 partitions: the partial totals are added in two rounds
    [(1, 2**30), (2, 300_000), (7, 300_000), (FAN + 1, 2**30)],
)
def test_release_is_the_in_memory_release(spark, parquet, expected, partitions, memory_limit):
    frame = spark.read.parquet(parquet).repartition(partitions).cache()
    assert frame.rdd.getNumPartitions() == partitions
    # 4,096 output rows per task: 8 tasks compute the release, in the in-memory order
    data, report, private = on_engine(
        "spark", dpfast.ir_dp, frame, part_rows=4096, **_release_args(memory_limit)
    )
    assert data.rdd.getNumPartitions() == 8
    _assert_same_data(_rows(data), expected)
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped
    assert private.clamped_output == expected.private.clamped_output
    frame.unpersist()


class _FailingOnce(SparkSource):
    """A source whose first batch of partition 0 fails in the task's first attempt."""

    def __init__(self, frame, marker: Path) -> None:
        super().__init__(frame)
        self.marker = str(marker)

    def _flaky(self, fn):
        marker = self.marker

        def flaky(array, first_row):
            from pyspark import TaskContext

            context = TaskContext.get()
            if context.partitionId() == 0 and context.attemptNumber() == 0 and first_row == 0:
                Path(marker).touch()
                raise RuntimeError("a lost executor, simulated")
            return fn(array, first_row)

        return flaky

    def map_column(self, name, batch_rows, fn):
        return super().map_column(name, batch_rows, self._flaky(fn))

    def add_column(self, name, batch_rows, fn, *most):  # the passes whose results add up
        return super().add_column(name, batch_rows, self._flaky(fn), *most)


def test_a_retried_task_gives_the_same_release(spark, parquet, expected, tmp_path):
    frame = spark.read.parquet(parquet).repartition(2)
    marker = tmp_path / "failed-once"
    source = _FailingOnce(frame, marker)
    data, report, _ = on_engine("spark", dpfast.ir_dp, source, **_release_args(2**30))
    assert marker.exists()  # a task did fail, and was retried
    _assert_same_data(_rows(data), expected)
    assert apart_from_engine(report) == apart_from_engine(expected.report)


def test_an_executor_error_reaches_the_caller(spark, table, tmp_path):
    frac = table["frac"].to_numpy().copy()
    frac[1234] = np.nan
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.set_column(arrow.schema.get_field_index("frac"), "frac", pa.array(frac))
    assert arrow.column("frac").null_count == 0  # a NaN, not a missing value
    path = tmp_path / "broken.parquet"
    pq.write_table(arrow, path)
    args = _release_args(2**30)
    with pytest.raises(ValueError) as in_memory:
        ir_dp_dataset(ArrowSource(arrow), tmp_path / "a.parquet", **args)
    frame = spark.read.parquet(str(path)).coalesce(1)
    with pytest.raises(ValueError) as on_spark:
        on_engine("spark", dpfast.ir_dp, frame, **args)
    assert str(on_spark.value) == str(in_memory.value)
    assert "'frac' has 1 non-finite value(s) (first at row 1234: " in str(on_spark.value)
    # rows are numbered across partitions: the same row, found by another task
    with pytest.raises(ValueError) as split:
        on_engine(
            "spark", dpfast.ir_dp, frame.repartition(3).sortWithinPartitions("age").cache(), **args
        )
    assert "'frac' has 1 non-finite value(s) (first at row" in str(split.value)


class _FailingAlways(SparkSource):
    """A source whose every batch fails with an error Spark retries."""

    def map_column(self, name, batch_rows, fn):
        return super().map_column(name, batch_rows, _failing)

    def add_column(self, name, batch_rows, fn, *most):  # the passes whose results add up
        return super().add_column(name, batch_rows, _failing, *most)


def _failing(array, first_row):
    raise OSError("no space left on the executor's disk")


def test_a_task_failing_every_attempt_raises_its_error(spark, parquet, tmp_path):
    source = _FailingAlways(spark.read.parquet(parquet).coalesce(1))
    with pytest.raises(OSError, match=r"^no space left on the executor's disk$") as failed:
        ir_dp_dataset(source, tmp_path / "release.parquet", **_release_args(2**30))
    assert "PythonException" in type(failed.value.__cause__).__name__


def test_cli_engine_spark_writes_the_in_memory_release(spark, table, tmp_path, capsys, monkeypatch):
    import json

    from dpfast import cli
    from dpfast._release import cli_spelling

    (tmp_path / "parts").mkdir()
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    for i, (first, last) in enumerate([(0, 10_000), (10_000, 10_001), (10_001, len(table))]):
        pq.write_table(arrow.slice(first, last - first), tmp_path / "parts" / f"p{i}.parquet")
    taxonomy = Path(dpfast.__file__).parent / "datasets/hierarchies/adult_hierarchy_occupation.csv"
    schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "frac": {"type": "float", "bounds": [0, 100]},
            "occupation": {"type": "categorical", "taxonomy": str(taxonomy)},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    args = ["release", "ir-dp", str(tmp_path / "parts"), "-o", str(tmp_path / "out")]
    args += ["--k", "7", "--epsilon", "2", "--schema", str(tmp_path / "s.json"), "--seed", "3"]
    sorted_columns: list[str] = []
    sort = SparkSource.sort_ranges

    def recorded(source, name, *rest):
        sorted_columns.append(name)
        return sort(source, name, *rest)

    monkeypatch.setattr(SparkSource, "sort_ranges", recorded)
    assert cli.main([*args, "--engine", "spark", "--master", "local[2]", "--quiet"]) == 0
    # the schema-checked source sorts on the executors, as the API's SparkSource does
    assert sorted(sorted_columns) == ["age", "frac"]
    with cli_spelling():
        expected = dpfast.ir_dp(
            table,
            k=7,
            epsilon=2.0,
            bounds={"age": (17, 90), "frac": (0.0, 100.0)},
            taxonomies={"occupation": adult_taxonomy("occupation")},
            columns=["age", "frac", "occupation"],
            seed=3,
        )
    # written by the executors, one file per task, in the in-memory row order
    got = pq.read_table(tmp_path / "out").to_pandas()
    for name in expected.data.columns:
        np.testing.assert_array_equal(got[name].to_numpy(), expected.data[name].to_numpy())
    assert [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")] == []
    report = json.loads((tmp_path / "out.public-report.json").read_text("utf-8"))
    want = json.loads(json.dumps(expected.report.to_dict()))
    assert apart_from_engine(report) == apart_from_engine(want)
    assert not spark.sparkContext._jsc.sc().isStopped()  # a running session is left running
    # --master without --engine spark is refused in one line
    assert cli.main([*args, "--master", "local[2]", "--force"]) == 2
    assert "--master applies to --engine spark" in capsys.readouterr().err


def test_columns_planned_from_several_threads_keep_pyspark_quiet(monkeypatch):
    # pyspark warns of pandas >= 3 whenever it plans mapInArrow; the source silences it
    # inside catch_warnings, whose process-wide state two threads must not enter at once:
    # one thread's exit would drop the other's filter. A stand-in frame plans slowly and
    # warns late, as pyspark can, so that the engine's threads overlap.
    import random
    import time
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from dpfast.engines.spark import _source as spark_module
    from dpfast.engines.spark._rows import PartitionRows

    class SlowPlan:
        def select(self, name):
            return self

        def mapInArrow(self, fn, schema):
            time.sleep(random.uniform(0, 0.002))
            warnings.warn(
                "PySpark does not yet fully support pandas >= 3.0.0.", FutureWarning, stacklevel=2
            )
            return self

    monkeypatch.setattr(spark_module, "collected", lambda results, names=None: [])
    source = SparkSource(SlowPlan())
    source._numbering = PartitionRows((0,))

    def plan(_: int) -> list:
        return list(source.map_column("x", 50, lambda array, first: None))

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(plan, range(400))) == [[]] * 400


def test_cli_quiet_on_spark_prints_only_its_own_lines(spark, tmp_path):
    # a new process starts its own JVM, which printed Spark's notes on its log profile and
    # level, WARN lines (Hadoop's native library, the host's address), the JVM's note on
    # incubator modules and stage progress bars before dpfast's own lines
    import json
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.integers(17, 91, 200), "income": rng.uniform(0, 1e5, 200)})
    frame.to_parquet(tmp_path / "people.parquet", index=False)
    schema = {"age": {"type": "integer", "bounds": [17, 90]}, "income": {"type": "float"}}
    schema["income"]["bounds"] = [0, 100_000]
    (tmp_path / "s.json").write_text(json.dumps({"columns": schema}), encoding="utf-8")
    args = ["release", "ir-dp", "people.parquet", "-o", "out.parquet", "--schema", "s.json"]
    args += ["--k", "25", "--epsilon", "2", "--seed", "1", "--engine", "spark"]
    args += ["--master", "local[1]", "--quiet"]
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "dpfast", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "[Stage" not in done.stderr
    assert [line for line in done.stderr.splitlines() if not line.startswith("dpfast: ")] == []
    assert (tmp_path / "out.parquet").exists()
