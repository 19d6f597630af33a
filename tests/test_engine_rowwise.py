"""Row-wise mechanisms out of core give the in-memory release bit for bit, whatever the split."""

from __future__ import annotations

import dataclasses
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import noise, steps
from dpfast.dataflow.source import Source
from dpfast.dataflow.writes import CopyColumns, WriteCodes, WriteResampled
from dpfast.datasets import adult
from dpfast.engines import EngineChoice
from dpfast.engines.outofcore._sources import ArrowSource, ParquetDataset
from tests.engine_runs import apart_from_engine
from tests.reference import mechanisms_reference as ref

# (file cuts, memory limit, batch rows): one file with everything in memory, two files
# with small batches, seven files (1-row ones too) with a limit that forces the
# range-by-range and window-by-window passes
OCCUPATIONS = [
    "Adm-clerical", "Armed-Forces", "Craft-repair", "Exec-managerial", "Farming-fishing",
    "Handlers-cleaners", "Machine-op-inspct", "Other-service", "Priv-house-serv",
    "Prof-specialty", "Protective-serv", "Sales", "Tech-support", "Transport-moving",
]  # fmt: skip
SPLITS = [
    ([], 2**30, 1 << 20),
    ([4000], 300_000, 1000),
    ([1, 2, 999, 5000, 5001, 9000], 70_000, 64),
]


def _table(n: int = 12_007) -> pa.Table:
    frame = adult("train", drop_missing=True)
    frame = frame[["age", "hours-per-week", "capital-gain", "occupation"]].iloc[:n]
    frame = frame.reset_index(drop=True)
    rng = np.random.default_rng(n)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # half of it one value (0.0 and -0.0), the rest spread over many orders of magnitude
    spread = np.where(rng.random(n) < 0.5, 0.0, rng.lognormal(0, 3, n) - 1)
    spread[rng.random(n) < 0.1] = -0.0
    table = table.append_column("spread", pa.array(spread))
    table = table.append_column("small", pa.array(rng.integers(-3, 4, n), pa.int32()))
    shade = pa.array(rng.choice(["red", "green", "blue"], n)).dictionary_encode()
    return table.append_column("shade", shade)


def _write_parts(table: pa.Table, directory: Path, cuts: list[int]) -> None:
    directory.mkdir()
    for i, (first, last) in enumerate(pairwise([0, *cuts, table.num_rows])):
        pq.write_table(table.slice(first, last - first), directory / f"part-{i:03d}.parquet")


class CountingSource(Source):
    """A column source that counts the passes made over it."""

    def __init__(self, source):
        self.source = source
        self.passes = 0

    @property
    def names(self):
        return self.source.names

    @property
    def schema(self):
        return self.source.schema

    @property
    def n_rows(self):
        return self.source.n_rows

    def map_column(self, name, batch_rows, fn):
        self.passes += 1
        return self.source.map_column(name, batch_rows, fn)


def _assert_same(output: Path, expected: dpfast.Release, report, private, *extras: str) -> None:
    got = pq.read_table(output)
    assert got.schema == expected.data.schema
    for name in got.column_names:
        assert got.column(name).equals(expected.data.column(name)), name
    assert apart_from_engine(report) == apart_from_engine(expected.report)
    want = expected.private.to_dict()
    have = private.to_dict()
    for key in ("input_rows", "clamped", "clamped_output", *extras):
        assert have[key] == want[key], key


def _out_of_core(function, source, output, *, memory_limit, batch_rows=1 << 20, **arguments):
    """``function`` out of core over ``source`` into ``output``; return its two reports."""
    engine = EngineChoice("outofcore", {"batch_rows": batch_rows})
    release = function(source, engine=engine, output=output, memory_limit=memory_limit, **arguments)
    return release.report, release.private


def k_noise_out_of_core(source, output, **arguments):
    return _out_of_core(dpfast.k_noise, source, output, **arguments)


