"""Each DP method's noise, read from its public report, and the interval of a statistic.

A model holds public values only (the ledger's scales, the grid step, the row count, the
group sizes from ``(n, k)`` and the report's remainder rule) and gives the half-width of
a mean, sum or count computed on the released file (docs/accuracy.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

from dpfast._validation import quoted
from dpfast.exceptions import DPFastValueError
from dpfast.intervals._quantiles import (
    Weights,
    greedy_weights,
    laplace_sum_quantile,
    lattice_quantile,
    normal_quantile,
    total_weight,
)

__all__ = [
    "CLAMPING",
    "DIGITS",
    "INPUT_CLAMPING",
    "ROUNDING",
    "Accuracy",
    "CountNoise",
    "ResponseNoise",
    "ValueNoise",
    "round_up",
    "steps_quantile",
]

CLAMPING = (
    "clamping after the noise: released values that the noise takes past a bound are "
    "clamped onto it (and a count below 0 is raised to 0), which moves the statistic by "
    "an amount that depends on the data, "
    "so it is not in the interval; the data holder's private forecast estimates it"
)
ROUNDING = (
    "rounding after the noise: the released values of a column rounded to integers move "
    "by at most 0.5 each, so a mean by at most 0.5 and a total by at most 0.5 per row (the "
    "rounding fields): add it for a bound that holds whatever the rounding did"
)
INPUT_CLAMPING = (
    "clamping of the input: values outside the public bounds were moved onto them "
    "before the release, so the interval is about the clamped values"
)


@dataclass(frozen=True)
class Accuracy:
    """How far a statistic computed on a released file may be from what it estimates.

    ``estimate ± half_width`` holds the target with probability ``level`` over the
    release's noise, when nothing was clamped after the noise; ``rounding`` may move the
    estimate further (integer columns: at most 0.5 per released value).

    Attributes
    ----------
    statistic : {"mean", "sum", "count"}
    column : str
    rows : int
        Released rows the statistic covers (DiffGen: cells of the counts table).
    level : float
        The interval's probability, e.g. 0.95.
    half_width : float
        In the statistic's units.
    rounding : float
        A bound on what rounding after the noise can add, outside the level: 0 where
        nothing is rounded.
    noise : str
        The noise, in words and parameters.
    computed : str
        How ``half_width`` was computed: exact, conservative or an approximation.
    target : str
        What the interval is for.
    assumptions : tuple of str
        What the interval assumes.
    outside : tuple of str
        What moves the statistic and is not in the interval.
    """

    statistic: str
    column: str
    rows: int
    level: float
    half_width: float
    rounding: float
    noise: str
    computed: str
    target: str
    assumptions: tuple[str, ...]
    outside: tuple[str, ...]

    def __str__(self) -> str:
        rounding = f" (+ at most {self.rounding:.4g} from rounding)" if self.rounding else ""
        return (
            f"{self.statistic} of {quoted(self.column)} over {self.rows:,} rows: ± "
            f"{self.half_width:.4g}{rounding} at {self.level:.0%}"
        )


_CONTINUOUS = (
    "exact for continuous Laplace draws of the same scale (their characteristic function "
    "inverted numerically, error below 1e-9), plus one grid step per row, which bounds how "
    "far the discrete draws are from them: never narrower than the exact interval"
)
_LATTICE = "exact: the discrete Laplace draws' convolution on the integers (inverse FFT)"


#: Significant digits of a stated half-width.
DIGITS = 8


def round_up(value: float) -> float:
    """Round ``value`` up to :data:`DIGITS` significant digits (never narrower).

    The quantiles are computed to about ten digits, with float functions whose last bits may
    differ from machine to machine; a stated half-width keeps eight, so the report is the
    same everywhere.

    Examples
    --------
    >>> round_up(124.6297242554567), round_up(0.0)
    (124.62973, 0.0)
    """
    if value == 0 or not math.isfinite(value):
        return value
    exact = Decimal(value)
    step = Decimal(1).scaleb(exact.adjusted() - DIGITS + 1)
    return float(exact.quantize(step, rounding=ROUND_CEILING))


def steps_quantile(
    weights: Weights, scale: float, level: float, *, lattice: bool = True
) -> tuple[float, str]:
    """Half-width, in grid steps, of ``Σ w η`` for discrete Laplace ``η`` of scale ``scale``.

    ``P(η = y) ∝ exp(-|y| / scale)``. Exact on the integers where the sum's support is
    small; otherwise the continuous Laplace sum's exact quantile plus ``Σ w`` (each
    discrete draw is ``⌊E1⌋ - ⌊E2⌋`` for the continuous one ``E1 - E2``, so it differs
    from it by less than one step). ``lattice=False`` takes the latter always: for the
    worst case over allocations (:func:`~dpfast.intervals.greedy_weights`), which is
    proven for continuous draws.

    Examples
    --------
    >>> steps_quantile(((1, 1),), 1 / math.log(2), 0.95)[0]  # base 1/2
    4.0
    """
    if scale == 0:
        return 0.0, "exact: no noise"
    exact = lattice_quantile(weights, math.exp(-1 / scale), level) if lattice else None
    if exact is not None:
        return float(exact), _LATTICE
    return scale * laplace_sum_quantile(weights, level) + total_weight(weights), _CONTINUOUS


def _groups_text(groups: Weights, unit: str) -> str:
    """E.g. ``"9 rank groups of 10 rows and 1 of 13"``: the most frequent size first."""
    ordered = sorted(groups, key=lambda pair: (-pair[1], pair[0]))
    parts = [
        f"{count:,} {unit}{'s' if count > 1 else ''} of {size:,} rows"
        for size, count in ordered[:1]
    ]
    parts += [f"{count:,} of {size:,}" for size, count in ordered[1:]]
    return " and ".join(parts)


@dataclass(frozen=True)
class ValueNoise:
    """A numeric column's discrete Laplace noise on its grid (ir_dp, mdav_dp, laplace_dp).

    ``groups`` are ``(rows sharing a draw, draws)``; ``unit`` names what shares a draw
    (``"rank group"``, ``"cluster"``, ``"cell"``); ``integer`` is None when the report
    does not say whether the column was rounded to integers after the noise.
    """

    column: str
    unit: str
    groups: Weights
    rows: int
    scale: float
    grid_step: float
    steps: int
    bounds: tuple[float, float]
    integer: bool | None
    rule: str | None

    def noise(self) -> str:
        """Return the noise in words and parameters."""
        shared = (
            "one draw per released value"
            if self.unit == "cell"
            else f"one draw per {self.unit}, shared by its rows: "
            f"{_groups_text(self.groups, self.unit)}"
            + (
                f" (the remainder in the {self.rule} {self.unit})"
                if self.rule and len(self.groups) > 1
                else ""
            )
        )
        return (
            f"discrete Laplace of scale {self.scale:.6g} ({self.steps:,} grid steps of "
            f"{self.grid_step:.6g}), {shared}"
        )

    def distribution(self) -> dict[str, object]:
        return {
            "kind": "discrete Laplace",
            "scale": self.scale,
            "grid_step": self.grid_step,
            "scale_in_grid_steps": self.steps,
            "draws": [{"rows": size, "draws": count} for size, count in self.groups],
        }

    def interval(self, statistic: str, rows: int, level: float) -> Accuracy:
        """Return the interval of the column's mean or sum over ``rows`` released rows."""
        if statistic == "count":
            raise DPFastValueError(
                f"column {quoted(self.column)} carries noise on its values, not on a count: the "
                "released file has exactly its number of rows, and a count of rows that "
                "meet a condition on noisy values has no interval from public values; ask "
                'for statistic="mean" or "sum"'
            )
        whole = rows == self.rows
        if self.unit == "cell":  # every value its own draw, whichever rows
            weights: Weights = ((1, rows),)
        else:  # the whole column's groups, or the worst way a subset can fall into them
            weights = self.groups if whole else greedy_weights(self.groups, rows)
        worst = not whole and self.unit != "cell"
        steps, computed = steps_quantile(weights, self.steps, level, lattice=not worst)
        lower, upper = self.bounds
        # grid: each value quantised, each group's mean rounded (half a step each); float
        # output. A zero-width domain releases its one value exactly.
        slack = 2 * self.grid_step + math.ulp(max(abs(lower), abs(upper))) if upper > lower else 0.0
        mean = self.grid_step * steps / rows + slack
        rounding = 0.5 if self.integer is not False else 0.0
        factor = 1 if statistic == "mean" else rows
        return Accuracy(
            statistic=statistic,
            column=self.column,
            rows=rows,
            level=level,
            half_width=round_up(mean * factor),
            rounding=rounding * factor,
            noise=self.noise(),
            computed=computed + "; plus two grid steps and one float spacing of the bounds "
            "for the grid",
            target=self._target(statistic, whole),
            assumptions=self._assumptions(rows, whole),
            outside=self._outside(whole),
        )

    def _target(self, statistic: str, whole: bool) -> str:
        lower, upper = self.bounds
        what = "mean" if statistic == "mean" else "sum"
        if whole or self.unit == "cell":
            rows = "the column's" if whole else "the chosen rows'"
            return f"the {what} of {rows} true values, clamped to the bounds [{lower:g}, {upper:g}]"
        return (
            f"the {what}, over the chosen rows, of their released values before the noise "
            f"(their {self.unit}s' means of the clamped values)"
        )

    def _assumptions(self, rows: int, whole: bool) -> tuple[str, ...]:
        said = ["no released value of the column was clamped onto a bound after the noise"]
        if not whole:
            said.append(
                "the rows are chosen without looking at this column's released values "
                "(at random, or by another column)"
            )
        if not whole and self.unit != "cell":
            said.append(
                f"which {self.unit} a released row belongs to is not public, so the interval "
                f"is the widest over every way {rows:,} rows can fall into the {self.unit}s: "
                "whole ones, the largest first (their noise is then least averaged)"
            )
        return tuple(said)

    def _outside(self, whole: bool) -> tuple[str, ...]:
        said = [CLAMPING, INPUT_CLAMPING]
        if self.integer is not False:
            said.append(
                ROUNDING
                if self.integer
                else f"{ROUNDING} (the report does not say "
                "whether this column was rounded, so its bound is stated)"
            )
        if not whole and self.unit != "cell":
            said.append(
                f"microaggregation: a row's released value stands for its {self.unit}'s mean, "
                "not for the row's own value, so a subset's statistic on the released file "
                "estimates the subset's true one only as far as the groups are homogeneous"
            )
        return tuple(said)


