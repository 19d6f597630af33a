"""Every out-of-core method on Spark: the public functions given a Spark frame, and the CLI."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.datasets import adult, adult_taxonomy
from dpfast.exceptions import UnprovenReleaseWarning

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install dpfast[spark])")

from dpfast.dataflow.flow import FAN
from dpfast.engines.spark._settings import SCRATCH_KEY, scratch_directory
from tests.engine_runs import apart_from_engine

N = 601
BOUNDS = {"a": (0.0, 50.0), "b": (-10, 10)}
NUMERIC = {"bounds": BOUNDS, "columns": ["a", "b"], "seed": 3}


def _table(n: int = N) -> pd.DataFrame:
    """A float column (some values clamped), an integer one and a text one."""
    rng = np.random.default_rng(8)
    return pd.DataFrame(
        {
            "a": rng.uniform(-5, 55, n),
            "b": rng.integers(-12, 13, n),
            "note": [f"n{i % 5}" for i in range(n)],
        }
    )


def _frame(spark, table: pd.DataFrame, partitions: int):
    frame = spark.createDataFrame(pa.Table.from_pandas(table, preserve_index=False))
    return frame.repartition(partitions).cache()


def _rows(frame) -> pd.DataFrame:
    return frame.toArrow().to_pandas()


def _plain(data: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as their values (Spark has strings, never categories)."""
    out = data.copy()
    for name in out.columns:
        if isinstance(out[name].dtype, pd.CategoricalDtype):
            out[name] = out[name].astype(object)
        if not pd.api.types.is_numeric_dtype(out[name].dtype):
            out[name] = out[name].astype(str)
    return out


def _assert_same(got: dpfast.Release, expected: dpfast.Release, in_order: bool) -> None:
    data, want = _plain(_rows(got.data)), _plain(expected.data)
    assert list(data.columns) == list(want.columns)
    for name in want.columns:
        assert data[name].dtype == want[name].dtype, name
    if not in_order:  # the method shuffles: the same multiset of rows
        data = data.sort_values(list(data.columns), ignore_index=True)
        want = want.sort_values(list(want.columns), ignore_index=True)
    pd.testing.assert_frame_equal(data, want, check_dtype=True)
    assert apart_from_engine(got.report) == apart_from_engine(expected.report)
    assert got.private.clamped == expected.private.clamped
    assert got.private.clamped_output == expected.private.clamped_output
    assert got.private.input_rows == expected.private.input_rows


def _warns(unproven: bool) -> Any:
    if unproven:
        return pytest.warns(UnprovenReleaseWarning, match="NOT proven")
    return contextlib.nullcontext()


CASES = {
    "ir_dp records": (
        dpfast.ir_dp,
        {"k": 5, "epsilon": 4.0, "linkage": "records", "shuffle": False, **NUMERIC},
        True,
    ),
    "ir_dp columns": (
        dpfast.ir_dp,
        {"k": 4, "epsilon": 4.0, "unprotected": "shuffle", **NUMERIC},
        False,
    ),
    "laplace keep": (
        dpfast.laplace_dp,
        {"epsilon": 8.0, "unprotected": "keep", **NUMERIC},
        True,
    ),
    "laplace shuffle": (
        dpfast.laplace_dp,
        {"epsilon": 8.0, "unprotected": "shuffle", **NUMERIC},
        False,
    ),
    "individual_ranking": (dpfast.individual_ranking, {"k": 3, "columns": ["a", "b"]}, False),
    "randomized_response": (
        dpfast.randomized_response,
        {"column": "note", "domain": [f"n{i}" for i in range(6)], "epsilon": 1.0, "seed": 4},
        True,
    ),
    "k_noise": (dpfast.k_noise, {"k": 4, "columns": ["a", "b"], "seed": 5}, True),
    "k_pram": (dpfast.k_pram, {"k": 6, "columns": ["b"], "retention": 0.3, "seed": 6}, True),
    "mdav_dp": (dpfast.mdav_dp, {"k": 9, "epsilon": 3.0, **NUMERIC}, False),
    "mdav_dp cycling keep": (
        dpfast.mdav_dp,
        {"k": 9, "epsilon": 3.0, "reference": "cycling", "unprotected": "keep", **NUMERIC},
        False,
    ),
}


@pytest.fixture(scope="module")
def frames(spark):
    """``frames(partitions)``: the cached frame of ``_table()`` in that many partitions and
    its rows in the frame's own order (partition, then position).

    Each is made once for the module: the releases only read it, and sending the table to
    Spark and reading it back cost a job each, as much as some releases.
    """
    made: dict[int, tuple[Any, pd.DataFrame]] = {}

    def frame(partitions: int) -> tuple[Any, pd.DataFrame]:
        if partitions not in made:
            cached = _frame(spark, _table(), partitions)
            made[partitions] = (cached, _rows(cached))
        return made[partitions]

    yield frame
    for cached, _ in made.values():
        cached.unpersist()


@pytest.mark.parametrize("partitions", [2, 7])
@pytest.mark.parametrize("case", list(CASES))
def test_a_spark_frame_gives_the_in_memory_release(frames, case, partitions):
    function, options, in_order = CASES[case]
    frame, rows = frames(partitions)
    unproven = options.get("linkage") == "records"
    with _warns(unproven):  # the same warning on Spark as in memory
        # the frame's own order (partition, then position) is the table's
        expected = function(rows.copy(), **options)
    with _warns(unproven):
        got = function(frame, **options)
    assert type(got.data).__module__.startswith("pyspark.sql")
    _assert_same(got, expected, in_order)


