"""The exact exponential mechanism against exact rational arithmetic.

The sampler draws the first ``c`` with ``U < C_c / S``; these tests check each piece
against ``tests/reference/exponential_reference.py`` (integers and Fractions only): the
probabilities, the certified float bounds of the kernels, the decision for chosen words
at and around every threshold, the exact slow path, and the privacy map ``ε' <= ε``.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpfast import noise
from dpfast._kernels import exponential as kernels
from dpfast.noise import _em_exact as em_exact
from dpfast.noise import _exponential as em
from tests.reference import exponential_reference as eref

KEY = noise.NoiseSource.from_seed(7).key("tests", "exponential-exact")
KEY_LIST = [int(w) for w in KEY]
MASK64 = 2**64 - 1

# scores 36-40 units apart with rate 1 (epsilon 2, sensitivity 1): weights down to e**-40,
# probabilities down to about 4e-18; the 8.5e-17 candidate of the issue is e**-37
ADVERSARIAL = [
    [0, -37],
    [-37, 0],
    [0, -36, -37, -38, -40],
    [-40, -38, -37, -36, 0],
    [-36, 0, -40, 0, -37],
    [0, 0, -37, -37, -1, -40],
]


def _base(epsilon=2.0, sensitivity=1):
    return noise.exponential_base(epsilon=epsilon, sensitivity=sensitivity)


def _cumulative(row, base, mult=None):
    out, running = [], 0
    for w in eref.weights(row, base.numerator, base.bits, mult):
        running += w
        out.append(running)
    return out


def _pipeline(row, base, word, mult=None, slack=None):
    """The kernel's decision on word 0, else the exact path: what the sampler does."""
    m = len(row)
    floats, exact = em._check_multipliers(mult, (1, m))
    slack = em.fast_path_slack(m) if slack is None else slack
    lo, hi = kernels.thresholds(np.array(row, np.int64), floats[0], base.table(), slack)
    fast = kernels.decide(lo, hi, np.uint64(word(0) >> 1))
    if fast >= 0:
        return fast, True
    top = max(row)
    scale = math.lcm(*(f.denominator for f in exact[0]))
    ints = [int(f * scale) for f in exact[0]]
    return em_exact._exact_choice(
        [top - q for q in row], ints, base.numerator, base.bits, word
    ), False


# --- probabilities ---------------------------------------------------------------------


@pytest.mark.parametrize("row", ADVERSARIAL)
def test_probabilities_are_the_exact_fractions(row):
    base = _base()
    got = noise.exponential_probabilities(row, epsilon=2.0, sensitivity=1, exact=True)
    b = Fraction(base.numerator, 2**base.bits)
    weights = [b ** (max(row) - q) for q in row]
    expected = [w / sum(weights) for w in weights]
    assert got == expected
    floats = noise.exponential_probabilities(row, epsilon=2.0, sensitivity=1)
    for f, p in zip(floats, expected, strict=True):
        assert abs(Fraction(f) - p) <= p * Fraction(1, 2**52)
    # the base is within 2**-47 of exp(-1): the smallest weight is about e**-40
    assert min(floats) == pytest.approx(math.exp(-40) / sum(math.exp(q) for q in row), rel=1e-9)


def test_multipliers_scale_the_weights_exactly():
    row, mult = [0, -3, -3, -10], [1, 5, 2**60, 0.375]
    base = _base(1.0, 2)
    got = noise.exponential_probabilities(
        row, epsilon=1.0, sensitivity=2, multipliers=mult, exact=True
    )
    b = Fraction(base.numerator, 2**base.bits)
    weights = [Fraction(f) * b ** (-q) for f, q in zip(mult, row, strict=True)]
    assert got == [w / sum(weights) for w in weights]


# --- certified bounds of the kernel ------------------------------------------------------


