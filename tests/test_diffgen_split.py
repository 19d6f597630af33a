"""DiffGen's split values on each numeric column's fixed grid (docs/design.md#diffgen-split).

The candidates of an interval are the grid points ``k * step`` strictly inside it, a set
that depends on the public bounds only; the data values cut them into runs weighed by
their integer sizes, and an exact uniform integer picks the point in the chosen run.
"""

import itertools
import math
from fractions import Fraction
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpfast import noise
from dpfast.engines import open_engine
from dpfast.methods.diffgen import diffgen
from dpfast.methods.diffgen import release as release_module
from dpfast.methods.diffgen._columns import NumericColumn, prepare, split_grid_step
from dpfast.methods.diffgen._tree import Builder, Trace, split_runs
from tests.reference import diffgen_reference as ref


def _column(step: float) -> NumericColumn:
    empty = np.zeros(0)
    return NumericColumn("x", False, 0.0, 0.0, empty, 0, step)


def _prepared(table, bounds, classes=("a", "b")):
    return prepare(open_engine(table, method="diffgen"), "label", None, bounds, list(classes))


def _root_split(table, bounds, *, epsilon_prime=0.5, seed=0):
    """The trace of the root split of the table's single numeric column, and the builder."""
    trace = Trace()
    builder = Builder(
        _prepared(table, bounds),
        epsilon_prime=epsilon_prime,
        utility="max",
        delta_u=1.0,
        source=noise.NoiseSource.from_seed(seed),
        trace=trace,
    )
    builder.roots(lambda *args: None)
    (split,) = trace.splits
    return split, builder


def _max_utility(xs, labels, split) -> int:
    """Max utility (docs/design.md#diffgen-scores) of the split ``x < split``, in Fractions."""
    children = [{"a": 0, "b": 0}, {"a": 0, "b": 0}]
    for x, label in zip(xs, labels, strict=True):
        children[0 if Fraction(x) < split else 1][label] += 1
    return sum(max(c.values()) for c in children)


def _run_pieces(split, step):
    """``[(first index, size, probability of each point)]`` of the runs of a traced split."""
    starts = [Fraction(low) / Fraction(step) for low in split["lows"]]
    assert all(s.denominator == 1 for s in starts)  # every run starts on the grid
    return [
        (int(s), int(size), float(p) / int(size))
        for s, size, p in zip(starts, split["sizes"], split["probabilities"], strict=True)
    ]


# ---------------------------------------------------------------- the grid


def test_split_grid_step_by_hand():
    assert split_grid_step(0.0, 100.0) == 2.0**-33  # 100 < 2**7: 2**(7 - 40)
    assert split_grid_step(0.3, 0.7) == 2.0**-41  # width 0.4 < 2**-1
    assert split_grid_step(0.0, 1.0) == 2.0**-39  # 1 / 2**-40 is not below 2**40
    assert split_grid_step(-5.0, 5.0) == 2.0**-36
    # far from 0: the grid index must stay below 2**52 (1e6 + 1 < 2**20)
    assert split_grid_step(1e6, 1e6 + 1) == 2.0**-32
    assert split_grid_step(1.0, 1.0 + 40 * 2**-52) == 2.0**-51


@settings(max_examples=200, deadline=None)
@given(
    lower=st.floats(-1e15, 1e15, allow_nan=False),
    width=st.floats(1e-200, 1e15, allow_nan=False),
)
def test_split_grid_step_is_the_finest_within_both_limits(lower, width):
    upper = lower + width
    if upper == lower:
        return
    got = split_grid_step(lower, upper)
    assert Fraction(got) == ref.grid_step(lower, upper)  # exact rational reference
    assert math.frexp(got)[0] == 0.5  # a power of two
    # every grid point of the domain is a float64 and k*step is exact
    assert max(abs(lower), abs(upper)) / got < 2**52


