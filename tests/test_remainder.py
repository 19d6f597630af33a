"""Which rank group holds the remainder ``n mod k``: the layout, its kernels, what it costs.

:class:`~dpfast.partitions.ranking.RankGroups` against the obvious reading (sizes ``k``,
one group ``k + r`` in the middle or last), the kernels' layout helpers against it,
Lemma 1's bound for both rules, the exact optimal univariate partition (a slow
reference), and the target of the rule: individual ranking's SSE within 1.1x of the
optimum, median over skewed and uniform columns, where the last-group rule is worse.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpfast
from dpfast._kernels import groups as group_kernels
from dpfast._kernels import outofcore as outofcore_kernels
from dpfast._kernels import ranking
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.partitions.ranking import RankGroups
from tests.reference import ir_reference

RULES = ("middle", "last")


@st.composite
def layouts(draw):
    n = draw(st.integers(1, 400))
    k = draw(st.integers(1, n))
    return RankGroups(n, k, draw(st.sampled_from(RULES)))


# -- the layout --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_group_sizes_are_k_with_one_group_of_k_plus_r_where_the_rule_says(layout):
    n, k, sizes = layout.n, layout.k, layout.sizes
    n_c, r = n // k, n % k
    assert sizes.tolist() == ir_reference.group_sizes(n, k, layout.remainder)
    assert sizes.sum() == n and sizes.shape[0] == n_c == layout.n_groups
    assert sizes.min() >= k and sizes.max() <= 2 * k - 1
    big = n_c // 2 if layout.remainder == "middle" else n_c - 1
    assert layout.big == big and layout.r == r and layout.scalars == (k, big, r)
    if r > 0:
        assert np.flatnonzero(sizes == k + r).tolist() == [big]
    assert set(np.delete(sizes, big).tolist()) <= {k}


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_group_of_start_span_and_the_kernels_helpers_agree_with_the_sizes(layout):
    n = layout.n
    expected = np.repeat(np.arange(layout.n_groups), layout.sizes)  # each rank's group
    starts = np.concatenate([[0], np.cumsum(layout.sizes)])
    assert layout.group_of(np.arange(n)).tolist() == expected.tolist()
    assert layout.starts.tolist() == starts.tolist()
    for g in range(layout.n_groups + 1):
        assert layout.start(g) == starts[g] == group_kernels.group_start(g, *layout.scalars)
    for rank in {0, n - 1, *np.random.default_rng(n).integers(0, n, 20).tolist()}:
        g = int(expected[rank])
        assert layout.group(rank) == g == group_kernels.rank_group(rank, *layout.scalars)
        lo, hi = layout.span(g)
        assert lo <= rank < hi
    first = int(np.random.default_rng(n).integers(0, layout.n_groups + 1))
    assert layout.sizes_of(first, layout.n_groups).tolist() == layout.sizes[first:].tolist()


def test_hand_made_layouts():
    assert RankGroups(11, 3).sizes.tolist() == [3, 5, 3]
    assert RankGroups(11, 3, "last").sizes.tolist() == [3, 3, 5]
    assert RankGroups(14, 3).sizes.tolist() == [3, 3, 5, 3]  # 4 groups: the third
    assert RankGroups(12, 3).sizes.tolist() == [3, 3, 3, 3]  # no remainder
    assert RankGroups(5, 3).sizes.tolist() == [5]  # one group: both rules agree
    assert RankGroups(5, 3, "last").sizes.tolist() == [5]
    assert RankGroups(7, 1).sizes.tolist() == [1] * 7
    layout = RankGroups(10, 3)
    assert [layout.group(r) for r in range(10)] == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2]
    assert layout.span(1) == (3, 7) and layout.start(3) == 10


def test_a_bad_layout_is_refused_with_the_choices():
    with pytest.raises(DPFastValueError, match=r"remainder must be one of \['middle', 'last'\]"):
        RankGroups(10, 3, "first")
    with pytest.raises(DPFastValueError, match="k must be an integer in"):
        RankGroups(10, 11)
    with pytest.raises(DPFastTypeError, match="k must be"):
        RankGroups(10, 2.0)


# -- the kernels against the obvious reading ----------------------------------------------


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("remainder", RULES)
def test_rank_group_kernels_follow_the_layout(seed, remainder):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    k = int(rng.integers(1, min(n, 50) + 1))
    layout = RankGroups(n, k, remainder)
    groups = np.repeat(np.arange(n // k), ir_reference.group_sizes(n, k, remainder))
    values = rng.normal(size=n // k)

    order = rng.permutation(n).astype(np.int64)
    out = np.empty(n)
    ranking.take_groups(values, order, *layout.scalars, out)
    np.testing.assert_array_equal(out, values[groups[order]])

    bits = 12
    positions = rng.permutation(n).astype(np.uint64)
    packed = (rng.integers(0, 5, n).astype(np.uint64) << np.uint64(bits)) | positions
    scattered = np.full(n, np.nan)
    ranking.scatter_groups(packed, bits, *layout.scalars, values, scattered)
    np.testing.assert_array_equal(scattered[positions.astype(np.int64)], values[groups])

    words = np.sort(rng.integers(0, 1000, n)).astype(np.uint64)
    runs = np.zeros(n // k, dtype=np.int64)
    floats = np.zeros(n // k)
    cuts = np.unique(np.r_[0, rng.integers(0, n + 1, 5), layout.span(layout.big), n])
    for first, last in pairwise(cuts.tolist()):
        ranking.add_group_run(7, last - first, first, *layout.scalars, runs)
        outofcore_kernels.add_float_run(0.25, last - first, first, *layout.scalars, floats)
    np.testing.assert_array_equal(runs, 7 * layout.sizes)
    np.testing.assert_array_equal(floats, 0.25 * layout.sizes)

    # float sums added in parts, in rank order, are the whole column's means' sums, bit for bit
    column = rng.lognormal(3, 2, n)
    ordered = np.sort(column)
    sums = np.zeros(n // k)
    for first, last in pairwise(cuts.tolist()):
        outofcore_kernels.add_float_group_sums(ordered[first:last], first, *layout.scalars, sums)
    means, labels = ranking.float_group_means(
        column, np.argsort(column, kind="stable"), *layout.scalars
    )
    np.testing.assert_array_equal(sums / layout.sizes, means)
    np.testing.assert_array_equal(np.sort(labels), groups)

    noisy = ranking.noisy_group_values(
        words.astype(np.int64)[: n // k], *layout.scalars, np.zeros(n // k, np.int64),
        10**6, 0.0, 1e6, 1.0, False, None,
    )  # fmt: skip
    expected = [
        float(round(Fraction(int(s), int(size))))
        for s, size in zip(words[: n // k], layout.sizes, strict=True)
    ]
    assert noisy.tolist() == expected


# -- Lemma 1 for both rules ---------------------------------------------------------------


def _centroids(values, layout):
    """The exact group means of ``values`` sorted, in ``layout``'s groups."""
    ordered = sorted(values)
    starts = layout.starts.tolist()
    return [Fraction(sum(ordered[a:b]), b - a) for a, b in pairwise(starts)]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 1000), min_size=1, max_size=80),
    st.integers(1, 12),
    st.sampled_from(RULES),
    st.data(),
)
def test_one_changed_value_moves_the_centroids_by_at_most_its_change_over_k(
    values, k, remainder, data
):
    # docs/privacy.md: the telescoping sum needs only sizes fixed by (n, k) and >= k each
    k = min(k, len(values))
    layout = RankGroups(len(values), k, remainder)
    i = data.draw(st.integers(0, len(values) - 1))
    changed = list(values)
    changed[i] = data.draw(st.integers(0, 1000))
    before, after = _centroids(values, layout), _centroids(changed, layout)
    moved = sum(abs(a - b) for a, b in zip(before, after, strict=True))
    assert moved <= Fraction(abs(changed[i] - values[i]), k) <= Fraction(1000, k)


