"""The Python API for tools that embed dpfast: polars and Arrow C stream inputs, the
caller's pandas dtypes and index, and releases called from several threads at once."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpfast
from dpfast._release import cli_spelling, option
from dpfast.datasets import adult, adult_taxonomy
from dpfast.io import as_table_data

try:
    import polars as pl
except ImportError:  # an optional extra: the tests of other inputs still run
    pl = None

needs_polars = pytest.mark.skipif(pl is None, reason="polars is not installed (dpfast[polars])")

#: The public bounds of the Adult sample's numeric columns; those of the nullable table.
BOUNDS = {"age": (17, 90), "hours-per-week": (1, 99)}
NULLABLE_BOUNDS = {"age": (17, 90), "income": (0.0, 1000.0)}
SEXES = ["Female", "Male"]


def _adult(n: int = 400) -> pd.DataFrame:
    columns = ["age", "hours-per-week", "occupation", "sex", "race"]
    return adult("train", drop_missing=True).iloc[:n].reset_index(drop=True)[columns]


def _polars(frame: pd.DataFrame) -> Any:
    """The Adult sample as polars: a Categorical, an Enum and a String column."""
    return pl.from_pandas(frame).with_columns(
        pl.col("occupation").cast(pl.Categorical), pl.col("sex").cast(pl.Enum(SEXES))
    )


def _taxonomies() -> dict[str, dpfast.Taxonomy]:
    return {"occupation": adult_taxonomy("occupation")}


# one seeded release per method, on any kind of table
RELEASES: dict[str, Callable[[Any], Any]] = {
    "ir_dp": lambda data: dpfast.ir_dp(
        data,
        k=10,
        epsilon=1.0,
        columns=["age", "occupation"],
        bounds={"age": BOUNDS["age"]},
        taxonomies=_taxonomies(),
        unprotected="shuffle",
        seed=1,
    ),
    "mdav_dp": lambda data: dpfast.mdav_dp(
        data,
        k=50,
        epsilon=1.0,
        columns=["age", "hours-per-week"],
        bounds=BOUNDS,
        unprotected="keep",
        seed=2,
    ),
    "laplace_dp": lambda data: dpfast.laplace_dp(
        data, epsilon=1.0, columns=["age"], bounds=BOUNDS, unprotected="keep", seed=3
    ),
    "randomized_response": lambda data: dpfast.randomized_response(
        data, column="sex", domain=SEXES, epsilon=1.0, seed=4
    ),
    "mdav": lambda data: dpfast.mdav(
        data, k=5, columns=["age", "occupation"], taxonomies=_taxonomies()
    ),
    "individual_ranking": lambda data: dpfast.individual_ranking(
        data, k=3, columns=["age", "hours-per-week"]
    ),
    "k_noise": lambda data: dpfast.k_noise(data, k=10, columns=["age"], seed=5),
}


def _diffgen(data: Any) -> Any:
    return dpfast.diffgen(
        data,
        target="sex",
        epsilon=1.0,
        steps=3,
        bounds={"age": BOUNDS["age"]},
        taxonomies=_taxonomies(),
        classes=SEXES,
        seed=6,
    )


def _report(release: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    public, private = release.report.to_dict(), release.private.to_dict()
    public.pop("timings", None)
    private.pop("timings", None)
    return public, private


class _Stream:
    """A table seen only through the Arrow PyCapsule stream interface (like a duckdb
    relation or a nanoarrow stream would be)."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._table.__arrow_c_stream__(requested_schema)


# -- polars -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(RELEASES))
@needs_polars
def test_polars_in_polars_out_equals_the_arrow_release(method):
    frame = _polars(_adult())
    got = RELEASES[method](frame)
    expected = RELEASES[method](frame.to_arrow())
    assert isinstance(got.data, pl.DataFrame)
    assert got.data.columns == frame.columns
    assert (
        pl.from_arrow(expected.data)
        .cast(frame.schema, strict=False)
        .equals(got.data.cast(frame.schema, strict=False))
    )
    assert _report(got) == _report(expected)


