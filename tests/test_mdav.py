"""MDAV and insensitive MDAV partitions against the slow references.

See docs/design.md#imdav-order, #mdav-generic.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from dpfast import Taxonomy
from dpfast._kernels import mdav as kernels
from dpfast.datasets import adult_taxonomy
from dpfast.partitions.insensitive_mdav import insensitive_mdav_labels, reference_sequence
from dpfast.partitions.mdav import first_appearance, mdav_labels, standardise
from tests.reference import mdav_reference as reference


def _data(seed, n, m, kind):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.normal(size=(n, m)) * rng.uniform(0.1, 10, m) + rng.uniform(-5, 5, m)
    if kind == "integers":  # many exact ties and duplicates
        return rng.integers(0, 4, size=(n, m)).astype(float)
    if kind == "lognormal":
        return rng.lognormal(size=(n, m))
    return np.round(rng.normal(size=(n, m)), 1)


KINDS = ["normal", "integers", "lognormal", "rounded"]

# --- standard MDAV -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(6))
def test_mdav_matches_reference_on_random_data(kind, seed):
    rng = np.random.default_rng(100 + seed)
    n, m, k = int(rng.integers(20, 160)), int(rng.integers(1, 6)), int(rng.integers(1, 7))
    data = _data(seed, n, m, kind)
    got = mdav_labels(data, k).tolist()
    expected = reference.mdav_labels(data.tolist(), k)
    assert got == expected


@pytest.mark.parametrize(
    "leaf_size, shell_size, min_rebuild",
    [(1, 1, 10**9), (2, 3, 8), (3, 17, 1), (8, 4096, 10**9), (5, 40, 20)],
)
@pytest.mark.parametrize("kind", KINDS)
def test_mdav_kernel_is_exact_for_any_tree_and_shell_size(leaf_size, shell_size, min_rebuild, kind):
    # Tiny leaves, shells and tree rebuilds force every pruning and fallback branch.
    data = _data(7, 230, 4, kind)
    got = first_appearance(
        kernels.mdav_partition(standardise(data), 4, leaf_size, shell_size, min_rebuild)[0]
    )
    assert got.tolist() == reference.mdav_labels(data.tolist(), 4)


def test_sdcmicro_issue_51_toy_case():
    x = [2, 3, 3, 20, 21]
    y = [1, 2, 2, 19, 20]
    data = np.column_stack([x, y]).astype(float)
    expected = reference.mdav_labels(data.tolist(), 2)
    assert expected == [0, 0, 0, 1, 1]
    assert mdav_labels(data, 2).tolist() == expected


@pytest.mark.parametrize(
    "case",
    [
        "ties",
        "duplicates",
        "n_below_3k",
        "n_below_2k",
        "k_equals_1",
        "constant_column",
        "all_constant",
        "n_equals_k",
        "symmetric",
    ],
)
def test_mdav_hand_made_cases(case):
    k = 3
    data = {
        "ties": np.array(
            [[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1], [2, 0], [0, 2], [-2, 0], [0, -2], [1, 1]],
            dtype=float,
        ),
        "duplicates": np.repeat(np.array([[1.0, 2.0], [5.0, 1.0], [3.0, 3.0]]), 4, axis=0),
        "n_below_3k": np.array([[1.0], [2.0], [3.0], [10.0], [11.0], [12.0], [20.0]]),
        "n_below_2k": np.array([[1.0, 5.0], [2.0, 3.0], [9.0, 9.0], [4.0, 4.0], [0.0, 1.0]]),
        "k_equals_1": _data(3, 11, 2, "integers"),
        "constant_column": np.column_stack([np.arange(13.0), np.full(13, 7.0)]),
        "all_constant": np.full((10, 3), 2.5),
        "n_equals_k": np.array([[1.0], [2.0], [3.0]]),
        "symmetric": np.array([[-3.0], [-1.0], [1.0], [3.0], [-2.0], [2.0], [0.0]]),
    }[case]
    if case == "k_equals_1":
        k = 1
    got = mdav_labels(data, k)
    expected = reference.mdav_labels(data.tolist(), k)
    assert got.tolist() == expected
    sizes = np.bincount(got)
    n = data.shape[0]
    if n < 2 * k:
        assert sizes.tolist() == [n]
    else:
        assert sizes.min() >= k and sizes.max() <= 2 * k - 1 and len(sizes) == n // k


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 80), st.integers(1, 4), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_mdav_cluster_sizes_and_labels_by_first_appearance(n, m, k, seed):
    k = min(k, n)
    data = _data(seed, n, m, "integers")
    labels = mdav_labels(data, k)
    sizes = np.bincount(labels)
    assert sizes.sum() == n and len(sizes) == max(1, n // k)
    if n >= 2 * k:
        assert sizes.min() >= k and sizes.max() <= 2 * k - 1
        assert (sizes > k).sum() <= 1  # only the last cluster takes the remainder
    first_rows = [int(np.flatnonzero(labels == g)[0]) for g in range(len(sizes))]
    assert first_rows == sorted(first_rows) and labels[0] == 0


def test_mdav_never_writes_its_input_and_accepts_read_only_arrays():
    data = _data(1, 60, 3, "normal")
    data.setflags(write=False)
    before = data.copy()
    mdav_labels(data, 4)
    insensitive_mdav_labels(data, 4, [(-20, 20)] * 3)
    np.testing.assert_array_equal(data, before)


def test_mdav_is_invariant_to_scale_and_shift_of_a_column():
    data = _data(2, 90, 3, "normal")
    moved = data * np.array([2.0, 0.5, 8.0]) + np.array([3.0, -1.0, 0.25])
    # Standardisation removes the change up to rounding on the 2**-40 grid.
    assert (mdav_labels(data, 5) == mdav_labels(moved, 5)).mean() > 0.9


def test_standardise_uses_population_variance():
    column = np.array([1.0, 2.0, 3.0, 4.0])
    got = standardise(column[:, None])[:, 0] / 2.0**40
    expected = (column - column.mean()) / column.std(ddof=0)
    np.testing.assert_allclose(got, expected, rtol=1e-11)


@pytest.mark.parametrize(
    "bad, error",
    [
        (np.array([[1.0, np.nan]]), ValueError),
        (np.array([1.0, 2.0]), ValueError),
        (np.array([["a"]]), TypeError),
    ],
)
def test_bad_inputs_raise(bad, error):
    with pytest.raises(error):
        mdav_labels(bad, 1)


@pytest.mark.parametrize("k", [0, 5, 2.0])
def test_bad_k_raises(k):
    with pytest.raises((ValueError, TypeError), match="k must"):
        mdav_labels(np.zeros((4, 2)), k)


# --- insensitive MDAV --------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["corners", "cycling"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_insensitive_paths_match_reference(rule, kind, seed):
    rng = np.random.default_rng(200 + seed)
    n, m, k = int(rng.integers(1, 150)), int(rng.integers(1, 5)), int(rng.integers(1, 7))
    k = min(k, n)
    data = _data(seed, n, m, kind)
    bounds = [(-4.0, 4.0)] * (m - 1) + [(0.5, 0.5)]  # one zero-width domain, values clamped
    expected = reference.insensitive_labels(data.tolist(), k, bounds, rule)
    for path in ("general", "fast", "auto"):
        got = insensitive_mdav_labels(data, k, bounds, rule, path=path)
        assert got.tolist() == expected, path


def test_insensitive_explicit_reference_points_both_paths_agree():
    data = _data(5, 300, 3, "integers")
    points = np.random.default_rng(0).uniform(0, 3, size=(7, 3))
    bounds = [(0, 3)] * 3
    general = insensitive_mdav_labels(data, 4, bounds, points, path="general")
    fast = insensitive_mdav_labels(data, 4, bounds, points, path="fast")
    np.testing.assert_array_equal(general, fast)
    sequence = [points[t % 7].tolist() for t in range(300 // 4)]
    groups = reference.insensitive_groups(data.tolist(), 4, bounds, sequence)
    assert general.tolist() == reference.labels_by_first_appearance(groups, 300)


def test_cycling_sequence_visits_opposite_corner_pairs():
    points, sequence = reference_sequence("cycling", np.zeros(3), np.ones(3) * 2, 9)
    got = points[sequence].tolist()
    expected = reference.corner_sequence([0, 0, 0], [2, 2, 2], 9, "cycling")
    assert got == expected
    assert got[:2] == [[0, 0, 0], [2, 2, 2]]


def _pairable(labels_a, labels_b):
    """Clusters pair up so that each pair differs in at most one record (row index)."""
    a = [set(np.flatnonzero(labels_a == g)) for g in range(labels_a.max() + 1)]
    b = [set(np.flatnonzero(labels_b == g)) for g in range(labels_b.max() + 1)]
    if len(a) != len(b):
        return False
    cost = np.array([[len(x - y) for y in b] for x in a])
    rows, cols = linear_sum_assignment(cost)
    return bool(cost[rows, cols].max() <= 1)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(2, 60),
    st.integers(1, 4),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["corners", "cycling"]),
)
def test_insensitivity_one_changed_record_changes_each_cluster_by_at_most_one(n, m, k, seed, rule):
    k = min(k, n)
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 5, size=(n, m)).astype(float)
    neighbour = data.copy()
    neighbour[rng.integers(n)] = rng.integers(-1, 6, size=m)  # some values get clamped
    bounds = [(0, 4)] * m
    assert _pairable(
        insensitive_mdav_labels(data, k, bounds, rule),
        insensitive_mdav_labels(neighbour, k, bounds, rule),
    )


def test_standard_mdav_is_not_insensitive():
    # The pairing check above can fail: standard MDAV breaks it on neighbouring data.
    failures = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        data = rng.normal(size=(40, 2))
        neighbour = data.copy()
        neighbour[0] = [8.0, -8.0]
        failures += not _pairable(mdav_labels(data, 4), mdav_labels(neighbour, 4))
    assert failures > 0


def test_insensitive_bad_arguments():
    data = np.zeros((10, 2))
    with pytest.raises(ValueError, match="bounds"):
        insensitive_mdav_labels(data, 2, [(0, 1)])
    with pytest.raises(ValueError, match="lower <= upper"):
        insensitive_mdav_labels(data, 2, [(1, 0), (0, 1)])
    with pytest.raises(ValueError, match="reference"):
        insensitive_mdav_labels(data, 2, [(0, 1), (0, 1)], "middle")
    with pytest.raises(ValueError, match="shape"):
        insensitive_mdav_labels(data, 2, [(0, 1), (0, 1)], np.zeros((2, 3)))
    with pytest.raises(ValueError, match="path"):
        insensitive_mdav_labels(data, 2, [(0, 1), (0, 1)], path="quick")


# --- mixed numeric and categorical attributes ------------------------------------------------

IRREGULAR = Taxonomy.from_mapping(
    {"*": {"A": ["a1", "a2", "a3"], "B": {"B1": ["b1", "b2"], "B2": ["b3"]}, "c": None}}
)
SYMMETRIC = Taxonomy.from_mapping({"*": {"X": ["x1", "x2"], "Y": ["y1", "y2"]}})
SINGLE = Taxonomy.from_mapping({"*": ["only"]})
TAXONOMIES = [IRREGULAR, SYMMETRIC, adult_taxonomy("occupation"), SINGLE]


def _mixed(seed, n, m, c, kind):
    rng = np.random.default_rng(seed)
    taxonomies = [TAXONOMIES[int(i)] for i in rng.integers(0, len(TAXONOMIES), c)]
    codes = (
        np.column_stack([rng.integers(0, len(t.domain), n) for t in taxonomies])
        if c
        else np.zeros((n, 0), dtype=np.int64)
    )
    return _data(seed, n, m, kind), codes.astype(np.int64), taxonomies


def _matrices(taxonomies):
    return [t.distance_matrix().tolist() for t in taxonomies]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(5))
def test_mixed_mdav_matches_reference(kind, seed):
    rng = np.random.default_rng(300 + seed)
    n, m, c, k = (
        int(rng.integers(10, 120)),
        int(rng.integers(0, 4)),
        int(rng.integers(1, 3)),
        int(rng.integers(1, 6)),
    )
    data, codes, taxonomies = _mixed(seed, n, m, c, kind)
    got = mdav_labels(data, k, codes=codes, taxonomies=taxonomies)
    expected = reference.mixed_mdav_labels(data.tolist(), codes.tolist(), _matrices(taxonomies), k)
    assert got.tolist() == expected


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_kernel_equals_the_tree_kernel_when_categories_add_nothing(kind):
    # A one-leaf taxonomy adds 0 to every distance: the scan and the k-d tree must agree.
    data = _data(9, 300, 3, kind)
    got = mdav_labels(data, 4, codes=np.zeros((300, 1), int), taxonomies=[SINGLE])
    np.testing.assert_array_equal(got, mdav_labels(data, 4))


@pytest.mark.parametrize(
    "case",
    [
        "categorical_only",
        "symmetric_ties",
        "duplicates",
        "n_below_3k",
        "n_below_2k",
        "k_equals_1",
        "single_leaf",
    ],
)
def test_mixed_mdav_hand_made_cases(case):
    k = 3
    rng = np.random.default_rng(4)
    taxonomies = [SYMMETRIC]
    if case == "categorical_only":
        data, codes = np.zeros((14, 0)), rng.integers(0, 4, (14, 1))
        taxonomies = [SYMMETRIC]
    elif case == "symmetric_ties":  # every record at the same distance from many others
        data, codes = np.zeros((12, 1)), np.tile(np.arange(4), 3)[:, None]
    elif case == "duplicates":
        data = np.repeat([[1.0], [4.0], [2.0]], 4, axis=0)
        codes = np.repeat([[0], [3], [1]], 4, axis=0)
    elif case == "n_below_3k":
        data, codes = np.arange(8.0)[:, None], rng.integers(0, 4, (8, 1))
    elif case == "n_below_2k":
        data, codes = np.arange(5.0)[:, None], rng.integers(0, 4, (5, 1))
    elif case == "k_equals_1":
        data, codes, k = rng.integers(0, 3, (9, 2)).astype(float), rng.integers(0, 4, (9, 1)), 1
    else:
        data, codes, taxonomies = np.arange(10.0)[:, None], np.zeros((10, 1), int), [SINGLE]
    got = mdav_labels(data, k, codes=codes, taxonomies=taxonomies)
    expected = reference.mixed_mdav_labels(data.tolist(), codes.tolist(), _matrices(taxonomies), k)
    assert got.tolist() == expected
    sizes = np.bincount(got)
    n = data.shape[0]
    assert len(sizes) == max(1, n // k) and (n < 2 * k or sizes.min() >= k)
    if case == "single_leaf":  # the one-value attribute adds nothing
        assert got.tolist() == mdav_labels(data, k).tolist()


def test_mixed_mdav_groups_by_category_when_numbers_agree():
    # Equal numbers: the clusters follow the taxonomy (siblings together).
    codes = np.array([0, 2, 1, 3, 0, 2, 1, 3])[:, None]  # x1 y1 x2 y2 ...
    got = mdav_labels(np.zeros((8, 1)), 4, codes=codes, taxonomies=[SYMMETRIC])
    assert len({tuple(sorted(codes[got == g, 0] // 2)) for g in range(2)}) == 2
    assert all(len(set(codes[got == g, 0] // 2)) == 1 for g in range(2))


@pytest.mark.parametrize("rule", ["corners", "cycling"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_mixed_insensitive_paths_match_reference(rule, kind, seed):
    rng = np.random.default_rng(400 + seed)
    n, m, c, k = (
        int(rng.integers(1, 130)),
        int(rng.integers(0, 3)),
        int(rng.integers(1, 3)),
        int(rng.integers(1, 6)),
    )
    k = min(k, n)
    data, codes, taxonomies = _mixed(seed, n, m, c, kind)
    bounds = [(-4.0, 4.0)] * max(m - 1, 0) + [(0.5, 0.5)] * min(m, 1)
    expected = reference.mixed_insensitive_labels(
        data.tolist(), codes.tolist(), bounds, _matrices(taxonomies), k, rule
    )
    for path in ("general", "fast", "auto"):
        got = insensitive_mdav_labels(
            data, k, bounds, rule, path=path, codes=codes, taxonomies=taxonomies
        )
        assert got.tolist() == expected, path


def test_mixed_insensitive_first_corner_is_the_most_marginal_value():
    # One record per domain value, k = 3: the first cluster is v* and its 2 nearest values.
    v_star = IRREGULAR.code(IRREGULAR.boundary[0])
    codes = np.arange(len(IRREGULAR.domain))[:, None]
    labels = insensitive_mdav_labels(np.zeros((7, 0)), 3, [], codes=codes, taxonomies=[IRREGULAR])
    distance = IRREGULAR.distance_matrix()[v_star]
    expected = set(np.lexsort((np.arange(7), distance))[:3].tolist())
    assert set(np.flatnonzero(labels == labels[v_star]).tolist()) == expected


def test_mixed_insensitive_explicit_points_give_codes():
    data, codes, taxonomies = _mixed(8, 200, 2, 2, "integers")
    points = np.column_stack(
        [
            np.random.default_rng(1).uniform(-2, 2, (5, 2)),
            [[i % len(t.domain) for t in taxonomies] for i in range(5)],
        ]
    )
    bounds = [(-2, 2)] * 2
    general = insensitive_mdav_labels(
        data, 4, bounds, points, path="general", codes=codes, taxonomies=taxonomies
    )
    fast = insensitive_mdav_labels(
        data, 4, bounds, points, path="fast", codes=codes, taxonomies=taxonomies
    )
    np.testing.assert_array_equal(general, fast)
    bad = points.copy()
    bad[0, 2] = 0.5
    with pytest.raises(ValueError, match="domain code"):
        insensitive_mdav_labels(data, 4, bounds, bad, codes=codes, taxonomies=taxonomies)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(2, 60),
    st.integers(0, 2),
    st.integers(1, 2),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["corners", "cycling"]),
)
def test_mixed_insensitivity_one_changed_record_changes_each_cluster_by_at_most_one(
    n, m, c, k, seed, rule
):
    k = min(k, n)
    rng = np.random.default_rng(seed)
    data, codes, taxonomies = _mixed(seed, n, m, c, "integers")
    neighbour, neighbour_codes = data.copy(), codes.copy()
    row = rng.integers(n)
    neighbour[row] = rng.integers(-1, 6, size=m)
    neighbour_codes[row] = [rng.integers(len(t.domain)) for t in taxonomies]
    bounds = [(0, 3)] * m
    assert _pairable(
        insensitive_mdav_labels(data, k, bounds, rule, codes=codes, taxonomies=taxonomies),
        insensitive_mdav_labels(
            neighbour, k, bounds, rule, codes=neighbour_codes, taxonomies=taxonomies
        ),
    )


@pytest.mark.parametrize(
    "codes, taxonomies, error, match",
    [
        (np.zeros((6, 2), int), [SYMMETRIC], ValueError, "shape"),
        (np.full((6, 1), 4), [SYMMETRIC], ValueError, r"\[0, 4\)"),
        (np.zeros((6, 1)), [SYMMETRIC], TypeError, "integer"),
        (np.zeros((6, 1), int), None, ValueError, "without taxonomies"),
    ],
)
def test_mixed_bad_codes(codes, taxonomies, error, match):
    with pytest.raises(error, match=match):
        mdav_labels(np.zeros((6, 1)), 2, codes=codes, taxonomies=taxonomies)
    with pytest.raises(error, match=match):
        insensitive_mdav_labels(np.zeros((6, 1)), 2, [(0, 1)], codes=codes, taxonomies=taxonomies)
