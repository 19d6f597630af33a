from fractions import Fraction
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfast._kernels import ranking
from dpfast.accounting import scale_steps as noise_scale_steps
from dpfast.methods.ir_dp._numeric import centroid_sensitivity, release_shuffled
from dpfast.methods.ir_dp._numeric import release_linked as ir_column
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups, group_means, ranking_labels
from tests.reference import ir_reference

EMPTY = np.empty(0, dtype=np.int64)


def _column_case(draw_values, k):
    values = np.asarray(draw_values, dtype=np.float64)
    return values, min(k, values.shape[0])


values_strategy = st.lists(
    st.one_of(st.integers(-5, 5).map(float), st.floats(-1e3, 1e3, allow_nan=False)),
    min_size=1,
    max_size=60,
)


remainders = st.sampled_from(["middle", "last"])


@settings(max_examples=150, deadline=None)
@given(values_strategy, st.integers(1, 25), remainders)
def test_ranking_labels_match_reference(values, k, remainder):
    values, k = _column_case(values, k)
    got = ranking_labels(values, k, remainder)
    expected = ir_reference.labels(values.tolist(), k, remainder)
    assert got.tolist() == expected


@settings(max_examples=150, deadline=None)
@given(values_strategy, st.integers(1, 25), remainders)
def test_group_sizes_between_k_and_2k_minus_1(values, k, remainder):
    values, k = _column_case(values, k)
    sizes = np.bincount(ranking_labels(values, k, remainder))
    assert sizes.shape[0] == values.shape[0] // k
    assert sizes.min() >= k
    assert sizes.max() <= 2 * k - 1 or sizes.shape[0] == 1


@settings(max_examples=150, deadline=None)
@given(values_strategy, st.integers(1, 25), remainders)
def test_group_means_match_reference_and_are_monotone(values, k, remainder):
    values, k = _column_case(values, k)
    got = group_means(values, k, remainder)
    expected = np.array(ir_reference.group_means(values.tolist(), k, remainder))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9)
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(got[order]) >= -1e-9)


def test_remainder_goes_to_the_middle_group_or_the_last():
    # n = 10, k = 3: three groups and one value left over, in group 3 // 2 = 1 by default,
    # in the last group as sdcMicro and the authors' library do (docs/privacy.md)
    values = np.array([10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0])
    assert ranking_labels(values, 3).tolist() == [2, 0, 2, 0, 2, 0, 1, 1, 1, 1]
    assert ranking_labels(values, 3, "last").tolist() == [2, 0, 2, 0, 2, 0, 2, 1, 1, 1]
    assert group_means(values, 3).tolist() == [9.0, 2.0, 9.0, 2.0, 9.0, 2.0, 5.5, 5.5, 5.5, 5.5]
    # n = 7, k = 3: two groups, the second is both the middle and the last
    values = np.array([7.0, 1.0, 6.0, 2.0, 5.0, 3.0, 4.0])
    for remainder in ("middle", "last"):
        assert ranking_labels(values, 3, remainder).tolist() == [1, 0, 1, 0, 1, 0, 1]
        assert group_means(values, 3, remainder).tolist() == [5.5, 2.0, 5.5, 2.0, 5.5, 2.0, 5.5]


def test_ties_go_to_the_lowest_row_index():
    values = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    assert ranking_labels(values, 2).tolist() == [0, 1, 1, 1, 0]


