"""The forecast from the data on transformed columns, and the ε weights it suggests.

A transformed column (docs/privacy.md#transforms) is released through the grid's
nonlinear mapping: the forecast's moments are checked against sums over every noise value
(tests/reference/forecast_reference.py) and against seeded releases of a lognormal
column; the suggested ``epsilon_weights`` against their formula and against releases
(docs/forecast.md#transformed, #weights).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast._release.data_forecast import ColumnDataForecast, suggest_weights
from dpfast._release.expected import (
    EXACT_ROUNDING_REACH,
    numeric_outcome,
    push_chances,
    released_values,
    value_moments,
)
from dpfast._release.forecast import bound_steps
from dpfast._release.transforms import noise_grid
from dpfast.cli import main
from dpfast.exceptions import NoiseDominatesWarning, TransformBiasWarning
from dpfast.partitions.grid import Grid
from tests.reference import forecast_reference as reference

# -- the grid's own mapping -----------------------------------------------------------------


def _tiny(transform: str, lower: float, upper: float, d: int, t: float) -> Grid:
    """A grid of ``d`` steps over the bounds, corrected for noise of ``t`` steps if it can be."""
    width = Grid(lower, upper, 1.0, 1, 8, transform).width
    grid = Grid(lower, upper, width / d, d, 8, transform)
    return noise_grid(grid, t)  # type: ignore[arg-type]


TINY = [  # transform, lower, upper, d
    ("log", 0.0, 50.0, 16),
    ("log", 3.0, 9.0, 12),
    ("asinh", -20.0, 30.0, 16),
    ("asinh", 2.0, 40.0, 10),
]


@pytest.mark.parametrize(("transform", "lower", "upper", "d"), TINY)
def test_values_is_value_for_every_grid_value(transform, lower, upper, d):
    for grid in (_tiny(transform, lower, upper, d, 2.0), Grid(lower, upper, 0.5, 200, 8)):
        y = np.arange(-1, grid.d_int + 2)
        for integer in (False, True):
            got = grid.values(y, integer)
            expected = [grid.value(int(v), integer) for v in y]
            np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize(("transform", "lower", "upper", "d"), TINY)
def test_bound_steps_of_a_transformed_grid_are_where_its_values_reach_a_bound(
    transform, lower, upper, d
):
    grid = _tiny(transform, lower, upper, d, 2.0)
    for integer in (False, True):
        a, b = bound_steps(grid, integer)
        released = [reference.transformed_value(z, d, lower, upper, grid.gamma, transform,
                                                grid.shift) for z in range(d + 1)]  # fmt: skip
        if integer:
            released = [float(np.rint(v)) for v in released]
        low = [z for z, v in enumerate(released) if v <= lower]
        high = [z for z, v in enumerate(released) if v >= upper]
        assert a == max(low) and d - b == min(high)


def test_a_log_grid_corrected_for_its_noise_releases_its_lowest_values_as_the_lower_bound():
    grid = _tiny("log", 0.0, 50.0, 16, 3.0)
    assert grid.shift > grid.gamma  # expm1(gamma z - shift) < 0 for z = 1
    assert bound_steps(grid, False)[0] == math.floor(grid.shift / grid.gamma)


# -- a group's released value, against every noise value ----------------------------------


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("t", [0.4, 1.5, 6.0, 30.0])
@pytest.mark.parametrize(("transform", "lower", "upper", "d"), TINY)
def test_a_transformed_groups_released_value_matches_the_distribution(
    transform, lower, upper, d, t, integer
):
    grid = _tiny(transform, lower, upper, d, t)
    q = np.arange(d + 1)
    mean, variance, exact = value_moments(q, t, grid, integer)
    chances = push_chances(q, t, grid, integer)
    before = released_values(grid, integer, q)
    assert exact
    for i in q.tolist():
        expected_mean, expected_var, on_bound, _ = reference.transformed_group_moments(
            i, t, grid, integer
        )
        scale = max(1.0, abs(expected_mean))
        assert mean[i] == pytest.approx(expected_mean, abs=1e-12 * scale)
        assert variance[i] == pytest.approx(expected_var, abs=1e-12 * scale**2)
        if lower < before[i] < upper:
            assert chances[i] == pytest.approx(on_bound, abs=1e-12)


def test_an_uncorrected_grid_is_summed_as_it_is_released():
    grid = _tiny("log", 0.0, 1000.0, 20, 40.0)  # noise scale 1.7 on the log scale: no mean
    assert grid.shift == 0.0
    q = np.array([3, 10, 17])
    mean, variance, _ = value_moments(q, 40.0, grid, False)
    for i, value in enumerate(q.tolist()):
        expected_mean, expected_var, _, _ = reference.transformed_group_moments(
            value, 40.0, grid, False
        )
        assert mean[i] == pytest.approx(expected_mean, rel=1e-12)
        assert variance[i] == pytest.approx(expected_var, rel=1e-11)


def test_a_wide_integer_column_takes_its_rounding_as_uniform_and_says_so():
    grid = Grid.for_column(0.0, 1e6, 1000, 10, "log")
    q = np.array([grid.d_int // 8])  # a value near 4.6
    t = 0.3 / grid.gamma  # 0.3 on the log scale: 40 scales reach every integer up to 1e6
    assert not value_moments(q, t, noise_grid(grid, t), True)[2]  # type: ignore[arg-type]
    t = 0.001 / grid.gamma  # 40 scales span a few integers
    assert value_moments(q, t, noise_grid(grid, t), True)[2]  # type: ignore[arg-type]
    assert EXACT_ROUNDING_REACH == math.ceil(40 * 2.0) + 2  # the untransformed rule's reach


def test_a_column_outcome_by_hand_against_every_pair_of_draws():
    grid = _tiny("log", 0.0, 50.0, 12, 1.5)
    t = 1.5
    sums, sizes = np.array([6 * 3, 10 * 4 + 1]), np.array([6, 4])  # grid means 3 and 10
    means = np.array([2.0, 30.0])  # the groups' means in the data's units
    outcome = numeric_outcome(sums, sizes, grid, t, False, means)
    ys, pmf = reference.noise_pmf(t, int(60 * t) + 20)
    values = [
        [
            reference.transformed_value(
                min(max(q + y, 0), 12), 12, 0.0, 50.0, grid.gamma, "log", grid.shift
            )
            for y in ys.tolist()
        ]
        for q in (3, 10)
    ]
    mean = second = upper = 0.0
    for (i, v1), (j, v2) in itertools.product(enumerate(values[0]), enumerate(values[1])):
        chance = pmf[i] * pmf[j]
        column = (6 * v1 + 4 * v2) / 10
        mean += chance * column
        second += chance * column**2
        upper += chance * (6 * (v1 >= 50.0) + 4 * (v2 >= 50.0)) / 10
    assert outcome.mean == pytest.approx(2.0 * 0.6 + 30.0 * 0.4, rel=1e-15)
    assert outcome.mean + outcome.mean_bias == pytest.approx(mean, rel=1e-12)
    assert outcome.mean_se == pytest.approx(math.sqrt(second - mean**2), rel=1e-9)
    assert outcome.pushed_upper == pytest.approx(upper, rel=1e-12)


# -- the forecast against seeded releases ---------------------------------------------------

RELEASES = 200


@functools.cache
def _lognormal(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"x": rng.lognormal(math.log(1000.0), 1.5, n)})


CASES = [  # method, transform, rows, k, epsilon
    ("ir_dp", "log", 20_000, 50, 0.5),
    ("ir_dp", "asinh", 20_000, 50, 0.5),
    ("mdav_dp", "log", 5_000, 100, 8.0),
]


@pytest.mark.statistical
@pytest.mark.parametrize(("method", "transform", "n", "k", "epsilon"), CASES)
def test_the_forecast_of_a_transformed_column_is_what_the_releases_do(
    method, transform, n, k, epsilon
):
    """Mean error, its spread and the share on the upper bound over 200 seeded releases.

    The measured mean error and upper share are means over 200 releases: the forecast
    must lie within 4 of their Monte Carlo standard errors. The spread is a sample
    standard deviation over 200, whose relative standard error is about
    ``sqrt((kurtosis - 1) / 800)``, 5-7 % here: the forecast must lie within 1.25x.
    """
    table = _lognormal(n)
    upper = 1e5  # 100 times the median
    arguments = {"k": k, "epsilon": epsilon, "bounds": {"x": (0.0, upper)},
                 "transforms": {"x": transform}}  # fmt: skip
    truth = float(np.clip(table["x"], 0.0, upper).mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        found = dpfast.forecast(method, table, **arguments).from_data
        (column,) = found.columns
        errors, on_upper = [], []
        for seed in range(RELEASES):
            released = np.asarray(
                getattr(dpfast, method)(table, seed=seed, **arguments).data["x"], dtype=np.float64
            )
            errors.append(released.mean() - truth)
            on_upper.append(float((released >= upper).mean()))
    assert any("'x'" in note and "#transformed" in note for note in found.notes)
    assert column.before == 0.0  # so every row on the upper bound was pushed there
    assert column.mean == pytest.approx(truth, rel=1e-9)
    error, spread = float(np.mean(errors)), float(np.std(errors, ddof=1))
    assert abs(column.mean_bias - error) <= 4 * spread / math.sqrt(RELEASES)
    assert spread / 1.25 <= column.mean_se <= spread * 1.25
    share, share_se = float(np.mean(on_upper)), float(np.std(on_upper, ddof=1))
    assert share > 0.001  # the noise reaches the upper bound
    assert abs(column.pushed_upper - share) <= 4 * share_se / math.sqrt(RELEASES)


# -- suggested epsilon weights ------------------------------------------------------------


def test_the_weights_equalise_the_relative_errors_by_their_formula():
    columns = [
        ColumnDataForecast("a", relative_error=0.40),
        ColumnDataForecast("b", relative_error=0.05),
        ColumnDataForecast("c", relative_error=0.10),
        ColumnDataForecast("job", tvd=0.3),
    ]
    shares = {"a": 0.25, "b": 0.25, "c": 0.25, "job": 0.25}
    found = suggest_weights(columns, shares)
    assert found is not None
    # s_i' = S e_i s_i / sum e_j s_j with S = 0.75: a 0.5455, b 0.0682, c 0.1364; job 0.25
    expected = {"a": 0.75 * 0.4 / 0.55, "b": 0.75 * 0.05 / 0.55, "c": 0.75 * 0.1 / 0.55,
                "job": 0.25}  # fmt: skip
    smallest = min(expected.values())
    assert found.weights == {c: float(f"{w / smallest:.3g}") for c, w in expected.items()}
    assert found.expected == pytest.approx(0.55 / 3)  # each e_i s_i / s_i'
    assert found.errors == {"a": 0.40, "b": 0.05, "c": 0.10}


def test_no_weights_when_the_columns_lose_alike_or_little():
    alike = [
        ColumnDataForecast("a", relative_error=0.3),
        ColumnDataForecast("b", relative_error=0.2),
    ]
    little = [
        ColumnDataForecast("a", relative_error=0.009),
        ColumnDataForecast("b", relative_error=1e-4),
    ]
    one = [ColumnDataForecast("a", relative_error=0.5), ColumnDataForecast("job", tvd=0.5)]
    shares = {"a": 0.5, "b": 0.5, "job": 0.5}
    assert suggest_weights(alike, shares) is None
    assert suggest_weights(little, shares) is None
    assert suggest_weights(one, shares) is None


@functools.cache
def _mixed(n: int = 5000) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({"income": rng.lognormal(8, 1.5, n), "score": rng.uniform(0, 100, n)})


MIXED = {"k": 25, "epsilon": 4.0, "bounds": {"income": (0.0, 1e6), "score": (0.0, 100.0)}}


def _relative_errors(table: pd.DataFrame, weights: dict[str, float] | None) -> dict[str, float]:
    """Each column's root mean square error of the released mean over 40 seeds, over |truth|."""
    bounds = MIXED["bounds"]
    truth = {c: float(np.clip(table[c], *bounds[c]).mean()) for c in table}  # type: ignore[index]
    errors: dict[str, list[float]] = {c: [] for c in table}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        for seed in range(40):
            data = dpfast.ir_dp(table, seed=seed, epsilon_weights=weights, **MIXED).data
            for c in table:
                errors[c].append(float(np.asarray(data[c], dtype=np.float64).mean()) - truth[c])
    return {c: math.sqrt(float(np.mean(np.square(e)))) / abs(truth[c]) for c, e in errors.items()}


