"""The column source protocol (``Source``): every source declares it, and its defaults."""

from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pytest

from dpfast.dataflow.flow import column_total
from dpfast.dataflow.source import Source
from dpfast.engines.outofcore._sources import ArrowSource, SchemaCheckedSource
from dpfast.engines.outofcore._work import CountedSource, Work
from dpfast.exceptions import DPFastTypeError
from dpfast.schema import Schema

SOURCES = [
    ("dpfast.engines.outofcore._sources", "ParquetDataset"),
    ("dpfast.engines.outofcore._sources", "ArrowSource"),
    ("dpfast.engines.outofcore._sources", "SchemaCheckedSource"),
    ("dpfast.engines.outofcore._csv", "CsvSource"),
    ("dpfast.engines.outofcore._work", "CountedSource"),
    ("dpfast.engines.spark._source", "SparkSource"),
    ("dpfast.engines.dask._source", "DaskSource"),
]


@pytest.mark.parametrize(("module", "name"), SOURCES, ids=[n for _, n in SOURCES])
def test_every_source_declares_the_protocol(module, name):
    kind = getattr(importlib.import_module(module), name)
    assert issubclass(kind, Source)
    assert not kind.__abstractmethods__
    assert "__getattr__" not in vars(kind)  # members are declared, not forwarded by name


def test_a_source_without_its_abstract_members_cannot_be_made():
    class Partial(Source):
        names = property(lambda self: ["x"])

    with pytest.raises(TypeError, match="map_column"):
        Partial()  # type: ignore[abstract]


def test_the_defaults_add_in_this_process_and_refuse_to_sort():
    table = pa.table({"x": np.arange(10, dtype=np.int64)})
    source = ArrowSource(table)
    got = list(source.add_column("x", 4, lambda a, first: (first, sum(a.to_pylist()))))
    assert got == [((0, 6), 4), ((4, 22), 4), ((8, 17), 2)]  # a partial a batch, its rows
    assert column_total(source, "x", 4, lambda a, first: sum(a.to_pylist()), 100) == 145
    assert (source.sorts_in_place, source.sort_tasks, source.dataset) == (False, 1, None)
    with pytest.raises(DPFastTypeError, match="ArrowSource does not sort ranges"):
        source.sort_ranges("x", 4, lambda a, first: a, None, 8, lambda i, keys: keys)


def test_wrappers_forward_the_optional_members_and_add_over_checked_batches():
    table = pa.table({"i": pa.array([1.0, 2.0, 2.5], pa.float64())})
    schema = Schema.from_dict({"columns": {"i": {"type": "integer", "bounds": [-5, 5]}}})
    under = ArrowSource(table)
    checked = SchemaCheckedSource(under, schema)
    work = Work()
    counted = CountedSource(checked, work)
    assert counted.dataset is checked and checked.dataset is under
    assert (counted.sorts_in_place, counted.sort_tasks) == (False, 1)
    with pytest.raises(ValueError, match="row 2"):  # 2.5 is no integer: checked as added
        column_total(counted, "i", 1, lambda a, first: len(a), 0)
    work = Work()
    counted = CountedSource(SchemaCheckedSource(ArrowSource(table.slice(0, 2)), schema), work)
    assert column_total(counted, "i", 1, lambda a, first: a.type == pa.int64(), 0) == 2
    assert (work.tasks, work.task_rows, work.largest_task_rows) == (2, 2, 1)  # each counted
