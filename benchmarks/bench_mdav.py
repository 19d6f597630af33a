"""MDAV and insensitive MDAV: dpfast's kernels against a vectorised NumPy MDAV.

The NumPy baseline runs the same algorithm (docs/design.md#mdav-generic) with whole-array distance
passes per step, so it gives the same partition; the benchmark checks that it does.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import dpfast

if (Path(dpfast.__file__).parent / "partitions").is_dir():
    from dpfast.partitions.insensitive_mdav import insensitive_mdav_labels
    from dpfast.partitions.mdav import mdav_labels, standardise
else:  # a revision before the methods/partitions layout (bench-compare BASE)
    from dpfast.mdav import insensitive_mdav_labels, mdav_labels, standardise


def _squared_distances(points, query):
    d = (points[:, 0] - query[0]) ** 2
    for j in range(1, points.shape[1]):
        d += (points[:, j] - query[j]) ** 2
    return d


def numpy_mdav(data, k):
    """MDAV-generic with one vectorised pass per farthest / nearest search."""
    grid = standardise(data)
    n = grid.shape[0]
    alive = np.arange(n)
    labels = np.full(n, -1, dtype=np.int64)
    cluster = 0
    while alive.shape[0] >= 2 * k:
        points = grid[alive]
        sums = points.astype(np.int64).sum(axis=0)
        query = sums.astype(np.float64) / alive.shape[0]
        for _ in range(2 if alive.shape[0] >= 3 * k else 1):
            points = grid[alive]
            center = int(np.argmax(_squared_distances(points, query)))
            query = points[center].copy()
            d = _squared_distances(points, query)
            d[center] = -1.0
            if k < alive.shape[0]:
                cut = np.partition(d, k - 1)[k - 1]
                chosen = np.flatnonzero(d < cut)
                ties = np.flatnonzero(d == cut)[: k - chosen.shape[0]]
                chosen = np.concatenate([chosen, ties])
            else:
                chosen = np.arange(alive.shape[0])
            labels[alive[chosen]] = cluster
            cluster += 1
            keep = np.ones(alive.shape[0], dtype=bool)
            keep[chosen] = False
            alive = alive[keep]
    labels[alive] = cluster
    _, first = np.unique(labels, return_index=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.shape[0])
    return rank[labels]


def _normal(n, m, seed=0):
    return np.random.default_rng(seed).normal(50.0, 15.0, size=(n, m))


@pytest.fixture(scope="module", autouse=True)
def _warm_up():
    data = _normal(3000, 3)
    mdav_labels(data, 3)
    for path in ("fast", "general"):
        insensitive_mdav_labels(data, 3, [(0.0, 100.0)] * 3, path=path)


@pytest.mark.parametrize("implementation", ["dpfast", "numpy"])
def test_mdav_20k_x8(benchmark, record, implementation):
    data = _normal(20_000, 8, seed=1)
    run = mdav_labels if implementation == "dpfast" else numpy_mdav
    labels = benchmark.pedantic(lambda: run(data, 10), rounds=3, iterations=1)
    assert labels.shape == (20_000,)
    np.testing.assert_array_equal(labels, mdav_labels(data[:], 10))
    record("MDAV 20,000 x 8, k=10", implementation)


def test_mdav_100k_x3_k3(benchmark, record):
    data = _normal(100_000, 3, seed=2)
    labels = benchmark.pedantic(lambda: mdav_labels(data, 3), rounds=3, iterations=1)
    assert np.bincount(labels).min() >= 3
    record("MDAV 100,000 x 3, k=3", "dpfast")


def test_mdav_1m_x8_k10(benchmark, record):
    data = _normal(1_000_000, 8, seed=3)
    labels = benchmark.pedantic(lambda: mdav_labels(data, 10), rounds=1, iterations=1)
    assert labels.max() + 1 == 100_000
    record("MDAV 1,000,000 x 8, k=10", "dpfast")


def test_insensitive_fast_1m_x8(benchmark, record):
    data = _normal(1_000_000, 8, seed=4)
    labels = benchmark.pedantic(
        lambda: insensitive_mdav_labels(data, 10, [(0.0, 100.0)] * 8, path="fast"),
        rounds=3,
        iterations=1,
    )
    assert labels.max() + 1 == 100_000
    record("insensitive MDAV 1,000,000 x 8, k=10 (fast path)", "dpfast")


@pytest.mark.parametrize("path", ["fast", "general"])
def test_insensitive_paths_100k_x8(benchmark, record, path):
    data = _normal(100_000, 8, seed=5)
    labels = benchmark.pedantic(
        lambda: insensitive_mdav_labels(data, 10, [(0.0, 100.0)] * 8, path=path),
        rounds=1,
        iterations=1,
    )
    assert labels.max() + 1 == 10_000
    record(
        "insensitive MDAV 100,000 x 8, k=10", "dpfast" if path == "fast" else "dpfast general path"
    )


_MEMORY_PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    from dpfast.partitions.mdav import mdav_labels

    def status(field):
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    n, m = int(sys.argv[1]), int(sys.argv[2])
    mdav_labels(np.random.default_rng(0).normal(size=(1000, m)), 3)
    data = np.random.default_rng(0).normal(50, 15, (n, m))
    before = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset the peak-RSS counter
    mdav_labels(data, 3)
    print(json.dumps({"input_bytes": data.nbytes, "peak_bytes": status("VmHWM") - before}))
""")


def test_mdav_peak_memory_is_linear(note, fresh_process):
    """Extra peak memory of MDAV over the input size at 100k and 400k x 3: O(n m)."""
    ratios = []
    for n in (100_000, 400_000):
        measured = fresh_process(_MEMORY_PROBE, n, 3)
        ratios.append(measured["peak_bytes"] / measured["input_bytes"])
        note(
            f"MDAV {n:,} x 3 peak extra memory: {measured['peak_bytes'] / 2**20:.1f} MiB = "
            f"{ratios[-1]:.1f}x the input"
        )
    assert max(ratios) < 20  # an n x n distance matrix would be n / 3 times the input