def _random_rows(rng, n):
    rows = [row for row in ADVERSARIAL]
    for _ in range(n):
        m = int(rng.integers(1, 12))
        spread = int(rng.choice([2, 40, 800, 5000]))
        rows.append((-rng.integers(0, spread, m)).tolist())
    return rows


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(2.0, 1), (0.3, 7), (9.0, 2), (1.0, 3000)])
def test_kernel_bounds_contain_the_exact_thresholds(epsilon, sensitivity):
    rng = np.random.default_rng(int(epsilon * 10) + sensitivity)
    base = _base(epsilon, sensitivity)
    for row in _random_rows(rng, 40):
        mult = None if rng.random() < 0.5 else rng.integers(1, 2**40, len(row)).tolist()
        floats, _ = em._check_multipliers(mult, (1, len(row)))
        lo, hi = kernels.thresholds(
            np.array(row, np.int64), floats[0], base.table(), em.fast_path_slack(len(row))
        )
        cumulative = _cumulative(row, base, mult)
        total = cumulative[-1]
        for c, t in enumerate(cumulative):
            # lo[c] / 2**63 <= C_c / S <= hi[c] / 2**63, exactly
            assert int(lo[c]) * total <= t << 63 <= int(hi[c]) * total
            assert int(hi[c]) - int(lo[c]) <= 2**24  # and tight


def test_weights_below_the_float_range_count_as_tiny():
    # b**(2**40) underflows: the kernel's bounds must still hold and the draws agree with
    # the exact path (forced by a slack of 2)
    row = np.array([[0, -(2**40), -1, -(2**45), -2]] * 300, np.int64)
    got = noise.exponential_mechanism(KEY, row, epsilon=2.0, sensitivity=1)
    multipliers = em._check_multipliers(None, row.shape)
    slow = em._draw_rows(KEY, row, multipliers, _base(), 0, 2.0)
    assert got.tolist() == slow.tolist()
    assert set(got.tolist()) <= {0, 2, 4}


# --- the decision for chosen words ------------------------------------------------------


def _expansion(t: Fraction, words: int) -> list[int]:
    """The first ``words`` 64-bit words of the binary expansion of ``t`` in [0, 1)."""
    scaled = math.floor(t * 2 ** (64 * words))
    return [(scaled >> (64 * (words - 1 - j))) & MASK64 for j in range(words)]


def _words(prefix: list[int], seed: int):
    tail = np.random.default_rng(seed)
    extra: dict[int, int] = {}

    def word(j: int) -> int:
        if j < len(prefix):
            return prefix[j]
        if j not in extra:
            extra[j] = int(tail.integers(0, 2**63)) * 2 + int(tail.integers(0, 2))
        return extra[j]

    return word


@pytest.mark.parametrize("row", ADVERSARIAL)
def test_decision_at_and_around_every_threshold_is_exact(row):
    base = _base()
    cumulative = _cumulative(row, base)
    total = cumulative[-1]
    decided = 0
    cases = 0
    for c in range(len(row) - 1):
        t = Fraction(cumulative[c], total)
        exact = _expansion(t, 4)
        u63 = exact[0] >> 1
        for delta in (-(2**40), -(2**21), -2, -1, 0, 1, 2, 2**21, 2**40):
            v = min(max(u63 + delta, 0), 2**63 - 1)
            # the low bit of word 0, then: the threshold's own expansion (adversarial),
            # all zeros, all ones
            for low, tail in ((exact[0] & 1, exact[1:]), (0, [0, 0, 0]), (1, [MASK64] * 3)):
                for seed in range(2):
                    word = _words([(v << 1) | low, *tail], seed)
                    expected = eref.choose(cumulative, word)
                    got, fast = _pipeline(row, base, word)
                    assert got == expected, (c, delta, low)
                    cases += 1
                    decided += fast
    # far from the thresholds the first word decides; at them it never does
    assert 0 < decided < cases


