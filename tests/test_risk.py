import contextlib
import json
import math
import types
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpfast
from dpfast import risk
from dpfast._kernels import frequencies
from dpfast.exceptions import DPFastError
from dpfast.risk import _linkage
from dpfast.taxonomy import Taxonomy
from tests.reference import risk_reference as reference

# -- tables for the property tests --------------------------------------------------------


@st.composite
def aligned_tables(draw, max_rows=25, max_columns=3):
    """(original, released) float64 matrices: few distinct values, so ties are common."""
    n = draw(st.integers(1, max_rows))
    m = draw(st.integers(1, max_columns))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(["ties", "continuous", "constant_column", "duplicates"]))
    rng = np.random.default_rng(seed)
    if kind == "continuous":
        original = rng.normal(0, 10, (n, m))
        released = original + rng.normal(0, draw(st.sampled_from([0.1, 3.0, 30.0])), (n, m))
        return original, released
    original = rng.integers(0, 4, (n, m)).astype(np.float64)
    if kind == "constant_column":
        original[:, 0] = 7.0
    if kind == "duplicates" and n > 1:
        original[n // 2 :] = original[: n - n // 2]
    released = original + rng.integers(-1, 2, (n, m)) * draw(st.sampled_from([0.5, 1.0]))
    return original, released


def _columns(matrix):
    return [matrix[:, j].tolist() for j in range(matrix.shape[1])]


# -- record linkage -------------------------------------------------------------------------


@contextlib.contextmanager
def _leaves(size):
    """Build the k-d trees with ``size`` records per leaf: small tables get deep trees."""
    saved = _linkage.LEAF_SIZE
    _linkage.LEAF_SIZE = size
    try:
        yield
    finally:
        _linkage.LEAF_SIZE = saved


@settings(max_examples=200, deadline=None)
@given(aligned_tables(), st.sampled_from(["distance", "rank"]), st.sampled_from([1, 2, 3, 32]))
def test_record_linkage_matches_the_reference(tables, method, leaf_size):
    original, released = tables
    with _leaves(leaf_size):
        got = risk.record_linkage(original, released, method=method, per_record=True)
        rate = risk.record_linkage(original, released, method=method)
    expected = reference.record_linkage(_columns(original), _columns(released), method)
    assert got.tolist() == expected
    assert rate == pytest.approx(sum(expected) / len(expected), abs=1e-15)


@pytest.mark.parametrize("kind", ["ties", "continuous", "duplicates"])
def test_record_linkage_matches_the_reference_on_a_deeper_tree(kind):
    rng = np.random.default_rng(14)
    n = 300
    if kind == "continuous":
        original = rng.normal(size=(n, 3))
        released = original + rng.normal(0, 0.4, original.shape)
    else:
        original = rng.integers(0, 6, (n, 3)).astype(float)
        if kind == "duplicates":
            original[n // 2 :] = original[: n // 2]
        released = original + rng.integers(-1, 2, original.shape)
    got = risk.record_linkage(original, released, per_record=True)
    expected = reference.record_linkage(_columns(original), _columns(released))
    assert got.tolist() == expected
    assert 0 < sum(expected) < n  # some links right, some wrong


def test_record_linkage_by_hand_with_a_tie():
    original = np.array([[0.0, 0.0], [2.0, 0.0], [10.0, 10.0]])
    # row 0 lies halfway between rows 0 and 1: a tie of two that includes its source
    released = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 0.0]])
    got = risk.record_linkage(original, released, per_record=True)
    assert got.tolist() == [0.5, 1.0, 0.0]
    assert risk.record_linkage(original, released) == pytest.approx(0.5)


def test_identity_release_links_every_record_and_duplicates_share():
    rng = np.random.default_rng(3)
    original = rng.normal(size=(200, 4))
    assert risk.record_linkage(original, original) == 1.0
    assert risk.record_linkage(original, original, method="rank") == 1.0
    original[1] = original[0]  # two identical records: each links with probability 1/2
    got = risk.record_linkage(original, original, per_record=True)
    assert got[:3].tolist() == [0.5, 0.5, 1.0]


