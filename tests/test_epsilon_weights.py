"""Per-column shares of ε: ``epsilon_weights`` (docs/privacy.md#weights).

Each method's ledger against the exact shares and the scales they give (the same plan
for the forecast), the categorical exponential mechanisms' shares, the refusals, and the
schema file's ``"epsilon_weight"`` on the command line. The privacy of a weighted release
is audited on neighbouring tables in ``tests/test_privacy.py`` (designs
``*-weighted`` of ``tests/privacy/designs.py``).
"""

from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast.cli import main
from dpfast.exceptions import DPFastTypeError, DPFastValueError, NoiseDominatesWarning
from dpfast.partitions.grid import Grid
from dpfast.taxonomy import Taxonomy

JOBS = Taxonomy.from_mapping({"*": {"A": ["a1", "a2"], "B": ["b1", "b2", "b3"]}})
BOUNDS = {"x": (0.0, 100.0), "y": (-50.0, 50.0), "z": (0, 10)}


def _own(bounds: dict, *columns: str) -> dict:
    """The bounds of ``columns`` only: a release refuses a key naming no column of its table."""
    return {c: bounds[c] for c in columns}


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.uniform(0, 100, n),
            "y": rng.normal(0, 20, n),
            "z": rng.integers(0, 11, n),
            "job": rng.choice(JOBS.domain, n),
        }
    )


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        return function(*args, **kwargs)


WEIGHTS = {"x": 5, "y": 2.5, "z": 1, "job": 1.5}  # normalised: 1/2, 1/4, 1/10, 3/20


def _shares(epsilon: float) -> dict[str, float]:
    total = sum(Fraction(w) for w in WEIGHTS.values())
    return {c: float(Fraction(epsilon) * Fraction(w) / total) for c, w in WEIGHTS.items()}


def _check_ledger(report, epsilon: float) -> dict[str, float]:
    """The ledger's entries are the shares, and never sum above ε."""
    spent = {entry.columns[0]: entry.epsilon for entry in report.ledger}
    expected = _shares(epsilon)
    assert spent.keys() == expected.keys()
    for column, share in spent.items():
        assert share == pytest.approx(expected[column], rel=1e-15)
        assert Fraction(share) <= Fraction(epsilon) * Fraction(WEIGHTS[column]) / Fraction(10)
    assert sum(Fraction(e) for e in spent.values()) <= Fraction(epsilon)
    assert math.fsum(spent.values()) == pytest.approx(epsilon, rel=1e-15)
    assert report.epsilon == epsilon
    assert report.parameters["epsilon_weights"] == {c: float(w / 10) for c, w in WEIGHTS.items()}
    assert report.parameters["budget_split"].startswith("weighted by epsilon_weights")
    assert "epsilon_weights" in report.guarantee and report.guarantee_level == "proven"
    return spent


def test_ir_dp_gives_each_column_its_weighted_share_and_scale():
    frame, k, epsilon = _frame(), 20, 3.0
    release = _quiet(
        dpfast.ir_dp, frame, k=k, epsilon=epsilon, bounds=BOUNDS,
        taxonomies={"job": JOBS}, epsilon_weights=WEIGHTS, seed=1,
    )  # fmt: skip
    spent = _check_ledger(release.report, epsilon)
    for entry in release.report.ledger[:3]:
        column = entry.columns[0]
        lower, upper = BOUNDS[column]
        grid = Grid.for_column(lower, upper, 400, k)
        sensitivity = Fraction(grid.d_int, k) + 400 // k
        steps = math.ceil(sensitivity / Fraction(spent[column]))
        assert entry.details["scale_in_grid_steps"] == steps
        # b_j = Δ_j / (k ε_j), up to the grid's rounding term
        nominal = (upper - lower) / (k * spent[column])
        assert nominal <= entry.noise_scale <= nominal * (1 + 1e-6)
    categorical = release.report.ledger[3]
    assert categorical.columns == ("job",) and categorical.epsilon == spent["job"]
    # its exponential mechanism draws with the column's share, not ε / m
    assert categorical.details["effective_epsilon"] <= spent["job"]
    assert categorical.details["effective_epsilon"] > 0.9 * spent["job"]


