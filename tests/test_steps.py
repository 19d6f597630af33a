"""The dataflow a step reads (dpfast/dataflow/flow.py) and the in-memory one-batch source."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from dpfast import steps
from dpfast.dataflow.flow import Dataflow, HeldTable, Limits, column_total
from dpfast.dataflow.values import NumericColumn
from dpfast.engines import EngineChoice
from dpfast.io import as_table_data


def _open_memory(data):
    from dpfast.engines import open_engine

    return open_engine(data, method="test", engine=EngineChoice("memory", {}))


def test_a_numpy_table_is_read_whole_or_in_slices_named_by_text():
    data = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    table = as_table_data(data)
    flow = Dataflow.held(table)
    assert flow.holds and flow.source.names == ["0", "1"] and flow.source.n_rows == 3
    assert flow.source.schema == pa.schema([("0", pa.float64()), ("1", pa.float64())])
    whole = flow.limits.batch_rows
    batches = list(flow.source.map_column("1", whole, lambda batch, first: (batch, first)))
    assert [(b.to_pylist(), first) for b, first in batches] == [([10.0, 20.0, 30.0], 0)]
    batches = list(flow.source.map_column("1", 2, lambda batch, first: (batch, first)))
    assert [(b.to_pylist(), first) for b, first in batches] == [([10.0, 20.0], 0), ([30.0], 2)]
    pairs = list(flow.source.map_column(("1", "0"), 2, lambda batch, first: batch))
    assert [[row["0"] for row in pair.to_pylist()] for pair in pairs] == [[1.0, 2.0], [3.0]]
    assert pairs[0].type.names == ["1", "0"]
    assert column_total(flow.source, "0", 3, lambda batch, first: len(batch), 0) == 3


def test_an_empty_table_reads_no_rows():
    flow = Dataflow.held(as_table_data(pa.table({"x": np.empty(0)})))
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
    held = Dataflow.held(as_table_data(pa.table({"x": values})))
    # passes of 333 rows over the same values, within a small memory limit
    counted = _Counted(("x",), {"x": values}.__getitem__, n)
    flow = Dataflow(counted, Limits(memory=70_000, batch_rows=333))
    lo, hi = float(values.min()), float(values.max())
    edges = np.quantile(values, [0.1, 0.5, 0.9, 0.99])
    assert steps.order_statistics(flow, column, 7, (lo, hi)) == steps.order_statistics(
        held, column, 7, (lo, hi)
    )
    assert counted.passes[0] > 3  # the column did not fit: sorted ranges, each a pass
    np.testing.assert_array_equal(
        steps.bin_counts(flow, column, lo, 50 / (hi - lo), 50),
        steps.bin_counts(held, column, lo, 50 / (hi - lo), 50),
    )
    np.testing.assert_array_equal(
        steps.edge_counts(flow, column, edges), steps.edge_counts(held, column, edges)
    )


@dataclasses.dataclass(frozen=True)
class _Counted(HeldTable):
    """A held table that counts its passes."""

    passes: list[int] = dataclasses.field(default_factory=lambda: [0])

    def map_column(self, name, batch_rows, fn):
        self.passes[0] += 1
        return super().map_column(name, batch_rows, fn)


@pytest.mark.parametrize(
    ("bad", "kind"), [(np.nan, "NaN or missing"), (None, "NaN or missing"), (np.inf, "infinite")]
)
def test_the_range_of_a_column_read_in_passes_refuses_its_non_finite_values(bad, kind):
    values = [1.0, 2.0, 5.0, bad, 4.0, bad, 3.0]
    held = Dataflow.held(as_table_data(pa.table({"x": pa.array(values, pa.float64())})))
    flow = dataclasses.replace(held, table=None, limits=Limits(memory=2**20, batch_rows=2))
    column = NumericColumn("x", np.zeros(0), False, np.dtype(np.float64))
    match = rf"'x' has 2 non-finite value\(s\) \(first at row 3: {kind}\)"
    with pytest.raises(ValueError, match=match):
        steps.value_range(flow, column)


def test_the_range_of_a_column_read_in_passes_says_so_on_the_progress_line():
    held = Dataflow.held(as_table_data(pa.table({"x": [1.0, -2.0, 7.5, 0.0, 3.0]})))
    ticks = []
    flow = dataclasses.replace(
        held,
        table=None,
        limits=Limits(memory=2**20, batch_rows=2),
        tick=lambda *tick: ticks.append(tick),
    )
    column = NumericColumn("x", np.zeros(0), False, np.dtype(np.float64))
    assert steps.value_range(flow, column) == (-2.0, 7.5)
    assert ticks == [("checking x", 0, 1)]
    assert steps.value_range(
        held, NumericColumn("x", np.array([4.0, -1.0]), False, np.dtype(np.float64))
    ) == (-1.0, 4.0)
