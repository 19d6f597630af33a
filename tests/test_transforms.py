"""Public monotone transforms of numeric columns (docs/privacy.md#transforms).

The transformed quantisation and mapping back are checked against the slow reference of
``tests/reference/ir_reference.py`` (kernels and whole releases, with the same draws);
the noise's mean factor against a direct sum; the correction statistically (many
releases of one group average to the noiseless back-mapped value); the refusals, the
uncorrected case (scale 1 or more) and the report; and the utility target of
docs/privacy.md#transforms on a lognormal column.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import noise
from dpfast._kernels import ranking
from dpfast.exceptions import (
    DPFastTypeError,
    DPFastValueError,
    NoiseDominatesWarning,
    TransformBiasWarning,
)
from dpfast.methods.ir_dp._numeric import release_linked
from dpfast.partitions.grid import Grid, forward
from dpfast.partitions.insensitive_mdav import insensitive_mdav_labels
from dpfast.partitions.ranking import RankGroups
from dpfast.taxonomy import Taxonomy
from tests.reference import ir_reference

EMPTY = np.empty(0, dtype=np.int64)
#: A signed domain for asinh and a non-negative one for log, both wide (skewed data).
DOMAINS = {"log": (0.0, 5e4), "asinh": (-2e4, 5e4)}


def _values(transform: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Long-tailed values, some beyond the bounds, some on them, ties."""
    lower, upper = DOMAINS[transform]
    x = rng.lognormal(2.0, 2.0, n)
    if transform == "asinh":
        x = x * np.where(rng.random(n) < 0.3, -1.0, 1.0)
    x[::17] = lower
    x[1::23] = upper
    x[2::29] = upper * 3
    x[3::31] = np.round(x[3::31])  # ties among small whole numbers
    return x


# -- kernels against the reference --------------------------------------------------------


@pytest.mark.parametrize("transform", ["log", "asinh"])
@pytest.mark.parametrize("seed", range(3))
def test_quantise_with_a_transform_matches_the_reference(transform, seed):
    rng = np.random.default_rng(seed)
    values = _values(transform, 3000, rng)
    lower, upper = DOMAINS[transform]
    grid = Grid.for_column(lower, upper, values.shape[0], 5, transform)
    got, clamped = ranking.quantise_column(
        values, grid.lower, grid.upper, grid.gamma, grid.d_int, grid.warp
    )
    expected = [
        ir_reference.quantise(x, lower, upper, grid.gamma, grid.d_int, transform)
        for x in values.tolist()
    ]
    assert got.tolist() == expected
    assert clamped == int(np.sum((values < lower) | (values > upper)))
    # the ranking is the data's: a monotone transform keeps the order
    clipped = np.clip(values, lower, upper)
    assert np.all(np.diff(got[np.argsort(clipped, kind="stable")].astype(np.int64)) >= 0)


