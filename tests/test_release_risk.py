"""``risk=`` on the release functions: the risk measures through the release's own order.

A release that shuffles its rows pairs each released row with its source itself; the
measures must then equal the standalone ones on the same release unshuffled (the same
seed without the shuffle, or the rows put back in order by an identifier kept beside
them). The measures go to the private report only.
"""

import json
import warnings

import jsonschema
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import risk
from dpfast.accounting import report_schema
from dpfast.datasets import adult_taxonomy
from dpfast.exceptions import DPFastError

# these tests exercise the record-linked and heuristic releases on purpose
pytestmark = pytest.mark.filterwarnings(
    "ignore::dpfast.exceptions.UnprovenReleaseWarning",
    "ignore::dpfast.exceptions.NoiseDominatesWarning",
)

BOUNDS = {"a": (0.0, 100.0), "b": (0.0, 100.0)}
#: The keys a release's risk has besides those of risk_summary.
RELEASE_KEYS = ("warning", "pairing", "not_measured")


def _people(n=240, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.normal(50, 12, n).clip(0, 100).round(1),
            "b": rng.normal(50, 12, n).clip(0, 100).round(1),
            "zone": rng.integers(0, 6, n),
            "id": np.arange(n),
        }
    )


def _laplace(data, **options):
    """A seeded laplace_dp release of columns a and b of ``data``."""
    return dpfast.laplace_dp(
        data, epsilon=1.0, bounds=BOUNDS, columns=["a", "b"], seed=1, **options
    )


def _mdav_dp(data, epsilon, **options):
    """A seeded mdav_dp release (k = 4) of columns a and b of ``data``."""
    return dpfast.mdav_dp(
        data, k=4, epsilon=epsilon, bounds=BOUNDS, columns=["a", "b"], seed=3, **options
    )


def _summary_part(found):
    """The release's risk without the keys that only a release's risk has."""
    return {key: value for key, value in found.items() if key not in RELEASE_KEYS}


def test_a_shuffled_release_measures_what_its_unshuffled_twin_gives():
    people = _people()
    options = {"quasi_identifiers": ["a", "b"], "k": 3, "width": 2.0, "p": 5}
    common = dict(k=4, epsilon=30.0, bounds=BOUNDS, columns=["a", "b"], linkage="records")
    shuffled = dpfast.ir_dp(people, shuffle=True, seed=7, risk=options, **common)
    in_order = dpfast.ir_dp(people, shuffle=False, seed=7, **common)
    # the same values, only in another row order: the twin is the release unshuffled
    assert not shuffled.data[["a", "b"]].equals(in_order.data[["a", "b"]])
    got = shuffled.private.risk
    expected = risk.risk_summary(
        people[["a", "b"]],
        in_order.data,
        quasi_identifiers=["a", "b"],
        k=3,
        width=2.0,
        p=5,
    )
    assert _summary_part(got) == expected
    assert got["pairing"] == "through the release's order"
    assert got["not_measured"] == {}
    assert 0 < got["record_linkage"]["distance"] < 1
    assert "do not publish" in got["warning"]


def test_mdav_dp_which_always_shuffles_is_paired_through_its_permutation():
    people = _people(seed=1)
    release = _mdav_dp(people, 50.0, unprotected="keep", risk=True)
    assert release.report.parameters["shuffle"] is True
    # the kept identifier puts the rows back in their input order
    unshuffled = release.data.sort_values("id").reset_index(drop=True)
    assert not unshuffled["id"].equals(release.data["id"])
    expected = risk.risk_summary(people, unshuffled, columns=["a", "b"], k=4)
    assert _summary_part(release.private.risk) == expected


