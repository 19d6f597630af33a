"""The private report's ``work``: what a release's passes did, counted as they ran.

The counters are checked against what each pass must do: a batch pass returns one result
a batch, a sort one a range; an output pass over a permutation reads the whole bucket
stream (``n`` items) to write its part. docs/scale.md reads them against its cost model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.accounting import report_schema
from dpfast.engines import EngineChoice
from dpfast.engines.outofcore._sources import ArrowSource
from dpfast.engines.outofcore._work import CountedSource, Work, result_bytes
from dpfast.exceptions import DPFastTypeError
from tests.engine_runs import on_engine

K, EPSILON, SEED = 10, 4.0, 3
BOUNDS = {"a": (0.0, 100.0), "b": (-50.0, 50.0)}


def _table(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame({"a": rng.uniform(0, 100, n), "b": rng.normal(0, 20, n)})


# --------------------------------------------------------------------------- the counters


def test_result_bytes_counts_arrays_and_pickles_the_rest():
    sums = np.zeros(100, dtype=np.int64)
    assert result_bytes(sums) == 800
    assert result_bytes((3, sums, [np.zeros(4, dtype=np.float32)], None)) == 8 + 800 + 16 + 8
    assert result_bytes(pa.array(np.arange(10, dtype=np.int64))) == 80
    assert result_bytes(b"abc") == 3
    assert result_bytes({"x": 1}) > 0  # pickled


def test_a_counted_source_counts_each_batch_its_rows_and_its_result():
    table = pa.table({"x": np.arange(2500, dtype=np.float64)})
    work = Work()
    source = CountedSource(ArrowSource(table), work)
    got = list(source.map_column("x", 1000, lambda array, first: (first, array.to_numpy())))
    assert [first for first, _ in got] == [0, 1000, 2000]  # the results, unchanged
    assert work.tasks == 3 and work.largest_task_rows == 1000 and work.task_rows == 2500
    assert work.driver_bytes == 3 * 8 + 2500 * 8
    assert source.names == ["x"] and source.n_rows == 2500 and source.dataset.table is table
    assert work.to_dict()["output_passes"] == 0


def test_a_counted_source_sorts_only_where_its_source_does_and_counts_each_range():
    table = pa.table({"x": np.arange(10, dtype=np.float64)})

    class Sorting(ArrowSource):
        sorts_in_place = True
        sort_tasks = 2

        def sort_ranges(self, name, batch_rows, keys, ranges, key_bits, reduce):
            values = np.sort(self.table.column(name).to_numpy()).astype(np.uint64)
            return [reduce(i, part) for i, part in enumerate((values[:3], values[3:]))]

    plain = CountedSource(ArrowSource(table), Work())
    assert (plain.sorts_in_place, plain.sort_tasks) == (False, 1)
    with pytest.raises(DPFastTypeError, match="ArrowSource does not sort ranges"):
        plain.sort_ranges("x", 5, None, None, 8, lambda i, ordered: 0)
    work = Work()
    source = CountedSource(Sorting(table), work)
    assert (source.sorts_in_place, source.sort_tasks) == (True, 2)
    assert isinstance(source.dataset, Sorting)
    sums = source.sort_ranges("x", 5, None, None, 8, lambda i, ordered: int(ordered.sum()))
    assert sums == [0 + 1 + 2, sum(range(3, 10))]
    assert work.tasks == 2 and work.largest_task_rows == 7 and work.driver_bytes == 16
    assert work.task_rows == 10


# --------------------------------------------------------------------------- releases


def test_a_release_in_memory_has_no_work_and_one_out_of_core_does(tmp_path):
    n, columns = 200_000, 2
    table = _table(n)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path, row_group_size=40_000)
    memory = dpfast.ir_dp(table, k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED)
    assert "work" not in memory.private.to_dict()
    # 1 MiB: a column's output order (4 buckets of about 50k rows) is placed in several
    # passes over its bucket stream
    release = dpfast.ir_dp(
        ds.dataset(path), k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED,
        output=tmp_path / "out", memory_limit=1 << 20,
    )  # fmt: skip
    work = release.private.to_dict()["work"]
    assert work["output_items"] == n * columns  # every item written once
    assert work["output_passes"] > columns  # several bucket ranges a column
    assert work["output_scanned"] == work["output_passes"] * n  # each pass scans the stream
    assert work["tasks"] > 0 and 0 < work["largest_task_rows"] <= n
    schema = report_schema("private")
    assert "work" in schema["properties"]
    import jsonschema

    jsonschema.validate(release.private.to_dict(), schema)


@pytest.fixture(scope="module")
def client(dask_cluster):
    """A client of the two worker processes of one thread (only dpfast's functions are sent)."""
    from tests.dask_clients import dask_client

    with dask_client(dask_cluster) as running:
        yield running


def _assert_sent_ranks(work: dict[str, int], n: int, parts: int) -> None:
    """The counters of an ``ir_dp`` release of two columns written in ``parts`` parts.

    The sort's tasks send each rank to the parts holding its bucket; 6,001 ranks are one
    bucket, which every part's bounds cut, so each part receives all of it. No sort's
    result comes to the driver: only the histogram pass's partial totals, one a partition
    (of three) for each of the two columns.
    """
    assert work["output_passes"] == parts
    assert work["output_items"] == 2 * n
    assert work["output_scanned"] == parts * 2 * n
    assert work["tasks"] == 2 * 3


def _assert_driver_groups(work: dict[str, int], n: int, parts: int) -> None:
    """The counters of a release of two columns whose rank groups come to the driver."""
    # every rank group's sum comes to the driver: the O(n / k) bytes of docs/scale.md
    assert work["driver_bytes"] >= 2 * 8 * (n // K)
    assert work["output_passes"] == parts
    assert work["output_items"] == 2 * n
    # each part's task reads every column's whole bucket stream: parts x n a column
    assert work["output_scanned"] == parts * 2 * n


@pytest.mark.parametrize(
    ("memory_limit", "send_ranks"),
    [(1 << 15, None), (1 << 30, True), (1 << 30, None), (1 << 15, False)],
)
def test_a_dask_release_counts_its_driver_bytes_and_its_output_scans(
    client, tmp_path, memory_limit, send_ranks
):
    import dask.dataframe as dd

    n, part_rows = 6001, 1000
    frame = dd.from_pandas(_table(n), npartitions=3, sort=False)
    _, _, private = on_engine("dask", dpfast.ir_dp,
        frame, k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED, memory_limit=memory_limit,
        output=tmp_path / "out", batch_rows=500, part_rows=part_rows, n_threads=1,
        send_ranks=send_ranks,
    )  # fmt: skip
    work = private.to_dict()["work"]
    parts = -(-n // part_rows)
    # by cost (None): a column larger than a sort task's 1,024 keys sends its ranks; one
    # that fits, on 7 parts, brings its groups to the driver
    if send_ranks or (send_ranks is None and memory_limit == 1 << 15):
        _assert_sent_ranks(work, n, parts)
        # however many ranges the limit cuts: partial totals of at most 2,001 rows
        assert work["largest_task_rows"] == 2001
    elif memory_limit == 1 << 15:  # many ranges, each a task of at most 1,024 keys
        _assert_driver_groups(work, n, parts)
        assert work["tasks"] > 2 * 6 and work["largest_task_rows"] == 2001
    else:  # one range a column: its task sorts the whole column
        _assert_driver_groups(work, n, parts)
        assert work["tasks"] == 2 and work["largest_task_rows"] == n


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_a_dask_release_brings_the_driver_no_rank_group(client, tmp_path):
    """The driver's bytes at 10M rows are those at 1M rows; each rank is placed once."""
    import dask.dataframe as dd

    got = {}
    for n in (1_000_000, 10_000_000):
        rng = np.random.default_rng(n)
        path = tmp_path / f"in-{n}"
        path.mkdir()
        for i in range(4):  # four partitions of uniform values and of integers
            columns = {"a": rng.uniform(0, 100, n // 4), "b": rng.integers(0, 1000, n // 4)}
            pq.write_table(pa.table(columns), path / f"part-{i}.parquet")
        release = dpfast.ir_dp(
            dd.read_parquet(path), k=10, epsilon=1.0, bounds={"a": (0, 100), "b": (0, 1000)},
            seed=SEED, output=tmp_path / f"out-{n}",
            engine=EngineChoice("dask", {"send_ranks": True}),
        )  # fmt: skip
        work = release.private.to_dict()["work"]
        got[n] = work["driver_bytes"]
        assert work["output_items"] == 2 * n
        # each rank placed once, but for a bucket (about 2**16 ranks) a part's bound cuts
        cut = 2 * (work["output_passes"] - 1) * 1.2 * 2**16
        assert 2 * n <= work["output_scanned"] <= 2 * n + cut
    assert got[10_000_000] <= 1.5 * got[1_000_000]
    assert got[10_000_000] < 2 * 8 * (10_000_000 // 10)  # below the groups' sums


def test_a_spark_release_counts_its_driver_bytes_and_its_output_scans(spark, tmp_path):
    n, part_rows = 6001, 1500
    frame = spark.createDataFrame(pa.Table.from_pandas(_table(n), preserve_index=False))
    _, _, private = on_engine("spark", dpfast.ir_dp,
        frame.repartition(3), k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED,
        memory_limit=1 << 15, output=tmp_path / "out", batch_rows=500, part_rows=part_rows,
        n_threads=1, send_ranks=True,
    )  # fmt: skip
    work = private.to_dict()["work"]
    _assert_sent_ranks(work, n, -(-n // part_rows))
    assert 2000 <= work["largest_task_rows"] <= 2001  # partitions of 2,000 or 2,001 rows


def test_a_lazy_cluster_frame_counts_no_output_pass_before_it_is_computed(client):
    import dask.dataframe as dd

    frame = dd.from_pandas(_table(3001), npartitions=2, sort=False)
    release = dpfast.ir_dp(frame, k=K, epsilon=EPSILON, bounds=BOUNDS, seed=SEED)
    work = release.private.to_dict()["work"]
    assert work["output_passes"] == work["output_scanned"] == work["output_items"] == 0
    assert work["driver_bytes"] >= 2 * 8 * (3001 // K)


def test_an_out_of_core_mdav_dp_counts_its_output_order_passes(tmp_path):
    # one permutation orders every column's clusters: each part of it is one pass over
    # its stream, counted once for all the columns written from it
    n = 200_000
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(_table(n), preserve_index=False), path)
    release = dpfast.mdav_dp(
        ds.dataset(path), k=50, epsilon=EPSILON, bounds=BOUNDS, seed=SEED,
        output=tmp_path / "out", memory_limit=2 << 20,
    )  # fmt: skip
    work = release.private.to_dict()["work"]
    assert work["output_items"] == n
    assert work["output_passes"] >= 2  # the permutation's buckets: parts of their own
    assert work["output_scanned"] == work["output_passes"] * n
