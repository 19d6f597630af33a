"""The exponential-mechanism sampler and categorical columns in ir_dp."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

import dpfast
from dpfast import metrics, noise
from dpfast.datasets import adult_taxonomy
from dpfast.partitions.categorical import distance_units
from dpfast.taxonomy import Taxonomy, TaxonomyError
from tests.reference import exponential_reference as eref
from tests.reference import taxonomy_reference as ref

# these tests exercise the record-linked release (linkage="records") on purpose
pytestmark = pytest.mark.filterwarnings("ignore::dpfast.exceptions.UnprovenReleaseWarning")

JOBS = {
    "*": {
        "Technical": ["Tech-support", "Craft-repair", "Prof-specialty"],
        "Nontechnical": ["Sales", "Exec-managerial"],
        "Other": ["Armed-Forces"],
    }
}
KEY = noise.NoiseSource.from_seed(99).key("tests", "exponential")
KEY_LIST = [int(w) for w in KEY]


@pytest.fixture(scope="module")
def jobs():
    return Taxonomy.from_mapping(JOBS, name="jobs")


def _parents(tax):
    return {tax.labels[i]: (tax.labels[p] if p >= 0 else None) for i, p in enumerate(tax.parent)}


# --- the sampler ------------------------------------------------------------------------


def _units(matrix):
    return distance_units(np.asarray(matrix))


def test_draws_match_the_reference_one_by_one():
    rng = np.random.default_rng(3)
    quality = -rng.integers(0, 12, size=(40, 7))
    got = noise.exponential_mechanism(KEY, quality, epsilon=1.5, sensitivity=3)
    base = noise.exponential_base(epsilon=1.5, sensitivity=3)
    expected = [
        eref.draw(row.tolist(), base.numerator, base.bits, KEY_LIST, g)
        for g, row in enumerate(quality)
    ]
    assert got.tolist() == expected


def test_chunked_draws_equal_one_call():
    quality = -np.random.default_rng(4).integers(0, 9, size=(50, 5))
    whole = noise.exponential_mechanism(KEY, quality, epsilon=2.0, sensitivity=2)
    parts = [
        noise.exponential_mechanism(KEY, quality[i : i + 7], epsilon=2.0, sensitivity=2, start=i)
        for i in range(0, 50, 7)
    ]
    assert np.concatenate(parts).tolist() == whole.tolist()


def test_extreme_qualities_are_stable():
    big = 2**61
    quality = np.array([[-big, 0, -big], [-3, -3, -3], [big, big - 1, 0]])
    got = noise.exponential_mechanism(KEY, quality, epsilon=1.0, sensitivity=1)
    assert got[0] == 1
    assert 0 <= got[1] <= 2
    assert got[2] in (0, 1)
    with pytest.raises(ValueError, match="2\\*\\*62"):
        noise.exponential_mechanism(KEY, [[-(2**62), 0]], epsilon=1.0, sensitivity=1)
    with pytest.raises(TypeError, match="quality_units"):
        noise.exponential_mechanism(KEY, [[-0.5, 0.0]], epsilon=1.0, sensitivity=1)


@pytest.mark.statistical
@pytest.mark.parametrize("rule", ["paper", "proven"])
def test_em_frequencies_match_exact_probabilities(jobs, rule):
    # one group composition drawn many times: quality of a group of 3 Sales + 2 Tech-support
    matrix = _units(jobs.distance_matrix())
    group = np.array([jobs.code("Sales")] * 3 + [jobs.code("Tech-support")] * 2)
    quality = -matrix[:, group].sum(axis=1)
    n_groups = 100
    sensitivity = int(matrix.max()) * (1 if rule == "paper" else n_groups)
    epsilon = 2.0 if rule == "paper" else 200.0
    draws = 60_000
    got = noise.exponential_mechanism(
        KEY, np.tile(quality, (draws, 1)), epsilon=epsilon, sensitivity=sensitivity
    )
    expected = noise.exponential_probabilities(quality, epsilon=epsilon, sensitivity=sensitivity)
    observed = np.bincount(got, minlength=len(quality))
    assert stats.chisquare(observed, expected * draws).pvalue > 1e-3
    assert expected.max() > 1.5 * expected.min()  # not uniform: the test can see a bias


@pytest.mark.parametrize("big", [None, 0, 5, 9])
def test_sorted_groups_match_per_group_quality_rows(jobs, big):
    matrix = _units(jobs.rank_distance_matrix())
    counts = np.array([7, 0, 11, 1, 1, 23])  # 43 values: ten groups of 4, one of 7
    k = 4
    got = noise.exponential_mechanism_sorted_groups(
        KEY, counts, k, matrix, epsilon=3.0, sensitivity=2000, big=big
    )
    values = np.repeat(np.arange(6), counts)
    n_groups = values.shape[0] // k
    sizes = [k + 3 if g == (n_groups - 1 if big is None else big) else k for g in range(n_groups)]
    starts = np.cumsum([0, *sizes])
    rows = []
    for g in range(n_groups):
        members = values[starts[g] : starts[g + 1]]
        q = np.zeros(6, dtype=np.int64)
        for r in np.unique(members):
            q -= (members == r).sum() * matrix[:, r]
        rows.append(q)
    expected = noise.exponential_mechanism(KEY, np.array(rows), epsilon=3.0, sensitivity=2000)
    assert got.tolist() == expected.tolist()


def test_sampler_rejects_bad_arguments(jobs):
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        noise.exponential_mechanism(KEY, [[0]], epsilon=0.0, sensitivity=1)
    with pytest.raises(ValueError, match="sensitivity must be a finite number > 0"):
        noise.exponential_mechanism(KEY, [[0]], epsilon=1.0, sensitivity=0.0)
    with pytest.raises(ValueError, match="2-D array"):
        noise.exponential_mechanism(KEY, [0, 1], epsilon=1.0, sensitivity=1)
    with pytest.raises(ValueError, match="fewer than k"):
        noise.exponential_mechanism_sorted_groups(
            KEY, [1, 1], 3, np.zeros((2, 2), dtype=np.int64), epsilon=1.0, sensitivity=1
        )
    with pytest.raises(ValueError, match=">= 0"):
        noise.exponential_mechanism_sorted_groups(
            KEY, [1, 1], 1, -np.ones((2, 2), dtype=np.int64), epsilon=1.0, sensitivity=1
        )


# --- ir_dp with categorical columns ---------------------------------------------------------


def _jobs_frame(jobs, n=103, seed=0):
    rng = np.random.default_rng(seed)
    weights = np.array([5, 1, 3, 8, 2, 1], dtype=float)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "job": rng.choice(np.array(jobs.domain), n, p=weights / weights.sum()),
        }
    )


@pytest.mark.parametrize(("rule", "remainder"), [("paper", "middle"), ("proven", "last")])
def test_release_matches_the_reference_with_the_same_draws(jobs, rule, remainder):
    frame = _jobs_frame(jobs)  # 103 rows: 20 groups of 5, one of them of 8
    k = 5
    release = dpfast.ir_dp(
        frame,
        k=k,
        epsilon=3.0,
        taxonomies={"job": jobs},
        sensitivity=rule,
        columns=["job"],
        linkage="records",
        shuffle=False,
        unprotected="keep",
        seed=11,
        remainder=remainder,
    )
    n_groups = len(frame) // k
    units = int(_units(jobs.distance_matrix()).max())
    sensitivity = units * (1 if rule == "paper" else n_groups)
    base = noise.exponential_base(epsilon=3.0, sensitivity=sensitivity)
    key = noise.NoiseSource.from_seed(11).key("ir_dp", "centroid-choice", "job")
    expected = ref.ir_categorical(
        list(frame["job"]),
        list(jobs.domain),
        _parents(jobs),
        k,
        (base.numerator, base.bits),
        [int(w) for w in key],
        remainder,
    )
    assert release.data["job"].tolist() == expected
    pd.testing.assert_series_equal(release.data["age"], frame["age"])
    entry = release.report.ledger[0]
    assert entry.sensitivity == sensitivity * 2.0**-12
    assert entry.details["base"] == base.parameter
    assert entry.details["effective_epsilon"] <= entry.epsilon == 3.0
    assert entry.sampler == noise.EM_SAMPLER_NAME
    assert release.report.sampler == noise.EM_SAMPLER_NAME


@pytest.mark.statistical
@pytest.mark.parametrize("rule", ["paper", "proven"])
def test_release_frequencies_match_exact_probabilities(jobs, rule):
    k, n_groups = 2, 4000
    frame = pd.DataFrame({"job": ["Sales"] * (k * n_groups)})
    epsilon = 3.0 if rule == "paper" else 3.0 * n_groups
    release = dpfast.ir_dp(
        frame,
        k=k,
        epsilon=epsilon,
        taxonomies={"job": jobs},
        sensitivity=rule,
        linkage="records",
        shuffle=False,
        unprotected="keep",
        seed=5,
    )
    chosen = jobs.encode(release.data["job"].to_numpy()[::k])
    units = _units(jobs.distance_matrix())
    quality = -k * units[:, jobs.code("Sales")]
    sensitivity = int(units.max()) * (1 if rule == "paper" else n_groups)
    expected = noise.exponential_probabilities(quality, epsilon=epsilon, sensitivity=sensitivity)
    observed = np.bincount(chosen, minlength=len(jobs))
    assert stats.chisquare(observed, expected * n_groups).pvalue > 1e-3


def test_mixed_release_splits_epsilon_and_labels_the_guarantee(jobs):
    frame = _jobs_frame(jobs)
    with pytest.warns(dpfast.exceptions.UnprovenReleaseWarning, match="heuristic"):
        release = dpfast.ir_dp(
            frame,
            k=5,
            epsilon=1.0,
            bounds={"age": (17, 90)},
            taxonomies={"job": jobs},
            sensitivity="paper",
            seed=1,
        )
    report = json.loads(release.report.to_json())
    assert [e["step"] for e in report["ledger"]] == ["centroid noise", "centroid selection"]
    assert [e["epsilon"] for e in report["ledger"]] == [0.5, 0.5]
    assert report["protected_columns"] == ["age", "job"]
    assert report["guarantee_level"] == "heuristic"
    assert "heuristic" in report["guarantee"] and 'sensitivity="proven"' in report["guarantee"]
    assert report["parameters"]["sensitivity"] == "paper"
    assert noise.EM_SAMPLER_NAME in report["sampler"] and noise.SAMPLER_NAME in report["sampler"]
    proven = dpfast.ir_dp(
        frame,
        k=5,
        epsilon=1.0,
        bounds={"age": (17, 90)},
        taxonomies={"job": jobs},
        linkage="records",
        seed=1,
    )
    assert proven.report.guarantee_level == "as_published"
    default = dpfast.ir_dp(
        frame, k=5, epsilon=1.0, bounds={"age": (17, 90)}, taxonomies={"job": jobs}, seed=1
    )
    assert default.report.guarantee_level == "proven"
    assert default.report.parameters["sensitivity"] == "proven"
    only = dpfast.ir_dp(
        frame[["job"]], k=5, epsilon=1.0, taxonomies={"job": jobs}, sensitivity="proven", seed=1
    )
    assert only.report.guarantee_level == "proven"


def test_shuffled_rows_stay_linked(jobs):
    frame = _jobs_frame(jobs).assign(name=[f"p{i}" for i in range(103)])
    kept = dpfast.ir_dp(
        frame,
        k=5,
        epsilon=1.0,
        taxonomies={"job": jobs},
        columns=["job"],
        linkage="records",
        shuffle=False,
        unprotected="keep",
        seed=2,
    )
    shuffled = dpfast.ir_dp(
        frame,
        k=5,
        epsilon=1.0,
        taxonomies={"job": jobs},
        columns=["job"],
        linkage="records",
        unprotected="keep",
        seed=2,
    )
    by_name = dict(zip(kept.data["name"], kept.data["job"], strict=True))
    assert all(
        by_name[n] == j for n, j in zip(shuffled.data["name"], shuffled.data["job"], strict=True)
    )
    assert shuffled.data["name"].tolist() != frame["name"].tolist()
    columns = dpfast.ir_dp(
        frame,
        k=5,
        epsilon=1.0,
        taxonomies={"job": jobs},
        columns=["job"],
        linkage="columns",
        seed=2,
    )
    assert sorted(columns.data["job"]) == sorted(kept.data["job"])


def test_output_kinds_are_kept(jobs):
    frame = _jobs_frame(jobs)
    arguments = {
        "k": 5,
        "epsilon": 1.0,
        "taxonomies": {"job": jobs},
        "columns": ["job"],
        "seed": 3,
        "linkage": "records",
        "shuffle": False,
        "unprotected": "keep",
    }
    expected = dpfast.ir_dp(frame, **arguments).data["job"].tolist()

    as_category = frame.assign(job=frame["job"].astype("category"))
    out = dpfast.ir_dp(as_category, **arguments).data["job"]
    assert isinstance(out.dtype, pd.CategoricalDtype)
    assert out.tolist() == expected

    table = pa.Table.from_pandas(frame, preserve_index=False)
    out = dpfast.ir_dp(table, **arguments).data.column("job")
    assert out.type == table.column("job").type
    assert out.to_pylist() == expected

    dictionary = table.set_column(1, "job", table.column("job").dictionary_encode())
    out = dpfast.ir_dp(dictionary, **arguments).data.column("job")
    assert pa.types.is_dictionary(out.type)
    assert out.to_pylist() == expected

    array = frame.to_numpy(dtype=object)  # column 1: same key label "1" as the frame below
    numeric_names = pd.DataFrame({0: frame["age"], 1: frame["job"]})
    arguments["taxonomies"], arguments["columns"] = {1: jobs}, [1]
    out = dpfast.ir_dp(array, **arguments).data
    assert out.dtype == object
    assert out[:, 1].tolist() == dpfast.ir_dp(numeric_names, **arguments).data[1].tolist()


def test_metrics_use_the_semantic_distance(jobs):
    frame = _jobs_frame(jobs)
    release = dpfast.ir_dp(
        frame,
        k=5,
        epsilon=1.0,
        taxonomies={"job": jobs},
        bounds={"age": (17, 90)},
        linkage="records",
        shuffle=False,
        unprotected="keep",
        seed=4,
        metrics=True,
    )
    report = release.private.metrics
    got = report["relative_error"]["job"]
    expected = metrics.relative_error(frame["job"], release.data["job"], taxonomies=jobs)
    assert got == pytest.approx(expected)
    assert got == pytest.approx(
        np.mean(
            [jobs.distance(a, b) for a, b in zip(frame["job"], release.data["job"], strict=True)]
        )
    )
    jsd = metrics.jensen_shannon(frame["job"], release.data["job"])  # one bin per category
    assert report["jensen_shannon"]["job"] == pytest.approx(jsd)
    both = metrics.relative_error(
        frame, release.data, {"age": (17, 90)}, taxonomies={"job": jobs}, per_column=True
    )
    assert both["job"] == pytest.approx(got)


def test_unknown_categories_and_bad_arguments(jobs):
    frame = _jobs_frame(jobs)
    bad = frame.assign(job=frame["job"].where(frame.index != 4, "Astronaut"))
    with pytest.raises(
        TaxonomyError,
        match=r"column 'job' holds 1 value\(s\) missing from the "
        r"taxonomy: 'Astronaut'",
    ):
        dpfast.ir_dp(bad, k=5, epsilon=1.0, taxonomies={"job": jobs}, columns=["job"])
    with pytest.raises(ValueError, match="missing value"):
        dpfast.ir_dp(
            frame.assign(job=frame["job"].where(frame.index != 2)),
            k=5,
            epsilon=1.0,
            taxonomies={"job": jobs},
            columns=["job"],
        )
    with pytest.raises(ValueError, match="not protected"):
        dpfast.ir_dp(
            frame,
            k=5,
            epsilon=1.0,
            bounds={"age": (17, 90)},
            taxonomies={"job": jobs},
            columns=["age"],
        )
    with pytest.raises(TypeError, match=r"must be a dpfast\.Taxonomy"):
        dpfast.ir_dp(frame, k=5, epsilon=1.0, taxonomies={"job": 42}, columns=["job"])
    # every function takes the same taxonomy forms: a Taxonomy, a mapping, or a file path
    only = {"columns": ["job"], "seed": 3}
    as_tree = dpfast.ir_dp(frame, k=5, epsilon=1.0, taxonomies={"job": jobs}, **only)
    as_mapping = dpfast.ir_dp(frame, k=5, epsilon=1.0, taxonomies={"job": JOBS}, **only)
    pd.testing.assert_frame_equal(as_tree.data, as_mapping.data)
    with pytest.raises(ValueError, match=r"sensitivity must be one of"):
        dpfast.ir_dp(
            frame, k=5, epsilon=1.0, taxonomies={"job": jobs}, columns=["job"], sensitivity="tight"
        )
    with pytest.raises(TypeError, match="pass its taxonomy in taxonomies="):
        dpfast.ir_dp(frame, k=5, epsilon=1.0, bounds={"age": (17, 90)})
    with pytest.raises(ValueError, match="bounds are required"):
        dpfast.ir_dp(frame, k=5, epsilon=1.0, taxonomies={"job": jobs})


def test_one_leaf_domain_and_k_edge_cases(jobs):
    single = Taxonomy.from_mapping({"*": ["x"]})
    out = dpfast.ir_dp(
        pd.DataFrame({"c": ["x"] * 5}), k=5, epsilon=1.0, taxonomies={"c": single}, seed=0
    )
    assert out.data["c"].tolist() == ["x"] * 5
    frame = _jobs_frame(jobs, n=7)
    for k in (1, 3, 7):
        got = dpfast.ir_dp(
            frame,
            k=k,
            epsilon=1.0,
            taxonomies={"job": jobs},
            columns=["job"],
            linkage="records",
            shuffle=False,
            seed=6,
        ).data["job"]
        assert set(got) <= set(jobs.domain)
        assert got.nunique() <= len(frame) // k


def test_adult_native_country_release():
    from dpfast.datasets import adult

    frame = adult("train", drop_missing=True)[["native-country"]]
    countries = adult_taxonomy("native-country")
    release = dpfast.ir_dp(
        frame,
        k=50,
        epsilon=20.0,
        taxonomies={"native-country": countries},
        sensitivity="paper",
        seed=1,
        metrics=True,
    )
    share = (release.data["native-country"] == "United-States").mean()
    assert share > 0.5  # 91% of the rows; a large ε keeps most groups on their value
    assert release.private.metrics["relative_error"]["native-country"] < 0.3
