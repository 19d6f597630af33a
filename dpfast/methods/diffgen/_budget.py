"""DiffGen's budget: the paper's split, the ledger entry of every draw, and the counts' share.

``ε' = ε / (2 (n_numeric + 2 steps))`` is spent on each numeric root's split value, on each
step's selection and on each step's new split values; the counts get what is left, ``ε / 2``
when every step runs (Mohammed et al. 2011, Algorithm 1; docs/design.md#diffgen-budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from dpfast import noise
from dpfast._validation import check_int, epsilon_too_large, epsilon_too_small, option, quoted
from dpfast.accounting import Ledger, LedgerEntry
from dpfast.exceptions import DPFastValueError
from dpfast.methods.diffgen._columns import NumericColumn, Prepared
from dpfast.methods.diffgen._scores import sensitivity
from dpfast.methods.diffgen._tree import score_units

Utility = Literal["max", "info_gain"]


@dataclass(frozen=True)
class Budget:
    """The paper's split: ``ε' = ε / (2 (n_numeric + 2 steps))`` per unit, ``ε / 2`` counts."""

    total: Fraction
    unit: Fraction
    delta_u: float
    numeric: list[NumericColumn]
    utility: Utility

    @classmethod
    def split(cls, epsilon: float, prepared: Prepared, steps: int, utility: Utility) -> Budget:
        numeric = [c for c in prepared.columns if isinstance(c, NumericColumn)]
        return cls.of(epsilon, numeric, len(prepared.class_labels), steps, utility)

    @classmethod
    def of(
        cls,
        epsilon: float,
        numeric: list[NumericColumn],
        n_classes: int,
        steps: int,
        utility: Utility,
    ) -> Budget:
        """Split ``epsilon`` for ``numeric`` predictors, ``n_classes`` classes and ``steps``."""
        total = Fraction(epsilon)
        delta_u = sensitivity(utility, n_classes)
        return cls(total, _unit(total, len(numeric), steps), delta_u, numeric, utility)

    def check_range(self, steps: int, n_records: int) -> None:
        """Refuse, before any work, a total ε or a step count that a sampler cannot serve.

        The counts get between ``counts(steps)`` and ``counts(0)``, both proportional to
        the total, and must lie in the count samplers' range; each ``ε'`` must be served by
        the exponential mechanism (:meth:`served`), else the message gives the largest
        step count that is (:meth:`max_steps`). ``n_records`` is kept for the callers.
        """
        epsilon = float(self.total)
        low, high = self.counts(steps), self.counts(0)
        if low < noise.COUNT_MIN_EPSILON:
            reason = f"the noisy counts would get {float(low):.3g}, below the samplers' 2**-32"
            raise epsilon_too_small(
                epsilon, reason, float(self.total * noise.COUNT_MIN_EPSILON / low)
            )
        if high >= noise.COUNT_MAX_EPSILON:
            reason = f"the noisy counts would get {float(high):.3g}, above the samplers' 2**62"
            raise epsilon_too_large(
                epsilon, reason, float(self.total * noise.COUNT_MAX_EPSILON / high)
            )
        if not self.served(steps):
            largest = self.max_steps()
            fix = (
                f"use {option('steps')} <= {largest} (or raise {option('epsilon')})"
                if largest >= 0
                else f"raise {option('epsilon')}"
            )
            raise DPFastValueError(
                f"{option('steps', steps)} is too large: each selection and split value would "
                f"get {option('epsilon')} / (2 (n_numeric + 2 steps)) = "
                f"{float(_unit(self.total, len(self.numeric), steps)):.3g}, too small for the "
                f"exponential mechanism's float64 parameters; {fix}"
            )

    def served(self, steps: int) -> bool:
        """Whether the exponential mechanism serves the ``ε'`` of ``steps`` steps.

        ``ε'`` reaches the draws as a float64 (:class:`~dpfast.methods.diffgen._tree.Builder`)
        and must be > 0 there; so must its rate ``ε' / (2 Δ)`` (Δ in quality units), from
        which the exact base is built; and the ledger's noise scale ``unit / ln(1/b)``
        must be finite. Each condition only fails more as ``steps`` grows.
        """
        if len(self.numeric) + 2 * steps == 0:
            return True  # no draw at all
        epsilon = float(_unit(self.total, len(self.numeric), steps))
        units, unit = self.quality_units()
        if not (epsilon > 0 and float(Fraction(epsilon) / (2 * units)) > 0):
            return False
        base = noise.exponential_base(epsilon=epsilon, sensitivity=units)
        return math.isfinite(base.scale(unit))

    def max_steps(self) -> int:
        """Return the largest step count that :meth:`served` accepts (-1 if not even 0).

        Doubling, then bisection: about ``2 log2(max_steps)`` checks, on the error path only.
        """
        if not self.served(0):
            return -1
        low, high = 0, 1
        while self.served(high):
            low, high = high, 2 * high
        while high - low > 1:
            middle = (low + high) // 2
            if self.served(middle):
                low = middle
            else:
                high = middle
        return low

    def quality_units(self) -> tuple[int, float]:
        """Return the draws' sensitivity in quality units, and the value of one unit."""
        units = score_units(np.zeros(0), self.utility, self.delta_u)[1]
        return units, 1.0 if self.utility == "max" else 2.0**-noise.SCORE_BITS

    def counts(self, done: int) -> Fraction:
        """Return the counts' budget after ``done`` steps (the steps not taken included)."""
        return self.total - self.unit * (len(self.numeric) + 2 * done)