@dataclass(frozen=True)
class CountNoise:
    """DiffGen's noisy counts: one discrete Laplace draw of base ``alpha`` per cell."""

    column: str
    cells: int
    alpha: float
    parameter: str

    def noise(self) -> str:
        return (
            f"discrete Laplace (two-sided geometric) of parameter {self.parameter} "
            f"(P(x) ∝ {self.alpha:.6g}^|x|), one draw per cell: {self.cells:,} cells"
        )

    def distribution(self) -> dict[str, object]:
        return {
            "kind": "discrete Laplace",
            "parameter": self.parameter,
            "base": self.alpha,
            "draws": [{"rows": 1, "draws": self.cells}],
        }

    def interval(self, statistic: str, rows: int, level: float) -> Accuracy:
        """Return the interval of the total count of ``rows`` cells."""
        if statistic != "count":
            raise DPFastValueError(
                f"a DiffGen release publishes noisy counts of generalised values, so a "
                f"{statistic} of a column has no interval from public values; ask for "
                'statistic="count" (the records in a set of cells)'
            )
        scale = -1 / math.log(self.alpha) if self.alpha else 0.0
        steps, computed = steps_quantile(((1, rows),), scale, level)
        return Accuracy(
            statistic="count",
            column=self.column,
            rows=rows,
            level=level,
            half_width=steps,
            rounding=0.0,
            noise=self.noise(),
            computed=computed,
            target=f"the true number of records in the {rows:,} cells summed",
            assumptions=(
                "no noisy count was clamped up to 0",
                "the cells are chosen without looking at their noisy counts",
            ),
            outside=(CLAMPING, INPUT_CLAMPING),
        )