# -- the exact optimal univariate partition (a slow reference) -----------------------------


def test_the_optimal_partition_of_hand_made_columns():
    # two clusters of three: the optimum keeps them apart, whatever the order given
    sse, sizes = ir_reference.optimal_univariate([100, 1, 2, 101, 3, 102], 3)
    assert sizes == [3, 3] and sse == pytest.approx(4.0)
    # seven values, k = 3: the extra value joins the typical ones, not the outlier's group
    # (4 + 3: 75 + 653,400; 3 + 4 would cost 0 + 735,075)
    sse, sizes = ir_reference.optimal_univariate([0, 0, 0, 10, 10, 10, 1000], 3)
    assert sizes == [4, 3] and sse == pytest.approx(653_475.0)
    assert ir_reference.partition_sse([0, 0, 0, 10, 10, 10, 1000], [3, 4]) == 735_075.0
    # a gap after four values: groups of 4 and 3 beat 3 and 4
    sse, sizes = ir_reference.optimal_univariate([1, 2, 3, 4, 50, 51, 52], 3)
    assert sizes == [4, 3] and sse == pytest.approx(5.0 + 2.0)
    # n < 2k: one group; n = k: one group of all
    assert ir_reference.optimal_univariate([5, 1, 9], 2)[1] == [3]
    assert ir_reference.optimal_univariate([5, 1, 9], 3) == (pytest.approx(32.0), [3])
    with pytest.raises(ValueError, match="at least k"):
        ir_reference.optimal_univariate([1, 2], 3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=2, max_size=12), st.integers(1, 4))