@dataclass(frozen=True)
class Spender:
    """Records each draw of the tree builder in the ledger (check, then spend)."""

    ledger: Ledger
    prepared: Prepared
    budget: Budget
    utility: Utility

    def __call__(self, kind: str, index: int, what: Any) -> None:
        target = str(self.prepared.target)
        if kind == "root split":
            step = f"split value of the root interval of {quoted(what)}"
            columns: tuple[str, ...] = (str(what), target)
            mechanism = (
                "interval exponential mechanism: Pr[s] ∝ exp(ε' u(s) / (2Δu)) over the split "
                "points s of the root interval (docs/design.md#diffgen-split)"
            )
            details = {"line": "Algorithm 1 line 4"}
        elif kind == "selection":
            step = f"selection {index + 1}"
            columns = (*(str(c.name) for c in self.prepared.columns), target)
            mechanism = (
                "exponential mechanism over the candidates (the values of every Cut_i), "
                f"utility {self.utility} (docs/design.md#diffgen-scores)"
            )
            details = {"line": "Algorithm 1 line 7"}
        else:
            step = f"split values of the new intervals of step {index + 1}"
            columns = (str(what[0]), target)
            mechanism = (
                "interval exponential mechanism on each new numeric child (the children hold "
                "disjoint records: parallel composition); charged in every step, even when "
                "the specialised value is categorical"
            )
            details = {"line": "Algorithm 1 line 9", "specialised": str(what[1])}
        epsilon_prime = float(self.budget.unit)
        units, unit = self.budget.quality_units()
        base = noise.exponential_base(epsilon=epsilon_prime, sensitivity=units)
        self.ledger.spend(
            LedgerEntry(
                step=step,
                columns=columns,
                epsilon=epsilon_prime,
                mechanism=mechanism,
                sensitivity=units * unit,
                noise_scale=base.scale(unit),
                sampler=noise.EM_SAMPLER_NAME,
                details={**details, **base.details(unit)},
            )
        )


def check_steps(steps: Any) -> int:
    """Check the number of specialisations: an integer ``>= 0``."""
    steps = check_int(steps, option("steps"))
    if steps < 0:
        raise DPFastValueError(f"{option('steps')} must be >= 0, got {steps}")
    return int(steps)


def _unit(total: Fraction, n_numeric: int, steps: int) -> Fraction:
    n_units = n_numeric + 2 * steps
    return total / (2 * n_units) if n_units else Fraction(0)


def counts_entry(
    prepared: Prepared,
    budget: Budget,
    plan: noise.CountNoise,
    cells: int,
    steps: int,
    done: int,
) -> LedgerEntry:
    """Return the ledger entry of the noisy counts: what the steps left, at least ``ε / 2``."""
    epsilon = budget.counts(done)
    return LedgerEntry(
        step="noisy counts",
        columns=(*(str(c.name) for c in prepared.columns), str(prepared.target)),
        epsilon=float(epsilon),
        mechanism="discrete Laplace (two-sided geometric) on every (leaf partition, class) "
        "count, clamped at 0 (docs/design.md#diffgen-tree)",
        sensitivity=1.0,
        noise_scale=plan.scale,
        sampler=plan.sampler,
        details={
            "parameter": plan.parameter,
            "effective_epsilon": plan.effective_epsilon,
            "nominal_epsilon": float(epsilon),
            "parameter_rounding": "the noise parameter is the one closest to the budget on "
            "its grid (p = m/2**b, or s/t with t <= 2**32) whose guarantee does not exceed "
            "it, so privacy is never overstated",
            "cells": cells,
            "leftover_from_early_stop": float(budget.unit * 2 * (steps - done)),
        },
    )