@pytest.mark.parametrize("method", sorted(RELEASES))
@needs_polars
def test_polars_release_keeps_every_dtype(method):
    frame = _polars(_adult())
    got = RELEASES[method](frame).data
    expected = dict(frame.schema)
    if method == "k_noise":  # real-valued noise: an integer column comes back float64
        expected["age"] = pl.Float64
    assert dict(got.schema) == expected


@needs_polars
def test_polars_released_categorical_is_an_enum_of_the_taxonomy_leaves():
    frame = _polars(_adult()).with_columns(pl.col("occupation").cast(pl.String))
    leaves = list(adult_taxonomy("occupation").domain)
    as_enum = frame.with_columns(pl.col("occupation").cast(pl.Enum(leaves)))
    got = RELEASES["ir_dp"](as_enum).data
    assert got.schema["occupation"] == pl.Enum(leaves)
    # a String column comes back String, with the same values as the Enum release
    from_string = RELEASES["ir_dp"](frame).data
    assert from_string.schema["occupation"] == pl.String
    assert from_string["occupation"].to_list() == got["occupation"].cast(pl.String).to_list()


@needs_polars
def test_polars_unprotected_nulls_survive():
    frame = _polars(_adult()).with_columns(
        pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise(pl.col("race")).alias("race")
    )
    kept = RELEASES["laplace_dp"](frame).data
    assert kept["race"].to_list() == frame["race"].to_list()
    shuffled = RELEASES["ir_dp"](frame).data
    assert shuffled["race"].null_count() == frame["race"].null_count() > 0
    assert sorted(shuffled["race"].drop_nulls().to_list()) == sorted(
        frame["race"].drop_nulls().to_list()
    )


@needs_polars
def test_polars_columns_are_read_without_a_copy():
    frame = pl.DataFrame({"a": np.arange(1000, dtype=np.int64), "x": np.linspace(0, 1, 1000)})
    table = as_table_data(frame)
    assert table.kind == "polars"
    assert table.n_rows == 1000 and table.names == ["a", "x"]
    for name in ("a", "x"):
        got = table.column(name)
        assert np.shares_memory(got, frame[name].to_numpy())
        assert not got.flags.writeable


@needs_polars
def test_polars_columns_kept_in_order_are_not_copied():
    frame = _polars(_adult())
    got = RELEASES["laplace_dp"](frame).data
    assert np.shares_memory(got["hours-per-week"].to_numpy(), frame["hours-per-week"].to_numpy())
    assert not np.shares_memory(got["age"].to_numpy(), frame["age"].to_numpy())


@needs_polars
def test_polars_diffgen_gives_polars_tables_equal_to_the_arrow_ones():
    frame = _polars(_adult())
    got = _diffgen(frame)
    expected = _diffgen(frame.to_arrow())
    assert isinstance(got.counts, pl.DataFrame)
    # the class column keeps the Enum of the target (Arrow: its ordered dictionary)
    enum = pl.col("sex").cast(pl.Enum(SEXES))
    assert got.counts.schema["sex"] == pl.Enum(SEXES)
    assert expected.counts.schema.field("sex").type.ordered
    assert got.counts.equals(pl.from_arrow(expected.counts).with_columns(enum))
    assert isinstance(got.microdata(), pl.DataFrame)
    assert got.microdata().schema["sex"] == pl.Enum(SEXES)
    assert got.microdata().equals(pl.from_arrow(expected.microdata()).with_columns(enum))
    applied = got.cut.apply(frame)
    assert isinstance(applied, pl.DataFrame)
    assert applied.equals(pl.from_arrow(expected.cut.apply(frame.to_arrow())))
    assert _report(got) == _report(expected)


@needs_polars
def test_polars_metrics_accept_polars_tables():
    frame = _polars(_adult())
    release = RELEASES["laplace_dp"](frame)
    bounds = {"age": BOUNDS["age"]}
    original, released = frame.select("age"), release.data.select("age")
    got = dpfast.metrics.relative_error(original, released, bounds)
    expected = dpfast.metrics.relative_error(original.to_pandas(), released.to_pandas(), bounds)
    assert got == expected > 0


