"""The dyadic-base discrete Laplace sampler, its privacy map and the count-noise helper."""

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpfast import noise
from dpfast._kernels import geometric
from tests.reference import noise_reference as ref

KEY = noise.NoiseSource.from_seed(2026).key("dyadic tests")


def _exp_neg(epsilon) -> decimal.Decimal:
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        e = Fraction(epsilon)
        return (-(decimal.Decimal(e.numerator) / decimal.Decimal(e.denominator))).exp()


# ---------------------------------------------------------------- privacy map


@pytest.mark.parametrize(
    "epsilon",
    [0.5, 0.25, 1.0, 1 / 3, 0.05, 2.0, 4.0, 7.5, Fraction(1, 32), Fraction(7, 11), 1e-4, 12.0],
)
@pytest.mark.parametrize("bits", [16, 32])
def test_base_is_the_smallest_that_keeps_the_guarantee(epsilon, bits):
    base = noise.dyadic_base_at_most(epsilon, bits)
    assert base is not None
    m, b = base
    assert b == bits and 0 < m < 2**bits
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        bound = _exp_neg(epsilon) * (1 << bits)
        assert decimal.Decimal(m) >= bound  # p >= exp(-eps): ln(1/p) <= eps
        assert decimal.Decimal(m - 1) < bound or m == 1  # and the least noise that does
    assert m == ref.dyadic_base(epsilon, bits)
    assert noise.dyadic_epsilon(m, bits) <= float(epsilon) * (1 + 1e-12)


def test_huge_budgets_give_the_smallest_base_at_once():
    assert noise.dyadic_base_at_most(1e6, 16) == (1, 16)
    assert noise.dyadic_base_at_most(32, 32) == (1, 32)
    assert noise.dyadic_base_at_most(23.0, 32) == (1, 32)  # 32 ln 2 = 22.18 < 23
    assert noise.dyadic_base_at_most(22.0, 32) == (ref.dyadic_base(22.0, 32), 32)


def test_base_is_none_when_the_budget_is_below_the_grid():
    assert noise.dyadic_base_at_most(2.0**-20, 16) is None
    assert noise.dyadic_base_at_most(2.0**-20, 32) is not None


def test_base_reads_a_float_budget_exactly():
    # 0.1 is slightly above 1/10: the base for the float may be below the one for 1/10
    m_float, _ = noise.dyadic_base_at_most(0.1, 32)
    m_exact, _ = noise.dyadic_base_at_most(Fraction(1, 10), 32)
    assert m_float <= m_exact
    assert m_float == ref.dyadic_base(0.1, 32) and m_exact == ref.dyadic_base(Fraction(1, 10), 32)


@pytest.mark.parametrize(
    ("args", "error"),
    [((0.0,), ValueError), ((-1.0,), ValueError), ((0.5, 8), ValueError), ((0.5, 64), ValueError)],
)
def test_base_rejects_bad_arguments(args, error):
    with pytest.raises(error):
        noise.dyadic_base_at_most(*args)


# ---------------------------------------------------------------- sampler against reference


@pytest.mark.parametrize(
    ("m", "bits", "n"),
    [
        (39750, 16, 2 * geometric.SEGMENT + 300),  # p = e**-0.5: segments and refills
        (62340, 16, 1500),  # p near 0.95: geometrics span several bitmap words
        (442, 16, 700),  # p near e**-5: mostly zeros, many draws per bitmap word
        (2**32 - 2**23, 32, 40),  # p = 1 - 2**-9: geometrics span many refills
        (3 * 2**30, 32, 2000),  # p = 3/4, 32-bit trials
    ],
)
def test_draws_equal_the_reference(m, bits, n):
    got = noise.add_discrete_laplace_dyadic(KEY, np.zeros(n, dtype=np.int64), m, bits)
    want = ref.dyadic_draws(KEY, m, bits, n)
    assert got.tolist() == want


def test_values_and_floor_are_applied_after_the_same_draws():
    n = 5000
    values = np.arange(n, dtype=np.int64) % 7 - 3
    before = values.copy()
    draws = noise.add_discrete_laplace_dyadic(KEY, np.zeros(n, dtype=np.int64), 39750, 16)
    shifted = noise.add_discrete_laplace_dyadic(KEY, values, 39750, 16)
    clamped = noise.add_discrete_laplace_dyadic(KEY, values, 39750, 16, floor=0)
    assert (values == before).all()  # never written
    assert (shifted == values + draws).all()
    assert (clamped == np.maximum(values + draws, 0)).all()


@pytest.mark.parametrize("n", [1, 4095, 4096, 4097, 3 * 4096 + 5])
def test_draws_do_not_depend_on_threads_or_length(n):
    zeros = np.zeros(n, dtype=np.int64)
    one = noise.add_discrete_laplace_dyadic(KEY, zeros, 39750, 16, n_threads=1)
    two = noise.add_discrete_laplace_dyadic(KEY, zeros, 39750, 16, n_threads=2)
    three = noise.add_discrete_laplace_dyadic(KEY, zeros, 39750, 16, n_threads=3)
    longer = noise.add_discrete_laplace_dyadic(KEY, np.zeros(n + 9000, np.int64), 39750, 16)
    assert (one == two).all() and (one == three).all()
    assert (longer[:n] == one).all()