def test_grid_index_against_fractions():
    rng = np.random.default_rng(5)
    for step in (2.0**-40, 2.0**-1074, 1.0, 2.0**10, 2.0**-3):
        k = rng.integers(-(2**50), 2**50, 300).astype(np.float64)
        values = np.concatenate(
            (
                k * step,  # on the grid
                (k + rng.uniform(0.0, 1.0, 300)) * step,  # between grid points (or on)
                [0.0, -0.0, 5e-324, -5e-324, 2.2e-308, -2.2e-308, step, -step],
            )
        )
        values = values[np.abs(values) < 2**51 * step]
        column = _column(step)
        got_left = column.grid_index(values, strict=True)
        got_at = column.grid_index(values, strict=False)
        g = Fraction(step)
        expected_left = [ref.first_index_left(float(x), g) for x in values]
        expected_at = [math.ceil(Fraction(float(x)) / g) for x in values]
        assert got_left.tolist() == expected_left
        assert got_at.tolist() == expected_at


def test_split_range_is_the_grid_points_strictly_inside():
    column = _column(0.25)
    assert column.split_range(0.0, 1.0) == (1, 4)  # 0.25, 0.5, 0.75
    assert column.split_range(0.1, 0.9) == (1, 4)  # ends off the grid
    assert column.split_range(0.25, 0.5) == (2, 2)  # nothing strictly inside
    assert column.split_range(0.3, 0.4) == (2, 2)
    assert column.split_range(-0.6, -0.2) == (-2, 0)  # -0.5, -0.25
    assert column.split_range(0.5, 0.5) == (3, 3)


@pytest.mark.parametrize("seed", range(30))
def test_split_runs_against_enumeration(seed):
    rng = np.random.default_rng(seed)
    step = 2.0**-3
    g = Fraction(step)
    lo = float(rng.integers(-20, 20)) * step + (float(rng.uniform(0, step)) if seed % 2 else 0.0)
    hi = lo + float(rng.integers(0, 40)) * step * float(rng.uniform(0.5, 1.5))
    n = int(rng.integers(0, 12))
    xs = np.concatenate(
        (
            rng.uniform(lo, hi, n),
            np.round(rng.uniform(lo, hi, n) / step) * step,  # on the grid
            [lo, hi][: seed % 3],
        )
    )
    points = np.unique(np.clip(xs, lo, hi))
    column = _column(step)
    first, stop = column.split_range(lo, hi)
    starts, sizes = split_runs(first, stop, column.grid_index(points, strict=True))
    # slow: every candidate lo < k*step < hi and how many distinct values it sends left
    candidates = [
        k for k in range(math.floor(lo / step) - 2, math.ceil(hi / step) + 3) if lo < k * g < hi
    ]
    assert list(range(first, stop)) == candidates
    left = {k: sum(Fraction(float(x)) < k * g for x in points) for k in candidates}
    assert sizes.shape == (points.shape[0] + 1,) and sizes.sum() == len(candidates)
    for i, (start, size) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
        run = range(start, start + size)
        assert [left[k] for k in run] == [i] * size
        assert size == sum(1 for k in candidates if left[k] == i)


# ---------------------------------------------------------------- exact probabilities


def _tiny_domain_table(n, seed):
    """Values 1 + m * 2**-52 on a domain whose grid (step 2**-51) has 19 inner points."""
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 41, n)
    xs = 1.0 + m * 2.0**-52
    labels = np.where(m + rng.integers(-6, 7, n) < 20, "a", "b")
    return pd.DataFrame({"x": xs, "label": labels})


TINY_BOUNDS = {"x": (1.0, 1.0 + 40 * 2.0**-52)}


