"""Release frames made through one exchange: columns copied in the rows' order or in a
keyed permutation, beside released columns, computed by the workers (docs/scale.md).

The parts are checked against the slow, obvious reading (the table's rows in order, and
``table.take(permutation(key, n))``) for any cut of the input into batches and of the
output into parts; then Spark's and Dask's frames against the in-memory release, in the
same row order, with and without ``output``; then the counters: the driver receives O(1)
bytes whatever the table's size, and the output parts place each row once.
"""

from __future__ import annotations

import pickle
import random
import warnings
from itertools import pairwise

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import noise
from dpfast.engines.frames import ExchangedParts
from dpfast.engines.frames.exchange import Shuffled, part_bounds
from dpfast.exceptions import DPFastRuntimeError, DPFastValueError, NoiseDominatesWarning
from dpfast.taxonomy import Taxonomy
from tests.engine_runs import apart_from_engine, on_engine

KEY = noise.NoiseSource.from_seed(5).key("exchange")
BOUNDS = {"a": (0.0, 100.0), "b": (0, 50)}


def _input(n: int) -> pa.Table:
    rng = np.random.default_rng(n)
    x = pa.array(rng.normal(size=n), mask=np.arange(n) % 13 == 0)  # nulls are copied
    return pa.table(
        {
            "x": x,
            "s": pa.array([f"s{i % 11}" for i in range(n)]),
            "i": pa.array(np.arange(n, dtype=np.int32)),
        }
    )


def _cuts(n: int, rng: random.Random) -> list[tuple[int, int]]:
    """Batches of the input: consecutive rows, of random sizes (some of one row)."""
    edges = sorted({0, n, *(rng.randrange(n) for _ in range(6)), 1, n - 1})
    return [(a, b - a) for a, b in pairwise(edges) if b > a]


def _assembled(parts: ExchangedParts, table: pa.Table, cuts, rng: random.Random) -> pa.Table:
    """Run the emit of every batch, then assemble every part from its pieces in any order."""
    inbox: list[list[bytes]] = [[] for _ in range(parts.count)]
    for first, rows in cuts:
        batch = table.slice(first, rows).to_batches()[0]
        for part, payload in parts.emit(batch, first):
            inbox[part].append(payload)
    out = []
    for part, payloads in enumerate(inbox):
        rng.shuffle(payloads)  # pieces arrive in any order
        out.append(parts.assemble(part, payloads))
    return pa.concat_tables(out)


@pytest.mark.parametrize("n", [1, 1000, 2**16 + 5, 300_001])
@pytest.mark.parametrize("part_rows", [1, 977, 70_000, 10**6])
def test_exchanged_parts_are_the_rows_in_order_and_in_the_permutation(n, part_rows):
    if n // part_rows > 1000:
        pytest.skip("too many parts for this size")
    rng = random.Random(n + part_rows)
    table = _input(n)
    names = ("x", "s", "i")
    types = tuple(table.schema.field(name).type for name in names)
    order = noise.permutation(KEY, n)
    starts = Shuffled.of((), KEY, n).starts
    cases = [(("x", "s", "i"), (), None), ((), ("x", "s", "i"), starts), (("i",), ("x", "s"), None)]
    for kept, shuffled, aligned in cases:  # parts cut at bucket starts, or anywhere
        parts = ExchangedParts(
            n,
            part_bounds(n, part_rows, aligned),
            names,
            types,
            kept=kept,
            shuffled=Shuffled.of(shuffled, KEY, n) if shuffled else None,
            input_types=tuple(zip(names, types, strict=True)),
        )
        got = _assembled(parts, table, _cuts(n, rng), rng)
        assert got.num_rows == n and got.column_names == list(names)
        for name in kept:
            assert got.column(name).combine_chunks().equals(table.column(name).combine_chunks())
        for name in shuffled:
            want = table.column(name).combine_chunks().take(pa.array(order))
            assert got.column(name).combine_chunks().equals(want), name


