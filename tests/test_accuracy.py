"""Accuracy from public values: the report's intervals and dpfast.accuracy (docs/accuracy.md).

The quantiles are checked against slow references (tests/reference/accuracy_reference.py),
the stated 95 % interval of a released column mean against 1,000 seeded releases, and the
report's section against two tables of the same shape and different values.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dpfast
from dpfast import cli
from dpfast.exceptions import DPFastError, DPFastTypeError, DPFastValueError
from dpfast.intervals import (
    accuracy_section,
    greedy_weights,
    group_sizes,
    laplace_sum_quantile,
    lattice_quantile,
    layout,
    remainder_rule,
)
from dpfast.intervals._models import steps_quantile
from dpfast.partitions.ranking import ranking_labels
from dpfast.taxonomy import Taxonomy
from tests.reference.accuracy_reference import (
    continuous_probability,
    two_sided_quantile,
    weighted_pmf,
)

pytestmark = pytest.mark.filterwarnings("ignore::dpfast.exceptions.NoiseDominatesWarning")

BOUNDS = {"x": (0.0, 1000.0)}


# -- group layout ---------------------------------------------------------------------


@pytest.mark.parametrize(("n", "k"), [(7, 3), (9, 3), (103, 10), (5, 5), (1, 1), (40, 7)])
def test_group_sizes_last_is_the_partition_of_individual_ranking(n: int, k: int) -> None:
    got = [size for groups, size in group_sizes(n, k, "last") for _ in range(groups)]
    labels = ranking_labels(np.random.default_rng(n).normal(size=n), k, "last")
    expected = np.bincount(labels).tolist()
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10_000), st.integers(1, 60))
def test_group_sizes_both_rules_make_the_same_multiset(n: int, k: int) -> None:
    if k > n:
        k = n
    middle = [size for groups, size in group_sizes(n, k, "middle") for _ in range(groups)]
    last = [size for groups, size in group_sizes(n, k, "last") for _ in range(groups)]
    assert sum(middle) == sum(last) == n
    assert len(middle) == len(last) == n // k
    assert middle[(n // k) // 2] == last[-1] == k + n % k
    assert sorted(middle) == sorted(last)
    assert layout(n, k, "middle") == layout(n, k, "last")


def test_remainder_rule_reads_every_spelling_and_refuses_others() -> None:
    assert [remainder_rule(r) for r in ("last group", "last cluster", "last", "middle")] == [
        "last",
        "last",
        "last",
        "middle",
    ]
    with pytest.raises(DPFastValueError, match="remainder rule 'first'"):
        remainder_rule("first")


# -- quantiles against references -----------------------------------------------------


@pytest.mark.parametrize(
    ("draws", "closed_form"),
    [
        (1, lambda h: 1 - math.exp(-h)),
        (2, lambda h: 1 - (h + 2) * math.exp(-h) / 2),
        (3, lambda h: 1 - (8 + 5 * h + h * h) * math.exp(-h) / 8),
    ],
)
def test_laplace_sum_quantile_matches_the_closed_forms(draws: int, closed_form: Any) -> None:
    for level in (0.5, 0.9, 0.95, 0.99):
        got = laplace_sum_quantile(((1, draws),), level)
        assert closed_form(got) == pytest.approx(level, abs=3e-9)
        assert closed_form(got) >= level - 1e-12  # never below the level


@pytest.mark.parametrize("weights", [((1, 1), (2, 1)), ((3, 1), (4, 1)), ((1, 2), (3, 1))])
def test_laplace_sum_quantile_matches_numeric_convolution(weights: Any) -> None:
    got = laplace_sum_quantile(weights, 0.95)
    scales = [float(w) for w, c in weights for _ in range(c)]
    assert continuous_probability(scales, got) == pytest.approx(0.95, abs=1e-7)


@pytest.mark.parametrize("alpha", [0.2, 0.6065, 0.9, 0.97])
@pytest.mark.parametrize("weights", [((1, 1),), ((1, 4),), ((2, 3), (3, 1)), ((5, 2),)])
def test_lattice_quantile_matches_the_reference_convolution(alpha: float, weights: Any) -> None:
    radius = math.ceil(36 / -math.log(alpha))  # beyond it a draw has mass below e^-36
    expected = two_sided_quantile(weighted_pmf(weights, alpha, radius), 0.95)
    assert lattice_quantile(weights, alpha, 0.95) == expected


@pytest.mark.parametrize("weights", [((1, 3),), ((4, 2), (7, 1))])
def test_continuous_bound_holds_the_exact_discrete_quantile(weights: Any) -> None:
    # the coupling: a discrete draw is within one step of a continuous one of the same scale
    steps = 30
    alpha = math.exp(-1 / steps)
    exact = lattice_quantile(weights, alpha, 0.95)
    assert exact is not None
    continuous = steps * laplace_sum_quantile(weights, 0.95)
    rows = sum(w * c for w, c in weights)
    assert continuous - rows <= exact <= continuous + rows


def test_steps_quantile_uses_the_bound_where_the_lattice_is_too_wide() -> None:
    got, computed = steps_quantile(((10, 9), (13, 1)), 2**40, 0.95)
    assert computed.startswith("exact for continuous Laplace draws")
    assert got == pytest.approx(2**40 * laplace_sum_quantile(((10, 9), (13, 1)), 0.95) + 103)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_greedy_weights_give_the_widest_interval_of_any_allocation(data: st.DataObject) -> None:
    sizes = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    taken = [data.draw(st.integers(0, size)) for size in sizes]  # rows taken from each group
    rows = sum(taken)
    if rows == 0:
        return
    allocation = tuple(sorted({(a, taken.count(a)) for a in taken if a}))
    groups: dict[int, int] = {}
    for size in sizes:
        groups[size] = groups.get(size, 0) + 1
    worst = greedy_weights(tuple(groups.items()), rows)
    assert sum(w * c for w, c in worst) == rows
    assert laplace_sum_quantile(allocation, 0.95) <= laplace_sum_quantile(worst, 0.95) * (1 + 1e-9)


# -- coverage: the stated interval against seeded releases ---------------------------


def _coverage(method: str, n: int, k: int, releases: int) -> float:
    rng = np.random.default_rng(n * 100 + k)
    values = rng.uniform(400, 600, n)
    # an Arrow table: the same releases as a pandas frame, seed for seed, in about half
    # the time per release (0.9-1.5 ms against 1.8-3.5 ms, 2-core VM, 2026-12-06)
    table, truth = pa.table({"x": values}), values.mean()
    covered = 0
    for seed in range(releases):
        grouping = {"k": k} if method != "laplace_dp" else {}
        release = getattr(dpfast, method)(table, epsilon=20.0, bounds=BOUNDS, seed=seed, **grouping)
        released = np.asarray(release.data["x"], dtype=float)
        assert 0 < released.min() and released.max() < 1000  # nothing clamped
        stated = release.report.accuracy["columns"]["x"]["intervals"]["mean"]
        assert stated["rounding"] == 0
        covered += abs(released.mean() - truth) <= stated["half_width"]
    return covered / releases


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("n", "k"),
    [(7, 3), (16, 3), (400, 4)],
    ids=["2 rank groups", "5 rank groups", "100 rank groups"],
)
def test_the_95_interval_of_a_released_mean_covers_the_truth(n: int, k: int) -> None:
    assert 0.93 <= _coverage("ir_dp", n, k, 1_000) <= 0.97


@pytest.mark.statistical
@pytest.mark.parametrize(("method", "n", "k"), [("mdav_dp", 9, 3), ("laplace_dp", 3, 1)])
def test_the_interval_covers_for_clusters_and_cells(method: str, n: int, k: int) -> None:
    assert 0.93 <= _coverage(method, n, k, 1_000) <= 0.97


# -- nothing private enters the section ------------------------------------------------


def _table(seed: int, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.lognormal(3, 2, n) if seed else rng.uniform(0, 1000, n),
            "age": rng.integers(17, 91, n),
            "job": rng.choice(["a", "b", "c", "d"], n),
        }
    )


JOBS = Taxonomy.from_mapping({"*": {"T": ["a", "b"], "O": ["c", "d"]}})
RELEASES = {
    "ir_dp": lambda t, s: dpfast.ir_dp(
        t, k=7, epsilon=1.0, bounds={"x": (0, 1000), "age": (17, 90)}, taxonomies={"job": JOBS},
        seed=s,
    ),
    "mdav_dp": lambda t, s: dpfast.mdav_dp(
        t, k=7, epsilon=1.0, bounds={"x": (0, 1000), "age": (17, 90)}, taxonomies={"job": JOBS},
        seed=s,
    ),
    "laplace_dp": lambda t, s: dpfast.laplace_dp(
        t, epsilon=1.0, bounds={"x": (0, 1000), "age": (17, 90)}, columns=["x", "age"], seed=s
    ),
    "diffgen": lambda t, s: dpfast.diffgen(
        t, target="job", epsilon=1.0, steps=0, bounds={"x": (0, 1000), "age": (17, 90)},
        classes=["a", "b", "c", "d"], seed=s,
    ),
    "randomized_response": lambda t, s: dpfast.randomized_response(
        t, column="job", domain=["a", "b", "c", "d"], epsilon=1.0, seed=s
    ),
}  # fmt: skip


@pytest.mark.parametrize("method", sorted(RELEASES))
def test_two_tables_of_the_same_shape_give_the_same_accuracy(method: str) -> None:
    first = RELEASES[method](_table(0), 1).report
    second = RELEASES[method](_table(1), 2).report
    assert first.accuracy is not None and first.accuracy["columns"]
    assert first.accuracy == second.accuracy


@pytest.mark.parametrize("method", sorted(RELEASES))
def test_the_section_is_a_function_of_the_other_public_fields(method: str) -> None:
    public = RELEASES[method](_table(0), 1).report.to_dict()
    stated = public.pop("accuracy")
    assert json.loads(json.dumps(accuracy_section(public))) == stated


def test_the_section_names_the_noise_and_what_is_outside() -> None:
    report = RELEASES["ir_dp"](_table(0), 1).report
    section = report.accuracy
    x = section["columns"]["x"]
    assert x["noise"].startswith("discrete Laplace of scale")
    assert "8 rank groups of 7 rows and 1 of 4" not in x["noise"]  # 60 = 7 * 8 + 4
    assert "7 rank groups of 7 rows and 1 of 11" in x["noise"]
    assert x["distribution"]["draws"] == [{"rows": 7, "draws": 7}, {"rows": 11, "draws": 1}]
    assert section["columns"]["age"]["intervals"]["mean"]["rounding"] == 0.5
    assert section["columns"]["age"]["intervals"]["total"]["rounding"] == 30.0
    assert x["intervals"]["mean"]["rounding"] == 0
    assert x["intervals"]["total"]["half_width"] == pytest.approx(
        60 * x["intervals"]["mean"]["half_width"]
    )
    for statistic in ("mean", "total"):  # rounded up to 8 significant digits
        stated = x["intervals"][statistic]["half_width"]
        assert float(f"{stated:.8g}") == stated
    assert "exponential mechanism" in section["not_covered"]["job"]
    assert any(text.startswith("clamping after the noise") for text in section["outside"])
    assert any(text.startswith("rounding after the noise") for text in section["outside"])


@pytest.mark.parametrize(
    "release",
    [
        lambda t: dpfast.mdav(t, k=5, columns=["x"]),
        lambda t: dpfast.individual_ranking(t[["x"]], k=5),
    ],
)
def test_a_release_without_dp_noise_has_no_section_and_is_refused(release: Any) -> None:
    report = release(_table(0)).report
    assert report.accuracy is None and report.to_dict()["accuracy"] is None
    with pytest.raises(DPFastValueError, match="no differentially private noise"):
        dpfast.accuracy(report, "mean", "x")


# -- dpfast.accuracy ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def ir_report() -> dpfast.Report:
    return RELEASES["ir_dp"](_table(0), 1).report


def test_accuracy_reads_a_report_its_dict_and_its_file(ir_report: Any, tmp_path: Path) -> None:
    path = tmp_path / "out.csv.public-report.json"
    path.write_text(ir_report.to_json(), encoding="utf-8")
    got = {
        dpfast.accuracy(shown, "mean", "x").half_width
        for shown in (ir_report, ir_report.to_dict(), path, str(path))
    }
    assert got == {ir_report.accuracy["columns"]["x"]["intervals"]["mean"]["half_width"]}


def test_accuracy_of_the_whole_column_is_the_reported_one(ir_report: Any) -> None:
    for statistic, key in (("mean", "mean"), ("sum", "total")):
        found = dpfast.accuracy(ir_report, statistic, "age")
        stated = ir_report.accuracy["columns"]["age"]["intervals"][key]
        assert (found.half_width, found.rounding) == (stated["half_width"], stated["rounding"])
        assert found.level == 0.95 and found.rows == 60
        assert any("clamping after the noise" in text for text in found.outside)


def test_a_subset_takes_the_worst_case_over_the_rank_groups(ir_report: Any) -> None:
    found = dpfast.accuracy(ir_report, "mean", "x", rows=14)
    entry = next(e for e in ir_report.ledger if e.columns == ("x",))
    steps, gamma = entry.details["scale_in_grid_steps"], entry.details["grid_step"]
    # 14 rows can fill the group of 11 and 3 rows of a group of 7
    worst = steps * laplace_sum_quantile(((3, 1), (11, 1)), 0.95) + 14
    assert found.half_width == pytest.approx(gamma * worst / 14, rel=1e-7)
    assert found.half_width > dpfast.accuracy(ir_report, "mean", "x").half_width
    assert any("widest over every way 14 rows" in text for text in found.assumptions)
    assert any(text.startswith("microaggregation") for text in found.outside)
    total = dpfast.accuracy(ir_report, "sum", "x", rows=14)
    assert total.half_width == pytest.approx(14 * found.half_width)


def test_a_subset_of_shared_draws_takes_the_proven_continuous_bound(ir_report: Any) -> None:
    # a small scale in grid steps: the whole column's sum is exact on the integers, but the
    # worst case over allocations is proven for continuous draws only
    report = ir_report.to_dict()
    entry = next(e for e in report["ledger"] if e["columns"] == ["x"])
    entry["details"]["scale_in_grid_steps"] = 3
    whole = dpfast.accuracy(report, "mean", "x")
    subset = dpfast.accuracy(report, "mean", "x", rows=14)
    assert whole.computed.startswith("exact: the discrete Laplace draws' convolution")
    assert subset.computed.startswith("exact for continuous Laplace draws")
    gamma = entry["details"]["grid_step"]
    bound = 3 * laplace_sum_quantile(((3, 1), (11, 1)), 0.95) + 14
    grid = 2 * gamma + math.ulp(1000.0)  # quantisation, the groups' rounding, the floats
    assert subset.half_width == pytest.approx(gamma * bound / 14 + grid, rel=1e-7)


def test_the_remainder_rule_does_not_change_the_intervals(ir_report: Any) -> None:
    middle = ir_report.to_dict()
    middle["parameters"]["remainder"] = "middle"
    for rows in (None, 14, 30):
        got = dpfast.accuracy(middle, "mean", "x", rows=rows).half_width
        assert got == dpfast.accuracy(ir_report, "mean", "x", rows=rows).half_width


def test_a_zero_width_domain_is_exact() -> None:
    table = pd.DataFrame({"x": [5.0] * 12, "y": np.linspace(0, 1, 12)})
    release = dpfast.ir_dp(table, k=3, epsilon=1.0, bounds={"x": (5, 5), "y": (0, 1)}, seed=0)
    found = dpfast.accuracy(release.report, "mean", "x")
    assert (found.half_width, float(release.data["x"].mean())) == (0.0, 5.0)


def test_laplace_dp_subsets_average_independent_draws() -> None:
    report = RELEASES["laplace_dp"](_table(0), 1).report
    entry = report.ledger[0]
    found = dpfast.accuracy(report, "mean", "x", rows=10)
    steps, gamma = entry.details["scale_in_grid_steps"], entry.details["grid_step"]
    expected = gamma * (steps * laplace_sum_quantile(((1, 10),), 0.95) + 10) / 10
    assert found.half_width == pytest.approx(expected, rel=1e-7)
    assert not any("widest" in text for text in found.assumptions)


def test_diffgen_counts_are_exact_on_the_integers() -> None:
    release = RELEASES["diffgen"](_table(0), 1)
    report = release.report
    cells = report.ledger[-1].details["cells"]
    alpha = 39750 / 2**16  # the ledger's "p = 39750/2**16" at epsilon / 2 = 0.5
    assert report.ledger[-1].details["parameter"] == "p = 39750/2**16"
    for rows in (1, 3, cells):
        expected = two_sided_quantile(weighted_pmf(((1, rows),), alpha, 80), 0.95)
        assert dpfast.accuracy(report, "count", rows=rows).half_width == expected
    section = report.accuracy["columns"]["count"]["intervals"]
    assert section["cell"]["half_width"] == dpfast.accuracy(report, "count", rows=1).half_width
    with pytest.raises(DPFastValueError, match='statistic="count"'):
        dpfast.accuracy(report, "mean", "count")


@pytest.mark.parametrize("rows", [5, 20, 100, 400])
@pytest.mark.parametrize(("retention", "categories"), [(0.36, 3), (0.9, 2), (0.05, 10), (0.5, 50)])
def test_randomized_response_interval_holds_for_every_count(
    rows: int, retention: float, categories: int
) -> None:
    table = pd.DataFrame({"c": ["a"] * rows})
    domain = [f"v{i}" for i in range(categories - 1)] + ["a"]
    report = dpfast.randomized_response(
        table, column="c", domain=domain, retention=retention, seed=0
    ).report
    found = dpfast.accuracy(report, "count", "c")
    p = report.parameters["retention"]
    low = (1 - p) / categories
    high = p + low
    half = found.half_width * p  # on the released count's scale
    worst = 1.0
    for count in range(rows + 1):  # every true count of the category, exactly
        pmf = np.convolve(
            stats.binom.pmf(np.arange(count + 1), count, high),
            stats.binom.pmf(np.arange(rows - count + 1), rows - count, low),
        )
        mean = count * high + (rows - count) * low
        worst = min(worst, pmf[np.abs(np.arange(pmf.size) - mean) <= half].sum())
    assert worst >= 0.95


def test_accuracy_refuses_what_it_cannot_cover(ir_report: Any, tmp_path: Path) -> None:
    with pytest.raises(DPFastValueError, match="column 'job' has no interval: categorical"):
        dpfast.accuracy(ir_report, "mean", "job")
    with pytest.raises(DPFastValueError, match="not protected by this release's noise"):
        dpfast.accuracy(ir_report, "mean", "nope")
    with pytest.raises(DPFastValueError, match="name the column"):
        dpfast.accuracy(ir_report, "mean")
    with pytest.raises(DPFastValueError, match='ask for statistic="mean" or "sum"'):
        dpfast.accuracy(ir_report, "count", "x")
    with pytest.raises(DPFastValueError, match="statistic must be one of"):
        dpfast.accuracy(ir_report, "median", "x")
    with pytest.raises(DPFastValueError, match=r"rows must be in \[1, 60\]"):
        dpfast.accuracy(ir_report, "mean", "x", rows=61)
    with pytest.raises(DPFastTypeError, match="rows must be an integer"):
        dpfast.accuracy(ir_report, "mean", "x", rows=True)
    with pytest.raises(DPFastValueError, match=r"level must be in \(0, 1\)"):
        dpfast.accuracy(ir_report, "mean", "x", level=95)
    with pytest.raises(DPFastTypeError, match="report must be a public Report"):
        dpfast.accuracy(42, "mean", "x")


def test_accuracy_refuses_other_files_than_the_public_report(
    ir_report: Any, tmp_path: Path
) -> None:
    data = tmp_path / "out.csv"
    data.write_text("x\n1\n", encoding="utf-8")
    (tmp_path / "out.csv.public-report.json").write_text(ir_report.to_json(), encoding="utf-8")
    with pytest.raises(DPFastValueError, match="is the released data, not its report"):
        dpfast.accuracy(data, "mean", "x")
    private = {"report": "PRIVATE: not for publication", "method": "ir_dp"}
    with pytest.raises(DPFastValueError, match="PRIVATE report"):
        dpfast.accuracy(private, "mean", "x")
    with pytest.raises(DPFastValueError, match="cannot read the report"):
        dpfast.accuracy(tmp_path / "missing.json", "mean", "x")
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(DPFastValueError, match="is not a JSON report"):
        dpfast.accuracy(tmp_path / "bad.json", "mean", "x")


def test_accuracy_refuses_a_transformed_column(ir_report: Any) -> None:
    report = ir_report.to_dict()
    for transform in ("log", {"transform": "asinh"}):
        report["parameters"]["transforms"] = {"x": transform}
        with pytest.raises(DPFastValueError, match="no interval: released through the public"):
            dpfast.accuracy(report, "mean", "x")
        assert "x" in accuracy_section(report)["not_covered"]
        assert dpfast.accuracy(report, "mean", "age").half_width > 0  # the others stay


def test_accuracy_refuses_an_edited_report(ir_report: Any) -> None:
    report = copy.deepcopy(ir_report.to_dict())
    report["released_rows"] = 120
    with pytest.raises(DPFastValueError, match="the report is inconsistent"):
        dpfast.accuracy(report, "mean", "x")


def test_every_error_is_a_dpfast_error(ir_report: Any) -> None:
    with pytest.raises(DPFastError):
        dpfast.accuracy(ir_report, "mean", "x", level=float("nan"))


def test_accuracy_result_prints_its_interval(ir_report: Any) -> None:
    text = str(dpfast.accuracy(ir_report, "mean", "age"))
    assert text.startswith("mean of 'age' over 60 rows: ± ")
    assert text.endswith("(+ at most 0.5 from rounding) at 95%")


def test_the_cli_summary_states_the_intervals(tmp_path: Path, capsys: Any) -> None:
    table = _table(0)[["x", "age"]]
    table.to_csv(tmp_path / "in.csv", index=False)
    schema = {
        "columns": {
            "x": {"type": "float", "bounds": [0, 1000]},
            "age": {"type": "integer", "bounds": [17, 90]},
        }
    }
    (tmp_path / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    argv = ["release", "ir-dp", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.csv")]
    code = cli.main(
        [
            *argv,
            "--k",
            "7",
            "--epsilon",
            "1",
            "--schema",
            str(tmp_path / "schema.json"),
            "--seed",
            "1",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("accuracy (95% intervals"))
    report = tmp_path / "out.csv.public-report.json"
    stated = json.loads(report.read_text(encoding="utf-8"))["accuracy"]["columns"]["age"]
    assert f"age: mean ± {stated['intervals']['mean']['half_width']:.3g}, total ± " in line
    assert "rounding to integers may move each value of age by up to 0.5 more" in line
    assert "pushed onto a bound bias these statistics" in line
    assert (
        dpfast.accuracy(report, "mean", "age").half_width
        == stated["intervals"]["mean"]["half_width"]
    )


def test_a_column_with_bounds_chosen_with_dp_has_its_interval() -> None:
    # its ledger has two entries, the bounds' exponential mechanism then the noise: the
    # first is not a categorical column's, and the interval uses the chosen bounds
    rng = np.random.default_rng(5)
    table = pd.DataFrame({"x": rng.lognormal(3.0, 1.5, 3_000), "y": rng.uniform(0, 9, 3_000)})
    chosen = dpfast.DPBounds(outer=(0.0, 1e6), upper_quantile=0.99, epsilon_share=0.25)
    release = dpfast.ir_dp(table, k=30, epsilon=1.0, bounds={"x": chosen, "y": (0.0, 9.0)}, seed=3)
    section = release.report.accuracy
    assert "x" not in (section.get("not_covered") or {})
    stated = section["columns"]["x"]["intervals"]["mean"]
    found = dpfast.accuracy(release.report, "mean", "x")
    assert (found.half_width, found.rounding) == (stated["half_width"], stated["rounding"])
    # the noise scale of the column's second entry, over the chosen (public) bounds
    noise = [e for e in release.report.ledger if e.columns == ("x",)]
    assert [e.step for e in noise] == ["clamping bounds (DP quantile)", "centroid noise"]