def _expected_pmf(table, epsilon_prime, first, stop, step):
    """Pr[split = k*step] of the exponential mechanism over the grid points, by enumeration."""
    xs, labels = table["x"].tolist(), table["label"].tolist()
    scale = epsilon_prime / 2  # Max utility: sensitivity 1
    scores = {k: _max_utility(xs, labels, k * Fraction(step)) for k in range(first, stop)}
    top = max(scores.values())
    weights = {k: math.exp(scale * (u - top)) for k, u in scores.items()}
    total = math.fsum(weights.values())
    return {k: w / total for k, w in weights.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_probabilities_equal_the_exact_ones(seed):
    table = _tiny_domain_table(30, seed)
    split, builder = _root_split(table, TINY_BOUNDS, epsilon_prime=0.5, seed=seed)
    column = builder.columns[0]
    assert column.step == 2.0**-51 and not column.integer
    first, stop = column.split_range(*column.root)
    assert stop - first == 19 and first == 2**51 + 1
    expected = _expected_pmf(table, 0.5, first, stop, column.step)
    got = {}
    for start, size, p in _run_pieces(split, column.step):
        for k in range(start, start + size):
            got[k] = p
    assert sorted(got) == sorted(expected)  # every grid point, and only grid points
    for k, p in expected.items():
        assert math.isclose(got[k], p, rel_tol=1e-9), k
    assert Fraction(split["split"]) / Fraction(column.step) in expected


@pytest.mark.statistical
def test_drawn_split_values_follow_the_exact_distribution():
    table = _tiny_domain_table(30, 7)
    _, builder = _root_split(table, TINY_BOUNDS, epsilon_prime=0.5, seed=7)
    builder.trace = None
    column = builder.columns[0]
    first, stop = column.split_range(*column.root)
    expected = _expected_pmf(table, 0.5, first, stop, column.step)
    root = builder.values[0]
    n_codes = column.code_values.shape[0]
    hist = np.zeros((n_codes, 2), dtype=np.int64)
    np.add.at(hist, (builder.counts.codes[0], builder.counts.classes), 1)  # held in memory
    n = 10_000
    counts = dict.fromkeys(expected, 0)
    for _ in range(n):  # a new value each time: its own nonce, an independent draw
        value = builder._numeric_value(0, root.lo, root.hi, True, 0, n_codes)
        builder._choose_split(value, hist)
        index = Fraction(value.split) / Fraction(column.step)
        assert index.denominator == 1 and int(index) in counts  # on the grid, inside
        counts[int(index)] += 1
    keys = sorted(expected)
    observed = np.array([counts[k] for k in keys])
    assert stats.chisquare(observed, np.array([expected[k] for k in keys]) * n).pvalue > 1e-3


# ---------------------------------------------------------------- the example


def _neighbours():
    xs = [0.05, 0.3, 0.3, 0.7, 1.0, 1.0, 0.3, 0.05]
    labels = ["a", "a", "b", "b", "b", "a", "a", "a"]
    table = pd.DataFrame({"x": xs, "label": labels})
    return table, table.drop(index=3).reset_index(drop=True)  # without the record at 0.7


def test_neighbours_reach_exactly_the_same_split_values():
    """[0.3, 0.7] (with 0.7) against [0.3, 1.0] (without): the same grid points, ratio <= e^ε'.

    Under both tables the split values that can occur are exactly the grid points strictly
    inside the root [0, 1], each with positive probability, and for every one of them the
    probability ratio is at most exp(ε').
    """
    epsilon_prime = 0.8
    with_it, without = _neighbours()
    split_d, builder = _root_split(with_it, {"x": (0.0, 1.0)}, epsilon_prime=epsilon_prime)
    split_n, _ = _root_split(without, {"x": (0.0, 1.0)}, epsilon_prime=epsilon_prime)
    step = builder.columns[0].step
    g = Fraction(step)
    assert step == 2.0**-39
    first, stop = 1, 2**39  # 0 < k * 2**-39 < 1
    pieces = {}
    for name, split in (("with", split_d), ("without", split_n)):
        runs = _run_pieces(split, step)
        assert runs[0][0] == first and runs[-1][0] + runs[-1][1] == stop
        for (s, size, _), (s_next, _, _) in itertools.pairwise(runs):
            assert s + size == s_next  # the runs tile the candidates: no gap, no overlap
        assert all(p > 0 for _, _, p in runs)
        pieces[name] = runs
    # the runs around 0.7: (0.3, 0.7] and (0.7, 1.0) with the record, (0.3, 1.0) without
    c03, c07 = ref.first_index_left(0.3, g), ref.first_index_left(0.7, g)
    assert (c03, c07 - c03) in [(s, size) for s, size, _ in pieces["with"]]
    assert (c07, stop - c07) in [(s, size) for s, size, _ in pieces["with"]]
    assert (c03, stop - c03) in [(s, size) for s, size, _ in pieces["without"]]

    def density(runs, k):
        return next(p for s, size, p in runs if s <= k < s + size)

    edges = sorted({s for runs in pieces.values() for s, _, _ in runs})
    for k in edges:  # the per-point probability is constant between these edges
        ratio = density(pieces["with"], k) / density(pieces["without"], k)
        assert abs(math.log(ratio)) <= epsilon_prime + 1e-9


def test_drawn_split_values_are_grid_points_inside_the_interval():
    table, _ = _neighbours()
    for seed in range(200):
        split, builder = _root_split(table, {"x": (0.0, 1.0)}, seed=seed)
        index = Fraction(split["split"]) / Fraction(builder.columns[0].step)
        assert index.denominator == 1 and 1 <= index < 2**39


def test_no_float_uniform_is_drawn():
    table, _ = _neighbours()
    with mock.patch.object(noise, "add_uniform", side_effect=AssertionError("float draw")):
        release = diffgen(
            table,
            target="label",
            epsilon=1.0,
            steps=4,
            bounds={"x": (0.0, 1.0)},
            classes=["a", "b"],
            seed=3,
        )
    assert len(release.cut["x"]) == 5


# ---------------------------------------------------------------- the type, not the values


def _whole_values(dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 11, 200)
    labels = np.where(x + rng.integers(-2, 3, 200) < 5, "a", "b")
    return pd.DataFrame({"x": x.astype(dtype), "label": labels})


def _traced_release(table, bounds, **kwargs):
    trace = Trace()

    class Traced(Builder):
        def __init__(self, *args, **options):
            super().__init__(*args, **{**options, "trace": trace})

    with mock.patch.object(release_module, "Builder", Traced):
        release = diffgen(table, target="label", bounds=bounds, classes=["a", "b"], **kwargs)
    return release, trace


@pytest.mark.parametrize("kind", ["pandas", "pandas Float64", "arrow"])
def test_float_column_of_whole_values_is_a_float_column(kind):
    table = _whole_values(np.float64)
    if kind == "pandas Float64":  # the nullable extension dtype, without missing values
        table = table.astype({"x": "Float64"})
    data = table if kind != "arrow" else pa.Table.from_pandas(table, preserve_index=False)
    (column,) = _prepared(data, {"x": (0, 10)}).columns
    assert not column.integer and column.step == 2.0**-36 and column.root == (0.0, 10.0)
    release, trace = _traced_release(data, {"x": (0, 10)}, epsilon=4.0, steps=3, seed=1)
    # the root's candidates: every grid point strictly inside [0, 10]
    assert trace.splits[0]["value"] == ("x", "[0.0, 10.0]")
    assert int(trace.splits[0]["sizes"].sum()) == 10 * 2**36 - 1
    labels = release.cut["x"]
    assert labels[0].startswith("[0.0, ") and labels[-1].endswith(", 10.0]")
    edges = release.cut.columns[0].edges
    on_grid = [Fraction(float(e)) / Fraction(2.0**-36) for e in edges]
    assert all(k.denominator == 1 for k in on_grid)
    assert any(float(e) != math.floor(e) for e in edges[1:])  # not an integer grid


def test_integer_column_keeps_integer_intervals():
    table = _whole_values(np.int64)
    (column,) = _prepared(table, {"x": (0, 10)}).columns
    assert column.integer and column.step == 1.0 and column.root == (0.0, 11.0)
    release, trace = _traced_release(table, {"x": (0, 10)}, epsilon=4.0, steps=3, seed=1)
    assert trace.splits[0]["value"] == ("x", "[0, 11)")
    assert trace.splits[0]["sizes"].sum() == 10  # the split points 1 ... 10
    edges = release.cut.columns[0].edges
    assert all(float(e).is_integer() for e in edges)
    assert release.cut["x"][0].startswith("[0, ") and release.cut["x"][-1].endswith(", 11)")


def test_float_release_is_reproducible_by_seed():
    table = _tiny_domain_table(200, 4).assign(x=lambda t: (t["x"] - 1.0) * 2**45)
    bounds = {"x": (0.0, 40 * 2.0**-7)}
    a, _ = _traced_release(table, bounds, epsilon=2.0, steps=4, seed=21)
    b, _ = _traced_release(table, bounds, epsilon=2.0, steps=4, seed=21)
    c, _ = _traced_release(table, bounds, epsilon=2.0, steps=4, seed=22)
    assert a.cut.to_dict() == b.cut.to_dict() and a.counts.equals(b.counts)
    assert a.cut.to_dict() != c.cut.to_dict()


# ---------------------------------------------------------------- labels and the cut


def test_labels_print_the_exact_edges_and_the_cut_applies_them():
    rng = np.random.default_rng(9)
    x = rng.uniform(0.3, 0.7, 400)
    table = pd.DataFrame({"x": x, "label": np.where(x < 0.45, "a", "b")})
    release = diffgen(
        table,
        target="label",
        epsilon=8.0,
        steps=5,
        bounds={"x": (0.3, 0.7)},
        classes=["a", "b"],
        seed=2,
    )
    labels = release.cut["x"]
    edges = release.cut.columns[0].edges
    assert len(labels) == len(edges) == 6
    for i, label in enumerate(labels):
        lo, hi = label[1:-1].split(", ")
        assert float(lo) == edges[i] and repr(float(lo)) == lo  # exact, shortest
        assert float(hi) == (edges[i + 1] if i + 1 < len(edges) else 0.7)
        assert label.endswith("]" if i == len(labels) - 1 else ")")
    # a value equal to an edge opens its interval; the one below it closes the previous one
    probe = np.concatenate((edges, np.nextafter(edges[1:], -np.inf), [0.7, 0.0, 9.0]))
    got = release.cut.apply(pd.DataFrame({"x": probe}))["x"].cat.codes.tolist()
    expected = [*range(6), *range(5), 5, 0, 5]
    assert got == expected


# ---------------------------------------------------------------- against the reference


@pytest.mark.parametrize(("utility", "seed"), [("max", 0), ("info_gain", 1), ("max", 2)])
def test_float_columns_same_as_reference(utility, seed):
    rng = np.random.default_rng(seed)
    n = 120
    weight = np.round(rng.uniform(35.0, 125.0, n), 1)  # some clamped into [40, 120]
    shift = rng.normal(0.0, 3.0, n) * 2.0**-20  # values off any short decimal grid
    table = pd.DataFrame(
        {
            "age": rng.integers(10, 60, n),
            "weight": weight,
            "ratio": np.clip(rng.uniform(-1.0, 1.0, n) + shift, -1.0, 1.0),
            "label": rng.choice(["maybe", "no", "yes"], n),
        }
    )
    bounds = {"age": (15, 55), "weight": (40.0, 120.0), "ratio": (-1.0, 1.0)}
    trace = Trace()

    class Traced(Builder):
        def __init__(self, *args, **options):
            super().__init__(*args, **{**options, "trace": trace})

    with mock.patch.object(release_module, "Builder", Traced):
        release = diffgen(
            table,
            target="label",
            epsilon=3.0,
            steps=6,
            bounds=bounds,
            classes=["maybe", "no", "yes"],
            utility=utility,
            seed=seed,
        )
    reference = ref.Reference(
        table.to_dict("records"),
        [
            ("age", "numeric", (15, 55)),
            ("weight", "float", (40.0, 120.0)),
            ("ratio", "float", (-1.0, 1.0)),
        ],
        "label",
        ["maybe", "no", "yes"],
        epsilon=3.0,
        steps=6,
        utility_kind=utility,
        seed=seed,
    )
    expected = reference.run()
    assert len(trace.splits) == len(reference.splits) > 3
    for got, want in zip(trace.splits, reference.splits, strict=True):
        assert got["value"] == want["value"]
        assert got["lows"].tolist() == want["lows"] and got["sizes"].tolist() == want["sizes"]
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=1e-9)
        assert (got["chosen"], got["split"]) == (want["chosen"], want["split"])
    assert [s["chosen"] for s in trace.selections] == [s["chosen"] for s in reference.selections]
    assert release.cut.to_dict() == expected["cut"]
    assert release.counts["count"].tolist() == [r[-1] for r in expected["rows"]]
