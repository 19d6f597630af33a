"""DiffGen out of core (the out-of-core engine): the in-memory release of dpfast.diffgen."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfast.dataflow.values import CategoricalColumn
from dpfast.datasets import adult, adult_taxonomy
from dpfast.engines import EngineChoice
from dpfast.engines.outofcore import _output
from dpfast.engines.outofcore._sources import ArrowSource, ParquetDataset
from dpfast.exceptions import PrivacyLeakWarning
from dpfast.methods.diffgen import diffgen
from dpfast.steps import coded_passes
from dpfast.taxonomy import TaxonomyError
from tests.engine_runs import apart_from_engine

N = 3001
CLASSES = ["<=50K", ">50K"]
# fnlwgt's range is above 2**22 values: coded by rank (a pass for its distinct values),
# like the float column; age and capital-gain are coded by offset
BOUNDS = {
    "age": (17, 90),
    "fnlwgt": (0, 10_000_000),
    "capital-gain": (0, 99_999),
    "hours": (0.0, 100.0),
}
CATEGORICAL = ("occupation", "education", "sex")


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    table = adult("train", drop_missing=True).iloc[:N].reset_index(drop=True)
    table = table[["age", "fnlwgt", "capital-gain", *CATEGORICAL, "hours-per-week", "income"]]
    rng = np.random.default_rng(5)
    # a float predictor with ties and values beyond both bounds (clamped)
    hours = table.pop("hours-per-week").to_numpy(np.float64) + rng.choice([0.0, 0.25], N)
    table.insert(6, "hours", np.where(rng.random(N) < 0.01, hours * 2 - 120, hours))
    return table


def _options(**changes):
    options = {
        "target": "income",
        "epsilon": 1.0,
        "steps": 12,
        "taxonomies": {name: adult_taxonomy(name) for name in CATEGORICAL},
        "bounds": BOUNDS,
        "classes": CLASSES,
        "seed": 7,
    }
    return {**options, **changes}


def _out_of_core(source, output, *, memory_limit, batch_rows=1 << 20, **options):
    """``diffgen`` of ``source`` on the out-of-core engine, written to ``output``."""
    engine = EngineChoice("outofcore", {"batch_rows": batch_rows})
    return diffgen(source, engine=engine, output=output, memory_limit=memory_limit, **options)


def _write_parts(frame: pd.DataFrame, directory: Path, cuts: list[int]) -> ParquetDataset:
    directory.mkdir()
    for i, (first, last) in enumerate(pairwise([0, *cuts, len(frame)])):
        part = pa.Table.from_pandas(frame.iloc[first:last], preserve_index=False)
        pq.write_table(part, directory / f"part-{i:03d}.parquet")
    return ParquetDataset.open(directory)


def _assert_same(output: Path, expected, report, private, microdata=False) -> None:
    data = expected.microdata() if microdata else expected.counts
    got = pq.read_table(output)
    assert got.schema == data.schema
    assert got.equals(data)
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    assert private.clamped == expected.private.clamped
    assert private.clamped_output == expected.private.clamped_output
    assert private.input_rows == expected.private.input_rows


@pytest.mark.parametrize(
    "cuts", [[], [1500], [1, 2, 700, 1400, 2000, N - 1]], ids=["1 file", "2 files", "7 files"]
)
@pytest.mark.parametrize("batch_rows", [64, 1000, 1 << 20])
@pytest.mark.parametrize("memory", [200 * 2**10, 2**30], ids=["200KiB", "1GiB"])
def test_dataset_release_equals_in_memory(tmp_path, frame, cuts, batch_rows, memory):
    expected = diffgen(pa.Table.from_pandas(frame, preserve_index=False), **_options())
    dataset = _write_parts(frame, tmp_path / "in", cuts)
    rows = [pq.read_metadata(f).num_rows for f in dataset.files]
    assert len(rows) == len(cuts) + 1 and (len(rows) < 7 or rows.count(1) == 3)
    output = tmp_path / "counts.parquet"
    release = _out_of_core(
        dataset, output, memory_limit=memory, batch_rows=batch_rows, **_options()
    )
    report, private = release.report, release.private
    _assert_same(output, expected, report, private)
    assert release.counts.to_table().equals(expected.counts)  # the dataset written
    assert sum(private.clamped.values()) > 0  # the clamped counts are compared, not zeros
    assert report.extra["steps_done"] == 12


@pytest.mark.parametrize("utility", ["max", "info_gain"])
@pytest.mark.parametrize("seed", [1, 2])
def test_microdata_and_utilities_equal_in_memory(tmp_path, frame, utility, seed):
    options = _options(utility=utility, seed=seed, steps=20)
    expected = diffgen(pa.Table.from_pandas(frame, preserve_index=False), **options)
    output = tmp_path / "records"
    source = ArrowSource(pa.Table.from_pandas(frame, preserve_index=False))
    release = _out_of_core(
        source, output, memory_limit=2**30, batch_rows=999, microdata=True, **options
    )
    assert [p.name for p in output.iterdir()] == ["part-00000.parquet"]
    _assert_same(output, expected, release.report, release.private, microdata=True)


def test_pandas_input_gives_the_same_table(tmp_path, frame):
    expected = diffgen(frame, **_options())  # counts as a DataFrame of categoricals
    release = _out_of_core(
        frame, tmp_path / "c.parquet", memory_limit=2**20, batch_rows=500, **_options()
    )
    pd.testing.assert_frame_equal(release.counts.to_table().to_pandas(), expected.counts)
    assert release.cut.to_dict() == expected.cut.to_dict()


def test_microdata_in_memory_writes_the_records(tmp_path, frame):
    expected = diffgen(frame, **_options())
    output = tmp_path / "records.parquet"
    release = diffgen(frame, output=output, microdata=True, **_options())
    pd.testing.assert_frame_equal(release.counts, expected.counts)  # the counts still
    got = pq.read_table(output).to_pandas()
    pd.testing.assert_frame_equal(got, expected.microdata())
    with pytest.raises(ValueError, match="microdata=True writes the records to output"):
        diffgen(frame, microdata=True, **_options())


def test_early_stop_and_classes_from_the_data_warn_as_in_memory(tmp_path, frame):
    small = frame[["sex", "income"]]
    options = _options(taxonomies={"sex": adult_taxonomy("sex")}, bounds={}, classes=None, steps=5)
    with pytest.warns(PrivacyLeakWarning, match="read from the data"):
        expected = diffgen(pa.Table.from_pandas(small, preserve_index=False), **options)
    dataset = _write_parts(small, tmp_path / "in", [10, 11])
    with pytest.warns(PrivacyLeakWarning, match="read from the data"):
        release = _out_of_core(
            dataset, tmp_path / "c.parquet", memory_limit=2**20, batch_rows=64, **options
        )
    assert release.report.extra["early_stop"]
    _assert_same(tmp_path / "c.parquet", expected, release.report, release.private)


def test_one_predictor_one_row(tmp_path):
    table = pa.table({"age": [40], "income": [">50K"]})
    options = _options(taxonomies={}, bounds={"age": (17, 90)}, steps=3)
    expected = diffgen(table, **options)
    release = _out_of_core(
        ArrowSource(table), tmp_path / "c.parquet", memory_limit=2**20, **options
    )
    _assert_same(tmp_path / "c.parquet", expected, release.report, release.private)


def _with_value(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.schema.get_field_index(column)
    return table.set_column(index, column, pa.array(values, table.schema.field(column).type))


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"income": None}, ValueError),
        ({"income": "maybe"}, ValueError),
        ({"occupation": "Astronaut"}, TaxonomyError),
        ({"hours": float("nan")}, ValueError),
        # several columns: the first one's error (in the predictors' order), whichever
        # bad row comes first, as passes column by column raise it
        ({"occupation": "Astronaut", ("age", 2900): None}, ValueError),
        ({("education", 10): "Astronaut", ("occupation", 2900): "Astronaut"}, TaxonomyError),
        ({("hours", 10): float("nan"), ("capital-gain", 2900): None}, ValueError),
        ({("fnlwgt", 10): None, ("age", 2900): None}, ValueError),
        ({("hours", 10): float("nan"), ("fnlwgt", 2900): None}, ValueError),
    ],
)
@pytest.mark.parametrize("memory", [2**20, 2**30], ids=["3 counting passes", "1"])
def test_bad_values_give_the_in_memory_error_and_leave_nothing(tmp_path, frame, bad, error, memory):
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for where, value in bad.items():
        column, row = where if isinstance(where, tuple) else (where, 2500)
        table = _with_value(table, column, row, value)
    with pytest.raises(error) as in_memory:
        diffgen(table, **_options())
    (tmp_path / "in").mkdir()
    pq.write_table(table.slice(0, 1000), tmp_path / "in" / "a.parquet")
    pq.write_table(table.slice(1000), tmp_path / "in" / "b.parquet")
    before = {p.name for p in tmp_path.iterdir()}
    with pytest.raises(error) as out_of_core:
        _out_of_core(
            ParquetDataset.open(tmp_path / "in"),
            tmp_path / "out.parquet",
            memory_limit=memory,
            batch_rows=300,
            **_options(),
        )
    assert str(out_of_core.value) == str(in_memory.value)
    assert {p.name for p in tmp_path.iterdir()} == before


def test_bounds_from_the_data_give_the_in_memory_release(tmp_path, frame):
    # every numeric column not a taxonomy's is a predictor, its bounds from a pass (NOT private)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    with pytest.warns(PrivacyLeakWarning, match="derives the domain from the data"):
        expected = diffgen(table, **_options(bounds="data"))
    dataset = _write_parts(frame, tmp_path / "in", [1000])
    output = tmp_path / "o.parquet"
    with pytest.warns(PrivacyLeakWarning, match="derives the domain from the data"):
        release = _out_of_core(
            dataset, output, memory_limit=2**20, batch_rows=300, **_options(bounds="data")
        )
    _assert_same(output, expected, release.report, release.private)
    assert release.report.guarantee_level == "none"
    assert set(release.report.parameters["bounds"]) == {*BOUNDS}


def test_distinct_values_must_fit_in_the_memory_limit(tmp_path, frame):
    source = ArrowSource(pa.Table.from_pandas(frame, preserve_index=False))
    # fnlwgt: about 2,800 distinct values of 32 bytes each
    output = tmp_path / "o.parquet"
    with pytest.raises(ValueError, match=r"column 'fnlwgt' holds more than .* distinct values"):
        _out_of_core(source, output, memory_limit=64 * 2**10, batch_rows=256, **_options())
    release = _out_of_core(source, output, memory_limit=2**17, batch_rows=256, **_options())
    assert release.report.extra["steps_done"] == 12


class _Budget:
    """A budget that records what a release reserves, commits and abandons."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def reserve(self, epsilon, *, method, output, columns):
        self.events.append(f"reserve {epsilon} {method}")
        return self

    def commit(self, report) -> None:
        self.events.append("commit")

    def abandon(self) -> None:
        self.events.append("abandon")


