"""The expected distance between a categorical column and its release, without drawing.

A categorical column released group by group (a rank group or a cluster of ``s`` rows
takes one category, drawn by the exponential mechanism; randomized response: every row
its own group) releases ``N_v = Σ_g s_g [group g draws v]`` rows of category ``v``: a sum
of independent weighted Bernoulli draws whose chances the mechanism gives exactly. Its
mean and variance are exact sums. The expected total-variation distance between the
column's distribution (``c_v`` rows of category ``v`` among ``n``) and the release's is

    E[TVD] = Σ_v E|N_v - c_v| / (2 n)

(linearity; the categories' counts are dependent, their absolute deviations add
up all the same). :func:`expected_absolute_deviation` computes each ``E|N_v - c_v|``
from ``N_v``'s distribution, built by convolving its groups' binomial laws; where that
would take too long it uses the normal law of the same mean and variance
(docs/forecast.md#categorical), which is within ``max s_g`` rows of the exact figure
(Stein's bound on the Wasserstein distance between a sum of independent draws and its
normal law: ``Σ s_g³ E|B_g - p_g|³ / σ² <= max s_g``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpfast import noise

__all__ = [
    "EXACT_POINTS",
    "Choices",
    "distinct_groups",
    "expected_absolute_deviation",
    "expected_tvd",
    "folded_normal_mean",
    "group_tvd",
    "sorted_group_kinds",
]

#: The most points of a category's distribution summed exactly; beyond, its normal law.
EXACT_POINTS = 1 << 18

#: A binomial law's points more than this many standard deviations (plus as many points)
#: from its mean are left out (their chance is far below float64's resolution).
_TAIL_SD = 40

#: Chance below which the ends of a convolved distribution are trimmed.
_TRIM = 1e-30


@dataclass(frozen=True)
class Choices:
    """Kinds of groups of a categorical column: each draws one category for all its rows.

    ``chances[j, v]`` is the chance that a group of kind ``j`` draws category ``v``;
    ``sizes[j]`` its rows and ``multiplicity[j]`` how many groups of that kind there are
    (groups with equal chances and size are one kind: a binomial count).
    """

    chances: np.ndarray
    sizes: np.ndarray
    multiplicity: np.ndarray

    def mean(self) -> np.ndarray:
        """Return each category's expected released rows (exact)."""
        weight = (self.sizes * self.multiplicity).astype(np.float64)
        return (weight[:, None] * self.chances).sum(axis=0)  # type: ignore[no-any-return]

    def variance(self) -> np.ndarray:
        """Return the variance of each category's released rows (exact)."""
        weight = (self.sizes.astype(np.float64) ** 2) * self.multiplicity
        p = self.chances
        return (weight[:, None] * p * (1.0 - p)).sum(axis=0)  # type: ignore[no-any-return]


def folded_normal_mean(mean: float, sd: float, target: float) -> float:
    """Return ``E|X - target|`` for ``X`` normal with ``mean`` and standard deviation ``sd``.

    ``sd (sqrt(2/π) exp(-d²/2) + d erf(d/√2))`` with ``d = (mean - target) / sd``.

    Examples
    --------
    >>> round(folded_normal_mean(0.0, 1.0, 0.0), 6)  # sqrt(2 / pi)
    0.797885
    >>> folded_normal_mean(5.0, 0.0, 2.0)
    3.0
    """
    if sd <= 0:
        return abs(mean - target)
    d = (mean - target) / sd
    return sd * (math.sqrt(2.0 / math.pi) * math.exp(-d * d / 2.0) + d * math.erf(d / math.sqrt(2)))


