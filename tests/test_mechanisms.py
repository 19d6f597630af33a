import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dpfast
from dpfast import noise
from dpfast.methods.k_noise import k_noise, minimal_delta
from dpfast.methods.k_pram import k_pram
from dpfast.methods.randomized_response import randomized_response
from dpfast.metrics import reconstruct_distribution
from tests.reference import mechanisms_reference as ref

# --- the minimal delta of k-noise ----------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_minimal_delta_matches_a_brute_force_grid_search_on_integers(seed, k):
    # On integer data every maximiser of the k-th distance (data points and midpoints of
    # (X_(i), X_(i+k))) lies on the quarter grid, so the grid search is exact.
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 40, rng.integers(k, 25)).astype(float)
    grid = np.arange(values.min(), values.max() + 0.125, 0.25)
    got = minimal_delta(values, k)
    expected = ref.minimal_delta_grid(values, k, grid)
    assert got == expected
    assert ref.condition_holds(values, k, got, grid)
    if got > 5e-324:
        assert not ref.condition_holds(values, k, math.nextafter(got, 0.0), grid)


@pytest.mark.parametrize("seed", range(4))
def test_minimal_delta_against_a_fine_grid_on_floats(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(0.0, 1.0, 40)
    k = 4
    grid = np.linspace(values.min(), values.max(), 4001)
    step = grid[1] - grid[0]
    got = minimal_delta(values, k)
    on_grid = ref.d_k_on_grid(values, k, grid)
    assert on_grid < 2 * got <= on_grid + step + 1e-12
    assert ref.condition_holds(values, k, got, grid)


def _distribution(kind, n, rng):
    if kind == "normal":
        return rng.normal(50, 15, n)
    if kind == "uniform":
        return rng.uniform(0, 1, n)
    if kind == "lognormal":
        return rng.lognormal(0, 2, n)
    if kind == "ties":
        return rng.integers(17, 91, n).astype(float)
    if kind == "clusters":
        return rng.choice([0.0, 1.0, 1e6], n) + rng.normal(0, 1e-3, n)
    if kind == "outlier":
        return np.concatenate([rng.uniform(0, 1, n - 1), [1e12]])
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["normal", "uniform", "lognormal", "ties", "clusters", "outlier"])
@pytest.mark.parametrize("k", [1, 3, 25])
def test_minimal_delta_equals_the_formula_on_a_full_sort(kind, k):
    values = _distribution(kind, 20_000, np.random.default_rng(k))
    assert minimal_delta(values, k) == ref.minimal_delta_sorted(values, k)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False), min_size=1, max_size=60),
    st.integers(1, 60),
)
def test_minimal_delta_property(values, k):
    values = np.array(values)
    k = min(k, values.size)
    assert minimal_delta(values, k) == ref.minimal_delta_sorted(values, k)


def test_minimal_delta_edge_cases():
    assert minimal_delta([5.0, 5.0, 5.0], 2) == 5e-324  # constant column: D_k = 0
    assert minimal_delta([1.0, 3.0], 2) == math.nextafter(1.0, 2.0)  # n == k
    assert minimal_delta([0.0, 1.0, 4.0], 1) == math.nextafter(0.75, 1.0)  # max gap / 4
    with pytest.raises(ValueError, match="k must be in"):
        minimal_delta([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="finite"):
        minimal_delta([1.0, np.nan], 1)
    with pytest.raises(ValueError, match="overflows"):
        minimal_delta([-1.7e308, 1.7e308], 1)


# --- k-noise -------------------------------------------------------------------------------


def test_k_noise_neighbourhood_property_of_theorem_1():
    # E[#{j : |Y_j - x| <= 2δ}] > #{j : |X_j - x| < 2δ} / 2 >= k / 2 for every x in range.
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.normal(0, 1, 150), rng.normal(8, 0.3, 50)])
    k = 6
    delta = minimal_delta(values, k)
    grid = np.linspace(values.min(), values.max(), 301)
    before = np.array([np.count_nonzero(np.abs(values - x) < 2 * delta) for x in grid])
    assert before.min() >= k
    runs = 300
    after = np.zeros(grid.shape)
    table = pd.DataFrame({"x": values})
    for seed in range(runs):
        released = k_noise(table, k=k, seed=seed).data["x"].to_numpy()
        after += np.count_nonzero(np.abs(released[None, :] - grid[:, None]) <= 2 * delta, axis=1)
    after /= runs
    assert (after > before / 2).all()
    assert (after > k / 2).all()


