"""mdav (k-anonymity) and mdav_dp (insensitive MDAV + noise) releases and their CLI."""

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

import dpfast
from dpfast import Taxonomy, noise
from dpfast.cli import main
from dpfast.partitions.categorical import (
    cluster_centroids,
    cluster_quality_units,
    distance_units,
)
from dpfast.partitions.grid import Grid
from dpfast.partitions.insensitive_mdav import insensitive_mdav_labels
from dpfast.partitions.mdav import mdav_labels
from tests.reference import mdav_reference


def _frame(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.uniform(0, 1e5, n),
            "name": [f"p{i}" for i in range(n)],
        }
    )


BOUNDS = {"age": (17, 90), "income": (0, 1e5)}

# --- mdav ----------------------------------------------------------------------------------


def test_mdav_replaces_values_by_cluster_means_and_is_k_anonymous():
    frame = _frame()
    release = dpfast.mdav(frame, k=5, columns=["age", "income"])
    out = release.data
    labels = mdav_reference.mdav_labels(frame[["age", "income"]].to_numpy(float).tolist(), 5)
    expected = frame["income"].groupby(labels).transform("mean")
    np.testing.assert_allclose(out["income"], expected, rtol=1e-12)
    assert out["age"].dtype == frame["age"].dtype  # integer column rounded, dtype kept
    counts = out.groupby(["age", "income"]).size()
    assert counts.min() >= 5
    pd.testing.assert_series_equal(out["name"], frame["name"])


def test_mdav_report_says_k_anonymity_not_dp():
    report = dpfast.mdav(_frame(), k=4, columns=["age", "income"]).report
    assert report.method == "mdav" and report.epsilon is None and report.ledger == []
    assert "k-anonymity with k=4" in report.guarantee
    assert "NOT differentially private" in report.guarantee
    assert "never feed a DP noise step" in report.guarantee
    assert report.unprotected_columns == ["name"]
    json.loads(report.to_json())


@pytest.mark.parametrize("kind", ["pandas", "arrow", "numpy"])
def test_mdav_keeps_the_input_kind(kind):
    frame = _frame()[["age", "income"]]
    data = {
        "pandas": frame,
        "arrow": pa.Table.from_pandas(frame, preserve_index=False),
        "numpy": frame.to_numpy(dtype=float),
    }[kind]
    release = dpfast.mdav(data, k=3)
    assert type(release.data) is type(data) and release.data.shape == data.shape


def test_mdav_sdcmicro_toy_case_groups():
    data = np.array([[2, 1], [3, 2], [3, 2], [20, 19], [21, 20]], dtype=float)
    out = dpfast.mdav(data, k=2).data
    np.testing.assert_allclose(out[:, 0], [8 / 3, 8 / 3, 8 / 3, 20.5, 20.5])


@pytest.mark.parametrize("k", [0, 121])
def test_mdav_refuses_bad_k(k):
    with pytest.raises(ValueError, match="k must be in"):
        dpfast.mdav(_frame(), k=k, columns=["age"])


def test_mdav_refuses_nan():
    frame = _frame()
    frame.loc[3, "income"] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        dpfast.mdav(frame, k=3, columns=["income"])


# --- mdav_dp -------------------------------------------------------------------------------


def _plan(n, k, m, epsilon, lower, upper, calibration="l1"):
    grid = Grid.for_column(lower, upper, n, k)
    n_clusters = n // k
    sensitivity = Fraction(n_clusters * grid.d_int, k) + n_clusters
    if calibration == "l1":
        steps = math.ceil(sensitivity / Fraction(epsilon / m))
    else:
        steps = math.ceil(Fraction(n * grid.d_int, k * k) / Fraction(epsilon))
    return grid, steps, sensitivity


