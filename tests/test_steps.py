"""The dataflow a step reads (dpfast/engines/dataflow.py) and the in-memory one-batch source."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dpfast import steps
from dpfast.engines import EngineChoice
from dpfast.engines.dataflow import Dataflow, HeldTable, Limits, column_total
from dpfast.engines.values import NumericColumn
from dpfast.io import as_table_data


def _open_memory(data):
    from dpfast.engines import open_engine

    return open_engine(data, method="test", engine=EngineChoice("memory", {}))


def test_a_numpy_table_is_one_batch_per_column_named_by_text():
    data = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    table = as_table_data(data)
    flow = Dataflow.held(table.names, table.column, table.n_rows)
    assert flow.holds and flow.source.names == ["0", "1"] and flow.source.n_rows == 3
    assert flow.source.schema == pa.schema([("0", pa.float64()), ("1", pa.float64())])
    batches = list(flow.source.map_column("1", 1, lambda batch, first: (batch, first)))
    assert [(b.to_pylist(), first) for b, first in batches] == [([10.0, 20.0, 30.0], 0)]
    pairs = list(flow.source.map_column(("1", "0"), 2, lambda batch, first: batch))
    assert [row["0"] for row in pairs[0].to_pylist()] == [1.0, 2.0, 3.0]
    assert pairs[0].type.names == ["1", "0"]
    assert column_total(flow.source, "0", 3, lambda batch, first: len(batch), 0) == 3


def test_an_empty_table_reads_no_rows():
    flow = Dataflow.held(["x"], {"x": np.empty(0)}.__getitem__, 0)
    assert flow.limits == Limits(memory=flow.limits.memory, batch_rows=1)
    assert column_total(flow.source, "x", 1, lambda batch, first: len(batch), 0) == 0


def test_the_memory_engine_gives_a_held_dataflow_over_its_table():
    import pandas as pd

    frame = pd.DataFrame({"income": [5.0, 1.0, 3.0], "city": ["a", "b", "a"]})
    engine = _open_memory(frame)
    flow = engine.dataflow
    assert flow.holds and flow.source.names == ["income", "city"]
    assert flow.source.schema.field("city").type == pa.string()
    assert frame["income"].tolist() == [5.0, 1.0, 3.0]  # never modified


@pytest.mark.parametrize("shape", ["uniform", "lognormal", "pareto"])
def test_a_step_gives_the_same_on_the_fast_path_and_on_the_passes(shape):
    rng = np.random.default_rng(4)
    n = 5_000
    values = {
        "uniform": rng.uniform(0, 100, n),
        "lognormal": np.round(rng.lognormal(10, 2, n)),
        "pareto": (rng.pareto(1.1, n) + 1) * 1_000,
    }[shape]
    column = NumericColumn("x", values, False, np.dtype(np.float64))
    held = Dataflow.held(["x"], {"x": values}.__getitem__, n)
    # passes of 333 rows over the same values, within a small memory limit
    passes = Dataflow(held.source, Limits(memory=70_000, batch_rows=333))
    batched = _Batched(values)
    small = Dataflow(batched, Limits(memory=70_000, batch_rows=333))
    lo, hi = float(values.min()), float(values.max())
    edges = np.quantile(values, [0.1, 0.5, 0.9, 0.99])
    for flow in (passes, small):
        assert steps.order_statistics(flow, column, 7, (lo, hi)) == steps.order_statistics(
            held, column, 7, (lo, hi)
        )
        np.testing.assert_array_equal(
            steps.bin_counts(flow, column, lo, 50 / (hi - lo), 50),
            steps.bin_counts(held, column, lo, 50 / (hi - lo), 50),
        )
        np.testing.assert_array_equal(
            steps.edge_counts(flow, column, edges), steps.edge_counts(held, column, edges)
        )
    assert batched.passes > 3  # the column did not fit: sorted ranges, each a pass


class _Batched(HeldTable):
    """The column ``x`` in batches of ``batch_rows``, counting the passes."""

    def __init__(self, values: np.ndarray) -> None:
        super().__init__(("x",), {"x": values}.__getitem__, values.shape[0])
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "count", [0])

    @property
    def passes(self) -> int:
        return self.count[0]

    def map_column(self, name, batch_rows, fn):
        self.count[0] += 1
        for first in range(0, self.rows, batch_rows):
            yield fn(pa.array(self.values[first : first + batch_rows]), first)
