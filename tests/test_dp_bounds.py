"""Clamping bounds chosen with DP (docs/privacy.md#bounds-chosen-with-dp).

The declaration (:class:`dpfast.DPBounds`, a schema's ``"dp_bounds"``) and its refusals;
the public candidate grid, the counts and the ranks, the qualities and the draws, each
against the slow reference of ``tests/reference/quantile_reference.py`` (the draws bit
for bit, over seeds, and their frequencies against the textbook mechanism); the
sensitivity of the qualities; the releases' ledgers, reports and guarantees; the
forecast; the command line; and the utility on a lognormal column. The privacy test is
the ``laplace_dp-dp-bounds`` design of ``tests/privacy/designs.py``; the engines' equality
is in ``tests/test_engine_conformance.py``.
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
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dpfast
from dpfast import cli, noise
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.partitions.candidates import (
    bound_candidates,
    candidate_edges,
    candidate_ranks,
    count_between,
)
from dpfast.schema import Schema
from tests.reference import exponential_reference as eref
from tests.reference import quantile_reference as ref

KEY = noise.NoiseSource.from_seed(11).key("tests", "dp-bounds")
UPPER = dpfast.DPBounds(outer=(0, 1e6), upper_quantile=0.9, epsilon_share=0.25)


# -- the declaration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"outer": (1.0,)}, DPFastTypeError, "pair"),
        ({"outer": "0,1"}, DPFastTypeError, "pair"),
        ({"outer": ("a", 1)}, DPFastTypeError, "number"),
        ({"outer": (0, math.inf)}, DPFastValueError, "finite"),
        ({"outer": (5, 1)}, DPFastValueError, "swap"),
        ({"outer": (1, 1)}, DPFastValueError, "lower < upper"),
        ({"outer": (-1e308, 1e308)}, DPFastValueError, "wider than float64"),
        ({"upper_quantile": 1.5}, DPFastValueError, r"quantile in \[0, 1\], got 1.5"),
        ({"upper_quantile": -0.01}, DPFastValueError, r"quantile in \[0, 1\]"),
        ({"upper_quantile": True}, DPFastTypeError, "upper_quantile must be a number"),
        ({"lower_quantile": math.nan}, DPFastValueError, "lower_quantile must be a quantile"),
        ({"epsilon_share": 0}, DPFastValueError, r"epsilon_share must be in \(0, 1\)"),
        ({"epsilon_share": 1}, DPFastValueError, r"epsilon_share must be in \(0, 1\)"),
        ({"epsilon_share": "0.1"}, DPFastTypeError, "epsilon_share must be a number"),
        ({"upper_quantile": None}, DPFastValueError, "chooses no bound"),
        ({"lower_quantile": 0.9}, DPFastValueError, "must be below upper_quantile"),
    ],
)
def test_a_bad_declaration_is_refused_saying_how_to_fix_it(arguments, error, match):
    given = {"outer": (0, 100), "upper_quantile": 0.9, "epsilon_share": 0.1, **arguments}
    with pytest.raises(error, match=match):
        dpfast.DPBounds(**given)


def test_a_declaration_normalises_its_values_and_counts_its_draws():
    both = dpfast.DPBounds(
        outer=np.array([0, 10]), lower_quantile=0, upper_quantile=1, epsilon_share=0.5
    )
    assert (both.outer, both.lower_quantile, both.upper_quantile) == ((0.0, 10.0), 0.0, 1.0)
    assert both.draws == 2 and UPPER.draws == 1
    assert both.to_dict() == {"epsilon_share": 0.5, "upper_quantile": 1.0, "lower_quantile": 0.0}


# -- the candidate grid --------------------------------------------------------------------

OUTER_RANGES = [
    ((0.0, 1e6), False),
    ((17, 90), True),
    ((0.5, 100.7), True),
    ((-1e6, 1e7), False),
    ((-3, 3), True),
    ((-5.0, -1.0), False),
    ((1e15, 1e15 + 1e6), False),
    ((0.0, 1e-3), False),
    ((-1e-300, 1e300), False),
]


@pytest.mark.parametrize(("outer", "integer"), OUTER_RANGES)
def test_the_grid_is_the_reference_grid(outer, integer):
    got = bound_candidates(*outer, integer=integer)
    expected = ref.candidates(*outer, integer)
    assert got.tolist() == expected
    assert got[0] == outer[0] and got[-1] == outer[1] and np.all(np.diff(got) > 0)


def test_the_grid_is_within_a_thirty_second_of_every_value_far_enough_from_the_anchor():
    grid = bound_candidates(0.0, 1e7)
    values = np.geomspace(1e7 * 2.0**-31, 1e7, 10_000)
    nearest = grid[np.searchsorted(grid, values)]  # the candidate at or above each value
    assert np.all(nearest / values <= 1 + 1 / 32)
    # the equal-width grid of as many candidates has a step of about 10,000: the bulk of
    # an income column (below 10,000) would sit between its first two candidates
    assert len(grid) <= 1024 and grid[1] < 1e-2


# -- the counts and the ranks ----------------------------------------------------------------


def test_ranks_of_the_candidates_match_the_reference_with_ties_and_values_outside():
    rng = np.random.default_rng(5)
    cands = bound_candidates(0.0, 64.0, integer=True)
    values = np.concatenate(
        [rng.integers(-5, 80, 400).astype(np.float64), cands[rng.integers(0, len(cands), 100)]]
    )
    counts = count_between(values, candidate_edges(cands))
    got = candidate_ranks(counts, cands, len(values))
    expected = ref.ranks(values, cands.tolist())
    assert [a.tolist() for a in got] == [list(e) for e in expected]
    halves = count_between(values[:237], candidate_edges(cands)) + count_between(
        values[237:], candidate_edges(cands)
    )
    assert halves.tolist() == counts.tolist()  # batches add up to the column's counts


def test_edges_hold_each_candidate_and_the_float_above_it_even_where_they_meet():
    cands = np.array([1.0, np.nextafter(1.0, 2.0), 2.0])  # adjacent floats
    edges = candidate_edges(cands)
    assert np.all(np.diff(edges) > 0) and set(cands) <= set(edges)
    values = np.array([1.0, cands[1], 1.5, 2.0, 3.0])
    below, at_most = candidate_ranks(count_between(values, edges), cands, 5)
    assert below.tolist() == [0, 1, 3] and at_most.tolist() == [1, 2, 5]


# -- the qualities and their sensitivity -----------------------------------------------------


@pytest.mark.parametrize("quantile", [0.0, 0.01, 0.5, 0.9, 0.99, 1.0])
def test_qualities_are_the_reference_utility_in_units(quantile):
    rng = np.random.default_rng(8)
    values = np.round(rng.lognormal(2, 1, 301))
    cands = bound_candidates(0, 200, integer=True)
    below, at_most = ref.ranks(values, cands.tolist())
    got = noise.quantile_quality(below, at_most, quantile=quantile, n=301)
    expected = [
        ref.utility(b, a, quantile, 301) * noise.QUANTILE_SENSITIVITY
        for b, a in zip(below, at_most, strict=True)
    ]
    assert got.tolist() == [int(e) for e in expected]
    assert all(e.denominator == 1 for e in expected)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-3, 40), min_size=1, max_size=30),
    where=st.integers(0, 29),
    new=st.integers(-3, 40),
    quantile=st.sampled_from([0.0, 0.1, 0.5, 0.77, 1.0]),
)
def test_one_record_moves_every_quality_by_at_most_the_sensitivity(values, where, new, quantile):
    # bounded DP: one record's value changes, n stays; both ends of every candidate's ranks
    # move by at most one, and so does their distance to the target
    cands = bound_candidates(0, 32, integer=True)
    neighbour = list(values)
    neighbour[where % len(values)] = new
    qualities = [
        noise.quantile_quality(
            *candidate_ranks(
                count_between(np.array(v, float), candidate_edges(cands)), cands, len(v)
            ),
            quantile=quantile,
            n=len(v),
        )
        for v in (values, neighbour)
    ]
    assert np.abs(qualities[0] - qualities[1]).max() <= noise.QUANTILE_SENSITIVITY


def test_qualities_refuse_counts_that_no_column_gives():
    with pytest.raises(DPFastValueError, match=r"below must lie in \[0, n = 3\]"):
        noise.quantile_quality([0, 4], [1, 4], quantile=0.5, n=3)
    with pytest.raises(DPFastValueError, match="below <= at_most"):
        noise.quantile_quality([2], [1], quantile=0.5, n=3)
    with pytest.raises(DPFastTypeError, match="integer"):
        noise.quantile_quality([0.5], [1], quantile=0.5, n=3)
    with pytest.raises(DPFastValueError, match="quantile"):
        noise.quantile_quality([0], [1], quantile=1.5, n=3)
    with pytest.raises(DPFastValueError, match="at least one candidate"):
        empty = np.array([], dtype=np.int64)
        noise.exponential_quantile(KEY, empty, empty, quantile=0.5, n=3, epsilon=1.0)


# -- the draws -------------------------------------------------------------------------------


def _small_column() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    values = np.array([0.3, 0.6, 0.6, 1.2, 2.5, 3.9, 3.9, 3.9, 7.0, 12.0])
    cands = bound_candidates(0.0, 16.0)[24::50]  # 20 of them, from 2**-25 to 16
    below, at_most = ref.ranks(values, [0.0, *cands.tolist()])
    return values, cands, np.array(below[1:]), np.array(at_most[1:])


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_draws_are_the_exact_reference_draws_seed_by_seed(epsilon):
    values, _, below, at_most = _small_column()
    base = noise.exponential_base(epsilon=epsilon, sensitivity=noise.QUANTILE_SENSITIVITY)
    quality = ref.quality(below, at_most, 0.8, len(values))
    cumulative = np.cumsum(eref.weights(quality, base.numerator, base.bits)).tolist()
    for seed in range(40):
        key = noise.NoiseSource.from_seed(seed).key("tests", "quantile")
        got = noise.exponential_quantile(
            key, below, at_most, quantile=0.8, n=len(values), epsilon=epsilon, start=seed % 3
        )
        expected = eref.choose(cumulative, lambda j: eref.stream_word(key, seed % 3, j))  # noqa: B023
        assert got == expected, seed


def test_probabilities_are_the_textbook_mechanism():
    values, cands, below, at_most = _small_column()
    quality = noise.quantile_quality(below, at_most, quantile=0.8, n=len(values))
    got = noise.exponential_probabilities(
        quality, epsilon=2.0, sensitivity=noise.QUANTILE_SENSITIVITY
    )
    expected = ref.probabilities(values, [0.0, *cands.tolist()], 0.8, 2.0)[1:]
    total = sum(expected)
    assert got == pytest.approx([e / total for e in expected], rel=1e-9)


@pytest.mark.statistical
def test_frequencies_of_the_draws_match_the_textbook_mechanism():
    values, cands, below, at_most = _small_column()
    draws = 100_000
    quality = noise.quantile_quality(below, at_most, quantile=0.8, n=len(values))
    # draw i of exponential_quantile is row i here: the stream (KEY, i)
    got = noise.exponential_mechanism(
        KEY, np.tile(quality, (draws, 1)), epsilon=1.0, sensitivity=noise.QUANTILE_SENSITIVITY
    )
    first = [
        noise.exponential_quantile(
            KEY, below, at_most, quantile=0.8, n=len(values), epsilon=1.0, start=i
        )
        for i in range(50)
    ]
    assert got[:50].tolist() == first
    expected = np.array(ref.probabilities(values, [0.0, *cands.tolist()], 0.8, 1.0)[1:])
    expected /= expected.sum()
    observed = np.bincount(got, minlength=len(cands))
    assert stats.chisquare(observed, expected * draws).pvalue > 1e-3
    assert expected.min() * draws > 500 and expected.max() > 20 * expected.min()


# -- the releases ------------------------------------------------------------------------------


def _lognormal(n: int, seed: int, sigma: float = 1.5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"income": np.exp(rng.normal(0.0, sigma, n)) * 1000.0})


def _chooser(key: np.ndarray, epsilon: float) -> Any:
    """``choose(qualities, nonce)``: the sampler (checked against the exact reference above)."""

    def choose(quality: list[int], nonce: int) -> int:
        drawn = noise.exponential_mechanism(
            key,
            np.array([quality]),
            epsilon=epsilon,
            sensitivity=noise.QUANTILE_SENSITIVITY,
            start=nonce,
        )
        return int(drawn[0])

    return choose


@pytest.mark.parametrize(
    ("method", "arguments", "label"),
    [
        (dpfast.ir_dp, {"k": 5}, "ir_dp"),
        (dpfast.mdav_dp, {"k": 5}, "mdav_dp"),
        (dpfast.laplace_dp, {}, "laplace_dp"),
    ],
)
def test_a_release_chooses_the_reference_bounds_and_states_them(method, arguments, label):
    table = _lognormal(300, 1).assign(age=np.random.default_rng(2).integers(18, 90, 300))
    specs = {
        "income": dpfast.DPBounds(outer=(0, 1e6), upper_quantile=0.95, epsilon_share=0.2),
        "age": dpfast.DPBounds(
            outer=(0, 120), lower_quantile=0.05, upper_quantile=0.95, epsilon_share=0.4
        ),
    }
    for seed in (3, 4):
        release = method(table, epsilon=4.0, bounds=specs, seed=seed, **arguments)
        report = release.report
        source = noise.NoiseSource.from_seed(seed)
        for name, integer in (("income", False), ("age", True)):
            spec = specs[name]
            per_draw = 2.0 * spec.epsilon_share / spec.draws  # each column's share of ε is 2
            choose = _chooser(source.key(label, "bounds", name), per_draw)
            values = table[name].to_numpy()
            low, high = expected = ref.bounds(
                values, spec.outer, integer, spec.lower_quantile, spec.upper_quantile, choose
            )
            assert tuple(report.parameters["dp_bounds"][name]["chosen"]) == expected
            assert tuple(report.parameters["bounds"][name]) == expected
            assert low < high and spec.outer[0] <= low and high <= spec.outer[1]
            assert release.data[name].between(low, high).all()
        assert report.guarantee_level == "proven"
        assert "chosen with DP" in report.guarantee


def test_the_ledger_gives_each_column_its_bounds_entry_and_the_rest_to_its_noise():
    table = _lognormal(500, 3).assign(other=np.linspace(0, 50, 500))
    release = dpfast.ir_dp(
        table, k=10, epsilon=1.5, bounds={"income": UPPER, "other": (0, 50)}, seed=1
    )
    ledger = release.report.ledger
    assert [(e.step, e.columns) for e in ledger] == [
        ("clamping bounds (DP quantile)", ("income",)),
        ("centroid noise", ("income",)),
        ("centroid noise", ("other",)),
    ]
    assert [e.epsilon for e in ledger] == pytest.approx([0.75 * 0.25, 0.75 * 0.75, 0.75])
    assert math.fsum(e.epsilon for e in ledger) == pytest.approx(1.5, rel=1e-12)
    assert release.report.epsilon == 1.5
    entry = ledger[0]
    assert entry.sensitivity == 1.0 and entry.sampler == noise.EM_SAMPLER_NAME
    assert entry.noise_scale == pytest.approx(2 / entry.epsilon, rel=1e-12)
    assert entry.details["candidates"] == len(bound_candidates(0, 1e6))
    assert entry.details["effective_epsilon"] <= entry.epsilon
    # the column's noise is calibrated to the chosen bounds and its own part of the share
    low, high = release.report.parameters["bounds"]["income"]
    assert ledger[1].details["nominal_sensitivity"] == pytest.approx((high - low) / 10)


def test_mdav_dp_and_laplace_dp_ledgers_sum_to_epsilon():
    table = _lognormal(400, 4).assign(b=np.linspace(-5, 5, 400))
    both = dpfast.DPBounds(
        outer=(-100, 100), lower_quantile=0.1, upper_quantile=0.9, epsilon_share=0.5
    )
    for method, arguments in ((dpfast.mdav_dp, {"k": 20}), (dpfast.laplace_dp, {})):
        report = method(
            table, epsilon=2.0, bounds={"income": UPPER, "b": both}, seed=2, **arguments
        ).report
        steps = [(e.step.split(" ")[0], e.columns[0], e.epsilon) for e in report.ledger]
        assert steps[:2] == [("clamping", "income", 0.25), ("clamping", "b", 0.5)]
        assert math.fsum(e.epsilon for e in report.ledger) == pytest.approx(2.0, rel=1e-12)
        assert report.ledger[1].details["draws"] == 2


def test_a_seeded_release_is_reproducible_and_the_columns_draw_apart():
    table = pd.DataFrame({"a": np.arange(2000.0), "b": np.arange(2000.0)})
    spec = dpfast.DPBounds(outer=(0, 1e5), upper_quantile=0.5, epsilon_share=0.5)
    runs = [
        dpfast.laplace_dp(table, epsilon=0.02, bounds={"a": spec, "b": spec}, seed=s)
        for s in (7, 7, 8)
    ]
    assert runs[0].report.to_dict() == runs[1].report.to_dict()
    assert runs[0].data.equals(runs[1].data)
    chosen = [tuple(map(tuple, r.report.parameters["bounds"].values())) for r in runs]
    assert chosen[0] != chosen[2]
    # keys (method, "bounds", column): identical columns draw apart at this small epsilon
    assert any(
        r.report.parameters["bounds"]["a"] != r.report.parameters["bounds"]["b"] for r in runs
    )


def test_bounds_chosen_with_dp_are_refused_where_they_cannot_be_taken():
    table = _lognormal(100, 5)
    with pytest.raises(DPFastValueError, match=r'calibration="l1"'):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dpfast.mdav_dp(table, k=10, epsilon=1.0, bounds={"income": UPPER},
                           calibration="as_published")  # fmt: skip
    table = table.assign(y=["a", "b"] * 50)
    with pytest.raises(DPFastValueError, match="taken by ir_dp, mdav_dp and laplace_dp"):
        dpfast.diffgen(
            table, target="y", epsilon=1.0, steps=2, bounds={"income": UPPER}, classes=["a", "b"]
        )


def test_the_input_is_not_modified():
    table = _lognormal(200, 6)
    before = table.copy()
    dpfast.ir_dp(table, k=5, epsilon=1.0, bounds={"income": UPPER}, seed=1)
    pd.testing.assert_frame_equal(table, before)


# -- the forecast ------------------------------------------------------------------------------


def test_the_forecast_reads_no_value_and_says_the_bounds_are_not_known():
    got = dpfast.forecast("ir_dp", 10_000, k=50, epsilon=1.0, bounds={"income": UPPER})
    column = got.columns[0]
    assert column.epsilon == pytest.approx(0.75) and column.width == 1e6  # the outer range
    assert any("chosen with DP" in note and "without spending" in note for note in got.notes)
    public = dpfast.forecast("ir_dp", 10_000, k=50, epsilon=1.0, bounds={"income": (0, 1e6)})
    assert column.on_bound == pytest.approx(
        dpfast.forecast("ir_dp", 10_000, k=50, epsilon=0.75, bounds={"income": (0, 1e6)})
        .columns[0]
        .on_bound
    )
    assert column.noise_scale > public.columns[0].noise_scale
    for method in ("laplace_dp", "mdav_dp"):
        extra = {"k": 50} if method == "mdav_dp" else {}
        notes = dpfast.forecast(method, 10_000, epsilon=1.0, bounds={"x": UPPER}, **extra).notes
        assert any("chosen with DP" in note for note in notes)


@pytest.mark.statistical
@pytest.mark.parametrize(("method", "k"), [("ir_dp", 50), ("mdav_dp", 200)])
def test_the_forecast_from_the_data_reads_at_the_likely_bounds(method, k):
    # over the outer range [0, 1e6] the forecast puts over 1.5x the measured share of this
    # lognormal column (median 20) on a bound; at the bound the DP quantile most likely
    # draws (near the 0.99 quantile, ~650) it forecasts what 20 seeded releases measure,
    # within 2 points or 1.25x (the targets of tests/test_forecast_targets.py)
    rng = np.random.default_rng(8)
    table = pd.DataFrame({"x": rng.lognormal(3.0, 1.5, 10_000)})
    spec = dpfast.DPBounds(outer=(0.0, 1e6), upper_quantile=0.99, epsilon_share=0.25)
    arguments = {"k": k, "epsilon": 1.0 if method == "ir_dp" else 8.0, "bounds": {"x": spec}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpfast.NoiseDominatesWarning)
        got = dpfast.forecast(method, table, **arguments).from_data
        measured = np.mean(
            [
                getattr(dpfast, method)(table, seed=seed, **arguments).private.pushed_onto_bound[
                    "x"
                ]
                / len(table)
                for seed in range(20)
            ]
        )
    (column,) = got.columns
    assert any("most likely to choose" in note for note in got.notes)
    assert (
        abs(column.pushed - measured) <= 0.02 or measured / 1.25 <= column.pushed <= 1.25 * measured
    )
    outer = dict(arguments, bounds={"x": (0.0, 1e6)}, epsilon=arguments["epsilon"] * 0.75)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpfast.NoiseDominatesWarning)
        wide = dpfast.forecast(method, table, **outer).from_data.columns[0].pushed
    assert wide > 1.5 * measured  # what the forecast said over the outer range


# -- the schema file and the command line ----------------------------------------------------


def _schema(dp_bounds: Any, **column: Any) -> dict[str, Any]:
    entry = {"type": "float", "bounds": [0, 1e6], "dp_bounds": dp_bounds, **column}
    return {"columns": {"income": entry}}


def test_a_schema_declares_bounds_chosen_with_dp_within_its_bounds():
    schema = Schema.from_dict(_schema({"upper_quantile": 0.9, "epsilon_share": 0.25}))
    assert schema.dp_bounds() == {"income": UPPER}
    assert schema.bounds() == {"income": (0.0, 1e6)}  # the outer range
    assert Schema.from_dict(schema.to_dict()).dp_bounds() == schema.dp_bounds()


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        (_schema({"upper": 0.9, "epsilon_share": 0.1}), "unknown key .upper."),
        (_schema({"upper_quantile": 0.9}), 'no "epsilon_share"'),
        (_schema({"upper_quantile": 2, "epsilon_share": 0.1}), r"quantile in \[0, 1\]"),
        (_schema({"upper_quantile": 0.9, "epsilon_share": 1}), r"in \(0, 1\)"),
        (_schema([0.9]), "must be an object"),
        (_schema({"upper_quantile": 0.9, "epsilon_share": 0.1}, protect=False), "protected"),
        (_schema({"upper_quantile": 0.9, "epsilon_share": 0.1}, bounds=[3, 3]), "lower < upper"),
        ({"columns": {"c": {"type": "categorical", "dp_bounds": {}}}}, "integer or float"),
    ],
)
def test_a_bad_schema_declaration_is_refused(schema, match):
    with pytest.raises(DPFastValueError, match=match):
        Schema.from_dict(schema, source="s.json")


def _files(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "in.csv"
    _lognormal(2000, 7).to_csv(data, index=False)
    schema = tmp_path / "s.json"
    entry = {"upper_quantile": 0.99, "epsilon_share": 0.2}
    schema.write_text(json.dumps(_schema(entry)), encoding="utf-8")
    return data, schema


def test_the_command_line_releases_with_the_schema_bounds_chosen_with_dp(tmp_path, capsys):
    data, schema = _files(tmp_path)
    out = tmp_path / "out.csv"
    options = ["--schema", str(schema), "--k", "20", "--epsilon", "2", "--seed", "1"]
    assert cli.main(["release", "ir-dp", str(data), "-o", str(out), *options]) == 0
    report = json.loads(Path(f"{out}.public-report.json").read_text(encoding="utf-8"))
    assert report["ledger"][0]["step"] == "clamping bounds (DP quantile)"
    assert (
        report["parameters"]["dp_bounds"]["income"]["chosen"]
        == report["parameters"]["bounds"]["income"]
    )
    assert report["guarantee_level"] == "proven"
    capsys.readouterr()
    dry = tmp_path / "dry.csv"
    assert cli.main(["release", "ir-dp", str(data), "-o", str(dry), *options, "--dry-run"]) == 0
    assert "chosen with DP" in capsys.readouterr().out and not dry.exists()


def test_diffgen_on_the_command_line_refuses_a_schema_with_bounds_chosen_with_dp(tmp_path, capsys):
    data, schema = _files(tmp_path)
    frame = pd.read_csv(data).assign(y=["a", "b"] * 1000)
    frame.to_csv(data, index=False)
    schema.write_text(
        json.dumps({"columns": {**_schema({"upper_quantile": 0.9, "epsilon_share": 0.2})["columns"],
                                "y": {"type": "categorical", "taxonomy": ["a", "b"]}}}),
        encoding="utf-8",
    )  # fmt: skip
    out = tmp_path / "out.csv"
    command = ["release", "diffgen", str(data), "-o", str(out), "--schema", str(schema)]
    assert cli.main([*command, "--target", "y", "--epsilon", "1", "--steps", "2"]) != 0
    assert 'declares "dp_bounds"' in capsys.readouterr().err and not out.exists()


# -- the utility on a skewed column ----------------------------------------------------------


@pytest.mark.statistical
def test_bounds_chosen_with_dp_bring_a_lognormal_mean_far_closer_than_the_outer_range():
    # sigma 1.5, n = 100,000, outer upper 1,000 times the median; epsilon 1, k = 50;
    # the upper bound at the 0.99 quantile for 10 % of epsilon
    median = 1000.0
    spec = dpfast.DPBounds(outer=(0, 1000 * median), upper_quantile=0.99, epsilon_share=0.1)
    errors: dict[str, list[float]] = {"dp": [], "outer": []}
    for seed in range(5):
        table = _lognormal(100_000, 100 + seed)
        truth = table["income"].mean()
        for name, bounds in (("dp", spec), ("outer", (0, 1000 * median))):
            release = dpfast.ir_dp(table, k=50, epsilon=1.0, bounds={"income": bounds}, seed=seed)
            errors[name].append(abs(release.data["income"].mean() / truth - 1))
    dp, outer = np.median(errors["dp"]), np.median(errors["outer"])
    assert dp < 0.15 and outer > 1.0 and dp < outer / 10, errors