def _binomial(count: int, p: float) -> tuple[int, np.ndarray]:
    """Return ``(first, pmf)``: the binomial law's points ``first ..`` that can matter."""
    if p <= 0.0 or count == 0:
        return 0, np.ones(1)
    if p >= 1.0:
        return count, np.ones(1)
    sd = math.sqrt(count * p * (1 - p))
    lo = max(0, math.floor(count * p - _TAIL_SD * (sd + 1)))
    hi = min(count, math.ceil(count * p + _TAIL_SD * (sd + 1)))
    first = (
        math.lgamma(count + 1)
        - math.lgamma(lo + 1)
        - math.lgamma(count - lo + 1)
        + lo * math.log(p)
        + (count - lo) * math.log1p(-p)
    )
    x = np.arange(lo, hi, dtype=np.float64)  # pmf(x + 1) / pmf(x) = (count - x) p / ((x + 1) q)
    steps = np.log((count - x) / (x + 1.0)) + (math.log(p) - math.log1p(-p))
    return lo, np.exp(first + np.concatenate(([0.0], np.cumsum(steps))))


def _trimmed(first: int, pmf: np.ndarray) -> tuple[int, np.ndarray]:
    """Drop the ends of a distribution whose chance is below :data:`_TRIM`."""
    kept = np.flatnonzero(pmf > _TRIM)
    if kept.shape[0] == 0:
        return first, pmf
    return first + int(kept[0]), pmf[kept[0] : kept[-1] + 1]


def _convolve(
    first: tuple[int, np.ndarray], second: tuple[int, np.ndarray]
) -> tuple[int, np.ndarray]:
    (a, p), (b, q) = first, second
    return _trimmed(a + b, np.maximum(np.convolve(p, q), 0.0))


def _count_law(chances: np.ndarray, multiplicity: np.ndarray) -> tuple[int, np.ndarray] | None:
    """Return the law of the number of groups drawing the category, or None if too large.

    The convolution of each kind's binomial law, pairwise (the shortest first).
    """
    laws = [_binomial(int(m), float(p)) for p, m in zip(chances, multiplicity, strict=True)]
    if sum(pmf.shape[0] for _, pmf in laws) > EXACT_POINTS:
        return None
    while len(laws) > 1:
        laws.sort(key=lambda law: law[1].shape[0])
        laws = [_convolve(laws[i], laws[i + 1]) for i in range(0, len(laws) - 1, 2)] + (
            [laws[-1]] if len(laws) % 2 else []
        )
    return laws[0]


def expected_absolute_deviation(
    choices: Choices, category: int, target: float
) -> tuple[float, bool]:
    """Return ``E|N - target|`` for the rows ``N`` that draw ``category``, and whether exact.

    Exact (to float64 rounding; points below ``1e-30`` left out) from ``N``'s law: per
    group size, the convolution of its kinds' binomial laws, then the sizes' weighted sum;
    when that takes more than :data:`EXACT_POINTS` points, the normal law of the same
    exact mean and variance (:func:`folded_normal_mean`; module docstring for its bound).

    Examples
    --------
    >>> choices = Choices(np.array([[0.5, 0.5]]), np.array([1]), np.array([2]))
    >>> expected_absolute_deviation(choices, 0, 1.0)  # N = 0, 1, 2 with 1/4, 1/2, 1/4
    (0.5, True)
    """
    p = choices.chances[:, category]
    values, chances = np.zeros(1), np.ones(1)
    for size in np.unique(choices.sizes).tolist():
        of_size = choices.sizes == size
        law = _count_law(p[of_size], choices.multiplicity[of_size])
        if law is None or values.shape[0] * law[1].shape[0] > EXACT_POINTS:
            mean = float(choices.mean()[category])
            sd = math.sqrt(float(choices.variance()[category]))
            return folded_normal_mean(mean, sd, target), False
        first, pmf = law
        points = size * (first + np.arange(pmf.shape[0], dtype=np.float64))
        values = (values[:, None] + points[None, :]).ravel()
        chances = (chances[:, None] * pmf[None, :]).ravel()
    return float((chances * np.abs(values - target)).sum()), True


def expected_tvd(choices: Choices, counts: np.ndarray) -> tuple[float, bool]:
    """Return the expected total-variation distance of the release from ``counts``, and exactness.

    ``counts[v]`` are the column's rows of category ``v`` (as many as the groups hold).

    Examples
    --------
    >>> choices = Choices(np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([1, 1]), np.array([1, 1]))
    >>> expected_tvd(choices, np.array([1, 1]))  # half the time both rows draw 0
    (0.25, True)
    """
    n = float(np.sum(counts))
    total, exact = 0.0, True
    for v in range(choices.chances.shape[1]):
        deviation, whole = expected_absolute_deviation(choices, v, float(counts[v]))
        total += deviation
        exact = exact and whole
    return total / (2.0 * n), exact