def test_a_single_row_for_every_measure():
    x, y = np.array([[3.0, 4.0]]), np.array([[9.0, -1.0]])
    assert risk.record_linkage(x, y) == 1.0  # the only candidate is the source
    # rank: w = floor(10% of 1) = 0 ranks, so only an equal value would be disclosed
    assert risk.interval_disclosure(x, y, p=10) == {0: 0.0, 1: 0.0}
    assert risk.interval_disclosure(x, y, p=100) == {0: 1.0, 1: 1.0}
    assert risk.interval_disclosure(x, y, p=10, method="value") == {0: 0.0, 1: 0.0}
    got = risk.neighbourhood_counts(x, y, 0, width=6.0, k=2)
    assert (got.counts.tolist(), got.minimum, got.median, got.share_below_k) == ([1], 1, 1.0, 1.0)
    unique = risk.uniqueness(x, [0, 1], k=1)
    assert (unique.sample_uniques, unique.share_below_k, unique.n_classes) == (1, 0.0, 1)


def test_mdav_at_k_links_about_one_in_k_on_separated_clusters():
    k = 5
    rng = np.random.default_rng(7)
    centres = rng.permutation(40)[:, None] * 1000.0 + np.array([[0.0, 500.0, 250.0]])
    points = np.repeat(centres, k, axis=0) + rng.uniform(-1, 1, (40 * k, 3))
    table = pd.DataFrame(points, columns=["a", "b", "c"])
    release = dpfast.mdav(table, k=k)
    got = risk.record_linkage(table, release)
    # each cluster's k records share one centroid: exactly one of them is nearest to it
    assert got == pytest.approx(1 / k)


def test_constant_column_is_left_out_as_if_weighted_one():
    rng = np.random.default_rng(4)
    original = rng.normal(size=(60, 3))
    released = original + rng.normal(0, 0.8, original.shape)
    original[:, 1] = 5.0
    got = risk.record_linkage(original, released, per_record=True)
    # weight 1 (sdcMicro, MDAV): the column adds (y - 5)² to every candidate of a record
    weights = np.array([1 / original[:, 0].var(), 1.0, 1 / original[:, 2].var()])
    matrix = [[np.sum((y - x) ** 2 * weights) for x in original] for y in released]
    assert got.tolist() == reference.linkage_scores(matrix)
    without = risk.record_linkage(original[:, [0, 2]], released[:, [0, 2]], per_record=True)
    assert got.tolist() == without.tolist()


def test_all_columns_constant_ties_every_record():
    original = np.full((4, 2), 3.0)
    released = np.arange(8.0).reshape(4, 2)
    assert risk.record_linkage(original, released, per_record=True).tolist() == [0.25] * 4


def test_rank_linkage_ignores_monotone_rescaling():
    rng = np.random.default_rng(5)
    original = rng.normal(size=(300, 3))
    released = original + rng.normal(0, 0.3, original.shape)
    got = risk.record_linkage(original, np.exp(released), method="rank")
    expected = risk.record_linkage(original, released, method="rank")
    assert got == expected
    assert risk.record_linkage(original, np.exp(released)) < expected  # values: not invariant


def test_threads_do_not_change_the_scores():
    rng = np.random.default_rng(6)
    n = _linkage.CHUNK * 2 + 123
    original = rng.normal(size=(n, 3))
    released = original + rng.normal(0, 0.5, original.shape)
    one = risk.record_linkage(original, released, per_record=True, n_threads=1)
    two = risk.record_linkage(original, released, per_record=True, n_threads=2)
    np.testing.assert_array_equal(one, two)
    some = (one > 0) & (one < 1)
    assert one.min() == 0.0 and one.max() == 1.0 and not some.any()


def test_mid_ranks_match_the_reference():
    values = np.array([3.0, 1.0, 3.0, 2.0, 3.0, -1.0])
    assert _linkage.mid_ranks(values).tolist() == reference.mid_ranks(values.tolist())


