"""Tests of dpfast.noise and its kernels (ChaCha20 streams, exact samplers)."""

import math
import warnings
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpfast import noise
from dpfast._kernels import chacha, lanes, uniform
from dpfast.exceptions import UnsafeSamplerWarning
from tests.reference import noise_reference as ref

# RFC 7539 section 2.3.2: key 00 01 .. 1f; state words 12..15 = 00000001 09000000
# 4a000000 00000000, i.e. DJB counter 0x09000000_00000001 and nonce 0x4a000000.
RFC_KEY = np.array(
    [int.from_bytes(bytes(range(4 * i, 4 * i + 4)), "little") for i in range(8)],
    dtype=np.uint64,
)
RFC_COUNTER = 0x09000000_00000001
RFC_NONCE = 0x4A000000
RFC_OUT = [
    0xE4E7F110, 0x15593BD1, 0x1FDD0F50, 0xC47120A3, 0xC7F4D1C7, 0x0368C033, 0x9AAA2204,
    0x4E6CD4C3, 0x466482D2, 0x09AA9F07, 0x05D7C214, 0xA2028BD9, 0xD19C12B5, 0xB94E16DE,
    0xE883D0CB, 0x4E3C50A2,
]  # fmt: skip

SEEDED = noise.NoiseSource.from_seed(20240601)
KEY = SEEDED.key("tests", "noise")
KEY_LIST = [int(w) for w in KEY]


# ---------------------------------------------------------------- ChaCha20


def test_chacha_block_matches_rfc7539_vector():
    got = np.empty(16, dtype=np.uint32)
    chacha.chacha20_block(RFC_KEY, np.uint64(RFC_COUNTER), np.uint64(RFC_NONCE), got)
    assert got.tolist() == RFC_OUT


def test_reference_chacha_matches_rfc7539_vector():
    assert ref.chacha20_block(RFC_KEY.tolist(), RFC_COUNTER, RFC_NONCE) == RFC_OUT


def test_chacha_block64_is_the_block_as_little_endian_words():
    kt = tuple(np.uint64(w) for w in RFC_KEY)
    got = chacha.chacha20_block64(kt, np.uint64(RFC_COUNTER), np.uint64(RFC_NONCE))
    expected = [RFC_OUT[2 * j] | (RFC_OUT[2 * j + 1] << 32) for j in range(8)]
    assert [int(w) for w in got] == expected


