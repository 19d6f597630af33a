"""Exact discrete Laplace noise with a dyadic base ``p = m / 2**b``, and noisy counts.

:func:`dyadic_base_at_most` is the privacy map (the base whose guarantee never exceeds a
budget, checked in exact integer arithmetic), :func:`add_discrete_laplace_dyadic` the
sampler (:mod:`dpfast._kernels.geometric`), and :func:`add_count_noise` picks between it
and the rational-rate sampler for a vector of counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpfast._kernels import geometric as _geo
from dpfast._validation import check_int, epsilon_too_large, epsilon_too_small, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.noise._common import _check_key, _exp_lower_bound, _run_chunks, _threads_for
from dpfast.noise._laplace import RATE_SAMPLER_NAME, discrete_laplace_rate, rate_at_most

DYADIC_SAMPLER_NAME = (
    "exact discrete Laplace of dyadic base p = m/2**b: difference of two geometric counts "
    "of b-bit comparisons with m (integer only), on ChaCha20 keyed streams, one per "
    "segment of 4096 draws"
)
#: Bits of the base's denominator that :func:`dyadic_base_at_most` may use.
DYADIC_BITS = (16, 32)
#: Below this budget the dyadic sampler's cost (about ``1.25 / epsilon`` trials of ``b``
#: bits) exceeds the rational-rate sampler's, so :func:`add_count_noise` uses the latter.
DYADIC_MIN_EPSILON = Fraction(1, 32)
#: Up to this budget :func:`add_count_noise` uses a 16-bit base, above it a 32-bit one.
DYADIC_16_BITS_MAX_EPSILON = 4
#: Above this budget :func:`add_count_noise` uses the rational-rate sampler: a 32-bit base
#: would have few significant bits. On ``[1/32, 16]`` rounding ``m`` up gives away less
#: than ``2**-10`` of the budget (``tests/test_noise_dyadic.py`` checks it).
DYADIC_MAX_EPSILON = 16
#: The budgets :func:`count_noise_plan` serves: ``[COUNT_MIN_EPSILON, COUNT_MAX_EPSILON)``.
#: Outside ``[1/32, 16]`` the rate sampler draws, whose rate ``s/t`` needs ``t <= 2**32``
#: and ``s < 2**62``.
COUNT_MIN_EPSILON = Fraction(1, 2**32)
COUNT_MAX_EPSILON = 2**62

_FIXED_BITS = 160  # fractional bits of the exact lower bound of exp(epsilon)
_EPSILON_BITS = 64  # that bound is taken at epsilon rounded down to a multiple of 2**-64
_INT64_MIN = -(2**63)
_MAX_VALUE = 2**62


def _fits(m: int, bits: int, epsilon: Fraction) -> bool:
    # p = m / 2**bits >= exp(-epsilon)  <=  exp(epsilon) * m >= 2**bits
    return _exp_lower_bound(epsilon, _FIXED_BITS, _EPSILON_BITS) * m >= (1 << (bits + _FIXED_BITS))


def dyadic_base_at_most(epsilon: float | Fraction, bits: int = 16) -> tuple[int, int] | None:
    """Return the smallest base ``p = m / 2**bits`` whose noise is at most ``epsilon``-DP.

    Discrete Laplace noise ``P(x) ∝ p**|x|`` added to an integer query of sensitivity 1 is
    ``ln(1/p)``-DP; this returns ``(m, bits)`` with ``ln(2**bits / m) <= epsilon`` (checked
    against an exact lower bound of ``exp(epsilon)``, never in floating point) and ``m``
    the smallest integer that check accepts (the bound is within ``2**-60`` of
    ``exp(epsilon)``), so the noise is the least that keeps the guarantee.

    Parameters
    ----------
    epsilon : float or fractions.Fraction
        Budget, ``> 0`` (read exactly).
    bits : {16, 32}
        ``b``.

    Returns
    -------
    (int, int) or None
        ``(m, bits)`` with ``0 < m < 2**bits``; ``None`` when no such ``m`` exists
        (``epsilon`` below about ``2**-bits``).

    Examples
    --------
    >>> m, b = dyadic_base_at_most(0.5)
    >>> (m, b), math.log(2**b / m) <= 0.5 < math.log(2**b / (m - 1))
    ((39750, 16), True)
    """
    if bits not in DYADIC_BITS:
        raise DPFastValueError(f"bits must be one of {DYADIC_BITS}, got {quoted(bits)}")
    exact = Fraction(epsilon)
    if exact <= 0:
        raise DPFastValueError(f"epsilon must be > 0, got {quoted(epsilon)}")
    top = 1 << bits
    if exact >= bits:  # exp(epsilon) >= 2**bits: m = 1 (and the Taylor sum would be huge)
        return (1, bits)
    guess = math.floor(top * math.exp(-float(exact))) - 2
    m = min(max(1, guess), top - 1)
    while m > 1 and _fits(m - 1, bits, exact):  # float guess too high: walk down
        m -= 1
    while m < top and not _fits(m, bits, exact):
        m += 1
    return None if m >= top else (m, bits)


def dyadic_epsilon(m: int, bits: int) -> float:
    """``ln(2**bits / m)``: the guarantee of discrete Laplace noise of base ``m / 2**bits``."""
    return bits * math.log(2.0) - math.log(m)


def add_discrete_laplace_dyadic(
    key: np.ndarray,
    values: np.ndarray,
    m: int,
    bits: int,
    *,
    floor: int | None = None,
    n_threads: int | None = None,
) -> np.ndarray:
    """Return ``values + X`` (clamped below at ``floor``), ``X`` exact discrete Laplace.

    ``P(X = x) = (1 - p) / (1 + p) * p**|x|`` with ``p = m / 2**bits``: adding it to an
    integer query of sensitivity 1 is ``ln(1/p)``-DP (choose ``(m, bits)`` with
    :func:`dyadic_base_at_most`). ``X = G1 - G2``, two geometric counts of Bernoulli(p)
    trials that each compare ``bits`` random bits with ``m``: integer arithmetic only.
    Draws are grouped in segments of 4096; segment ``g`` reads the stream ``(key, nonce =
    g)`` (:mod:`dpfast._kernels.geometric`), so the values do not depend on ``n_threads``.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    values : numpy.ndarray
        1-D integer array with ``|values| <= 2**62``; never written.
    m, bits : int
        The base: ``bits`` in ``{16, 32}``, ``0 < m < 2**bits``.
    floor : int, optional
        Clamp the result below at this value (post-processing, e.g. ``0`` for counts).
    n_threads : int, optional
        Threads over segments for a million values or more (default: one per core).

    Returns
    -------
    numpy.ndarray
        ``int64`` array of ``values``' shape.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> noisy = add_discrete_laplace_dyadic(key, np.zeros(100_000, dtype=np.int64), 39750, 16)
    >>> round(float(noisy.var()), 0)  # 2 p / (1 - p)**2 = 7.84
    8.0
    >>> int(add_discrete_laplace_dyadic(key, np.array([3, 0, 1]), 39750, 16, floor=0).min())
    0
    """
    key = _check_key(key)
    if bits not in DYADIC_BITS:
        raise DPFastValueError(f"bits must be one of {DYADIC_BITS}, got {quoted(bits)}")
    m = check_int(m, "m", low=1, high=(1 << bits) - 1)
    out = _integer_values(values, "values")
    low = (
        _INT64_MIN if floor is None else check_int(floor, "floor", low=-_MAX_VALUE, high=_MAX_VALUE)
    )
    _fill_dyadic(key, m, bits, out, low, n_threads)
    return out


def _fill_dyadic(
    key: np.ndarray, m: int, bits: int, out: np.ndarray, floor: int, n_threads: object
) -> None:
    # In place: out[i] = max(out[i] + X_i, floor); threads take whole segments.
    n_segments = -(-out.shape[0] // _geo.SEGMENT)
    low = np.int64(floor)
    _run_chunks(
        lambda a, z: _geo.dyadic_laplace_kernel(key, m, bits, a, z, low, out),
        n_segments,
        _threads_for(out.shape[0], n_threads),
        unit=1,
    )


@dataclass(frozen=True)
class CountNoise:
    """Which exact discrete Laplace sampler :func:`add_count_noise` uses, and its guarantee.

    Attributes
    ----------
    kind : {"dyadic", "rate"}
        Noise ``P(x) ∝ p**|x|`` with ``p = numerator / denominator`` (a power of two) drawn
        by :func:`add_discrete_laplace_dyadic`, or ``P(x) ∝ exp(-|x| s/t)`` with ``s/t =
        numerator / denominator`` drawn by :func:`~dpfast.noise.discrete_laplace_rate`.
    numerator, denominator : int
    effective_epsilon : float
        The guarantee for a sensitivity-1 query (``ln(1/p)`` or ``s/t``), never above the
        budget.
    """

    kind: str
    numerator: int
    denominator: int
    effective_epsilon: float

    @property
    def sampler(self) -> str:
        """The sampler's description for the ledger."""
        return DYADIC_SAMPLER_NAME if self.kind == "dyadic" else RATE_SAMPLER_NAME

    @property
    def parameter(self) -> str:
        """``"p = m/2**b"`` or ``"rate = s/t"``."""
        if self.kind == "dyadic":
            return f"p = {self.numerator}/2**{self.denominator.bit_length() - 1}"
        return f"rate = {self.numerator}/{self.denominator}"

    @property
    def scale(self) -> float:
        """``1 / effective_epsilon``: the Laplace scale the noise matches."""
        return 1.0 / self.effective_epsilon


