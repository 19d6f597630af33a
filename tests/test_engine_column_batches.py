"""A pass over several columns: every source gives the same rows of each, as a struct array.

``map_column(("a", "s"), ...)`` and ``add_column`` with a tuple of names give batches
whose fields are those columns, row for row; they are checked against the table itself
(the slow, obvious reading: a batch starting at row ``f`` holds rows ``f, f + 1, ...``)
on every source: Arrow in memory, Parquet files, a schema-checked source (casts and
refusals per field, rows numbered across the files), the counted source, Dask and Spark.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfast.dataflow.flow import column_total
from dpfast.dataflow.source import column_batch
from dpfast.engines.outofcore._sources import ArrowSource, ParquetDataset, SchemaCheckedSource
from dpfast.engines.outofcore._work import CountedSource, Work
from dpfast.schema import Schema

N = 2003
CUTS = [1, 700, 701, 1500]


def _table(n: int = N) -> pa.Table:
    rng = np.random.default_rng(3)
    return pa.table(
        {
            "a": pa.array(rng.integers(-50, 50, n).astype(np.float64)),
            "s": pa.array([f"s{i % 7}" for i in range(n)]).dictionary_encode(),
            "i": pa.array(np.arange(n, dtype=np.int32)),
        }
    )


def _files(table: pa.Table, where: Path) -> Path:
    """Write ``table`` cut at :data:`CUTS` into files whose names sort in row order."""
    where.mkdir()
    for j, (lo, hi) in enumerate(itertools.pairwise([0, *CUTS, table.num_rows])):
        pq.write_table(table.slice(lo, hi - lo), where / f"part-{j:03d}.parquet", row_group_size=90)
    return where


def _rows(array: pa.Array, first: int) -> tuple[int, dict[str, list]]:
    """A batch's first row and its columns' values (a struct array's fields)."""
    fields = {array.type.field(j).name: array.field(j) for j in range(array.type.num_fields)}
    return first, {name: field.to_pylist() for name, field in fields.items()}


def _assert_rows_of(source, table: pa.Table, names: tuple[str, ...], batch_rows: int) -> None:
    got = sorted(source.map_column(names, batch_rows, _rows), key=lambda r: r[0])
    expected = {name: table.column(name).to_pylist() for name in names}
    covered = 0
    for first, values in got:
        assert list(values) == list(names)  # the fields are the columns, in order
        size = len(values[names[0]])
        assert 0 < size <= batch_rows
        for name in names:
            assert values[name] == expected[name][first : first + size], (name, first)
        assert first == covered  # consecutive batches cover every row once
        covered += size
    assert covered == table.num_rows


def _pair_sum(array: pa.Array, first: int) -> np.ndarray:
    """The sum of ``a`` per label of ``s`` (its seven labels), and the rows: added exactly."""
    a = array.field(0).to_numpy(zero_copy_only=False).astype(np.int64)
    labels = np.asarray(array.field(1).cast(pa.string()).to_pylist())
    sums = [int(a[labels == f"s{j}"].sum()) for j in range(7)]
    return np.array([*sums, len(a)], dtype=np.int64)


def _expected_pair_sum(table: pa.Table) -> np.ndarray:
    columns = [table.column(name).combine_chunks() for name in ("a", "s")]
    return _pair_sum(column_batch(("a", "s"), columns), 0)


def _assert_added(source, table: pa.Table) -> None:
    """``add_column`` of two columns: a partial a partition, or ``most`` of them, added."""
    partitions = len(source.add_column("a", 128, lambda array, first: 1))
    assert partitions > 1
    for most, count in ((32, partitions), (partitions - 1, 1), (1, 1)):  # FAN at a time
        totals = source.add_column(("a", "s"), 128, _pair_sum, most)
        assert len(totals) == count
        assert np.array_equal(sum(total for total, _ in totals), _expected_pair_sum(table))


def test_column_batch_of_one_name_is_the_array_and_of_a_tuple_a_struct():
    table = _table(10)
    arrays = [c.combine_chunks() for c in table.columns]
    assert column_batch("a", arrays) is arrays[0]
    made = column_batch(("s", "a"), [arrays[1], arrays[0], arrays[2]])  # extra arrays ignored
    assert made.type.names == ["s", "a"]
    assert made.field(1).to_pylist() == arrays[0].to_pylist()
    assert made.slice(3, 4).field("a").to_pylist() == arrays[0].to_pylist()[3:7]


@pytest.mark.parametrize("batch_rows", [1, 64, 5000])
def test_arrow_and_parquet_sources_give_the_same_rows_of_every_column(tmp_path, batch_rows):
    table = _table()
    dataset = ParquetDataset.open(_files(table, tmp_path / "in"))
    for source in (ArrowSource(table), dataset, CountedSource(dataset, Work())):
        _assert_rows_of(source, table, ("a", "s", "i"), batch_rows)
        _assert_rows_of(source, table, ("i", "a"), batch_rows)
        assert np.array_equal(
            column_total(source, ("a", "s"), batch_rows, _pair_sum, np.zeros(8, np.int64)),
            _expected_pair_sum(table),
        )


def test_a_schema_checked_source_checks_and_casts_every_field(tmp_path):
    schema = Schema.from_dict(
        {
            "columns": {
                "a": {"type": "integer", "bounds": [-50, 50]},
                "i": {"type": "float", "protect": False},
            }
        }
    )
    table = _table()
    source = SchemaCheckedSource(ParquetDataset.open(_files(table, tmp_path / "in")), schema)
    types = {
        t.names[0]: (t.field(0).type, t.field(1).type)
        for t in source.map_column(("a", "i"), 500, lambda array, first: array.type)
    }
    assert set(types.values()) == {(pa.int64(), pa.float64())}  # declared, per field
    _assert_rows_of(source, table, ("s", "a"), 300)

    a = table.column("a").to_pylist()
    bad = table.set_column(0, "a", pa.array([None if r == 1234 else v for r, v in enumerate(a)]))
    checked = SchemaCheckedSource(ParquetDataset.open(_files(bad, tmp_path / "bad")), schema)
    with pytest.raises(ValueError, match="column 'a' has a missing value at row 1234"):
        list(checked.map_column(("s", "a"), 500, _rows))
    half = table.set_column(0, "a", pa.array([v + 0.5 * (r == 1600) for r, v in enumerate(a)]))
    checked = SchemaCheckedSource(ParquetDataset.open(_files(half, tmp_path / "half")), schema)
    with pytest.raises(ValueError, match="row 1600"):  # a declared integer that is not one
        list(checked.map_column(("a", "s"), 500, _rows))


@pytest.mark.filterwarnings("ignore:Sending large graph")
@pytest.mark.parametrize("reader", ["frame", "from_parquet"])
def test_dask_sources_give_the_same_rows_and_totals(client, tmp_path, reader):
    import dask.dataframe as dd

    from dpfast.engines.dask import DaskSource

    table = _table()
    if reader == "frame":
        source = DaskSource(dd.from_pandas(table.to_pandas(), npartitions=5))
    else:
        source = DaskSource.from_parquet(_files(table, tmp_path / "in"))
    _assert_rows_of(source, table, ("a", "s", "i"), 128)
    _assert_added(source, table)


@pytest.mark.parametrize("reader", ["frame", "from_parquet"])
def test_spark_sources_give_the_same_rows_and_totals(spark, tmp_path, reader):
    from dpfast.engines.spark import SparkSource

    table = _table()
    if reader == "frame":
        plain = table.set_column(1, "s", table.column("s").cast(pa.string()))
        frame = spark.createDataFrame(plain).coalesce(3)
        source = SparkSource(frame)
    else:
        source = SparkSource.from_parquet(spark, _files(table, tmp_path / "in"))
    _assert_rows_of(source, table, ("a", "s", "i"), 128)
    _assert_added(source, table)