TAXONOMY = Taxonomy.from_mapping(
    {"*": {"north": ["oslo", "bergen"], "south": ["rome", "naples", "bari"], "alone": None}}
)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20), st.integers(0, 2**32 - 1), st.booleans())
def test_categorical_columns_use_the_semantic_distance(n, seed, with_numeric):
    rng = np.random.default_rng(seed)
    labels = np.array(TAXONOMY.domain, dtype=object)
    codes = rng.integers(0, len(labels), n)
    new_codes = np.where(rng.random(n) < 0.5, codes, rng.integers(0, len(labels), n))
    original = pd.DataFrame({"city": labels[codes]})
    released = pd.DataFrame({"city": labels[new_codes]})
    numeric_o, numeric_r = [], []
    if with_numeric:
        original["x"] = rng.integers(0, 3, n).astype(float)
        released["x"] = original["x"] + rng.integers(-1, 2, n)
        numeric_o, numeric_r = [original["x"].tolist()], [released["x"].tolist()]
    with _leaves(2):
        got = risk.record_linkage(
            original, released, taxonomies={"city": TAXONOMY}, per_record=True
        )
    expected = reference.record_linkage(
        numeric_o,
        numeric_r,
        original_codes=[TAXONOMY.encode(original["city"]).tolist()],
        released_codes=[TAXONOMY.encode(released["city"]).tolist()],
        costs=[reference.semantic_costs(TAXONOMY)],
    )
    assert got.tolist() == expected


def test_inputs_of_every_kind_give_the_same_linkage():
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(rng.normal(size=(50, 2)), columns=["a", "b"])
    noisy = frame + rng.normal(0, 0.7, frame.shape)
    expected = risk.record_linkage(frame.to_numpy(), noisy.to_numpy())
    assert risk.record_linkage(frame, noisy) == expected
    assert risk.record_linkage(pa.Table.from_pandas(frame), pa.Table.from_pandas(noisy)) == expected
    one = risk.record_linkage(frame["a"], noisy["a"])
    assert one == risk.record_linkage(frame["a"].to_numpy(), noisy["a"].to_numpy())
    assert risk.record_linkage(frame, noisy, columns=["a"]) == one
    polars = pytest.importorskip("polars")
    assert risk.record_linkage(polars.from_pandas(frame), polars.from_pandas(noisy)) == expected


def test_read_only_inputs_are_read_and_never_written():
    rng = np.random.default_rng(9)
    original = rng.normal(size=(40, 2))
    released = original + rng.normal(0, 0.5, original.shape)
    before = original.copy(), released.copy()
    original.setflags(write=False)
    released.setflags(write=False)
    risk.risk_summary(original, released, quasi_identifiers=[0], k=2, width=0.5)
    np.testing.assert_array_equal(original, before[0])
    np.testing.assert_array_equal(released, before[1])


# -- releases: row alignment -------------------------------------------------------------

BOUNDS = {"a": (0.0, 100.0), "b": (0.0, 100.0)}


def _people(n=60):
    rng = np.random.default_rng(10)
    return pd.DataFrame({"a": rng.uniform(0, 100, n), "b": rng.uniform(0, 100, n)})


def _released(method):
    data = _people()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "mdav": lambda: dpfast.mdav(data, k=3),
            "k_noise": lambda: dpfast.k_noise(data, k=3, seed=1),
            "individual_ranking": lambda: dpfast.individual_ranking(data, k=3),
            "laplace_dp": lambda: dpfast.laplace_dp(data, epsilon=1, bounds=BOUNDS, seed=1),
            "ir_dp_records_in_order": lambda: dpfast.ir_dp(
                data, k=3, epsilon=1, bounds=BOUNDS, seed=1, linkage="records", shuffle=False
            ),
            "ir_dp": lambda: dpfast.ir_dp(data, k=3, epsilon=1, bounds=BOUNDS, seed=1),
            "ir_dp_records": lambda: dpfast.ir_dp(
                data, k=3, epsilon=1, bounds=BOUNDS, seed=1, linkage="records"
            ),
            "mdav_dp": lambda: dpfast.mdav_dp(data, k=10, epsilon=1, bounds=BOUNDS, seed=1),
            "laplace_shuffle": lambda: dpfast.laplace_dp(
                data.assign(c=1.0),
                columns=["a", "b"],
                epsilon=1,
                bounds=BOUNDS,
                seed=1,
                unprotected="shuffle",
            ),
        }[method]()