@pytest.mark.parametrize("method", ["mdav", "k_noise", "individual_ranking", "laplace_dp"])
def test_a_release_in_input_order_measures_what_the_standalone_functions_give(method):
    people = _people(seed=2)[["a", "b", "zone"]]
    call = {
        "mdav": lambda **kw: dpfast.mdav(people, k=3, columns=["a", "b"], **kw),
        "k_noise": lambda **kw: dpfast.k_noise(people, k=3, columns=["a", "b"], seed=1, **kw),
        "individual_ranking": lambda **kw: dpfast.individual_ranking(
            people, k=3, columns=["a", "b"], **kw
        ),
        "laplace_dp": lambda **kw: dpfast.laplace_dp(
            people,
            epsilon=20.0,
            bounds=BOUNDS,
            columns=["a", "b"],
            seed=1,
            unprotected="keep",
            **kw,
        ),
    }[method]
    release = call(risk={"quasi_identifiers": ["zone", "a"], "k": 2})
    plain = call()
    pd.testing.assert_frame_equal(release.data, plain.data)  # risk changes nothing released
    got = release.private.risk
    assert got["pairing"] == "input order"
    expected = risk.risk_summary(
        people, plain, columns=["a", "b"], quasi_identifiers=["zone", "a"], k=2
    )
    neighbourhood = got.pop("neighbourhood")
    expected.pop("neighbourhood")
    assert _summary_part(got) == {**expected}
    if method == "k_noise":  # the paper's measure by default: 2δ, the method's k
        deltas = release.private.to_dict()["deltas"]
        assert neighbourhood == {
            name: risk.neighbourhood_counts(
                people, plain, name, width=2 * deltas[name], k=2
            ).as_dict()
            for name in ("a", "b")
        }
    else:
        assert neighbourhood is None and "neighbourhood" in got["not_measured"]


def test_the_methods_k_is_the_default_class_size():
    people = _people(seed=3)
    release = dpfast.mdav(people, k=5, columns=["a", "b"], risk={"quasi_identifiers": ["a"]})
    assert release.private.risk["uniqueness"]["released"]["k"] == 5
    assert release.private.risk["uniqueness"]["released"]["share_below_k"] == 0.0


def test_columns_in_orders_of_their_own_are_measured_column_by_column():
    people = _people(seed=4)[["a", "b"]]
    columns = dpfast.ir_dp(people, k=4, epsilon=30.0, bounds=BOUNDS, seed=2, risk=True)
    records = dpfast.ir_dp(
        people, k=4, epsilon=30.0, bounds=BOUNDS, seed=2, linkage="records", shuffle=False
    )
    got = columns.private.risk
    assert got["pairing"] == "column by column"
    assert got["record_linkage"] is None
    assert "orders of their own" in got["not_measured"]["record_linkage"]
    # each column is the same column as the record-linked twin's, paired on its own
    expected = risk.risk_summary(people, records)["interval_disclosure"]
    assert got["interval_disclosure"] == expected


def test_categorical_columns_are_compared_with_their_taxonomy():
    occupations = list(adult_taxonomy("occupation").domain)
    rng = np.random.default_rng(5)
    people = pd.DataFrame({"a": rng.uniform(0, 100, 150), "job": rng.choice(occupations, 150)})
    taxonomies = {"job": adult_taxonomy("occupation")}
    release = dpfast.mdav(people, k=3, taxonomies=taxonomies, risk=True)
    got = release.private.risk
    assert got["columns"] == ["a", "job"]
    expected = risk.risk_summary(people, release, taxonomies=taxonomies)
    assert got["record_linkage"] == expected["record_linkage"]


def test_text_columns_without_a_taxonomy_are_left_out_and_said_so():
    people = pd.DataFrame({"sex": ["f", "m"] * 40, "a": np.arange(80.0)})
    release = dpfast.randomized_response(
        people,
        column="sex",
        domain=["f", "m"],
        epsilon=1.0,
        seed=1,
        risk={"quasi_identifiers": ["sex"], "k": 3},
    )
    got = release.private.risk
    assert got["skipped_columns"] == {"sex": "not numeric and no taxonomy (no distance)"}
    assert got["record_linkage"] is None and got["pairing"] == "none"
    assert got["uniqueness"]["released"] == risk.uniqueness(release.data, ["sex"], k=3).as_dict()


def test_diffgen_counts_the_records_of_its_cells():
    rng = np.random.default_rng(6)
    people = pd.DataFrame(
        {
            "age": rng.integers(17, 91, 300),
            "job": rng.choice(["x", "y"], 300),
            "income": rng.choice(["<=50K", ">50K"], 300),
        }
    )
    release = dpfast.diffgen(
        people,
        target="income",
        epsilon=2.0,
        steps=2,
        bounds={"age": (17, 90)},
        taxonomies={"job": {"any": ["x", "y"]}},
        classes=["<=50K", ">50K"],
        seed=1,
        risk={"quasi_identifiers": ["age", "job"], "k": 5},
    )
    got = release.private.risk
    expected = risk.uniqueness(release.microdata(), ["age", "job"], k=5).as_dict()
    assert got["uniqueness"]["released"] == expected
    assert got["uniqueness"]["original"] == risk.uniqueness(people, ["age", "job"], k=5).as_dict()
    assert got["record_linkage"] is None and got["interval_disclosure"] is None


