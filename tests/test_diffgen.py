"""Tests of dpfast.diffgen against the slow reference, and of its report and edge cases."""

import math
import warnings
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from dpfast import noise
from dpfast.exceptions import PrivacyLeakWarning
from dpfast.methods.diffgen import diffgen
from dpfast.methods.diffgen import release as release_module
from dpfast.methods.diffgen._tree import Builder, Trace
from dpfast.taxonomy import Taxonomy, TaxonomyError
from tests.reference import diffgen_reference as ref

SEEDED = noise.NoiseSource.from_seed(99)
KEY = SEEDED.key("tests", "diffgen")
KEY_LIST = [int(w) for w in KEY]

JOBS = Taxonomy.from_mapping(
    {
        "*": {
            "Technical": ["Tech-support", "Craft-repair"],
            "Other": {"Office": ["Adm-clerical", "Sales"], "Farming": None},
        }
    }
)
COLOURS = Taxonomy.from_mapping({"*": ["red", "green", "blue"]})


def _table(n, seed, classes=("no", "yes", "maybe")):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(10, 60, n),
            "job": rng.choice(list(JOBS.domain), n),
            "hours": rng.integers(0, 8, n),
            "colour": rng.choice(list(COLOURS.domain), n),
            "label": rng.choice(list(classes), n),
        }
    )


def _specs():
    return [
        ("age", "numeric", (15, 55)),
        ("job", "categorical", JOBS),
        ("hours", "numeric", (0, 6)),
        ("colour", "categorical", COLOURS),
    ]


def _run(table, **kwargs):
    """Run diffgen with a tree builder that records its scores and draws in a Trace."""
    trace = Trace()

    class Traced(Builder):
        def __init__(self, *args, **options):
            super().__init__(*args, **{**options, "trace": trace})

    with mock.patch.object(release_module, "Builder", Traced):
        release = diffgen(
            table,
            target="label",
            taxonomies={"job": JOBS, "colour": COLOURS},
            bounds={"age": (15, 55), "hours": (0, 6)},
            **kwargs,
        )
    return release, trace


# ---------------------------------------------------------------- rational discrete Laplace


@pytest.mark.parametrize(("s", "t"), [(1, 1), (1, 2), (3, 7), (5, 2), (53687091, 2**30)])
def test_rate_sampler_equals_reference(s, t):
    got = noise.discrete_laplace_rate(KEY, s, t, 120, start=17)
    expected = [ref.discrete_laplace_rate(KEY_LIST, s, t, 17 + i) for i in range(120)]
    assert got.tolist() == expected


def test_rate_sampler_with_s_1_is_the_integer_scale_sampler():
    got = noise.discrete_laplace_rate(KEY, 1, 9, 500)
    expected = noise.discrete_laplace(KEY, 9, 500)
    assert got.tolist() == expected.tolist()


def test_rate_sampler_cap():
    got = noise.discrete_laplace_rate(KEY, 1, 1000, 300, cap=5)
    assert np.abs(got).max() == 5
    assert got.tolist() == [ref.discrete_laplace_rate(KEY_LIST, 1, 1000, i, 5) for i in range(300)]


@pytest.mark.statistical
@pytest.mark.parametrize(("s", "t"), [(1, 2), (3, 7), (5, 2)])
def test_rate_sampler_matches_exact_pmf(s, t):
    n = 200_000
    draws = noise.discrete_laplace_rate(SEEDED.key("rate-pmf", s, t), s, t, n)
    bound = max(3, int(8 * t / s))
    values = np.arange(-bound, bound + 1)
    observed = np.array([(draws == v).sum() for v in values] + [(np.abs(draws) > bound).sum()])
    probabilities = [ref.pmf_rate(int(v), s, t) for v in values]
    expected = np.array([*probabilities, 1 - sum(probabilities)]) * n
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_rate_at_most_never_overstates_privacy():
    assert noise.rate_at_most(0.5) == (1, 2)
    assert noise.rate_at_most(1.0, 2) == (1, 2)
    for epsilon in (0.05, 0.1 / 3, 1e-3, 0.7, 2.5):
        s, t = noise.rate_at_most(epsilon)
        assert s / t <= epsilon and t <= 2**32 and epsilon - s / t < 2**-32 * 2
        assert math.gcd(s, t) == 1
    with pytest.raises(ValueError, match="below"):
        noise.rate_at_most(1e-12)


