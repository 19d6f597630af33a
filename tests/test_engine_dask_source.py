"""DaskSource over a lazy frame: each column set's partitions are built once per frame."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask", reason="dask is not installed (pip install 'dpfast[dask]')")

import dask
import dask.dataframe as dd

from dpfast.engines.dask import DaskSource


def _frame() -> Any:
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"a": rng.uniform(0, 1, 700), "b": rng.integers(-5, 6, 700)})
    return dd.from_pandas(table, npartitions=7)


def _batches(source: DaskSource, name: str) -> list[tuple[int, list[Any]]]:
    return sorted(source.map_column(name, 64, lambda array, first: (first, array.to_pylist())))


def test_a_frames_partitions_are_built_once_per_column_set(monkeypatch):
    # to_delayed optimises the frame's whole graph, which a lazy frame of many partitions
    # pays at every pass when rebuilt: a release makes tens of passes over a column
    frame = _frame()
    built: list[list[str]] = []
    to_delayed = type(frame).to_delayed

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        built.append([str(c) for c in self.columns])
        return to_delayed(self, *args, **kwargs)

    monkeypatch.setattr(type(frame), "to_delayed", counted)
    source = DaskSource(frame)
    with dask.config.set(scheduler="sync"):
        first = _batches(source, "a")
        assert _batches(source, "a") == first  # the same rows, from the same tasks
        _batches(source, "b")
        _batches(source, "a")
    assert built == [["a"], ["b"]]
    values = [v for _, batch in first for v in batch]
    np.testing.assert_array_equal(values, frame["a"].compute().to_numpy())


def test_a_frame_set_after_a_pass_is_read_and_not_the_partitions_kept():
    frame = _frame()
    source = DaskSource(frame)
    with dask.config.set(scheduler="sync"):
        _batches(source, "a")
        source.frame = frame[frame["b"] > 0]  # as an unseeded sample would read other rows
        with pytest.raises(ValueError, match=r"gave other rows.*persist it"):
            _batches(source, "a")