def test_numpy_input_and_an_unprotected_column_named_for_risk():
    rng = np.random.default_rng(7)
    table = rng.uniform(0, 100, (120, 3))
    release = dpfast.laplace_dp(
        table,
        epsilon=5.0,
        bounds={0: (0, 100), 1: (0, 100)},
        columns=[0, 1],
        seed=2,
        unprotected="keep",
        risk={"columns": [0, 1, 2]},
    )
    got = release.private.risk
    assert got["columns"] == ["0", "1", "2"] and got["pairing"] == "input order"
    assert got["record_linkage"] == risk.risk_summary(table, release.data)["record_linkage"]


def test_risk_stays_out_of_the_public_report_and_the_written_release(tmp_path):
    people = _people(seed=8)
    output = tmp_path / "released.parquet"
    release = _mdav_dp(people, 5.0, output=output, risk={"quasi_identifiers": ["a"]})
    plain = _mdav_dp(people, 5.0)
    pd.testing.assert_frame_equal(release.data, plain.data)  # the same release, bit for bit
    public = release.report.to_json()
    for word in ("risk", "record_linkage", "uniqueness", "interval_disclosure"):
        assert word not in public
    written = pq.read_table(output)
    assert written.column_names == ["a", "b"]
    assert written.num_rows == len(people)
    private = release.private.to_dict()
    assert private["risk"]["record_linkage"] is not None
    assert "risk" in private["timings"]
    jsonschema.validate(private, report_schema("private"))
    assert plain.private.to_dict()["risk"] is None
    json.loads(release.private.to_json())


def test_progress_reports_the_risk_phase():
    seen = []
    dpfast.mdav(
        _people(60),
        k=3,
        columns=["a", "b"],
        risk=True,
        progress=lambda phase, done, total: seen.append((phase, done, total)),
    )
    assert ("risk", 0, 1) in seen and ("risk", 1, 1) in seen


@pytest.mark.parametrize(
    ("value", "kind", "match"),
    [
        ("yes", TypeError, "risk must be True, False or a dict"),
        ({"bogus": 1}, ValueError, r"unknown key\(s\) \['bogus'\]"),
        ({"columns": ["nope"]}, ValueError, r"risk\['columns'\] names column\(s\) \['nope'\]"),
        ({"quasi_identifiers": []}, ValueError, r"risk\['quasi_identifiers'\] is empty"),
        ({"k": 0}, ValueError, r"risk\['k'\] must be an integer >= 1"),
        ({"p": 150}, ValueError, "p must be a percentage"),
        ({"width": -1}, ValueError, "width must be a finite number >= 0"),
        ({"width": {"zone": 1.0}}, ValueError, "not numeric columns compared here"),
    ],
)
def test_bad_risk_values_are_refused(value, kind, match, tmp_path):
    output = tmp_path / "out.csv"
    with pytest.raises(kind, match=match) as info:
        _laplace(_people(40), output=output, risk=value)
    assert isinstance(info.value, DPFastError)
    assert not output.exists()  # refused before anything was published


def test_quasi_identifiers_without_a_class_size_are_refused_when_the_method_has_none():
    with pytest.raises(ValueError, match=r"this method has no k of its own"):
        _laplace(_people(40), risk={"quasi_identifiers": ["zone"]})


def test_a_column_the_release_left_out_is_refused():
    with pytest.raises(ValueError, match=r"does not hold.*unprotected='keep'"):
        _laplace(_people(40), risk={"quasi_identifiers": ["zone"], "k": 2})


def test_out_of_core_releases_refuse_risk(tmp_path):
    source = tmp_path / "people.parquet"
    _people(50).to_parquet(source)
    with pytest.raises(ValueError, match=r"risk=True pairs each released row") as info:
        _laplace(str(source), output=tmp_path / "out.parquet", risk=True)
    assert "in memory" in str(info.value)
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize("engine", ["spark", "dask"])
def test_cluster_engines_refuse_risk_before_touching_the_cluster(engine):
    from dpfast.engines import open_engine

    with pytest.raises(ValueError, match=r"risk=True pairs each released row with its source"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            open_engine(object(), method="laplace_dp", engine=engine, risk=True)
