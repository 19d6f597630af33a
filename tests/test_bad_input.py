import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpfast

BOUNDS = {"a": (0, 10), "b": (0, 10)}


def _frame():
    return pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "b": [6, 5, 4, 3, 2, 1]})


def _call(method, data, **kwargs):
    if method == "ir_dp":
        params = {"k": 2, "epsilon": 1.0, "bounds": BOUNDS, "seed": 0}
    elif method == "laplace_dp":
        params = {"epsilon": 1.0, "bounds": BOUNDS, "seed": 0}
    else:
        params = {"k": 2}
    params.update(kwargs)
    return getattr(dpfast, method)(data, **params)


METHODS = ["ir_dp", "laplace_dp", "individual_ranking"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "bad, match",
    [
        (np.nan, "non-finite"),
        (np.inf, "non-finite"),
        (-np.inf, "non-finite"),
    ],
)
def test_non_finite_values_are_refused_and_input_is_unchanged(method, bad, match):
    frame = _frame()
    frame.loc[3, "a"] = bad
    before = frame.copy()
    with pytest.raises(ValueError, match=match):
        _call(method, frame)
    pd.testing.assert_frame_equal(frame, before)


@pytest.mark.parametrize("method", METHODS)
def test_non_numeric_protected_column_is_a_type_error(method):
    frame = _frame().assign(a=list("abcdef"))
    with pytest.raises(TypeError, match="must be numeric"):
        _call(method, frame)


@pytest.mark.parametrize("method", ["ir_dp", "individual_ranking"])
@pytest.mark.parametrize("k", [0, -1, 7])
def test_k_out_of_range(method, k):
    # individual ranking adds no noise, so k = 1 (the input unchanged) is refused too
    low = 2 if method == "individual_ranking" else 1
    with pytest.raises(ValueError, match=rf"k must be in \[{low}, 6\]"):
        _call(method, _frame(), k=k)