@needs_polars
def test_polars_lazy_frame_is_refused_with_the_fix():
    lazy = _polars(_adult()).lazy()
    with pytest.raises(TypeError, match=r"collect\(\)"):
        dpfast.laplace_dp(lazy, epsilon=1.0, columns=["age"], bounds=BOUNDS)


def test_polars_is_never_imported_for_other_inputs():
    code = (
        "import sys, numpy as np, pandas as pd, pyarrow as pa, dpfast\n"
        "frame = pd.DataFrame({'a': np.arange(50.0)})\n"
        "for data, a in ((frame, 'a'), (pa.table(frame), 'a'), (frame.to_numpy(), 0)):\n"
        "    dpfast.laplace_dp(data, epsilon=1.0, bounds={a: (0, 50)}, seed=1)\n"
        "try:\n"
        "    dpfast.laplace_dp(object(), epsilon=1.0, bounds={'a': (0, 50)})\n"
        "except TypeError:\n"
        "    pass\n"
        "print('polars' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.strip() == "False"


# -- any Arrow C stream -----------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(RELEASES))
def test_arrow_stream_in_arrow_table_out(method):
    table = pa.Table.from_pandas(_adult(), preserve_index=False)
    got = RELEASES[method](_Stream(table))
    expected = RELEASES[method](table)
    assert isinstance(got.data, pa.Table)
    assert got.data.equals(expected.data)
    assert _report(got) == _report(expected)


@pytest.mark.parametrize("method", sorted(RELEASES))
def test_one_shot_record_batch_reader_is_read_once(method):
    table = pa.Table.from_pandas(_adult(), preserve_index=False)
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=64))
    got = RELEASES[method](reader)
    assert got.data.equals(RELEASES[method](table).data)


def test_arrow_stream_diffgen():
    table = pa.Table.from_pandas(_adult(), preserve_index=False)
    got = _diffgen(_Stream(table))
    assert isinstance(got.counts, pa.Table)
    assert got.counts.equals(_diffgen(table).counts)


def test_arrow_stream_columns_are_read_without_a_copy():
    table = pa.table({"a": np.arange(1000, dtype=np.int64), "x": np.linspace(0, 1, 1000)})
    data = as_table_data(_Stream(table))
    assert data.kind == "arrow"
    for name in ("a", "x"):
        assert np.shares_memory(data.column(name), table.column(name).chunk(0).to_numpy())