def k_pram_out_of_core(source, output, **arguments):
    return _out_of_core(dpfast.k_pram, source, output, **arguments)


def randomized_response_out_of_core(source, output, **arguments):
    return _out_of_core(dpfast.randomized_response, source, output, **arguments)


def _dataset(tmp_path: Path, table: pa.Table, cuts: list[int]) -> CountingSource:
    _write_parts(table, tmp_path / "in", cuts)
    return CountingSource(ParquetDataset.open(tmp_path / "in"))


@pytest.mark.parametrize(("cuts", "memory", "batch_rows"), SPLITS)
def test_randomized_response_equals_in_memory(tmp_path, cuts, memory, batch_rows):
    table = _table()
    domain = [*OCCUPATIONS, "never seen"]
    expected = dpfast.randomized_response(
        table, column="occupation", domain=domain, epsilon=0.7, seed=5
    )
    output = tmp_path / "out.parquet"
    source = _dataset(tmp_path, table, cuts)
    report, private = randomized_response_out_of_core(
        source,
        output,
        column="occupation",
        domain=domain,
        epsilon=0.7,
        seed=5,
        memory_limit=memory,
        batch_rows=batch_rows,
    )
    _assert_same(output, expected, report, private)
    # one pass over the protected column, one copy of each other column
    assert source.passes == len(table.column_names)


@pytest.mark.parametrize("batch_rows", [64, 1000, 1 << 20])
def test_randomized_response_of_a_numeric_column_keeps_its_type(tmp_path, batch_rows):
    table = _table(3001)
    domain = [str(v) for v in range(-3, 4)]  # as --domain gives it: text
    expected = dpfast.randomized_response(
        table, column="small", domain=domain, retention=0.4, seed=9
    )
    output = tmp_path / "out.parquet"
    report, private = randomized_response_out_of_core(
        ArrowSource(table),
        output,
        column="small",
        domain=domain,
        retention=0.4,
        seed=9,
        memory_limit=2**20,
        batch_rows=batch_rows,
    )
    _assert_same(output, expected, report, private)
    assert pq.read_table(output).column("small").type == expected.data.column("small").type


@pytest.mark.parametrize(("cuts", "memory", "batch_rows"), SPLITS)
def test_k_noise_equals_in_memory(tmp_path, cuts, memory, batch_rows):
    table = _table()
    columns = ["age", "capital-gain", "spread", "small"]
    expected = dpfast.k_noise(table, k=6, columns=columns, seed=4)
    output = tmp_path / "out.parquet"
    source = _dataset(tmp_path, table, cuts)
    report, private = k_noise_out_of_core(
        source,
        output,
        k=6,
        columns=columns,
        seed=4,
        memory_limit=memory,
        batch_rows=batch_rows,
    )
    _assert_same(output, expected, report, private, "deltas", "d_k")
    # a check pass, a noise pass and one copy per other column; the order statistics
    # take one more pass when the column fits, several when it does not
    plain = 2 * len(columns) + len(table.column_names) - len(columns)
    if memory == 2**30:
        assert source.passes == plain + len(columns)
    else:
        assert source.passes > plain + 2 * len(columns)


@pytest.mark.parametrize(
    ("k", "memory"), [(1, 70_000), (2, 70_000), (500, 70_000), (12_007, 2**30)]
)
def test_k_noise_order_statistics_for_any_k(tmp_path, k, memory):
    table = _table().select(["spread", "capital-gain"])
    expected = dpfast.k_noise(table, k=k, seed=1)
    output = tmp_path / "out.parquet"
    source = CountingSource(ArrowSource(table))
    report, private = k_noise_out_of_core(
        source, output, k=k, seed=1, memory_limit=memory, batch_rows=1000
    )
    _assert_same(output, expected, report, private, "deltas", "d_k")
    # check, order statistics and noise: more passes when the sorted ranges do not fit
    assert (source.passes > 8) == (memory < 2**30)