def test_k_noise_release_and_report():
    frame = pd.DataFrame(
        {
            "age": np.arange(20, 60),
            "income": np.linspace(0, 1e4, 40),
            "name": [f"p{i}" for i in range(40)],
        }
    )
    release = k_noise(frame, k=4, columns=["age", "income"], seed=3)
    assert "deltas" not in release.report.to_dict()  # computed from the data: private
    report = release.private.to_dict()
    assert set(report["deltas"]) == {"age", "income"}
    assert report["deltas"]["age"] == math.nextafter(1.5, 2.0)  # D_k = X_(4) - X_(1) = 3
    for column in ("age", "income"):
        noise_abs = np.abs(release.data[column].to_numpy() - frame[column].to_numpy())
        assert (noise_abs < report["deltas"][column] * (1 + 1e-12)).all()
    assert release.data["name"].equals(frame["name"])
    report = release.report.to_dict()
    assert "NOT differential privacy" in report["guarantee"]
    assert report["guarantee_level"] == "none" and report["epsilon"] is None
    assert report["ledger"] == [] and report["unprotected_columns"] == ["name"]
    assert "not a differential-privacy sampler" in report["sampler"]
    json.dumps(report)
    again = k_noise(frame, k=4, columns=["age", "income"], seed=3, n_threads=1)
    pd.testing.assert_frame_equal(release.data, again.data)


@pytest.mark.parametrize("kind", ["pandas", "arrow", "numpy"])
def test_k_noise_and_k_pram_keep_the_input_kind(kind):
    frame = pd.DataFrame({"a": np.arange(30.0), "b": np.arange(30) % 7})
    data = {
        "pandas": frame,
        "arrow": pa.Table.from_pandas(frame, preserve_index=False),
        "numpy": frame.to_numpy(dtype=float),
    }[kind]
    for release in (k_noise(data, k=3, seed=1), k_pram(data, k=3, seed=1)):
        assert type(release.data) is type(data)
        assert release.data.shape == data.shape


# --- k-PRAM --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["normal", "ties", "clusters", "uniform"])
@pytest.mark.parametrize("k", [2, 10, 50])
def test_k_pram_intervals_each_hold_k_values(kind, k):
    values = _distribution(kind, 3000, np.random.default_rng(k))
    release = k_pram(values.reshape(-1, 1), k=k, retention=0.0, seed=2)
    m = release.private.to_dict()["intervals"]["0"]
    assert ref.valid_split(values, k, m)
    if m < values.size // k:
        assert not ref.valid_split(values, k, m + 1)
    assert release.private.to_dict()["smallest_interval_count"]["0"] >= k
    lo, hi = values.min(), values.max()
    out = release.data[:, 0]
    got = [ref.interval_of(v, lo, hi, m) for v in out]
    expected = [ref.interval_of(v, lo, hi, m) for v in values]
    assert got == expected  # each value stays in its interval
    assert np.isin(out, values).all()  # replacements are values of the interval


def test_k_pram_retention_and_dtype():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"age": rng.integers(17, 91, 20_000)})
    release = k_pram(frame, k=1000, retention=0.75, seed=9)  # intervals of several ages
    assert release.data["age"].dtype == frame["age"].dtype
    kept = float((release.data["age"] == frame["age"]).mean())
    assert 0.75 < kept < 0.85  # kept, or replaced by an equal value
    report = release.report.to_dict()
    assert report["parameters"]["retention"] == 0.75
    assert "NOT differential privacy" in report["guarantee"]
    assert report["guarantee_level"] == "none"


