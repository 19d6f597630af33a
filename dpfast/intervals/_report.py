"""The noise models of a public report, and its accuracy section (docs/accuracy.md).

Everything here reads the public report alone: the ledger's noise scales and grid steps,
the released row count (public under bounded DP), ``k`` and the remainder rule, the bounds.
Two tables of the same shape give the same section, whatever their values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dpfast._validation import quoted
from dpfast.exceptions import DPFastValueError
from dpfast.intervals._groups import layout, remainder_rule
from dpfast.intervals._models import (
    CLAMPING,
    INPUT_CLAMPING,
    ROUNDING,
    CountNoise,
    ResponseNoise,
    ValueNoise,
)
from dpfast.intervals._quantiles import Weights
from dpfast.schema import BOUNDS_STEP

__all__ = ["LEVEL", "Model", "accuracy_section", "read_models"]

#: The level of the intervals the public report states.
LEVEL = 0.95

Model = ValueNoise | CountNoise | ResponseNoise

# What shares a draw, per method with noise on its values.
_UNITS = {"ir_dp": "rank group", "mdav_dp": "cluster", "laplace_dp": "cell"}
_DIFFGEN_COUNTS = "count"


def read_models(report: Mapping[str, Any]) -> tuple[dict[str, Model], dict[str, str]] | None:
    """Return the report's noise models by column, and why other columns have none.

    None for a method with no DP noise (``mdav``, ``individual_ranking``, ``k_noise``,
    ``k_pram``).
    """
    method = report.get("method")
    if method in _UNITS:
        return _value_models(report, _UNITS[method])
    if method == "diffgen":
        return _count_models(report), {}
    if method == "randomized_response":
        return _response_models(report)
    return None


def _value_models(report: Mapping[str, Any], unit: str) -> tuple[dict[str, Model], dict[str, str]]:
    parameters = report.get("parameters") or {}
    n = int(report["released_rows"])
    groups: Weights
    rule: str | None
    if unit == "cell":
        groups, rule = ((1, n),), None
    else:
        rule = remainder_rule(parameters.get("remainder"))
        groups = layout(n, int(parameters["k"]), rule)
    transforms = parameters.get("transforms") or {}
    models: dict[str, Model] = {}
    skipped: dict[str, str] = {}
    for entry in report.get("ledger") or []:
        if entry.get("step") == BOUNDS_STEP:
            continue  # the chosen bounds are public in the report; the noise is the next entry
        column = str(entry["columns"][0])
        details = entry.get("details") or {}
        if "scale_in_grid_steps" not in details:
            skipped[column] = (
                f"categorical: each {unit}'s value is chosen by the exponential mechanism, "
                "so no mean or sum of it has an interval"
            )
            continue
        _check_draws(details, groups, unit)
        model = ValueNoise(
            column=column,
            unit=unit,
            groups=groups,
            rows=n,
            scale=float(entry["noise_scale"]),
            grid_step=float(details["grid_step"]),
            steps=int(details["scale_in_grid_steps"]),
            bounds=_bounds(parameters, column),
            integer=details.get("rounded_to_integers"),
            rule=rule,
        )
        transform = _transform(transforms, column)
        if transform is None:
            models[column] = model
        else:
            skipped[column] = (
                f"released through the public transform {quoted(transform)}: the noise "
                f"({model.noise()}) is added on the transformed scale, so on the data's "
                "scale it depends on the values, and a mean or sum has no interval from "
                "public values"
            )
    return models, skipped


def _check_draws(details: Mapping[str, Any], groups: Any, unit: str) -> None:
    """Refuse a report whose ledger counts other groups than ``(n, k)`` make."""
    stated = details.get("n_groups", details.get("n_clusters"))
    made = sum(count for _, count in groups)
    if unit != "cell" and stated is not None and int(stated) != made:
        raise DPFastValueError(
            f"the report is inconsistent: its ledger counts {stated} {unit}s, but its "
            f"released_rows and k make {made}; was it edited?"
        )


def _bounds(parameters: Mapping[str, Any], column: str) -> tuple[float, float]:
    lower, upper = (parameters.get("bounds") or {}).get(column, (0.0, 0.0))
    return float(lower), float(upper)


def _transform(transforms: Any, column: str) -> str | None:
    """Return the name of a column's transform in ``parameters["transforms"]``, or None."""
    given = transforms.get(column) if isinstance(transforms, Mapping) else None
    if isinstance(given, Mapping):
        given = given.get("transform", given.get("name", given.get("kind")))
    if given is None or str(given).lower() in ("none", "identity"):
        return None
    return str(given)