@pytest.mark.parametrize("aligned", [True, False])
def test_each_row_is_sent_once_where_parts_are_cut_at_bucket_starts(aligned):
    n, part_rows = 300_001, 70_000
    shuffled = Shuffled.of(("x",), KEY, n)
    starts = shuffled.starts
    bounds = part_bounds(n, part_rows, starts if aligned else None)
    parts = ExchangedParts(n, bounds, ("x",), (pa.float64(),), shuffled=shuffled)
    table = _input(n).select(["x"])
    sent = np.zeros(parts.count, dtype=np.int64)
    for first in range(0, n, 50_000):
        batch = table.slice(first, 50_000).to_batches()[0]
        for part, payload in parts.emit(batch, first):
            sent[part] += pickle.loads(payload).buckets.shape[0]
    for part in range(parts.count):
        lo, hi = parts.span(part)
        first = np.searchsorted(starts, lo, side="right") - 1
        last = np.searchsorted(starts, hi, side="left")
        assert sent[part] == starts[last] - starts[first]  # its buckets' rows, whole
        assert parts.scanned(part) == (sent[part], hi - lo)
    if aligned:  # every bound a bucket start: each row sent once
        assert set(bounds.tolist()) <= set(starts.tolist())
        assert sent.sum() == n and parts.count == 4  # the 8 buckets, two a part
    else:  # a bucket cut by a bound goes to both parts
        cut = sum(1 for lo in bounds[1:-1].tolist() if lo not in set(starts.tolist()))
        assert cut > 0 and n < sent.sum() <= n + cut * int(np.diff(starts).max())


def test_part_bounds_rise_from_zero_to_n_at_bucket_starts():
    starts = np.array([0, 40, 45, 100, 160, 200])
    assert part_bounds(200, 50).tolist() == [0, 50, 100, 150, 200]
    assert part_bounds(200, 50, starts).tolist() == [0, 100, 160, 200]
    assert part_bounds(200, 1, starts).tolist() == starts.tolist()  # a bucket a part at most
    assert part_bounds(200, 10**6, starts).tolist() == [0, 200]
    assert part_bounds(0, 5).tolist() == [0, 0]


def test_a_part_missing_rows_says_the_input_changed():
    n = 5000
    table = _input(n)
    names = ("x", "i")
    types = tuple(table.schema.field(name).type for name in names)
    for kept, shuffled in [((), names), (names, ())]:
        parts = ExchangedParts(
            n, part_bounds(n, 2000), names, types, kept=kept,
            shuffled=Shuffled.of(shuffled, KEY, n) if shuffled else None,
        )  # fmt: skip
        inbox: list[list[bytes]] = [[] for _ in range(parts.count)]
        for first in range(0, n, 1000):
            for part, payload in parts.emit(table.slice(first, 1000).to_batches()[0], first):
                inbox[part].append(payload)
        with pytest.raises(DPFastRuntimeError, match="part 1 of the release did not receive"):
            parts.assemble(1, inbox[1][1:])


def test_a_frame_refuses_bounds_that_do_not_rise_from_zero_to_n():
    for bounds in ([0, 5], [1, 10], [0, 5, 5, 10], [0], [0, 6, 5, 10]):
        with pytest.raises(DPFastValueError, match="rise from 0 to n"):
            ExchangedParts(10, np.array(bounds), (), ())


# ------------------------------------------------------------------ on Spark and on Dask


def _frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "a": rng.uniform(-5, 105, n),
            "b": rng.integers(-3, 53, n),
            "note": [f"n{i % 17}" for i in range(n)],
            "f": rng.normal(size=n),
        }
    )
    frame.loc[::9, "f"] = np.nan
    return frame


#: (function, options): releases with columns copied unprotected.
RELEASES = {
    "laplace shuffle": (dpfast.laplace_dp, {"epsilon": 4.0, "unprotected": "shuffle"}),
    "laplace keep": (dpfast.laplace_dp, {"epsilon": 4.0, "unprotected": "keep"}),
    "ir_dp shuffle": (dpfast.ir_dp, {"epsilon": 4.0, "k": 7, "unprotected": "shuffle"}),
}


def _release(engine: str, data, name: str, **more):
    function, options = RELEASES[name]
    arguments = {"bounds": BOUNDS, "columns": ["a", "b"], "seed": 3, **options, **more}
    with warnings.catch_warnings():  # laplace_dp's noise dominates here: a forecast only
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        if engine == "memory":
            release = function(data, **arguments)
            return release.data, release.report, release.private
        return on_engine(engine, function, data, **arguments)


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """The same rows in the same order (not only the same multiset)."""
    got = got.reset_index(drop=True)
    want = want.reset_index(drop=True)
    assert list(got.columns) == list(want.columns)
    for name in want.columns:
        assert got[name].tolist() == pytest.approx(want[name].tolist(), abs=0, nan_ok=True)