def _is_text(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def test_arrow_stream_columns_kept_in_order_are_not_copied():
    table = pa.Table.from_pandas(_adult(), preserve_index=False)
    got = RELEASES["laplace_dp"](_Stream(table)).data

    def address(t: pa.Table, name: str) -> int:
        return t[name].chunk(0).buffers()[1].address

    assert address(got, "hours-per-week") == address(table, "hours-per-week")
    assert address(got, "age") != address(table, "age")


def test_arrow_stream_of_string_views_keeps_its_types():
    # producers such as polars export their strings as string_view through the C stream
    if not hasattr(pa, "string_view"):
        pytest.skip("pyarrow < 16 has no string_view")
    plain = pa.Table.from_pandas(_adult(), preserve_index=False)
    views = plain.cast(
        pa.schema(
            [pa.field(f.name, pa.string_view()) if _is_text(f.type) else f for f in plain.schema]
        )
    )
    got = RELEASES["ir_dp"](_Stream(views)).data
    assert got.schema.field("occupation").type == pa.string_view()  # released
    assert got.schema.field("sex").type == pa.string_view()  # shuffled unprotected
    expected = RELEASES["ir_dp"](plain).data
    assert got.cast(expected.schema).equals(expected)


def test_arrow_fields_of_columns_not_released_keep_their_metadata():
    table = pa.Table.from_pandas(_adult(), preserve_index=False)
    field = table.schema.field("race").with_metadata({"unit": "census category"})
    table = table.set_column(table.schema.get_field_index("race"), field, table["race"])
    for policy in ("keep", "shuffle"):
        got = dpfast.laplace_dp(
            table, epsilon=1.0, columns=["age"], bounds=BOUNDS, unprotected=policy, seed=3
        ).data
        assert got.schema.field("race").metadata == {b"unit": b"census category"}


def test_stream_that_is_not_a_table_is_refused():
    with pytest.raises(TypeError, match="not of a table"):
        dpfast.laplace_dp(pa.chunked_array([[1.0, 2.0]]), epsilon=1.0, bounds=(0, 3))


def test_unknown_input_names_every_accepted_kind():
    with pytest.raises(TypeError, match=r"polars DataFrame.*__arrow_c_stream__"):
        dpfast.laplace_dp([[1.0, 2.0]], epsilon=1.0, bounds=(0, 3))


def test_arrow_dictionary_with_unsigned_indices_and_nulls():
    indices = pa.array([2, 0, None, 1], type=pa.uint32())
    column = pa.DictionaryArray.from_arrays(indices, pa.array(["x", "y", "z"]))
    codes, labels = as_table_data(pa.table({"c": column})).category_codes("c")
    assert codes.tolist() == [2, 0, -1, 1]
    assert labels == ["x", "y", "z"]


# -- pandas: nullable dtypes ------------------------------------------------------------


def _nullable() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A frame of nullable dtypes, and the same values in NumPy dtypes."""
    rng = np.random.default_rng(0)
    n = 300
    leaves = list(adult_taxonomy("occupation").domain)
    plain = pd.DataFrame(
        {
            "age": rng.integers(17, 90, n),
            "income": rng.uniform(0, 1000, n),
            "occupation": np.array(rng.choice(leaves, n), dtype=object),
            "job": np.array(rng.choice(leaves, n), dtype=object),
            "note": np.arange(n) % 11,
            "tag": np.array([f"t{i}" for i in range(n)], dtype=object),
        }
    )
    nullable = plain.astype(
        {
            "age": "Int64",
            "income": "Float64",
            "occupation": "string[pyarrow]",
            "job": "string[python]",
            "note": "Int64",
            "tag": "string[pyarrow]",
        }
    )
    nullable.loc[::7, "note"] = pd.NA
    nullable.loc[::5, "tag"] = pd.NA
    return nullable, plain


def _ir_nullable(data: pd.DataFrame, unprotected: str) -> Any:
    # "keep" needs rows kept whole: the record linkage (not proven, and it warns so)
    linkage = "records" if unprotected == "keep" else "columns"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpfast.UnprovenReleaseWarning)
        return dpfast.ir_dp(
            data,
            k=10,
            epsilon=1.0,
            columns=["age", "income", "occupation", "job"],
            bounds=NULLABLE_BOUNDS,
            taxonomies={
                "occupation": adult_taxonomy("occupation"),
                "job": adult_taxonomy("occupation"),
            },
            unprotected=unprotected,
            linkage=linkage,
            seed=7,
        )


@pytest.mark.parametrize("unprotected", ["keep", "shuffle"])
def test_nullable_dtypes_survive_a_release(unprotected):
    nullable, plain = _nullable()
    got = _ir_nullable(nullable, unprotected).data
    pd.testing.assert_series_equal(got.dtypes, nullable.dtypes)
    expected = _ir_nullable(plain, unprotected).data
    for name in ("age", "income", "occupation", "job"):
        assert got[name].tolist() == expected[name].tolist(), name
    # the unprotected columns keep their missing values, moved with their rows
    for name in ("note", "tag"):
        assert got[name].isna().sum() == nullable[name].isna().sum() > 0
        assert sorted(got[name].dropna()) == sorted(nullable[name].dropna())


def test_nullable_unprotected_columns_kept_in_order_are_unchanged():
    nullable, _ = _nullable()
    got = dpfast.laplace_dp(
        nullable,
        epsilon=1.0,
        columns=["age", "income"],
        bounds=NULLABLE_BOUNDS,
        unprotected="keep",
        seed=8,
    ).data
    pd.testing.assert_series_equal(got.dtypes, nullable.dtypes)
    for name in ("occupation", "job", "note", "tag"):
        pd.testing.assert_series_equal(got[name], nullable[name])
    assert got["age"].between(17, 90).all()


@pytest.mark.parametrize("dtype", ["Int64", "Int32", "UInt16", "Float64", "int64[pyarrow]"])
def test_nullable_numeric_dtype_comes_back(dtype):
    frame = pd.DataFrame({"age": pd.array(np.arange(17, 90), dtype=dtype)})
    for release in (
        dpfast.mdav_dp(frame, k=10, epsilon=1.0, bounds={"age": BOUNDS["age"]}, seed=9),
        dpfast.laplace_dp(frame, epsilon=1.0, bounds={"age": BOUNDS["age"]}, seed=9),
        dpfast.individual_ranking(frame, k=3),
    ):
        assert release.data["age"].dtype == frame["age"].dtype


def test_pandas_default_str_dtype_comes_back():
    frame = _adult()[["age", "occupation"]]
    assert isinstance(frame["occupation"].dtype, pd.StringDtype)
    got = RELEASES["ir_dp"](frame).data
    assert got["occupation"].dtype == frame["occupation"].dtype
    as_objects = RELEASES["ir_dp"](frame.astype({"occupation": object})).data
    assert got["occupation"].tolist() == as_objects["occupation"].tolist()


def test_protected_nullable_column_with_missing_values_is_refused():
    nullable, _ = _nullable()
    with pytest.raises(ValueError, match=r"column 'note' has \d+ non-finite.*impute"):
        dpfast.laplace_dp(nullable, epsilon=1.0, columns=["note"], bounds={"note": (0, 10)})


# -- pandas: the index ------------------------------------------------------------------


def _indexed() -> pd.DataFrame:
    frame = _adult()
    return frame.set_index(pd.Index([f"person-{i}" for i in range(len(frame))], name="id"))


REORDERING = {
    "ir_dp": RELEASES["ir_dp"],
    "mdav_dp": RELEASES["mdav_dp"],
    "laplace_dp shuffle": lambda data: dpfast.laplace_dp(
        data, epsilon=1.0, columns=["age"], bounds=BOUNDS, unprotected="shuffle", seed=3
    ),
    "ir_dp drop": lambda data: dpfast.ir_dp(
        data, k=10, epsilon=1.0, columns=["age"], seed=1, bounds=BOUNDS
    ),
}


@pytest.mark.parametrize("method", sorted(REORDERING))
def test_reordered_release_warns_that_the_index_is_dropped(method):
    frame = _indexed()
    with pytest.warns(dpfast.IndexDroppedWarning) as caught:
        got = REORDERING[method](frame)
    dropped = [w for w in caught if w.category is dpfast.IndexDroppedWarning]
    assert len(dropped) == 1
    warning = dropped[0]
    assert warning.filename == __file__  # points at the caller's line
    text = str(warning.message)
    assert "Index 'id'" in text
    assert "frame.reset_index()" in text
    assert 'unprotected="shuffle"' in text
    pd.testing.assert_index_equal(got.data.index, pd.RangeIndex(len(frame)))


def test_reordered_release_with_the_default_index_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpfast.IndexDroppedWarning)
        for method in REORDERING.values():
            method(_adult())


@pytest.mark.parametrize(
    "index",
    [
        pd.RangeIndex(1, 401),
        pd.RangeIndex(0, 800, 2),
        pd.RangeIndex(400, name="row"),
        pd.MultiIndex.from_arrays([np.arange(400) % 2, np.arange(400)]),
        pd.Index(np.arange(400)[::-1]),
    ],
)
def test_any_index_but_the_default_counts_as_labels(index):
    frame = _adult().set_index(index)
    assert as_table_data(frame).has_row_labels()
    assert not as_table_data(_adult()).has_row_labels()
    with pytest.warns(dpfast.IndexDroppedWarning):
        RELEASES["ir_dp"](frame)


@pytest.mark.parametrize(
    "method", ["laplace_dp", "randomized_response", "mdav", "individual_ranking", "k_noise"]
)
def test_release_in_the_input_order_keeps_the_index(method):
    frame = _indexed()
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpfast.IndexDroppedWarning)
        got = RELEASES[method](frame)
    pd.testing.assert_index_equal(got.data.index, frame.index)


def test_the_advice_of_the_warning_releases_the_labels():
    frame = _indexed()
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpfast.IndexDroppedWarning)
        got = RELEASES["ir_dp"](frame.reset_index()).data
    assert sorted(got["id"]) == sorted(frame.index)
    assert got["id"].tolist() != list(frame.index)  # shuffled on its own


def test_index_warning_names_the_cli_flag_under_cli_spelling():
    with cli_spelling(), pytest.warns(dpfast.IndexDroppedWarning, match="--unprotected shuffle"):
        RELEASES["ir_dp"](_indexed())


# -- threads ----------------------------------------------------------------------------


def _digest(data: Any) -> Any:
    if isinstance(data, pd.DataFrame):
        return (list(data.columns), [str(t) for t in data.dtypes], data.to_dict("list"))
    return data.to_pydict()


def _thread_cases(frame: pd.DataFrame) -> dict[str, Callable[[int], Any]]:
    """Seeded releases of four methods, sharing one new taxonomy (whose tables are computed
    lazily, on first use: concurrent first uses race on them)."""
    taxonomy = adult_taxonomy("occupation")  # one object shared by every thread
    return {
        "ir_dp": lambda seed: dpfast.ir_dp(
            frame,
            k=10,
            epsilon=1.0,
            columns=["age", "hours-per-week", "occupation"],
            bounds=BOUNDS,
            taxonomies={"occupation": taxonomy},
            n_threads=2,
            metrics=True,
            seed=seed,
        ),
        "mdav_dp": lambda seed: dpfast.mdav_dp(
            frame,
            k=40,
            epsilon=1.0,
            columns=["age", "occupation"],
            bounds=BOUNDS,
            taxonomies={"occupation": taxonomy},
            seed=seed,
        ),
        "laplace_dp": lambda seed: dpfast.laplace_dp(
            frame, epsilon=1.0, columns=["age", "hours-per-week"], bounds=BOUNDS, seed=seed
        ),
        "diffgen": lambda seed: dpfast.diffgen(
            frame,
            target="sex",
            epsilon=1.0,
            steps=4,
            bounds={"age": BOUNDS["age"]},
            taxonomies={"occupation": taxonomy},
            classes=SEXES,
            seed=seed,
        ),
    }


def _outcome(release: Any) -> Any:
    data = release.counts if isinstance(release, dpfast.DiffGenRelease) else release.data
    return _digest(data), _report(release)


def test_concurrent_releases_equal_the_same_releases_run_alone():
    frame = _adult(1500)
    alone_cases = _thread_cases(frame)
    jobs = [(name, seed) for seed in (11, 12, 13, 14, 15, 16) for name in sorted(alone_cases)]
    expected = {(name, seed): _outcome(alone_cases[name](seed)) for name, seed in jobs}
    # fresh taxonomies, so that the threads also compute their cached tables at once
    cases = _thread_cases(frame)
    start = threading.Barrier(8)

    def run(numbered: tuple[int, tuple[str, int]]) -> Any:
        i, (name, seed) = numbered
        if i < 8:  # the first eight jobs start together
            start.wait(timeout=60)
        return _outcome(cases[name](seed))

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(run, enumerate(jobs * 2)))
    assert len(got) == 2 * len(jobs)
    for job, outcome in zip(jobs * 2, got, strict=True):
        assert outcome == expected[job], job
    # distinct seeds gave distinct releases: the threads did not share one stream
    assert expected[("laplace_dp", 11)][0] != expected[("laplace_dp", 12)][0]


def test_cli_spelling_in_one_thread_does_not_reach_another():
    inside, checked = threading.Event(), threading.Event()
    seen: list[str] = []

    def cli_thread() -> None:
        with cli_spelling():
            seen.append(option("n_threads"))
            inside.set()
            checked.wait(timeout=30)

    thread = threading.Thread(target=cli_thread)
    thread.start()
    assert inside.wait(timeout=30)
    seen.append(option("n_threads"))
    checked.set()
    thread.join(timeout=30)
    assert seen == ["--threads", "n_threads"]  # the CLI spells n_threads --threads


# -- a budget with a release returned in memory ------------------------------------------

DP_RELEASES: dict[str, Callable[..., Any]] = {
    "ir_dp": lambda data, **options: dpfast.ir_dp(
        data, k=10, epsilon=1.0, columns=["age"], bounds=BOUNDS, seed=1, **options
    ),
    "mdav_dp": lambda data, **options: dpfast.mdav_dp(
        data, k=50, epsilon=1.0, columns=["age"], bounds=BOUNDS, seed=2, **options
    ),
    "laplace_dp": lambda data, **options: dpfast.laplace_dp(
        data, epsilon=1.0, columns=["age"], bounds=BOUNDS, seed=3, **options
    ),
    "randomized_response": lambda data, **options: dpfast.randomized_response(
        data, column="sex", domain=SEXES, epsilon=1.0, seed=4, **options
    ),
    "diffgen": lambda data, **options: dpfast.diffgen(
        data,
        target="sex",
        epsilon=1.0,
        steps=2,
        bounds={"age": BOUNDS["age"]},
        classes=SEXES,
        seed=6,
        **options,
    ),
}


@pytest.mark.parametrize("method", sorted(DP_RELEASES))
def test_a_budget_without_output_commits_once_before_the_release_is_returned(
    method, tmp_path, monkeypatch
):
    budget = dpfast.BudgetFile.create(tmp_path / "b.json", 10.0)
    commits: list[str] = []
    commit = dpfast.Reservation.commit

    def counted(self: Any, report: Any) -> Any:
        commits.append(report.method)
        return commit(self, report)

    monkeypatch.setattr(dpfast.Reservation, "commit", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpfast.NoiseDominatesWarning)
        release = DP_RELEASES[method](_adult(), budget=budget)  # docs/python.md#budgets
    assert commits == [release.report.method]
    (entry,) = budget.entries()
    assert entry.status == "committed" and entry.epsilon == release.report.epsilon
    assert entry.output == "(returned to the caller)"
    assert budget.remaining() == pytest.approx(10.0 - release.report.epsilon)


def test_a_budget_given_as_a_path_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "b.json"
    dpfast.BudgetFile.create(path, 10.0)
    for given in (str(path), path):
        with pytest.raises(dpfast.DPFastError, match=r"BudgetFile\(") as refused:
            DP_RELEASES["laplace_dp"](_adult(), budget=given)
        assert isinstance(refused.value, TypeError)
        assert "must be a dpfast.BudgetFile" in str(refused.value)
    assert dpfast.BudgetFile(path).entries() == []


def test_a_budget_in_a_folder_that_cannot_be_written_is_refused_with_the_fix(tmp_path, monkeypatch):
    budget = dpfast.BudgetFile.create(tmp_path / "b.json", 10.0)
    (tmp_path / "b.json.lock").unlink()
    real_open = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and str(path).startswith(str(tmp_path)):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)  # as root, chmod would not stop a write
    for attempt in (
        lambda: DP_RELEASES["laplace_dp"](_adult(), budget=budget),
        lambda: dpfast.BudgetFile.create(tmp_path / "c.json", 1.0),
        lambda: budget.clear(),
    ):
        with pytest.raises(dpfast.DPFastError, match="must be writable") as refused:
            attempt()
        assert isinstance(refused.value, OSError)
        assert repr(str(tmp_path)) in str(refused.value)
    monkeypatch.undo()
    assert budget.entries() == []