def add_count_noise(
    key: np.ndarray,
    counts: np.ndarray,
    epsilon: float | Fraction,
    *,
    floor: int | None = 0,
    n_threads: int | None = None,
) -> tuple[np.ndarray, CountNoise]:
    """Add exact discrete Laplace noise of guarantee at most ``epsilon`` to integer counts.

    For a query of L1 sensitivity 1 (one record changes one count by 1). With a budget in
    ``[1/32, 4]`` it uses the dyadic sampler with the 16-bit base of
    :func:`dyadic_base_at_most`, in ``(4, 16]`` the 32-bit base; otherwise the
    rational-rate sampler
    (:func:`~dpfast.noise.discrete_laplace_rate`, rate ``s/t <= epsilon`` with ``t <=
    2**32``), which costs the same whatever the budget. Both are exact; the choice depends
    only on ``epsilon``.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    counts : numpy.ndarray
        1-D integer array; never written.
    epsilon : float or fractions.Fraction
        Budget of the counts, ``> 0``.
    floor : int or None, optional
        Clamp below (post-processing); ``0`` by default, ``None`` for no clamp.
    n_threads : int, optional
        Threads for a million counts or more (default: one per core). Values do not
        depend on it.

    Returns
    -------
    (numpy.ndarray, CountNoise)
        The noisy counts (``int64``) and what was used, for the ledger.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(1).key("doc")
    >>> noisy, used = add_count_noise(key, np.array([5, 0, 12]), 0.5)
    >>> used.parameter, used.effective_epsilon <= 0.5
    ('p = 39750/2**16', True)
    >>> add_count_noise(key, np.array([5, 0, 12]), Fraction(1, 100))[1].parameter
    'rate = 1/100'
    """
    key = _check_key(key)
    out = _integer_values(counts, "counts")
    low = None if floor is None else check_int(floor, "floor", low=-_MAX_VALUE, high=_MAX_VALUE)
    used = count_noise_plan(epsilon)
    _apply_count_noise(key, out, used, low, n_threads)
    return out, used