@pytest.mark.parametrize(("cuts", "memory", "batch_rows"), SPLITS)
def test_k_pram_equals_in_memory(tmp_path, cuts, memory, batch_rows):
    table = _table()
    columns = ["age", "hours-per-week", "capital-gain", "spread", "small"]
    expected = dpfast.k_pram(table, k=9, columns=columns, retention=0.3, seed=2)
    output = tmp_path / "out.parquet"
    source = _dataset(tmp_path, table, cuts)
    report, private = k_pram_out_of_core(
        source,
        output,
        k=9,
        columns=columns,
        retention=0.3,
        seed=2,
        memory_limit=memory,
        batch_rows=batch_rows,
    )
    _assert_same(
        output, expected, report, private, "intervals", "interval_width", "smallest_interval_count"
    )
    # the tiny limit cuts the pool into many windows of two passes each
    if memory == 70_000:
        assert source.passes > 12 * len(columns)


def test_dataset_directory_output_and_no_scratch_left(tmp_path):
    table = _table(2500)
    expected = dpfast.k_noise(table, k=3, columns=["age"], seed=7)
    report, private = k_noise_out_of_core(
        ArrowSource(table), tmp_path / "out", k=3, columns=["age"], seed=7, memory_limit=2**24
    )
    _assert_same(tmp_path / "out", expected, report, private, "deltas")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _error(fn, *args, **kwargs) -> tuple[type, str]:
    with pytest.raises((ValueError, TypeError)) as info:
        fn(*args, **kwargs)
    return info.type, str(info.value)


def _with_column(table: pa.Table, name: str, values) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, values)


@pytest.mark.parametrize(
    ("method", "engine", "arguments", "damage"),
    [
        (
            dpfast.randomized_response,
            randomized_response_out_of_core,
            {"column": "shade", "domain": ["red", "green"], "epsilon": 1.0},
            None,
        ),
        (
            dpfast.randomized_response,
            randomized_response_out_of_core,
            {"column": "occupation", "domain": OCCUPATIONS, "epsilon": 1.0},
            ("occupation", [None] * 3),
        ),
        (  # a dictionary column's missing values are missing, not a category
            dpfast.randomized_response,
            randomized_response_out_of_core,
            {"column": "shade", "domain": ["red", "green", "blue"], "epsilon": 1.0},
            ("shade", [None] * 2),
        ),
        (
            dpfast.randomized_response,
            randomized_response_out_of_core,
            {"column": "small", "domain": ["1", "2", "1"], "epsilon": 1.0},
            None,
        ),
        (dpfast.k_noise, k_noise_out_of_core, {"k": 3, "columns": ["age", "spread"]}, "nan"),
        (dpfast.k_noise, k_noise_out_of_core, {"k": 3, "columns": ["occupation"]}, None),
        (dpfast.k_noise, k_noise_out_of_core, {"k": 0}, None),
        (dpfast.k_pram, k_pram_out_of_core, {"k": 1, "columns": ["age"]}, None),
        (dpfast.k_pram, k_pram_out_of_core, {"k": 3, "columns": ["age"], "retention": 1.0}, None),
        (dpfast.k_pram, k_pram_out_of_core, {"k": 3, "columns": ["age", "spread"]}, "inf"),
        (dpfast.k_pram, k_pram_out_of_core, {"k": 3, "columns": ["nope"]}, None),
    ],
)
def test_bad_input_gets_the_in_memory_error_and_no_output(
    tmp_path, method, engine, arguments, damage
):
    table = _table(3000)
    if damage in ("nan", "inf"):
        spread = table.column("spread").to_numpy().copy()
        spread[[5, 2100, 2999]] = np.nan if damage == "nan" else -np.inf
        table = _with_column(table, "spread", pa.array(spread))
    elif damage is not None:
        name, values = damage
        column = table.column(name).to_pylist()
        column[1000 : 1000 + len(values)] = values
        table = _with_column(table, name, pa.array(column, table.column(name).type))
    expected = _error(method, table, seed=1, **arguments)
    _write_parts(table, tmp_path / "in", [1000, 2500])
    dataset = ParquetDataset.open(tmp_path / "in")
    got = _error(
        engine,
        dataset,
        tmp_path / "out.parquet",
        seed=1,
        memory_limit=10**5,
        batch_rows=700,
        **arguments,
    )
    assert got == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_k_noise_refuses_a_k_beyond_the_memory_limit(tmp_path):
    table = _table()
    with pytest.raises(ValueError, match="raise the memory limit or lower k"):
        k_noise_out_of_core(
            ArrowSource(table),
            tmp_path / "o.parquet",
            k=600,
            columns=["spread"],
            memory_limit=70_000,
        )
    assert list(tmp_path.iterdir()) == []