@pytest.mark.parametrize("transform", ["log", "asinh"])
@pytest.mark.parametrize(("seed", "round_values"), [(0, False), (1, True), (2, False)])
def test_rank_groups_with_a_transform_match_the_reference(transform, seed, round_values):
    rng = np.random.default_rng(seed)
    values = _values(transform, 701, rng)
    lower, upper = DOMAINS[transform]
    k = int(rng.integers(2, 30))
    grid = Grid.for_column(lower, upper, values.shape[0], k, transform)
    steps = int(0.4 / grid.gamma)  # scale 0.4 on the transformed scale
    grid = grid.corrected(noise.log_mean_exp(steps, grid.gamma))
    draws = noise.discrete_laplace(noise.NoiseSource.from_seed(seed).key("t"), steps, 701 // k)
    out = np.empty(values.shape[0])
    layout = RankGroups(values.shape[0], k)
    clamped = release_linked(values, grid, layout, draws, EMPTY, round_values, out)
    expected = ir_reference.ir_release(
        values.tolist(), lower, upper, grid.gamma, grid.d_int, k, draws.tolist(), round_values,
        layout.remainder, transform=transform, shift=grid.shift,
    )  # fmt: skip
    np.testing.assert_array_equal(out, expected)
    assert clamped == int(np.sum((values < lower) | (values > upper)))
    assert grid.shift > 0 and np.any(out == lower) and np.all((out >= lower) & (out <= upper))


@pytest.mark.parametrize("transform", ["log", "asinh"])
def test_grid_value_in_python_is_the_kernels(transform):
    lower, upper = DOMAINS[transform]
    grid = Grid.for_column(lower, upper, 1000, 10, transform).corrected(0.031)
    ys = np.unique(np.r_[0, 1, 2, grid.d_int - 1, grid.d_int, np.linspace(0, grid.d_int, 101)])
    ys = ys.astype(np.int64)
    for integer in (False, True):
        got = ranking.noisy_group_values(
            ys * 3, *RankGroups(3 * ys.shape[0], 3).scalars, np.zeros_like(ys), grid.d_int,
            grid.lower, grid.upper, grid.gamma, integer, grid.warp,
        )  # fmt: skip
        expected = [grid.value(int(y), integer) for y in ys]
        reference = [
            ir_reference.released(int(y), lower, upper, grid.gamma, grid.d_int, integer,
                                  transform, grid.shift)
            for y in ys
        ]  # fmt: skip
        assert got.tolist() == expected == reference


def test_laplace_dp_with_transforms_matches_the_reference_with_the_same_draws():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {"log": _values("log", 400, rng), "asinh": _values("asinh", 400, rng).round()}
    ).astype({"asinh": np.int64})
    transforms = {"log": "log", "asinh": "asinh"}
    release = dpfast.laplace_dp(frame, epsilon=60.0, bounds=DOMAINS, transforms=transforms, seed=8)
    source = noise.NoiseSource.from_seed(8)
    for name, transform in transforms.items():
        lower, upper = DOMAINS[name]
        entry = next(e for e in release.report.ledger if e.columns == (name,))
        grid = Grid.for_column(lower, upper, 400, transform=transform)
        steps = entry.details["scale_in_grid_steps"]
        assert steps == math.ceil(Fraction(grid.d_int) / Fraction(30.0))
        shift = noise.log_mean_exp(steps, grid.gamma)
        draws = noise.discrete_laplace(source.key("laplace_dp", "cell-noise", name), steps, 400)
        expected = ir_reference.laplace_cells(
            frame[name].astype(float).tolist(), lower, upper, grid.gamma, grid.d_int,
            draws.tolist(), name == "asinh", transform, shift,
        )  # fmt: skip
        np.testing.assert_array_equal(release.data[name].to_numpy(dtype=float), expected)
        assert entry.details["transform"] == transform
        assert entry.noise_scale == steps * grid.gamma
        assert entry.sensitivity == grid.d_int * grid.gamma  # T(U) - T(L), on the grid


def test_mdav_dp_with_a_transform_matches_the_reference_with_the_same_draws():
    rng = np.random.default_rng(5)
    n, k, epsilon = 300, 30, 40.0
    frame = pd.DataFrame({"x": _values("log", n, rng), "y": rng.uniform(0, 10, n)})
    bounds = {"x": DOMAINS["log"], "y": (0.0, 10.0)}
    release = dpfast.mdav_dp(
        frame, k=k, epsilon=epsilon, bounds=bounds, transforms={"x": "log"}, seed=3
    )
    # the clusters are formed on the data's units, as without a transform
    labels = insensitive_mdav_labels(frame.to_numpy(float), k, [(0.0, 5e4), (0.0, 10.0)])
    entry = release.report.ledger[0]
    grid = Grid.for_column(0.0, 5e4, n, k, "log")
    steps = entry.details["scale_in_grid_steps"]
    n_c = n // k
    assert steps == math.ceil((Fraction(n_c * grid.d_int, k) + n_c) / Fraction(epsilon / 2))
    shift = noise.log_mean_exp(steps, grid.gamma)
    draws = noise.discrete_laplace(
        noise.NoiseSource.from_seed(3).key("mdav_dp", "centroid-noise", "x"), steps, n_c
    )
    q = [ir_reference.quantise(v, 0.0, 5e4, grid.gamma, grid.d_int, "log") for v in frame["x"]]
    expected = []
    for g in range(n_c):
        members = np.flatnonzero(labels == g)
        centre = round(Fraction(sum(q[i] for i in members), len(members)))
        y = min(max(centre + int(draws[g]), 0), grid.d_int)
        value = ir_reference.released(y, 0.0, 5e4, grid.gamma, grid.d_int, False, "log", shift)
        expected.extend([value] * len(members))
    assert sorted(release.data["x"].tolist()) == sorted(expected)


