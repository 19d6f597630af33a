"""Taxonomies: construction, validation, distances, marginality, order, helpers."""

import math
import random
from pathlib import Path

import numpy as np
import pytest

from dpfast.datasets import ADULT_HIERARCHIES, adult, adult_hierarchy_path, adult_taxonomy
from dpfast.partitions.categorical import cluster_centroids, cluster_quality
from dpfast.taxonomy import Taxonomy, TaxonomyError
from tests.reference import taxonomy_reference as ref

# A small taxonomy written out by hand:
#   *
#   ├── A
#   │   ├── A1: a11, a12
#   │   └── a2
#   ├── B: b1, b2
#   └── c
SMALL = {"*": {"A": {"A1": ["a11", "a12"], "a2": None}, "B": ["b1", "b2"], "c": None}}
SMALL_PARENTS = {
    "*": None,
    "A": "*",
    "B": "*",
    "c": "*",
    "A1": "A",
    "a2": "A",
    "a11": "A1",
    "a12": "A1",
    "b1": "B",
    "b2": "B",
}
L = math.log2


@pytest.fixture(scope="module")
def small():
    return Taxonomy.from_mapping(SMALL, name="small")


def test_small_tree_structure(small):
    assert small.domain == ("a11", "a12", "a2", "b1", "b2", "c")
    assert small.root == "*"
    assert small.labels[0] == "*"
    assert small.height == 3
    assert [small.labels[i] for i in small.children("*")] == ["A", "B", "c"]
    assert [small.labels[i] for i in small.ancestors("a11")] == ["a11", "A1", "A", "*"]
    assert small.depth[small.node("a11")] == 3
    assert small.parent[small.node("A1")] == small.node("A")
    assert small.parent[0] == -1
    assert small.leaves_under("A").tolist() == [0, 1, 2]
    assert small.leaves_under("b2").tolist() == [4]
    assert small.leaves_under("*").tolist() == list(range(6))
    assert small.is_leaf("c") and not small.is_leaf("B")
    assert small.code("b1") == 3
    assert "A1" in small and "zz" not in small
    assert len(small) == 6


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("a11", "a11", 0.0),
        ("a11", "a12", L(1 + 2 / 5)),  # union {a11 a12 A1 A *}, intersection {A1 A *}
        ("a11", "a2", L(1 + 3 / 5)),  # union {a11 A1 A * a2}, intersection {A *}
        ("a11", "b1", L(1 + 5 / 6)),  # union {a11 A1 A * b1 B}, intersection {*}
        ("a11", "c", L(1 + 4 / 5)),
        ("a2", "b1", L(1 + 4 / 5)),
        ("a2", "c", L(1 + 3 / 4)),
        ("b1", "b2", L(1 + 2 / 4)),
        ("b1", "c", L(1 + 3 / 4)),
        ("A", "a11", L(1 + 2 / 4)),  # internal nodes too: union {a11 A1 A *}, intersection {A *}
    ],
)
def test_hand_computed_distances(small, a, b, expected):
    got = small.distance(a, b)
    assert got == pytest.approx(expected, abs=1e-15)
    assert small.distance(b, a) == got


def test_hand_computed_marginality_boundary_and_order(small):
    expected = {
        "a11": L(1.4) + L(1.6) + 2 * L(11 / 6) + L(1.8),
        "a12": L(1.4) + L(1.6) + 2 * L(11 / 6) + L(1.8),
        "a2": 2 * L(1.6) + 2 * L(1.8) + L(1.75),
        "b1": 2 * L(11 / 6) + L(1.8) + L(1.5) + L(1.75),
        "b2": 2 * L(11 / 6) + L(1.8) + L(1.5) + L(1.75),
        "c": 2 * L(1.8) + 3 * L(1.75),
    }
    got = small.marginality()
    for label, value in expected.items():
        assert got[small.code(label)] == pytest.approx(value, abs=1e-12)
    assert got[0] == got[1]  # symmetric leaves tie exactly (fsum)
    assert small.most_marginal == "c"
    # t*: farthest from c; a11 and a12 tie at log2(1.8), the lower label wins
    assert small.boundary == ("c", "a11")
    # Δq is the largest distance over all pairs (a11-b1), not δ(v*, t*)
    assert small.max_distance == pytest.approx(L(11 / 6))
    assert small.order() == ("c", "a2", "b1", "b2", "a11", "a12")
    assert small.rank[small.code("c")] == 0
    assert small.rank[small.code("a12")] == 5


def test_marginality_of_a_multiset(small):
    values = ["a11", "a11", "c", "b2"]
    got = small.marginality(values)
    expected = [
        math.fsum(ref.distance(SMALL_PARENTS, a, b) for b in values if b != a) for a in small.domain
    ]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def _random_tree(rng, n_leaves):
    parents = {"*": None}
    internal = ["*"]
    leaves = []
    for i in range(n_leaves):
        parent = rng.choice(internal)
        if rng.random() < 0.3:
            node = f"g{i}"
            parents[node] = parent
            internal.append(node)
            parent = node
        leaf = f"v{rng.randrange(10**6):06d}_{i}"
        parents[leaf] = parent
        leaves.append(leaf)
    # internal nodes without leaves become leaves themselves
    has_child = {p for p in parents.values() if p is not None}
    domain = sorted(label for label in parents if label not in has_child)
    return parents, domain