@pytest.mark.parametrize(
    "method", ["mdav", "k_noise", "individual_ranking", "laplace_dp", "ir_dp_records_in_order"]
)
def test_releases_that_keep_the_row_order_are_measured_on_their_data(method):
    release = _released(method)
    got = risk.record_linkage(_people(), release)
    assert got == risk.record_linkage(_people(), release.data)
    summary = risk.risk_summary(_people(), release)
    assert summary["record_linkage"]["distance"] == got


@pytest.mark.parametrize(
    ("method", "why"),
    [
        ("ir_dp", "linkage='columns'"),
        ("ir_dp_records", "shuffle=True"),
        ("mdav_dp", "shuffle=True"),
        ("laplace_shuffle", "unprotected='shuffle'"),
    ],
)
def test_shuffled_releases_are_refused_with_the_reason(method, why):
    release = _released(method)
    for measure in (
        lambda: risk.record_linkage(_people(), release),
        lambda: risk.interval_disclosure(_people(), release),
        lambda: risk.neighbourhood_counts(_people(), release, "a", width=1.0),
        lambda: risk.risk_summary(_people(), release),
    ):
        with pytest.raises(ValueError, match="row-aligned") as info:
            measure()
        assert isinstance(info.value, DPFastError)
        assert why in str(info.value)
        assert "Release it again with risk=True" in str(info.value)
    # uniqueness needs no alignment: any table, in any order
    assert risk.uniqueness(release, ["a"], k=2).n_records == 60


def test_unknown_release_methods_are_refused():
    report = types.SimpleNamespace(method="diffgen", parameters={}, unprotected=None)
    fake = types.SimpleNamespace(report=report, data=_people())
    _error(ValueError, lambda: risk.record_linkage(_people(), fake), "whether a 'diffgen'")
    assert risk.record_linkage(_people(), fake.data) == 1.0


# -- interval disclosure ------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    aligned_tables(max_columns=1),
    st.sampled_from([0, 1, 10, 25, 50, 100]),
    st.sampled_from(["rank", "value"]),
)
def test_interval_disclosure_matches_the_reference(tables, p, method):
    original, released = tables
    got = risk.interval_disclosure(original, released, p=p, method=method)
    expected = reference.interval_disclosure(
        original[:, 0].tolist(), released[:, 0].tolist(), p, method
    )
    assert got == {0: pytest.approx(expected, abs=1e-15)}


def test_interval_disclosure_by_hand():
    x = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    y = np.array([11.0, 35.0, 30.0, 60.0, 50.0])
    # value, 10%: |10-11| <= 1.1, |20-35| > 3.5, 0 <= 3, 20 > 6, 0 <= 5
    assert risk.interval_disclosure(x, y, p=10, method="value") == {0: 0.6}
    # rank, w = floor(20% of 5) = 1: 11 -> [10, 20]; 35 -> [30, 40] misses 20; 30 -> [20, 40];
    # 60 -> [50, 50] misses 40; 50 -> [40, 50]
    assert risk.interval_disclosure(x, y, p=20, method="rank") == {0: 0.6}
    assert risk.interval_disclosure(x, y, p=0, method="rank") == {0: 0.4}
    assert risk.interval_disclosure(x, y, p=100, method="rank") == {0: 1.0}


def test_interval_disclosure_per_column_and_constant_columns():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "c": [5.0, 5.0, 5.0]})
    got = risk.interval_disclosure(frame, frame.assign(a=[3.0, 2.0, 1.0]), p=0)
    assert got == {"a": pytest.approx(1 / 3), "c": 1.0}