# -- the noise's mean factor ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "step"), [(1, 0.3), (3, 0.1), (9, 0.1), (50, 0.005), (1000, 2**-12), (2, 0.45)]
)
def test_log_mean_exp_matches_a_direct_sum(t, step):
    got = noise.log_mean_exp(t, step)
    expected = math.log(ir_reference.dlaplace_mean_exp(t, step, reach=int(400 * t) + 50))
    assert got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("t", "step"), [(10, 0.1), (11, 0.1), (2**22, 2**-22), (1, 1.0)])
def test_log_mean_exp_is_infinite_from_scale_one(t, step):
    assert noise.log_mean_exp(t, step) == math.inf


def test_log_mean_exp_tends_to_the_continuous_laplace():
    b = 0.3
    got = noise.log_mean_exp(2**30, b / 2**30)
    assert got == pytest.approx(-math.log1p(-(b**2)), rel=1e-9)


# -- the correction removes the noise's bias ------------------------------------------------


def _single_group(transform: str, b: float, centre: float):
    """Many releases of one group: its sum, its grid, and a scale of ``b`` (transformed)."""
    lower, upper = DOMAINS[transform]
    grid = Grid.for_column(lower, upper, 2**20, 4, transform)
    steps = round(b / grid.gamma)
    y = round((forward(centre, transform) - grid.origin) / grid.gamma)
    return grid, steps, y


@pytest.mark.statistical
@pytest.mark.parametrize(("transform", "centre"), [("log", 400.0), ("asinh", -20.0)])
def test_the_correction_removes_the_noise_bias_of_one_group(transform, centre):
    grid, steps, y = _single_group(transform, 0.3, centre)
    n_draws, k = 400_000, 4
    draws = noise.discrete_laplace(noise.NoiseSource.from_seed(11).key("bias"), steps, n_draws)
    sums = np.full(n_draws, y * k, dtype=np.int64)
    noiseless = grid.value(y)

    def released(g: Grid) -> np.ndarray:
        return ranking.noisy_group_values(  # type: ignore[no-any-return]
            sums,
            *RankGroups(n_draws * k, k).scalars,
            draws,
            g.d_int,
            g.lower,
            g.upper,
            g.gamma,
            False,
            g.warp,
        )

    corrected = released(grid.corrected(noise.log_mean_exp(steps, grid.gamma)))
    assert np.all((corrected > grid.lower) & (corrected < grid.upper))  # nothing clamped
    error = corrected.std() / math.sqrt(n_draws)
    assert abs(corrected.mean() - noiseless) < 4 * error
    # without the correction the same draws are biased away from 0, far beyond the error
    plain = released(grid)
    assert abs(plain.mean() - noiseless) > 10 * error
    assert abs(plain.mean()) > abs(noiseless)


@pytest.mark.statistical
@pytest.mark.parametrize(("transform", "value"), [("log", 250.0), ("asinh", -75.0)])
def test_laplace_dp_cells_of_one_value_average_to_it(transform, value):
    n = 40_000
    lower, upper = DOMAINS[transform]
    width = Grid.for_column(lower, upper, n, transform=transform).width
    release = dpfast.laplace_dp(
        pd.DataFrame({"x": np.full(n, value)}), epsilon=width / 0.4, bounds={"x": (lower, upper)},
        transforms={"x": transform}, seed=21,
    )  # fmt: skip
    parameters = release.report.parameters["transforms"]["x"]
    assert parameters["corrected"] and parameters["noise_scale"] == pytest.approx(0.4, rel=1e-6)
    out = release.data["x"].to_numpy()
    grid = Grid.for_column(lower, upper, n, transform=transform)
    y = ir_reference.quantise(value, lower, upper, grid.gamma, grid.d_int, transform)
    noiseless = grid.value(y)
    assert abs(out.mean() - noiseless) < 4 * out.std() / math.sqrt(n)