@pytest.mark.parametrize("method", ["ir_dp", "individual_ranking"])
@pytest.mark.parametrize("k", [2.0, "2", True, None])
def test_k_of_wrong_type(method, k):
    with pytest.raises(TypeError, match="k must be an integer"):
        _call(method, _frame(), k=k)


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
@pytest.mark.parametrize("epsilon", [0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon(method, epsilon):
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        _call(method, _frame(), epsilon=epsilon)


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
@pytest.mark.parametrize(
    "bounds, error, match",
    [
        (None, ValueError, "bounds are required"),
        ({"a": (0, 10)}, ValueError, r"no bounds for protected column\(s\) \['b'\]"),
        ({"a": (10, 0), "b": (0, 10)}, ValueError, "inverted"),
        ({"a": (0, np.inf), "b": (0, 10)}, ValueError, "finite"),
        ({"a": (0,), "b": (0, 10)}, ValueError, "pair"),
        ([(0, 10), (0, 10)], TypeError, "mapping"),
    ],
)
def test_bad_bounds(method, bounds, error, match):
    with pytest.raises(error, match=match):
        _call(method, _frame(), bounds=bounds)


@pytest.mark.parametrize("method", METHODS)
def test_unknown_columns(method):
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['zzz'\]"):
        _call(method, _frame(), columns=["a", "zzz"])


@pytest.mark.parametrize("method", METHODS)
def test_empty_table(method):
    with pytest.raises(ValueError, match="empty"):
        _call(method, _frame().iloc[:0])


def test_wrong_data_type():
    with pytest.raises(TypeError, match="pandas DataFrame, a pyarrow Table, a polars DataFrame"):
        dpfast.ir_dp([[1.0]], k=1, epsilon=1.0, bounds={0: (0, 1)})
    with pytest.raises(TypeError, match="must be 2-D"):
        dpfast.ir_dp(np.arange(3.0), k=1, epsilon=1.0, bounds={0: (0, 3)})


def test_bad_linkage_and_shuffle_combination():
    with pytest.raises(ValueError, match="linkage must be one of"):
        _call("ir_dp", _frame(), linkage="rows")
    with pytest.raises(ValueError, match="drop shuffle=False"):
        _call("ir_dp", _frame(), linkage="columns", shuffle=False)


def test_bad_seed_and_threads():
    with pytest.raises(ValueError, match="seed must be a non-negative"):
        _call("ir_dp", _frame(), seed=-3)
    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        _call("ir_dp", _frame(), n_threads=0)


@pytest.mark.parametrize("method", METHODS)
def test_read_only_numpy_and_arrow_inputs_are_accepted(method):
    data = np.array([[1.0, 6.0], [2.0, 5.0], [3.0, 4.0], [4.0, 3.0]])
    data.setflags(write=False)
    bounds = {0: (0, 10), 1: (0, 10)}
    if method == "individual_ranking":
        release = dpfast.individual_ranking(data, k=2)
    else:
        release = _call(method, data, bounds=bounds)
    assert release.data.shape == data.shape
    table = pa.table({"a": [1.0, 2.0, 3.0, 4.0], "b": [6, 5, 4, 3]})
    release = _call(method, table)
    assert release.data.num_rows == 4
    assert table.column("a").to_pylist() == [1.0, 2.0, 3.0, 4.0]


def test_input_is_never_modified_by_a_successful_release():
    frame = _frame()
    before = frame.copy()
    for method in METHODS:
        _call(method, frame)
    pd.testing.assert_frame_equal(frame, before)
    data = frame.to_numpy()
    copy = data.copy()
    dpfast.ir_dp(data, k=2, epsilon=1.0, bounds={0: (0, 10), 1: (0, 10)}, seed=0)
    np.testing.assert_array_equal(data, copy)


def test_nullable_missing_values_are_refused():
    frame = _frame().astype({"b": "Int64"})
    frame.loc[2, "b"] = pd.NA
    with pytest.raises((ValueError, TypeError)):
        _call("ir_dp", frame)


@pytest.mark.parametrize("column", [0, 1])
def test_non_finite_in_a_numpy_block_is_found_in_any_column(column):
    data = np.arange(12.0).reshape(6, 2)
    data[4, column] = np.nan
    bounds = {0: (0, 20), 1: (0, 20)}
    with pytest.raises(
        ValueError,
        match=rf"column {column} has 1 non-finite value\(s\) "
        r"\(first at row 4",
    ):
        dpfast.ir_dp(data, k=2, epsilon=1.0, bounds=bounds, seed=0)
    # an unprotected column may hold anything
    release = dpfast.ir_dp(
        data, k=2, epsilon=1.0, bounds=bounds, columns=[1 - column], unprotected="shuffle", seed=0
    )
    assert np.isnan(release.data[:, column]).sum() == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda: dpfast.ir_dp(_frame(), k=0, epsilon=1.0, bounds=BOUNDS, seed=0),
        lambda: dpfast.laplace_dp(_frame(), epsilon=-1.0, bounds=BOUNDS, seed=0),
        lambda: dpfast.individual_ranking(_frame(), k=2, columns=["missing"]),
        lambda: dpfast.mdav(_frame(), k=2, columns=["missing"]),
        lambda: dpfast.k_noise(_frame(), k=2, columns=["missing"]),
        lambda: dpfast.ir_dp([1, 2, 3], k=2, epsilon=1.0, bounds=BOUNDS, seed=0),
        lambda: dpfast.Taxonomy.from_mapping({}),
    ],
)
def test_one_except_clause_catches_every_dpfast_error(call):
    # the family is exported at the top level, for tools that embed dpfast
    assert "DPFastError" in dpfast.__all__
    with pytest.raises(dpfast.DPFastError):
        call()


# -- errors that were not DPFastError --------------------------------------------------


@pytest.mark.parametrize("engine", ["spark", "dask"])
@pytest.mark.parametrize("data", [_frame(), pa.table({"a": [1.0], "b": [2]}), "in.parquet"])
def test_a_cluster_engine_named_for_another_input_says_what_it_releases(engine, data):
    with pytest.raises(dpfast.DPFastError, match=f"releases a {engine.title()} DataFrame") as got:
        _call("laplace_dp", data, engine=engine)
    assert isinstance(got.value, TypeError)
    assert f'engine="{engine}"' in str(got.value)


@pytest.mark.parametrize(
    ("engine", "module", "extra"),
    [("dask", "dask.dataframe", "dask"), ("spark", "pyspark.sql", "spark")],
)
def test_a_cluster_engine_whose_package_is_missing_says_how_to_install_it(
    engine, module, extra, monkeypatch
):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(dpfast.DPFastError, match=rf"pip install 'dpfast\[{extra}\]'") as got:
        _call("laplace_dp", _frame(), engine=engine)
    assert isinstance(got.value, ImportError)


def test_a_memory_limit_below_what_the_engine_keeps_to_is_refused(tmp_path, smallest_memory_limit):
    output = tmp_path / "o.parquet"
    for limit in ("1KiB", smallest_memory_limit - 1):
        with pytest.raises(dpfast.DPFastError, match=r"at least 96KiB \(98,304 bytes\)"):
            _call("laplace_dp", _frame(), engine="outofcore", output=output, memory_limit=limit)
        assert list(tmp_path.iterdir()) == []
    _call("laplace_dp", _frame(), engine="outofcore", output=output, memory_limit="96KiB")
    assert output.exists()


# -- silent acceptance, now refused with the reason ----------------------------------------