def test_k_pram_constant_column_and_k_equal_n():
    assert (k_pram(np.full((5, 1), 3.0), k=2, seed=1).data == 3.0).all()
    release = k_pram(np.arange(4.0).reshape(-1, 1), k=4, retention=0.0, seed=1)
    assert release.private.to_dict()["intervals"] == {"0": 1}


# --- the noise samplers --------------------------------------------------------------------


def test_add_uniform_matches_the_reference_and_chunks():
    key = noise.NoiseSource.from_seed(11).key("t")
    values = np.linspace(-3, 3, 300)
    got = noise.add_uniform(key, values, 0.5, start=5, n_threads=3)
    expected = [ref.uniform_value(key, 5 + i, v, 0.5) for i, v in enumerate(values)]
    assert got.tolist() == expected
    tail = noise.add_uniform(key, values[130:], 0.5, start=135)
    assert (tail == got[130:]).all()


def test_retain_or_replace_matches_the_reference():
    key = noise.NoiseSource.from_seed(12).key("t")
    pool = np.arange(3000, dtype=np.int64) * 7
    values = np.arange(200, dtype=np.int64) + 10**12
    got = noise.retain_or_replace(key, 2**30, values, pool, start=3, n_threads=2)
    expected = [ref.retain_or_replace_row(key, 3 + i, 2**30, v, pool) for i, v in enumerate(values)]
    assert got.tolist() == expected
    groups = np.arange(200) % 2
    got = noise.retain_or_replace(
        key,
        0,
        values,
        pool,
        groups=groups,
        group_start=np.array([0, 10]),
        group_size=np.array([10, 5]),
    )
    expected = [
        ref.retain_or_replace_row(key, i, 0, v, pool[[0, 10][g] :][: [10, 5][g]])
        for i, (v, g) in enumerate(zip(values, groups, strict=True))
    ]
    assert got.tolist() == expected
    with pytest.raises(ValueError, match="non-empty slices"):
        noise.retain_or_replace(
            key,
            0,
            values,
            pool,
            groups=groups,
            group_start=np.array([0, 2999]),
            group_size=np.array([1, 5]),
        )


def test_the_rejection_path_of_the_uniform_draw_is_exact():
    from dpfast._kernels import wordstream

    key = noise.NoiseSource.from_seed(13).key("t")
    kt = tuple(np.uint64(w) for w in key)
    size = 2**31 + 1  # about half of all 32-bit words are rejected

    class Indices:
        def __len__(self):
            return size

        def __getitem__(self, i):
            return i

    for q in range(40):
        expected = ref.retain_or_replace_row(key, q, 0, None, Indices())
        # the kernel's spill stream, as the reference reads it after the first word
        word = ref.stream_word(key, q)
        product = (word >> 32) * size
        if (product & 0xFFFFFFFF) >= (2**32 - size) % size:
            assert expected == product >> 32
        else:
            assert wordstream._spill_uniform(kt, q, size) == expected


# --- randomized response -------------------------------------------------------------------


def test_randomized_response_transition_frequencies_match_the_exact_matrix():
    domain = ["a", "b", "c", "d", "e"]
    m = len(domain)
    n = 100_000
    release = None
    for true in range(m):
        frame = pd.DataFrame({"x": [domain[true]] * n})
        release = randomized_response(
            frame, column="x", domain=domain, epsilon=1.2, seed=100 + true
        )
        p = release.report.parameters["retention"]
        counts = release.data["x"].value_counts().reindex(domain, fill_value=0).to_numpy()
        expected = np.full(m, (1 - p) / m * n)
        expected[true] += p * n
        assert stats.chisquare(counts, expected).pvalue > 1e-3
    assert release is not None
    q = release.report.parameters["keep_probability"]
    assert q / ((1 - q) / (m - 1)) == pytest.approx(math.exp(release.report.epsilon))


