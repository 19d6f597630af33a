"""Totals added where the batches are read (``add_column``): the sum of every batch's
result, and the first row's failure, whatever the partitions and the tree of additions.

Checked against the slow, obvious reading (every batch's result added on the driver, or
the error of the first failing batch in row order), then on Dask and Spark, whose
histogram passes send a few partial totals to the driver instead of one a batch.
"""

from __future__ import annotations

import functools
import pickle
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpfast
from dpfast.dataflow.flow import add_up, column_total
from dpfast.engines.outofcore import ArrowSource
from dpfast.engines.partial_totals import Partial, combined, partials_of, totals
from dpfast.exceptions import DPFastValueError
from tests.engine_runs import on_engine


def _histogram(array: pa.Array, first_row: int) -> tuple[np.ndarray, int]:
    """A batch's counts of its values mod 7, and its rows (a tuple of results)."""
    values = array.to_numpy()
    return np.bincount(values % 7, minlength=7), len(values)


def _refusing(array: pa.Array, first_row: int) -> int:
    """Refuse a batch holding a value of 13 or 17, naming its row."""
    values = array.to_numpy()
    bad = np.flatnonzero((values == 13) | (values == 17))
    if bad.shape[0]:
        raise DPFastValueError(f"bad value at row {first_row + int(bad[0])}")
    return int(values.sum())


def test_add_up_adds_numbers_arrays_and_tuples_of_them():
    got = add_up((np.array([1, 2]), 3, (4, np.array([5]))), (np.array([10, 20]), 30, (40, [50])))
    assert got[0].tolist() == [11, 22] and got[1] == 33
    assert got[2][0] == 44 and got[2][1].tolist() == [55]


def test_partials_add_in_any_order_to_the_sum_of_every_batch():
    rng = random.Random(3)
    values = np.arange(10_000, dtype=np.int64) * 31 % 1000
    array = pa.array(values)
    batches = [(array.slice(f, 700), f) for f in range(0, 10_000, 700)]
    want = (np.bincount(values % 7, minlength=7), 10_000)
    for _ in range(5):  # partitions of random sizes, added in a random tree
        cuts = sorted(rng.sample(range(1, len(batches)), 4))
        groups = [batches[a:b] for a, b in zip([0, *cuts], [*cuts, len(batches)], strict=True)]
        partials = [partials_of(group, _histogram) for group in groups] + [Partial()]
        rng.shuffle(partials)
        while len(partials) > 2:
            i = rng.randrange(len(partials) - 1)
            partials[i : i + 2] = [combined(partials[i : i + 2])]
        found = totals(partials)
        got = functools.reduce(add_up, [total for total, _ in found])
        assert got[0].tolist() == want[0].tolist() and got[1] == want[1]
        # the largest task behind each total: the most rows of a partition
        assert max(largest for _, largest in found) == max(
            sum(len(a) for a, _ in group) for group in groups
        )


def test_the_first_failing_row_among_all_partials_is_raised():
    values = np.zeros(5_000, dtype=np.int64)
    values[[4_321, 1_234, 2_999]] = [13, 17, 13]
    array = pa.array(values)
    batches = [(array.slice(f, 500), f) for f in range(0, 5_000, 500)]
    # the task holding row 1,234 fails at its batch; so do later ones, at theirs
    partials = [partials_of(batches[i : i + 3], _refusing) for i in range(0, 10, 3)]
    assert {p.failed_row for p in partials if p.error} == {1_000, 4_000, 2_500}
    for order in (partials, partials[::-1]):
        with pytest.raises(DPFastValueError, match="bad value at row 1234"):
            totals([combined(order[:2]), combined(order[2:])])
    # the obvious reading: the first failing batch in row order
    with pytest.raises(DPFastValueError, match="bad value at row 1234"):
        for array_, first in batches:
            _refusing(array_, first)


