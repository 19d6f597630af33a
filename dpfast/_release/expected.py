"""The expected outcome of a numeric column's release on the data it reads, without noise.

The forecast from the data (docs/forecast.md#from-the-data) takes a column's groups (rank
groups or clusters: their sizes and their exact sums on the release's grid) and computes
what the release's noise is expected to do to them, from the discrete Laplace's exact
tail sums and the moments of a clamped draw (:func:`dpfast.noise.clamped_moments`): per
group the chance that the noise pushes its value onto a bound, and the mean and variance
of its released value; per column the expected share pushed onto a bound, and the bias
and standard error of the column's mean and of one released value. No noise is drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfast import noise
from dpfast._kernels import insensitive_mdav as _mean_kernels
from dpfast._release.forecast import bound_steps
from dpfast._release.transformed_moments import transformed_moments
from dpfast.partitions.grid import Grid

__all__ = [
    "EXACT_ROUNDING_SCALE",
    "NumericOutcome",
    "grid_means",
    "group_means",
    "linear_grid",
    "numeric_outcome",
    "pushed_share",
    "released_values",
    "value_moments",
]

#: The noise scale, in the data's units, up to which an integer column's rounding is
#: summed exactly (beyond it, rounding is taken as a uniform error: docs/forecast.md).
EXACT_ROUNDING_SCALE = 2.0

#: Released values more than this many noise scales from a group's value before the noise
#: are left out of the exact sums (their chance is below ``e**-40``).
TAIL_SCALES = 40

#: The integers either way of a group's released value up to which an integer column's
#: rounding is summed exactly: what :data:`EXACT_ROUNDING_SCALE` allows without a transform.
EXACT_ROUNDING_REACH = math.ceil(TAIL_SCALES * EXACT_ROUNDING_SCALE) + 2

#: Groups summed at once in the exact sums over an integer column's released values.
_CHUNK = 4096


def released_values(grid: Grid, integer: bool, y: np.ndarray) -> np.ndarray:
    """Return the values grid values ``y`` are released as: the grid's own mapping.

    :meth:`~dpfast.partitions.grid.Grid.values`: the release's arithmetic
    (``dpfast._kernels.grid.grid_value``): ``lower + gamma y`` without a transform, else
    ``T^-1`` corrected by the noise's mean factor; rounded half to even (``np.rint``) for
    an ``integer`` column; clamped.
    """
    return grid.values(np.asarray(y), integer)


def grid_means(sums: np.ndarray, sizes: np.ndarray, d_int: int) -> np.ndarray:
    """Return each group's mean on the grid, rounded half to even: its value before the noise.

    The release's own kernel with a draw of 0 (int64, in ``[0, d_int]``).
    """
    zeros = np.zeros(sums.shape[0], dtype=np.int64)
    sums = np.ascontiguousarray(sums, dtype=np.int64)
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    return _mean_kernels.noisy_cluster_values(sums, sizes, zeros, d_int)  # type: ignore[no-any-return]


def _on_bound(values: np.ndarray, grid: Grid) -> np.ndarray:
    return (values <= grid.lower) | (values >= grid.upper)


def push_chances(q: np.ndarray, steps: float, grid: Grid, integer: bool) -> np.ndarray:
    """Return each group's chance of being released on a bound, from its grid value ``q``.

    ``P(q + Y <= a) + P(q + Y >= D - b)`` with ``a``, ``b`` the grid steps released as each
    bound (:func:`~dpfast._release.forecast.bound_steps`): the discrete Laplace's exact
    tails. For a group on a bound before the noise this is not a push (see
    :func:`pushed_share`).
    """
    low, high = _bound_chances(q, steps, grid, integer)
    chance: np.ndarray = np.minimum(low + high, 1.0)
    return chance


def _bound_chances(
    q: np.ndarray, steps: float, grid: Grid, integer: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Return each group's chances ``P(q + Y <= a)`` and ``P(q + Y >= D - b)``."""
    low, high = bound_steps(grid, integer)
    q = np.asarray(q, dtype=np.int64)
    zero = np.zeros(q.shape[0], dtype=np.float64)
    below = zero if low is None else noise.discrete_laplace_at_least(steps, q - low)
    above = zero if high is None else noise.discrete_laplace_at_least(steps, grid.d_int - high - q)
    return below, above


def _pushed(
    sums: np.ndarray, sizes: np.ndarray, grid: Grid, steps: float, integer: bool
) -> tuple[float, float, float]:
    """Return the expected shares pushed onto a bound and onto the upper one, and ``before``."""
    n = float(sizes.sum())
    q = grid_means(sums, sizes, grid.d_int)
    was = _on_bound(released_values(grid, integer, q), grid)
    low, high = _bound_chances(q, steps, grid, integer)
    chance = np.where(was, 0.0, np.minimum(low + high, 1.0))
    upper = np.where(was, 0.0, high)
    return (
        float((sizes * chance).sum() / n),
        float((sizes * upper).sum() / n),
        float(sizes[was].sum() / n),
    )