def test_randomized_response_epsilon_is_never_overstated():
    frame = pd.DataFrame({"x": ["a", "b"] * 5})
    for epsilon in (1e-9, 0.1, 1.0, 3.0, 10.0, 40.0):
        for m in (2, 3, 17):
            domain = ["a", "b"] + [f"z{i}" for i in range(m - 2)]
            report = randomized_response(
                frame, column="x", domain=domain, epsilon=epsilon, seed=1
            ).report
            assert report.epsilon <= epsilon * (1 + 1e-12)
            if epsilon <= 10:
                assert report.epsilon == pytest.approx(epsilon, rel=1e-6, abs=1e-8)
            assert (
                report.parameters["retention"]
                == int(report.parameters["retention_fraction"].split("/")[0]) / 2**32
            )


def test_randomized_response_report_labels():
    frame = pd.DataFrame({"disease": ["flu", "cold"] * 10, "zip": range(20)})
    release = randomized_response(
        frame, column="disease", domain=["cold", "flu", "none"], retention=0.5, seed=2
    )
    report = release.report.to_dict()
    assert "local differential privacy" in report["guarantee"]
    assert "NOT protected" in report["guarantee"] and "zip" in report["guarantee"]
    assert report["guarantee_level"] == "local"
    assert report["unprotected_columns"] == ["zip"]
    assert report["epsilon"] == pytest.approx(math.log(1 + 0.5 * 3 / 0.5))
    assert report["parameters"]["retention"] == 0.5
    assert report["rho_bound"]["amplification"] == pytest.approx(4.0)
    rho2 = report["rho_bound"]["rho2_above"]["0.1"]
    assert rho2 * 0.9 / (0.1 * (1 - rho2)) == pytest.approx(4.0)
    assert sum(e["epsilon"] for e in report["ledger"]) == report["epsilon"]
    assert release.data["zip"].equals(frame["zip"])
    json.dumps(report)


def test_randomized_response_kinds_and_taxonomy_domain():
    class Tree:  # duck-typed taxonomy: its leaves are the domain
        leaves = ("x", "y", "z")

    frame = pd.DataFrame(
        {"c": pd.Categorical(["x", "y"] * 50, categories=["y", "x", "w"]), "v": np.arange(100)}
    )
    release = randomized_response(frame, column="c", domain=Tree(), retention=0.3, seed=1)
    assert isinstance(release.data["c"].dtype, pd.CategoricalDtype)
    assert set(release.data["c"].unique()) <= {"x", "y", "z"}
    plain = randomized_response(
        frame.astype({"c": object}), column="c", domain=Tree(), retention=0.3, seed=1
    )
    assert plain.data["c"].tolist() == release.data["c"].astype(object).tolist()
    arrow = randomized_response(
        pa.Table.from_pandas(frame.astype({"c": object})),
        column="c",
        domain=["x", "y", "z"],
        retention=0.3,
        seed=1,
    )
    assert arrow.data.column("c").to_pylist() == plain.data["c"].tolist()
    numbers = randomized_response(
        np.array([[1, 5], [2, 6], [3, 7]]), column=0, domain=[1, 2, 3, 4], epsilon=2.0, seed=1
    )
    assert set(numbers.data[:, 0].tolist()) <= {1, 2, 3, 4}
    assert numbers.data[:, 1].tolist() == [5, 6, 7]
    try:
        from dpfast.taxonomy import Taxonomy
    except ImportError:  # pragma: no cover - the taxonomy module is optional here
        return
    tree = Taxonomy.from_mapping({"*": {"x": None, "y": None, "z": None}})
    via_tree = randomized_response(frame, column="c", domain=tree, retention=0.3, seed=1)
    assert via_tree.report.extra["domain"] == ["x", "y", "z"]


def test_randomized_response_threads_do_not_change_the_result():
    frame = pd.DataFrame({"c": np.arange(5000) % 4})
    one = randomized_response(
        frame, column="c", domain=[0, 1, 2, 3], retention=0.2, seed=4, n_threads=1
    )
    many = randomized_response(
        frame, column="c", domain=[0, 1, 2, 3], retention=0.2, seed=4, n_threads=3
    )
    assert one.data.equals(many.data)


# --- reconstruction ------------------------------------------------------------------------