@pytest.mark.statistical
def test_ir_dp_groups_of_one_value_average_to_the_back_mapped_centroid():
    n, k, value = 100_000, 50, 1234.5
    lower, upper = DOMAINS["log"]
    width = Grid.for_column(lower, upper, n, k, "log").width
    release = dpfast.ir_dp(
        pd.DataFrame({"x": np.full(n, value)}), k=k, epsilon=width / (k * 0.5),
        bounds={"x": (lower, upper)}, transforms={"x": "log"}, seed=5, n_threads=1,
    )  # fmt: skip
    out = release.data["x"].to_numpy()
    groups = np.unique(out)  # 2,000 groups of one value, each with its own draw
    assert groups.shape[0] > 1500
    grid = Grid.for_column(lower, upper, n, k, "log")
    noiseless = grid.value(
        ir_reference.quantise(value, lower, upper, grid.gamma, grid.d_int, "log")
    )
    assert abs(out.mean() - noiseless) < 4 * out.std() / math.sqrt(n // k)


# -- the scale at which no correction exists ------------------------------------------------


def test_a_noise_scale_of_one_or_more_is_warned_reported_and_left_uncorrected():
    frame = pd.DataFrame({"x": np.arange(1.0, 201.0), "y": np.arange(200.0)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        release = dpfast.ir_dp(
            frame, k=10, epsilon=1.0, bounds={"x": (0, 1e3), "y": (0, 1e3)},
            transforms={"x": "log", "y": "asinh"}, epsilon_weights={"x": 1, "y": 9}, seed=1,
        )  # fmt: skip
    biased = [str(w.message) for w in caught if w.category is TransformBiasWarning]
    assert len(biased) == 1 and "'x' (noise scale 6.91)" in biased[0] and "'y'" not in biased[0]
    report = release.report
    assert biased[0] in report.warnings
    x, y = report.parameters["transforms"]["x"], report.parameters["transforms"]["y"]
    assert x["corrected"] is False and x["noise_mean_factor"] is None
    assert "NOT corrected" in x["mapping_back"]
    assert y["corrected"] is True and y["noise_mean_factor"] > 1
    # released as the uncorrected inverse: the reference with no shift
    grid = Grid.for_column(0.0, 1e3, 200, 10, "log")
    steps = report.ledger[0].details["scale_in_grid_steps"]
    assert steps * grid.gamma >= 1 and math.isinf(noise.log_mean_exp(steps, grid.gamma))
    source = noise.NoiseSource.from_seed(1)
    draws = noise.discrete_laplace(source.key("ir_dp", "centroid-noise", "x"), steps, 20)
    expected = ir_reference.ir_release(
        frame["x"].tolist(),
        0.0,
        1e3,
        grid.gamma,
        grid.d_int,
        10,
        draws.tolist(),
        False,
        transform="log",
    )
    assert sorted(release.data["x"]) == sorted(expected)


def test_the_forecast_notes_the_uncorrected_column_and_its_transformed_width():
    forecast = dpfast.forecast(
        "ir_dp", 200, k=10, epsilon=0.5, bounds={"x": (0, 1e3)}, transforms={"x": "log"}
    )
    assert any("'x' (noise scale 1.38)" in note for note in forecast.notes)
    assert forecast.columns[0].width == pytest.approx(math.log1p(1e3))


# -- refusals ----------------------------------------------------------------------------------


_TAXONOMY = Taxonomy.from_mapping({"*": ["a", "b"]})


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp", "mdav_dp"])
@pytest.mark.parametrize(
    ("transforms", "error", "match"),
    [
        ({"x": "log"}, DPFastValueError, r'"log" \(log1p\), which needs values >= 0.*-5'),
        ({"x": "sqrt"}, DPFastValueError, r'must be "log" \(log1p.*got \'sqrt\''),
        ({"x": "Log"}, DPFastValueError, r"did you mean 'log'"),
        ({"x": None}, DPFastValueError, r"got None"),
        ({"z": "log"}, DPFastValueError, r"'z', which is not a protected numeric column"),
        (["x"], DPFastTypeError, r"must be a mapping"),
    ],
)
def test_bad_transforms_are_refused_before_anything_is_released(method, transforms, error, match):
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "w": [5.0, 6.0, 7.0, 8.0]})
    arguments = {"epsilon": 1.0, "bounds": {"x": (-5, 10), "w": (0, 10)}, "seed": 1}
    if method != "laplace_dp":
        arguments["k"] = 2
    with pytest.raises(error, match=match):
        getattr(dpfast, method)(frame, transforms=transforms, **arguments)
    with pytest.raises(error, match=match):  # the forecast refuses it as the release does
        dpfast.forecast(method, frame, transforms=transforms, **arguments)


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp"])
def test_a_transform_of_a_categorical_column_is_refused(method):
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "c": ["a", "b", "a", "b"]})
    with pytest.raises(DPFastValueError, match="categorical column 'c'; a transform applies to"):
        getattr(dpfast, method)(
            frame, k=2, epsilon=1.0, bounds={"x": (0, 10)}, taxonomies={"c": _TAXONOMY},
            transforms={"c": "log"}, seed=1,
        )  # fmt: skip