def test_mdav_dp_equals_the_reference_pipeline_with_the_same_draws():
    frame = _frame(n=97)
    k, epsilon = 10, 2.0
    release = dpfast.mdav_dp(
        frame,
        k=k,
        epsilon=epsilon,
        bounds=BOUNDS,
        columns=["age", "income"],
        unprotected="keep",
        seed=11,
    )
    assert release.report.guarantee_level == "none"  # names beside their clusters
    source = noise.NoiseSource.from_seed(11)
    order = noise.permutation(source.key("mdav_dp", "row-order"), 97)
    labels = mdav_reference.insensitive_labels(
        frame[["age", "income"]].to_numpy(float).tolist(), k, [BOUNDS["age"], BOUNDS["income"]]
    )
    labels = np.array(labels)
    for name in ("age", "income"):
        lower, upper = BOUNDS[name]
        grid, steps, _ = _plan(97, k, 2, epsilon, lower, upper)
        draws = noise.discrete_laplace(
            source.key("mdav_dp", "centroid-noise", name), steps, 97 // k
        )
        quantised = [
            round(Fraction(min(max(x, lower), upper) - lower) / Fraction(grid.gamma))
            for x in frame[name].astype(float)
        ]
        expected_rows = np.empty(97)
        for g in range(97 // k):
            members = np.flatnonzero(labels == g)
            centre = round(Fraction(sum(quantised[i] for i in members), len(members)))
            value = min(max(centre + int(draws[g]), 0), grid.d_int)
            out = lower + grid.gamma * value
            if name == "age":
                out = float(np.rint(out))
            expected_rows[members] = min(max(out, lower), upper)
        np.testing.assert_array_equal(release.data[name].to_numpy(float), expected_rows[order])
    assert release.data["name"].tolist() == frame["name"].to_numpy()[order].tolist()


def test_mdav_dp_ledger_l1_calibration():
    n, k, epsilon = 200, 20, 1.0
    release = dpfast.mdav_dp(
        _frame(n), k=k, epsilon=epsilon, bounds=BOUNDS, columns=["age", "income"], seed=1
    )
    report = release.report
    assert report.epsilon == epsilon and report.guarantee_level == "proven"
    assert math.isclose(sum(e.epsilon for e in report.ledger), epsilon)
    for entry, name in zip(report.ledger, ["age", "income"], strict=False):
        lower, upper = BOUNDS[name]
        grid, steps, _sensitivity = _plan(n, k, 2, epsilon, lower, upper)
        assert entry.noise_scale == steps * grid.gamma
        # scale m * n_c * Δ / (k ε), up to the grid's rounding term
        nominal = 2 * (n // k) * (upper - lower) / (k * epsilon)
        assert nominal <= entry.noise_scale <= nominal * 1.0001 + grid.gamma * 2 * (n // k) * 2
    json.loads(report.to_json())


def test_mdav_dp_as_published_reports_the_epsilon_it_really_spends():
    n, k, epsilon = 400, 20, 1.0
    with pytest.warns(dpfast.PrivacyLeakWarning, match="really spends epsilon=2"):
        release = dpfast.mdav_dp(
            _frame(n),
            k=k,
            epsilon=epsilon,
            bounds=BOUNDS,
            columns=["age", "income"],
            calibration="as_published",
            seed=1,
        )
    report = release.report
    real = 0.0
    for entry, name in zip(report.ledger, ["age", "income"], strict=False):
        grid, steps, sensitivity = _plan(n, k, 2, epsilon, *BOUNDS[name], "as_published")
        assert entry.noise_scale == steps * grid.gamma
        assert entry.epsilon >= float(sensitivity / steps)
        real += entry.epsilon
    assert report.epsilon == pytest.approx(real)
    assert report.epsilon == pytest.approx(2 * epsilon, rel=1e-3)  # m = 2 times the request
    assert f"epsilon={report.epsilon:g}" in report.guarantee
    assert report.parameters["epsilon_requested"] == epsilon


def test_mdav_dp_rows_share_cluster_values_and_stay_in_bounds():
    frame = _frame(150)
    release = dpfast.mdav_dp(
        frame, k=15, epsilon=0.5, bounds=BOUNDS, columns=["age", "income"], seed=3
    )
    out = release.data
    assert out["age"].between(17, 90).all() and out["income"].between(0, 1e5).all()
    assert out.groupby(["age", "income"]).size().min() >= 15
    assert isinstance(out.index, pd.RangeIndex)
    assert list(out.columns) == ["age", "income"] and release.report.unprotected == "drop"
    assert release.report.guarantee_level == "proven"
    shuffled = dpfast.mdav_dp(
        frame,
        k=15,
        epsilon=0.5,
        bounds=BOUNDS,
        columns=["age", "income"],
        unprotected="shuffle",
        seed=3,
    )
    assert sorted(shuffled.data["name"]) == sorted(frame["name"])
    assert shuffled.report.guarantee_level == "protected_only"


def test_mdav_dp_seeded_is_reproducible_and_secure_is_not():
    frame = _frame()
    a = dpfast.mdav_dp(frame, k=10, epsilon=1.0, bounds=BOUNDS, columns=["income"], seed=5)
    b = dpfast.mdav_dp(frame, k=10, epsilon=1.0, bounds=BOUNDS, columns=["income"], seed=5)
    pd.testing.assert_frame_equal(a.data, b.data)
    assert a.report.seeded and any("not for publication" in n for n in a.report.notes)
    c = dpfast.mdav_dp(frame, k=10, epsilon=1.0, bounds=BOUNDS, columns=["income"])
    d = dpfast.mdav_dp(frame, k=10, epsilon=1.0, bounds=BOUNDS, columns=["income"])
    assert not c.report.seeded
    assert not c.data["income"].equals(d.data["income"])


def test_mdav_dp_clamped_counts_and_cycling_reference():
    frame = _frame()
    frame.loc[:4, "income"] = 2e5
    release = dpfast.mdav_dp(
        frame,
        k=10,
        epsilon=1.0,
        bounds=BOUNDS,
        columns=["age", "income"],
        reference="cycling",
        seed=2,
    )
    assert release.private.clamped == {"age": 0, "income": 5}
    assert release.report.parameters["reference"] == "cycling"


def test_mdav_dp_partition_is_insensitive_mdav():
    frame = _frame(90)
    data = frame[["age", "income"]].to_numpy(float)
    labels = insensitive_mdav_labels(data, 9, [BOUNDS["age"], BOUNDS["income"]])
    assert not np.array_equal(labels, mdav_labels(data, 9))  # a different partition
    assert np.bincount(labels).tolist() == [9] * 10


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"epsilon": 0}, ValueError, "epsilon"),
        ({"calibration": "paper"}, ValueError, "calibration"),
        ({"reference": "middle"}, ValueError, "reference"),
        ({"bounds": {"age": (17, 90)}}, ValueError, "no bounds"),
        ({"k": 500}, ValueError, "k must be in"),
    ],
)
def test_mdav_dp_bad_arguments(kwargs, error, match):
    arguments = {"k": 10, "epsilon": 1.0, "bounds": BOUNDS, "columns": ["age", "income"], **kwargs}
    with pytest.raises(error, match=match):
        dpfast.mdav_dp(_frame(), **arguments)