def test_reconstruction_is_unbiased_over_repeated_runs():
    domain = ["a", "b", "c", "d"]
    truth = np.array([0.5, 0.3, 0.15, 0.05])
    n = 2000
    frame = pd.DataFrame({"x": np.repeat(domain, (truth * n).astype(int))})
    runs = 300
    estimates = np.zeros((runs, 4))
    errors = np.zeros((runs, 4))
    for seed in range(runs):
        release = randomized_response(frame, column="x", domain=domain, retention=0.4, seed=seed)
        table = reconstruct_distribution(release, "x")
        estimates[seed] = table["estimate"].to_numpy()
        errors[seed] = table["standard_error"].to_numpy()
    mean = estimates.mean(axis=0)
    spread = estimates.std(axis=0, ddof=1)
    assert np.abs(mean - truth).max() < 4 * spread.max() / math.sqrt(runs)
    assert errors.mean(axis=0) == pytest.approx(spread, rel=0.15)  # the SE is calibrated


def test_reconstruction_arguments():
    released = pd.DataFrame({"c": ["a"] * 70 + ["b"] * 30})
    table = reconstruct_distribution(released, "c", 0.5, domain=["a", "b"])
    assert table["estimate"].tolist() == pytest.approx([0.9, 0.1])
    assert table["estimate"].sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="retention is required"):
        reconstruct_distribution(released, "c", domain=["a", "b"])
    with pytest.raises(ValueError, match="domain is required"):
        reconstruct_distribution(released, "c", 0.5)
    with pytest.raises(ValueError, match="outside the domain"):
        reconstruct_distribution(released, "c", 0.5, domain=["a", "z"])
    with pytest.raises(ValueError, match=r"in \(0, 1\)"):
        reconstruct_distribution(released, "c", 0.0, domain=["a", "b"])


# --- bad input -----------------------------------------------------------------------------


def test_bad_input_errors():
    frame = pd.DataFrame({"c": ["a", "b", "a"], "v": [1.0, np.nan, 2.0], "w": [1, 2, 3]})
    with pytest.raises(ValueError, match="domain is required"):
        randomized_response(frame, column="c", domain=None, epsilon=1.0)
    with pytest.raises(ValueError, match="outside the domain: 'b'"):
        randomized_response(frame, column="c", domain=["a", "z"], epsilon=1.0)
    with pytest.raises(ValueError, match="exactly one of epsilon"):
        randomized_response(frame, column="c", domain=["a", "b"], epsilon=1.0, retention=0.5)
    with pytest.raises(ValueError, match="exactly one of epsilon"):
        randomized_response(frame, column="c", domain=["a", "b"])
    with pytest.raises(ValueError, match="at least 2 categories"):
        randomized_response(frame, column="c", domain=["a"], retention=0.5)
    with pytest.raises(ValueError, match="more than once"):
        randomized_response(frame, column="c", domain=["a", "b", "a"], retention=0.5)
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        randomized_response(frame, column="c", domain=["a", "b"], retention=1.0)
    with pytest.raises(TypeError, match="retention must be a number"):
        randomized_response(frame, column="c", domain=["a", "b"], retention=True)
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        randomized_response(frame, column="c", domain=["a", "b"], epsilon=0.0)
    with pytest.raises(ValueError, match="unknown column"):
        randomized_response(frame, column="nope", domain=["a", "b"], epsilon=1.0)
    with pytest.raises(ValueError, match="missing value"):
        randomized_response(
            pd.DataFrame({"c": ["a", None]}), column="c", domain=["a", "b"], epsilon=1.0
        )
    with pytest.raises(ValueError, match="non-finite"):
        k_noise(frame, k=2, columns=["v"])
    with pytest.raises(ValueError, match="k must be in"):
        k_pram(frame, k=4, columns=["w"])
    with pytest.raises(TypeError, match="must be numeric"):
        k_noise(frame, k=2, columns=["c"])
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        k_pram(frame, k=2, columns=["w"], retention=-0.1)
    with pytest.raises(ValueError, match="empty"):
        k_noise(pd.DataFrame({"a": []}), k=1)