def test_large_requests_use_threads_and_give_the_same_draws():
    n = 1 << 20
    zeros = np.zeros(n, dtype=np.int64)
    default = noise.add_discrete_laplace_dyadic(KEY, zeros, 39750, 16)
    single = noise.add_discrete_laplace_dyadic(KEY, zeros, 39750, 16, n_threads=1)
    assert (default == single).all()


def test_different_keys_give_different_draws():
    other = noise.NoiseSource.from_seed(2027).key("dyadic tests")
    zeros = np.zeros(1000, dtype=np.int64)
    a = noise.add_discrete_laplace_dyadic(KEY, zeros, 39750, 16)
    b = noise.add_discrete_laplace_dyadic(other, zeros, 39750, 16)
    assert (a != b).mean() > 0.5


# ---------------------------------------------------------------- distribution


def _g_test(draws, p):
    top = 12
    values = np.arange(-top, top + 1)
    probs = np.array([ref.pmf_dyadic(int(y), p) for y in values])
    tail = 1.0 - probs.sum()
    observed = np.array([(draws == y).sum() for y in values] + [(np.abs(draws) > top).sum()])
    expected = np.append(probs, tail) * draws.shape[0]
    keep = expected > 5
    observed, expected = observed[keep], expected[keep]
    expected *= observed.sum() / expected.sum()
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.statistical
@pytest.mark.parametrize(("m", "bits"), [(39750, 16), (24109, 16), (3 * 2**30, 32), (442, 16)])
def test_draws_follow_the_exact_pmf(m, bits):
    draws = noise.add_discrete_laplace_dyadic(KEY, np.zeros(400_000, dtype=np.int64), m, bits)
    p = m / 2**bits
    assert _g_test(draws, p) > 1e-4
    var = 2 * p / (1 - p) ** 2
    assert abs(draws.var() - var) < 6 * var * math.sqrt(10 / draws.shape[0])


@pytest.mark.statistical
def test_clamped_counts_put_the_negative_mass_at_the_floor():
    m = 39750
    p = m / 2**16
    out = noise.add_discrete_laplace_dyadic(KEY, np.zeros(200_000, np.int64), m, 16, floor=0)
    p_zero = 1 / (1 + p)  # P(X <= 0)
    assert abs((out == 0).mean() - p_zero) < 5 * math.sqrt(p_zero * (1 - p_zero) / out.shape[0])
    assert out.min() == 0


# ---------------------------------------------------------------- count noise


def test_count_plan_uses_the_dyadic_base_for_ordinary_budgets():
    plan = noise.count_noise_plan(0.5)
    assert plan.kind == "dyadic"
    assert (plan.numerator, plan.denominator) == (39750, 2**16)
    assert plan.parameter == "p = 39750/2**16"
    assert plan.sampler == noise.DYADIC_SAMPLER_NAME
    assert 0.5 * (1 - 2**-10) <= plan.effective_epsilon <= 0.5
    assert plan.scale == pytest.approx(1 / plan.effective_epsilon)


def test_count_plan_moves_to_32_bits_then_to_the_rate_sampler():
    large = noise.count_noise_plan(9.0)  # above 4: 32 bits (16 would give m = 8)
    assert large.kind == "dyadic" and large.denominator == 2**32
    assert 9.0 * (1 - 2**-10) <= large.effective_epsilon <= 9.0
    assert noise.count_noise_plan(4.0).denominator == 2**16
    assert noise.count_noise_plan(16.0).denominator == 2**32
    small = noise.count_noise_plan(Fraction(1, 100))  # below 1/32: the rate sampler
    assert small.kind == "rate" and (small.numerator, small.denominator) == (1, 100)
    assert small.sampler == noise.RATE_SAMPLER_NAME
    huge = noise.count_noise_plan(30.0)  # above 16: the rate sampler
    assert huge.kind == "rate" and huge.effective_epsilon == 30.0
    assert noise.count_noise_plan(noise._dyadic.DYADIC_MIN_EPSILON).kind == "dyadic"
    assert noise.count_noise_plan(Fraction(1, 32) - Fraction(1, 2**40)).kind == "rate"


def test_apply_count_noise_in_place_equals_add_count_noise():
    counts = np.arange(5000, dtype=np.int64) % 7
    for epsilon in (0.5, Fraction(1, 100)):
        expected, plan = noise.add_count_noise(KEY, counts, epsilon, floor=None)
        got = counts.copy()
        noise.apply_count_noise(KEY, got, plan, floor=None)
        np.testing.assert_array_equal(got, expected)
    plan = noise.count_noise_plan(0.5)
    with pytest.raises(TypeError, match="int64"):
        noise.apply_count_noise(KEY, counts.astype(np.int32), plan)
    with pytest.raises(TypeError, match="int64"):
        noise.apply_count_noise(KEY, counts[::2], plan)
    with pytest.raises(TypeError, match="CountNoise"):
        noise.apply_count_noise(KEY, counts.copy(), 0.5)
    with pytest.raises(ValueError, match="floor must be an integer in"):
        noise.apply_count_noise(KEY, counts.copy(), plan, floor=2**63)