def _edges(parents):
    has_child = {p for p in parents.values() if p is not None}
    edges = [(c, p, "test") for c, p in parents.items() if p is not None]
    leaves = [(c, "test") for c in parents if c not in has_child]
    return edges, leaves


@pytest.mark.parametrize("seed", range(8))
def test_distance_matrix_matches_the_set_reference(seed):
    rng = random.Random(seed)
    parents, domain = _random_tree(rng, rng.randrange(1, 90))
    tax = Taxonomy.from_edges(*_edges(parents))
    assert tax.domain == tuple(domain)
    got = tax.distance_matrix()
    expected = np.array(ref.distance_matrix(parents, domain))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(tax.marginality(), ref.marginality(parents, domain), atol=1e-12)
    assert tax.order() == tuple(ref.order(parents, domain))


@pytest.mark.parametrize("column", sorted(ADULT_HIERARCHIES))
def test_adult_hierarchies_match_the_reference(column):
    tax = adult_taxonomy(column)
    parents = {tax.labels[i]: (tax.labels[p] if p >= 0 else None) for i, p in enumerate(tax.parent)}
    np.testing.assert_array_equal(
        tax.distance_matrix(), np.array(ref.distance_matrix(parents, list(tax.domain)))
    )
    assert tax.order() == tuple(ref.order(parents, list(tax.domain)))


def test_adult_hierarchies_cover_the_data():
    frame = adult("train", drop_missing=True)
    for column in [
        "workclass",
        "education",
        "marital-status",
        "occupation",
        "race",
        "sex",
        "native-country",
        "income",
    ]:
        codes = adult_taxonomy(column).encode(frame[column])
        assert codes.shape == (len(frame),)
    countries = adult_taxonomy("native-country")
    assert len(countries) == 41
    assert countries.boundary[0] == "South"  # alone under Africa
    assert len(adult_taxonomy("occupation")) == 14
    assert adult_hierarchy_path("income").name == "adult_hierarchy_salary-class.csv"


def test_arx_file_reading(tmp_path: Path):
    path = tmp_path / "h.csv"
    # consecutive repeats are one node; spaces are stripped; blank lines skipped
    path.write_text("x ; X;X;*\ny;X;X;*\n\nz;z;Z;*", encoding="utf-8")
    tax = Taxonomy.from_arx(path)
    assert tax.domain == ("x", "y", "z")
    assert [tax.labels[i] for i in tax.ancestors("x")] == ["x", "X", "*"]
    assert [tax.labels[i] for i in tax.ancestors("z")] == ["z", "Z", "*"]


BAD_ARX = {
    "duplicate leaf": ("a;A;*\nb;A;*\na;A;*\n", "duplicate leaf 'a' (line 1 and line 3)"),
    "two parents": ("a;A;*\nb;B;*\nc;A;B;*\n", "'A' has two parents"),
    "cycle": ("a;A;B;*\nb;B;A;*\n", "has two parents"),
    "two roots": ("a;A;*\nb;B;top\n", "exactly one root, found 2"),
    "leaf is a generalisation": ("a;A;*\nb;a;*\n", "'a' is a leaf (line 1) and also"),
    "empty cell": ("a;;*\n", "line 1 has an empty cell"),
    "one cell": ("a;A;*\nb\n", "line 2 holds only 'b'"),
    "empty file": ("\n\n", "no hierarchy lines"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARX))
def test_bad_arx_files(tmp_path: Path, case):
    text, match = BAD_ARX[case]
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaxonomyError, match=match.replace("(", r"\(").replace(")", r"\)")):
        Taxonomy.from_arx(path)


@pytest.mark.parametrize(
    ("mapping", "error", "match"),
    [
        ({"*": {"A": ["a"], "B": ["a"]}}, TaxonomyError, "duplicate leaf 'a'"),
        ({"*": {"A": {"B": ["A"]}}}, TaxonomyError, "'A' is a leaf"),
        ({"*": {"A": ["a"], "B": {"A": ["b"]}}}, TaxonomyError, "'A' appears twice"),
        ({"*": ["a"], "+": ["b"]}, TaxonomyError, "exactly one root, got 2 keys"),
        ({"*": {"A": [1, 2]}}, TypeError, "labels must be non-empty strings"),
        ({"*": {"A": 3}}, TypeError, "must be a mapping, a list of labels or None"),
        (["a"], TypeError, "expected a mapping"),
    ],
)
def test_bad_mappings(mapping, error, match):
    with pytest.raises(error, match=match):
        Taxonomy.from_mapping(mapping)