# -- report ------------------------------------------------------------------------------------


def test_the_report_names_each_transform_and_keeps_untransformed_columns_as_they_were():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.lognormal(0, 1.5, 1000), "y": rng.uniform(0, 9, 1000)})
    bounds = {"x": (0, 1e3), "y": (0, 9)}
    plain = dpfast.ir_dp(frame, k=50, epsilon=2.0, bounds=bounds, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        release = dpfast.ir_dp(
            frame, k=50, epsilon=2.0, bounds=bounds, transforms={"x": "log"}, seed=3
        )
    x = release.report.parameters["transforms"]
    assert list(x) == ["x"] and x["x"]["transform"] == "log" and x["x"]["function"] == "log1p"
    assert "post-processing" in x["x"]["mapping_back"]
    assert "transforms" not in plain.report.parameters
    entry = release.report.ledger[0]
    assert entry.details["transform"] == "log" and "log1p scale" in entry.details["units"]
    assert entry.noise_scale == x["x"]["noise_scale"]
    # the untransformed column is released exactly as without any transform
    pd.testing.assert_series_equal(release.data["y"], plain.data["y"])
    assert release.report.ledger[1] == plain.report.ledger[1]
    assert release.report.guarantee == plain.report.guarantee
    assert release.report.guarantee_level == "proven"


def test_an_integer_column_with_a_transform_is_rounded_within_its_bounds():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"n": rng.integers(0, 1000, 500)})
    release = dpfast.ir_dp(
        frame, k=5, epsilon=2.0, bounds={"n": (0, 999)}, transforms={"n": "log"}, seed=2
    )
    out = release.data["n"]
    assert out.dtype == frame["n"].dtype and out.between(0, 999).all()


# -- the target: a lognormal column --------------------------------------------------------


@pytest.mark.statistical
def test_log_keeps_a_lognormal_columns_mean_and_few_values_on_a_bound():
    """sigma = 1.5, n = 100,000, bounds [0, 1000 x median], ε = 1, k = 50, over 7 seeds."""
    rng = np.random.default_rng(2024)
    x = rng.lognormal(0.0, 1.5, 100_000)  # median 1
    frame, bounds = pd.DataFrame({"x": x}), {"x": (0.0, 1000.0)}
    truth = np.clip(x, 0.0, 1000.0).mean()

    def measured(transforms):
        errors, shares = [], []
        for seed in range(7):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NoiseDominatesWarning)
                out = dpfast.ir_dp(
                    frame, k=50, epsilon=1.0, bounds=bounds, transforms=transforms, seed=seed
                ).data["x"]
            errors.append(abs(out.mean() - truth) / truth)
            shares.append(float(((out <= 0.0) | (out >= 1000.0)).mean()))
        return float(np.median(errors)), float(np.mean(shares))

    error, on_bound = measured({"x": "log"})
    assert error < 0.05 and on_bound < 0.10
    plain_error, plain_on_bound = measured(None)  # the same release without the transform
    assert plain_error > 1.0 and plain_on_bound > 0.3