#: Rows of the engines' tables: 4 permutation buckets of about 50,000 rows.
N = 200_000


def _check(engine: str, data, expected, name: str, tmp_path, to_pandas) -> None:
    want, report, private = expected
    lazy, lazy_report, lazy_private = _release(engine, data, name, part_rows=45_000)
    _same(to_pandas(lazy), want)
    assert apart_from_engine(lazy_report) == apart_from_engine(report)
    assert lazy_private.clamped == private.clamped
    assert lazy_private.clamped_output == private.clamped_output
    out = tmp_path / f"{engine}-{name.replace(' ', '-')}"
    # ir_dp: its columns' ranks sent by the sort's tasks, as larger tables on more parts do
    sent = {"send_ranks": True} if name.startswith("ir_dp") else {}
    _, written_report, written = _release(engine, data, name, part_rows=45_000, output=out, **sent)
    _same(pq.read_table(out).to_pandas(), want)
    assert apart_from_engine(written_report) == apart_from_engine(report)
    assert written.clamped == private.clamped
    assert written.clamped_output == private.clamped_output
    work = written.to_dict()["work"]
    files = len(list(out.glob("*.parquet")))
    if name.endswith("shuffle"):  # parts cut at the 4 buckets' starts: each row sent once
        assert files == 4 and work["output_passes"] == 4
        if name.startswith("ir_dp"):
            # a and b: sent by the sort's tasks, each rank placed once, but for the
            # bucket of their own permutation that a part's bound cuts (sent to both)
            assert 3 * N <= work["output_scanned"] <= 3 * N + 2 * 3 * 60_000
        else:
            assert work["output_scanned"] == N
        groups = 2 if name.startswith("ir_dp") else 0
        assert work["output_items"] == N * (2 + groups)  # note and f, and a and b
    else:  # in the rows' order: 5 parts of at most 45,000 rows, no permutation
        assert files == 5 and work["output_passes"] == 0


@pytest.mark.filterwarnings("ignore:Sending large graph")  # the table, from pandas
@pytest.mark.parametrize("name", list(RELEASES))
def test_a_dask_release_copies_columns_through_the_exchange_in_the_in_memory_order(
    client, name, tmp_path
):
    import dask
    import dask.dataframe as dd

    table = _frame(N)
    expected = _release("memory", table, name)
    with dask.config.set({"dataframe.convert-string": False}):
        data = dd.from_pandas(table, npartitions=3)
    _check("dask", data, expected, name, tmp_path, lambda frame: frame.compute())


@pytest.fixture(scope="module")
def spark_frame(spark):
    """The Spark frame of ``_frame(N)`` in 3 partitions, cached, and its rows in its order.

    Made once for the module's Spark releases, which only read it: 200,000 rows sent
    from pandas and read back cost more than some of the releases.
    """
    data = spark.createDataFrame(pa.Table.from_pandas(_frame(N), preserve_index=False))
    data = data.repartition(3).cache()
    yield data, data.toArrow().to_pandas()  # the frame's own row order
    data.unpersist()


@pytest.mark.parametrize("name", list(RELEASES))
def test_a_spark_release_copies_columns_through_the_exchange_in_the_in_memory_order(
    spark_frame, name, tmp_path
):
    data, local = spark_frame
    expected = _release("memory", local, name)
    _check("spark", data, expected, name, tmp_path, lambda frame: frame.toArrow().to_pandas())


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_a_dask_shuffle_brings_no_row_to_the_driver(client):
    """``laplace_dp`` with a shuffle: the driver's bytes do not grow with the table."""
    import dask.dataframe as dd

    got = {}
    for n in (20_000, 200_000):
        data = dd.from_pandas(_frame(n), npartitions=4)
        _, _, private = _release("dask", data, "laplace shuffle", part_rows=50_000)
        got[n] = private.to_dict()["work"]["driver_bytes"]
    assert got[200_000] <= 1.5 * got[20_000]
    assert got[200_000] < 1000  # a count a batch, not 24 bytes a row