@pytest.mark.parametrize("n_records", [1, 2, 1000, 9000, 70_000, 300_000])
@pytest.mark.parametrize("distribution", ["few values", "uniform", "normal", "one big tie"])
def test_radix_sort_is_a_stable_argsort(n_records, distribution):
    # large n takes the MSD pass, then insertion sorts (tiny buckets) and in-cache LSD passes
    rng = np.random.default_rng(n_records)
    values = {
        "few values": lambda: rng.integers(0, 50, n_records).astype(np.float64),
        "uniform": lambda: rng.uniform(0, 49, n_records),
        "normal": lambda: np.clip(rng.normal(25, 3, n_records), 0, 49),
        "one big tie": lambda: np.where(
            rng.random(n_records) < 0.9, 0.0, rng.uniform(0, 49, n_records)
        ),
    }[distribution]()
    grid = Grid.for_column(0.0, 49.0, n_records, 1)
    packed, clamped = ranking.pack_quantised(
        values, grid.lower, grid.upper, grid.gamma, grid.d_int, grid.index_bits, EMPTY, grid.warp
    )
    assert clamped == 0
    ordered = ranking.radix_sort_packed(packed, grid.index_bits, grid.d_int.bit_length())
    rows = (ordered & np.uint64((1 << grid.index_bits) - 1)).astype(np.int64)
    np.testing.assert_array_equal(rows, np.argsort(values, kind="stable"))