def test_mdav_dp_data_bounds_warn_and_are_not_private():
    with pytest.warns(dpfast.PrivacyLeakWarning):
        release = dpfast.mdav_dp(
            _frame(), k=10, epsilon=1.0, bounds="data", columns=["income"], seed=1
        )
    assert release.report.guarantee_level == "none"


# --- CLI -----------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    _frame().to_csv(tmp_path / "people.csv", index=False)
    schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "income": {"type": "float", "bounds": [0, 100000]},
            "name": {"type": "string", "protect": False},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema))
    return tmp_path


def test_cli_mdav_dp_writes_data_and_report(files, capsys):
    out = files / "out.csv"
    code = main(
        [
            "release",
            "mdav-dp",
            str(files / "people.csv"),
            "-o",
            str(out),
            "--k",
            "10",
            "--epsilon",
            "1",
            "--schema",
            str(files / "s.json"),
            "--seed",
            "3",
            "--calibration",
            "as_published",
            "--quiet",
        ]
    )
    assert code == 0
    report = json.loads((files / "out.csv.public-report.json").read_text())
    assert report["method"] == "mdav_dp" and report["epsilon"] > 1.5
    assert pd.read_csv(out).shape == (120, 2)  # the unprotected "name" is left out


def test_cli_mdav_writes_k_anonymous_columns(files):
    out = files / "anon.parquet"
    code = main(
        [
            "release",
            "mdav",
            str(files / "people.csv"),
            "-o",
            str(out),
            "--k",
            "6",
            "--columns",
            "age,income",
            "--quiet",
        ]
    )
    assert code == 0
    table = pd.read_parquet(out)
    assert table.groupby(["age", "income"]).size().min() >= 6
    report = json.loads((files / "anon.parquet.public-report.json").read_text())
    assert "k-anonymity" in report["guarantee"]


