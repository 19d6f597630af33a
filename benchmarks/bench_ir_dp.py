"""ir_dp against the plain-NumPy pipeline that does the same job, and against peers.

The NumPy pipeline, per column: clip to the bounds, argsort, group means with bincount,
NumPy Laplace noise per group, fancy-indexing back; then one row shuffle, as ir_dp does
by default.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import dpfast

K = 10
EPSILON = 1.0


def numpy_ir_dp(data, k, epsilon, lower, upper, rng, linkage="columns"):
    """The same job in plain NumPy: each column shuffled on its own by default, as dpfast."""
    n, m = data.shape
    n_groups = n // k
    scale = m * (upper - lower) / (k * epsilon)
    ranks_to_group = np.minimum(np.arange(n) // k, n_groups - 1)
    out = np.empty_like(data)
    for j in range(m):
        column = np.clip(data[:, j], lower, upper)
        order = np.argsort(column)
        sums = np.bincount(ranks_to_group, weights=column[order], minlength=n_groups)
        sizes = np.bincount(ranks_to_group, minlength=n_groups)
        noisy = np.clip(sums / sizes + rng.laplace(0.0, scale, n_groups), lower, upper)
        out[order, j] = noisy[ranks_to_group]
        if linkage == "columns":
            out[:, j] = out[rng.permutation(n), j]
    return out if linkage == "columns" else out[rng.permutation(n)]


@pytest.fixture(scope="module", params=[1_000_000, 10_000_000], ids=["1M", "10M"])
def table(request):
    rng = np.random.default_rng(0)
    return rng.normal(50.0, 15.0, size=(request.param, 10))


def _bounds(m):
    return {j: (0.0, 100.0) for j in range(m)}


def test_ir_dp_dpfast(benchmark, record, table):
    dpfast.ir_dp(table[:1000], k=K, epsilon=EPSILON, bounds=_bounds(10))  # warm-up (compile)
    result = benchmark.pedantic(
        lambda: dpfast.ir_dp(table, k=K, epsilon=EPSILON, bounds=_bounds(10)),
        rounds=3,
        iterations=1,
    )
    assert result.data.shape == table.shape
    record(f"ir_dp {table.shape[0]:,} x 10, k={K}", "dpfast")


def test_ir_dp_numpy(benchmark, record, table):
    rng = np.random.default_rng(1)
    result = benchmark.pedantic(
        lambda: numpy_ir_dp(table, K, EPSILON, 0.0, 100.0, rng), rounds=3, iterations=1
    )
    assert result.shape == table.shape
    record(f"ir_dp {table.shape[0]:,} x 10, k={K}", "numpy pipeline")


def test_ir_dp_1m_x5_k3(benchmark, record):
    data = np.random.default_rng(2).normal(50.0, 15.0, size=(1_000_000, 5))
    dpfast.ir_dp(data[:1000], k=3, epsilon=EPSILON, bounds=_bounds(5))
    result = benchmark.pedantic(
        lambda: dpfast.ir_dp(data, k=3, epsilon=EPSILON, bounds=_bounds(5)),
        rounds=5,
        iterations=1,
    )
    assert result.data.shape == data.shape
    record("ir_dp 1,000,000 x 5, k=3 (secure noise)", "dpfast")


def test_individual_ranking_1m_x5_k3(benchmark, record):
    data = np.random.default_rng(3).normal(50.0, 15.0, size=(1_000_000, 5))
    dpfast.individual_ranking(data[:1000], k=3)
    result = benchmark.pedantic(
        lambda: dpfast.individual_ranking(data, k=3), rounds=5, iterations=1
    )
    assert result.data.shape == data.shape
    record("individual ranking 1,000,000 x 5, k=3", "dpfast")


_MEMORY_PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import dpfast

    def status(field):
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    n, m = int(sys.argv[1]), int(sys.argv[2])
    dpfast.ir_dp(np.random.default_rng(0).normal(50, 15, (1000, m)), k=10, epsilon=1.0,
                 bounds={j: (0.0, 100.0) for j in range(m)})
    before = status("VmRSS")
    data = np.random.default_rng(0).normal(50, 15, (n, m))
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset the peak-RSS counter
    release = dpfast.ir_dp(data, k=10, epsilon=1.0, bounds={j: (0.0, 100.0) for j in range(m)})
    peak = status("VmHWM")
    print(json.dumps({"input_bytes": data.nbytes, "peak_bytes": peak - before}))
""")


def test_ir_dp_peak_memory(note, fresh_process):
    """Peak resident memory of ir_dp on 10M x 10, input and output included, over input size."""
    measured = fresh_process(_MEMORY_PROBE, 10_000_000, 10)
    ratio = measured["peak_bytes"] / measured["input_bytes"]
    note(
        f"ir_dp 10,000,000 x 10 peak memory: {measured['peak_bytes'] / 2**30:.2f} GiB "
        f"= {ratio:.2f}x the input ({measured['input_bytes'] / 2**30:.2f} GiB), input and "
        "output included"
    )
    assert ratio <= 3.0


def _privlib_ir_dp(frame, settings_path, k, epsilon):
    import contextlib
    import io

    from privlib.anonymization.src.algorithms.differential_privacy import Differential_privacy
    from privlib.anonymization.src.algorithms.microaggregation import Microaggregation
    from privlib.anonymization.src.entities.dataset_DataFrame import Dataset_DataFrame

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        dataset = Dataset_DataFrame(frame, settings_path)
        scheme = Differential_privacy(dataset, k, epsilon)
        scheme.calculate_anonymization(Microaggregation())
        return scheme.anonymized_dataset_to_dataframe()


@pytest.mark.parametrize("implementation", ["dpfast", "privlib 0.0.4"])
def test_ir_dp_vs_privlib_20k(benchmark, record, implementation, tmp_path):
    """Side by side with PyPI privlib (the authors' group's library), where it is installed."""
    n, m, k = 20_000, 5, 3
    frame = __import__("pandas").DataFrame(
        np.random.default_rng(4).uniform(0, 100, (n, m)), columns=[f"a{j}" for j in range(m)]
    )
    if implementation == "dpfast":
        bounds = {c: (0.0, 100.0) for c in frame.columns}
        dpfast.ir_dp(frame.iloc[:100], k=k, epsilon=EPSILON, bounds=bounds)
        result = benchmark.pedantic(
            lambda: dpfast.ir_dp(frame, k=k, epsilon=EPSILON, bounds=bounds).data,
            rounds=5,
            iterations=1,
        )
    else:
        pytest.importorskip("privlib")
        frame.name = "benchmark"
        settings = tmp_path / "settings.xml"
        settings.write_text(
            "<dataset>"
            + "".join(
                f'<attribute name="a{j}" sensitivity_type="quasi_identifier" '
                f'attribute_type="numerical_continuous" min_value="0" max_value="100"/>'
                for j in range(m)
            )
            + "</dataset>"
        )
        result = benchmark.pedantic(
            lambda: _privlib_ir_dp(frame, str(settings), k, EPSILON), rounds=1, iterations=1
        )
    assert result.shape == (n, m)
    record(f"ir_dp {n:,} x {m}, k={k}", implementation)