@pytest.mark.parametrize("partitions", [1, FAN + 1])  # FAN + 1: totals added in two rounds
def test_laplace_keep_at_one_and_many_partitions(frames, partitions):
    test_a_spark_frame_gives_the_in_memory_release(frames, "laplace keep", partitions)


def test_diffgen_of_a_spark_frame_gives_the_in_memory_counts(spark):
    names = ["age", "education", "sex", "income"]
    table = adult("train", drop_missing=True).iloc[:800][names].reset_index(drop=True)
    options = {
        "target": "income",
        "epsilon": 1.0,
        "steps": 6,
        "taxonomies": {n: adult_taxonomy(n) for n in ("education", "sex")},
        "bounds": {"age": (17, 90)},
        "classes": ["<=50K", ">50K"],
        "seed": 7,
    }
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    frame = spark.createDataFrame(arrow).repartition(7).cache()
    ordered = frame.toArrow()
    expected = dpfast.diffgen(ordered, **options)
    got = dpfast.diffgen(frame, **options)
    counts = got.counts.toArrow()
    want = expected.counts
    assert counts.column_names == want.column_names
    for name in want.column_names:
        column = want.column(name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        assert counts.column(name).to_pylist() == column.to_pylist(), name
    assert apart_from_engine(got.report) == apart_from_engine(expected.report)
    assert got.private.input_rows == expected.private.input_rows
    frame.unpersist()


def test_release_files_live_in_the_configured_scratch_directory(spark, tmp_path):
    spark.conf.set(SCRATCH_KEY, str(tmp_path / "shared"))
    try:
        frame = _frame(spark, _table(50), 2)
        # a release the driver writes (ranks linked to their rows), not a lazy frame
        got = dpfast.individual_ranking(frame, k=3, columns=["a"])
        where = scratch_directory(spark)
        assert where.parent == tmp_path / "shared"
        assert [p.suffix for p in where.iterdir()] == [".parquet"]
        assert got.data.count() == 50
    finally:
        spark.conf.unset(SCRATCH_KEY)


def test_k_noise_of_every_column_is_computed_by_the_executors(spark, tmp_path):
    # every column released row by row: a lazy frame of the input's batches, no file
    spark.conf.set(SCRATCH_KEY, str(tmp_path / "shared"))
    try:
        table = _table()[["a", "b"]]
        frame = _frame(spark, table, 3)
        expected = dpfast.k_noise(_rows(frame), k=4, seed=5)
        got = dpfast.k_noise(frame, k=4, seed=5)
        _assert_same(got, expected, True)
        assert not list(scratch_directory(spark).iterdir())
        frame.unpersist()
    finally:
        spark.conf.unset(SCRATCH_KEY)


@pytest.mark.parametrize(
    ("function", "options", "named"),
    [
        (dpfast.individual_ranking, {"k": 3, "metrics": True}, "metrics=True"),
        (dpfast.mdav, {"k": 3, "columns": ["a", "b"]}, r"memory only.*spark engine.*mdav_dp"),
    ],
)
def test_what_spark_cannot_run_is_refused_by_name(spark, function, options, named):
    frame = _frame(spark, _table(20), 1)
    with pytest.raises(ValueError, match=named):
        function(frame, **options)


def _cli(tmp_path: Path, method: str, extra: list[str]) -> tuple[list[str], Path]:
    table = _table()
    where = tmp_path / "in"
    where.mkdir()
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    pq.write_table(arrow.slice(0, 250), where / "part-0.parquet", row_group_size=64)
    pq.write_table(arrow.slice(250), where / "part-1.parquet", row_group_size=64)
    schema = {
        "columns": {
            "a": {"type": "float", "bounds": [0, 50]},
            "b": {"type": "integer", "bounds": [-10, 10]},
            "note": {"type": "string", "protect": False},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    args = ["release", method, str(where), "--schema", str(tmp_path / "s.json"), "--seed", "3"]
    return [*args, *extra, "-o", str(tmp_path / "out"), "--quiet"], where


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("ir-dp", ["--k", "5", "--epsilon", "4", "--linkage", "records", "--unprotected", "keep"]),
        ("k-noise", ["--k", "4"]),
    ],
)
def test_cli_on_spark_writes_the_local_engine_release(spark, tmp_path, method, extra):
    from dpfast import cli

    args, _ = _cli(tmp_path, method, extra)
    assert cli.main([*args, "--engine", "spark"]) == 0
    local = tmp_path / "local"
    local.mkdir()
    at = args.index(str(tmp_path / "out"))
    assert cli.main([*args[:at], str(local / "out"), *args[at + 1 :]]) == 0
    got, want = pq.read_table(tmp_path / "out"), pq.read_table(local / "out")
    assert got.equals(want)
    report = json.loads((tmp_path / "out.public-report.json").read_text("utf-8"))
    want = json.loads((local / "out.public-report.json").read_text("utf-8"))
    assert apart_from_engine(report) == apart_from_engine(want)