def test_cli_mdav_dp_bad_input_leaves_no_output(files, capsys):
    out = files / "out.csv"
    code = main(
        [
            "release",
            "mdav-dp",
            str(files / "people.csv"),
            "-o",
            str(out),
            "--k",
            "500",
            "--epsilon",
            "1",
            "--schema",
            str(files / "s.json"),
        ]
    )
    assert code == 2
    assert "k must be in" in capsys.readouterr().err
    assert not out.exists() and not (files / "out.csv.public-report.json").exists()


# --- categorical columns ---------------------------------------------------------------------

JOBS = Taxonomy.from_mapping(
    {
        "*": {
            "Office": ["clerk", "manager"],
            "Care": {"Medical": ["doctor", "nurse"], "carer": None},
            "pilot": None,
        }
    }
)


def _mixed_frame(n=120, seed=0):
    frame = _frame(n, seed)
    rng = np.random.default_rng(seed + 1)
    return frame.assign(job=rng.choice(JOBS.domain, n))


@pytest.mark.parametrize("kind", ["strings", "pandas_categorical", "arrow_dictionary"])
def test_mdav_mixed_columns_get_means_and_marginality_centroids(kind):
    frame = _mixed_frame()
    codes = JOBS.encode(frame["job"])
    data: object = frame
    if kind == "pandas_categorical":
        data = frame.assign(job=frame["job"].astype("category"))
    elif kind == "arrow_dictionary":
        data = pa.Table.from_pandas(frame, preserve_index=False)
        data = data.set_column(3, "job", data.column("job").dictionary_encode())
    release = dpfast.mdav(data, k=5, columns=["age", "income", "job"], taxonomies={"job": JOBS})
    out = release.data if kind != "arrow_dictionary" else release.data.to_pandas()
    labels = np.array(
        mdav_reference.mixed_mdav_labels(
            frame[["age", "income"]].to_numpy(float).tolist(),
            codes[:, None].tolist(),
            [JOBS.distance_matrix().tolist()],
            5,
        )
    )
    expected_jobs = np.asarray(JOBS.domain)[
        cluster_centroids(JOBS, codes, labels, labels.max() + 1)
    ]
    assert [str(v) for v in out["job"]] == expected_jobs[labels].tolist()
    expected = frame["income"].groupby(labels).transform("mean")
    np.testing.assert_allclose(out["income"], expected, rtol=1e-12)
    assert out.groupby(["age", "income", "job"], observed=True).size().min() >= 5
    if kind == "pandas_categorical":
        assert isinstance(out["job"].dtype, pd.CategoricalDtype)
    report = release.report
    assert report.protected_columns == ["age", "income", "job"]
    assert "semantic distance / Δq" in report.parameters["categorical_distance"]
    assert report.parameters["taxonomies"] == {"job": {"name": None, "leaves": 6}}


def test_mdav_categorical_only_and_metrics():
    frame = _mixed_frame(60)[["job", "name"]]
    release = dpfast.mdav(frame, k=4, columns=["job"], taxonomies={"job": JOBS}, metrics=True)
    assert release.data.groupby("job").size().min() >= 4
    metrics = release.private.metrics
    assert 0 <= metrics["relative_error"]["job"] < 1
    assert "job" in metrics["jensen_shannon"]
    assert release.data["name"].tolist() == frame["name"].tolist()


def test_mdav_refuses_a_categorical_column_without_taxonomy():
    with pytest.raises(TypeError, match="pass its taxonomy in taxonomies="):
        dpfast.mdav(_mixed_frame(), k=4, columns=["age", "job"])
    with pytest.raises(TypeError, match="pass its taxonomy in taxonomies="):
        dpfast.mdav_dp(_mixed_frame(), k=4, epsilon=1.0, bounds=BOUNDS, columns=["age", "job"])