def test_inputs_are_never_written():
    values = np.arange(40.0).reshape(-1, 2)
    values.setflags(write=False)
    k_noise(values, k=3, seed=1)
    k_pram(values, k=3, seed=1)
    assert values[5, 1] == 11.0


def test_public_api():
    for name in ("k_noise", "k_pram", "randomized_response"):
        assert name in dpfast.__all__ and callable(getattr(dpfast, name))
    assert callable(dpfast.metrics.reconstruct_distribution)


# --- command line --------------------------------------------------------------------------


def _csv(tmp_path):
    path = tmp_path / "people.csv"
    frame = pd.DataFrame(
        {"age": [23, 35, 41, 52, 67, 30, 44, 58], "disease": ["flu", "cold", "flu", "none"] * 2}
    )
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("arguments", "method", "level"),
    [
        (["k-noise", "--k", "2", "--columns", "age"], "k_noise", "none"),
        (["k-pram", "--k", "2", "--columns", "age", "--retention", "0.3"], "k_pram", "none"),
        (
            [
                "randomized-response",
                "--column",
                "disease",
                "--domain",
                "cold,flu,none",
                "--epsilon",
                "1",
            ],
            "randomized_response",
            "local",
        ),
    ],
)
def test_cli_writes_data_and_report(tmp_path, capsys, arguments, method, level):
    from dpfast.cli import main

    source = _csv(tmp_path)
    output = tmp_path / "out.parquet"
    code = main(
        ["release", arguments[0], str(source), "-o", str(output), "--seed", "1", *arguments[1:]]
    )
    assert code == 0
    report = json.loads((tmp_path / "out.parquet.public-report.json").read_text())
    assert report["method"] == method and report["guarantee_level"] == level
    assert pd.read_parquet(output).shape == (8, 2)
    assert "not for publication" in capsys.readouterr().out


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cli_randomized_response_reads_a_numeric_domain_in_the_columns_type(tmp_path, suffix):
    from dpfast.cli import main

    source = tmp_path / f"in{suffix}"
    frame = pd.DataFrame({"answer": [1, 2, 2, 1, 3, 1] * 3, "score": [0.5, 1.5, 2.5] * 6})
    if suffix == ".csv":
        frame.to_csv(source, index=False)
    else:
        frame.to_parquet(source)
    for column, domain in (("answer", "1,2,3"), ("score", "0.5,1.5,2.5")):
        output = tmp_path / f"{column}.parquet"
        arguments = ["release", "randomized-response", str(source), "-o", str(output)]
        arguments += ["--column", column, "--domain", domain, "--epsilon", "2", "--seed", "1"]
        assert main([*arguments, "--quiet"]) == 0
        released = pd.read_parquet(output)[column]
        assert released.dtype == frame[column].dtype  # the column keeps its type
        assert set(released) <= set(frame[column])
    # the API matches text labels the same way, and still refuses values outside them
    got = randomized_response(frame, column="answer", domain=["1", "2", "3"], epsilon=2.0, seed=1)
    assert got.data["answer"].dtype == np.int64
    with pytest.raises(ValueError, match="outside the domain"):
        randomized_response(frame, column="answer", domain=["1", "2"], epsilon=2.0, seed=1)


def test_cli_randomized_response_errors_leave_no_output(tmp_path, capsys):
    from dpfast.cli import main

    source = _csv(tmp_path)
    output = tmp_path / "out.csv"
    base = ["release", "randomized-response", str(source), "-o", str(output), "--column", "disease"]
    assert main([*base, "--domain", "cold,flu", "--epsilon", "1"]) == 2
    assert "outside the domain" in capsys.readouterr().err
    assert main([*base, "--epsilon", "1"]) == 2
    assert "domain is required" in capsys.readouterr().err
    assert main([*base, "--domain", "cold,flu,none"]) == 2  # neither epsilon nor retention
    assert main([*base, "--domain", "cold,flu,none", "--retention", "1"]) == 2
    assert not output.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["people.csv"]