def test_chacha_16_lanes_equal_scalar_blocks():
    rng = np.random.default_rng(1)
    counters = rng.integers(0, 2**63, 16, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    nonces = rng.integers(0, 2**63, 16, dtype=np.uint64)
    counters[0], nonces[0] = np.uint64(RFC_COUNTER), np.uint64(RFC_NONCE)
    x = np.empty(256, dtype=np.uint32)
    s = np.empty(256, dtype=np.uint32)
    got = np.empty(128, dtype=np.uint64)
    chacha.chacha20_blocks16(RFC_KEY, counters, nonces, x, s, got)
    block = np.empty(16, dtype=np.uint32)
    for lane in range(16):
        chacha.chacha20_block(RFC_KEY, counters[lane], nonces[lane], block)
        words = block.astype(np.uint64)
        expected = words[0::2] | (words[1::2] << np.uint64(32))
        np.testing.assert_array_equal(got[lane * 8 : lane * 8 + 8], expected)


def test_chacha_words_are_consecutive_blocks():
    got = np.empty(20 * 8, dtype=np.uint64)
    chacha.chacha20_words(KEY, np.uint64(3), 20, got)
    block = np.empty(16, dtype=np.uint32)
    for counter in (0, 15, 16, 19):
        chacha.chacha20_block(KEY, np.uint64(counter), np.uint64(3), block)
        words = block.astype(np.uint64)
        expected = words[0::2] | (words[1::2] << np.uint64(32))
        np.testing.assert_array_equal(got[counter * 8 : counter * 8 + 8], expected)


# ------------------------------------------------- kernels against the reference

T_VALUES = [1, 2, 3, 7, 1000, 2**40, 2**40 + 12345, 2**61, 2**62 - 1]


@pytest.mark.parametrize("t", T_VALUES)
def test_discrete_laplace_equals_reference(t):
    start = 1000 * t % 2**40
    got = noise.discrete_laplace(KEY, t, 150, start=start)
    expected = [ref.discrete_laplace(KEY_LIST, t, start + i) for i in range(150)]
    assert got.tolist() == expected


def test_discrete_laplace_equals_reference_at_top_nonces():
    start = 2**64 - 40
    got = noise.discrete_laplace(KEY, 5, 40, start=start)
    assert got.tolist() == [ref.discrete_laplace(KEY_LIST, 5, start + i) for i in range(40)]


def _blocks_used(draw, *args):
    streams = []

    class Recording(ref.BitStream):
        def __init__(self, *a):
            super().__init__(*a)
            streams.append(self)

    original = ref.BitStream
    ref.BitStream = Recording
    try:
        value = draw(*args)
    finally:
        ref.BitStream = original
    return value, streams[0].n_bits // 512


def test_draws_needing_more_than_one_block_equal_reference():
    # Most draws end inside their first 512 bits; find some that do not, so that the
    # scalar extension path (counter 1, 2, ...) is compared too.
    t = 2**61
    got = noise.discrete_laplace(KEY, t, 1500)
    long_draws = 0
    for i in range(1500):
        expected, blocks = _blocks_used(ref.discrete_laplace, KEY_LIST, t, i)
        assert got[i] == expected
        long_draws += blocks > 1
    assert long_draws >= 2

    high = 2**62 + 1  # each 63-bit try is kept with probability about 1/2
    got = noise.uniform_integers(KEY, high, 3000)
    long_draws = 0
    for i in range(3000):
        expected, blocks = _blocks_used(ref.uniform_integer, KEY_LIST, high, i)
        assert got[i] == expected
        long_draws += blocks > 1
    assert long_draws >= 3


def test_cap_saturates_and_equals_reference():
    got = noise.discrete_laplace(KEY, 1000, 500, cap=700)
    assert np.abs(got).max() == 700
    assert (np.abs(got) == 700).sum() > 50
    assert got.tolist() == [ref.discrete_laplace(KEY_LIST, 1000, i, 700) for i in range(500)]
    # Scale above the cap: the uniform part alone may exceed it.
    got = noise.discrete_laplace(KEY, 2**40, 50, cap=3)
    assert set(np.abs(got).tolist()) <= {0, 1, 2, 3}
    assert got.tolist() == [ref.discrete_laplace(KEY_LIST, 2**40, i, 3) for i in range(50)]


@pytest.mark.parametrize("high", [1, 2, 3, 6, 1000, 2**40 + 3, 2**55 + 1, 2**63 - 1])
def test_uniform_integers_equal_reference(high):
    got = noise.uniform_integers(KEY, high, 100, start=7)
    assert got.tolist() == [ref.uniform_integer(KEY_LIST, high, 7 + i) for i in range(100)]


@pytest.mark.parametrize(
    ("numerator", "denominator"),
    [(0, 1), (1, 1), (1, 2), (1, 3), (2, 3), (5, 2**62), (2**61, 2**62 - 1), (3, 2**48 + 1)],
)
def test_bernoulli_equals_reference(numerator, denominator):
    got = noise.bernoulli_rational(KEY, numerator, denominator, 100, start=11)
    expected = [
        ref.bernoulli_rational(KEY_LIST, numerator, denominator, 11 + i) for i in range(100)
    ]
    assert got.tolist() == expected


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000, 5000])
def test_permutation_equals_reference(n):
    assert noise.permutation(KEY, n).tolist() == ref.permutation(KEY_LIST, n)


