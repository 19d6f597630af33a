"""The forecast from the data (docs/forecast.md#from-the-data), the share pushed onto a bound.

Its closed forms are checked against sums over every noise value and every combination of
draws (tests/reference/forecast_reference.py); the share pushed onto a bound against what
the release counts; the private forecast against the public report; ``max_on_bound``
against the budget (nothing reserved) and the command line.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import noise
from dpfast._release import choices as choices_module
from dpfast._release.choices import (
    Choices,
    expected_absolute_deviation,
    expected_tvd,
    folded_normal_mean,
    sorted_group_kinds,
)
from dpfast._release.expected import (
    EXACT_ROUNDING_SCALE,
    numeric_outcome,
    push_chances,
    released_values,
    value_moments,
)
from dpfast.budget import BudgetFile
from dpfast.cli import main
from dpfast.dataflow.on_bound import OnBound
from dpfast.exceptions import DPFastValueError, NoiseDominatesWarning
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups
from tests.reference import forecast_reference as reference

# -- the closed forms --------------------------------------------------------------------


@pytest.mark.parametrize("t", [0.0, 0.7, 1.0, 4.0, 33.0])
def test_tail_sums_match_the_distribution(t):
    ys, pmf = reference.noise_pmf(t, int(80 * t) + 10)
    thresholds = np.arange(-12, 13)
    got = noise.discrete_laplace_at_least(t, thresholds)
    expected = np.array([pmf[ys >= y].sum() for y in thresholds])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("t", "d"), [(0.5, 3), (2.0, 10), (7.0, 40), (30.0, 20), (3.0, 1)])
def test_clamped_moments_match_the_distribution(t, d):
    q = np.arange(d + 1)
    shift, variance = noise.clamped_moments(t, d, q)
    for i in q.tolist():
        mean, var, _ = reference.group_moments(i, t, 0.0, float(d), 1.0, d, integer=False)
        assert shift[i] == pytest.approx(mean - i, abs=1e-12)
        assert variance[i] == pytest.approx(var, rel=1e-12, abs=1e-12)


GRIDS = [  # lower, upper, gamma, t (steps)
    (1.0, 2.0, 1 / 64, 20.0),  # a two-value integer domain
    (1.0, 12.0, 1 / 32, 5.0),  # months
    (17.5, 21.3, 1 / 64, 30.0),  # bounds that are not whole numbers
    (0.0, 3.0, 1 / 128, 200.0),  # noise wider than the domain
    (-2.0, 3.0, 1 / 16, 3.0),
    (1.0, 2.0, 1 / 64, 0.0),  # no noise
]


@pytest.mark.parametrize("integer", [True, False])
@pytest.mark.parametrize(("lower", "upper", "gamma", "t"), GRIDS)
def test_a_groups_released_value_matches_the_distribution(lower, upper, gamma, t, integer):
    d = math.ceil((upper - lower) / gamma)
    grid = Grid(lower, upper, gamma, d, 8)
    q = np.arange(0, d + 1, max(1, d // 9))
    mean, variance, exact = value_moments(q, t, grid, integer)
    chances = push_chances(q, t, grid, integer)
    before = released_values(grid, integer, q)
    assert exact
    for i, value in enumerate(q.tolist()):
        got_mean, got_var, on_bound = reference.group_moments(
            value, t, lower, upper, gamma, d, integer
        )
        assert mean[i] == pytest.approx(got_mean, abs=1e-11)
        assert variance[i] == pytest.approx(got_var, abs=1e-11)
        if lower < before[i] < upper:  # a push: the chance of landing on a bound
            assert chances[i] == pytest.approx(on_bound, abs=1e-12)


def test_wide_noise_on_an_integer_column_takes_the_rounding_as_uniform():
    grid = Grid(0.0, 100.0, 1 / 16, 1600, 8)
    t = 4 * 16.0  # 4 units, past EXACT_ROUNDING_SCALE
    assert t * grid.gamma > EXACT_ROUNDING_SCALE
    q = np.arange(0, 1601, 200)
    mean, variance, exact = value_moments(q, t, grid, True)
    assert not exact
    for i, value in enumerate(q.tolist()):
        got_mean, got_var, _ = reference.group_moments(value, t, 0.0, 100.0, 1 / 16, 1600, True)
        assert abs(mean[i] - got_mean) < 0.01  # units: the documented error
        assert math.sqrt(variance[i]) == pytest.approx(math.sqrt(got_var), rel=0.005)


def test_a_column_outcome_by_hand():
    grid = Grid(0.0, 10.0, 1.0, 10, 8)
    sums, sizes = np.array([0, 50, 90, 100]), np.array([10, 10, 10, 10])
    outcome = numeric_outcome(sums, sizes, grid, 0.0, False)
    # no noise: two groups on a bound before the noise, none pushed, no bias
    assert (outcome.pushed, outcome.before) == (0.0, 0.5)
    assert (outcome.mean_bias, outcome.mean_se, outcome.value_se) == (0.0, 0.0, 0.0)
    noisy = numeric_outcome(sums, sizes, grid, 2.0, False)
    _, var5, on5 = reference.group_moments(5, 2.0, 0.0, 10.0, 1.0, 10, False)
    _, var9, on9 = reference.group_moments(9, 2.0, 0.0, 10.0, 1.0, 10, False)
    _, var0, _ = reference.group_moments(0, 2.0, 0.0, 10.0, 1.0, 10, False)
    assert noisy.pushed == pytest.approx((on5 + on9) / 4, rel=1e-12)  # groups 0 and 10 left out
    variances = [var0, var5, var9, var0]  # the group at 10 mirrors the one at 0
    assert noisy.mean_se == pytest.approx(math.sqrt(100 * sum(variances)) / 40, rel=1e-12)
    assert noisy.value_se == pytest.approx(math.sqrt(sum(variances) / 4), rel=1e-12)


# -- E|N - c| and the expected total-variation distance --------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_absolute_deviation_matches_every_combination_of_draws(seed):
    rng = np.random.default_rng(seed)
    groups, m = 6, 3
    chances = rng.dirichlet(np.ones(m), size=groups)
    sizes = np.array([3, 3, 3, 3, 3, 5])
    found = Choices(chances, sizes, np.ones(groups, dtype=np.int64))
    for category in range(m):
        for target in (0.0, 7.0, 10.0, 20.0):
            got, exact = expected_absolute_deviation(found, category, target)
            expected = reference.expected_absolute_deviation(chances, sizes, category, target)
            assert exact and got == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_kinds_of_groups_count_as_their_groups():
    rng = np.random.default_rng(7)
    chances = rng.dirichlet(np.ones(2), size=2)
    one_each = Choices(np.repeat(chances, [3, 2], axis=0), np.full(5, 4), np.ones(5, dtype=int))
    kinds = Choices(chances, np.array([4, 4]), np.array([3, 2]))
    for category in (0, 1):
        got = expected_absolute_deviation(kinds, category, 9.0)
        assert got == pytest.approx(expected_absolute_deviation(one_each, category, 9.0), rel=1e-12)


def test_the_normal_law_is_within_a_group_of_the_exact_figure(monkeypatch):
    rng = np.random.default_rng(2)
    groups = 3000
    p = rng.uniform(0.0, 0.4, groups)
    found = Choices(np.column_stack([p, 1 - p]), np.full(groups, 7), np.ones(groups, dtype=int))
    target = 7 * p.sum() + 40
    exact, whole = expected_absolute_deviation(found, 0, target)
    monkeypatch.setattr(choices_module, "EXACT_POINTS", 10)
    approximate, whole_after = expected_absolute_deviation(found, 0, target)
    assert whole and not whole_after
    assert abs(exact - approximate) <= 7  # Stein's bound: the largest group
    mean, sd = float(found.mean()[0]), math.sqrt(float(found.variance()[0]))
    assert approximate == folded_normal_mean(mean, sd, target)


@pytest.mark.parametrize("seed", range(6))
def test_kinds_of_a_sorted_column_are_its_groups(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 30, rng.integers(1, 6))
    counts[rng.integers(0, counts.shape[0])] += 5
    n, k = int(counts.sum()), int(rng.integers(1, 8))
    remainder = ("middle", "last")[seed % 2]
    sizes = RankGroups(n, k, remainder).sizes if n >= k else np.array([n])
    histograms, kind_sizes, multiplicity = sorted_group_kinds(counts, sizes)
    got: dict[tuple[tuple[int, ...], int], int] = {}
    for h, s, m in zip(
        histograms.tolist(), kind_sizes.tolist(), multiplicity.tolist(), strict=True
    ):
        got[(tuple(h), s)] = got.get((tuple(h), s), 0) + m
    expected: dict[tuple[tuple[int, ...], int], int] = {}
    for key in reference.group_histograms(counts, sizes):
        expected[key] = expected.get(key, 0) + 1
    assert got == expected


def test_expected_tvd_by_hand():
    found = Choices(np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([1, 1]), np.array([1, 1]))
    assert expected_tvd(found, np.array([1, 1])) == (0.25, True)


# -- what a release counts: only what the noise did ------------------------------------------


def _small_domains(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame({"b": rng.integers(1, 3, n), "month": rng.integers(1, 13, n)})


SMALL = {"b": (1, 2), "month": (1, 12)}


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp", "laplace_dp"])
def test_a_domain_of_a_few_values_is_never_pushed_at_a_huge_epsilon(method):
    table = _small_domains()
    k = {"laplace_dp": {}, "ir_dp": {"k": 25}, "mdav_dp": {"k": 25}}[method]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        release = getattr(dpfast, method)(table, epsilon=1e6, bounds=SMALL, seed=3, **k)
    private = release.private
    assert private.pushed_onto_bound == {"b": 0, "month": 0}
    assert private.clamped_output["b"] == private.on_bound_before_noise["b"] == len(table)
    assert private.clamped_output["month"] == private.on_bound_before_noise["month"]


def test_laplace_counts_each_cell_as_its_own_group():
    rng = np.random.default_rng(5)
    table = pd.DataFrame({"v": rng.uniform(-10, 110, 3000), "w": rng.integers(0, 6, 3000)})
    bounds = {"v": (0.0, 100.0), "w": (0, 5)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        release = dpfast.laplace_dp(table, epsilon=2.0, bounds=bounds, seed=9)
    for name, (lower, upper) in bounds.items():
        before = np.clip(table[name].to_numpy(dtype=float), lower, upper)
        if name == "w":
            before = np.rint(before)
        out = release.data[name].to_numpy(dtype=float)
        on, was = (out <= lower) | (out >= upper), (before <= lower) | (before >= upper)
        expected = OnBound(int(on.sum()), int(was.sum()), int((on & ~was).sum()))
        got = release.private
        assert (got.clamped_output[name], got.on_bound_before_noise[name]) == expected.counts()[:2]
        assert got.pushed_onto_bound[name] == expected.pushed > 0


# -- the forecast from the data: no false alarm, private --------------------------------------


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp"])
def test_no_false_alarm_on_a_domain_of_a_few_values(method):
    table = _small_domains()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        got = dpfast.forecast(method, table, k=25, epsilon=1e6, bounds=SMALL)
    assert got.from_data is not None
    assert got.from_data.pushed() == {"b": 0.0, "month": 0.0}
    assert got.warning is None and got.from_data.warning is None
    assert got.suggested_k is not None and got.suggested_k <= 25  # not driven by them
    names = frozenset(SMALL)
    public = dpfast.forecast(
        method, dpfast.PublicTable(len(table), list(SMALL), names), k=25, epsilon=1e6, bounds=SMALL
    )
    assert public.columns[0].on_bound == 1.0  # if spread evenly, every [1, 2] value is on one


def test_the_forecast_from_the_data_says_it_is_private():
    rng = np.random.default_rng(1)
    table = pd.DataFrame({"income": rng.lognormal(9, 1.5, 4000)})
    got = dpfast.forecast("ir_dp", table, k=20, epsilon=1.0, bounds={"income": (0, 1e6)})
    text = str(got)
    public, private = text.split("forecast from the data (PRIVATE")
    assert public.startswith("forecast of ir_dp from public values only")
    assert "not for publication" in private and "chosen from the data" in private
    as_dict = json.loads(json.dumps(got.to_dict()))
    assert as_dict["from_data"]["report"].startswith("PRIVATE")
    (column,) = got.from_data.columns
    assert column.pushed is not None and column.pushed > got.columns[0].on_bound  # skewed
    assert got.warning == got.from_data.warning != got.public_warning


def _watched_budget() -> Any:
    class Watched:
        reserved = 0

        def reserve(self, epsilon: float, **_: Any) -> Any:
            Watched.reserved += 1
            return self

        def commit(self, report: Any) -> None:
            pass

        def abandon(self) -> None:
            pass

    return Watched()


def _skewed(n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame({"income": rng.lognormal(9, 1.5, n), "age": rng.integers(18, 90, n)})


SKEWED = {"income": (0.0, 1e6), "age": (18, 90)}


@pytest.mark.parametrize("method", ["ir_dp", "mdav_dp", "laplace_dp"])
def test_max_on_bound_refuses_before_anything_is_reserved(method, tmp_path: Path):
    k = {"laplace_dp": {}, "ir_dp": {"k": 20}, "mdav_dp": {"k": 40}}[method]
    budget = _watched_budget()
    output = tmp_path / "out.parquet"
    with pytest.raises(DPFastValueError) as raised:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoiseDominatesWarning)
            getattr(dpfast, method)(
                _skewed(), epsilon=1.0, bounds=SKEWED, budget=budget, max_on_bound=0.05,
                output=output, **k,
            )  # fmt: skip
    assert budget.reserved == 0 and not output.exists()
    text = str(raised.value)
    assert "'income'" in text and "max_on_bound" in text and "nothing was reserved" in text
    assert "raise epsilon" in text and "protect fewer columns" in text
    if method != "laplace_dp":  # the forecast from the data, and the k it suggests
        assert "from the data (PRIVATE)" in text and "raise k to" in text
    with pytest.raises(DPFastValueError, match="max_on_bound must be a share"):
        getattr(dpfast, method)(_skewed(), epsilon=1.0, bounds=SKEWED, max_on_bound=5, **k)


def test_a_release_checked_against_the_forecast_from_the_data_keeps_it_private():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        release = dpfast.ir_dp(
            _skewed(), k=200, epsilon=8.0, bounds=SKEWED, seed=2, max_on_bound=0.5
        )
    forecast = release.private.forecast
    assert forecast is not None and forecast["from_data"]
    assert set(forecast["columns"]) == {"income", "age"}
    assert forecast["line"].startswith("pushed onto a bound by the noise, measured (PRIVATE)")
    public = json.dumps(release.report.to_dict())
    for private_word in ("pushed", "from the data", "mean_bias", "forecast_check"):
        assert private_word not in public
    expected = dpfast.forecast("ir_dp", len(_skewed()), k=200, epsilon=8.0, bounds=SKEWED)
    assert release.report.warnings == (
        [] if expected.public_warning is None else [expected.public_warning]
    )
    shown = [str(w.message) for w in seen if issubclass(w.category, NoiseDominatesWarning)]
    assert all("PRIVATE" in text for text in shown)  # the data's, on the terminal only


def test_without_max_on_bound_the_release_reads_no_more_and_compares_with_the_public_forecast():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        release = dpfast.ir_dp(_skewed(), k=200, epsilon=8.0, bounds=SKEWED, seed=2)
    forecast = release.private.forecast
    assert forecast is not None and not forecast["from_data"]
    assert "the public forecast (on a bound if the values were spread evenly" in forecast["line"]


# -- the command line ------------------------------------------------------------------


def _cli(tmp_path: Path) -> list[str]:
    _skewed().to_parquet(tmp_path / "in.parquet", index=False)
    schema = {
        "columns": {
            "income": {"type": "float", "bounds": [0, 1000000]},
            "age": {"type": "integer", "bounds": [18, 90]},
        }
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    BudgetFile.create(tmp_path / "budget.json", 10.0)
    return [
        "release", "ir-dp", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "out.parquet"),
        "--schema", str(tmp_path / "schema.json"), "--budget", str(tmp_path / "budget.json"),
        "--seed", "1",
    ]  # fmt: skip


def test_cli_max_on_bound_refuses_with_its_own_words(tmp_path: Path, capsys):
    argv = _cli(tmp_path)
    budget = (tmp_path / "budget.json").read_bytes()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([*argv, "--k", "20", "--epsilon", "1", "--max-on-bound", "5"]) == 2
    err = capsys.readouterr().err
    assert "--max-on-bound" in err and "'income'" in err and "raise --k to" in err
    assert "max_on_bound" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "budget.json").read_bytes() == budget


def test_cli_release_compares_the_share_pushed_with_the_forecast_from_the_data(tmp_path, capsys):
    argv = _cli(tmp_path)
    assert main([*argv, "--k", "200", "--epsilon", "8", "--max-on-bound", "50"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("pushed onto a bound")]
    assert len(lines) == 1 and "against the forecast from the data" in lines[0]
    assert "income" in lines[0] and "(forecast " in lines[0]
    private = json.loads((tmp_path / "out.parquet.private-report.json").read_text())
    assert private["forecast"]["from_data"] and private["forecast"]["line"] == lines[0]
    public = (tmp_path / "out.parquet.public-report.json").read_text()
    assert "pushed" not in public and "from the data" not in public


# -- every engine the release runs on ----------------------------------------------------


def _mixed(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(8)
    return pd.DataFrame(
        {
            "income": rng.lognormal(9, 1.5, n),
            "age": rng.integers(18, 90, n),
            "job": rng.choice(["x1", "x2", "y1", "y2"], n, p=[0.7, 0.2, 0.06, 0.04]),
        }
    )


JOBS = dpfast.Taxonomy.from_mapping({"*": {"x": ["x1", "x2"], "y": ["y1", "y2"]}})
ENGINE_CASES = {
    "ir_dp": {"k": 30, "epsilon": 2.0, "bounds": SKEWED, "taxonomies": {"job": JOBS}},
    "mdav_dp": {"k": 60, "epsilon": 20.0, "bounds": SKEWED, "taxonomies": {"job": JOBS}},
    "randomized_response": {"column": "job", "domain": JOBS, "epsilon": 1.0},
}


@pytest.mark.parametrize("method", sorted(ENGINE_CASES))
def test_every_engine_gives_the_in_memory_forecast_from_the_data(method, tmp_path: Path):
    dd = pytest.importorskip("dask.dataframe")
    table = _mixed()
    arguments = ENGINE_CASES[method]
    expected = dpfast.forecast(method, table, **arguments).from_data
    table.to_parquet(tmp_path / "in.parquet", index=False)
    output = tmp_path / "out.parquet"
    out_of_core = dpfast.forecast(method, str(tmp_path / "in.parquet"), output=output, **arguments)
    on_dask = dpfast.forecast(
        method, dd.from_pandas(table, npartitions=3), output=output, **arguments
    )
    assert out_of_core.from_data == expected == on_dask.from_data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]  # nothing written


def test_cli_dry_run_out_of_core_reads_the_data_and_writes_nothing(tmp_path: Path, capsys):
    argv = _cli(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    dry = [*argv, "--k", "20", "--epsilon", "1", "--memory-limit", "256MiB", "--dry-run"]
    assert main(dry) == 0
    out = capsys.readouterr().out
    assert "forecast from the data (PRIVATE" in out and "pushed*" in out
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.statistical
@pytest.mark.parametrize("method", sorted(ENGINE_CASES))
def test_the_expected_tvd_is_what_the_releases_measure(method):
    table = _mixed(2000)
    arguments = ENGINE_CASES[method]
    (expected,) = [
        c
        for c in dpfast.forecast(method, table, **arguments).from_data.columns
        if c.tvd is not None
    ]
    categories = ["x1", "x2", "y1", "y2"]
    original = table["job"].value_counts().reindex(categories, fill_value=0).to_numpy() / len(table)
    seeds = 200
    measured = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        for seed in range(seeds):
            release = getattr(dpfast, method)(table, seed=seed, **arguments)
            counts = pd.Series(np.asarray(release.data["job"])).value_counts()
            released = counts.reindex(categories, fill_value=0).to_numpy() / len(table)
            measured.append(0.5 * float(np.abs(released - original).sum()))
    error = float(np.std(measured, ddof=1)) / math.sqrt(seeds)
    assert abs(np.mean(measured) - expected.tvd) <= 4 * error + 1e-9
