import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpfast import metrics
from dpfast.exceptions import DPFastValueError
from tests.reference import metrics_reference


def test_relative_error_by_hand():
    # |10-11|/10 = 0.1 and |0-1|/max(0, 0.01*100) = 1: mean 0.55
    got = metrics.relative_error(np.array([10.0, 0.0]), np.array([11.0, 1.0]), (0, 100))
    assert got == pytest.approx(0.55)


def test_relative_error_matches_reference_and_averages_columns():
    rng = np.random.default_rng(0)
    x = pd.DataFrame({"a": rng.normal(0, 5, 200), "b": rng.uniform(0, 10, 200)})
    y = x + rng.normal(0, 1, x.shape)
    bounds = {"a": (-20, 20), "b": (0, 10)}
    per = metrics.relative_error(x, y, bounds, per_column=True)
    for name in ["a", "b"]:
        expected = metrics_reference.relative_error(x[name], y[name], *bounds[name])
        assert per[name] == pytest.approx(expected, rel=1e-12)
    assert metrics.relative_error(x, y, bounds) == pytest.approx((per["a"] + per["b"]) / 2)
    arrow = metrics.relative_error(pa.Table.from_pandas(x), pa.Table.from_pandas(y), bounds)
    assert arrow == pytest.approx((per["a"] + per["b"]) / 2)


def test_relative_error_zero_value_zero_width_domain():
    assert metrics.relative_error(np.zeros(3), np.zeros(3), (0, 0)) == 0.0
    assert math.isinf(metrics.relative_error(np.zeros(3), np.ones(3), (0, 0)))


def test_jensen_shannon_by_hand():
    # P = (1, 0), Q = (1/2, 1/2): M = (3/4, 1/4); JSD = 1/2 log2(4/3) + 1/4 log2(2/3) + 1/4 log2 2
    expected = 0.5 * math.log2(4 / 3) + 0.25 * math.log2(2 / 3) + 0.25
    got = metrics.jensen_shannon(np.array([0.1, 0.1]), np.array([0.1, 0.9]), (0, 1), bins=2)
    assert got == pytest.approx(expected)


def test_jensen_shannon_matches_reference_binned_and_discrete():
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0, 100, 500), rng.normal(50, 20, 500)
    got = metrics.jensen_shannon(x, y, (0, 100))
    assert got == pytest.approx(metrics_reference.jensen_shannon_binned(x, y, 0, 100, 100))
    a, b = rng.integers(17, 91, 300), rng.integers(17, 91, 300)
    got = metrics.jensen_shannon(a, b, (17, 90))
    assert got == pytest.approx(metrics_reference.jensen_shannon_discrete(a, b))


def test_jensen_shannon_edge_cases():
    x = np.arange(10.0)
    assert metrics.jensen_shannon(x, x, (0, 9)) == 0.0
    assert metrics.jensen_shannon(x, x[::-1], (0, 9)) == 0.0  # order does not matter
    assert metrics.jensen_shannon(np.zeros(4), np.full(4, 9.0), (0, 9)) == 1.0
    # values at the upper bound land in the last bin
    assert metrics.jensen_shannon(np.array([9.0]), np.array([8.99]), (0, 9), bins=10) == 0.0
    # a wide integer domain is binned, not one bin per value
    wide = np.arange(0, 100_000, 1000)
    assert metrics.jensen_shannon(wide, wide + 1, (0, 100_000)) == 0.0
    strings = pd.Series(list("aabb"))
    assert metrics.jensen_shannon(strings, pd.Series(list("abab"))) == 0.0


def test_mismatched_shapes_and_columns_are_clear_errors():
    with pytest.raises(ValueError, match="same shape"):
        metrics.relative_error(np.zeros(3), np.zeros(4), (0, 1))
    with pytest.raises(ValueError, match="same columns"):
        metrics.jensen_shannon(pd.DataFrame({"a": [1]}), pd.DataFrame({"b": [1]}))
    with pytest.raises(ValueError, match="empty"):
        metrics.jensen_shannon(np.zeros(0), np.zeros(0), (0, 1))
    with pytest.raises(ValueError, match="no bounds for column 'b'"):
        metrics.relative_error(
            pd.DataFrame({"b": [1.0]}), pd.DataFrame({"b": [1.0]}), {"a": (0, 1)}
        )


# variance variation, information loss, SSE/SST -------------------------------------------


def _pair_tables(seed=3, n=60):
    rng = np.random.default_rng(seed)
    x = pd.DataFrame(
        {
            "a": rng.normal(10, 3, n),
            "b": rng.uniform(-5, 20, n),
            "c": rng.integers(0, 50, n).astype(float),
        }
    )
    x["c"] += 0.5 * x["a"]
    y = x + rng.normal(0, 2, x.shape)
    return x, y