def test_laplace_dp_gives_each_column_its_weighted_share_and_scale():
    weights = {c: WEIGHTS[c] for c in ("x", "y", "z")}
    release = dpfast.laplace_dp(
        _frame()[["x", "y", "z"]], epsilon=8.0, bounds=BOUNDS, epsilon_weights=weights, seed=1
    )
    total = sum(Fraction(w) for w in weights.values())
    for entry in release.report.ledger:
        column = entry.columns[0]
        share = float(Fraction(8.0) * Fraction(weights[column]) / total)
        assert entry.epsilon == pytest.approx(share, rel=1e-15)
        lower, upper = BOUNDS[column]
        grid = Grid.for_column(lower, upper, 400)
        steps = math.ceil(grid.d_int / Fraction(entry.epsilon))
        assert entry.details["scale_in_grid_steps"] == steps
        assert entry.noise_scale == pytest.approx((upper - lower) / share, rel=1e-9)
    assert "their shares by the public epsilon_weights" in release.report.guarantee


def test_mdav_dp_gives_each_column_its_weighted_share_and_scale():
    frame, k, epsilon = _frame(), 40, 30.0
    release = _quiet(
        dpfast.mdav_dp, frame, k=k, epsilon=epsilon, bounds=BOUNDS,
        taxonomies={"job": JOBS}, epsilon_weights=WEIGHTS, seed=1,
    )  # fmt: skip
    spent = {entry.columns[0]: entry.epsilon for entry in release.report.ledger}
    assert spent == pytest.approx(_shares(epsilon), rel=1e-15)
    assert release.report.parameters["epsilon_weights"]["x"] == 0.5
    n_c = 400 // k
    for entry in release.report.ledger[:3]:
        column = entry.columns[0]
        lower, upper = BOUNDS[column]
        # b_j = n_c Δ_j / (k w_j ε), up to the grid's rounding term (docs/design.md#imdav-noise)
        nominal = n_c * (upper - lower) / (k * spent[column])
        assert nominal <= entry.noise_scale <= nominal * (1 + 1e-6)
    assert release.report.ledger[3].details["effective_epsilon"] <= spent["job"]


def test_equal_weights_are_the_default_split():
    frame = _frame()[["x", "y"]]
    bounds = {"x": BOUNDS["x"], "y": BOUNDS["y"]}
    default = dpfast.ir_dp(frame, k=20, epsilon=2.0, bounds=bounds, seed=4)
    equal = dpfast.ir_dp(
        frame, k=20, epsilon=2.0, bounds=bounds, epsilon_weights={"x": 7, "y": 7}, seed=4
    )
    pd.testing.assert_frame_equal(default.data, equal.data)
    assert [e.epsilon for e in default.report.ledger] == [e.epsilon for e in equal.report.ledger]
    assert "epsilon_weights" not in default.report.parameters


def test_a_heavier_weight_lowers_a_columns_noise_and_raises_the_others():
    frame = _frame(2000)[["x", "y"]]
    bounds = {"x": BOUNDS["x"], "y": BOUNDS["y"]}
    equal = dpfast.ir_dp(frame, k=10, epsilon=1.0, bounds=bounds, seed=2).report.ledger
    heavy = dpfast.ir_dp(
        frame, k=10, epsilon=1.0, bounds=bounds, epsilon_weights={"x": 9, "y": 1}, seed=2
    ).report.ledger
    assert heavy[0].noise_scale == pytest.approx(equal[0].noise_scale * 0.5 / 0.9, rel=1e-6)
    assert heavy[1].noise_scale == pytest.approx(equal[1].noise_scale * 0.5 / 0.1, rel=1e-6)


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp", "mdav_dp"])
def test_the_forecast_takes_the_weights_and_gives_the_releases_plan(method):
    frame = _frame()[["x", "y", "z"]]
    weights = {"x": 1, "y": 2, "z": 5}
    arguments = {"epsilon": 4.0, "bounds": BOUNDS, "epsilon_weights": weights, "seed": 1}
    if method != "laplace_dp":
        arguments["k"] = 40
    release = _quiet(getattr(dpfast, method), frame, **arguments)
    forecast = dpfast.forecast(method, frame, **arguments)
    by_column = {entry.columns[0]: entry for entry in release.report.ledger}
    for column in forecast.columns:
        entry = by_column[column.column]
        assert (column.epsilon, column.noise_scale) == (entry.epsilon, entry.noise_scale)
    assert forecast.columns[2].epsilon == pytest.approx(4.0 * 5 / 8, rel=1e-15)


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["ir_dp", "laplace_dp", "mdav_dp"])
@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        ({"x": 1}, DPFastValueError, r"every protected column a weight; missing \['y'\]"),
        ({"x": 1, "y": 1, "w": 1}, DPFastValueError, r"names column\(s\) \['w'\] that are not"),
        ({"x": 1, "y": 0}, DPFastValueError, r"epsilon_weights\['y'\] must be a finite number > 0"),
        ({"x": 1, "y": -2}, DPFastValueError, r"finite number > 0, got -2"),
        ({"x": 1, "y": math.nan}, DPFastValueError, r"finite number > 0, got nan"),
        ({"x": math.inf, "y": 1}, DPFastValueError, r"finite number > 0, got inf"),
        ({"x": True, "y": 1}, DPFastTypeError, r"must be a number > 0, got bool True"),
        ({"x": "2", "y": 1}, DPFastTypeError, r"must be a number > 0, got str '2'"),
        ([1, 1], DPFastTypeError, r"must be a mapping \{column: weight\}, got list"),
    ],
)
def test_bad_weights_are_refused_by_the_release_and_its_forecast(method, weights, error, match):
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": [5.0, 6.0, 7.0, 8.0], "w": 1.0})
    arguments = {
        "epsilon": 1.0,
        "bounds": {"x": (0, 10), "y": (0, 10)},
        "columns": ["x", "y"],
        "seed": 1,
    }
    if method != "laplace_dp":
        arguments["k"] = 2
    with pytest.raises(error, match=match):
        getattr(dpfast, method)(frame, epsilon_weights=weights, **arguments)
    with pytest.raises(error, match=match):
        dpfast.forecast(method, frame, epsilon_weights=weights, **arguments)