@pytest.mark.parametrize(
    ("n", "bits"),
    [(1, 1), (2, 1), (17, 2), (300, 3), (2000, 5), (129, 7), (600, 16), (70, 17)],
)
def test_bucketed_permutation_equals_reference(n, bits):
    got = np.empty(n, dtype=np.int64)
    uniform.permutation_kernel(KEY, bits, got)
    assert got.tolist() == ref.permutation(KEY_LIST, n, bucket_bits=bits)


def test_permutation_uses_buckets_beyond_two_to_the_sixteen():
    n = 2**16 + 1
    assert noise.permutation_bucket_bits(n) == 1
    assert noise.permutation_bucket_bits(n - 1) == 0
    sizes = noise.permutation_bucket_sizes(KEY, n)
    assert sizes.shape == (2,) and sizes.sum() == n and min(sizes) > 0.45 * n
    whole = noise.permutation(KEY, n)
    first = np.sort(whole[: sizes[0]])
    words = np.empty(((n + 31) // 32 + 15) // 16 * 128, dtype=np.uint64)
    chacha.chacha20_words(KEY, 0, words.shape[0] // 8, words)
    lanes = words.view(np.uint16)[:n]  # little-endian: lane i % 4 of word i // 4
    np.testing.assert_array_equal(first, np.flatnonzero((lanes >> np.uint16(15)) == 0))


def _bucket_ranges(n_buckets):
    """Bucket ranges ``(lo, hi)`` of a permutation: empty, single, first, last and whole."""
    cuts = sorted({0, n_buckets, n_buckets // 3, n_buckets // 2, n_buckets - 1})
    return [(lo, hi) for lo in cuts for hi in cuts if lo <= hi]


@pytest.mark.parametrize("n", [5, 2**16, 300_001])
def test_permutation_parts_are_slices_of_the_whole(n):
    whole = noise.permutation(KEY, n)
    sizes = noise.permutation_bucket_sizes(KEY, n)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    n_buckets = sizes.shape[0]
    for lo, hi in _bucket_ranges(n_buckets):
        part = noise.permutation_part(KEY, n, lo, hi, sizes)
        np.testing.assert_array_equal(part, whole[starts[lo] : starts[hi]])
    np.testing.assert_array_equal(noise.permutation_part(KEY, n, 0, n_buckets), whole)


@pytest.mark.parametrize("n", [5, 2**16, 300_001])
@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("middle", [False, True])
def test_permutation_part_groups_are_the_groups_of_the_parts(n, k, dtype, middle):
    # the slow, obvious reading: each item of the part is a rank, looked up in its group
    groups = max(1, n // k)
    values = np.random.default_rng(n + k).permutation(groups * 7)[:groups].astype(dtype)
    big = groups // 2 if middle else None
    # group g holds ranks [starts[g], starts[g + 1]): k each, group big (else the last) more
    sizes_of_groups = np.full(groups, k)
    sizes_of_groups[groups - 1 if big is None else big] += n - k * groups
    starts = np.concatenate([[0], np.cumsum(sizes_of_groups)])
    sizes = noise.permutation_bucket_sizes(KEY, n)
    n_buckets = sizes.shape[0]
    for lo, hi in _bucket_ranges(n_buckets):
        items = noise.permutation_part(KEY, n, lo, hi, sizes)
        expected = values[np.searchsorted(starts, items, side="right") - 1]
        got = noise.permutation_part_groups(KEY, n, lo, hi, values, k, sizes, big=big)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected)
    if middle:
        return
    # the sizes are optional; a non-contiguous array of values is read as its values
    strided = np.repeat(values, 2)[::2]
    np.testing.assert_array_equal(
        noise.permutation_part_groups(KEY, n, 0, n_buckets, strided, k),
        values[np.minimum(noise.permutation(KEY, n) // k, groups - 1)],
    )


@pytest.mark.parametrize("n", [5, 300_001])
def test_permutation_part_groups_into_a_given_array_are_the_same_groups(n):
    k = 3
    values = np.random.default_rng(n).normal(size=max(1, n // k))
    sizes = noise.permutation_bucket_sizes(KEY, n)
    for lo, hi in _bucket_ranges(sizes.shape[0]):
        expected = noise.permutation_part_groups(KEY, n, lo, hi, values, k, sizes)
        words = np.full(expected.shape[0] + 3, 7, dtype=np.uint64)  # a view of other memory
        out = words[1 : 1 + expected.shape[0]].view(np.float64)
        got = noise.permutation_part_groups(KEY, n, lo, hi, values, k, sizes, out=out)
        assert got is out
        np.testing.assert_array_equal(got, expected)
        assert words[0] == 7 and words[-1] == 7  # nothing written outside it
    read_only = np.zeros(n)
    read_only.flags.writeable = False
    wrong = [np.zeros(4), np.zeros(n, np.float32), np.zeros(2 * n)[::2], [0.0] * n]
    for out in [*wrong, np.zeros(n)[None, :], read_only]:
        with pytest.raises(ValueError, match="out must be a writable contiguous float64"):
            noise.permutation_part_groups(KEY, n, 0, sizes.shape[0], values, k, sizes, out=out)


@pytest.mark.parametrize("n", [5, 2**16 + 1, 300_001, 2**22 + 3])
def test_permutation_buckets_of_a_range_are_those_of_the_whole(n):
    # the slow, obvious reading: item i's bucket is the bucket whose part lists it
    sizes = noise.permutation_bucket_sizes(KEY, n)
    bucket_of = np.empty(n, dtype=np.int64)
    for b in range(sizes.shape[0]):
        bucket_of[noise.permutation_part(KEY, n, b, b + 1, sizes)] = b
    np.testing.assert_array_equal(noise.permutation_buckets(KEY, n, 0, n), bucket_of)
    rng = np.random.default_rng(n)
    # windows of the stream: inside one, across several, at both ends, and empty
    spans = [(0, 1), (n - 1, 1), (0, 0), (n, 0), (1, min(n - 1, 3000)), (n // 3, n // 2)]
    spans += [(int(f), int(rng.integers(0, n - f + 1))) for f in rng.integers(0, n, 6)]
    for first, count in spans:
        got = noise.permutation_buckets(KEY, n, first, count)
        np.testing.assert_array_equal(got, bucket_of[first : first + count])
    with pytest.raises(ValueError, match="count"):
        noise.permutation_buckets(KEY, n, 1, n)


@pytest.mark.parametrize("bits", [3, 16, 17, 32, 33])
def test_item_buckets_kernel_reads_the_lanes_of_its_items(bits):
    # the reference bit stream, lane by lane (16, 32 or 64 bits a lane): the buckets of
    # tables of up to 2**49 items, which no test can permute whole
    lane = 16 if bits <= 16 else 32 if bits <= 32 else 64
    stream = ref.BitStream([int(w) for w in KEY], 0)
    first, count = 1000, 700  # within the third window of 16-bit lanes, across 32-bit ones
    lanes = [stream.bits(lane) for _ in range(first + count)][first:]
    out = np.full(count, -1, dtype=np.int64)
    uniform.item_buckets(KEY, bits, first, out)
    np.testing.assert_array_equal(out, [v >> (lane - bits) for v in lanes])


@pytest.mark.parametrize("n", [5, 2**16 + 1, 300_001])
def test_permutation_order_places_the_items_of_any_pieces(n):
    # items held in pieces (a task's rows or ranks), each piece's items in increasing
    # order: put in permutation order, they are the permutation's part
    sizes = noise.permutation_bucket_sizes(KEY, n)
    rng = np.random.default_rng(n + 1)
    cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n, 5)]))
    pieces = [np.arange(a, b) for a, b in pairwise(cuts)]
    buckets = np.concatenate([noise.permutation_buckets(KEY, n, p[0], len(p)) for p in pieces])
    items = np.concatenate(pieces)
    for lo, hi in _bucket_ranges(sizes.shape[0]):
        at = noise.permutation_order(KEY, n, lo, hi, buckets, sizes)
        np.testing.assert_array_equal(items[at], noise.permutation_part(KEY, n, lo, hi, sizes))
    # only the items of the buckets asked for, in a list of any integer type
    b = noise.permutation_buckets(KEY, n, 0, n)
    mine = np.flatnonzero(b == b[0])
    at = noise.permutation_order(KEY, n, int(b[0]), int(b[0]) + 1, b[mine].astype(np.int32))
    np.testing.assert_array_equal(
        mine[at], noise.permutation_part(KEY, n, int(b[0]), int(b[0]) + 1)
    )
    with pytest.raises(ValueError, match="do not fill buckets"):
        noise.permutation_order(KEY, n, 0, sizes.shape[0], b[1:], sizes)
    with pytest.raises(ValueError, match="1-D integer"):
        noise.permutation_order(KEY, n, 0, 1, b.astype(np.float64))


def test_permutation_part_groups_refuses_bad_arguments():
    values = np.zeros(10)
    with pytest.raises(ValueError, match="1-D and hold at least one value"):
        noise.permutation_part_groups(KEY, 100, 0, 1, np.zeros((2, 5)), 10)
    with pytest.raises(ValueError, match="1-D and hold at least one value"):
        noise.permutation_part_groups(KEY, 100, 0, 1, np.zeros(0), 10)
    with pytest.raises(ValueError, match="1-D and hold at least one value"):
        noise.permutation_part_groups(KEY, 100, 0, 1, np.float64(1.0), 10)
    with pytest.raises(ValueError, match="k"):
        noise.permutation_part_groups(KEY, 100, 0, 1, values, 0)
    with pytest.raises(ValueError, match="hi"):
        noise.permutation_part_groups(KEY, 300_000, 3, 2, values, 10)
    with pytest.raises(ValueError, match="big"):
        noise.permutation_part_groups(KEY, 100, 0, 1, values, 10, big=10)


@pytest.mark.parametrize(("top", "m"), [(2**32, 4), (2**32 + 3, 6), (2**40, 30), (2**62 + 1, 20)])
def test_bounded_draws_above_32_bits_equal_reference(top, m):
    got = np.empty(m, dtype=np.int64)
    state = np.array([0, 256], dtype=np.int64)
    uniform.bounded_batch(KEY, np.uint64(5), top, got, lanes.new_lanes(), state)
    assert got.tolist() == ref.bounded_sequence(KEY_LIST, top, m, nonce=5)


# ------------------------------------------------------------ distributions


def _pmf(y, t):
    return math.tanh(1 / (2 * t)) * math.exp(-abs(y) / t)


@pytest.mark.statistical
@pytest.mark.parametrize("t", [1, 3, 10])
def test_discrete_laplace_matches_exact_pmf(t):
    n = 200_000
    draws = noise.discrete_laplace(SEEDED.key("pmf", t), t, n)
    bound = 6 * t
    values = np.arange(-bound, bound + 1)
    observed = np.array([(draws == v).sum() for v in values] + [(np.abs(draws) > bound).sum()])
    probabilities = [_pmf(v, t) for v in values]
    expected = np.array([*probabilities, 1 - sum(probabilities)]) * n
    assert stats.chisquare(observed, expected).pvalue > 1e-3


@pytest.mark.statistical
def test_discrete_laplace_large_scale_is_laplace():
    t = 2**40 + 12345
    draws = noise.discrete_laplace(SEEDED.key("large"), t, 200_000)
    magnitudes = np.abs(draws) / t
    assert stats.kstest(magnitudes, "expon").pvalue > 1e-3
    assert abs(draws.std() / (math.sqrt(2) * t) - 1) < 0.01
    assert abs(draws.mean()) < 0.02 * t
    assert abs((draws > 0).mean() - 0.5) < 0.005


@pytest.mark.statistical
@pytest.mark.parametrize("high", [6, 7, 2**40 + 3])
def test_uniform_integers_are_uniform(high):
    draws = noise.uniform_integers(SEEDED.key("uniform", high), high, 70_000)
    assert draws.min() >= 0 and draws.max() < high
    cells = np.minimum(draws * 10 // high, 9) if high > 10 else draws
    observed = np.bincount(cells)
    edges = [(high * c + 9) // 10 for c in range(11)] if high > 10 else list(range(high + 1))
    expected = np.diff(edges) / high * len(draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-3


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("numerator", "denominator"), [(1, 3), (2, 7), (2**60 // 3, 2**60 + 7), (999, 1000)]
)
def test_bernoulli_rational_frequency(numerator, denominator):
    n = 100_000
    draws = noise.bernoulli_rational(SEEDED.key("bern", denominator), numerator, denominator, n)
    assert stats.binomtest(int(draws.sum()), n, numerator / denominator).pvalue > 1e-3


@pytest.mark.statistical
def test_permutation_is_uniform():
    counts = {}
    for i in range(6000):
        p = tuple(noise.permutation(SEEDED.key("perm3", i), 3).tolist())
        counts[p] = counts.get(p, 0) + 1
    assert len(counts) == 6
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3
    positions = [
        int(np.flatnonzero(noise.permutation(SEEDED.key("perm7", i), 7) == 0)[0])
        for i in range(7000)
    ]
    assert stats.chisquare(np.bincount(positions, minlength=7)).pvalue > 1e-3


@pytest.mark.statistical
@pytest.mark.parametrize("bits", [1, 2, 3])
def test_bucketed_permutation_is_uniform(bits):
    # Rao-Sandelius: random buckets, then a uniform order within each, is uniform overall
    counts: dict[tuple[int, ...], int] = {}
    got = np.empty(4, dtype=np.int64)
    for i in range(12_000):
        uniform.permutation_kernel(SEEDED.key("perm4", bits, i), bits, got)
        p = tuple(got.tolist())
        counts[p] = counts.get(p, 0) + 1
    assert len(counts) == 24
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3


# ----------------------------------------------------------------- properties


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 300), max_size=5), t=st.sampled_from([1, 7, 2**40 + 1]))
def test_chunking_never_changes_draws(cuts, t):
    whole = noise.discrete_laplace(KEY, t, 300, start=5)
    bounds = [0, *sorted(cuts), 300]
    parts = [noise.discrete_laplace(KEY, t, b - a, start=5 + a) for a, b in pairwise(bounds)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    uniform_whole = noise.uniform_integers(KEY, 1000, 300, start=5)
    uniform_parts = [
        noise.uniform_integers(KEY, 1000, b - a, start=5 + a) for a, b in pairwise(bounds)
    ]
    np.testing.assert_array_equal(np.concatenate(uniform_parts), uniform_whole)


def test_chunk_example_from_the_api():
    got = np.concatenate(
        [noise.discrete_laplace(KEY, 2**40, 4), noise.discrete_laplace(KEY, 2**40, 6, start=4)]
    )
    np.testing.assert_array_equal(got, noise.discrete_laplace(KEY, 2**40, 10))


def test_seed_reproducibility():
    a = noise.NoiseSource.from_seed(5)
    b = noise.NoiseSource.from_seed(5)
    assert a.seeded and b.seeded
    np.testing.assert_array_equal(a.key("x", 1), b.key("x", 1))
    np.testing.assert_array_equal(
        noise.discrete_laplace(a.key("x"), 100, 50), noise.discrete_laplace(b.key("x"), 100, 50)
    )
    np.testing.assert_array_equal(
        noise.permutation(a.key("p"), 100), noise.permutation(b.key("p"), 100)
    )
    c = noise.NoiseSource.from_seed(6)
    assert not np.array_equal(
        noise.discrete_laplace(a.key("x"), 100, 50), noise.discrete_laplace(c.key("x"), 100, 50)
    )


def test_seeded_master_key_is_documented_hash():
    import hashlib

    source = noise.NoiseSource.from_seed(258)
    master = hashlib.sha256(b"dpfast-seed-v1" + (2).to_bytes(8, "big") + b"\x01\x02").digest()
    assert source._master == master
    label = b"s" + (1).to_bytes(8, "big") + b"a" + b"i" + (1).to_bytes(8, "big") + b"\x07"
    digest = hashlib.sha256(master + b"dpfast-key-v1" + label).digest()
    expected = np.frombuffer(digest, dtype="<u4").astype(np.uint64)
    np.testing.assert_array_equal(source.key("a", 7), expected)


def test_secure_sources_differ_and_hide_the_key():
    a = noise.NoiseSource.secure()
    b = noise.NoiseSource.secure()
    assert not a.seeded
    assert not np.array_equal(
        noise.discrete_laplace(a.key("x"), 2**40, 20), noise.discrete_laplace(b.key("x"), 2**40, 20)
    )
    assert a._master.hex() not in repr(a) and "seeded=False" in repr(a)
    with pytest.raises(AttributeError):
        a._master = bytes(32)
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(a)


def test_distinct_labels_give_distinct_keys():
    labels = [
        (),
        ("a",),
        ("a", 1),
        ("a", "1"),
        ("a1",),
        ("a", ""),
        ("", "a"),
        (1,),
        (-1,),
        (2**70,),
        ("a", 1, 2),
        ("a", 12),
    ]
    keys = {tuple(SEEDED.key(*label).tolist()) for label in labels}
    assert len(keys) == len(labels)
    key = SEEDED.key("a")
    assert key.dtype == np.uint64 and key.shape == (8,) and int(key.max()) < 2**32


@pytest.mark.parametrize("part", [1.5, True, None, b"a"])
def test_label_parts_must_be_str_or_int(part):
    with pytest.raises(TypeError, match="str or int"):
        SEEDED.key("a", part)


def test_scale_zero_gives_zeros():
    got = noise.discrete_laplace(KEY, 0, 7)
    assert got.dtype == np.int64 and got.tolist() == [0] * 7


@pytest.mark.parametrize(
    "call",
    [
        lambda: noise.discrete_laplace(KEY, 2**40, 0),
        lambda: noise.uniform_integers(KEY, 5, 0),
        lambda: noise.bernoulli_rational(KEY, 1, 2, 0),
        lambda: noise.permutation(KEY, 0),
    ],
)
def test_empty_outputs(call):
    got = call()
    assert got.shape == (0,)


def test_numpy_integer_scale_is_accepted():
    np.testing.assert_array_equal(
        noise.discrete_laplace(KEY, np.int64(9), 20), noise.discrete_laplace(KEY, 9, 20)
    )


def test_outputs_have_documented_dtypes():
    assert noise.discrete_laplace(KEY, 3, 4).dtype == np.int64
    assert noise.uniform_integers(KEY, 3, 4).dtype == np.int64
    assert noise.bernoulli_rational(KEY, 1, 3, 4).dtype == np.bool_
    assert noise.permutation(KEY, 4).dtype == np.int64


def test_extreme_probabilities():
    assert not noise.bernoulli_rational(KEY, 0, 9, 1000).any()
    assert noise.bernoulli_rational(KEY, 9, 9, 1000).all()
    assert (noise.uniform_integers(KEY, 1, 100) == 0).all()


def test_permutation_is_a_permutation():
    for n in (1, 2, 10, 100_003):
        got = noise.permutation(KEY, n)
        np.testing.assert_array_equal(np.sort(got), np.arange(n))
    assert not np.array_equal(noise.permutation(KEY, 100), np.arange(100))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: noise.discrete_laplace(KEY, -1, 5), ValueError),
        (lambda: noise.discrete_laplace(KEY, 2**62, 5), ValueError),
        (lambda: noise.discrete_laplace(KEY, 1.5, 5), TypeError),
        (lambda: noise.discrete_laplace(KEY, True, 5), TypeError),
        (lambda: noise.discrete_laplace(KEY, 3, -1), ValueError),
        (lambda: noise.discrete_laplace(KEY, 3, 5, start=-1), ValueError),
        (lambda: noise.discrete_laplace(KEY, 3, 5, start=2**64 - 4), ValueError),
        (lambda: noise.discrete_laplace(KEY, 3, 5, cap=0), ValueError),
        (lambda: noise.discrete_laplace(KEY.astype(np.int64), 3, 5), ValueError),
        (lambda: noise.discrete_laplace(KEY[:4], 3, 5), ValueError),
        (lambda: noise.discrete_laplace(list(KEY), 3, 5), TypeError),
        (lambda: noise.discrete_laplace(KEY | np.uint64(2**40), 3, 5), ValueError),
        (lambda: noise.uniform_integers(KEY, 0, 5), ValueError),
        (lambda: noise.bernoulli_rational(KEY, 4, 3, 5), ValueError),
        (lambda: noise.bernoulli_rational(KEY, 1, 0, 5), ValueError),
        (lambda: noise.bernoulli_rational(KEY, -1, 3, 5), ValueError),
        (lambda: noise.permutation(KEY, -1), ValueError),
        (lambda: noise.NoiseSource.from_seed(1.0), TypeError),
        (lambda: noise.NoiseSource(b"short", seeded=True), ValueError),
    ],
)
def test_bad_arguments_raise(call, error):
    with pytest.raises(error):
        call()


def test_read_only_key_is_accepted():
    key = KEY.copy()
    key.flags.writeable = False
    np.testing.assert_array_equal(
        noise.discrete_laplace(key, 3, 10), noise.discrete_laplace(KEY, 3, 10)
    )


def test_unsafe_float_laplace_warns():
    with pytest.warns(UnsafeSamplerWarning):
        got = noise.unsafe_float_laplace(2.0, 1000, seed=1)
    assert got.shape == (1000,) and got.dtype == np.float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeSamplerWarning)
        np.testing.assert_array_equal(got, noise.unsafe_float_laplace(2.0, 1000, seed=1))
    with pytest.raises(ValueError):
        noise.unsafe_float_laplace(0.0, 3)


def test_sampler_name_mentions_exactness():
    assert "exact" in noise.SAMPLER_NAME and "ChaCha20" in noise.SAMPLER_NAME


def test_large_requests_split_over_threads_give_the_same_draws():
    from dpfast import noise as noise_module
    from dpfast.noise._common import _PARALLEL_MIN_SIZE

    key = noise_module.NoiseSource.from_seed(5).key("threads")
    size = 3 * _PARALLEL_MIN_SIZE + 17
    whole = noise_module.discrete_laplace(key, 2**40, size, start=11)
    parts = np.concatenate(
        [
            noise_module.discrete_laplace(key, 2**40, 1000, start=11),
            noise_module.discrete_laplace(key, 2**40, size - 1000, start=1011),
        ]
    )
    np.testing.assert_array_equal(whole, parts)
    single = noise_module.discrete_laplace(key, 2**40, size, start=11, n_threads=1)
    np.testing.assert_array_equal(whole, single)
    with pytest.raises(ValueError, match=r"n_threads must be >= 1 or None, got 0"):
        noise_module.discrete_laplace(key, 2**40, 10, n_threads=0)
    rate = noise_module.discrete_laplace_rate(key, 1, 2, size)
    assert np.array_equal(rate[:500], noise_module.discrete_laplace_rate(key, 1, 2, 500))
    assert np.array_equal(
        rate[-500:], noise_module.discrete_laplace_rate(key, 1, 2, 500, start=size - 500)
    )