# -- uniqueness ---------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 60), st.integers(1, 4), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_uniqueness_matches_the_reference(n, m, k, seed):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"q{j}": rng.integers(0, 3, n) for j in range(m)})
    frame["q0"] = np.array(["f", "m", "x"], dtype=object)[frame["q0"]]
    got = risk.uniqueness(frame, list(frame.columns), k=k)
    expected = reference.class_sizes(list(frame.itertuples(index=False, name=None)))
    assert got.class_sizes.tolist() == expected
    assert got.sample_uniques == expected.count(1)
    assert got.records_below_k == sum(1 for s in expected if s < k)
    assert got.share_below_k == pytest.approx(got.records_below_k / n)
    assert got.n_classes == len(set(frame.itertuples(index=False, name=None)))
    assert got.smallest_class == min(expected)


def test_uniqueness_of_every_input_kind_and_dtype():
    frame = pd.DataFrame(
        {
            "sex": pd.Categorical(["f", "f", "m", "m", "m"]),
            "age": [30, 30, 41, 41, 52],
            "weight": [60.5, 60.5, 80.0, 80.0, 80.0],
            "flag": [True, True, False, False, False],
        }
    )
    expected = [2, 2, 2, 2, 1]
    for table in (frame, pa.Table.from_pandas(frame)):
        got = risk.uniqueness(table, ["sex", "age", "weight", "flag"], k=2)
        assert got.class_sizes.tolist() == expected
    numbers = frame[["age", "weight"]].to_numpy()
    assert risk.uniqueness(numbers, [0, 1], k=2).class_sizes.tolist() == expected
    got = risk.uniqueness(frame, "sex", k=3)
    assert got.class_sizes.tolist() == [2, 2, 3, 3, 3] and got.share_below_k == 0.4


def test_uniqueness_renumbers_keys_that_would_overflow():
    rng = np.random.default_rng(11)
    n = 3000  # 6 columns of ~3000 distinct values: 3000**6 > 2**62
    frame = pd.DataFrame({f"q{j}": rng.integers(0, 10**9, n) for j in range(6)})
    frame.iloc[1] = frame.iloc[0]
    got = risk.uniqueness(frame, list(frame.columns), k=2)
    expected = reference.class_sizes(list(frame.itertuples(index=False, name=None)))
    assert got.class_sizes.tolist() == expected
    assert got.sample_uniques == n - 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2**40, 2**62 - 1, 12345, 3 << 33]), min_size=1, max_size=80))
def test_class_sizes_kernel_matches_the_reference(keys):
    # few distinct keys, some far apart and some colliding in the table: probing is exercised
    got, n_classes = frequencies.class_sizes(np.array(keys, dtype=np.int64))
    assert got.tolist() == reference.class_sizes(keys)
    assert n_classes == len(set(keys))


def test_uniqueness_as_dict_is_json():
    got = risk.uniqueness(pd.DataFrame({"a": [1, 1, 2]}), ["a"], k=2).as_dict()
    assert json.loads(json.dumps(got)) == {
        "quasi_identifiers": ["a"],
        "k": 2,
        "n_records": 3,
        "n_classes": 2,
        "sample_uniques": 1,
        "records_below_k": 1,
        "share_below_k": pytest.approx(1 / 3),
        "smallest_class": 1,
    }


# -- neighbourhood counts -----------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(aligned_tables(max_columns=1), st.sampled_from([0.0, 0.5, 1.0, 2.5, 1e-9]))
def test_neighbourhood_counts_match_the_reference(tables, width):
    original, released = tables
    got = risk.neighbourhood_counts(original, released, 0, width=width, k=2)
    expected = reference.neighbourhood_counts(
        original[:, 0].tolist(), released[:, 0].tolist(), width
    )
    assert got.counts.tolist() == expected
    assert got.minimum == min(expected)
    assert got.median == np.median(expected)
    assert got.share_below_k == sum(1 for c in expected if c < 2) / len(expected)