def test_mdav_dp_refuses_weights_with_the_papers_calibration():
    with pytest.raises(DPFastValueError, match='calibration="as_published"'):
        dpfast.mdav_dp(
            _frame()[["x", "y"]], k=20, epsilon=1.0, bounds=_own(BOUNDS, "x", "y"), seed=1,
            calibration="as_published", epsilon_weights={"x": 1, "y": 2},
        )  # fmt: skip


def test_a_weight_too_small_to_serve_names_the_column_and_the_usable_budget():
    # x's share serves; y's, 1e-8 of it, needs a total 1e8 times as large
    bounds = _own(BOUNDS, "x", "y")
    arguments = {"bounds": bounds, "seed": 1, "epsilon_weights": {"x": 1, "y": 1e-8}}
    _quiet(dpfast.laplace_dp, _frame()[["x", "y"]], epsilon=100.0, **arguments)
    with pytest.raises(dpfast.EpsilonRangeError, match=r"column 'y'.*use epsilon >= 18\.7$"):
        dpfast.laplace_dp(_frame()[["x", "y"]], epsilon=1.0, **arguments)


# -- the schema file and the command line ----------------------------------------------------


def test_the_schema_gives_the_weights_and_transforms_to_the_release_and_the_dry_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    _frame(300)[["x", "y", "z"]].to_csv(tmp_path / "in.csv", index=False)
    schema = {
        "columns": {
            "x": {"type": "float", "bounds": [0, 100], "epsilon_weight": 3, "transform": "log"},
            "y": {"type": "float", "bounds": [-50, 50], "transform": "asinh"},
            "z": {"type": "integer", "bounds": [0, 10]},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema))
    command = [
        "release", "ir-dp", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.csv"),
        "--k", "30", "--epsilon", "5", "--schema", str(tmp_path / "s.json"), "--seed", "2",
    ]  # fmt: skip
    assert main([*command, "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "transformed column(s) 'x' (log), 'y' (asinh)" in printed
    assert main(command) == 0
    report = json.loads((tmp_path / "out.csv.public-report.json").read_text())
    assert report["parameters"]["epsilon_weights"] == {"x": 0.6, "y": 0.2, "z": 0.2}
    assert [e["epsilon"] for e in report["ledger"]] == pytest.approx([3.0, 1.0, 1.0], rel=1e-15)
    assert report["parameters"]["transforms"]["y"]["function"] == "asinh"
    expected = _quiet(
        dpfast.ir_dp, pd.read_csv(tmp_path / "in.csv"), k=30, epsilon=5.0,
        bounds={"x": (0.0, 100.0), "y": (-50.0, 50.0), "z": (0, 10)},
        epsilon_weights={"x": 3, "y": 1, "z": 1}, transforms={"x": "log", "y": "asinh"}, seed=2,
    )  # fmt: skip
    written = pd.read_csv(tmp_path / "out.csv")
    for column in ("x", "y", "z"):
        np.testing.assert_allclose(
            np.sort(written[column].to_numpy(float)),
            np.sort(expected.data[column].to_numpy(float)),
            rtol=1e-15,
        )