class Interrupting(CountingSource):
    """A source interrupted (Ctrl-C) in the middle of its ``stop``-th pass."""

    def __init__(self, source, stop):
        super().__init__(source)
        self.stop = stop

    def map_column(self, name, batch_rows, fn):
        self.passes += 1
        for i, result in enumerate(self.source.map_column(name, batch_rows, fn)):
            if self.passes == self.stop and i == 1:
                raise KeyboardInterrupt
            yield result


@pytest.mark.parametrize("stop", [1, 3, 6])
@pytest.mark.parametrize("engine", ["randomized_response", "k_noise", "k_pram"])
def test_an_interrupt_leaves_no_output(tmp_path, engine, stop):
    table = _table(5000)
    source = Interrupting(ArrowSource(table), stop)
    output = tmp_path / "out.parquet"
    common = {"seed": 1, "memory_limit": 70_000, "batch_rows": 500}
    with pytest.raises(KeyboardInterrupt):
        if engine == "randomized_response":
            domain = sorted(set(table.column("occupation").to_pylist()))
            randomized_response_out_of_core(
                source, output, column="occupation", domain=domain, epsilon=1.0, **common
            )
        elif engine == "k_noise":
            k_noise_out_of_core(source, output, k=4, columns=["age", "spread"], **common)
        else:
            k_pram_out_of_core(source, output, k=4, columns=["age", "spread"], **common)
    assert list(tmp_path.iterdir()) == []


class _Positions:
    """A pool of ``size`` positions, each its own index, without holding them."""

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        return i


@pytest.mark.parametrize("start", [0, 1, 127, 1000])
def test_retain_draws_are_the_draws_of_retain_or_replace(start):
    key = noise.NoiseSource.from_seed(11).key("test", "draws")
    rng = np.random.default_rng(start)
    sizes = rng.integers(1, 5000, 40)
    sizes[3] = 2**31 + 1  # about half the first words are rejected: the row's own stream
    sizes[4] = 2**32
    groups = rng.integers(0, 40, 20_000)
    groups[:30] = 3
    draws = noise.retain_draws(key, 2**31, groups, sizes, start=start, n_threads=3)
    # as retain_or_replace draws them, where the pool would be positions: the reference
    for i in [*range(40), 5000, 19_999]:
        pool = _Positions(int(sizes[groups[i]]))
        expected = ref.retain_or_replace_row(key, start + i, 2**31, -1, pool)
        assert draws[i] == expected
    # and retain_or_replace itself, on the groups small enough to hold their pool
    small = np.where(sizes < 10_000, sizes, 1)
    pool_starts = np.zeros(40, dtype=np.int64)
    np.cumsum(small[:-1], out=pool_starts[1:])
    values = np.full(groups.shape[0], -1, dtype=np.int64)
    replaced = noise.retain_or_replace(
        key,
        2**31,
        values,
        np.arange(int(small.sum()), dtype=np.int64),
        groups=groups,
        group_start=pool_starts,
        group_size=small,
        start=start,
    )
    rows = np.flatnonzero(sizes[groups] < 10_000)
    expected = np.where(replaced[rows] < 0, -1, replaced[rows] - pool_starts[groups[rows]])
    np.testing.assert_array_equal(draws[rows], expected)
    # slices with their start give the whole
    for lo, hi in [(0, 1), (1, 129), (129, 5000), (5000, 20_000)]:
        part = noise.retain_draws(key, 2**31, groups[lo:hi], sizes, start=start + lo)
        np.testing.assert_array_equal(part, draws[lo:hi])


