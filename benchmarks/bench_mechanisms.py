"""k-noise, k-PRAM and randomized response on 10,000,000 rows against plain NumPy.

Each mechanism is timed against two NumPy pipelines of the same steps, in the same run:

* ``numpy (PCG64)``: NumPy's natural way, with random numbers from ``numpy.random``
  (PCG64: fast, but not a cryptographic generator, and its floats are not exact draws);
* ``numpy (os.urandom)``: the same steps with secure random words read in bulk from the
  operating system, the natural way to make the NumPy pipeline safe;
* ``numpy (ChaCha20)``: the same steps with dpfast's random source, the ChaCha20 keyed
  stream, written in vectorised NumPy, so that both sides do the same work.

k-noise's NumPy pipeline sorts the column to find the minimal δ; k-PRAM's counts every
interval with ``bincount`` at each bisection step, then groups the rows with a stable
``argsort``. Randomized response starts from a pandas categorical column.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import noise

N_ROWS = 10_000_000
K = 10
DOMAIN = [f"c{i:02d}" for i in range(12)]
CONSTANTS = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)
IMPLEMENTATIONS = ["dpfast", "numpy (PCG64)", "numpy (os.urandom)", "numpy (ChaCha20)"]


def secure_words(implementation, key, n_words):
    """Random 64-bit words for the secure NumPy pipelines."""
    if implementation == "numpy (os.urandom)":
        return np.frombuffer(os.urandom(8 * n_words), dtype=np.uint64)
    return chacha_words(key, n_words)


def chacha_words(key: np.ndarray, n_words: int) -> np.ndarray:
    """Words ``0 .. n_words - 1`` of the stream ``(key, nonce = 0)``, in NumPy (uint64)."""
    n_blocks = -(-n_words // 8)
    counters = np.arange(n_blocks, dtype=np.uint64)
    state = np.empty((16, n_blocks), dtype=np.uint32)
    state[0:4] = CONSTANTS[:, None]
    state[4:12] = key.astype(np.uint32)[:, None]
    state[12] = (counters & 0xFFFFFFFF).astype(np.uint32)
    state[13] = (counters >> np.uint64(32)).astype(np.uint32)
    state[14:16] = 0
    x = state.copy()

    def rotl(v, c):
        return (v << np.uint32(c)) | (v >> np.uint32(32 - c))

    def qr(a, b, c, d):
        x[a] += x[b]
        x[d] = rotl(x[d] ^ x[a], 16)
        x[c] += x[d]
        x[b] = rotl(x[b] ^ x[c], 12)
        x[a] += x[b]
        x[d] = rotl(x[d] ^ x[a], 8)
        x[c] += x[d]
        x[b] = rotl(x[b] ^ x[c], 7)

    for _ in range(10):
        qr(0, 4, 8, 12)
        qr(1, 5, 9, 13)
        qr(2, 6, 10, 14)
        qr(3, 7, 11, 15)
        qr(0, 5, 10, 15)
        qr(1, 6, 11, 12)
        qr(2, 7, 8, 13)
        qr(3, 4, 9, 14)
    x += state
    words = x[0::2].astype(np.uint64) | (x[1::2].astype(np.uint64) << np.uint64(32))
    return words.T.reshape(-1)[:n_words]


def test_numpy_chacha_words_match_dpfast():
    key = noise.NoiseSource.from_seed(0).key("check")
    words = chacha_words(key, 1000)
    got = noise.add_uniform(key, np.zeros(1000), 1.0)
    expected = (2 * (words >> np.uint64(11)).astype(np.int64) + 1 - 2**53) / 2**53
    assert (got == expected).all()


@pytest.fixture(scope="module")
def column():
    return np.random.default_rng(0).normal(50.0, 15.0, N_ROWS)


@pytest.fixture(scope="module")
def categories():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, len(DOMAIN), N_ROWS)
    return pd.DataFrame({"c": pd.Categorical.from_codes(codes, categories=DOMAIN)})


# -- k-noise ---------------------------------------------------------------------------


def numpy_k_noise(values, k, uniform):
    s = np.sort(values)
    n = s.shape[0]
    span = max(s[k - 1] - s[0], s[-1] - s[n - k], (s[k:] - s[:-k]).max() / 2)
    delta = math.nextafter(span / 2, math.inf)
    return values + delta * uniform(n), delta


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_k_noise(benchmark, record, column, implementation):
    table = column.reshape(-1, 1)
    if implementation == "dpfast":
        dpfast.k_noise(table[:1000], k=K, seed=1)
        result = benchmark.pedantic(
            lambda: dpfast.k_noise(table, k=K, seed=1).data, rounds=3, iterations=1
        )
        delta = dpfast.k_noise(table[:200_000], k=K, seed=1).private.extra["deltas"]["0"]
        assert delta == numpy_k_noise(column[:200_000], K, np.zeros)[1]
    else:
        if implementation == "numpy (PCG64)":
            rng = np.random.default_rng(1)

            def uniform(n):
                return rng.uniform(-1.0, 1.0, n)
        else:
            key = noise.NoiseSource.from_seed(1).key("k_noise", "uniform-noise", "0")

            def uniform(n):
                words = secure_words(implementation, key, n)
                return (2 * (words >> np.uint64(11)).astype(np.int64) + 1 - 2**53) / 2**53

        result = benchmark.pedantic(
            lambda: numpy_k_noise(column, K, uniform)[0][:, None],
            rounds=3 if "PCG" in implementation else 1,
            iterations=1,
        )
    assert result.shape == table.shape
    record(f"k-noise {N_ROWS:,} rows, k={K}", implementation)


# -- k-PRAM ----------------------------------------------------------------------------


def numpy_k_pram(values, k, retention, draws):
    n = values.shape[0]
    lo, hi = values.min(), values.max()
    width = hi - lo

    def index(m):
        return np.minimum(((values - lo) * (m / width)).astype(np.int64), m - 1)

    def valid(m):
        return np.bincount(index(m), minlength=m).min() >= k

    low, high = 1, n // k
    if not valid(high):
        while high - low > 1:
            middle = (low + high) // 2
            if valid(middle):
                low = middle
            else:
                high = middle
        high = low
    groups = index(high)
    counts = np.bincount(groups, minlength=high)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pool = values[np.argsort(groups, kind="stable")]
    keep, offset = draws(n, counts[groups])
    return np.where(keep, values, pool[starts[groups] + offset]), high


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_k_pram(benchmark, record, column, implementation):
    table = column.reshape(-1, 1)
    if implementation == "dpfast":
        dpfast.k_pram(table[:1000], k=K, seed=1)
        result = benchmark.pedantic(
            lambda: dpfast.k_pram(table, k=K, seed=1).data, rounds=3, iterations=1
        )
    else:
        if implementation == "numpy (PCG64)":
            rng = np.random.default_rng(1)

            def draws(n, sizes):
                return rng.random(n) < 0.5, rng.integers(0, sizes)
        else:
            key = noise.NoiseSource.from_seed(1).key("k_pram", "retain-or-replace", "0")

            def draws(n, sizes):
                words = secure_words(implementation, key, n)
                keep = (words & np.uint64(0xFFFFFFFF)) < np.uint64(2**31)
                offset = ((words >> np.uint64(32)) * sizes.astype(np.uint64)) >> np.uint64(32)
                return keep, offset.astype(np.int64)  # (Lemire's rare rejections skipped)

        result = benchmark.pedantic(
            lambda: numpy_k_pram(column, K, 0.5, draws)[0][:, None], rounds=1, iterations=1
        )
    assert result.shape == table.shape
    record(f"k-PRAM {N_ROWS:,} rows, k={K}", implementation)


# -- randomized response ---------------------------------------------------------------


def numpy_randomized_response(frame, domain, keep_probability, draws):
    series = frame["c"]
    mapping = pd.Index(domain).get_indexer(series.cat.categories)
    codes = mapping[series.cat.codes.to_numpy()]
    if (codes < 0).any():
        raise ValueError("outside the domain")
    keep, replacement = draws(codes.shape[0], len(domain))
    new = np.where(keep, codes, replacement)
    return frame.assign(c=pd.Categorical.from_codes(new, categories=domain))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_randomized_response(benchmark, record, categories, implementation):
    if implementation == "dpfast":
        dpfast.randomized_response(
            categories[:1000], column="c", domain=DOMAIN, epsilon=1.0, seed=1
        )
        result = benchmark.pedantic(
            lambda: (
                dpfast.randomized_response(
                    categories, column="c", domain=DOMAIN, epsilon=1.0, seed=1
                ).data
            ),
            rounds=5,
            iterations=1,
        )
    else:
        growth = math.exp(1.0)
        retention = (growth - 1) / (growth - 1 + len(DOMAIN))
        if implementation == "numpy (PCG64)":
            rng = np.random.default_rng(1)

            def draws(n, m):
                return rng.random(n) < retention, rng.integers(0, m, n)
        else:
            key = noise.NoiseSource.from_seed(1).key("randomized_response", "c")
            threshold = np.uint64(math.floor(retention * 2**32))

            def draws(n, m):
                words = secure_words(implementation, key, n)
                keep = (words & np.uint64(0xFFFFFFFF)) < threshold
                return keep, (((words >> np.uint64(32)) * np.uint64(m)) >> np.uint64(32)).astype(
                    np.int64
                )

        result = benchmark.pedantic(
            lambda: numpy_randomized_response(categories, DOMAIN, retention, draws),
            rounds=5 if "PCG" in implementation else 1,
            iterations=1,
        )
    assert result.shape == categories.shape
    record(f"randomized response {N_ROWS:,} rows, m={len(DOMAIN)}", implementation)
