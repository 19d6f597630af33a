"""The engine contract the release skeleton enforces: staged output, registry, engine named."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.accounting import report_schema
from dpfast.budget import BudgetFile
from dpfast.dataflow.writes import CopyColumns, Write
from dpfast.engines import (
    _REGISTRY,
    BUILT_IN,
    EngineChoice,
    engine_label,
    engines,
    open_engine,
    register,
)
from dpfast.engines.memory import MemoryEngine
from dpfast.exceptions import DPFastRuntimeError, DPFastTypeError, DPFastValueError


def _table() -> pd.DataFrame:
    return pd.DataFrame({"age": [23.0, 35.0, 41.0, 52.0, 67.0, 30.0]})


class UnstagedEngine(MemoryEngine):
    """An engine that makes its output visible itself and returns the data, unstaged."""

    def publish(self, report: Any, *, reindex: bool) -> Any:
        return super().publish(report, reindex=reindex).reveal()


@pytest.fixture
def unstaged():
    register("unstaged-test", __name__, "UnstagedEngine", lambda data: False)
    try:
        yield "unstaged-test"
    finally:
        del _REGISTRY["unstaged-test"]


def test_an_engine_that_publishes_unstaged_is_refused_and_its_spend_kept(tmp_path, unstaged):
    # its output may be visible already (this one's is): no spend is given back then
    budget = BudgetFile.create(tmp_path / "budget.json", 2.0)
    with pytest.raises(DPFastRuntimeError, match=r"not a Staged release.*counts as spent"):
        dpfast.laplace_dp(
            _table(), epsilon=0.5, bounds={"age": (0, 100)}, seed=1, engine=unstaged, budget=budget
        )
    assert budget.remaining() == pytest.approx(1.5)


class _Watched:
    """A budget whose reservations note, at their commit, whether the output is visible."""

    def __init__(self, budget: BudgetFile, output: Any) -> None:
        self.budget, self.output, self.seen = budget, output, []

    def reserve(self, epsilon: float, **where: Any) -> Any:
        reservation = self.budget.reserve(epsilon, **where)
        watched = self

        class Reservation:
            def commit(self, report: Any) -> None:
                watched.seen.append((watched.output.exists(), report.engine))
                reservation.commit(report)

            def abandon(self) -> None:
                reservation.abandon()

        return Reservation()


@pytest.mark.parametrize("engine", ["memory", "outofcore"])
def test_the_budget_is_committed_before_the_output_is_visible(tmp_path, engine):
    output = tmp_path / "out.parquet"
    budget = _Watched(BudgetFile.create(tmp_path / "budget.json", 2.0), output)
    release = dpfast.laplace_dp(
        _table(),
        epsilon=0.5,
        bounds={"age": (0, 100)},
        seed=1,
        engine=engine,
        budget=budget,
        output=output,
    )
    assert budget.seen == [(False, engine)]  # committed by the skeleton, output still staged
    assert budget.budget.remaining() == pytest.approx(1.5)
    assert pq.read_table(output).num_rows == 6
    assert release.report.engine == engine
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.parametrize("name", BUILT_IN)
def test_register_refuses_a_built_in_name_unless_told_to_replace_it(name):
    entry = _REGISTRY[name]
    with pytest.raises(DPFastValueError, match=rf"'{name}' is a built-in engine.*replace=True"):
        register(name, "dpfast.engines.memory", "MemoryEngine", lambda data: False)
    assert _REGISTRY[name] is entry and engine_label(name) == name
    try:
        register(name, __name__, "UnstagedEngine", entry.accepts, replace=True)
        assert engine_label(name) == f"{name} ({__name__}.UnstagedEngine)"
    finally:
        register(name, entry.module, entry.attribute, entry.accepts, replace=True)
    assert engine_label(name) == name and name in engines()


def test_the_public_report_names_an_engine_dpfast_does_not_ship(tmp_path):
    register("memory-copy-test", "dpfast.engines.memory", "MemoryEngine", lambda data: False)
    try:
        report = dpfast.laplace_dp(
            _table(), epsilon=0.5, bounds={"age": (0, 100)}, seed=1, engine="memory-copy-test"
        ).report
    finally:
        del _REGISTRY["memory-copy-test"]
    assert report.engine == "memory-copy-test (dpfast.engines.memory.MemoryEngine)"
    jsonschema.validate(report.to_dict(), report_schema("public"))


class UnmeasuredEngine(MemoryEngine):
    """An engine that holds the values yet says it cannot measure the release."""

    @property
    def measurer(self) -> None:
        return None


@pytest.mark.parametrize("asked", ["metrics", "risk"])
def test_an_engine_that_cannot_measure_is_refused_in_the_error_family(tmp_path, asked):
    register("unmeasured-test", __name__, "UnmeasuredEngine", lambda data: False)
    budget = BudgetFile.create(tmp_path / "budget.json", 2.0)
    try:
        with pytest.raises(DPFastRuntimeError, match=r"measures neither utility nor risk"):
            dpfast.laplace_dp(
                _table(),
                epsilon=0.5,
                bounds={"age": (0, 100)},
                seed=1,
                engine="unmeasured-test",
                budget=budget,
                **{asked: True},
            )
    finally:
        del _REGISTRY["unmeasured-test"]
    assert budget.remaining() == pytest.approx(2.0)  # refused before any output: not spent
    assert dpfast.laplace_dp(
        _table(), epsilon=0.5, bounds={"age": (0, 100)}, seed=1, metrics=True
    ).private.metrics


@dataclass(frozen=True)
class _Unknown(Write[None]):
    """A record no engine of dpfast writes."""

    name: str


@pytest.mark.parametrize("engine", ["memory", "outofcore"])
def test_an_engine_refuses_a_record_it_does_not_write(tmp_path, engine):
    choice = None if engine == "memory" else EngineChoice(engine, {})
    output = None if engine == "memory" else tmp_path / "out.parquet"
    opened = open_engine(_table(), method="test", engine=choice, output=output)
    try:
        with pytest.raises(DPFastTypeError, match=rf"the {engine} engine does not write _Unknown"):
            opened.write(_Unknown("age"))
        # a record it knows is written: the column copied, in the rows' order
        assert opened.write(CopyColumns(["age"], None)) is None
        data = opened.publish(None, reindex=False).reveal()
    finally:
        opened.close()
    got = data if isinstance(data, pd.DataFrame) else data.to_table().to_pandas()
    assert got["age"].tolist() == _table()["age"].tolist()


def _doubled(values, first_row):
    """Cells that release each value doubled, counting nothing."""
    return 2.0 * values, np.zeros(1, dtype=np.int64)


def test_a_float_array_keeps_every_column_written_row_by_row_or_by_groups():
    # a 2-D float64 input is released into one output array: a column written row by row
    # beside one written by rank groups must land in it too, not be left unset
    from dpfast.dataflow.writes import WriteGroups, WriteRows
    from dpfast.noise import NoiseSource, permutation
    from dpfast.partitions.ranking import RankGroups

    data = np.arange(12, dtype=np.float64).reshape(6, 2)
    opened = open_engine(data, method="test")
    try:
        first, second = opened.numeric_columns([0, 1])
        counts = opened.write(WriteRows(first, _doubled))
        layout = RankGroups(6, 3)
        key = NoiseSource.from_seed(5).key("test", "order")
        opened.write(WriteGroups(second, np.array([10.0, 20.0]), layout, key))
        released = opened.publish(None, reindex=False).reveal()
    finally:
        opened.close()
    assert counts.tolist() == [0]
    assert released[:, 0].tolist() == (2.0 * data[:, 0]).tolist()
    order = permutation(key, 6)
    assert released[:, 1].tolist() == [[10.0, 20.0][g] for g in layout.group_of(order)]