def test_the_tiny_candidate_of_the_issue_is_reachable_in_both_orders():
    # the old float CDF gave the e**-37 candidate probability 0 when it followed the
    # large one (1 + 8.5e-17 == 1 in float64); here every U in its interval selects it
    base = _base()
    for row, tiny in (([0, -37], 1), ([-37, 0], 0)):
        cumulative = _cumulative(row, base)
        low = Fraction(cumulative[tiny - 1], cumulative[-1]) if tiny else Fraction(0)
        high = Fraction(cumulative[tiny], cumulative[-1])
        assert high - low == pytest.approx(8.533e-17, rel=1e-3)
        for point in (low + Fraction(1, 2**200), (low + high) / 2, high - Fraction(1, 2**200)):
            word = _words(_expansion(point, 4), 0)
            assert _pipeline(row, base, word)[0] == tiny
            assert (
                em_exact._exact_choice(
                    [max(row) - q for q in row], [1, 1], base.numerator, base.bits, word
                )
                == tiny
            )


# --- the slow path ---------------------------------------------------------------------


@pytest.mark.parametrize("mult", [None, [3, 1, 2**50, 7, 1]])
def test_forced_slow_path_equals_fast_path_and_reference(mult):
    rng = np.random.default_rng(11)
    quality = -rng.integers(0, 45, size=(300, 5))
    quality[::7, 1] = 0  # ties with the top
    base = _base()
    multipliers = em._check_multipliers(mult, quality.shape)
    fast = noise.exponential_mechanism(
        KEY, quality, epsilon=2.0, sensitivity=1, multipliers=mult, start=5
    )
    slow = em._draw_rows(KEY, quality, multipliers, base, 5, 2.0)  # every draw undecided
    assert fast.tolist() == slow.tolist()
    expected = [
        eref.draw(row, base.numerator, base.bits, KEY_LIST, 5 + g, mult)
        for g, row in enumerate(quality[:60].tolist())
    ]
    assert fast[:60].tolist() == expected


def test_forced_slow_path_of_sorted_groups(monkeypatch):
    rng = np.random.default_rng(5)
    m = 7
    distance = rng.integers(0, 30, size=(m, m))
    distance = distance + distance.T
    np.fill_diagonal(distance, 0)
    counts = rng.integers(0, 9, m)
    counts[0] += 5
    fast = noise.exponential_mechanism_sorted_groups(
        KEY, counts, 3, distance, epsilon=1.0, sensitivity=60, start=2
    )
    monkeypatch.setattr(em, "fast_path_slack", lambda m: 2.0)
    slow = noise.exponential_mechanism_sorted_groups(
        KEY, counts, 3, distance, epsilon=1.0, sensitivity=60, start=2
    )
    assert fast.tolist() == slow.tolist()


@pytest.mark.parametrize("slack", [None, 2.0])
def test_a_run_of_sorted_groups_draws_what_the_whole_column_draws(monkeypatch, slack):
    """``groups=(first, stop)``: each group as in the whole column, the fast and exact paths."""
    if slack is not None:
        monkeypatch.setattr(em, "fast_path_slack", lambda m: slack)
    rng = np.random.default_rng(11)
    for trial in range(30):
        m = int(rng.integers(1, 7))
        distance = rng.integers(0, 40, size=(m, m))
        distance = distance + distance.T
        np.fill_diagonal(distance, 0)
        counts = rng.integers(0, 12, m)
        counts[0] += 3
        k = int(rng.integers(1, counts.sum() + 1))
        size = int(counts.sum()) // k
        big = None if trial % 3 == 0 else int(rng.integers(0, size))  # the larger group
        arguments = {
            "epsilon": float(rng.choice([0.1, 1.0, 20.0])),
            "sensitivity": 80,
            "big": big,
        }
        whole = noise.exponential_mechanism_sorted_groups(
            KEY, counts, k, distance, start=trial, **arguments
        )
        assert whole.shape[0] == size
        at = size - 1 if big is None else big
        runs = [(0, size), (0, 0), (size, size), (size - 1, size), (0, 1), (at, at + 1)]
        for first, stop in [*runs, (0, at), (at + 1, size)]:
            part = noise.exponential_mechanism_sorted_groups(
                KEY, counts, k, distance, start=trial, groups=(first, stop), **arguments
            )
            assert part.tolist() == whole[first:stop].tolist()
        first = int(rng.integers(0, size + 1))
        stop = int(rng.integers(first, size + 1))
        part = noise.exponential_mechanism_sorted_groups(
            KEY, counts, k, distance, start=trial, groups=(first, stop), **arguments
        )
        assert part.tolist() == whole[first:stop].tolist()
    with pytest.raises(ValueError, match="groups"):
        noise.exponential_mechanism_sorted_groups(
            KEY, counts, k, distance, groups=(1, size + 1), **arguments
        )