def test_dyadic_bases_lose_less_than_2_to_the_minus_10_of_the_budget():
    for epsilon in [*np.geomspace(1 / 32, 16, 400), 4.0, 4.000001, 16.0]:
        plan = noise.count_noise_plan(float(epsilon))
        assert plan.kind == "dyadic"
        assert epsilon * (1 - 2**-10) <= plan.effective_epsilon <= epsilon


def test_add_count_noise_dyadic_equals_the_sampler_and_keeps_the_input():
    counts = np.array([0, 3, 10, 0, 1] * 300, dtype=np.int32)
    before = counts.copy()
    noisy, plan = noise.add_count_noise(KEY, counts, 0.5)
    direct = noise.add_discrete_laplace_dyadic(KEY, counts, plan.numerator, 16, floor=0)
    assert (counts == before).all()
    assert noisy.dtype == np.int64 and (noisy == direct).all()
    unclamped, _ = noise.add_count_noise(KEY, counts, 0.5, floor=None)
    assert unclamped.min() < 0 and (np.maximum(unclamped, 0) == noisy).all()


def test_add_count_noise_rate_equals_the_rate_sampler():
    counts = np.array([0, 3, 10, 0, 1] * 50, dtype=np.int64)
    noisy, plan = noise.add_count_noise(KEY, counts, Fraction(1, 100))
    draws = noise.discrete_laplace_rate(KEY, 1, 100, counts.shape[0])
    assert plan.kind == "rate"
    assert (noisy == np.maximum(counts + draws, 0)).all()


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: noise.add_discrete_laplace_dyadic(KEY, np.zeros(3, np.int64), 0, 16), ValueError),
        (
            lambda: noise.add_discrete_laplace_dyadic(KEY, np.zeros(3, np.int64), 2**16, 16),
            ValueError,
        ),
        (lambda: noise.add_discrete_laplace_dyadic(KEY, np.zeros(3, np.int64), 5, 8), ValueError),
        (lambda: noise.add_discrete_laplace_dyadic(KEY, np.zeros(3), 5, 16), TypeError),
        (
            lambda: noise.add_discrete_laplace_dyadic(KEY, np.zeros((2, 2), np.int64), 5, 16),
            TypeError,
        ),
        (lambda: noise.add_discrete_laplace_dyadic(KEY, np.array([2**62 + 1]), 5, 16), ValueError),
        (
            lambda: noise.add_discrete_laplace_dyadic(KEY[:4], np.zeros(3, np.int64), 5, 16),
            ValueError,
        ),
        (
            lambda: noise.add_discrete_laplace_dyadic(KEY, np.zeros(3, np.int64), 5, 16, floor=1.5),
            TypeError,
        ),
        (lambda: noise.add_count_noise(KEY, np.zeros(3, np.int64), 0.0), ValueError),
        (lambda: noise.add_count_noise(KEY, np.array([True]), 0.5), TypeError),
        (
            lambda: noise.add_discrete_laplace_dyadic(
                KEY, np.zeros(3, np.int64), 5, 16, n_threads=0
            ),
            ValueError,
        ),
    ],
)
def test_bad_arguments_raise(call, error):
    with pytest.raises(error):
        call()


def test_empty_input_gives_empty_output():
    out = noise.add_discrete_laplace_dyadic(KEY, np.zeros(0, dtype=np.int64), 39750, 16)
    assert out.shape == (0,) and out.dtype == np.int64
    noisy, _ = noise.add_count_noise(KEY, np.zeros(0, dtype=np.int64), 0.5)
    assert noisy.shape == (0,)


def test_sampler_name_states_exactness_and_layout():
    name = noise.DYADIC_SAMPLER_NAME
    assert "exact" in name and "ChaCha20" in name and "2**b" in name


def test_trailing_zero_count_and_its_fallback_agree():
    from dpfast._jit import count_trailing_zeros, count_trailing_zeros_loop, jit

    @jit
    def both(values, out):
        for i in range(values.shape[0]):
            out[i, 0] = count_trailing_zeros(values[i])
            out[i, 1] = count_trailing_zeros_loop(values[i])

    values = np.array([0, 1, 2, 3, 8, 2**63, 2**63 + 2**40, 2**64 - 1, 96, 2**32], dtype=np.uint64)
    out = np.zeros((values.shape[0], 2), dtype=np.int64)
    both(values, out)
    want = [64 if v == 0 else (int(v) & -int(v)).bit_length() - 1 for v in values]
    assert out[:, 0].tolist() == want and out[:, 1].tolist() == want
