"""The class-count steps and primitives, in memory and out of core, checked directly.

``tests/test_engine_conformance.py`` runs DiffGen on every engine; here each step
(``occurring_values``, ``class_codes``, ``contingency``: dpfast/steps/class_counts.py;
``numeric_names``: dpfast/steps/column_types.py) and primitive (``write_table``) is compared
between the in-memory engine (its fast path, and its one-batch source read in passes of 7
rows), the out-of-core engine in batches of a few rows, and a brute-force count over the
records.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfast import steps
from dpfast.dataflow.flow import Dataflow, Limits
from dpfast.dataflow.values import CodedNumeric, Contingency, NumericColumn
from dpfast.dataflow.writes import WriteTable
from dpfast.engines import EngineChoice, open_engine
from dpfast.engines.base import Engine
from dpfast.io import as_table_data
from dpfast.methods.diffgen._columns import ClassLookup  # the method's lookup
from dpfast.taxonomy import Taxonomy

N = 200
COLOURS = Taxonomy.from_mapping({"*": {"warm": ["red", "orange"], "cold": ["blue", "green"]}})


def _table() -> pa.Table:
    rng = np.random.default_rng(11)
    return pa.table(
        {
            "age": rng.integers(10, 70, N),  # clamped to [20, 59]: some below, some above
            "score": np.round(rng.uniform(-1.0, 11.0, N), 1),  # coded by rank
            "colour": rng.choice(list(COLOURS.domain), N),
            "label": rng.choice(["no", "yes", "maybe"], N),
            "note": [f"n{i % 4}" for i in range(N)],
        }
    )


def _passes(flow: Dataflow, batch_rows: int = 7) -> Dataflow:
    """A held dataflow read in passes of ``batch_rows`` rows, as out of core (no fast path)."""
    return dataclasses.replace(flow, table=None, limits=Limits(memory=2**20, batch_rows=batch_rows))


class _Flows:
    """An engine and the dataflow the steps read: its own, or its held table read in passes."""

    def __init__(self, engine: Engine, passes: bool) -> None:
        self.engine = engine
        self.passes = passes

    @property
    def flow(self) -> Dataflow:
        return _passes(self.engine.dataflow) if self.passes else self.engine.dataflow

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


@pytest.fixture(params=["memory", "memory-passes", "outofcore"])
def engine(request, tmp_path) -> Iterator[_Flows]:
    if request.param.startswith("memory"):
        opened = open_engine(_table(), method="test")
    else:
        choice = EngineChoice("outofcore", {"batch_rows": 7})
        opened = open_engine(
            _table(),
            method="test",
            engine=choice,
            output=tmp_path / "o.parquet",
            memory_limit=2**20,
        )
    try:
        yield _Flows(opened, request.param == "memory-passes")
    finally:
        opened.close()


def _coded(engine: _Flows) -> tuple[Contingency, list[np.ndarray], np.ndarray]:
    """The contingency of age (by offset), score (by rank) and colour, with brute codes."""
    assert engine.flow.holds == (engine.engine.dataflow.holds and not engine.passes)
    classes = steps.class_codes(engine.flow, "label", ClassLookup(("maybe", "no", "yes")))
    age, score = engine.numeric_columns(["age", "score"], categorical=False)
    (colour,) = engine.categorical_columns({"colour": COLOURS})
    columns = [CodedNumeric(age, 20.0, 59.0, True), CodedNumeric(score, 0.0, 10.0, False), colour]
    made = steps.contingency(engine.flow, classes, columns)
    table = _table()
    ages = np.clip(table.column("age").to_numpy(), 20, 59) - 20
    scores = np.clip(table.column("score").to_numpy(), 0.0, 10.0)
    codes = [
        ages.astype(np.int64),
        np.searchsorted(np.unique(scores), scores).astype(np.int64),
        COLOURS.encode_categories(*_category_codes(table, "colour"), column="colour"),
    ]
    labels = ["maybe", "no", "yes"]
    y = np.array([labels.index(v) for v in table.column("label").to_pylist()], dtype=np.int64)
    return made, codes, y


def _category_codes(table: pa.Table, name: str) -> tuple[np.ndarray, list[Any]]:
    values = table.column(name).to_pylist()
    categories = sorted(set(values))
    return np.array([categories.index(v) for v in values], dtype=np.int64), categories


def test_the_columns_are_coded_and_counted_as_the_records_say(engine):
    made, codes, y = _coded(engine)
    scores = np.clip(_table().column("score").to_numpy(), 0.0, 10.0)
    assert made.n_classes == 3 and made.n_codes == [40, np.unique(scores).shape[0], 4]
    np.testing.assert_array_equal(made.code_values[0], np.arange(20.0, 60.0))
    np.testing.assert_array_equal(made.code_values[1], np.unique(scores))
    assert made.code_values[2] is None
    ages, raw = _table().column("age").to_numpy(), _table().column("score").to_numpy()
    assert made.clamped == [
        int(((ages < 20) | (ages > 59)).sum()),
        int(((raw < 0) | (raw > 10)).sum()),
        0,
    ]
    assert made.clamped[0] > 0 and made.clamped[1] > 0
    for j, n_codes in enumerate(made.n_codes):
        want = np.zeros((n_codes, 3), dtype=np.int64)
        np.add.at(want, (codes[j], y), 1)
        np.testing.assert_array_equal(made.counts(j), want)


def test_splits_and_cells_count_the_records_by_their_labels(engine):
    made, codes, y = _coded(engine)
    made.start([0, 1, 2])
    label_of = [np.full(n, j, dtype=np.int64) for j, n in enumerate(made.n_codes)]

    def split(column: int, label: int, child_of: np.ndarray, offset: int, children: list[int]):
        got = made.split(column, label, child_of, offset, np.array(children, dtype=np.int64))
        holds = label_of[column][codes[column]] == label
        want = np.zeros((child_of.shape[0], 3), dtype=np.int64)
        np.add.at(want, (codes[column][holds] - offset, y[holds]), 1)
        np.testing.assert_array_equal(got, want)
        for c, child in enumerate(children):
            label_of[column][offset + np.flatnonzero(child_of == c)] = child

    domain = list(COLOURS.domain)
    child = np.full(4, -1, dtype=np.int64)
    child[[domain.index(c) for c in ("red", "orange")]] = 0
    child[[domain.index(c) for c in ("blue", "green")]] = 1
    split(2, 2, child, 0, [3, 4])  # * -> warm, cold
    split(0, 0, (np.arange(40) >= 15).astype(np.int64), 0, [5, 6])  # age at 35
    split(0, 6, (np.arange(15, 40) >= 30).astype(np.int64), 15, [7, 8])  # age at 50
    warm_leaves = np.full(4, -1, dtype=np.int64)
    warm_leaves[[domain.index(c) for c in ("red", "orange")]] = [0, 1]
    split(2, 3, warm_leaves, 0, [9, 10])  # warm -> red, orange
    cuts = [[5, 7, 8], [1], [9, 10, 4]]
    position = np.full(11, -1, dtype=np.int64)
    for cut in cuts:
        position[cut] = np.arange(len(cut))
    sizes = [len(c) for c in cuts]
    got = made.cells(position, sizes)
    strides = [math.prod(sizes[j + 1 :]) for j in range(3)]
    cell = sum(position[label_of[j][codes[j]]] * strides[j] for j in range(3))
    want = np.bincount(cell * 3 + y, minlength=math.prod(sizes) * 3).reshape(-1, 3)
    np.testing.assert_array_equal(got, want)
    assert got.sum() == N


def test_the_values_and_the_classes_found(engine):
    names = ["age", "score", "colour", "label"]
    assert steps.numeric_names(engine.flow, names) == ["age", "score"]
    assert sorted(steps.occurring_values(engine.flow, "label")) == ["maybe", "no", "yes"]
    found = steps.class_codes(engine.flow, "label", ClassLookup(("no", "yes")))
    assert (found.size, found.missing, found.unknown) == (2, 0, ["maybe"])
    found = steps.class_codes(engine.flow, "note", ClassLookup(("n0", "n1", "n2", "n3")))
    assert (found.size, found.missing, found.unknown) == (4, 0, [])


def test_numeric_names_are_the_integer_and_float_columns_not_the_booleans(tmp_path):
    table = pa.table(
        {
            "flag": [True, False, True],
            "count": pa.array([1, 2, 3], pa.int8()),
            "text": ["a", "b", "c"],
            "share": [0.5, 1.5, 2.5],
            "big": pa.array([1, 2, 3], pa.uint64()),
        }
    )
    memory = open_engine(table, method="test")
    outofcore = open_engine(
        table, method="test", engine=EngineChoice("outofcore", {}), output=tmp_path / "o.parquet"
    )
    try:
        for flow in (memory.dataflow, _passes(memory.dataflow), outofcore.dataflow):
            found = steps.numeric_names(flow, ["share", "flag", "text", "big", "count"])
            assert found == ["share", "big", "count"]
    finally:
        outofcore.close()


def test_missing_classes_are_counted(tmp_path):
    values = ["a", None, "b", None, "a"] * 3
    table = pa.table({"x": np.arange(15.0), "label": values})
    memory = open_engine(table, method="test")
    choice = EngineChoice("outofcore", {"batch_rows": 4})
    outofcore = open_engine(table, method="test", engine=choice, output=tmp_path / "o.parquet")
    try:
        for flow in (memory.dataflow, _passes(memory.dataflow, 4), outofcore.dataflow):
            assert steps.class_codes(flow, "label", ClassLookup(("a", "b"))).missing == 6
            assert sorted(steps.occurring_values(flow, "label")) == ["a", "b"]
    finally:
        outofcore.close()


@pytest.mark.parametrize("shape", ["uniform", "lognormal", "pareto"])
def test_the_fast_path_and_the_passes_count_skewed_columns_alike(shape):
    # a skewed column coded by rank holds many distinct values, most of them in its tail
    rng = np.random.default_rng(5)
    n = 3_000
    values = {
        "uniform": np.round(rng.uniform(0, 100, n), 1),
        "lognormal": np.round(rng.lognormal(9, 1.5, n)),
        "pareto": np.round((rng.pareto(1.2, n) + 1) * 1_000),
    }[shape]
    labels = rng.choice(["a", "b", "c"], n, p=[0.7, 0.25, 0.05])
    held = Dataflow.held(as_table_data(pa.table({"v": values, "label": labels})))
    column = NumericColumn("v", values, False, np.dtype(np.float64))
    upper = float(np.quantile(values, 0.95))  # the tail above is clamped
    coded = [CodedNumeric(column, 0.0, upper, False)]
    made = []
    for flow in (held, _passes(held, 97)):
        classes = steps.class_codes(flow, "label", ClassLookup(("a", "b", "c")))
        made.append(steps.contingency(flow, classes, coded))
    fast, passes = made
    assert fast.n_codes == passes.n_codes and fast.clamped == passes.clamped
    np.testing.assert_array_equal(fast.code_values[0], passes.code_values[0])
    np.testing.assert_array_equal(fast.counts(0), passes.counts(0))
    clipped = np.clip(values, 0.0, upper)
    assert fast.n_codes == [np.unique(clipped).shape[0]]
    assert fast.clamped == [int((values > upper).sum())]
    for table in made:  # one cut at the median code, then the cells
        table.start([0])
        middle = table.n_codes[0] // 2
        child_of = (np.arange(table.n_codes[0]) >= middle).astype(np.int64)
        table.split(0, 0, child_of, 0, np.array([1, 2], dtype=np.int64))
    position = np.array([-1, 0, 1], dtype=np.int64)
    cells = [table.cells(position, [2]) for table in made]
    np.testing.assert_array_equal(cells[0], cells[1])
    high = clipped >= fast.code_values[0][fast.n_codes[0] // 2]
    want = [[int(((high == h) & (labels == c)).sum()) for c in "abc"] for h in (False, True)]
    np.testing.assert_array_equal(cells[0], want)


@pytest.mark.parametrize("repeat", [None, "count"])
@pytest.mark.parametrize("counts", [[2, 0, 3], [0, 0, 0]], ids=["records", "none"])
def test_a_written_table_and_its_rows_repeated(tmp_path, repeat, counts):
    columns = {
        "colour": (np.array([0, 1, 1], dtype=np.int8), ["warm", "cold"]),
        "count": np.array(counts, dtype=np.int64),
    }
    frame = pa.table({"a": [1.0, 2.0]})  # the tables are built as Arrow
    written = []
    for name, engine in (
        ("memory.parquet", None),
        ("outofcore.parquet", EngineChoice("outofcore", {"batch_rows": 1})),
        ("outofcore-dir", EngineChoice("outofcore", {"batch_rows": 1})),
    ):
        opened = open_engine(frame, method="test", engine=engine, output=tmp_path / name)
        try:
            opened.write(WriteTable(dict(columns), repeat))
            staged = opened.publish("report", reindex=False)
            assert not (tmp_path / name).exists()  # staged: nothing visible yet
            data = staged.reveal()
        finally:
            opened.close()
        got = pq.read_table(tmp_path / name)
        written.append(got)
        if name == "memory.parquet":  # the table itself, of the input's kind
            assert data.column("count").to_pylist() == counts
        else:  # the dataset written
            assert data.to_table().equals(got)
    assert written[0].equals(written[1]) and written[1].equals(written[2])
    if repeat is None:
        assert written[0].column("count").to_pylist() == counts
    else:
        assert written[0].column_names == ["colour"]
        expected = [
            v for v, n in zip(["warm", "cold", "cold"], counts, strict=True) for _ in range(n)
        ]
        assert written[0].column("colour").to_pylist() == expected
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