# --------------------------------------------------------------------------- primitives
# The row-wise primitives of the engine protocol, on the in-memory engine and out of core
# (whole, and under a limit that takes the range-by-range and window-by-window paths), on
# a source whose batches come in reverse order, as a cluster's may.


class Reversed(CountingSource):
    """A column source whose passes yield their batches last first."""

    def map_column(self, name, batch_rows, fn):
        self.passes += 1
        return reversed(list(self.source.map_column(name, batch_rows, fn)))


ENGINES = ["memory", "outofcore", "outofcore-tiny", "outofcore-reversed"]


def _open(kind: str, table: pa.Table, tmp_path: Path):
    from dpfast.engines import open_engine

    if kind == "memory":
        return open_engine(table, method="test")
    source = Reversed(ArrowSource(table)) if kind == "outofcore-reversed" else ArrowSource(table)
    memory = 70_000 if kind == "outofcore-tiny" else 2**30
    choice = EngineChoice("outofcore", {"batch_rows": 500})
    output = tmp_path / f"{kind}.parquet"
    return open_engine(source, method="test", engine=choice, output=output, memory_limit=memory)


def _released(engine, kind: str) -> pa.Table:
    data = engine.publish(None, reindex=False).reveal()
    engine.close()
    return data if kind == "memory" else data.to_table()


def _numbers(n: int = 6001) -> pa.Table:
    rng = np.random.default_rng(n)
    ties = rng.integers(-40, 40, n).astype(np.float64)
    spread = np.where(rng.random(n) < 0.3, 0.0, rng.lognormal(0, 4, n) - 2)
    spread[rng.random(n) < 0.05] = -0.0
    return pa.table({"ties": ties, "spread": spread, "small": rng.integers(-3, 4, n)})


def _exact_order_statistics(values: np.ndarray, k: int):
    from fractions import Fraction

    x = np.sort(values)
    n = x.shape[0]
    best = None
    for i in range(n - k):
        d = Fraction(float(x[i + k])) - Fraction(float(x[i]))
        if best is None or d > best[0]:
            best = (d, float(x[i]), float(x[i + k]))
    inner = (best[1], best[2], True) if best else (float(x[0]), float(x[0]), False)
    return (float(x[0]), float(x[k - 1]), float(x[n - k]), float(x[-1]), *inner)


def _columns(kind: str, tmp_path: Path):
    """Yield the engine over :func:`_numbers`, each numeric column and its values."""
    table = _numbers()
    engine = _open(kind, table, tmp_path)
    try:
        for column in engine.numeric_columns(["ties", "spread"], categorical=False):
            yield engine, column, table.column(str(column.name)).to_numpy()
    finally:
        engine.close()


def _flows(engine, kind: str):
    """The engine's dataflow; in memory, also its one-batch source read as passes."""
    flow = engine.dataflow
    assert flow.holds == (kind == "memory")
    return [flow, dataclasses.replace(flow, table=None)] if flow.holds else [flow]


@pytest.mark.parametrize("k", [1, 4, 300, 6001])
@pytest.mark.parametrize("kind", ENGINES)
def test_order_statistics_are_the_sorted_columns(tmp_path, kind, k):
    for engine, column, values in _columns(kind, tmp_path):
        extremes = (float(values.min()), float(values.max()))
        for flow in _flows(engine, kind):
            if kind == "outofcore-tiny" and 2 * k > 70_000 // 64:
                with pytest.raises(ValueError, match="raise the memory limit or lower k"):
                    steps.order_statistics(flow, column, k, extremes)
                continue
            found = steps.order_statistics(flow, column, k, extremes)
            assert found == _exact_order_statistics(values, k), column.name


