"""Exact secure discrete Laplace against float samplers that are not safe.

Job: 10,000,000 draws of Laplace-type noise, single thread. dpfast draws exact discrete
Laplace of scale ``T`` (about 2**40, the typical grid scale) from ChaCha20 streams keyed by
``os.urandom``; numpy draws float Laplace from PCG64 (not a CSPRNG, leaks low-order bits);
diffprivlib's ``Laplace`` mechanism is per-value Python, so it gets a smaller job of its
own. ``test_summary`` prints draws per second and the ratios from one process (medians of
5 ``perf_counter`` runs), which is what to compare across machines.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from dpfast import noise

N_DRAWS = 10_000_000
N_PEER = 100_000  # diffprivlib draws one value per Python call
T = 2**40 + 12345  # not a power of two: the uniform step sometimes rejects


@pytest.fixture(scope="module")
def key():
    source = noise.NoiseSource.secure()
    got = noise.discrete_laplace(source.key("bench"), T, 1000)  # warm-up: load the kernels
    assert got.shape == (1000,)
    return source.key("bench")


def _median_seconds(function, repeats=5):
    function()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _diffprivlib_draws(n):
    try:
        from diffprivlib import mechanisms
    except ImportError as exc:  # not installed, or an incompatible scikit-learn
        pytest.skip(f"diffprivlib unavailable: {exc}")
    mechanism = mechanisms.Laplace(epsilon=1.0, sensitivity=float(T))
    return np.array([mechanism.randomise(0.0) for _ in range(n)])


def test_dpfast_exact_discrete_laplace(benchmark, record, key):
    noise.discrete_laplace(key, T, 1000)
    got = benchmark.pedantic(
        noise.discrete_laplace,
        args=(key, T, N_DRAWS),
        kwargs={"n_threads": 1},
        rounds=5,
        iterations=1,
    )
    record("laplace noise, 10M draws", "dpfast")
    assert got.shape == (N_DRAWS,) and got.dtype == np.int64
    assert abs(got.std() / (np.sqrt(2) * T) - 1) < 0.01


def test_numpy_float_laplace(benchmark, record):
    rng = np.random.default_rng(0)
    rng.laplace(0.0, float(T), 1000)
    got = benchmark.pedantic(rng.laplace, args=(0.0, float(T), N_DRAWS), rounds=5, iterations=1)
    record("laplace noise, 10M draws", "numpy (unsafe float)")
    assert got.shape == (N_DRAWS,)


def test_dpfast_small_job(benchmark, record, key):
    got = benchmark.pedantic(noise.discrete_laplace, args=(key, T, N_PEER), rounds=5, iterations=1)
    record("laplace noise, 100k draws", "dpfast")
    assert got.shape == (N_PEER,)


def test_diffprivlib_laplace(benchmark, record):
    _diffprivlib_draws(10)
    got = benchmark.pedantic(_diffprivlib_draws, args=(N_PEER,), rounds=3, iterations=1)
    record("laplace noise, 100k draws", "diffprivlib Laplace")
    assert got.shape == (N_PEER,)


# Count noise at epsilon = 0.5 (DiffGen's counts at epsilon = 1): 10M counts, one thread.
COUNT_EPSILON = 0.5


def _counts():
    return np.zeros(N_DRAWS, dtype=np.int64)


def test_dpfast_count_noise(benchmark, record, key):
    counts = _counts()
    plan = noise.count_noise_plan(COUNT_EPSILON)
    assert plan.kind == "dyadic"
    got = benchmark.pedantic(
        noise.add_count_noise,
        args=(key, counts, COUNT_EPSILON),
        kwargs={"n_threads": 1},
        rounds=5,
        iterations=1,
    )[0]
    record("count noise eps=0.5, 10M", "dpfast")
    p = plan.numerator / plan.denominator
    assert abs((got == 0).mean() - 1 / (1 + p)) < 1e-3  # clamped at 0


def test_dpfast_count_noise_rate(benchmark, record, key):
    s, t = noise.rate_at_most(COUNT_EPSILON)
    got = benchmark.pedantic(
        noise.discrete_laplace_rate,
        args=(key, s, t, N_DRAWS),
        kwargs={"n_threads": 1},
        rounds=3,
        iterations=1,
    )
    record("count noise eps=0.5, 10M", "dpfast rate sampler (CKS)")
    assert got.shape == (N_DRAWS,)


def _numpy_geometric_counts(rng, counts):
    # the same distribution from PCG64 (not a CSPRNG): difference of two geometrics
    q = 1.0 - np.exp(-COUNT_EPSILON)
    noisy = counts + rng.geometric(q, counts.shape[0]) - rng.geometric(q, counts.shape[0])
    return np.maximum(noisy, 0)


def test_numpy_count_noise(benchmark, record):
    rng = np.random.default_rng(0)
    counts = _counts()
    got = benchmark.pedantic(_numpy_geometric_counts, args=(rng, counts), rounds=5, iterations=1)
    record("count noise eps=0.5, 10M", "numpy geometric (unsafe)")
    assert got.shape == (N_DRAWS,)


def test_dpfast_permutation(benchmark, record, key):
    noise.permutation(key, 1000)
    got = benchmark.pedantic(noise.permutation, args=(key, N_DRAWS), rounds=3, iterations=1)
    record("permutation of 10M", "dpfast")
    assert got.shape == (N_DRAWS,)


def test_numpy_permutation(benchmark, record):
    rng = np.random.default_rng(0)
    got = benchmark.pedantic(rng.permutation, args=(N_DRAWS,), rounds=3, iterations=1)
    record("permutation of 10M", "numpy (PCG64)")
    assert got.shape == (N_DRAWS,)


def test_summary(note, key):
    rng = np.random.default_rng(0)
    seconds = {
        "dpfast exact discrete Laplace (secure)": _median_seconds(
            lambda: noise.discrete_laplace(key, T, N_DRAWS, n_threads=1)
        ),
        "numpy Generator.laplace (unsafe)": _median_seconds(
            lambda: rng.laplace(0.0, float(T), N_DRAWS)
        ),
    }
    rates = {name: N_DRAWS / s for name, s in seconds.items()}
    try:
        import diffprivlib.mechanisms  # noqa: F401
    except ImportError:
        pass
    else:
        rates["diffprivlib Laplace"] = N_PEER / _median_seconds(
            lambda: _diffprivlib_draws(N_PEER), repeats=3
        )
    ours = rates["dpfast exact discrete Laplace (secure)"]
    lines = [f"noise draws per second, one thread, scale {T}:"]
    for name, rate in rates.items():
        lines.append(f"  {name:<42} {rate / 1e6:8.2f} M/s   dpfast / this = {ours / rate:6.2f}")
    for line in lines:
        note(line)
        print(line)
    assert ours > 0