def test_an_error_that_does_not_pickle_comes_back_as_a_runtime_error():
    class Unpicklable(ValueError):
        def __reduce__(self):
            raise TypeError("no")

    def fail(array, first_row):
        raise Unpicklable("kept message")

    partial = partials_of([(pa.array([1]), 0)], fail)
    with pytest.raises(RuntimeError, match="Unpicklable: kept message"):
        totals([partial])
    assert pickle.loads(pickle.dumps(partial)).failed_row == 0


def test_column_total_of_a_source_without_add_column_adds_its_batches():
    table = pa.table({"x": pa.array(np.arange(2_500, dtype=np.int64))})
    counts, rows = column_total(ArrowSource(table), "x", 1000, _histogram, (np.zeros(7), 0))
    assert counts.tolist() == np.bincount(np.arange(2_500) % 7).tolist() and rows == 2_500
    empty = pa.table({"x": pa.array([], pa.int64())})
    assert column_total(ArrowSource(empty), "x", 1000, _refusing, 5) == 5


# ------------------------------------------------------------------ on Spark and on Dask


def _values(n: int) -> pd.DataFrame:
    x = np.arange(n, dtype=np.int64) * 7919 % 100_003 + 20  # none of 13 and 17 ...
    x[[31_337, 12_345]] = [13, 17]  # ... but two
    return pd.DataFrame({"x": x})


def _check_cluster_totals(source, values: np.ndarray, partials: int) -> None:
    """``add_column`` gives ``partials`` totals adding to every batch's, and the first error."""
    got = source.add_column("x", 97, _histogram)
    assert len(got) == partials  # partial totals, not one a batch (413 batches here)
    counts, rows = functools.reduce(add_up, [total for total, _ in got])
    assert 0 < max(largest for _, largest in got) < values.shape[0] // 10  # a partition
    assert counts.tolist() == np.bincount(values % 7, minlength=7).tolist()
    assert rows == values.shape[0]
    with pytest.raises(DPFastValueError, match="bad value at row") as raised:
        source.add_column("x", 97, _refusing)
    first = int(np.flatnonzero((values == 13) | (values == 17))[0])
    assert str(raised.value) == f"bad value at row {first}"


def test_dask_adds_the_batches_on_the_workers_in_a_tree(client):
    import dask.dataframe as dd

    from dpfast.engines.dask import DaskSource

    table = _values(40_000)
    source = DaskSource(dd.from_pandas(table, npartitions=70))
    _check_cluster_totals(source, table["x"].to_numpy(), 3)  # 70 -> 3 tasks of 32 at most


def test_spark_adds_the_batches_on_the_executors(spark):
    from dpfast.engines.spark import SparkSource

    frame = spark.createDataFrame(pa.Table.from_pandas(_values(40_000), preserve_index=False))
    frame = frame.repartition(40).cache()  # more tasks than FAN: a second round of additions
    values = frame.toArrow().column("x").to_numpy()  # the frame's own row order
    _check_cluster_totals(SparkSource(frame), values, 2)  # 40 -> ceil(40 / 32) tasks
    frame.unpersist()


def test_a_large_column_on_a_cluster_sends_the_driver_a_few_histograms(client):
    """``ir_dp`` of a column larger than one sort task: its histogram comes back added."""
    import dask.dataframe as dd

    rng = np.random.default_rng(2)
    table = pd.DataFrame({"a": rng.uniform(0, 100, 50_000)})
    frame = dd.from_pandas(table, npartitions=40)
    options = {"k": 10, "epsilon": 4.0, "bounds": {"a": (0.0, 100.0)}, "seed": 1}
    expected = dpfast.ir_dp(table, **options)
    data, _, private = on_engine(
        "dask", dpfast.ir_dp, frame, memory_limit=32 * 20_000, batch_rows=500, **options
    )
    got = data.compute()["a"].to_numpy()
    assert got.tolist() == expected.data["a"].to_numpy().tolist()
    work = private.to_dict()["work"]
    # 100 batches a histogram pass: before, 100 histograms came back; now at most FAN
    # partials a pass, then the sorted ranges' results
    assert work["tasks"] < 100