def test_mdav_dp_mixed_equals_the_reference_pipeline_with_the_same_draws():
    frame = _mixed_frame(n=97)
    k, epsilon = 10, 3.0
    release = dpfast.mdav_dp(
        frame,
        k=k,
        epsilon=epsilon,
        bounds=BOUNDS,
        taxonomies={"job": JOBS},
        columns=["age", "income", "job"],
        unprotected="keep",
        seed=11,
    )
    source = noise.NoiseSource.from_seed(11)
    order = noise.permutation(source.key("mdav_dp", "row-order"), 97)
    codes = JOBS.encode(frame["job"])
    labels = np.array(
        mdav_reference.mixed_insensitive_labels(
            frame[["age", "income"]].to_numpy(float).tolist(),
            codes[:, None].tolist(),
            [BOUNDS["age"], BOUNDS["income"]],
            [JOBS.distance_matrix().tolist()],
            k,
        )
    )
    n_clusters = 97 // k
    chosen = noise.exponential_mechanism(
        source.key("mdav_dp", "centroid-choice", "job"),
        cluster_quality_units(JOBS, codes, labels, n_clusters),
        epsilon=epsilon / 3,
        sensitivity=n_clusters * int(distance_units(JOBS.distance_matrix()).max()),
    )
    expected = np.asarray(JOBS.domain)[chosen[labels]][order]
    assert release.data["job"].tolist() == expected.tolist()
    # numeric columns: one shared draw per cluster, scale for m = 3 protected columns
    grid, steps, _ = _plan(97, k, 3, epsilon, *BOUNDS["income"])
    draws = noise.discrete_laplace(
        source.key("mdav_dp", "centroid-noise", "income"), steps, n_clusters
    )
    assert release.report.ledger[1].noise_scale == steps * grid.gamma
    income = release.data["income"].to_numpy()
    for g in range(n_clusters):
        rows = np.flatnonzero(labels[order] == g)
        assert len(set(income[rows])) == 1 and len(set(release.data["job"][rows])) == 1
    assert draws.shape == (n_clusters,)
    assert release.data["name"].tolist() == frame["name"].to_numpy()[order].tolist()


def test_mdav_dp_categorical_ledger_l1_and_as_published():
    n, k, epsilon = 200, 20, 2.0
    frame = _mixed_frame(n)
    n_clusters = n // k
    delta = int(distance_units(JOBS.distance_matrix()).max()) * 2.0**-12  # Δq, rounded
    kwargs = {
        "k": k,
        "epsilon": epsilon,
        "bounds": BOUNDS,
        "taxonomies": {"job": JOBS},
        "columns": ["age", "income", "job"],
        "seed": 1,
    }
    report = dpfast.mdav_dp(frame, **kwargs).report
    entry = report.ledger[2]
    assert entry.columns == ("job",) and entry.step == "centroid selection"
    assert entry.epsilon == epsilon / 3
    assert entry.sensitivity == n_clusters * delta
    assert entry.noise_scale == pytest.approx(2 * n_clusters * delta / (epsilon / 3))
    assert entry.details["effective_epsilon"] <= entry.epsilon
    assert entry.details["sensitivity_units"] == n_clusters * delta * 2**12
    assert report.epsilon == pytest.approx(epsilon) and report.guarantee_level == "proven"
    assert "exponential mechanism with sensitivity n_clusters * Δq" in report.guarantee
    assert noise.EM_SAMPLER_NAME in report.sampler and noise.SAMPLER_NAME in report.sampler
    with pytest.warns(dpfast.PrivacyLeakWarning, match="really spends"):
        published = dpfast.mdav_dp(frame, **kwargs, calibration="as_published").report
    entry = published.ledger[2]
    # the thesis code's exp(ε q / (2 (n/k) Δq)) with the whole ε: spends ε n_c k / n
    assert entry.details["mechanism_epsilon"] == epsilon
    assert entry.details["mechanism_sensitivity"] == pytest.approx(n / k * delta)
    assert entry.epsilon == pytest.approx(epsilon * n_clusters * k / n)
    assert entry.details["effective_epsilon"] <= entry.epsilon
    assert entry.noise_scale == pytest.approx(2 * entry.sensitivity / entry.epsilon)
    assert published.epsilon == pytest.approx(sum(e.epsilon for e in published.ledger))
    assert published.epsilon > 2.5 * epsilon  # about m = 3 times the request
    json.loads(published.to_json())