DURATIONS = {
    "laplace_dp": lambda t: dpfast.laplace_dp(t, epsilon=1.0, bounds={"d": (0, 9)}, columns=["d"]),
    "ir_dp": lambda t: dpfast.ir_dp(t, k=2, epsilon=1.0, bounds={"d": (0, 9)}, columns=["d"]),
    "mdav_dp": lambda t: dpfast.mdav_dp(t, k=2, epsilon=1.0, bounds={"d": (0, 9)}, columns=["d"]),
    "mdav": lambda t: dpfast.mdav(t, k=2, columns=["d"]),
    "individual_ranking": lambda t: dpfast.individual_ranking(t, k=2, columns=["d"]),
    "k_noise": lambda t: dpfast.k_noise(t, k=2, columns=["d"]),
    "k_pram": lambda t: dpfast.k_pram(t, k=2, columns=["d"]),
}


@pytest.mark.parametrize("method", sorted(DURATIONS))
@pytest.mark.parametrize("kind", ["pandas", "arrow"])
def test_a_duration_column_is_refused_not_released_as_integers(method, kind):
    frame = _frame().assign(d=pd.to_timedelta(np.arange(6), unit="s"))
    data = pa.Table.from_pandas(frame) if kind == "arrow" else frame
    with pytest.raises(dpfast.DPFastError, match=r"column 'd' holds durations") as refused:
        DURATIONS[method](data)
    assert isinstance(refused.value, TypeError) and "total_seconds()" in str(refused.value)


def test_a_duration_column_is_refused_out_of_core(tmp_path):
    path = tmp_path / "in.parquet"
    _frame().assign(d=pd.to_timedelta(np.arange(6), unit="s")).to_parquet(path)
    with pytest.raises(dpfast.DPFastError, match=r"column 'd' holds durations \(timedelta64"):
        dpfast.laplace_dp(
            path, epsilon=1.0, bounds={"d": (0, 9)}, columns=["d"], output=tmp_path / "o.parquet"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp"])
def test_a_bounds_key_that_names_no_column_is_refused(method):
    bounds = {**BOUNDS, "aa": (0, 1)}
    with pytest.raises(ValueError, match=r"bounds names 'aa', which the table does not have; "):
        _call(method, _frame(), bounds=bounds)
    # a column the release leaves unprotected may have bounds
    assert _call(method, _frame(), bounds=BOUNDS, columns=["a"]).report.protected_columns == ["a"]
    with pytest.raises(ValueError, match="did you mean 'b'"):
        dpfast.forecast(
            method,
            _frame(),
            **({"k": 2} if method == "ir_dp" else {}),
            epsilon=1.0,
            bounds={"a": (0, 10), "b": (0, 10), "bb": (0, 1)},
        )


def test_diffgen_refuses_risk_that_would_measure_nothing():
    frame = _frame().assign(c=["x", "y"] * 3)
    options = {"target": "c", "epsilon": 1.0, "steps": 1, "bounds": BOUNDS, "classes": ["x", "y"]}
    with pytest.raises(ValueError, match=r"risk=True measures nothing for dpfast.diffgen\(\)"):
        dpfast.diffgen(frame, risk=True, **options)
    with pytest.raises(ValueError, match="quasi_identifiers"):
        dpfast.diffgen(frame, risk={"k": 2}, **options)
    measured = dpfast.diffgen(frame, risk={"quasi_identifiers": ["a"], "k": 2}, **options)
    assert measured.private.risk["uniqueness"]["released"]["k"] == 2


# -- the forecast ------------------------------------------------------------------------


def test_a_forecast_names_an_unknown_argument_and_the_closest_known_one():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'epsilonn'; did you mean "
                       r"'epsilon'\?") as refused:  # fmt: skip
        dpfast.forecast("laplace_dp", _frame(), epsilonn=1, bounds=BOUNDS)
    assert isinstance(refused.value, dpfast.DPFastError) and "missing" not in str(refused.value)


def test_a_forecast_says_whether_the_release_fits_in_the_budget(tmp_path):
    budget = dpfast.BudgetFile.create(tmp_path / "b.json", 1.5)
    budget.reserve(1.0, method="laplace_dp", output="earlier.csv")
    before = (tmp_path / "b.json").read_bytes()
    too_much = dpfast.forecast("laplace_dp", _frame(), epsilon=1.0, bounds=BOUNDS, budget=budget)
    assert too_much.budget_note is not None and too_much.budget_note.startswith("will NOT fit")
    assert "has 0.5 of 1.5 left; lower epsilon to at most 0.5" in too_much.budget_note
    assert f"budget: {too_much.budget_note}" in str(too_much).splitlines()
    fits = dpfast.forecast("laplace_dp", _frame(), epsilon=0.5, bounds=BOUNDS, budget=budget)
    assert fits.budget_note == f"fits: budget file {str(budget.path)!r} has 0.5 of 1.5 left"
    assert dpfast.forecast("laplace_dp", _frame(), epsilon=1.0, bounds=BOUNDS).budget_note is None
    assert (tmp_path / "b.json").read_bytes() == before  # read, never reserved