def test_cycles_are_errors():
    edges = [("a", "*", "1"), ("x", "y", "2"), ("y", "x", "3")]
    with pytest.raises(TaxonomyError, match="cycle through 'x', 'y'"):
        Taxonomy.from_edges(edges, [("a", "1")])
    with pytest.raises(TaxonomyError, match="no root"):
        Taxonomy.from_edges([("x", "y", "1"), ("y", "x", "2")], [])
    with pytest.raises(TaxonomyError, match="its own parent"):
        Taxonomy.from_edges([("x", "x", "1")], [])


def test_unknown_and_missing_values_are_listed(small):
    with pytest.raises(TaxonomyError, match=r"2 value\(s\) missing from the taxonomy: 'q', 'zz'"):
        small.encode(["a11", "zz", "q", "zz"], column="job")
    with pytest.raises(TaxonomyError, match=r"generalisation\(s\) instead of leaves: 'A1'"):
        small.encode(["a11", "A1"])
    with pytest.raises(TaxonomyError, match=r"column 'job' has 1 missing value"):
        small.encode(["a11", None], column="job")
    with pytest.raises(TaxonomyError, match="not a leaf"):
        small.code("A")
    with pytest.raises(TaxonomyError, match="has no value 'nope'"):
        small.node("nope")
    assert small.encode(np.array(["c", "a11"], dtype=object)).tolist() == [5, 0]


def test_numbers_match_labels_by_text():
    ages = Taxonomy.from_arx(adult_hierarchy_path("age"))
    assert ages.encode(np.array([17, 90])).tolist() == [ages.code("17"), ages.code("90")]


def test_taxonomy_is_immutable(small):
    with pytest.raises(AttributeError):
        small.name = "x"
    with pytest.raises(ValueError, match="read-only"):
        small.distance_matrix()[0, 0] = 1.0


def test_cluster_quality_and_centroid(small):
    codes = np.array([0, 1, 1, 5, 3, 4])
    labels = np.array([0, 0, 0, 1, 1, 1])
    got = cluster_quality(small, codes, labels, 2)
    matrix = small.distance_matrix()
    expected = np.array(
        [[-sum(matrix[c, x] for x in codes[labels == g]) for c in range(6)] for g in range(2)]
    )
    np.testing.assert_allclose(got, expected, atol=1e-12)
    # cluster 0 = {a11, a12, a12}: a12 is the most central; cluster 1 = {c, b1, b2}: b1/b2
    # tie (b1 is the lower code)
    assert cluster_centroids(small, codes, labels, 2).tolist() == [1, 3]


def test_normalised_distance(small):
    codes = np.arange(6)
    got = small.normalised_distance(codes, "c")
    expected = small.distance_matrix()[:, 5] / small.distance("c", "a11")
    np.testing.assert_allclose(got, expected)
    assert got.max() == 1.0
    single = Taxonomy.from_mapping({"*": ["only"]})
    assert single.normalised_distance(np.zeros(3, dtype=np.int64), "only").tolist() == [0, 0, 0]
    assert single.max_distance == 0.0


def test_broadcast_rank_groups(small):
    # order: c a2 b1 b2 a11 a12 -> codes 5 2 3 4 0 1
    codes = np.array([0, 5, 5, 3, 2, 1, 5])
    # sorted by rank (ties by row): rows 1, 2, 6 (c), 4 (a2), 3 (b1), 0 (a11), 5 (a12)
    got = small.broadcast_rank_groups(codes, 3, np.array([10, 20]))
    assert got.tolist() == [20, 10, 10, 20, 20, 20, 10]
    destination = np.array([6, 5, 4, 3, 2, 1, 0])
    shuffled = small.broadcast_rank_groups(codes, 3, np.array([10, 20]), destination)
    assert shuffled.tolist() == got[::-1].tolist()
    # the remainder in group 0: sorted positions 0 .. 3 (rows 1, 2, 6, 4), then 4 .. 6
    first = small.broadcast_rank_groups(codes, 3, np.array([10, 20]), big=0)
    assert first.tolist() == [20, 10, 10, 20, 10, 20, 10]
    # n = 10, k = 3 and the remainder in the middle group: sizes 3, 4, 3
    codes = np.array([5, 5, 5, 2, 2, 3, 3, 4, 0, 1])
    got = small.broadcast_rank_groups(codes, 3, np.array([10, 20, 30]), big=1)
    assert got.tolist() == [10, 10, 10, 20, 20, 20, 20, 30, 30, 30]


def test_taxonomy_pickles_by_its_tree_and_is_checked_again_on_load():
    import pickle

    from dpfast.datasets import adult_taxonomy

    taxonomy = adult_taxonomy("occupation")
    copy = pickle.loads(pickle.dumps(taxonomy))
    assert copy is not taxonomy
    assert (copy.name, copy.domain, copy.labels) == (
        taxonomy.name,
        taxonomy.domain,
        taxonomy.labels,
    )
    np.testing.assert_array_equal(copy.distance_matrix(), taxonomy.distance_matrix())
    with pytest.raises(AttributeError, match="immutable"):
        copy.name = "changed"