def test_exact_path_terminates_when_u_equals_a_dyadic_threshold():
    # b = 1/2 (rate ln 2 would need an irrational; take the base by hand): weights 1, 1/2,
    # thresholds 2/3 and 1; with two equal weights t_0 = 1/2 is dyadic and U = 1/2 exactly
    word = _words([2**63, 0, 0, 0], 0)
    assert em_exact._exact_choice([0, 0], [1, 1], 1, 1, lambda j: word(j) if j < 4 else 0) == 1
    assert (
        em_exact._exact_choice([0, 0], [1, 1], 1, 1, lambda j: 2**63 - 1 if j == 0 else MASK64) == 0
    )


# --- draws: invariance and goodness of fit ----------------------------------------------


def test_chunks_nonces_and_shared_multipliers():
    rng = np.random.default_rng(2)
    quality = -rng.integers(0, 20, size=(70, 6))
    mult = rng.integers(1, 100, 6)
    whole = noise.exponential_mechanism(
        KEY, quality, epsilon=1.0, sensitivity=2, multipliers=mult, start=3
    )
    parts = [
        noise.exponential_mechanism(
            KEY, quality[i : i + 9], epsilon=1.0, sensitivity=2, multipliers=mult, start=3 + i
        )
        for i in range(0, 70, 9)
    ]
    assert np.concatenate(parts).tolist() == whole.tolist()
    tiled = noise.exponential_mechanism(
        KEY, quality, epsilon=1.0, sensitivity=2, multipliers=np.tile(mult, (70, 1)), start=3
    )
    assert tiled.tolist() == whole.tolist()
    # scaling every multiplier by a power of two changes nothing; other nonces do
    scaled = noise.exponential_mechanism(
        KEY, quality, epsilon=1.0, sensitivity=2, multipliers=mult * 2.0**-30, start=3
    )
    assert scaled.tolist() == whole.tolist()
    shifted = noise.exponential_mechanism(
        KEY, quality, epsilon=1.0, sensitivity=2, multipliers=mult, start=4
    )
    assert shifted.tolist() != whole.tolist()


@pytest.mark.statistical
@pytest.mark.parametrize("mult", [None, [1, 3, 0.5, 40, 1, 2]])
def test_frequencies_match_the_exact_probabilities(mult):
    quality = np.array([0, -1, -2, -3, -5, -1])
    draws = 200_000
    got = noise.exponential_mechanism(
        KEY, np.tile(quality, (draws, 1)), epsilon=1.0, sensitivity=1, multipliers=mult
    )
    expected = noise.exponential_probabilities(
        quality, epsilon=1.0, sensitivity=1, multipliers=mult
    )
    observed = np.bincount(got, minlength=6)
    assert stats.chisquare(observed, expected * draws).pvalue > 1e-3
    assert expected.max() > 3 * expected.min()


# --- the privacy map ---------------------------------------------------------------------


def _exp_negative(rate: Fraction) -> decimal.Decimal:
    with decimal.localcontext() as context:
        context.prec = 400
        return (-(decimal.Decimal(rate.numerator) / decimal.Decimal(rate.denominator))).exp()