def test_a_forecast_of_a_dataset_needs_no_output(tmp_path):
    import pyarrow.dataset as ds

    _frame().to_parquet(tmp_path / "in.parquet")
    for data in (ds.dataset(tmp_path / "in.parquet", format="parquet"), tmp_path / "in.parquet"):
        got = dpfast.forecast("ir_dp", data, k=2, epsilon=1.0, bounds=BOUNDS)
        assert got.n_rows == 6 and [c.column for c in got.columns] == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


# -- messages quote values briefly -------------------------------------------------------

HUGE = "x" * 1_000_000  # a 1 MB category
LONG = "column_" + "y" * 5_000  # a long column name


def _long_named() -> pd.DataFrame:
    return pd.DataFrame({LONG: [1.0, 2.0, 3.0, 4.0], "b": [1, 2, 3, 4]})


def _huge_category() -> pd.DataFrame:
    return pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "c": [HUGE, "y", "y", "z"]})


BRIEF = {
    "a 1 MB category outside the domain": lambda: dpfast.randomized_response(
        _huge_category(), column="c", domain=["y", "z"], epsilon=1.0
    ),
    "a 1 MB category outside the taxonomy": lambda: dpfast.ir_dp(
        _huge_category(), k=2, epsilon=1.0, bounds={"a": (0, 5)},
        taxonomies={"c": dpfast.Taxonomy.from_mapping({"*": {"y": None, "z": None}})},
    ),
    "a 1 MB category in mdav without a taxonomy": lambda: dpfast.mdav(
        _huge_category(), k=2, columns=["c"]
    ),
    "a 1 MB column name asked for": lambda: _call("laplace_dp", _frame(), columns=[HUGE]),
    "a 1 MB bounds key": lambda: _call("laplace_dp", _frame(), bounds={**BOUNDS, HUGE: (0, 1)}),
    "a long column name without bounds": lambda: dpfast.laplace_dp(
        _long_named(), epsilon=1.0, bounds={"b": (0, 5)}
    ),
    "a long column name, not numeric": lambda: dpfast.laplace_dp(
        _long_named().assign(**{LONG: ["p", "q", "r", "s"]}), epsilon=1.0,
        bounds={LONG: (0, 1), "b": (0, 5)},
    ),
    "a long column name with NaN": lambda: dpfast.laplace_dp(
        _long_named().assign(**{LONG: [1.0, np.nan, 3.0, 4.0]}), epsilon=1.0,
        bounds={LONG: (0, 5), "b": (0, 5)},
    ),
    "twenty unknown columns": lambda: _call(
        "laplace_dp", _frame(), columns=[f"missing{i}" for i in range(20)]
    ),
    "numpy k out of range": lambda: _call("ir_dp", _frame(), k=np.int64(48)),
    "numpy k of a float type": lambda: _call("ir_dp", _frame(), k=np.float64(2.0)),
    "numpy epsilon": lambda: _call("laplace_dp", _frame(), epsilon=np.float64(-1.0)),
    "numpy bounds inverted": lambda: _call(
        "laplace_dp", _frame(), bounds={"a": (np.float64(9), np.int64(1)), "b": (0, 10)}
    ),
    "numpy bounds of text": lambda: _call(
        "laplace_dp", _frame(), bounds={"a": (np.str_("low"), np.int64(1)), "b": (0, 10)}
    ),
    "numpy seed": lambda: _call("laplace_dp", _frame(), seed=np.int64(-1)),
    "numpy retention": lambda: dpfast.k_pram(_frame(), k=2, retention=np.float64(1.5)),
    "numpy linkage": lambda: _call("ir_dp", _frame(), linkage=np.str_("rows" * 30)),
    "a numpy array as epsilon": lambda: _call("laplace_dp", _frame(), epsilon=np.arange(10**6)),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BRIEF))
def test_messages_quote_values_briefly_and_never_as_numpy_reprs(case):
    with pytest.raises(dpfast.DPFastError) as refused:
        BRIEF[case]()
    message = str(refused.value)
    assert len(message) < 800, (len(message), message[:300])
    assert "x" * 41 not in message and "y" * 41 not in message
    assert "np." not in message and "numpy." not in message and "array(" not in message
    if "x" * 10 in message:  # an excerpt of the 1 MB value, and its length
        assert "x" * 40 + "…' (1,000,000 characters)" in message, message
    if "long column name" in case:
        assert "(5,007 characters)" in message, message
