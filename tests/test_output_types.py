"""A release keeps its input's types, and never wraps a value around (issue 30, point 5).

* An integer column whose type cannot hold its public bounds is released in the narrowest
  wider type that can (the bounds decide, never the values), and the public report notes
  it; ``float32`` stays ``float32``, its values inside the bounds.
* A table with two columns of one name is refused, naming the column and the fix.
* A column whose type declares its categories (a pandas ordered categorical, a polars
  ``Enum``, an Arrow dictionary marked ordered) keeps them, in their order, and its
  ``ordered`` flag, when they hold every leaf of its taxonomy; a type that lacks some is
  refused (its categories may be the values that occur: tests/test_declared_types.py).

Every engine gives the same types: tests/test_engine_conformance.py runs the ``*-narrow-
types`` and ``*-ordered`` cases on all of them. Here: each rule, its edge cases, every input
kind in memory, and the Parquet round trip out of core.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast._release import SEEDED_NOTE
from dpfast.dataflow.values import NumericColumn, holding_dtype
from dpfast.datasets import adult_taxonomy
from dpfast.engines import EngineChoice
from dpfast.exceptions import DPFastValueError, NoiseDominatesWarning
from dpfast.io import read_table

N = 400
OCCUPATIONS = list(adult_taxonomy("occupation").domain)
#: Every leaf, in an order of their own, with a category that no taxonomy leaf is.
DECLARED = [*reversed(OCCUPATIONS), "Retired"]
TAXONOMY = {"job": adult_taxonomy("occupation")}


def _quiet(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a release, ignoring the warning that its noise swamps a narrow domain."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        return function(*args, **kwargs)


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("dtype", "bounds", "expected"),
    [
        ("uint8", (0, 255), "uint8"),  # holds them: unchanged
        ("uint8", (0, 1000), "uint16"),
        ("uint8", (0, 70_000), "uint32"),
        ("uint8", (-5, 200), "int16"),  # a negative lower bound: signed
        ("uint16", (-1, 40_000), "int32"),
        ("uint32", (-1, 10), "int32"),  # released values lie in the bounds: int32 holds them
        ("int8", (-128, 127), "int8"),
        ("int8", (-129, 0), "int16"),
        ("int16", (0, 2**31), "int64"),
        ("int64", (-(2**62), 2**62), "int64"),
        ("uint64", (0, 2**63), "uint64"),
        ("bool", (0, 1), "bool"),
        ("bool", (0, 2), "uint8"),
        ("bool", (-1, 1), "int8"),
        ("int8", (0.4, 127.4), "int16"),  # the bounds round outward: 128 could be released
    ],
)
def test_an_integer_type_widens_to_the_narrowest_that_holds_the_bounds(dtype, bounds, expected):
    got = holding_dtype(np.dtype(dtype), True, *bounds)
    assert got == np.dtype(expected)


@pytest.mark.parametrize(
    ("dtype", "bounds", "expected"),
    [
        ("float32", (0.0, 1.0), "float32"),
        ("float32", (-3e38, 3e38), "float32"),
        ("float32", (0.0, 1e39), "float64"),  # beyond float32's range
        ("float16", (0.0, 60_000.0), "float16"),
        ("float16", (0.0, 70_000.0), "float64"),
        ("float64", (0.0, 1e300), "float64"),
        ("int32", (0.0, 1.0), "float64"),  # an integer column released as floats
    ],
)
def test_a_float_type_is_kept_when_it_holds_the_bounds(dtype, bounds, expected):
    assert holding_dtype(np.dtype(dtype), False, *bounds) == np.dtype(expected)


def test_no_integer_type_holding_the_bounds_is_refused():
    with pytest.raises(DPFastValueError, match="no integer type holds its bounds") as raised:
        holding_dtype(np.dtype("int64"), True, 0, 2.0**64, "age")
    assert "'age'" in str(raised.value) and "narrow the bounds" in str(raised.value)


def test_a_float32_value_stays_inside_bounds_float32_cannot_hold():
    # float32 rounds 0.7 down and 1.1 up, outside [0.7, 1.1]: the nearest value inside
    # is released on the bound
    column = NumericColumn("x", np.empty(0), False, np.dtype("float32")).within(0.7, 1.1)
    got = column.restore_dtype(np.array([0.7, 0.9, 1.1]))
    assert got.dtype == np.float32
    assert float(np.float32(0.7)) < 0.7 and float(np.float32(1.1)) > 1.1
    assert float(got[0]) >= 0.7 and float(got[2]) <= 1.1
    assert got[0] == np.nextafter(np.float32(0.7), np.float32(2))
    assert got[2] == np.nextafter(np.float32(1.1), np.float32(0))
    assert got[1] == np.float32(0.9)


# --------------------------------------------------------------------------- integers


def _counts(dtype: str = "uint8") -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"n": rng.integers(0, 200, N).astype(dtype), "x": rng.random(N)})


NUMERIC_METHODS = {
    "ir_dp": lambda data, bounds, **kw: dpfast.ir_dp(data, k=5, epsilon=2.0, bounds=bounds, **kw),
    "laplace_dp": lambda data, bounds, **kw: dpfast.laplace_dp(
        data, epsilon=2.0, bounds=bounds, **kw
    ),
    "mdav_dp": lambda data, bounds, **kw: dpfast.mdav_dp(
        data, k=20, epsilon=5.0, bounds=bounds, **kw
    ),
}


@pytest.mark.parametrize("method", sorted(NUMERIC_METHODS))
def test_uint8_never_wraps_and_the_report_notes_the_wider_type(method):
    release = NUMERIC_METHODS[method]
    bounds = {"n": (0, 1000), "x": (0.0, 1.0)}
    got = _quiet(release, _counts(), bounds, seed=4)
    expected = _quiet(release, _counts("int64"), bounds, seed=4)
    assert got.data["n"].dtype == np.uint16
    # the same values as an int64 column gives: nothing wrapped
    np.testing.assert_array_equal(got.data["n"].to_numpy(), expected.data["n"].to_numpy())
    assert int(got.data["n"].max()) > 255  # beyond uint8: it would have wrapped
    note = (
        "column 'n': its type uint8 cannot hold every value of its public bounds [0, 1000], "
        "so it is released as uint16"
    )
    assert note in got.report.notes
    assert not [n for n in expected.report.notes if "released as" in n]


def test_a_negative_lower_bound_on_an_unsigned_column_gives_a_signed_type():
    got = _quiet(
        NUMERIC_METHODS["laplace_dp"], _counts(), {"n": (-300, 300)}, columns=["n"], seed=2
    )
    assert got.data["n"].dtype == np.int16
    assert int(got.data["n"].min()) < 0  # negative values released as such


def test_the_bounds_decide_the_type_never_the_data():
    # every value fits uint8; the bounds do not: the type widens all the same, so that
    # neighbouring tables give releases of one type
    small = pd.DataFrame({"n": np.zeros(N, dtype=np.uint8)})
    got = _quiet(NUMERIC_METHODS["laplace_dp"], small, {"n": (0, 256)}, seed=1)
    assert got.data["n"].dtype == np.uint16
    held = _quiet(NUMERIC_METHODS["laplace_dp"], small, {"n": (0, 255)}, seed=1)
    assert held.data["n"].dtype == np.uint8 and not held.report.notes[1:]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("UInt8", "UInt16"),
        ("uint8[pyarrow]", "uint16[pyarrow]"),
        ("Float32", "Float32"),
        ("float32[pyarrow]", "float[pyarrow]"),
    ],
)
def test_pandas_extension_dtypes_widen_within_their_family(kind, expected):
    frame = pd.DataFrame({"n": pd.array(np.arange(N) % 200, dtype=kind)})
    got = _quiet(NUMERIC_METHODS["laplace_dp"], frame, {"n": (0, 1000)}, seed=1)
    assert str(got.data["n"].dtype) == expected


def test_arrow_polars_and_numpy_inputs_widen_the_same():
    polars = pytest.importorskip("polars")
    frame = _counts()
    bounds = {"n": (0, 1000), "x": (0.0, 1.0)}
    expected = _quiet(NUMERIC_METHODS["ir_dp"], frame, bounds, seed=5).data["n"].to_numpy()
    arrow = _quiet(NUMERIC_METHODS["ir_dp"], pa.Table.from_pandas(frame), bounds, seed=5)
    assert arrow.data.schema.field("n").type == pa.uint16()
    frame_pl = polars.from_pandas(frame)
    got_pl = _quiet(NUMERIC_METHODS["ir_dp"], frame_pl, bounds, seed=5)
    assert got_pl.data.schema["n"] == polars.UInt16
    np.testing.assert_array_equal(arrow.data.column("n").to_numpy(), expected)
    np.testing.assert_array_equal(got_pl.data["n"].to_numpy(), expected)
    array = np.column_stack([frame["n"].to_numpy(), frame["n"].to_numpy()])
    got_np = _quiet(dpfast.laplace_dp, array, epsilon=1.0, bounds={0: (0, 1000), 1: (0, 255)})
    assert got_np.data.dtype == np.uint16  # one array: the wider of its columns' types
    assert any("column 0:" in note for note in got_np.report.notes)


def test_int64_releases_are_unchanged_and_have_no_note():
    frame = _counts("int64")
    got = _quiet(NUMERIC_METHODS["ir_dp"], frame, {"n": (0, 1000), "x": (0.0, 1.0)}, seed=5)
    assert got.data["n"].dtype == np.int64 and got.data["x"].dtype == np.float64
    assert got.report.notes == [SEEDED_NOTE]


# --------------------------------------------------------------------------- float32


def _floats() -> pd.DataFrame:
    rng = np.random.default_rng(8)
    return pd.DataFrame(
        {"a": rng.uniform(-1, 11, N).astype(np.float32), "b": rng.random(N).astype(np.float32)}
    )


FLOAT_METHODS = {
    **NUMERIC_METHODS,
    "individual_ranking": lambda data, bounds, **kw: dpfast.individual_ranking(data, k=5),
    "k_noise": lambda data, bounds, **kw: dpfast.k_noise(data, k=5, **kw),
    "k_pram": lambda data, bounds, **kw: dpfast.k_pram(data, k=5, retention=0.5, **kw),
    "mdav": lambda data, bounds, **kw: dpfast.mdav(data, k=5),
}


@pytest.mark.parametrize("method", sorted(FLOAT_METHODS))
def test_float32_stays_float32_inside_its_bounds(method):
    bounds = {"a": (0.1, 9.9), "b": (0.0, 1.0)}
    extra = {"seed": 3} if method not in ("individual_ranking", "mdav") else {}
    got = _quiet(FLOAT_METHODS[method], _floats(), bounds, **extra)
    assert list(got.data.dtypes) == [np.float32, np.float32]
    if method in NUMERIC_METHODS:  # clamped to the public bounds, in float32
        assert float(got.data["a"].min()) >= 0.1 and float(got.data["a"].max()) <= 9.9
        assert not [n for n in got.report.notes if "released as" in n]


def test_float32_is_float32_in_arrow_and_polars():
    polars = pytest.importorskip("polars")
    bounds = {"a": (0.0, 10.0), "b": (0.0, 1.0)}
    arrow = _quiet(NUMERIC_METHODS["laplace_dp"], pa.Table.from_pandas(_floats()), bounds, seed=1)
    assert arrow.data.schema.types == [pa.float32(), pa.float32()]
    frame = polars.from_pandas(_floats())
    got = _quiet(NUMERIC_METHODS["ir_dp"], frame, bounds, seed=1)
    assert list(got.data.schema.values()) == [polars.Float32, polars.Float32]


# --------------------------------------------------------------------------- repeated names


def test_a_csv_with_a_repeated_column_name_is_a_clear_error(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("age,age,income\n30,40,1\n50,60,2\n")
    with pytest.raises(DPFastValueError) as raised:
        read_table(path)
    message = str(raised.value)
    assert "2 columns named 'age'" in message and "header row" in message


def test_repeated_names_in_frames_tables_and_parquet_are_refused(tmp_path):
    frame = pd.DataFrame([[1, 2, 3]], columns=["a", "a", "b"])
    table = pa.table([[1], [2], [3]], names=["a", "a", "b"])
    bounds = {"b": (0, 5)}
    for data, fix in ((frame, "frame.columns"), (table, "rename_columns")):
        with pytest.raises(DPFastValueError, match="2 columns named 'a'") as raised:
            dpfast.laplace_dp(data, epsilon=1.0, bounds=bounds, columns=["b"])
        assert fix in str(raised.value)
    path = tmp_path / "in.parquet"
    pq.write_table(table, path)
    with pytest.raises(DPFastValueError, match="2 columns named 'a'"):
        dpfast.laplace_dp(
            path, epsilon=1.0, bounds=bounds, columns=["b"], output=tmp_path / "out.parquet"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_dask_and_spark_frames_with_repeated_names_are_refused(request, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame([[1, 2, 3], [4, 5, 6]], columns=["a", "a", "b"])
    bounds = {"b": (0, 9)}
    with pytest.raises(DPFastValueError, match="2 columns named 'a'") as raised:
        dpfast.laplace_dp(dd.from_pandas(frame, npartitions=1), epsilon=1.0, bounds=bounds)
    assert "frame.columns = names" in str(raised.value)
    spark = request.getfixturevalue("spark")
    data = spark.createDataFrame(frame.to_numpy().tolist(), ["a", "a", "b"])
    with pytest.raises(DPFastValueError, match="2 columns named 'a'") as raised:
        dpfast.laplace_dp(data, epsilon=1.0, bounds=bounds, columns=["b"])
    assert "toDF" in str(raised.value)


def test_the_cli_names_the_repeated_column_in_one_line(tmp_path, capsys):
    from dpfast import cli

    (tmp_path / "d.csv").write_text("age,age,x\n30,40,1\n50,60,2\n33,44,3\n")
    schema = '{"columns": {"age": {"type": "integer", "bounds": [0, 100]}}}'
    (tmp_path / "s.json").write_text(schema)
    for argv in (
        ["release", "laplace", "d.csv", "-o", "o.csv", "--epsilon", "1", "--schema", "s.json"],
        ["schema", "init", "d.csv", "-o", "d.schema.json"],
    ):
        argv = [str(tmp_path / a) if a.endswith((".csv", ".json")) else a for a in argv]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "2 columns named 'age'" in err[0], err
        assert "internal error" not in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "s.json"]


# --------------------------------------------------------------------------- categories


def _jobs() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    values = rng.choice(OCCUPATIONS[2:], N)
    return pd.DataFrame({"age": rng.integers(17, 91, N), "job": values})


CATEGORICAL_METHODS = {
    "ir_dp": lambda data: dpfast.ir_dp(
        data, k=5, epsilon=4.0, bounds={"age": (17, 90)}, taxonomies=TAXONOMY, seed=1
    ),
    "mdav_dp": lambda data: dpfast.mdav_dp(
        data, k=20, epsilon=100.0, bounds={"age": (17, 90)}, taxonomies=TAXONOMY, seed=1
    ),
    "mdav": lambda data: dpfast.mdav(data, k=5, taxonomies=TAXONOMY),
    "randomized_response": lambda data: dpfast.randomized_response(
        data, column="job", domain=OCCUPATIONS, epsilon=1.0, seed=1
    ),
    "laplace_dp-keep": lambda data: dpfast.laplace_dp(
        data, epsilon=4.0, bounds={"age": (17, 90)}, columns=["age"], unprotected="keep", seed=1
    ),
}
#: The released categories: the declared ones in their order.
RELEASED = DECLARED


@pytest.mark.parametrize("method", sorted(CATEGORICAL_METHODS))
def test_a_pandas_ordered_categorical_keeps_its_order_and_flag(method):
    frame = _jobs()
    frame["job"] = pd.Categorical(frame["job"], categories=DECLARED, ordered=True)
    got = _quiet(CATEGORICAL_METHODS[method], frame).data["job"].dtype
    assert got.ordered
    expected = DECLARED if method == "laplace_dp-keep" else RELEASED  # copied: its own type
    assert list(got.categories) == expected


@pytest.mark.parametrize("method", sorted(CATEGORICAL_METHODS))
def test_an_unordered_categorical_takes_the_public_domain(method):
    frame = _jobs()
    frame["job"] = pd.Categorical(frame["job"], categories=DECLARED)
    got = _quiet(CATEGORICAL_METHODS[method], frame).data["job"].dtype
    assert not got.ordered
    if method != "laplace_dp-keep":  # released: the taxonomy's leaves, as before
        assert list(got.categories) == OCCUPATIONS


@pytest.mark.parametrize("method", sorted(CATEGORICAL_METHODS))
def test_a_polars_enum_keeps_its_type_and_joins_the_original(method):
    polars = pytest.importorskip("polars")
    enum = polars.Enum([*reversed(OCCUPATIONS)])  # every leaf: the released type is its own
    frame = polars.from_pandas(_jobs()).with_columns(polars.col("job").cast(enum))
    got = _quiet(CATEGORICAL_METHODS[method], frame).data
    assert got.schema["job"] == enum
    joined = got.select("job").join(frame.select("job").unique(), on="job", how="left")
    assert joined.height == got.height
    # an Enum that lacks leaves: copied unprotected as it is, else refused
    short = polars.Enum(OCCUPATIONS[2:])
    frame = polars.from_pandas(_jobs()).with_columns(polars.col("job").cast(short))
    if method == "laplace_dp-keep":
        assert _quiet(CATEGORICAL_METHODS[method], frame).data.schema["job"] == short
    else:
        with pytest.raises(DPFastValueError, match="categories lack 2 of the"):
            _quiet(CATEGORICAL_METHODS[method], frame)


@pytest.mark.parametrize("method", sorted(CATEGORICAL_METHODS))
def test_an_ordered_arrow_dictionary_keeps_its_type(method):
    frame = _jobs()
    frame["job"] = pd.Categorical(frame["job"], categories=DECLARED, ordered=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    got = _quiet(CATEGORICAL_METHODS[method], table).data.column("job")
    assert got.type == table.column("job").type  # index and value types, ordered
    expected = DECLARED if method == "laplace_dp-keep" else RELEASED
    assert got.chunk(0).dictionary.to_pylist() == expected


def test_chunks_of_different_categories_are_refused():
    parts = [
        pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int8()), pa.array(c), ordered=True)
        for c in (OCCUPATIONS[:3], OCCUPATIONS[1:4])
    ]
    table = pa.table({"age": [20, 30, 40, 50], "job": pa.chunked_array(parts)})
    with pytest.raises(DPFastValueError, match="parts hold different categories") as raised:
        dpfast.ir_dp(table, k=2, epsilon=1.0, bounds={"age": (17, 90)}, taxonomies=TAXONOMY)
    assert "'job'" in str(raised.value)


# --------------------------------------------------------------------------- out of core


def _typed_file(path: Path) -> pa.Table:
    frame = _jobs()
    frame["job"] = pd.Categorical(frame["job"], categories=DECLARED, ordered=True)
    frame["n"] = (np.arange(N) % 256).astype(np.uint8)
    frame["f"] = np.linspace(0, 1, N).astype(np.float32)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    kind = table.schema.field("job").type
    table = table.set_column(
        1, "job", table.column("job").cast(pa.dictionary(kind.index_type, pa.string(), True))
    )
    pq.write_table(table, path, row_group_size=97)
    return pq.read_table(path)


OUT_OF_CORE = {
    "ir_dp": lambda data, **kw: dpfast.ir_dp(
        data, k=5, epsilon=4.0, bounds=BOUNDS_TYPED, taxonomies=TAXONOMY, seed=2, **kw
    ),
    "mdav_dp": lambda data, **kw: dpfast.mdav_dp(
        data, k=20, epsilon=100.0, bounds=BOUNDS_TYPED, taxonomies=TAXONOMY, seed=2, **kw
    ),
    "laplace_dp-keep": lambda data, **kw: dpfast.laplace_dp(
        data,
        epsilon=4.0,
        bounds=BOUNDS_TYPED,
        columns=["age", "n", "f"],
        unprotected="keep",
        seed=2,
        **kw,
    ),
    "randomized_response": lambda data, **kw: dpfast.randomized_response(
        data, column="job", domain=OCCUPATIONS, epsilon=1.0, seed=2, **kw
    ),
}
BOUNDS_TYPED = {"age": (17, 90), "n": (0, 1000), "f": (0.0, 1.0)}


@pytest.mark.parametrize("method", sorted(OUT_OF_CORE))
def test_parquet_round_trip_out_of_core_keeps_the_types(method, tmp_path):
    source = tmp_path / "in.parquet"
    table = _typed_file(source)
    expected = _quiet(OUT_OF_CORE[method], table).data
    output = tmp_path / "out.parquet"
    engine = EngineChoice("outofcore", {"batch_rows": 64})
    _quiet(OUT_OF_CORE[method], source, engine=engine, output=output)
    got = pq.read_table(output)
    assert got.schema == expected.schema
    assert got.column("job").chunk(0).dictionary.to_pylist() == (
        expected.column("job").chunk(0).dictionary.to_pylist()
    )
    if "n" in got.column_names and method != "randomized_response":
        assert got.schema.field("n").type == pa.uint16()
        assert got.schema.field("f").type == pa.float32()
    # read back by pandas: the ordered categorical of the input, in its order
    read = pd.read_parquet(output)["job"].dtype
    assert read.ordered and list(read.categories)[: len(DECLARED)] == DECLARED