def test_neighbourhood_counts_are_exact_at_the_boundary():
    # 0.1 + 0.2 - 0.3 rounds above 0: width 0.3 must follow |x - y| <= width as computed
    x = np.array([0.1, 0.4, 0.7])
    y = np.array([0.4, 0.1, 0.4])
    got = risk.neighbourhood_counts(x, y, 0, width=0.3)
    expected = reference.neighbourhood_counts(x.tolist(), y.tolist(), 0.3)
    assert got.counts.tolist() == expected and got.share_below_k is None


def test_neighbourhood_counts_of_a_k_noise_release():
    data = _people(400)[["a"]]
    release = dpfast.k_noise(data, k=5, seed=3)
    delta = release.private.to_dict()["deltas"]["a"]
    got = risk.neighbourhood_counts(data, release, "a", width=2 * delta, k=5)
    # Theorem 1 bounds the expectation by k/2; in practice few values fall below k
    assert got.median >= 5 and got.share_below_k < 0.5


# -- the summary --------------------------------------------------------------------------


def test_risk_summary_holds_every_measure_as_json():
    rng = np.random.default_rng(12)
    original = pd.DataFrame(
        {
            "age": rng.integers(20, 60, 80),
            "income": rng.normal(3000, 500, 80),
            "city": rng.choice(list(TAXONOMY.domain), 80),
            "note": ["x"] * 80,
        }
    )
    released = original.assign(income=original["income"] + rng.normal(0, 100, 80))
    got = risk.risk_summary(
        original,
        released,
        taxonomies={"city": TAXONOMY},
        quasi_identifiers=["age", "city"],
        k=3,
        width={"income": 50.0},
    )
    assert json.loads(json.dumps(got, allow_nan=False)) == got
    assert got["columns"] == ["age", "income", "city"]
    assert got["skipped_columns"] == {"note": "not numeric and no taxonomy (no distance)"}
    compared = ["age", "income", "city"]
    for method in ("distance", "rank"):
        expected = risk.record_linkage(
            original, released, columns=compared, method=method, taxonomies={"city": TAXONOMY}
        )
        assert got["record_linkage"][method] == expected
    for method in ("rank", "value"):
        expected = risk.interval_disclosure(
            original, released, columns=["age", "income"], method=method
        )
        assert got["interval_disclosure"][method] == expected
        assert got["interval_disclosure"][f"{method}_mean"] == pytest.approx(
            np.mean(list(expected.values()))
        )
    unique = risk.uniqueness(original, ["age", "city"], k=3).as_dict()
    assert got["uniqueness"] == {"original": unique, "released": unique}
    counts = risk.neighbourhood_counts(original, released, "income", width=50.0, k=3)
    assert got["neighbourhood"] == {"income": counts.as_dict()}


def test_risk_summary_without_optional_measures():
    x = np.arange(12.0).reshape(6, 2)
    got = risk.risk_summary(x, x)
    assert got["uniqueness"] is None and got["neighbourhood"] is None
    assert got["record_linkage"] == {"distance": 1.0, "rank": 1.0}
    assert got["n_records"] == 6 and got["columns"] == ["0", "1"]


# -- bad input ----------------------------------------------------------------------------


def _error(kind, call, match):
    with pytest.raises(kind, match=match) as info:
        call()
    assert isinstance(info.value, DPFastError), type(info.value)


def test_misaligned_lengths_are_refused():
    x, y = np.zeros((5, 2)), np.zeros((4, 2))
    for call in (
        lambda: risk.record_linkage(x, y),
        lambda: risk.interval_disclosure(x, y),
        lambda: risk.neighbourhood_counts(x, y, 0, width=1.0),
        lambda: risk.risk_summary(x, y),
    ):
        _error(ValueError, call, "original has 5 rows and the release 4")


def test_unknown_columns_are_refused():
    frame = pd.DataFrame({"a": [1.0, 2.0]})
    _error(ValueError, lambda: risk.record_linkage(frame, frame, columns=["b"]), "unknown column")
    _error(ValueError, lambda: risk.neighbourhood_counts(frame, frame, "b", width=1.0), "unknown")
    _error(ValueError, lambda: risk.uniqueness(frame, ["b"], k=2), "unknown column")
    other = pd.DataFrame({"b": [1.0, 2.0]})
    _error(ValueError, lambda: risk.record_linkage(other, frame), "not in the original")
    _error(
        ValueError,
        lambda: risk.record_linkage(frame, frame, taxonomies={"z": TAXONOMY}),
        "does not have",
    )