def sorted_group_kinds(
    counts: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the kinds of rank groups of a sorted categorical column.

    The sorted column holds ``counts[r]`` rows of value ``r``, in that order; group ``g``
    holds the next ``sizes[g]`` rows. A group within one value's run is of the kind
    ``(value, size)``; a group across runs is a kind of its own. Returns each kind's
    histogram over the values (int64, ``(kinds, m)``), its size and its number of groups:
    at most ``2 m`` kinds of one value and ``m - 1`` mixed groups, whatever ``n``.

    Examples
    --------
    >>> histograms, sizes, multiplicity = sorted_group_kinds(np.array([5, 3]), np.array([2, 2, 4]))
    >>> histograms.tolist(), sizes.tolist(), multiplicity.tolist()
    ([[2, 0], [1, 3]], [2, 4], [2, 1])
    """
    counts = np.asarray(counts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    m = counts.shape[0]
    ends = np.cumsum(counts)
    edges = np.concatenate(([0], np.cumsum(sizes)))
    first = np.searchsorted(ends, edges[:-1], side="right")
    last = np.searchsorted(ends, edges[1:] - 1, side="right")
    pure = first == last
    pairs, multiplicity = np.unique(
        np.stack([first[pure], sizes[pure]], axis=1), axis=0, return_counts=True
    )
    histograms = np.zeros((pairs.shape[0], m), dtype=np.int64)
    histograms[np.arange(pairs.shape[0]), pairs[:, 0]] = pairs[:, 1]
    mixed = np.flatnonzero(~pure)
    held = [
        np.diff(np.minimum(np.concatenate(([0], ends)), edges[g + 1]))
        - np.diff(np.minimum(np.concatenate(([0], ends)), edges[g]))
        for g in mixed.tolist()
    ]
    return (
        np.concatenate([histograms, np.array(held, dtype=np.int64).reshape(-1, m)]),
        np.concatenate([pairs[:, 1], sizes[mixed]]).astype(np.int64),
        np.concatenate([multiplicity, np.ones(mixed.shape[0], dtype=np.int64)]),
    )


def distinct_groups(
    histograms: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the distinct ``(histogram, size)`` of groups, each with its number of groups.

    Groups with the same histogram (hence the same size) draw with the same chances: one
    kind (a cluster of ``mdav_dp`` holding one value only, say).
    """
    keys, multiplicity = np.unique(
        np.column_stack([sizes, histograms]).astype(np.int64), axis=0, return_counts=True
    )
    return keys[:, 1:], keys[:, 0], multiplicity


def group_tvd(
    histograms: np.ndarray,
    sizes: np.ndarray,
    multiplicity: np.ndarray,
    distance: np.ndarray,
    choice: tuple[float | Fraction, float | Fraction],
) -> tuple[float, bool]:
    """Return the expected TVD of a column whose groups draw by the exponential mechanism.

    Group kinds as :func:`sorted_group_kinds` gives them; ``distance[c, x]`` (integer
    units) between candidate ``c`` and value ``x``; the quality of ``c`` for a group is
    ``-Σ_x distance[c, x] histogram[x]``, and ``choice`` is the mechanism's ``(epsilon,
    sensitivity)`` as the release draws with them (:func:`dpfast.noise.exponential_chances`).
    The column's own counts are the groups' histograms added up.
    """
    quality = -(histograms @ np.asarray(distance, dtype=np.int64).T)
    epsilon, sensitivity = choice
    chances = noise.exponential_chances(quality, epsilon=epsilon, sensitivity=sensitivity)
    counts = (histograms * multiplicity[:, None]).sum(axis=0)
    return expected_tvd(Choices(chances, sizes, multiplicity), counts)