def count_noise_plan(epsilon: float | Fraction) -> CountNoise:
    """Return the sampler and parameter :func:`add_count_noise` uses for ``epsilon``.

    Examples
    --------
    >>> count_noise_plan(0.5).parameter
    'p = 39750/2**16'
    """
    exact = Fraction(epsilon)
    if exact <= 0:
        raise DPFastValueError(f"epsilon must be > 0, got {quoted(epsilon)}")
    if exact < COUNT_MIN_EPSILON:
        raise epsilon_too_small(
            float(exact), "the exact count samplers have no rate below 1/2**32", 2.0**-32
        )
    if exact >= COUNT_MAX_EPSILON:
        raise epsilon_too_large(
            float(exact), "the exact count samplers have no rate of 2**62 or more", 2.0**62
        )
    if DYADIC_MIN_EPSILON <= exact <= DYADIC_MAX_EPSILON:
        bits = 16 if exact <= DYADIC_16_BITS_MAX_EPSILON else 32
        base = dyadic_base_at_most(exact, bits)
        assert base is not None  # m/2**bits >= exp(-16) > 2**-32 always exists
        return CountNoise("dyadic", base[0], 1 << bits, min(dyadic_epsilon(*base), float(exact)))
    s, t = rate_at_most(exact, 1, max_denominator=2**32)
    return CountNoise("rate", s, t, s / t)