@settings(max_examples=200, deadline=None)
@given(
    epsilon=st.one_of(
        st.floats(1e-6, 2e3),
        st.fractions(min_value=Fraction(1, 10**6), max_value=100, max_denominator=10**6),
    ),
    sensitivity=st.one_of(st.integers(1, 10**9), st.floats(1e-3, 1e6)),
)
def test_the_base_never_spends_more_than_epsilon(epsilon, sensitivity):
    base = noise.exponential_base(epsilon=epsilon, sensitivity=sensitivity)
    rate = min(Fraction(epsilon) / (2 * Fraction(sensitivity)), Fraction(em_exact.MAX_RATE))
    assert base.rate == rate
    with decimal.localcontext() as context:
        context.prec = 400
        b = decimal.Decimal(base.numerator) / (decimal.Decimal(2) ** base.bits)
        step = decimal.Decimal(1) / (decimal.Decimal(2) ** base.bits)
        target = _exp_negative(rate)
        assert b >= target  # b >= exp(-rate): 2 Δ ln(1/b) <= ε
        assert b - step < target  # and the smallest such base
    assert 0 < base.numerator < 2**base.bits
    assert base.numerator.bit_length() >= em_exact.BASE_BITS
    assert base.effective_epsilon <= float(epsilon)
    with decimal.localcontext() as context:
        context.prec = 400
        log_inverse = -(decimal.Decimal(base.numerator) / decimal.Decimal(2) ** base.bits).ln()
        spent = float(
            2
            * decimal.Decimal(Fraction(sensitivity).numerator)
            * log_inverse
            / decimal.Decimal(Fraction(sensitivity).denominator)
        )
    assert spent <= float(epsilon) * (1 + 2**-52)
    assert spent == pytest.approx(
        min(float(epsilon), 2 * float(sensitivity) * em_exact.MAX_RATE), rel=2**-46
    )
    assert base.effective_epsilon == pytest.approx(spent, rel=1e-12)


def test_quality_units_sensitivity_covers_rounding():
    rng = np.random.default_rng(4)
    delta = math.log2(3)
    _, sensitivity = noise.quality_units([0.0], sensitivity=delta)
    assert sensitivity == math.ceil(delta * 4096) + 1
    # neighbouring scores differ by at most delta; their units by at most the sensitivity
    a = rng.uniform(0, 5, 100_000)
    b = a + rng.uniform(-delta, delta, a.shape)
    ua, _ = noise.quality_units(a, sensitivity=delta)
    ub, _ = noise.quality_units(b, sensitivity=delta)
    assert int(np.abs(ua - ub).max()) <= sensitivity
    # the worst case: one score rounds down by almost half a unit, the other up
    low = (100.5 - 1e-6) / 4096
    pair, _ = noise.quality_units([low, low + delta * (1 - 1e-12)], sensitivity=delta)
    assert int(pair[1] - pair[0]) == math.ceil(delta * 4096) == sensitivity - 1


def test_bad_arguments():
    with pytest.raises(TypeError, match="integer units"):
        noise.exponential_mechanism(KEY, [[0.5, 1.0]], epsilon=1.0, sensitivity=1)
    with pytest.raises(ValueError, match="multipliers must be finite and > 0"):
        noise.exponential_mechanism(KEY, [[0, 1]], epsilon=1.0, sensitivity=1, multipliers=[1, 0])
    with pytest.raises(ValueError, match="shape"):
        noise.exponential_mechanism(KEY, [[0, 1]], epsilon=1.0, sensitivity=1, multipliers=[1])
    with pytest.raises(ValueError, match="2\\*\\*500"):
        noise.exponential_mechanism(
            KEY, [[0, 1]], epsilon=1.0, sensitivity=1, multipliers=[1.0, 1e-200]
        )
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        noise.exponential_base(epsilon=-1.0, sensitivity=1)
    with pytest.raises(ValueError, match="> 0"):
        noise.exponential_base(epsilon=Fraction(0), sensitivity=1)
    with pytest.raises(ValueError, match="too large"):
        noise.exponential_probabilities([0, -(2**40)], epsilon=1.0, sensitivity=1)
    with pytest.raises(ValueError, match="finite"):
        noise.quality_units([np.nan], sensitivity=1.0)