def test_the_optimal_partition_is_the_best_of_every_partition(values, k):
    k = min(k, len(values))
    sse, sizes = ir_reference.optimal_univariate(values, k)
    assert sum(sizes) == len(values) and all(k <= s <= 2 * k - 1 for s in sizes)
    assert sse == pytest.approx(ir_reference.partition_sse(values, sizes), abs=1e-9)

    def partitions(n):  # every composition of n into parts of at least k
        if n == 0:
            yield []
        for first in range(k, n + 1):
            for rest in partitions(n - first):
                yield [first, *rest]

    best = min(ir_reference.partition_sse(values, p) for p in partitions(len(values)))
    assert sse == pytest.approx(best, abs=1e-9)


# -- what the rule costs ---------------------------------------------------------------------

#: Rows of every column: ``n mod k`` is 2, 4 and 9 for ``k`` = 3, 5 and 10.
N_ROWS = 2999
K_VALUES = (3, 5, 10)
SKEWED = ("capital-gain", "capital-loss", "fnlwgt", "lognormal", "pareto", "signed profit")


def _columns() -> dict[str, np.ndarray]:
    """Adult's skewed columns and age (a fixed sample), synthetic skewed ones, a uniform one."""
    rng = np.random.default_rng(2016)
    adult = dpfast.datasets.adult()
    rows = rng.choice(len(adult), N_ROWS, replace=False)
    columns = {
        name: adult[name].to_numpy()[rows].astype(np.float64)
        for name in ("capital-gain", "capital-loss", "fnlwgt", "age")
    }
    columns["lognormal"] = rng.lognormal(10, 1.5, N_ROWS)
    columns["pareto"] = (rng.pareto(1.5, N_ROWS) + 1) * 1000
    gains, losses = rng.lognormal(9, 1.5, N_ROWS), -rng.lognormal(8, 1.5, N_ROWS)
    columns["signed profit"] = np.where(rng.random(N_ROWS) < 0.7, gains, losses)
    columns["uniform"] = rng.uniform(0, 100, N_ROWS)
    return columns


def _ratio(values: np.ndarray, k: int, remainder: str, optimum: float) -> float:
    """individual_ranking's SSE over the optimal partition's (float columns: no rounding)."""
    released = dpfast.individual_ranking(values[:, None], k=k, remainder=remainder).data[:, 0]
    sse = float(((values - released) ** 2).sum())
    return sse / optimum if optimum > 0 else (1.0 if sse == 0 else np.inf)


def test_the_middle_rule_costs_at_most_a_tenth_over_the_optimum_and_last_costs_more():
    ratios: dict[str, dict[tuple[str, int], float]] = {rule: {} for rule in RULES}
    for name, values in _columns().items():
        for k in K_VALUES:
            optimum, _ = ir_reference.optimal_univariate(values, k)
            for rule in RULES:
                ratios[rule][name, k] = _ratio(values, k, rule, optimum)
    middle, last = ratios["middle"], ratios["last"]
    assert np.median(list(middle.values())) <= 1.1
    skewed_middle = [middle[name, k] for name in SKEWED for k in K_VALUES]
    skewed_last = [last[name, k] for name in SKEWED for k in K_VALUES]
    assert np.median(skewed_last) >= 1.3 * np.median(skewed_middle)
    # the smooth skewed columns: the last-group rule costs more at every k
    for name in ("fnlwgt", "lognormal", "pareto", "signed profit", "capital-loss"):
        for k in K_VALUES:
            assert last[name, k] > middle[name, k], (name, k, last[name, k], middle[name, k])