def apply_count_noise(
    key: np.ndarray,
    counts: np.ndarray,
    plan: CountNoise,
    *,
    floor: int | None = 0,
    n_threads: int | None = None,
) -> None:
    """Add the noise of ``plan`` to ``counts`` in place: :func:`add_count_noise` without a copy.

    For a release that follows *check -> compute -> spend*: it makes the plan with
    :func:`count_noise_plan`, checks the plan's budget, then noises its own (possibly very
    large) table of counts without copying it. The draws equal those of
    :func:`add_count_noise` with the same key and budget.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    counts : numpy.ndarray
        Writable, C-contiguous 1-D ``int64`` array with values in ``[-2**62, 2**62]``;
        overwritten with the noisy counts.
    plan : CountNoise
        From :func:`count_noise_plan`.
    floor : int or None, optional
        Clamp below (post-processing); ``0`` by default, ``None`` for no clamp.
    n_threads : int, optional
        Threads for a million counts or more (default: one per core). Values do not
        depend on it.

    Raises
    ------
    TypeError
        If ``counts`` is not such an array or ``plan`` not a :class:`CountNoise`.
    ValueError
        On a malformed key or values out of range.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(1).key("doc")
    >>> counts = np.array([5, 0, 12])
    >>> apply_count_noise(key, counts, count_noise_plan(0.5))
    >>> bool((counts == add_count_noise(key, np.array([5, 0, 12]), 0.5)[0]).all())
    True
    """
    key = _check_key(key)
    if not (
        isinstance(counts, np.ndarray)
        and counts.dtype == np.int64
        and counts.ndim == 1
        and counts.flags.c_contiguous
        and counts.flags.writeable
    ):
        raise DPFastTypeError(
            "counts must be a writable, C-contiguous 1-D int64 numpy array; "
            "use add_count_noise for any other integer array"
        )
    if counts.size and (int(counts.min()) < -_MAX_VALUE or int(counts.max()) > _MAX_VALUE):
        raise DPFastValueError("counts must lie in [-2**62, 2**62]")
    if not isinstance(plan, CountNoise):
        raise DPFastTypeError(
            f"plan must be a CountNoise from count_noise_plan, got {quoted(plan)}"
        )
    low = None if floor is None else check_int(floor, "floor", low=-_MAX_VALUE, high=_MAX_VALUE)
    _apply_count_noise(key, counts, plan, low, n_threads)


def _apply_count_noise(
    key: np.ndarray, out: np.ndarray, used: CountNoise, floor: int | None, n_threads: object
) -> None:
    # In place on a checked int64 array with a checked key and floor.
    if used.kind == "dyadic":
        bits = used.denominator.bit_length() - 1
        low = _INT64_MIN if floor is None else floor
        _fill_dyadic(key, used.numerator, bits, out, low, n_threads)
        return
    out += discrete_laplace_rate(
        key,
        used.numerator,
        used.denominator,
        out.shape[0],
        n_threads=n_threads,  # type: ignore[arg-type]
    )
    if floor is not None:
        np.maximum(out, floor, out=out)


def _integer_values(values: object, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise DPFastTypeError(
            f"{name} must be a 1-D integer array, got {array.dtype} {array.shape}"
        )
    out = np.array(array, dtype=np.int64, copy=True)
    if out.size and (int(out.min()) < -_MAX_VALUE or int(out.max()) > _MAX_VALUE):
        raise DPFastValueError(f"{name} must lie in [-2**62, 2**62]")
    return out