# ---------------------------------------------------------------- against the reference


@pytest.mark.parametrize("utility", ["max", "info_gain"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_scores_probabilities_tree_and_counts_as_reference(utility, seed):
    table = _table(150, seed)
    release, trace = _run(
        table, epsilon=2.0, steps=5, utility=utility, classes=["maybe", "no", "yes"], seed=seed
    )
    reference = ref.Reference(
        table.to_dict("records"),
        _specs(),
        "label",
        ["maybe", "no", "yes"],
        epsilon=2.0,
        steps=5,
        utility_kind=utility,
        seed=seed,
    )
    expected = reference.run()
    assert len(trace.splits) == len(reference.splits)
    for got, want in zip(trace.splits, reference.splits, strict=True):
        assert got["value"] == want["value"]
        assert got["lows"].tolist() == want["lows"] and got["sizes"].tolist() == want["sizes"]
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=1e-9)
        assert (got["chosen"], got["split"]) == (want["chosen"], want["split"])
    assert len(trace.selections) == len(reference.selections) == 5
    for got, want in zip(trace.selections, reference.selections, strict=True):
        assert got["candidates"] == want["candidates"]
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=1e-9)
        assert got["chosen"] == want["chosen"]
    assert release.cut.to_dict() == expected["cut"]
    counts = release.counts
    rows = list(
        zip(
            *[counts[c].astype(str) for c in counts.columns[:-1]],
            counts["count"].tolist(),
            strict=True,
        )
    )
    assert rows == [(*tuple(map(str, r[:-1])), r[-1]) for r in expected["rows"]]
    assert release.report.ledger[-1].details["parameter"] == expected["parameter"]
    assert expected["parameter"].startswith("p = ")  # counts budget 1: the dyadic sampler


@pytest.mark.parametrize(
    ("epsilon", "parameter"),
    [
        (0.05, "rate = "),  # counts budget 0.025, below 1/32: rational-rate sampler
        (30.0, "p = 1314/2**32"),  # 15: a 16-bit base would lose too much, 32 bits do not
        (60.0, "rate = "),  # 30: even a 32-bit base would lose too much
    ],
)
def test_counts_equal_reference_outside_the_16_bit_range(epsilon, parameter):
    table = _table(120, 4)
    release, _ = _run(table, epsilon=epsilon, steps=2, classes=["maybe", "no", "yes"], seed=4)
    reference = ref.Reference(
        table.to_dict("records"),
        _specs(),
        "label",
        ["maybe", "no", "yes"],
        epsilon=epsilon,
        steps=2,
        utility_kind="max",
        seed=4,
    )
    expected = reference.run()
    assert release.cut.to_dict() == expected["cut"]
    assert release.counts["count"].tolist() == [r[-1] for r in expected["rows"]]
    details = release.report.ledger[-1].details
    assert details["parameter"] == expected["parameter"]
    assert details["parameter"].startswith(parameter)


def test_max_scores_by_hand():
    # two children: (3 no, 1 yes) and (0 no, 2 yes): Max = 3 + 2
    from dpfast.methods.diffgen._scores import score, split_scores

    assert score(np.array([[3, 1], [0, 2]]), "max") == 5.0
    gain = score(np.array([[3, 1], [0, 2]]), "info_gain")
    expected = ref.utility([[3, 1], [0, 2]], "info_gain")
    assert math.isclose(gain, expected, rel_tol=1e-12)
    left = np.array([[0, 0], [3, 1], [3, 3]])
    assert split_scores(left, np.array([3, 3]), "max").tolist() == [3.0, 5.0, 3.0]
    assert score(np.zeros((2, 2), dtype=int), "info_gain") == 0.0


# ---------------------------------------------------------------- report and outputs


def test_report_ledger_sums_to_epsilon_with_the_paper_split():
    table = _table(200, 5)
    release, _ = _run(table, epsilon=1.0, steps=4, classes=["maybe", "no", "yes"], seed=1)
    report = release.report
    ledger = report.ledger
    eps_prime = 1.0 / (2 * (2 + 2 * 4))
    assert len(ledger) == 2 + 2 * 4 + 1
    assert all(math.isclose(e.epsilon, eps_prime) for e in ledger[:-1])
    assert math.isclose(ledger[-1].epsilon, 0.5)
    assert math.isclose(math.fsum(e.epsilon for e in ledger), 1.0)
    assert sum("split value" in e.step for e in ledger) == 2 + 4
    assert sum(e.step.startswith("selection") for e in ledger) == 4
    assert ledger[-1].details["parameter"] == "p = 39750/2**16"
    assert ledger[-1].sampler == noise.DYADIC_SAMPLER_NAME
    assert 0.5 * (1 - 2**-10) <= ledger[-1].details["effective_epsilon"] <= 0.5
    assert report.guarantee_level == "proven"
    assert "unbounded DP" in report.guarantee and "adding or removing one record" in (
        report.guarantee
    )
    assert report.seeded and any("not for publication" in n for n in report.notes)
    assert report.extra["steps_done"] == 4 and not report.extra["early_stop"]
    report.to_json()