def test_a_piece_carries_only_its_own_rows():
    # a slice of an Arrow array pickles its whole buffer: a piece copies its rows out
    n = 100_000
    table = _input(n)
    names = ("x", "s", "i")
    types = tuple(table.schema.field(name).type for name in names)
    parts = ExchangedParts(n, part_bounds(n, 10_000), names, types, kept=names)
    batch = table.slice(0, n).to_batches()[0]
    emitted = parts.emit(batch.slice(35_000, 30_000), 35_000)
    assert [part for part, _ in emitted] == [3, 4, 5, 6]
    whole = len(pickle.dumps(batch))
    for part, payload in emitted:
        lo, hi = parts.span(part)
        rows = min(hi, 65_000) - max(lo, 35_000)
        assert len(payload) < whole * rows / n * 1.5 + 10_000  # its rows' share, not the batch


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_a_dask_release_sending_ranks_holds_no_group_on_the_driver(client, tmp_path):
    """More groups than the memory limit holds: refused on the driver, sent by the sorts."""
    import dask.dataframe as dd

    from tests.engine_runs import on_engine

    n = 100_000
    rng = np.random.default_rng(5)
    # y: four values, each a run of ties larger than a sort task: sent with no sort
    table = pd.DataFrame({"x": rng.uniform(0, 1e5, n), "y": rng.integers(0, 4, n)})
    data = dd.from_pandas(table, npartitions=3)
    bounds = {"x": (0.0, 1e5), "y": (0, 3)}
    arguments = {"k": 3, "epsilon": 1.0, "bounds": bounds, "seed": 3}
    with pytest.raises(ValueError, match="33,333 rank groups per column"):
        on_engine("dask", dpfast.ir_dp, data, output=tmp_path / "driver", send_ranks=False,
                  memory_limit=200_000, **arguments)  # fmt: skip
    # by cost: the column does not fit a sort task of 200,000 bytes, so its ranks are sent
    _, _, private = on_engine(
        "dask", dpfast.ir_dp, data, output=tmp_path / "sent", memory_limit=200_000, **arguments
    )
    want = dpfast.ir_dp(table, **arguments)
    _same(pq.read_table(tmp_path / "sent").to_pandas(), want.data)
    assert private.clamped_output == want.private.clamped_output
    work = private.to_dict()["work"]  # one part: each rank placed once
    assert work["output_passes"] == 1 and work["output_scanned"] == work["output_items"] == 2 * n


# ------------------------------------------------ a categorical column's codes, sent


#: A taxonomy of the frame's "note" column (``n0`` .. ``n16``).
NOTES = Taxonomy.from_mapping(
    {"*": {"low": [f"n{i}" for i in range(9)], "high": [f"n{i}" for i in range(9, 17)]}}
)


def _categorical_release(engine: str, data, **more):
    arguments = {
        "k": 7,
        "epsilon": 4.0,
        "bounds": {"a": BOUNDS["a"]},
        "columns": ["a", "note"],
        "taxonomies": {"note": NOTES},
        "unprotected": "shuffle",
        "seed": 3,
    }
    if engine == "memory":
        release = dpfast.ir_dp(data, **arguments)
        return release.data, release.report, release.private
    return on_engine(engine, dpfast.ir_dp, data, **arguments, **more)


def _check_categorical(engine: str, data, local: pd.DataFrame, tmp_path) -> None:
    """ir_dp of a categorical column, its codes drawn and sent by the write's tasks."""
    want, report, private = _categorical_release("memory", local)
    work = {}
    for sent in (True, False):
        out = tmp_path / f"{engine}-{sent}"
        _, got_report, got = _categorical_release(
            engine, data, output=out, part_rows=45_000, send_ranks=sent
        )
        written = pq.read_table(out).to_pandas()
        assert written["note"].tolist() == want["note"].tolist()  # the same rows, in order
        _same(written, want)
        assert apart_from_engine(got_report) == apart_from_engine(report)
        assert got.clamped == private.clamped
        assert got.clamped_output == private.clamped_output
        work[sent] = got.to_dict()["work"]
    # f, shuffled, is placed once. Sent, each rank of a and of note is placed once, but
    # for the buckets that a part's bound cuts (sent to both parts); on the driver's path
    # each of the 4 parts scans their whole bucket streams
    assert work[False]["output_scanned"] == N + 2 * 4 * N
    assert 3 * N <= work[True]["output_scanned"] <= 3 * N + 2 * 3 * 60_000


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_a_dask_release_sends_a_categorical_columns_codes_drawn_by_its_tasks(client, tmp_path):
    import dask
    import dask.dataframe as dd

    table = _frame(N)
    with dask.config.set({"dataframe.convert-string": False}):
        data = dd.from_pandas(table, npartitions=3)
    _check_categorical("dask", data, table, tmp_path)


