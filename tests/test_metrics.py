import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dpfast import metrics
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