def test_nan_and_infinity_are_refused():
    good = pd.DataFrame({"a": [1.0, 2.0, 3.0]})
    bad = pd.DataFrame({"a": [1.0, np.nan, 3.0]})
    match = "column 'a' of the released table has 1 NaN or infinite value"
    _error(ValueError, lambda: risk.record_linkage(good, bad), match)
    _error(ValueError, lambda: risk.interval_disclosure(good, bad), match)
    _error(ValueError, lambda: risk.neighbourhood_counts(good, bad, "a", width=1.0), match)
    inf = pd.DataFrame({"a": [1.0, 2.0, np.inf]})
    _error(ValueError, lambda: risk.record_linkage(inf, good), "of the original table")
    _error(ValueError, lambda: risk.uniqueness(bad, ["a"], k=2), "1 missing value")
    constant = pd.DataFrame({"a": [1.0, 1.0, 1.0]})  # left out of the distance, still checked
    _error(ValueError, lambda: risk.record_linkage(constant, bad), match)


def test_text_columns_need_a_taxonomy():
    frame = pd.DataFrame({"a": [1.0, 2.0], "city": ["oslo", "rome"]})
    _error(TypeError, lambda: risk.record_linkage(frame, frame), "pass its taxonomy in taxonomies=")
    _error(TypeError, lambda: risk.interval_disclosure(frame, frame), "needs numbers")
    _error(TypeError, lambda: risk.neighbourhood_counts(frame, frame, "city", width=1), "numbers")
    _error(
        ValueError,
        lambda: risk.record_linkage(
            frame, frame.assign(city=["oslo", "paris"]), taxonomies={"city": TAXONOMY}
        ),
        "paris",
    )
    assert risk.record_linkage(frame, frame, taxonomies={"city": TAXONOMY}) == 1.0


def test_bad_arguments_are_refused():
    x = np.arange(6.0).reshape(3, 2)
    _error(ValueError, lambda: risk.record_linkage(x, x, method="nearest"), "method")
    _error(TypeError, lambda: risk.record_linkage(x, x, per_record=1), "per_record")
    _error(ValueError, lambda: risk.record_linkage(x, x, n_threads=0), "n_threads")
    _error(ValueError, lambda: risk.interval_disclosure(x, x, p=101), r"\[0, 100\]")
    _error(TypeError, lambda: risk.interval_disclosure(x, x, p="10"), "percentage")
    _error(ValueError, lambda: risk.interval_disclosure(x, x, method="sd"), "method")
    _error(ValueError, lambda: risk.neighbourhood_counts(x, x, 0, width=-1.0), ">= 0")
    _error(ValueError, lambda: risk.neighbourhood_counts(x, x, 0, width=1.0, k=0), "k")
    _error(ValueError, lambda: risk.uniqueness(x, [0], k=0), "k")
    _error(ValueError, lambda: risk.risk_summary(x, x, quasi_identifiers=[0]), "needs k=")
    _error(TypeError, lambda: risk.record_linkage("table", x), "original")
    empty = np.zeros((0, 2))
    _error(ValueError, lambda: risk.record_linkage(empty, empty), "empty")
    _error(ValueError, lambda: risk.uniqueness(empty, [0], k=1), "empty")
    text = pd.DataFrame({"note": ["a", "b", "c"]})
    _error(ValueError, lambda: risk.risk_summary(text, text), "no column to compare")


def test_shares_are_probabilities():
    rng = np.random.default_rng(13)
    x = rng.normal(size=(30, 2))
    y = rng.normal(size=(30, 2))
    got = risk.risk_summary(x, y, quasi_identifiers=[0], k=2, width=0.1)
    for value in (*got["record_linkage"].values(), got["interval_disclosure"]["rank_mean"]):
        assert 0.0 <= value <= 1.0 and not math.isnan(value)
