"""The forecast of a release from public values only (docs/forecast.md), and its warning.

The share on a bound is checked against a brute-force sum of the discrete Laplace
distribution and against the package's own sampler; each method's forecast against its
release's ledger (the same plan) and against hand computations; the warning is checked
to come once per release, before any ε is reserved.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import noise
from dpfast.budget import BudgetFile
from dpfast.exceptions import (
    DPFastTypeError,
    DPFastValueError,
    EpsilonRangeError,
    NoiseDominatesWarning,
    PrivacyLeakWarning,
)

# -- the formula ---------------------------------------------------------------------------


def _brute_force(t: float, d: int, low: int | None = 0, high: int | None = 0) -> float:
    """Sum P(q) P(Y) over every grid value q and every noise value y that matters."""
    r = math.exp(-1.0 / t)
    reach = int(60 * t) + d + 2  # r**reach is far below float64's resolution
    ys = np.arange(-reach, reach + 1)
    pmf = (1 - r) / (1 + r) * r ** np.abs(ys)
    total = 0.0
    for q in range(d + 1):
        released = np.clip(q + ys, 0, d)
        on = np.zeros(ys.shape, dtype=bool)
        if low is not None:
            on |= released <= low
        if high is not None:
            on |= released >= d - high
        total += float(pmf[on].sum())
    return total / (d + 1)


@pytest.mark.parametrize(
    ("t", "d"), [(1, 1), (1, 2), (3, 10), (0.5, 7), (10, 3), (50, 100), (7, 1000), (2.5, 40)]
)
def test_share_on_a_bound_matches_a_brute_force_sum(t, d):
    got = noise.on_bound_share(t, d)
    expected = _brute_force(t, d)
    assert got == pytest.approx(expected, rel=1e-10, abs=1e-14)


@pytest.mark.parametrize(
    ("t", "d", "low", "high"),
    [(3, 10, 1, 2), (0.5, 7, 3, 0), (50, 100, 9, 10), (7, 1000, None, 4), (4, 30, 2, None),
     (2, 5, 2, 2), (2, 5, 3, 2), (0.7, 12, None, None)],
)  # fmt: skip
def test_share_with_rounding_onto_the_bounds_matches_a_brute_force_sum(t, d, low, high):
    # an integer column rounds the values within half a unit of a bound onto it
    got = noise.on_bound_share(t, d, low, high)
    assert got == pytest.approx(_brute_force(t, d, low, high), rel=1e-10, abs=1e-14)


def test_share_on_a_bound_edge_cases_and_continuous_limit():
    assert noise.on_bound_share(5, 0) == 1.0  # a zero-width domain: every value on it
    assert noise.on_bound_share(0, 9) == pytest.approx(0.2)  # no noise: the two end points
    assert noise.on_bound_share(2**62 - 1, 2**40) == pytest.approx(1.0)  # all noise
    for ratio in (0.01, 0.1, 0.42, 1.0, 5.0):  # b / W on a fine grid: the Laplace formula
        d = 2**30
        expected = ratio * (1 - math.exp(-1 / ratio))
        assert noise.on_bound_share(ratio * d, d) == pytest.approx(expected, rel=1e-6)
    with pytest.raises(DPFastValueError):
        noise.on_bound_share(-1.0, 3)
    with pytest.raises(DPFastValueError):
        noise.on_bound_share(1.0, -3)


@pytest.mark.parametrize("t", [1, 4, 30, 1000])
def test_standard_deviation_matches_the_distribution(t):
    r = math.exp(-1.0 / t)
    ys = np.arange(-80 * t, 80 * t + 1)
    pmf = (1 - r) / (1 + r) * r ** np.abs(ys)
    expected = math.sqrt(float((pmf * ys.astype(float) ** 2).sum()))
    assert noise.discrete_laplace_sd(t) == pytest.approx(expected, rel=1e-9)
    assert noise.discrete_laplace_sd(0) == 0.0


@pytest.mark.statistical
@pytest.mark.parametrize(("t", "d"), [(3, 10), (50, 100), (1000, 37), (7, 1000), (1, 1)])
def test_share_on_a_bound_matches_the_sampler(t, d):
    n = 200_000
    key = noise.NoiseSource.from_seed(1000 * t + d).key("forecast-test")
    draws = noise.discrete_laplace(key, t, n)
    q = np.random.default_rng(t + d).integers(0, d + 1, n)
    released = np.clip(q + draws, 0, d)
    got = float(np.mean((released == 0) | (released == d)))
    expected = noise.on_bound_share(t, d)
    sigma = math.sqrt(expected * (1 - expected) / n)
    assert abs(got - expected) <= 5 * sigma + 1e-12
    if t > 1:
        assert float(np.std(draws)) == pytest.approx(noise.discrete_laplace_sd(t), rel=0.02)


@pytest.mark.statistical
@pytest.mark.parametrize("epsilon", [3.0, 30.0, 300.0])
def test_forecast_matches_a_release_of_evenly_spread_values(epsilon):
    # values spread evenly over the bounds, as the forecast assumes: the release's private
    # count of values on a bound is the forecast, up to the noise's own variation; the
    # integer column's rounding onto its bounds included (it dominates at epsilon = 300)
    n = 30_000
    table = pd.DataFrame(
        {"v": np.linspace(0.0, 100.0, n), "w": np.round(np.linspace(0, 15, n)).astype(np.int64)}
    )
    bounds = {"v": (0.0, 100.0), "w": (0, 15)}
    expected = dpfast.forecast("laplace_dp", table, epsilon=epsilon, bounds=bounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        release = dpfast.laplace_dp(table, epsilon=epsilon, bounds=bounds, seed=5)
    for column in expected.columns:
        got = release.private.clamped_output[column.column] / n
        sigma = math.sqrt(column.on_bound * (1 - column.on_bound) / n)
        assert abs(got - column.on_bound) <= 5 * sigma, column.column


@pytest.mark.parametrize("transform", [None, "log"])
def test_bound_steps_are_bisected_once_per_grid(monkeypatch, transform):
    from dpfast._release import bound_steps
    from dpfast.partitions.grid import Grid

    def grid():  # 2**45 records: a coarse grid of 135,632 steps, scanned below
        return Grid.for_column(3.0, 250.0, 2**45, transform=transform)

    calls = []
    real = Grid.value

    def counted(self, y, integer=False):
        calls.append(y)
        return real(self, y, integer)

    monkeypatch.setattr(Grid, "value", counted)
    bound_steps.cache_clear()  # an earlier test may have asked for this grid
    low, high = bound_steps(grid(), True)
    asked = len(calls)
    assert asked > 10  # a bisection over the grid
    # an equal grid (a forecast's next k, the release) is not bisected again
    assert bound_steps(grid(), True) == (low, high)
    assert len(calls) == asked
    # a slow scan of every grid value agrees
    released = [real(grid(), y, True) for y in range(grid().d_int + 1)]
    on_low = [y for y, v in enumerate(released) if v <= 3.0]
    on_high = [y for y, v in enumerate(released) if v >= 250.0]
    assert low == (max(on_low) if on_low else None)
    assert high == (grid().d_int - min(on_high) if on_high else None)


def test_integer_columns_count_the_values_rounded_onto_a_bound():
    from dpfast._release import bound_steps
    from dpfast.partitions.grid import Grid

    grid = Grid.for_column(17.0, 90.0, 1000)
    half = int(0.5 / grid.gamma)  # grid steps in half a unit
    # 17 + gamma y rounds to 17 below y = half (17.5 rounds to 18, half to even); 89.5
    # rounds to 90 (even), so the top half unit rounds onto the upper bound
    assert bound_steps(grid, integer=True) == (half - 1, half)
    assert bound_steps(grid, integer=False) == (0, 0)
    assert bound_steps(Grid.for_column(17.5, 90.0, 1000), integer=True)[0] is None
    table = dpfast.PublicTable(1000, ["age"], frozenset({"age"}))
    whole = dpfast.forecast("laplace_dp", table, epsilon=1e6, bounds={"age": (17, 90)})
    floats = dpfast.forecast("laplace_dp", 1000, epsilon=1e6, bounds={"age": (17, 90)})
    assert floats.columns[0].on_bound < 1e-3
    assert whole.columns[0].on_bound == pytest.approx(1 / 73, rel=1e-3)  # half a unit each end


# -- each method's forecast is its release's plan ---------------------------------------------

BOUNDS = {"a": (0.0, 100.0), "b": (-50.0, 50.0), "c": (17.0, 90.0)}


def _table(n: int = 1000) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "a": rng.uniform(0, 100, n),
            "b": rng.uniform(-50, 50, n),
            "c": rng.integers(17, 91, n),
            "job": rng.choice(["x1", "x2", "y1", "y2"], n),
            "cls": rng.choice(["no", "yes"], n),
        }
    )


JOBS = dpfast.Taxonomy.from_mapping({"*": {"x": ["x1", "x2"], "y": ["y1", "y2"]}})


def _quiet(function: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return function(*args, **kwargs)


@pytest.mark.parametrize(
    ("method", "arguments"),
    [
        ("ir_dp", {"k": 20, "epsilon": 1.0, "bounds": BOUNDS, "columns": ["a", "b", "c"]}),
        (
            "ir_dp",
            {
                "k": 7,
                "epsilon": 2.0,
                "bounds": {"a": (0.0, 100.0)},
                "taxonomies": {"job": JOBS},
                "columns": ["a", "job"],
            },
        ),
        ("laplace_dp", {"epsilon": 1.5, "bounds": BOUNDS, "columns": ["a", "b", "c"]}),
        ("mdav_dp", {"k": 50, "epsilon": 1.0, "bounds": BOUNDS, "columns": ["a", "b", "c"]}),
        (
            "mdav_dp",
            {
                "k": 40,
                "epsilon": 1.0,
                "bounds": {"a": (0.0, 100.0)},
                "taxonomies": {"job": JOBS},
                "columns": ["a", "job"],
                "calibration": "as_published",
            },
        ),
        ("randomized_response", {"column": "job", "domain": JOBS, "epsilon": 0.7}),
    ],
)
def test_forecast_scales_are_the_ledgers(method, arguments):
    table = _table()
    expected = _quiet(getattr(dpfast, method), table, seed=1, **arguments)
    got = _quiet(dpfast.forecast, method, table, **arguments)
    ledger = {entry.columns[0]: entry for entry in expected.report.ledger}
    assert [c.column for c in got.columns] == list(ledger)
    for column in got.columns:
        assert column.epsilon == ledger[column.column].epsilon
        assert column.noise_scale == ledger[column.column].noise_scale
    assert got.epsilon == pytest.approx(expected.report.epsilon)
    assert got.n_rows == len(table)
    # the row count, the names and the integer column give the same forecast as the table
    public = dpfast.PublicTable(len(table), list(table.columns), frozenset({"c"}))
    from_public = _quiet(dpfast.forecast, method, public, **arguments)
    assert from_public.from_data is None
    assert (from_public.columns, from_public.notes) == (got.columns, got.notes)
    assert from_public.public_warning == got.public_warning


def test_laplace_hand_case():
    got = dpfast.forecast("laplace_dp", 1000, epsilon=1.0, bounds={"a": (0, 100)})
    (column,) = got.columns
    assert column.noise_scale == 100.0  # m * width / epsilon, the width on the grid exactly
    assert column.noise_sd == pytest.approx(100 * math.sqrt(2), rel=1e-9)
    assert column.sd_share == pytest.approx(math.sqrt(2), rel=1e-9)
    assert column.on_bound == pytest.approx(1 - math.exp(-1), rel=1e-9)
    assert column.width == 100.0
    assert got.k is None and got.suggested_k is None and got.k_advice is None
    two = dpfast.forecast("laplace_dp", 1000, epsilon=1.0, bounds={"a": (0, 100), "b": (0, 1)})
    assert [c.noise_scale for c in two.columns] == [200.0, 2.0]  # each gets epsilon / 2
    assert two.columns[0].on_bound == pytest.approx(2 * (1 - math.exp(-0.5)), rel=1e-9)


def test_ir_dp_hand_case_and_smallest_k():
    got = dpfast.forecast("ir_dp", 1000, k=50, epsilon=1.0, bounds={"a": (0, 100)})
    (column,) = got.columns
    # scale m * width / (k epsilon) = 2, plus the grid's rounding term: 20 steps of 2**-33
    assert column.noise_scale == 2.0 + 20 * 2.0**-33
    assert column.on_bound == pytest.approx(0.02, rel=1e-6)
    assert got.warning is None
    # the share is about 1/k here: k = 10 is the first under 10 %
    assert got.suggested_k == 10
    assert "10 (100 rank groups" in got.k_advice
    bounds = {"a": (0, 100)}
    at = {k: dpfast.forecast("ir_dp", 1000, k=k, epsilon=1.0, bounds=bounds) for k in (9, 10)}
    assert at[9].columns[0].on_bound >= 0.1 > at[10].columns[0].on_bound
    assert at[9].suggested_k == 10 and at[9].warning is not None


def test_mdav_dp_smallest_k_is_the_edge():
    arguments = {"epsilon": 1.0, "bounds": {"a": (0, 100), "b": (0, 10)}}
    got = dpfast.forecast("mdav_dp", 1000, k=50, **arguments)
    # n_c = 20 centroids each moving by width / k, epsilon / 2 each: scale 0.8 width
    assert got.columns[0].noise_scale == pytest.approx(80.0, rel=1e-6)
    assert got.columns[0].on_bound == pytest.approx(0.8 * (1 - math.exp(-1.25)), rel=1e-4)
    k = got.suggested_k
    assert k is not None
    under = dpfast.forecast("mdav_dp", 1000, k=k, **arguments)
    above = dpfast.forecast("mdav_dp", 1000, k=k - 1, **arguments)
    assert max(c.on_bound for c in under.columns) < 0.1
    assert max(c.on_bound for c in above.columns) >= 0.1
    assert "cluster" in got.k_advice


def test_no_k_is_enough_for_too_many_columns():
    bounds = {f"c{i}": (0, 1) for i in range(8)}
    got = dpfast.forecast("ir_dp", 30, k=5, epsilon=1.0, bounds=bounds)
    assert got.suggested_k is None
    assert got.k_advice.startswith("no k brings every column under 10%")
    assert "k=30 (one rank group of all 30 rows)" in got.k_advice
    assert "8 protected column(s) share epsilon = 1 (0.125 each)" in got.k_advice
    assert "No k is enough" in got.warning
    # k = n already leaves a quarter of the values on a bound
    at_n = dpfast.forecast("ir_dp", 30, k=30, epsilon=1.0, bounds=bounds)
    assert at_n.columns[0].on_bound >= 0.1


def test_randomized_response_forecast_is_exact():
    got = dpfast.forecast("randomized_response", 500, column="job", domain=JOBS, retention=0.5)
    (column,) = got.columns
    assert column.on_bound is None and column.noise_sd is None
    assert column.noise_scale == pytest.approx(0.5)  # the probability of a draw
    assert "37.5% of the released values are expected to differ" in "\n".join(got.notes)
    assert "no share on a bound applies" in "\n".join(got.notes)
    assert got.warning is None


def test_diffgen_forecast_does_without_the_row_count():
    arguments = {
        "target": "cls",
        "epsilon": 1.0,
        "steps": 3,
        "bounds": {"a": (0.0, 100.0)},
        "taxonomies": {"job": JOBS},
        "classes": ["no", "yes"],
    }
    got = dpfast.forecast("diffgen", _table(), **arguments)
    assert got.n_rows is None
    assert dpfast.forecast("diffgen", _table(50), **arguments) == got
    release = dpfast.diffgen(_table(), seed=2, **arguments)
    assert release.report.to_dict()["steps_done"] == 3  # no early stop: the counts get ε / 2
    counts = next(e for e in release.report.ledger if e.step == "noisy counts")
    (column,) = got.columns
    assert column.column == "count"
    assert (column.epsilon, column.noise_scale) == (counts.epsilon, counts.noise_scale)
    text = "\n".join(got.notes)
    assert "unbounded DP keeps the row count private" in text
    assert "epsilon' = 0.07143 for each of the 7" in text


@pytest.mark.parametrize("method", ["individual_ranking", "mdav", "k_noise", "k_pram"])
def test_methods_without_epsilon_say_what_is_not_forecast(method):
    got = dpfast.forecast(method, _table(), k=5, columns=["a", "b"])
    assert got.epsilon is None and got.columns == () and got.warning is None
    text = str(got)
    assert "NOT differential privacy: no epsilon" in text
    assert "forecast: " in got.notes[-1] and "on the data" in got.notes[-1]


# -- what the forecast reads, and what it refuses ------------------------------------------------


def test_forecast_refuses_what_it_cannot_read_publicly():
    with pytest.raises(DPFastValueError, match="public values only"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            dpfast.forecast("laplace_dp", _table(), epsilon=1.0, bounds="data", columns=["a"])
    with pytest.raises(DPFastValueError, match="method must be one of"):
        dpfast.forecast("nope", 10, epsilon=1.0)
    with pytest.raises(DPFastTypeError, match="unexpected keyword argument 'kk'"):
        dpfast.forecast("ir_dp", 10, k=2, kk=2, epsilon=1.0, bounds={"a": (0, 1)})
    with pytest.raises(DPFastTypeError, match="missing a required argument: 'k'"):
        dpfast.forecast(dpfast.ir_dp, 10, epsilon=1.0, bounds={"a": (0, 1)})
    with pytest.raises(DPFastValueError, match=r"k must be in \[1, 10\]"):
        dpfast.forecast("ir_dp", 10, k=11, epsilon=1.0, bounds={"a": (0, 1)})
    with pytest.raises(EpsilonRangeError, match="epsilon must be a finite number > 0"):
        dpfast.forecast("mdav_dp", 10, k=2, epsilon=-1.0, bounds={"a": (0, 1)})


def test_forecast_spends_nothing_and_writes_nothing(tmp_path: Path):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    before = sorted(p.name for p in tmp_path.iterdir())
    budget_bytes = budget.real_path.read_bytes()
    got = dpfast.forecast(
        "ir_dp",
        _table(),
        k=10,
        epsilon=1.0,
        bounds=BOUNDS,
        columns=["a", "b", "c"],
        budget=budget,
        output=tmp_path / "out.parquet",
    )
    assert got.columns
    assert budget.real_path.read_bytes() == budget_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_forecast_as_text_and_as_dict():
    got = dpfast.forecast("ir_dp", 200, k=4, epsilon=1.0, bounds=BOUNDS)
    text = str(got)
    assert text.startswith("forecast of ir_dp from public values only: nothing spent")
    assert "200 rows, k=4, epsilon=1.0" in text
    for name in BOUNDS:
        assert name in text
    assert "* on a bound: the share of released values on a bound if the values were " in text
    assert "(the bounds, epsilon, k and the row count)" in text
    assert text.splitlines()[-1] == f"warning: {got.warning}"
    as_dict = json.loads(json.dumps(got.to_dict()))
    assert as_dict["suggested_k"] == got.suggested_k
    assert as_dict["warning"] == got.warning
    assert as_dict["columns"][0]["sd_share"] == pytest.approx(got.columns[0].sd_share)


# -- the warning: one per release, before any ε is reserved ------------------------------------


class _WatchedBudget:
    """A budget that records, when it is asked to reserve, the warnings seen so far."""

    def __init__(self, seen: list[warnings.WarningMessage]) -> None:
        self.seen = seen
        self.at_reserve: int | None = None

    def reserve(self, epsilon: float, *, method: str, output: Any, columns: Any) -> Any:
        self.at_reserve = sum(issubclass(w.category, NoiseDominatesWarning) for w in self.seen)
        return self

    def commit(self, report: Any) -> None:
        pass

    def abandon(self) -> None:
        pass


@pytest.mark.parametrize(
    ("method", "arguments"),
    [
        ("ir_dp", {"k": 4}),
        ("laplace_dp", {}),
        ("mdav_dp", {"k": 20}),
    ],
)
def test_one_warning_naming_every_column_before_any_reservation(method, arguments):
    table = _table(200)[["a", "b", "c"]]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        budget = _WatchedBudget(seen)
        release = getattr(dpfast, method)(
            table, epsilon=1.0, bounds=BOUNDS, seed=1, budget=budget, **arguments
        )
    noisy = [w for w in seen if issubclass(w.category, NoiseDominatesWarning)]
    assert len(noisy) == 1
    assert budget.at_reserve == 1  # warned before the budget was asked for any ε
    message = str(noisy[0].message)
    assert all(f"'{name}'" in message for name in BOUNDS)
    assert "\n" not in message
    assert noisy[0].filename == __file__  # points at the caller's line
    assert release.report.warnings == [message]
    expected = dpfast.forecast(method, table, epsilon=1.0, bounds=BOUNDS, **arguments)
    assert message == expected.public_warning  # the release read no more than public values


def test_the_warning_depends_on_public_values_only():
    table = _table(200)[["a", "b"]]
    bounds = {"a": BOUNDS["a"], "b": BOUNDS["b"]}
    texts = []
    for data in (table, table * 0.0, (table.iloc[::-1] + 1.0).reset_index(drop=True)):
        with pytest.warns(NoiseDominatesWarning) as caught:
            dpfast.ir_dp(data, k=4, epsilon=1.0, bounds=bounds, seed=1)
        texts.append(str(caught[0].message))
    assert len(set(texts)) == 1


def test_no_warning_when_every_column_is_under_the_threshold():
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        release = dpfast.ir_dp(
            _table()[["a"]], k=50, epsilon=1.0, bounds={"a": BOUNDS["a"]}, seed=1
        )
        rr = dpfast.randomized_response(_table(), column="job", domain=JOBS, epsilon=0.1, seed=1)
    assert release.report.warnings == [] and rr.report.warnings == []


@pytest.mark.parametrize("method", ["laplace_dp", "ir_dp", "diffgen"])
def test_a_forecast_of_a_public_table_refuses_bounds_from_the_data(method):
    table = dpfast.PublicTable(1000, ["age", "hours", "salary"], frozenset({"age"}))
    diffgen = {"target": "salary", "classes": ["a", "b"], "steps": 2}
    options = {"ir_dp": {"k": 10}, "diffgen": diffgen}
    with (
        pytest.raises(DPFastValueError, match="a forecast reads public values only") as refused,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # bounds="data" also warns that it is not private
        dpfast.forecast(method, table, epsilon=1.0, bounds="data", **options.get(method, {}))
    assert "public bounds" in str(refused.value)  # and how to fix it
    if method != "diffgen":  # DiffGen's forecast refuses bounds="data" before any column
        assert re.search(r"column '(age|hours)''s bounds", str(refused.value))  # which one