@pytest.mark.parametrize("kind", ENGINES)
def test_value_range_is_the_smallest_and_the_largest_value(tmp_path, kind):
    for engine, column, values in _columns(kind, tmp_path):
        for flow in _flows(engine, kind):
            found = steps.value_range(flow, column)
            assert found == (float(values.min()), float(values.max())), column.name


@pytest.mark.parametrize("m", [1, 7, 1000])
@pytest.mark.parametrize("kind", ENGINES)
def test_bin_counts_count_each_bin(tmp_path, kind, m):
    from dpfast.engines import Bins

    for engine, column, values in _columns(kind, tmp_path):
        lo, hi = steps.value_range(engine.dataflow, column)
        bins = Bins(lo, m / (hi - lo), np.ones(m, dtype=np.int64))
        expected = np.bincount(bins.of(values), minlength=m)
        for flow in _flows(engine, kind):
            counts = steps.bin_counts(flow, column, lo, m / (hi - lo), m)
            np.testing.assert_array_equal(counts, expected)


@pytest.mark.parametrize("kind", ENGINES)
def test_edge_counts_count_between_edges(tmp_path, kind):
    edges = np.array([-40.0, -0.5, 0.0, 0.5, 3.0, 1e6])
    for engine, column, values in _columns(kind, tmp_path):
        expected = np.bincount(np.searchsorted(edges, values, side="right"), minlength=7)
        for flow in _flows(engine, kind):
            np.testing.assert_array_equal(steps.edge_counts(flow, column, edges), expected)


BINS = {"ties": 9, "small": 3}


def _resampled(kind: str, table: pa.Table, tmp_path: Path, keep: int) -> pa.Table:
    from dpfast.engines import Bins

    engine = _open(kind, table, tmp_path)
    key = noise.NoiseSource.from_seed(3).key("test", "resampled")
    for column in engine.numeric_columns(["ties", "small"], categorical=False):
        lo, hi = steps.value_range(engine.dataflow, column)
        m = BINS[str(column.name)]  # every bin holds values
        counts = steps.bin_counts(engine.dataflow, column, lo, m / (hi - lo), m)
        engine.write(WriteResampled(column, Bins(lo, m / (hi - lo), counts), key, keep, 2))
    engine.write(CopyColumns(["spread"], None))
    return _released(engine, kind)


@pytest.mark.parametrize("keep", [0, 2**31, 2**32])
def test_resampled_rows_draw_from_each_rows_bin(tmp_path, keep):
    table = _numbers()
    expected = _resampled("memory", table, tmp_path, keep)
    assert expected.schema == table.schema  # an integer column keeps its dtype
    for kind in ENGINES[1:]:
        assert _resampled(kind, table, tmp_path, keep).equals(expected), kind
    for name, m in BINS.items():
        before = table.column(name).to_numpy()
        after = expected.column(name).to_numpy()
        lo, hi = before.min(), before.max()
        bins = np.minimum(((before - lo) * (m / (hi - lo))).astype(np.int64), m - 1)
        bins_after = np.minimum(((after - lo) * (m / (hi - lo))).astype(np.int64), m - 1)
        np.testing.assert_array_equal(bins_after, bins)  # a value of its own bin
        changed = np.count_nonzero(after != before)
        if keep == 2**32:
            assert changed == 0  # every row kept
        else:
            assert changed > len(before) // (4 if keep else 2)
    # and the other column copied in its rows, whatever order its batches came in
    assert expected.column("spread").equals(table.column("spread"))