@pytest.mark.parametrize("n", [0, 1, 100, 9000, 50_000])
def test_radix_sort_with_a_given_scratch_is_the_same_stable_sort(n):
    rng = np.random.default_rng(n)
    for bits in (8, 36):  # the LSD passes alone, and the MSD pass first
        # the key is bits [4, 4 + bits); the bits below keep their order, none above
        words = rng.integers(0, 1 << (4 + bits), n, dtype=np.int64).astype(np.uint64)
        words[: n // 3] &= np.uint64(0xF0F)  # ties too
        expected = words[np.argsort(words >> np.uint64(4), kind="stable")]
        own = ranking.radix_sort_packed(words.copy(), 4, bits)
        packed, scratch = words.copy(), np.empty_like(words)
        given = ranking.radix_sort_packed(packed, 4, bits, scratch)
        assert given is packed or given is scratch  # the result is one of the two buffers
        np.testing.assert_array_equal(own, expected)
        np.testing.assert_array_equal(given, expected)
    with pytest.raises(ValueError, match="scratch must be uint64"):
        ranking.radix_sort_packed(words.copy(), 4, 36, np.empty(n + 1, np.uint64))
    with pytest.raises(ValueError, match="scratch must be uint64"):
        ranking.radix_sort_packed(words.copy(), 4, 36, np.empty(n, np.int64))


def _random_ir_case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    k = int(rng.integers(1, n + 1))
    lower = float(rng.uniform(-100, 0))
    upper = lower + float(rng.choice([0.0, 1.0, 37.5, 1e6]))
    if rng.random() < 0.5:
        values = rng.integers(int(lower) - 3, int(upper) + 4, n).astype(np.float64)
    else:
        values = rng.uniform(lower - 10, upper + 10, n)
    grid = Grid.for_column(lower, upper, n, k)
    noise = (
        rng.integers(-grid.d_int - 5, grid.d_int + 5, n // k)
        if grid.d_int
        else np.zeros(n // k, np.int64)
    )
    layout = RankGroups(n, k, "middle" if seed % 2 else "last")
    return values, grid, layout, noise.astype(np.int64), bool(rng.random() < 0.3)


@pytest.mark.parametrize("seed", range(40))
def test_ir_column_matches_the_reference_pipeline(seed):
    values, grid, layout, noise, round_values = _random_ir_case(seed)
    out = np.empty(values.shape[0])
    clamped = ir_column(values, grid, layout, noise, EMPTY, round_values, out)
    expected = ir_reference.ir_release(
        values.tolist(),
        grid.lower,
        grid.upper,
        grid.gamma,
        grid.d_int,
        layout.k,
        noise.tolist(),
        round_values,
        layout.remainder,
    )
    np.testing.assert_array_equal(out, np.array(expected))
    assert clamped == int(np.sum((values < grid.lower) | (values > grid.upper)))


@pytest.mark.parametrize("seed", range(10))
def test_ir_column_writes_through_the_destination_permutation(seed):
    values, grid, layout, noise, _ = _random_ir_case(seed)
    values = np.round(values / 10) * 10  # many ties across group boundaries
    n = values.shape[0]
    destination = np.random.default_rng(seed).permutation(n).astype(np.int64)
    plain, shuffled = np.empty(n), np.empty(n)
    ir_column(values, grid, layout, noise, EMPTY, False, plain)
    ir_column(values, grid, layout, noise, destination, False, shuffled)
    np.testing.assert_array_equal(shuffled[destination], plain)


@pytest.mark.parametrize("seed", range(20))
def test_shuffled_column_gives_each_row_the_value_of_a_rank(seed):
    # without linkage only the sorted values matter: row r gets rank order[r]'s group value
    values, grid, layout, noise, round_values = _random_ir_case(seed)
    n = values.shape[0]
    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    linked = np.array(
        ir_reference.ir_release(
            values.tolist(),
            grid.lower,
            grid.upper,
            grid.gamma,
            grid.d_int,
            layout.k,
            noise.tolist(),
            round_values,
            layout.remainder,
        )
    )
    clipped = np.clip(values, grid.lower, grid.upper)
    quantised = np.minimum(np.rint((clipped - grid.lower) / grid.gamma), grid.d_int)
    by_rank = linked[np.argsort(quantised, kind="stable")]
    out = np.empty(n)
    clamped = release_shuffled(values, grid, layout, noise, order, round_values, out)
    np.testing.assert_array_equal(out, by_rank[order])
    assert clamped == int(np.sum((values < grid.lower) | (values > grid.upper)))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("remainder", ["middle", "last"])
def test_group_sums_of_a_column_in_parts_equal_the_whole(seed, remainder):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    k = int(rng.integers(1, min(n, 40) + 1))
    layout = RankGroups(n, k, remainder)
    words = np.sort(rng.integers(0, 2**30, n).astype(np.uint64))
    whole = np.zeros(n // k, dtype=np.int64)
    ranking.add_group_sums(words, 0, 0, *layout.scalars, whole)
    # cuts inside the big group too
    big_lo, big_hi = layout.span(layout.big)
    inside = [big_lo + 1, (big_lo + big_hi) // 2, big_hi - 1]
    cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n + 1, 6), inside]))
    parts = np.zeros(n // k, dtype=np.int64)
    for first, last in reversed(list(pairwise(cuts))):
        ranking.add_group_sums(words[first:last], 0, int(first), *layout.scalars, parts)
    np.testing.assert_array_equal(parts, whole)
    groups = np.repeat(np.arange(n // k), ir_reference.group_sizes(n, k, remainder))
    np.testing.assert_array_equal(whole, np.bincount(groups, words.astype(np.int64)))


def test_ir_column_never_writes_its_input():
    values, grid, layout, noise, _ = _random_ir_case(5)
    values.setflags(write=False)
    out = np.empty(values.shape[0])
    ir_column(values, grid, layout, noise, EMPTY, False, out)


def test_grid_is_a_power_of_two_covering_the_domain():
    grid = Grid.for_column(17.0, 90.0, 30_000, 25)
    mantissa, _ = np.frexp(grid.gamma)
    assert mantissa == 0.5
    assert grid.d_int * grid.gamma >= 73.0
    assert grid.d_int <= 2**40
    assert (grid.d_int + 1) << grid.index_bits < 2**64


def test_grid_of_a_zero_width_domain():
    grid = Grid.for_column(3.0, 3.0, 10, 2)
    assert grid.d_int == 0


def test_sensitivity_adds_one_grid_step_per_group():
    grid = Grid.for_column(0.0, 1.0, 100, 10)
    got = centroid_sensitivity(grid, 100, 10)
    assert got == Fraction(grid.d_int, 10) + 10
    assert noise_scale_steps(got, 0.5) == int(np.ceil(float(got) / 0.5))