def test_variance_variation_by_hand():
    # population variances 1.25 and 3.25: |1.25 - 3.25| / 1.25 = 1.6
    got = metrics.variance_variation(np.array([1.0, 2, 3, 4]), np.array([0.0, 2, 3, 5]))
    assert got == pytest.approx(1.6)
    # sample variances 5/3 and 13/3: the same ratio
    got = metrics.variance_variation(np.array([1.0, 2, 3, 4]), np.array([0.0, 2, 3, 5]), ddof=1)
    assert got == pytest.approx(1.6)


def test_variance_variation_matches_reference_for_every_input_kind():
    x, y = _pair_tables()
    per = metrics.variance_variation(x, y, per_column=True)
    for name in x.columns:
        assert per[name] == pytest.approx(metrics_reference.variance_variation(x[name], y[name]))
    expected = np.mean(list(per.values()))
    assert metrics.variance_variation(x, y) == pytest.approx(expected)
    arrow = metrics.variance_variation(pa.Table.from_pandas(x), pa.Table.from_pandas(y))
    assert arrow == pytest.approx(expected)
    assert metrics.variance_variation(x.to_numpy(), y.to_numpy()) == pytest.approx(expected)
    single = metrics.variance_variation(pa.array(x["a"]), pa.array(y["a"]))
    assert single == pytest.approx(per["a"])


def test_variance_variation_zero_variance():
    assert metrics.variance_variation(np.full(4, 7.0), np.full(4, 7.0)) == 0.0
    assert math.isinf(metrics.variance_variation(np.full(4, 7.0), np.arange(4.0)))
    with pytest.raises(ValueError, match="ddof"):
        metrics.variance_variation(np.ones(3), np.ones(3), ddof=2)
    with pytest.raises(ValueError, match="at least 2"):
        metrics.variance_variation(np.ones(1), np.ones(1), ddof=1)
    with pytest.raises(TypeError, match="not numeric"):
        metrics.variance_variation(np.array(["a", "b"]), np.array(["a", "b"]))


def test_information_loss_by_hand():
    # a = (1, 2, 3), b = (2, 4, 6) released as a' = (1, 2, 4), b' = b. Population moments:
    # var a = 2/3, var a' = 14/9, cov(a, b) = 4/3, cov(a', b') = 2, r = 1, r' = sqrt(27/28).
    x = pd.DataFrame({"a": [1.0, 2, 3], "b": [2.0, 4, 6]})
    y = pd.DataFrame({"a": [1.0, 2, 4], "b": [2.0, 4, 6]})
    got = metrics.information_loss(x, y)
    expected = {
        "IL1": (1 / 3) / (math.sqrt(2) * math.sqrt(2 / 3)) / 2,
        "IL2": (1 / 3) / 2 / 2,
        "IL3": (8 / 9) / (2 / 3) / 2,
        "IL4": (4 / 3 + 1 / 2 + 0) / 3,
        "IL5": 1 - math.sqrt(27 / 28),
    }
    expected["IL6"] = 100 * sum(expected.values()) / 5
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
    assert list(got) == ["IL1", "IL2", "IL3", "IL4", "IL5", "IL6"]
    assert got.skipped == {f"IL{i}": 0 for i in range(1, 6)}


def test_information_loss_matches_reference_for_every_input_kind():
    x, y = _pair_tables(seed=4)
    expected = metrics_reference.information_loss(
        [list(x[c]) for c in x.columns], [list(y[c]) for c in y.columns]
    )
    for data_x, data_y in [
        (x, y),
        (pa.Table.from_pandas(x), pa.Table.from_pandas(y)),
        (x.to_numpy(), y.to_numpy()),
    ]:
        got = metrics.information_loss(data_x, data_y)
        for key, value in expected.items():
            assert got[key] == pytest.approx(value, rel=1e-9), key
    got = metrics.information_loss(x, y, ddof=1)
    expected = metrics_reference.information_loss(
        [list(x[c]) for c in x.columns], [list(y[c]) for c in y.columns], ddof=1
    )
    assert got["IL6"] == pytest.approx(expected["IL6"], rel=1e-9)