def test_every_leaf_partition_is_output_even_empty_ones():
    table = _table(40, 3)
    release, _ = _run(table, epsilon=1.0, steps=6, classes=["maybe", "no", "yes"], seed=4)
    counts = release.counts
    assert len(counts) == release.cut.n_cells * 3
    cells = counts.drop(columns=["count"]).drop_duplicates()
    assert len(cells) == len(counts)
    assert (counts["count"] >= 0).all() and counts["count"].dtype == np.int64
    # with 40 records and many cells, some true cells are empty
    assert release.cut.n_cells * 3 > 40


def test_the_tree_stores_only_partitions_with_records():
    from dpfast.engines import open_engine
    from dpfast.methods.diffgen._columns import prepare
    from dpfast.methods.diffgen._tree import Builder

    table = _table(60, 8)
    prepared = prepare(
        open_engine(table, method="diffgen"),
        "label",
        {"job": JOBS, "colour": COLOURS},
        {"age": (15, 55), "hours": (0, 6)},
        ["maybe", "no", "yes"],
    )
    builder = Builder(
        prepared,
        epsilon_prime=0.5,
        utility="max",
        delta_u=1.0,
        source=noise.NoiseSource.from_seed(3),
    )
    builder.roots(lambda *args: None)
    for i in range(8):
        assert builder.step(i, lambda *args: None)
    parts = builder.counts.partitions  # the in-memory engine's partition tree
    n = parts.size
    sizes = parts.end[:n] - parts.start[:n]
    leaves = parts.first_child[:n] < 0
    assert (sizes > 0).all()  # no empty partition is stored, leaf or not
    assert sizes[leaves].sum() == 60  # and the leaves hold every record once
    cuts, counts = builder.leaf_counts()
    assert counts.shape == (math.prod(len(c) for c in cuts), 3) == (builder.n_cells, 3)
    assert leaves.sum() < builder.n_cells  # the other cells are empty: true count 0
    assert counts.sum() == 60 and (counts.sum(axis=1) > 0).sum() == leaves.sum()


def test_early_stop_gives_the_leftover_to_the_counts():
    table = pd.DataFrame({"colour": ["red", "green", "blue", "red"], "label": ["a", "b", "a", "a"]})
    release = diffgen(
        table,
        target="label",
        epsilon=1.0,
        steps=5,
        taxonomies={"colour": COLOURS},
        classes=["a", "b"],
        seed=0,
    )
    report = release.report
    assert report.extra["steps_done"] == 1 and report.extra["early_stop"]
    assert [e.step for e in report.ledger] == [
        "selection 1",
        "split values of the new intervals of step 1",
        "noisy counts",
    ]
    assert math.isclose(report.ledger[-1].epsilon, 1.0 - 2 * (1.0 / 20))
    assert math.isclose(math.fsum(e.epsilon for e in report.ledger), 1.0)
    assert any("early stop" in n and "went to the counts" in n for n in report.notes)
    assert release.cut["colour"] == ("blue", "green", "red")


def test_microdata_and_cut_apply():
    table = _table(300, 8)
    release, _ = _run(table, epsilon=1.0, steps=4, classes=["maybe", "no", "yes"], seed=3)
    micro = release.microdata()
    assert len(micro) == release.counts["count"].sum()
    assert list(micro.columns) == ["age", "job", "hours", "colour", "label"]
    applied = release.cut.apply(table)
    assert list(applied.columns) == list(micro.columns)
    for column in ["age", "job", "hours", "colour"]:
        assert list(applied[column].cat.categories) == list(micro[column].cat.categories)
        assert not applied[column].isna().any()
    assert (applied["label"] == table["label"]).all()
    # values outside the bounds are clamped into the first/last interval
    outside = table.assign(age=[-100] * 150 + [1000] * 150)
    got = release.cut.apply(outside)["age"].cat.codes
    assert got.min() == 0 and got.max() == len(release.cut["age"]) - 1


