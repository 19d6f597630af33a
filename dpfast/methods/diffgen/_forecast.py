"""The forecast of ``diffgen``: its budget split and its counts' noise, from the arguments.

DiffGen's guarantee is unbounded DP, which keeps the row count private: the forecast
does without it (docs/forecast.md#diffgen).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from dpfast import noise
from dpfast._release import ColumnForecast, Forecast, TableView
from dpfast._validation import check_bounds, check_choice, check_epsilon, check_seed, option, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.methods.diffgen._budget import Budget, Utility, check_steps
from dpfast.methods.diffgen._columns import NumericColumn, _check_mappings, _class_domain
from dpfast.methods.diffgen._scores import UTILITIES
from dpfast.taxonomy import as_taxonomy


def diffgen_forecast(table: TableView, arguments: Mapping[str, Any]) -> Forecast:
    """Return the forecast of :func:`~dpfast.diffgen` with ``arguments`` on ``table``.

    The release's own budget split (:class:`Budget`) and count noise plan
    (:func:`dpfast.noise.count_noise_plan`), from the arguments and the column names only;
    nothing is spent or written, and the row count is not used.
    """
    a = arguments
    epsilon = check_epsilon(a["epsilon"])
    steps = check_steps(a["steps"])
    utility = cast(Utility, check_choice(a["utility"], "utility", UTILITIES))
    check_seed(a["seed"])
    target = a["target"]
    if target not in table.names:
        raise DPFastValueError(
            f"target {quoted(target)} is not a column; the table has {quoted(list(table.names))}"
        )
    if isinstance(a["bounds"], str):
        raise DPFastValueError(
            f"a forecast reads public values only, and {option('bounds', 'data')} takes the "
            "bounds from the data; give the public bounds"
        )
    taxonomies, bounds = _check_mappings(table.names, a["taxonomies"], a["bounds"])
    trees = {name: as_taxonomy(value, name) for name, value in taxonomies.items()}
    class_taxonomy = trees.pop(target, None)
    if a["classes"] is None and class_taxonomy is None:
        raise DPFastValueError(
            f"a forecast reads public values only: give the class values ({option('classes')} "
            "or a taxonomy for the target)"
        )
    labels, _ = _class_domain(target, a["classes"], class_taxonomy)
    if target in bounds:
        raise DPFastValueError(
            f"the target {quoted(target)} is categorical: drop it from bounds (give its public "
            "values in classes= or a taxonomy instead)"
        )
    domains, _ = check_bounds(bounds, list(bounds), {})
    numeric = [
        NumericColumn(name, False, lower, upper, np.empty(0), 0)
        for name, (lower, upper) in domains.items()
    ]
    budget = Budget.of(epsilon, numeric, len(labels or ()), steps, utility)
    budget.check_range(steps, 0)
    return _forecast(budget, epsilon, steps, len(numeric) + len(trees))


def _forecast(budget: Budget, epsilon: float, steps: int, predictors: int) -> Forecast:
    plan = noise.count_noise_plan(budget.counts(steps))
    r = math.exp(-1.0 / plan.scale)
    counts = ColumnForecast(
        column="count",
        epsilon=float(budget.counts(steps)),
        noise_scale=plan.scale,
        noise_sd=noise.discrete_laplace_sd(plan.scale),
        released="every (leaf partition, class) count, clamped at 0",
    )
    draws = len(budget.numeric) + 2 * steps
    notes = (
        f"{predictors} predictor(s); epsilon' = {float(budget.unit):.4g} for each of the "
        f"{draws} exponential-mechanism draws ({len(budget.numeric)} for numeric root split "
        f"values, and per step one selection and one draw of split values)",
        f"the noisy counts get {float(budget.counts(steps)):.4g} of {option('epsilon')} "
        "(more if the specialisation stops early) and are clamped at 0, with no upper "
        f"bound: an empty cell is released as 0 with probability {1 / (1 + r):.1%}, and a "
        f"count of c >= 1 with probability r**c / (1 + r), r = {r:.4g} (c = 1: "
        f"{r / (1 + r):.1%}, c = 10: {r**10 / (1 + r):.1%})",
        "not forecast: the number of cells and the share of counts released as 0 depend on "
        "the private specialisations and counts; DiffGen's unbounded DP keeps the row count "
        "private, so the forecast does not use it",
    )
    return Forecast("diffgen", epsilon, None, (counts,), notes=notes)