def test_information_loss_zero_mean_and_zero_variance_are_guarded():
    # a zero-mean column: IL2's term is 0 while the mean stays 0, skipped once it moves
    x = pd.DataFrame({"a": [-1.0, 1.0, 0.0], "b": [1.0, 2.0, 3.0]})
    unchanged_mean = x.assign(a=[-2.0, 2.0, 0.0])
    got = metrics.information_loss(x, unchanged_mean)
    assert got.skipped["IL2"] == 0
    assert got["IL2"] == 0.0
    moved = x.assign(a=[0.0, 2.0, 1.0])
    got = metrics.information_loss(x, moved)
    assert got.skipped["IL2"] == 1
    assert got["IL2"] == 0.0  # only b's term is left, and b did not change
    # a constant column: IL1, IL3, IL4, IL5 terms involving it are skipped when it changes
    constant = pd.DataFrame({"a": [5.0, 5.0, 5.0]})
    same = metrics.information_loss(constant, constant)
    assert [same[key] for key in same][:4] == [0.0, 0.0, 0.0, 0.0]
    assert math.isnan(same["IL5"])  # one column has no pairs
    assert same["IL6"] == 0.0
    changed = metrics.information_loss(constant, pd.DataFrame({"a": [4.0, 5.0, 6.0]}))
    assert math.isnan(changed["IL1"]) and math.isnan(changed["IL3"])
    assert changed.skipped["IL1"] == 1
    assert changed["IL2"] == 0.0  # the mean did not move
    assert changed.skipped["IL4"] == 1 and math.isnan(changed["IL4"])
    assert changed["IL6"] == 0.0  # the mean of the defined measures: IL2 alone
    as_json = changed.as_dict()
    assert as_json["IL1"] is None and as_json["skipped"]["IL3"] == 1
    with pytest.raises(ValueError, match="NaN"):
        metrics.information_loss(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    with pytest.raises(KeyError):
        metrics.information_loss(constant, constant)["IL7"]


def test_sse_sst_by_hand_and_reference():
    x = np.array([1.0, 3.0, 10.0, 12.0])
    assert metrics.sse(x, [0, 0, 1, 1]) == pytest.approx(4.0)
    assert metrics.sst(x) == pytest.approx(85.0)
    assert metrics.sse(x, ["a"] * 4) == pytest.approx(metrics.sst(x))
    assert metrics.sse(x, np.arange(4)) == 0.0  # singleton groups
    table, _ = _pair_tables(seed=5, n=40)
    labels = np.random.default_rng(5).integers(0, 7, 40)
    per = metrics.sse(table, labels, per_column=True)
    for name in table.columns:
        assert per[name] == pytest.approx(metrics_reference.sse(list(table[name]), labels))
        assert metrics.sst(table, per_column=True)[name] == pytest.approx(
            metrics_reference.sst(list(table[name]))
        )
    # a table's SSE is the multivariate one: the sum over columns
    assert metrics.sse(table, labels) == pytest.approx(sum(per.values()))
    assert metrics.sse(pa.Table.from_pandas(table), pa.array(labels)) == pytest.approx(
        sum(per.values())
    )
    standardised = (table - table.mean()) / table.std(ddof=0)
    assert metrics.sse(table, labels, standardize=True) == pytest.approx(
        metrics.sse(standardised, labels)
    )
    assert metrics.sst(table, standardize=True) == pytest.approx(table.shape[1] * 40)


def test_sse_edge_cases():
    assert metrics.sse(np.full(4, 3.0), [0, 0, 1, 1], standardize=True) == 0.0
    with pytest.raises(ValueError, match="one label per row"):
        metrics.sse(np.zeros(4), [0, 1])
    with pytest.raises(ValueError, match="empty"):
        metrics.sst(np.zeros(0))


def test_identical_inputs_lose_nothing():
    x, _ = _pair_tables(seed=6)
    bounds = {c: (float(x[c].min()) - 1, float(x[c].max()) + 1) for c in x.columns}
    assert metrics.relative_error(x, x, bounds) == 0.0
    assert metrics.jensen_shannon(x, x, bounds) == 0.0
    assert metrics.variance_variation(x, x) == 0.0
    loss = metrics.information_loss(x, x)
    assert all(loss[key] == 0.0 for key in loss)


def test_jensen_shannon_empty_bins():
    # empty bins on both sides add nothing: 100 mostly empty bins give the 2-bin value
    x, y = np.array([0.1, 0.1]), np.array([0.1, 0.9])
    two = metrics.jensen_shannon(x, y, (0, 1), bins=2)
    assert metrics.jensen_shannon(x, y, (0, 1), bins=100) == pytest.approx(two)
    # all mass in bins the other side leaves empty: the maximum
    assert metrics.jensen_shannon(np.zeros(3), np.ones(3), (0, 1), bins=100) == 1.0


def test_new_metrics_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="same shape"):
        metrics.variance_variation(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="same columns"):
        metrics.information_loss(pd.DataFrame({"a": [1.0]}), pd.DataFrame({"b": [1.0]}))
    with pytest.raises(ValueError, match="same columns"):
        metrics.variance_variation(np.zeros((3, 2)), np.zeros((3, 3)))


