"""Disclosure risk measures: dpfast against plain NumPy and peers doing the same job.

- Record linkage (docs/risk.md#record-linkage): 8 normal attributes (sd 15), released with
  normal noise of sd 3. dpfast's exact k-d tree ball queries against a blockwise NumPy
  distance matrix computing the same sums in the same order (so the same scores, checked)
  and scikit-learn's ``NearestNeighbors`` (k-d tree, all cores; the nearest record only,
  ties not counted, so its rate is checked to within 1e-3). The NumPy job at 100,000 rows
  takes minutes: it computes 10^10 distances.
- Uniqueness (docs/risk.md#uniqueness): 10,000,000 records, 5 quasi-identifiers (two
  integer columns, a categorical, an object-string column, a 5-digit integer), against
  pandas ``groupby(...).transform("size")`` and NumPy (``np.unique`` per column, then on the
  rows of codes).
- Peak memory of both, in a fresh process, as a multiple of the input's bytes.

scikit-learn is in the ``bench-peers`` extra; its jobs are skipped when it is missing.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfast import risk

M = 8
NOISE = 3.0
QUASI_IDENTIFIERS = ["age", "sex", "region", "education", "zip"]


def _linkage_tables(n, seed=0):
    rng = np.random.default_rng(seed)
    original = rng.normal(50.0, 15.0, (n, M))
    return original, original + rng.normal(0.0, NOISE, (n, M))


def _weights(original):
    """1 / population variance per column, with correctly rounded sums (as dpfast)."""
    out = []
    for column in original.T:
        mean = math.fsum(column.tolist()) / column.shape[0]
        centred = column - mean
        out.append(column.shape[0] / math.fsum((centred * centred).tolist()))
    return np.array(out)


def numpy_linkage(original, released, block=128):
    """Per-record linkage scores from blockwise distance matrices (docs/risk.md sums)."""
    n, m = original.shape
    weights = _weights(original)
    columns = np.ascontiguousarray(original.T)
    scores = np.empty(n)
    distances = np.empty((block, n))
    term = np.empty((block, n))
    for first in range(0, n, block):
        queries = released[first : first + block]
        b = queries.shape[0]
        d, t = distances[:b], term[:b]
        d[:] = 0.0
        for j in range(m):
            np.subtract(queries[:, j, None], columns[j][None, :], out=t)
            np.multiply(t, t, out=t)
            t *= weights[j]
            d += t
        own = d[np.arange(b), np.arange(first, first + b)][:, None]
        ties = (d == own).sum(axis=1)
        scores[first : first + b] = np.where((d < own).any(axis=1), 0.0, 1.0 / ties)
    return scores


def sklearn_linkage(original, released):
    """Share of released records whose nearest original (scikit-learn) is their source."""
    neighbors = pytest.importorskip("sklearn.neighbors", reason="scikit-learn not installed")
    scale = np.sqrt(_weights(original))
    model = neighbors.NearestNeighbors(n_neighbors=1, algorithm="kd_tree", n_jobs=-1)
    model.fit(original * scale)
    nearest = model.kneighbors(released * scale, return_distance=False)[:, 0]
    return float(np.mean(nearest == np.arange(original.shape[0])))


@pytest.fixture(scope="module", autouse=True)
def _warm_up():
    original, released = _linkage_tables(3000)
    risk.record_linkage(original, released)
    risk.uniqueness(_people(1000), QUASI_IDENTIFIERS, k=3)


@pytest.fixture(scope="module")
def tables_100k():
    return _linkage_tables(100_000, seed=1)


@pytest.fixture(scope="module")
def scores_100k(tables_100k):
    return risk.record_linkage(*tables_100k, per_record=True)


def test_linkage_100k_dpfast(benchmark, record, tables_100k, scores_100k):
    got = benchmark.pedantic(lambda: risk.record_linkage(*tables_100k), rounds=3, iterations=1)
    assert got == np.mean(scores_100k) and 0.5 < got < 1.0
    record("record linkage 100,000 x 8", "dpfast")


def test_linkage_100k_numpy(benchmark, record, tables_100k, scores_100k):
    got = benchmark.pedantic(lambda: numpy_linkage(*tables_100k), rounds=1, iterations=1)
    np.testing.assert_array_equal(got, scores_100k)
    record("record linkage 100,000 x 8", "numpy blockwise")


def test_linkage_100k_sklearn(benchmark, record, tables_100k, scores_100k):
    sklearn_linkage(*(table[:1000] for table in tables_100k))  # skip early; warm up
    got = benchmark.pedantic(lambda: sklearn_linkage(*tables_100k), rounds=3, iterations=1)
    assert abs(got - np.mean(scores_100k)) < 1e-3
    record("record linkage 100,000 x 8", "scikit-learn kd_tree")


@pytest.fixture(scope="module")
def tables_1m():
    return _linkage_tables(1_000_000, seed=2)


@pytest.fixture(scope="module")
def rate_1m(tables_1m):
    return risk.record_linkage(*tables_1m)


def test_linkage_1m_dpfast(benchmark, record, tables_1m, rate_1m):
    got = benchmark.pedantic(lambda: risk.record_linkage(*tables_1m), rounds=3, iterations=1)
    assert got == rate_1m and 0.3 < got < 1.0
    record("record linkage 1,000,000 x 8", "dpfast")


def test_linkage_1m_sklearn(benchmark, record, tables_1m, rate_1m):
    sklearn_linkage(*(table[:1000] for table in tables_1m))
    got = benchmark.pedantic(lambda: sklearn_linkage(*tables_1m), rounds=1, iterations=1)
    assert abs(got - rate_1m) < 1e-3
    record("record linkage 1,000,000 x 8", "scikit-learn kd_tree")


def _people(n, seed=0):
    rng = np.random.default_rng(seed)
    levels = np.array([f"level {i}" for i in range(16)], dtype=object)
    return pd.DataFrame(
        {
            "age": rng.integers(0, 100, n),
            "sex": pd.Categorical.from_codes(rng.integers(0, 2, n), ["f", "m"]),
            "region": rng.integers(0, 50, n),
            "education": levels[rng.integers(0, 16, n)],
            "zip": rng.integers(10_000, 100_000, n),
        }
    )


def numpy_uniqueness(frame):
    """Class size of each record: codes per column, then ``np.unique`` over their rows."""
    codes = np.column_stack(
        [np.unique(np.asarray(frame[name]), return_inverse=True)[1] for name in frame.columns]
    )
    _, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)]


def pandas_uniqueness(frame):
    return frame.groupby(list(frame.columns), sort=False, observed=True)["age"].transform("size")


@pytest.fixture(scope="module")
def people_10m():
    return _people(10_000_000)


@pytest.fixture(scope="module")
def sizes_10m(people_10m):
    return risk.uniqueness(people_10m, QUASI_IDENTIFIERS, k=5).class_sizes


@pytest.mark.parametrize("implementation", ["dpfast", "numpy", "pandas groupby"])
def test_uniqueness_10m(benchmark, record, people_10m, sizes_10m, implementation):
    run = {
        "dpfast": lambda: risk.uniqueness(people_10m, QUASI_IDENTIFIERS, k=5).class_sizes,
        "numpy": lambda: numpy_uniqueness(people_10m),
        "pandas groupby": lambda: pandas_uniqueness(people_10m),
    }[implementation]
    rounds = 3 if implementation == "dpfast" else 1
    got = benchmark.pedantic(run, rounds=rounds, iterations=1)
    assert got.shape == (10_000_000,)
    np.testing.assert_array_equal(np.asarray(got), sizes_10m)
    record("uniqueness 10,000,000 x 5", implementation)


_MEMORY_PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from bench_risk import _linkage_tables, _people, QUASI_IDENTIFIERS
    from dpfast import risk

    def status(field):
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    job = sys.argv[1]
    if job == "linkage":
        small = _linkage_tables(2000)
        risk.record_linkage(*small, n_threads=2)
        inputs = _linkage_tables(1_000_000)
        input_bytes = inputs[0].nbytes + inputs[1].nbytes
        run = lambda: risk.record_linkage(*inputs, n_threads=2)
    else:
        risk.uniqueness(_people(1000), QUASI_IDENTIFIERS, k=5)
        table = _people(10_000_000)
        input_bytes = int(table.memory_usage(deep=False).sum())  # strings: pointers
        run = lambda: risk.uniqueness(table, QUASI_IDENTIFIERS, k=5)
    before = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset the peak-RSS counter
    run()
    print(json.dumps({"input_bytes": input_bytes, "peak_bytes": status("VmHWM") - before}))
""")


@pytest.mark.parametrize(
    ("job", "label"),
    [("linkage", "record linkage 1,000,000 x 8"), ("uniqueness", "uniqueness 10,000,000 x 5")],
)
def test_peak_memory(note, fresh_process, job, label):
    """Extra peak memory (resident set) of one call, over the input's bytes: at most 3x."""
    measured = fresh_process(_MEMORY_PROBE, job, Path(__file__).parent)
    ratio = measured["peak_bytes"] / measured["input_bytes"]
    note(
        f"{label} peak extra memory: {measured['peak_bytes'] / 2**20:.0f} MiB = {ratio:.2f}x "
        f"the input ({measured['input_bytes'] / 2**20:.0f} MiB)"
    )
    assert ratio <= 3