def test_interrupt_while_writing_leaves_no_output(tmp_path, frame, monkeypatch):
    monkeypatch.setattr(_output, "WRITE_ROWS", 500)
    source = ArrowSource(pa.Table.from_pandas(frame, preserve_index=False))
    before = {p.name for p in tmp_path.iterdir()}
    budget = _Budget()

    def progress(phase: str, done: int, total: int) -> None:
        if phase.startswith("writing") and done >= 1000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _out_of_core(
            source,
            tmp_path / "out",
            memory_limit=2**30,
            microdata=True,
            progress=progress,
            budget=budget,
            **_options(),
        )
    assert {p.name for p in tmp_path.iterdir()} == before
    assert budget.events == ["reserve 1.0 diffgen", "abandon"]  # never committed
    _out_of_core(source, tmp_path / "out", memory_limit=2**30, budget=budget, **_options())
    assert budget.events[2:] == ["reserve 1.0 diffgen", "commit"]


# the counts held three times: capital-gain's 100,000 codes (4.8 MB) fill a pass of their
# own at 1 MiB, and fnlwgt's 2,863 distinct values (137 KB) one at 100 kB
@pytest.mark.parametrize(("memory", "passes"), [(2**30, 1), (2**20, 3), (100_000, 4)])
def test_the_passes_read_each_batch_of_every_predictor(
    tmp_path, frame, monkeypatch, memory, passes
):
    # the counts come from the batches: a builder given other counts draws another cut;
    # the columns are counted in one pass, or in groups whose counts fit the memory limit
    seen = []  # per counting pass, each column's name and counted records
    original = coded_passes.CodedPasses._counts

    def spy(coded, coders, classes):
        hists, clamped = original(coded, coders, classes)
        names = [
            c.column.name if isinstance(c.column, CategoricalColumn) else c.column.column.name
            for c in coders
        ]
        seen.append([(name, int(hist.sum())) for name, hist in zip(names, hists, strict=True)])
        return hists, clamped

    monkeypatch.setattr(coded_passes.CodedPasses, "_counts", spy)
    source = ArrowSource(pa.Table.from_pandas(frame, preserve_index=False))
    expected = diffgen(pa.Table.from_pandas(frame, preserve_index=False), **_options())
    release = _out_of_core(
        source, tmp_path / "o.parquet", memory_limit=memory, batch_rows=128, **_options()
    )
    _assert_same(tmp_path / "o.parquet", expected, release.report, release.private)
    counted = [column for group in seen for column in group]
    assert sorted(name for name, _ in counted) == sorted([*BOUNDS, *CATEGORICAL])
    assert all(total == N for _, total in counted)
    assert len(seen) == passes