def test_jensen_shannon_mixed_table_needs_no_bounds_for_categories():
    x = pd.DataFrame({"age": [20, 30, 40, 50], "job": list("aabb")})
    y = pd.DataFrame({"age": [20, 30, 40, 50], "job": list("abbb")})
    per = metrics.jensen_shannon(x, y, {"age": (17, 90)}, per_column=True)
    assert per["age"] == 0.0
    assert per["job"] == pytest.approx(metrics.jensen_shannon(x["job"], y["job"]))
    with pytest.raises(ValueError, match="no bounds for column 'age'"):
        metrics.jensen_shannon(x, y, {"job": (0, 1)})


# -- correlation error ----------------------------------------------------------------


def _numpy_correlation_error(x, y):
    """The reference: NumPy's correlation matrices, their upper triangles compared."""
    upper = np.triu_indices(x.shape[1], k=1)
    return float(np.mean(np.abs(np.corrcoef(x.T)[upper] - np.corrcoef(y.T)[upper])))


@pytest.mark.parametrize("seed", range(6))
def test_correlation_error_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 6))
    mixing = rng.normal(size=(m, m))
    x = rng.normal(size=(200, m)) @ mixing
    # a release of another length: the rows need not be paired
    y = rng.normal(size=(int(rng.integers(2, 300)), m)) @ (mixing + rng.normal(0, 0.5, (m, m)))
    got = metrics.correlation_error(x, y)
    expected = _numpy_correlation_error(x, y)
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_correlation_error_is_il5_on_tables_of_one_shape():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(80, 4))
    y = x + rng.normal(0, 0.7, x.shape)
    got = metrics.correlation_error(pd.DataFrame(x), pd.DataFrame(y))
    expected = metrics.information_loss(x, y)["IL5"]
    assert got == pytest.approx(expected, rel=1e-12)


def test_correlation_error_by_hand_and_bounds():
    x = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 7.0]])
    assert metrics.correlation_error(x, x) == 0.0
    r = np.corrcoef(x.T)[0, 1]
    flipped = np.column_stack([x[:, 0], -x[:, 1]])
    assert metrics.correlation_error(x, flipped) == pytest.approx(2 * r)
    assert metrics.correlation_error(x, np.column_stack([x[:, 0], x[::-1, 1]])) <= 2.0


def test_correlation_error_of_constant_columns_follows_il5():
    x = np.array([[1.0, 5.0, 2.0], [2.0, 5.0, 1.0], [3.0, 5.0, 4.0]])
    # the constant column keeps its (zero) covariances: its pairs count 0
    got = metrics.correlation_error(x, x)
    assert got == 0.0
    y = x.copy()
    y[:, 1] = [4.0, 5.0, 6.0]  # no longer constant: its pairs are undefined, left out
    expected = abs(np.corrcoef(x[:, [0, 2]].T)[0, 1] - np.corrcoef(y[:, [0, 2]].T)[0, 1])
    assert metrics.correlation_error(x, y) == pytest.approx(expected)
    constant = np.ones((4, 2))
    assert metrics.correlation_error(constant, constant + 1.0) == 0.0  # unchanged: 0
    varying = np.column_stack([np.ones(4), np.arange(4.0)])
    assert math.isnan(metrics.correlation_error(constant, varying))  # no pair defined


def test_correlation_error_refuses_bad_input():
    with pytest.raises(ValueError, match="at least two numeric columns"):
        metrics.correlation_error(np.zeros((4, 1)), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="at least two numeric columns"):
        metrics.correlation_error(np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="same columns"):
        metrics.correlation_error(
            pd.DataFrame({"a": [1.0, 2.0], "b": [1.0, 3.0]}),
            pd.DataFrame({"a": [1.0, 2.0], "c": [1.0, 3.0]}),
        )
    with pytest.raises(ValueError, match="NaN or inf"):
        metrics.correlation_error(np.array([[1.0, np.nan], [2.0, 3.0]]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="at least two"):
        metrics.correlation_error(np.ones((1, 2)), np.ones((3, 2)))
    with pytest.raises(TypeError, match="not numeric"):
        metrics.correlation_error(
            pd.DataFrame({"a": ["x", "y"], "b": [1.0, 2.0]}),
            pd.DataFrame({"a": ["x", "y"], "b": [1.0, 2.0]}),
        )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("which", ["original", "released"])
@pytest.mark.parametrize(
    "measure",
    [
        lambda o, r: metrics.relative_error(o, r, bounds={"age": (0, 10)}),
        lambda o, r: metrics.jensen_shannon(o, r, bounds={"age": (0, 10)}),
        lambda o, r: metrics.variance_variation(o, r),
    ],
    ids=["relative_error", "jensen_shannon", "variance_variation"],
)
def test_a_non_finite_value_is_refused_naming_its_column(measure, which, bad):
    original = pd.DataFrame({"age": [1.0, 2.5, 3.0, 4.0]})
    released = original.copy()
    (original if which == "original" else released).loc[2, "age"] = bad
    with pytest.raises(DPFastValueError, match="column 'age' holds NaN or inf"):
        measure(original, released)