@pytest.mark.statistical
def test_mdav_dp_categorical_draws_use_sensitivity_n_clusters_times_delta_q():
    # Every cluster holds k copies of one value, so every draw has the same distribution:
    # Pr[c] ∝ b**(k δ(c, a)) with b = exp(-ε / (2 n_c Δq)) rounded up to a dyadic base,
    # δ and Δq in units of 2**-12, the proven sensitivity n_c Δq.
    n, k, epsilon = 2000, 10, 40.0
    units = distance_units(JOBS.distance_matrix())
    delta = int(units.max())
    value = JOBS.code("nurse")
    frame = pd.DataFrame({"job": ["nurse"] * n})
    n_clusters = n // k
    observed = np.zeros(len(JOBS.domain))
    for seed in range(10):
        release = dpfast.mdav_dp(frame, k=k, epsilon=epsilon, taxonomies={"job": JOBS}, seed=seed)
        assert release.report.ledger[0].sensitivity == n_clusters * delta * 2.0**-12
        observed += np.bincount(JOBS.encode(release.data["job"]), minlength=len(JOBS.domain)) / k
    quality = -k * units[:, value]

    def probabilities(sensitivity):
        return noise.exponential_probabilities(quality, epsilon=epsilon, sensitivity=sensitivity)

    draws = observed.sum()
    proven = probabilities(n_clusters * delta)
    assert stats.chisquare(observed, proven * draws).pvalue > 1e-3
    paper = probabilities(delta)  # far sharper: almost always "nurse"
    assert observed[value] < 0.5 * paper[value] * draws


def test_mdav_dp_categorical_only_one_leaf_and_metrics():
    frame = pd.DataFrame({"job": ["nurse", "pilot"] * 30, "solo": ["x"] * 60})
    solo = Taxonomy.from_mapping({"*": ["x"]})
    release = dpfast.mdav_dp(
        frame, k=6, epsilon=1.0, taxonomies={"job": JOBS, "solo": solo}, metrics=True, seed=2
    )
    assert set(release.data["solo"]) == {"x"}
    assert set(release.data["job"]) <= set(JOBS.domain)
    assert release.report.sampler == noise.EM_SAMPLER_NAME
    assert [e.epsilon for e in release.report.ledger] == [0.5, 0.5]
    assert "job" in release.private.metrics["relative_error"]


def test_cli_mdav_and_mdav_dp_protect_categorical_schema_columns(tmp_path):
    _mixed_frame().to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "jobs.csv").write_text(
        "clerk;Office;*\nmanager;Office;*\ndoctor;Medical;Care;*\nnurse;Medical;Care;*\n"
        "carer;Care;*\npilot;*\n",
        encoding="utf-8",
    )
    schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "income": {"type": "float", "protect": False},
            "name": {"type": "string", "protect": False},
            "job": {"type": "categorical", "taxonomy": "jobs.csv"},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema))
    out = tmp_path / "dp.csv"
    assert (
        main(
            [
                "release",
                "mdav-dp",
                str(tmp_path / "people.csv"),
                "-o",
                str(out),
                "--k",
                "12",
                "--epsilon",
                "2",
                "--schema",
                str(tmp_path / "s.json"),
                "--seed",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "dp.csv.public-report.json").read_text())
    assert report["protected_columns"] == ["age", "job"]
    assert [e["epsilon"] for e in report["ledger"]] == [1.0, 1.0]
    assert set(pd.read_csv(out)["job"]) <= set(JOBS.domain)
    out = tmp_path / "anon.csv"
    assert (
        main(
            [
                "release",
                "mdav",
                str(tmp_path / "people.csv"),
                "-o",
                str(out),
                "--k",
                "6",
                "--schema",
                str(tmp_path / "s.json"),
                "--quiet",
            ]
        )
        == 0
    )
    table = pd.read_csv(out)
    assert table.groupby(["age", "job"]).size().min() >= 6
    report = json.loads((tmp_path / "anon.csv.public-report.json").read_text())
    assert report["protected_columns"] == ["age", "job"]
    assert report["parameters"]["taxonomies"]["job"]["leaves"] == 6