def _count_models(report: Mapping[str, Any]) -> dict[str, Model]:
    for entry in report.get("ledger") or []:
        if entry.get("step") == "noisy counts":
            details = entry.get("details") or {}
            parameter = str(details.get("parameter", ""))
            cells = int(details.get("cells", report["released_rows"]))
            alpha = _count_base(parameter, float(entry["noise_scale"]))
            return {_DIFFGEN_COUNTS: CountNoise(_DIFFGEN_COUNTS, cells, alpha, parameter)}
    return {}


def _count_base(parameter: str, scale: float) -> float:
    """``P(x) ∝ base**|x|``: from ``"p = m/2**b"`` or ``"rate = s/t"``, else from the scale."""
    name, _, value = parameter.partition(" = ")
    if name == "p" and "/2**" in value:
        numerator, bits = value.split("/2**")
        return float(Fraction(int(numerator), 2 ** int(bits)))
    if name == "rate" and "/" in value:
        return math.exp(-float(Fraction(value)))
    return math.exp(-1 / scale)


def _response_models(report: Mapping[str, Any]) -> tuple[dict[str, Model], dict[str, str]]:
    parameters = report.get("parameters") or {}
    fraction = str(parameters.get("retention_fraction", ""))
    if "/2**" in fraction:
        numerator, bits = fraction.split("/2**")
        retention = Fraction(int(numerator), 2 ** int(bits))
    else:
        retention = Fraction(float(parameters["retention"]))
    column = str(parameters["column"])
    rows, categories = int(report["released_rows"]), int(parameters["domain_size"])
    if retention == 0:
        why = "retention 0: every released value is a uniform draw, independent of the data"
        return {}, {column: why}
    return {column: ResponseNoise(column, rows, retention, categories)}, {}


def _statistics(model: Model) -> dict[str, tuple[str, int, float]]:
    """Return the report's intervals of a model: name -> (statistic, rows, divide by)."""
    if isinstance(model, ValueNoise):
        return {"mean": ("mean", model.rows, 1.0), "total": ("sum", model.rows, 1.0)}
    if isinstance(model, CountNoise):
        return {"cell": ("count", 1, 1.0), "total": ("count", model.cells, 1.0)}
    return {"count": ("count", model.rows, 1.0), "share": ("count", model.rows, model.rows)}


def _rounded(column: Mapping[str, Any]) -> bool:
    return any(found["rounding"] for found in column["intervals"].values())


def accuracy_section(report: Mapping[str, Any], level: float = LEVEL) -> dict[str, Any] | None:
    """Return the public report's ``accuracy`` field, from its other public fields.

    Per column with noise of known distribution: the noise in words and parameters, and
    the half-widths of the ``level`` intervals of its released mean and total (DiffGen: of
    one cell's count and of the total count; randomized response: of a category's count
    and share). None for a release with no DP noise.
    """
    read = read_models(report)
    if read is None:
        return None
    models, skipped = read
    columns: dict[str, Any] = {}
    for name, model in models.items():
        intervals, computed = {}, ""
        for key, (statistic, rows, divide) in _statistics(model).items():
            found = model.interval(statistic, rows, level)
            intervals[key] = {
                "half_width": found.half_width / divide,
                "rounding": found.rounding / divide,
            }
            computed = found.computed
        columns[name] = {
            "noise": model.noise(),
            "distribution": model.distribution(),
            "intervals": intervals,
            "computed": computed,
        }
    return {
        "level": level,
        "columns": columns,
        "not_covered": skipped,
        "outside": [CLAMPING, INPUT_CLAMPING]
        + ([ROUNDING] if any(_rounded(c) for c in columns.values()) else []),
        "subsets": "dpfast.accuracy(report, statistic, column, rows=...) gives the interval "
        "of a mean, sum or count over some of the released rows (docs/accuracy.md)",
    }
