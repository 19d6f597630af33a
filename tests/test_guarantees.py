"""What each release states must hold: defaults, unprotected columns, reports, warnings.

The statistical checks on neighbouring tables are in tests/test_privacy.py; these are the
exact, deterministic parts of the same guarantees (docs/design.md#unprotected-columns,
#public-report, #noise-warning).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpfast
from dpfast._release import cli_spelling, method_call, option
from dpfast.exceptions import (
    DPFastValueError,
    NoiseDominatesWarning,
    PrivacyLeakWarning,
    UnprovenReleaseWarning,
)

BOUNDS = {"v": (0.0, 100.0), "w": (0.0, 100.0)}


def _table(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "v": rng.uniform(0, 100, n),
            "w": rng.uniform(0, 100, n),
            "note": [f"r{i}" for i in range(n)],
        }
    )


def _release(method: str, data, **kwargs):
    if method == "ir_dp":
        return dpfast.ir_dp(data, k=4, epsilon=50.0, bounds=BOUNDS, **kwargs)
    if method == "mdav_dp":
        return dpfast.mdav_dp(data, k=10, epsilon=50.0, bounds=BOUNDS, **kwargs)
    return dpfast.laplace_dp(data, epsilon=50.0, bounds=BOUNDS, **kwargs)


METHODS = ["ir_dp", "mdav_dp", "laplace_dp"]


# -- defaults: every default release is proven ------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_the_default_release_is_proven_and_leaves_unprotected_columns_out(method):
    table = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning of any kind on the default path
        release = _release(method, table, columns=["v", "w"], seed=1)
    report = release.report
    assert report.guarantee_level == "proven"
    assert list(release.data.columns) == ["v", "w"]
    assert report.unprotected_columns == ["id", "note"] and report.unprotected == "drop"
    assert "are not released" in report.guarantee


def test_ir_dp_defaults_are_the_proven_modes():
    release = dpfast.ir_dp(_table()[["v", "w"]], k=4, epsilon=1.0, bounds=BOUNDS, seed=0)
    assert release.report.parameters["linkage"] == "columns"
    assert release.report.guarantee_level == "proven"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"linkage": "records"}, "record-linked release"),
        ({"linkage": "records", "shuffle": False, "columns": ["v"]}, "not shuffled"),
    ],
)
def test_unproven_ir_dp_modes_warn_in_their_own_category_and_say_so(kwargs, match):
    table = _table()[["v", "w"]]
    with pytest.warns(UnprovenReleaseWarning, match=match) as caught:
        release = dpfast.ir_dp(table, k=4, epsilon=1.0, bounds=BOUNDS, seed=0, **kwargs)
    assert issubclass(caught[0].category, PrivacyLeakWarning)  # filters on the parent apply
    assert caught[0].filename == __file__  # points at the caller's line
    report = release.report
    assert report.guarantee_level in ("as_published", "none")
    assert report.guarantee.startswith("NOT")
    assert 'linkage="columns"' in report.guarantee and "dpfast.mdav_dp()" in report.guarantee


def test_single_shuffled_column_with_records_linkage_is_still_proven():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release = dpfast.ir_dp(
            _table()[["v"]], k=20, epsilon=1.0, bounds={"v": BOUNDS["v"]}, linkage="records", seed=0
        )
    assert release.report.guarantee_level == "proven"


def test_paper_sensitivity_on_categorical_columns_warns_and_is_heuristic():
    taxonomy = dpfast.Taxonomy.from_mapping({"*": {"A": ["a1", "a2"], "B": ["b1", "b2"]}})
    table = pd.DataFrame({"c": ["a1", "a2", "b1", "b2"] * 5})
    with pytest.warns(UnprovenReleaseWarning, match="heuristic"):
        release = dpfast.ir_dp(
            table, k=2, epsilon=1.0, taxonomies={"c": taxonomy}, sensitivity="paper", seed=0
        )
    assert release.report.guarantee_level == "heuristic"
    default = dpfast.ir_dp(table, k=2, epsilon=1.0, taxonomies={"c": taxonomy}, seed=0)
    assert default.report.guarantee_level == "proven"


def test_mdav_dp_paper_calibration_warns_that_it_spends_more():
    with pytest.warns(PrivacyLeakWarning, match="really spends"):
        release = dpfast.mdav_dp(
            _table()[["v", "w"]],
            k=10,
            epsilon=1.0,
            bounds=BOUNDS,
            calibration="as_published",
            seed=0,
        )
    assert release.report.epsilon > 1.0  # the real figure, and the label is about it
    assert release.report.guarantee_level == "proven"


# -- unprotected columns ------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_shuffle_releases_unprotected_columns_in_an_order_of_their_own(method):
    table = _table()
    release = _release(method, table, columns=["v", "w"], unprotected="shuffle", seed=2)
    out = release.data
    assert list(out.columns) == list(table.columns)
    assert release.report.guarantee_level == "protected_only"
    assert "NOT protected" in release.report.guarantee
    # among themselves the unprotected columns stay linked, and all their values are there
    pairs = set(zip(table["id"], table["note"], strict=True))
    assert set(zip(out["id"], out["note"], strict=True)) == pairs
    assert out["id"].tolist() != table["id"].tolist()
    # the order is drawn from its own key: the seed fixes it, the protected values don't
    other = table.assign(v=table["v"][::-1].to_numpy())
    again = _release(method, other, columns=["v", "w"], unprotected="shuffle", seed=2)
    assert again.data["id"].tolist() == out["id"].tolist()


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp"])
def test_keep_next_to_groups_is_not_differentially_private(method):
    kwargs = {"linkage": "records"} if method == "ir_dp" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnprovenReleaseWarning)
        release = _release(
            method, _table(), columns=["v", "w"], unprotected="keep", seed=2, **kwargs
        )
    assert release.report.guarantee_level == "none"
    assert release.report.guarantee.startswith("NOT differentially private as released")
    group = "rank group" if method == "ir_dp" else "cluster"
    assert f"share a {group}" in release.report.guarantee


def test_keep_under_column_linkage_is_refused_with_the_reason():
    # no output row is an input record: "keep" would have no rows to keep the columns in
    with pytest.raises(DPFastValueError) as refused:
        _release("ir_dp", _table(), columns=["v"], unprotected="keep", seed=2)
    message = str(refused.value)
    assert 'linkage="columns"' in message and "no output row is an input record" in message
    for instead in ('unprotected="shuffle"', 'unprotected="drop"', 'linkage="records"'):
        assert instead in message
    with cli_spelling():
        with pytest.raises(DPFastValueError, match="--unprotected shuffle"):
            _release("ir_dp", _table(), columns=["v"], unprotected="keep", seed=2)
    # the same columns under record linkage are kept in their rows, and labelled so
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnprovenReleaseWarning)
        kept = _release(
            "ir_dp", _table(), columns=["v"], unprotected="keep", linkage="records", seed=2
        )
    assert kept.report.unprotected == "keep"


def test_laplace_keep_is_safe_for_the_protected_columns():
    table = _table()
    release = _release("laplace_dp", table, columns=["v"], unprotected="keep", seed=2)
    assert release.data["note"].tolist() == table["note"].tolist()
    assert release.report.guarantee_level == "protected_only"


def test_drop_works_for_numpy_and_arrow_inputs():
    array = _table()[["v", "id", "w"]].to_numpy(dtype=float)
    bounds = {0: (0.0, 100.0), 2: (0.0, 100.0)}
    release = dpfast.ir_dp(array, k=4, epsilon=1.0, bounds=bounds, columns=[0, 2], seed=1)
    assert release.data.shape == (40, 2)
    assert release.report.protected_columns == ["0", "2"]
    assert release.report.unprotected_columns == ["1"]
    arrow = pa.Table.from_pandas(_table(), preserve_index=False)
    out = dpfast.laplace_dp(arrow, epsilon=1.0, bounds=BOUNDS, columns=["w"], seed=1).data
    assert isinstance(out, pa.Table) and out.column_names == ["w"]


def test_unprotected_is_validated():
    with pytest.raises(ValueError, match="unprotected must be one of"):
        _release("ir_dp", _table(), columns=["v"], unprotected="copy")


# -- column names that read the same as text ------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_names_equal_as_text_are_refused(method):
    table = pd.DataFrame({0: np.arange(20.0), "0": np.arange(20.0)})
    bounds = {0: (0.0, 20.0), "0": (0.0, 20.0)}
    call = {
        "ir_dp": lambda: dpfast.ir_dp(table, k=2, epsilon=1.0, bounds=bounds),
        "mdav_dp": lambda: dpfast.mdav_dp(table, k=5, epsilon=1.0, bounds=bounds),
        "laplace_dp": lambda: dpfast.laplace_dp(table, epsilon=1.0, bounds=bounds),
    }[method]
    with pytest.raises(ValueError, match=r"columns 0 and '0' have the same name as text"):
        call()


# -- the public and the private report ------------------------------------------------------

PRIVATE_FIELDS = {"clamped", "clamped_output", "timings", "metrics", "n_rows", "input_rows"}


@pytest.mark.parametrize("method", METHODS)
def test_the_public_report_holds_no_exact_statistic_of_the_input(method):
    table = _table()
    table.loc[0, "v"] = 150.0  # outside the bounds: clamped, and counted privately
    release = _release(method, table, columns=["v", "w"], seed=3, metrics=True)
    public = json.loads(release.report.to_json())
    assert public["report"] == "public"
    assert not PRIVATE_FIELDS & set(public)
    assert public["released_rows"] == len(release.data)
    private = json.loads(release.private.to_json())
    assert private["report"].startswith("PRIVATE")
    assert private["input_rows"] == 40 and private["clamped"]["v"] == 1
    assert set(private["metrics"]["relative_error"]) == {"v", "w"}
    for column in ("v", "w"):
        values = release.data[column].to_numpy()
        lower, upper = BOUNDS[column]
        on_bound = int(np.count_nonzero((values <= lower) | (values >= upper)))
        assert private["clamped_output"][column] == on_bound


def test_diffgen_public_report_counts_released_rows_not_input_rows():
    table = pd.DataFrame({"age": np.arange(30) % 70 + 17, "y": ["a", "b", "c"] * 10})
    release = dpfast.diffgen(
        table,
        target="y",
        epsilon=1.0,
        steps=2,
        bounds={"age": (17, 90)},
        classes=["a", "b", "c"],
        seed=1,
    )
    public = release.report.to_dict()
    assert public["released_rows"] == len(release.counts)
    assert not PRIVATE_FIELDS & set(public)
    assert release.private.input_rows == 30


def test_k_noise_data_dependent_deltas_are_private():
    release = dpfast.k_noise(_table()[["v"]], k=3, seed=1)
    assert "deltas" not in release.report.to_dict()
    assert set(release.private.extra["deltas"]) == {"v"}


# -- noise that swamps the data -------------------------------------------------------------


def test_noise_that_swamps_the_columns_warns_once_from_public_quantities():
    table = _table()[["v", "w"]]
    with pytest.warns(NoiseDominatesWarning) as caught:
        release = dpfast.laplace_dp(table, epsilon=1.0, bounds=BOUNDS, seed=1)
    assert len(caught) == 1  # one line for both columns (scale 200 over a width of 100)
    assert release.report.warnings == [str(caught[0].message)]
    assert "79% in 'v', 'w'" in release.report.warnings[0]  # 2 (1 - exp(-1/2))
    assert "raise epsilon" in release.report.warnings[0]
    # the warning depends on the public scale only: the same for any data
    with pytest.warns(NoiseDominatesWarning) as again:
        dpfast.laplace_dp(table * 0.0, epsilon=1.0, bounds=BOUNDS, seed=1)
    assert str(again[0].message) == release.report.warnings[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        calm = dpfast.laplace_dp(table, epsilon=50.0, bounds=BOUNDS, seed=1)  # 4% on a bound
    assert calm.report.warnings == []


def test_ir_dp_noise_warning_follows_k():
    table = _table(400)[["v"]]
    with pytest.warns(NoiseDominatesWarning, match="Raise k to 10 or more"):
        dpfast.ir_dp(table, k=1, epsilon=1.0, bounds={"v": BOUNDS["v"]}, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        release = dpfast.ir_dp(table, k=100, epsilon=1.0, bounds={"v": BOUNDS["v"]}, seed=1)
    assert release.report.warnings == []


# -- texts name the caller's options --------------------------------------------------------


def test_texts_name_python_keywords_or_cli_flags():
    assert option("linkage", "columns") == 'linkage="columns"'
    assert option("shuffle", False) == "shuffle=False"
    assert method_call("mdav_dp") == "dpfast.mdav_dp()"
    with cli_spelling():
        assert option("linkage", "columns") == "--linkage columns"
        assert option("shuffle", False) == "--no-shuffle"
        assert option("epsilon") == "--epsilon"
        assert method_call("mdav_dp") == "dpfast release mdav-dp"
    assert option("epsilon") == "epsilon"  # restored after the block


def test_cli_spelling_reaches_the_report():
    table = _table()[["v", "w"]]
    with cli_spelling(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UnprovenReleaseWarning)
        release = dpfast.ir_dp(table, k=4, epsilon=1.0, bounds=BOUNDS, linkage="records")
    text = release.report.guarantee
    assert "--linkage columns" in text and "dpfast release mdav-dp" in text
    assert "linkage=" not in text