@pytest.mark.statistical
def test_the_suggested_weights_give_the_skewed_column_more_and_lower_the_worst_error():
    table = _mixed()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        found = dpfast.forecast("ir_dp", table, **MIXED).from_data
    weights = found.suggested_weights
    assert weights is not None and weights["income"] > 10 * weights["score"] == 10.0
    assert found.to_dict()["suggested_weights"] == weights
    equal, weighted = _relative_errors(table, None), _relative_errors(table, weights)
    assert max(weighted.values()) < 0.6 * max(equal.values())
    assert equal["income"] == pytest.approx(found.weights.errors["income"], rel=0.25)


def test_the_weights_are_private_and_spelled_for_the_caller(tmp_path: Path, capsys):
    table = _mixed(2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        expected = dpfast.forecast("ir_dp", table, **MIXED)
        public = dpfast.forecast("ir_dp", len(table), **MIXED)
    assert expected.from_data.suggested_weights is not None
    line = [x for x in str(expected).splitlines() if x.startswith("suggested epsilon weights")]
    assert len(line) == 1 and "PRIVATE" in line[0] and "pass epsilon_weights={'income': " in line[0]
    assert "weights" not in str(public) and public.from_data is None
    table.to_parquet(tmp_path / "in.parquet", index=False)
    schema = {"columns": {"income": {"type": "float", "bounds": [0, 1000000]},
                          "score": {"type": "float", "bounds": [0, 100]}}}  # fmt: skip
    (tmp_path / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    argv = ["release", "ir-dp", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "out.parquet"),
            "--schema", str(tmp_path / "schema.json"), "--k", "25", "--epsilon", "4"]  # fmt: skip
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert 'set each column\'s "epsilon_weight" in the schema file: ' in out
    assert "epsilon_weights=" not in out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TransformBiasWarning)
        assert main([*argv, "--max-on-bound", "100"]) == 0
    capsys.readouterr()
    report = (tmp_path / "out.parquet.public-report.json").read_text()
    private = json.loads((tmp_path / "out.parquet.private-report.json").read_text())
    assert "weight" not in report
    assert private["forecast"]["data_forecast"]["suggested_weights"]["income"] > 1


def test_mdav_dp_suggests_weights_only_where_it_splits_epsilon():
    table = _mixed(2000)
    arguments = {"k": 50, "epsilon": 8.0, "bounds": MIXED["bounds"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        split = dpfast.forecast("mdav_dp", table, **arguments).from_data
        whole = dpfast.forecast("mdav_dp", table, calibration="as_published", **arguments).from_data
    assert split.suggested_weights is not None and split.suggested_weights["income"] > 1
    assert whole.suggested_weights is None