def test_outputs_share_no_memory_with_the_input():
    table = _table(200, 9).assign(label=lambda t: (t["age"] % 2).astype(np.int64))
    before = table.copy()
    release, _ = _run(table, epsilon=1.0, steps=3, classes=[0, 1], seed=2)
    applied = release.cut.apply(table)
    assert not np.shares_memory(applied["label"].to_numpy(), table["label"].to_numpy())
    applied.loc[0, "label"] = 7
    release.counts.loc[0, "count"] = -5
    pd.testing.assert_frame_equal(table, before)


def test_arrow_in_arrow_out():
    table = _table(100, 2)
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    got = diffgen(
        arrow,
        target="label",
        epsilon=1.0,
        steps=3,
        taxonomies={"job": JOBS, "colour": COLOURS},
        bounds={"age": (15, 55), "hours": (0, 6)},
        classes=["maybe", "no", "yes"],
        seed=5,
    )
    expected, _ = _run(table, epsilon=1.0, steps=3, classes=["maybe", "no", "yes"], seed=5)
    assert isinstance(got.counts, pa.Table)
    assert pa.types.is_dictionary(got.counts.schema.field("job").type)
    assert got.counts.to_pandas()["count"].tolist() == expected.counts["count"].tolist()
    assert isinstance(got.microdata(), pa.Table)
    assert isinstance(got.cut.apply(arrow), pa.Table)


def test_seed_reproducible_and_secure_differs():
    table = _table(200, 1)
    a, _ = _run(table, epsilon=1.0, steps=3, classes=["maybe", "no", "yes"], seed=11)
    b, _ = _run(table, epsilon=1.0, steps=3, classes=["maybe", "no", "yes"], seed=11)
    assert a.counts.equals(b.counts)
    c, _ = _run(table, epsilon=1.0, steps=3, classes=["maybe", "no", "yes"])
    assert not c.report.seeded


def test_taxonomies_as_files_and_mappings(tmp_path):
    path = tmp_path / "colour.csv"
    path.write_text("red;*\ngreen;*\nblue;*\n", encoding="utf-8")
    table = _table(60, 4)
    got = diffgen(
        table,
        target="label",
        epsilon=1.0,
        steps=2,
        taxonomies={
            "colour": str(path),
            "job": {
                "*": {
                    "Technical": ["Tech-support", "Craft-repair"],
                    "Other": {"Office": ["Adm-clerical", "Sales"], "Farming": None},
                }
            },
            "label": {"*": ["maybe", "no", "yes"]},
        },
        seed=1,
    )
    assert got.report.parameters["class_domain"] == "taxonomy"
    assert got.report.guarantee_level == "proven"


def test_float_column_intervals():
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"x": rng.uniform(0, 1, 200), "label": rng.choice(["a", "b"], 200)})
    table.loc[table["x"] < 0.5, "label"] = "a"
    release = diffgen(
        table,
        target="label",
        epsilon=20.0,
        steps=3,
        bounds={"x": (0.0, 1.0)},
        classes=["a", "b"],
        seed=2,
    )
    labels = release.cut["x"]
    assert labels[0].startswith("[0.0, ") and labels[-1].endswith(", 1.0]")
    assert len(labels) == 4
    edges = release.cut.columns[0].edges
    assert np.all(np.diff(edges) > 0) and edges[0] == 0.0


def test_info_gain_sensitivity_is_log2_classes():
    table = _table(100, 6)
    release, _ = _run(
        table, epsilon=1.0, steps=2, utility="info_gain", classes=["maybe", "no", "yes"], seed=1
    )
    # log2 |classes| in units of 2**-12, plus one unit for rounding the scores
    units = math.ceil(math.log2(3) * 2**12) + 1
    for entry in release.report.ledger[:-1]:
        assert entry.details["sensitivity_units"] == units
        assert entry.sensitivity == units * 2.0**-12 > math.log2(3)
        assert entry.details["effective_epsilon"] <= entry.epsilon
        base = noise.exponential_base(epsilon=entry.epsilon, sensitivity=units)
        assert entry.details["base"] == base.parameter