def test_a_spark_release_sends_a_categorical_columns_codes_drawn_by_its_tasks(
    spark_frame, tmp_path
):
    data, local = spark_frame
    _check_categorical("spark", data, local, tmp_path)


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_a_dask_release_of_categories_sending_codes_holds_no_group_on_the_driver(client, tmp_path):
    """More groups than the memory limit holds: refused on the driver, drawn by the tasks."""
    import dask.dataframe as dd

    n = 100_000
    rng = np.random.default_rng(11)
    notes = pd.Categorical([f"n{i}" for i in rng.integers(0, 17, n)], [f"n{i}" for i in range(17)])
    table = pd.DataFrame({"note": notes})
    data = dd.from_pandas(table, npartitions=3)
    arguments = {"k": 3, "epsilon": 1.0, "taxonomies": {"note": NOTES}, "seed": 3}
    with pytest.raises(ValueError, match="33,333 rank groups per column"):
        on_engine("dask", dpfast.ir_dp, data, output=tmp_path / "driver", send_ranks=False,
                  memory_limit=200_000, **arguments)  # fmt: skip
    on_engine("dask", dpfast.ir_dp, data, output=tmp_path / "sent", memory_limit=200_000,
              **arguments)  # fmt: skip
    want = dpfast.ir_dp(table, **arguments).data
    got = pq.read_table(tmp_path / "sent").to_pandas()
    assert got["note"].tolist() == want["note"].tolist()
    assert got["note"].dtype == want["note"].dtype  # a dictionary, as the input


# ------------------------------------------- ranks sent, cut inside the larger group

#: 100,000 rows in 10 groups of 9,973 and one of 10,243: group 5 (middle) or 9 (last).
#: Sort tasks of at most about 2,500 ranks (200,000 bytes at 80 a rank) and the runs of
#: the 17 categories cut the larger group several times.
CUT_ROWS, CUT_K = 100_000, 9_973


def _cut_table() -> pd.DataFrame:
    rng = np.random.default_rng(13)
    notes = [f"n{i}" for i in rng.integers(0, 17, CUT_ROWS)]
    return pd.DataFrame({"x": rng.uniform(0, 1e5, CUT_ROWS), "note": notes})


def _cut_release(engine: str, data, remainder: str, out=None):
    arguments = {
        "k": CUT_K,
        "epsilon": 4.0,
        "bounds": {"x": (0.0, 1e5)},
        "taxonomies": {"note": NOTES},
        "seed": 3,
        "remainder": remainder,
    }
    if engine == "memory":
        return dpfast.ir_dp(data, **arguments)
    return on_engine(
        engine, dpfast.ir_dp, data, output=out, memory_limit=200_000, send_ranks=True, **arguments
    )


def _check_cut(got: pd.DataFrame, report, private, want) -> None:
    assert got["note"].tolist() == want.data["note"].tolist()
    assert got["x"].tolist() == want.data["x"].tolist()
    assert apart_from_engine(report) == apart_from_engine(want.report)
    assert private.clamped_output == want.private.clamped_output


@pytest.mark.filterwarnings("ignore:Sending large graph")
@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_a_dask_release_sending_ranks_cut_inside_the_larger_group(client, tmp_path, remainder):
    import dask
    import dask.dataframe as dd

    table = _cut_table()
    with dask.config.set({"dataframe.convert-string": False}):
        data = dd.from_pandas(table, npartitions=3)
    _, report, private = _cut_release("dask", data, remainder, tmp_path / "out")
    want = _cut_release("memory", table, remainder)
    _check_cut(pq.read_table(tmp_path / "out").to_pandas(), report, private, want)


@pytest.fixture(scope="module")
def spark_cut_frame(spark):
    """The Spark frame of ``_cut_table()`` in 3 partitions, cached, and its rows in its order
    (made once for both remainders: the releases only read it)."""
    data = spark.createDataFrame(pa.Table.from_pandas(_cut_table(), preserve_index=False))
    data = data.repartition(3).cache()
    yield data, data.toArrow().to_pandas()
    data.unpersist()


@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_a_spark_release_sending_ranks_cut_inside_the_larger_group(
    spark_cut_frame, tmp_path, remainder
):
    data, local = spark_cut_frame
    _, report, private = _cut_release("spark", data, remainder, tmp_path / "out")
    want = _cut_release("memory", local, remainder)
    _check_cut(pq.read_table(tmp_path / "out").to_pandas(), report, private, want)