class _Shift:
    """Released codes: every code moved to the next one of ``m``."""

    def __init__(self, m: int) -> None:
        self.m = m

    def __call__(self, codes: np.ndarray, first_row: int) -> np.ndarray:
        return ((codes.astype(np.int64) + 1) % self.m).astype(codes.dtype)


def _colours(n: int = 3001) -> pa.Table:
    rng = np.random.default_rng(1)
    words = rng.choice(["red", "green", "blue"], n)
    return pa.table(
        {
            "text": pa.array(words),
            "shade": pa.array(words).dictionary_encode(),
            "small": pa.array(rng.integers(1, 4, n), pa.int32()),
        }
    )


@pytest.mark.parametrize("kind", ENGINES)
def test_coded_columns_release_the_domains_labels_in_row_order(tmp_path, kind):
    table = _colours()
    domain = ["blue", "green", "red", "grey"]
    engine = _open(kind, table, tmp_path)
    assert steps.value_dtype(engine.dataflow, "small") == np.dtype(np.int32)
    assert steps.value_dtype(engine.dataflow, "text") == np.dtype(object)
    engine.write(WriteCodes("text", domain, _Shift(len(domain))))
    engine.write(WriteCodes("small", [1, 2, 3], _Shift(3)))
    engine.write(CopyColumns(["shade"], None))
    got = _released(engine, kind)
    shifted = {"blue": "green", "green": "red", "red": "grey"}
    assert got.column("text").to_pylist() == [shifted[w] for w in table["text"].to_pylist()]
    small = table.column("small").to_numpy()
    assert got.column("small").to_pylist() == (small % 3 + 1).tolist()
    assert got.column("shade").to_pylist() == table.column("shade").to_pylist()


@pytest.mark.parametrize("kind", ENGINES)
def test_coded_columns_refuse_values_outside_the_domain(tmp_path, kind):
    table = _colours()
    text = table.column("text").to_pylist()
    text[2000], text[2500] = None, None
    table = table.set_column(0, "text", pa.array(text))
    engine = _open(kind, table, tmp_path)
    try:
        with pytest.raises(ValueError, match=r"'text' has 2 missing value\(s\)"):
            engine.write(WriteCodes("text", ["blue", "green", "red"], _Shift(3)))
    finally:
        engine.close()
    engine = _open(kind, table, tmp_path)
    try:
        seen = [w for w in dict.fromkeys(table.column("shade").to_pylist()) if w != "red"]
        outside = ", ".join(repr(w) for w in seen)  # in the order the rows hold them
        with pytest.raises(ValueError, match=rf"outside the domain: {outside}; add"):
            engine.write(WriteCodes("shade", ["red"], _Shift(1)))
    finally:
        engine.close()


@pytest.mark.parametrize("kind", ["memory", "outofcore"])
def test_randomized_response_spends_its_budget_when_it_has_an_epsilon(tmp_path, kind):
    from dpfast.budget import BudgetFile

    table = _colours()
    budget = BudgetFile.create(tmp_path / "b.json", 2.0)
    where: dict = {} if kind == "memory" else {"engine": "outofcore"}
    arguments = {"column": "text", "domain": ["blue", "green", "red"], "seed": 1, **where}
    output = tmp_path / "rr.parquet"
    release = dpfast.randomized_response(
        table, epsilon=0.5, budget=budget, output=output, **arguments
    )
    assert budget.remaining() == pytest.approx(2.0 - release.report.epsilon)
    assert release.report.epsilon <= 0.5
    (entry,) = budget.entries()
    assert entry.status == "committed" and entry.columns == ("text",)
    # with a retention alone the epsilon is not known before the release: refused
    with pytest.raises(ValueError, match="budget needs epsilon"):
        dpfast.randomized_response(
            table, retention=0.5, budget=budget, output=tmp_path / "no.parquet", **arguments
        )
    assert not (tmp_path / "no.parquet").exists() and len(budget.entries()) == 1