def test_read_only_input_is_not_written():
    table = _table(100, 7)
    frozen = {c: table[c].to_numpy().copy() for c in table.columns}
    for values in frozen.values():
        values.setflags(write=False)
    frame = pd.DataFrame(frozen)
    _run(frame, epsilon=1.0, steps=3, classes=["maybe", "no", "yes"], seed=1)
    pd.testing.assert_frame_equal(frame, pd.DataFrame(frozen))


# ---------------------------------------------------------------- bad input


def test_bad_input_messages():
    table = _table(50, 0)
    kw = {
        "target": "label",
        "taxonomies": {"job": JOBS, "colour": COLOURS},
        "bounds": {"age": (15, 55), "hours": (0, 6)},
        "classes": ["maybe", "no", "yes"],
    }
    with pytest.raises(ValueError, match="epsilon"):
        diffgen(table, epsilon=0, steps=1, **kw)
    with pytest.raises(ValueError, match="steps must be >= 0"):
        diffgen(table, epsilon=1, steps=-1, **kw)
    with pytest.raises(TypeError, match="steps"):
        diffgen(table, epsilon=1, steps=1.5, **kw)
    with pytest.raises(ValueError, match="utility"):
        diffgen(table, epsilon=1, steps=1, utility="gini", **kw)
    with pytest.raises(ValueError, match="target 'nope' is not a column"):
        diffgen(table, epsilon=1, steps=1, **{**kw, "target": "nope"})
    with pytest.raises(ValueError, match="unknown column"):
        diffgen(table, epsilon=1, steps=1, **{**kw, "bounds": {"nope": (0, 1)}})
    with pytest.raises(TypeError, match="pandas DataFrame or a pyarrow Table"):
        diffgen(table.to_numpy(), epsilon=1, steps=1, **kw)
    nan = table.assign(age=table["age"].astype(float))
    nan.loc[3, "age"] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        diffgen(nan, epsilon=1, steps=1, **kw)
    stray = table.copy()
    stray.loc[0, "job"] = "Astronaut"
    with pytest.raises(TaxonomyError, match="Astronaut"):
        diffgen(stray, epsilon=1, steps=1, **kw)
    with pytest.raises(ValueError, match="outside the class domain"):
        diffgen(table, epsilon=1, steps=1, **{**kw, "classes": ["no", "yes"]})
    with pytest.raises(ValueError, match="both bounds and a taxonomy"):
        diffgen(table, epsilon=1, steps=1, **{**kw, "bounds": {"job": (0, 1)}})
    with pytest.raises(ValueError, match="InfoGain is identically 0"):
        diffgen(
            table.assign(label="no"),
            epsilon=1,
            steps=1,
            utility="info_gain",
            **{**kw, "classes": ["no"]},
        )
    with pytest.raises(ValueError, match="at least one predictor"):
        diffgen(table, epsilon=1, steps=1, target="label", classes=["maybe", "no", "yes"])
    with pytest.raises(ValueError, match="empty"):
        diffgen(table.iloc[:0], epsilon=1, steps=1, **kw)
    with pytest.raises(ValueError, match="named 'count'"):
        diffgen(
            table.rename(columns={"hours": "count"}),
            epsilon=1,
            steps=1,
            **{**kw, "bounds": {"age": (15, 55), "count": (0, 6)}},
        )


def test_class_domain_from_data_warns_and_is_not_private():
    table = _table(50, 0)
    with pytest.warns(PrivacyLeakWarning, match="class domain"):
        release = diffgen(
            table, target="label", epsilon=1, steps=1, taxonomies={"job": JOBS}, seed=0
        )
    assert release.report.guarantee_level == "none"
    assert release.report.parameters["classes"] == ["maybe", "no", "yes"]


def test_bounds_from_data_warns():
    table = _table(50, 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        release = diffgen(
            table,
            target="label",
            epsilon=1,
            steps=1,
            bounds="data",
            classes=["maybe", "no", "yes"],
            seed=0,
        )
    assert any(issubclass(w.category, PrivacyLeakWarning) for w in caught)
    assert release.report.guarantee_level == "none"
    assert set(release.cut.to_dict()) == {"age", "hours"}


def test_clamped_values_are_counted():
    table = _table(100, 9)
    release, _ = _run(table, epsilon=1.0, steps=1, classes=["maybe", "no", "yes"], seed=0)
    expected = int(((table["age"] < 15) | (table["age"] > 55)).sum())
    assert release.private.clamped["age"] == expected > 0