@dataclass(frozen=True)
class ResponseNoise:
    """Randomized response of one column: each value kept with probability ``p``."""

    column: str
    rows: int
    retention: Fraction
    categories: int

    def noise(self) -> str:
        return (
            f"randomized response: each value kept with probability p = "
            f"{float(self.retention):.6g}, else replaced by a uniform draw from the "
            f"{self.categories} categories"
        )

    def distribution(self) -> dict[str, object]:
        return {
            "kind": "randomized response",
            "retention": float(self.retention),
            "categories": self.categories,
        }

    def interval(self, statistic: str, rows: int, level: float) -> Accuracy:
        """Return the interval of the unbiased estimate of a category's count over ``rows`` rows."""
        if statistic != "count":
            raise DPFastValueError(
                f"randomized response releases a categorical column, so a {statistic} has "
                'no meaning here; ask for statistic="count" (of one category)'
            )
        p, m = self.retention, self.categories
        low, high = (1 - p) / m, p + (1 - p) / m
        spread = max(float(q * (1 - q)) for q in (low, high))
        # one count more than the normal quantile: the released count moves in steps of 1
        half = (normal_quantile(level) * math.sqrt(rows * spread) + 1) / float(p)
        return Accuracy(
            statistic="count",
            column=self.column,
            rows=rows,
            level=level,
            half_width=round_up(half),
            rounding=0.0,
            noise=self.noise(),
            computed="normal approximation of the released count with the largest variance "
            f"any data can give ({spread:.6g} per row), widened by one count for its integer "
            "steps: at least the level for every count of the category in the cases "
            "docs/accuracy.md#randomized-response lists",
            target=f"the number of the {rows:,} rows whose true value is the category, "
            f"estimated by (released count - rows * {float(low):.6g}) / {float(p):.6g}",
            assumptions=(
                "the rows are chosen without looking at this column's released values",
                "each row's value was drawn independently of the others (the mechanism's own "
                "randomness); the approximation is checked exactly, not proven "
                "(docs/accuracy.md#randomized-response)",
            ),
            outside=(
                "an estimate below 0 or above the rows, if cut back into that range, is "
                "biased by the cut",
            ),
        )