class _Unread(ArrowSource):
    """A source that fails the test if any batch is read."""

    def map_column(self, name, batch_rows, fn):
        raise AssertionError(f"column {name!r} was read before the arguments were checked")


@pytest.mark.parametrize(
    "changes",
    [
        {"bounds": {**BOUNDS, "age": (90, 17)}},
        {"classes": ["<=50K", "<=50K"]},
        {"target": "salary"},
        {"taxonomies": {"nope": adult_taxonomy("sex")}},
        {"steps": -1},
    ],
)
def test_argument_errors_come_before_any_pass_as_in_memory(tmp_path, frame, changes):
    table = pa.Table.from_pandas(frame, preserve_index=False)
    with pytest.raises((ValueError, TypeError)) as in_memory:
        diffgen(table, **_options(**changes))
    with pytest.raises(type(in_memory.value)) as out_of_core:
        _out_of_core(
            _Unread(table), tmp_path / "o.parquet", memory_limit=2**20, **_options(**changes)
        )
    assert str(out_of_core.value) == str(in_memory.value)
    assert list(tmp_path.iterdir()) == []


def test_the_partition_tree_grows_keeping_its_nodes():
    from dpfast.steps.class_counts import Partitions

    parts = Partitions(10, np.array([0]))
    fields = ("start", "end", "first_child", "n_children", "split_column", "node_value")
    rng = np.random.default_rng(0)
    for name in fields:
        getattr(parts, name)[:] = rng.integers(-1, 100, getattr(parts, name).shape[0])
    parts.size = 64
    before = {name: getattr(parts, name)[:64].copy() for name in fields}
    parts._reserve(100)
    for name in fields:
        grown = getattr(parts, name)
        assert grown.shape[0] >= 164, name
        np.testing.assert_array_equal(grown[:64], before[name])
        # past the nodes: a node's fields as a new one starts them (no children, a leaf)
        assert (grown[64:] == (0 if name in ("start", "end", "n_children") else -1)).all(), name