def pushed_share(
    sums: np.ndarray, sizes: np.ndarray, grid: Grid, steps: float, integer: bool
) -> tuple[float, float]:
    """Return the expected share of rows pushed onto a bound, and the share there before.

    A group's rows are pushed when its released value is on a bound and its value before
    the noise is not (docs/forecast.md#pushed): the expected share is the sum of its rows
    times its chance (:func:`push_chances`) over the groups not on a bound before the
    noise, over every row.
    """
    pushed, _, before = _pushed(sums, sizes, grid, steps, integer)
    return pushed, before


def value_moments(
    q: np.ndarray, steps: float, grid: Grid, integer: bool
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Return the mean and variance of each group's released value, and whether exact.

    ``q`` are the groups' grid values before the noise. A float column's released value
    is ``lower + gamma Z`` (``Z = clamp(q + Y, 0, D)``; the top grid value is released as
    ``upper``): exact, from :func:`dpfast.noise.clamped_moments`. An integer column's is
    rounded: summed exactly over its released values (:func:`_integer_moments`) while
    the noise scale is at most :data:`EXACT_ROUNDING_SCALE` units; beyond, the rounding
    is taken as an error uniform on half a unit either way (no bias, variance ``1/12``
    where the value is not rounded onto a bound), within about ``1/(40 b²)`` units of the
    exact figures for a noise scale of ``b`` units. A transformed column's released value
    is the grid's nonlinear mapping of ``Z``: see :func:`_transformed_value_moments`.
    """
    t, d, gamma = float(steps), grid.d_int, grid.gamma
    q = np.asarray(q, dtype=np.int64)
    if grid.transform is not None:
        return _transformed_value_moments(q, t, grid, integer)
    if integer and t * gamma <= EXACT_ROUNDING_SCALE:
        mean, variance = _integer_moments(q, t, grid)
        return mean, variance, True
    shift, variance = noise.clamped_moments(t, d, q)
    z = q + shift
    top = noise.discrete_laplace_at_least(t, d - q) if t > 0 else (q >= d).astype(np.float64)
    excess = max(grid.lower + gamma * d - grid.upper, 0.0)  # the top grid value is `upper`
    mean = grid.lower + gamma * z - excess * top
    variance = (
        gamma**2 * variance + excess**2 * top * (1 - top) - 2 * gamma * excess * top * (d - z)
    )
    if not integer:
        return mean, np.maximum(variance, 0.0), True
    low, high = bound_steps(grid, integer)
    inside = np.ones(q.shape[0], dtype=np.float64)
    if low is not None:
        inside -= noise.discrete_laplace_at_least(t, q - low)
    if high is not None:
        inside -= noise.discrete_laplace_at_least(t, d - high - q)
    return mean, np.maximum(variance + np.maximum(inside, 0.0) / 12.0, 0.0), False


def _transformed_value_moments(
    q: np.ndarray, t: float, grid: Grid, integer: bool
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Return :func:`value_moments` on a transformed grid (docs/forecast.md#transformed).

    A float column's moments are the exact sums over the noise's distribution, in closed
    form (:func:`~dpfast._release.transformed_moments.transformed_moments`). An integer
    column's released values are summed exactly (:func:`_integer_moments`) while every
    group's values within ``TAIL_SCALES`` noise scales span at most
    :data:`EXACT_ROUNDING_REACH` integers either way (the reach the untransformed rule
    allows); beyond, its rounding is taken as a uniform error of half a unit, as above.
    """
    if integer and _integer_reach(q, t, grid) <= EXACT_ROUNDING_REACH:
        mean, variance = _integer_moments(q, t, grid)
        return mean, variance, True
    mean, variance = transformed_moments(q, t, grid)
    if not integer:
        return mean, variance, True
    low, high = _bound_chances(q, t, grid, True)
    inside = np.maximum(1.0 - low - high, 0.0)
    return mean, variance + inside / 12.0, False


def _integer_reach(q: np.ndarray, t: float, grid: Grid) -> int:
    """Return the integers an integer column's released values span within the tails' reach.

    The most, over the groups and either way, between the value released at ``q`` and at
    ``q ± TAIL_SCALES t`` (two more for the rounding at the ends).
    """
    if grid.transform is None:
        return math.ceil(TAIL_SCALES * t * grid.gamma) + 2
    span = math.ceil(TAIL_SCALES * t)
    here = released_values(grid, True, q)
    up = released_values(grid, True, np.minimum(q + span, grid.d_int)) - here
    down = here - released_values(grid, True, np.maximum(q - span, 0))
    return int(max(up.max(initial=0.0), down.max(initial=0.0))) + 2


def _cuts(j: np.ndarray, grid: Grid) -> np.ndarray:
    """Return the smallest grid value ``z`` whose ``rint(lower + gamma z)`` is ``>= j``.

    ``j`` (int64) lies above the lowest released value and at most one above the highest,
    so every ``j`` has one in ``[1, D]``. A first guess from the formula, then corrected
    with the release's own float arithmetic.
    """
    if grid.transform is not None:
        return _bisected_cuts(j, grid)
    d, lower, gamma = grid.d_int, grid.lower, grid.gamma
    guess = np.ceil((j.astype(np.float64) - 0.5 - lower) / gamma)
    z = np.clip(guess, 0, d).astype(np.int64)
    for _ in range(4):
        z += ((np.rint(lower + gamma * z.astype(np.float64)) < j) & (z < d)).astype(np.int64)
        below = np.rint(lower + gamma * np.maximum(z - 1, 0).astype(np.float64)) >= j
        z -= ((z > 0) & below).astype(np.int64)
    return z


def _bisected_cuts(j: np.ndarray, grid: Grid) -> np.ndarray:
    """:func:`_cuts` on any grid: a bisection per distinct ``j`` over the grid's own mapping."""
    wanted, where = np.unique(j, return_inverse=True)
    lo = np.ones(wanted.shape[0], dtype=np.int64)
    hi = np.full(wanted.shape[0], grid.d_int, dtype=np.int64)
    while np.any(lo < hi):
        middle = (lo + hi) // 2
        enough = released_values(grid, True, middle) >= wanted
        lo, hi = np.where(enough, lo, middle + 1), np.where(enough, middle, hi)
    return lo[where].reshape(j.shape)


def _integer_moments(q: np.ndarray, t: float, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """Return the exact mean and variance of an integer column's released values, per group.

    The released values are ``v_min = f(0)``, the integers between, and ``v_max = f(D)``
    (``f`` the release's mapping: :func:`released_values`), numbered ``0 .. M``; value
    ``i >= 1`` is released when ``Z >= cut_i`` (:func:`_cuts`), so ``P(value >= i) =
    P(Y >= cut_i - q)`` in closed form. Each group sums the values within
    ``TAIL_SCALES`` noise scales of its own (their chance beyond is below ``e**-40``, and
    is counted on the last value summed).
    """
    v_min, v_max = released_values(grid, True, np.array([0, grid.d_int]))
    if v_min == v_max:
        return np.full(q.shape[0], v_min), np.zeros(q.shape[0])
    first = math.floor(v_min)
    top = math.ceil(v_max) - first
    before = released_values(grid, True, q)
    index = np.where(before <= v_min, 0, np.where(before >= v_max, top, before - first))
    index = index.astype(np.int64)
    reach = _integer_reach(q, t, grid)
    offsets = np.arange(-reach, reach + 1, dtype=np.int64)
    mean, variance = np.empty(q.shape[0]), np.empty(q.shape[0])
    for start in range(0, q.shape[0], _CHUNK):
        part = slice(start, start + _CHUNK)
        mean[part], variance[part] = _window_moments(
            q[part], index[part], before[part], offsets, (first, top, v_min, v_max), t, grid
        )
    return mean, variance


def _window_moments(
    q: np.ndarray,
    index: np.ndarray,
    before: np.ndarray,
    offsets: np.ndarray,
    values: tuple[int, int, float, float],
    t: float,
    grid: Grid,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum one chunk of groups' released values within their windows (:func:`_integer_moments`)."""
    first, top, v_min, v_max = values
    i = index[:, None] + offsets[None, :]
    lo = np.maximum(index - offsets[-1], 0)[:, None]
    hi = np.minimum(index + offsets[-1], top)[:, None]
    held = np.clip(i, 0, top)
    at_least = np.where(
        held >= 1,
        noise.discrete_laplace_at_least(t, _cuts(first + np.maximum(held, 1), grid) - q[:, None]),
        1.0,
    )
    at_least = np.where(i <= lo, 1.0, at_least)  # the chance below the window: on its end
    following = np.concatenate([at_least[:, 1:], np.zeros((i.shape[0], 1))], axis=1)
    following = np.where(i >= hi, 0.0, following)
    chance = np.where((i >= lo) & (i <= hi), np.maximum(at_least - following, 0.0), 0.0)
    value = np.where(held == 0, v_min, np.where(held == top, v_max, first + held))
    step = value - before[:, None]
    shift = (chance * step).sum(axis=1)
    variance = np.maximum((chance * step * step).sum(axis=1) - shift**2, 0.0)
    return before + shift, variance


@dataclass(frozen=True)
class NumericOutcome:
    """What a release is expected to do to one numeric column (docs/forecast.md#from-the-data).

    Attributes
    ----------
    pushed : float
        Expected share of rows pushed onto a bound by the noise.
    before : float
        Share of rows on a bound before the noise (their group's value with no noise).
    mean : float
        The column's mean before the noise: its values clamped to the bounds, on the grid
        (of the data's units: a transformed column's groups are read on an untransformed
        grid too, :func:`linear_grid`).
    mean_bias, mean_se : float
        The released column mean's expected bias from ``mean`` and its standard error.
    value_bias, value_se : float
        For one released value (a typical row): the mean over rows of the absolute bias
        of its group's released value from the group's mean, and the root mean square of
        its standard error.
    exact : bool
        ``False`` where an integer column's rounding was approximated
        (:func:`value_moments`).
    pushed_upper : float
        The part of ``pushed`` pushed onto the upper bound.
    noise_error : float
        The root mean square error the noise adds to the released column mean: its
        standard error and its expected shift from the release with no noise
        (docs/forecast.md#weights).
    magnitude : float
        The column's mean absolute value, over its groups' means (``|mean|`` for a
        column of one sign).
    """

    pushed: float
    before: float
    mean: float
    mean_bias: float
    mean_se: float
    value_bias: float
    value_se: float
    exact: bool
    pushed_upper: float = 0.0
    noise_error: float = 0.0
    magnitude: float = 0.0

    @property
    def relative_error(self) -> float | None:
        """``noise_error / magnitude`` (``None`` for a column of zeros)."""
        return self.noise_error / self.magnitude if self.magnitude > 0 else None


def linear_grid(grid: Grid, n_records: int, k: int = 1) -> Grid:
    """Return the untransformed grid of ``grid``'s bounds: the one its column's means are read on.

    A transformed column's group sums are on the transformed scale; its groups' means in
    the data's units (what a released value is compared with) are their sums on this
    grid (at its resolution, ``2**-40`` of the width or finer).
    """
    return Grid.for_column(grid.lower, grid.upper, n_records, k)


def group_means(sums: np.ndarray, sizes: np.ndarray, grid: Grid) -> np.ndarray:
    """Return each group's mean in the data's units from its exact sums on an untransformed grid."""
    means: np.ndarray = grid.lower + grid.gamma * (np.asarray(sums, dtype=np.int64) / sizes)
    return means


def numeric_outcome(
    sums: np.ndarray,
    sizes: np.ndarray,
    grid: Grid,
    steps: float,
    integer: bool,
    means: np.ndarray | None = None,
) -> NumericOutcome:
    """Return the expected outcome of a column released group by group with one draw each.

    ``sums`` are the groups' exact integer sums on ``grid`` (as the release computes
    them), ``sizes`` their rows, ``steps`` the noise scale in grid steps; an ``integer``
    column is rounded after the noise. ``means`` are the groups' means in the data's
    units, needed for a transformed grid (:func:`group_means` on :func:`linear_grid`);
    without a transform they are ``lower + gamma T_g / s_g``, and without them a
    transformed column's groups are taken at their values before the noise. Each group's
    released value is independent of the others', so the column mean's variance is
    ``Σ size² Var / n²``.

    Examples
    --------
    >>> from dpfast.partitions.grid import Grid
    >>> grid = Grid(0.0, 10.0, 1.0, 10, 8)
    >>> outcome = numeric_outcome(np.array([0, 50, 90]), np.array([10, 10, 10]), grid, 0.0,
    ...                           False)
    >>> outcome.pushed, round(outcome.before, 4), round(outcome.mean, 4), outcome.mean_se
    (0.0, 0.3333, 4.6667, 0.0)
    """
    sums = np.asarray(sums, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    n = float(sizes.sum())
    pushed, upper, before = _pushed(sums, sizes, grid, steps, integer)
    q = grid_means(sums, sizes, grid.d_int)
    expected, variance, exact = value_moments(q, steps, grid, integer)
    noiseless = released_values(grid, integer, q)
    if means is None:
        means = group_means(sums, sizes, grid) if grid.transform is None else noiseless
    bias = expected - means
    weights = sizes / n
    mean_se = float(math.sqrt(float((sizes.astype(np.float64) ** 2 * variance).sum())) / n)
    shift = float((weights * (expected - noiseless)).sum())
    return NumericOutcome(
        pushed=pushed,
        before=before,
        mean=float((weights * means).sum()),
        mean_bias=float((weights * bias).sum()),
        mean_se=mean_se,
        value_bias=float((weights * np.abs(bias)).sum()),
        value_se=float(math.sqrt(float((weights * variance).sum()))),
        exact=exact,
        pushed_upper=upper,
        noise_error=math.hypot(shift, mean_se),
        magnitude=float((weights * np.abs(means)).sum()),
    )
