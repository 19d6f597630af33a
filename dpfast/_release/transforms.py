"""Public monotone transforms of numeric columns: the argument, the grids, the report.

A column released with ``transforms={column: "log"}`` (``log1p``, non-negative values) or
``"asinh"`` (signed values) keeps its bounds in the data's units. Its values are clamped,
transformed and put on a grid over ``[T(lower), T(upper)]``; the mechanism (group means,
cluster means, cells) and its noise work on that scale, so the sensitivity is the
transformed width's; the released values are mapped back through ``T^-1`` and divided
by the noise's mean factor ``E[e^Y]``, a public function of the noise scale
(:func:`dpfast.noise.log_mean_exp`). The mapping back is post-processing of a DP output
(docs/privacy.md#transforms).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dpfast import noise
from dpfast._release.shares import weights_option
from dpfast._validation import did_you_mean, in_cli, option, quoted
from dpfast.dataflow.values import NumericColumn
from dpfast.exceptions import DPFastTypeError, DPFastValueError, TransformBiasWarning
from dpfast.partitions.grid import TRANSFORM_CODES, Grid

__all__ = [
    "check_transforms",
    "noise_grid",
    "transform_notes",
    "transform_parameters",
    "warn_uncorrected",
]

_FUNCTIONS = {"log": ("log1p", "expm1"), "asinh": ("asinh", "sinh")}


def check_transforms(
    transforms: Any,
    numeric: Sequence[NumericColumn],
    categorical: Sequence[Hashable],
    domains: Mapping[Hashable, tuple[float, float]],
) -> dict[Hashable, str]:
    """Return ``{column: "log" | "asinh"}`` for the protected numeric columns named.

    ``transforms`` is ``None`` (no transform) or a mapping; each column must be a
    protected numeric column, and ``"log"`` needs a lower bound ``>= 0``.

    Examples
    --------
    >>> import numpy as np
    >>> column = NumericColumn("income", np.empty(0), False, np.dtype(np.float64))
    >>> check_transforms({"income": "log"}, [column], [], {"income": (0.0, 1e6)})
    {'income': 'log'}
    """
    if transforms is None:
        return {}
    name = 'the schema\'s "transform"' if in_cli() else option("transforms")
    if not isinstance(transforms, Mapping):
        raise DPFastTypeError(
            f'{name} must be a mapping {{column: "log" or "asinh"}}, got '
            f"{type(transforms).__name__}"
        )
    numeric_names = [c.name for c in numeric]
    checked: dict[Hashable, str] = {}
    for column, transform in transforms.items():
        if column in categorical:
            raise DPFastValueError(
                f"{name} names categorical column {quoted(column)}; a transform applies to numeric "
                "columns only: drop it from the transforms"
            )
        if column not in numeric_names:
            raise DPFastValueError(
                f"{name} names column {quoted(column)}, which is not a protected numeric column; "
                f"the protected numeric columns are {numeric_names}"
            )
        checked[column] = _transform(transform, column, name, domains[column])
    return checked


def _transform(transform: Any, column: Hashable, name: str, domain: tuple[float, float]) -> str:
    if not isinstance(transform, str) or transform not in TRANSFORM_CODES:
        hint = did_you_mean(transform, TRANSFORM_CODES) if isinstance(transform, str) else ""
        raise DPFastValueError(
            f'{name}[{quoted(column)}] must be "log" (log1p, for values >= 0) or "asinh" (for '
            f"signed values), got {quoted(transform)}; {hint}".rstrip("; ")
        )
    if transform == "log" and domain[0] < 0:
        raise DPFastValueError(
            f'{name}[{quoted(column)}] is "log" (log1p), which needs values >= 0, but the '
            "column's "
            f'lower bound is {domain[0]:g}; use "asinh" for a column with negative values'
        )
    return str(transform)


def noise_grid(grid: Grid, steps: int) -> Grid:
    """Return ``grid`` mapping back divided by its noise's mean factor, where it is finite.

    ``steps`` is the discrete Laplace scale in grid steps. An untransformed grid, and one
    whose factor is infinite (:func:`warn_uncorrected` says so), come back unchanged.
    """
    if grid.transform is None or grid.d_int == 0:
        return grid
    shift = noise.log_mean_exp(steps, grid.gamma)
    return grid.corrected(shift) if math.isfinite(shift) else grid


def _factor(grid: Grid, steps: int) -> float:
    """``E[e^Y]`` of the column's noise on its transformed scale (``inf``: no mean)."""
    if grid.d_int == 0:
        return 1.0
    return math.exp(noise.log_mean_exp(steps, grid.gamma))


def transform_parameters(grids: Mapping[Hashable, tuple[Grid, int]]) -> dict[str, Any]:
    """Return the report's ``transforms``: each transformed column's transform and correction.

    Empty when no column is transformed. Every figure is public: the transform, the noise
    scale on the transformed scale, and the mean factor the mapping back divides out.
    """
    out: dict[str, Any] = {}
    for column, (grid, steps) in grids.items():
        if grid.transform is None:
            continue
        function, inverse = _FUNCTIONS[grid.transform]
        factor = _factor(grid, steps)
        corrected = math.isfinite(factor)
        out[str(column)] = {
            "transform": grid.transform,
            "function": function,
            "noise_scale": steps * grid.gamma,
            "noise_mean_factor": factor if corrected else None,
            "corrected": corrected,
            "mapping_back": _mapping_back(grid.transform, inverse, corrected),
        }
    return {"transforms": out} if out else {}


def _mapping_back(transform: str, inverse: str, corrected: bool) -> str:
    base = (
        f"noise added on the {_FUNCTIONS[transform][0]} scale; values on a bound of that "
        f"scale are released as the bound, the others as {inverse}"
    )
    if not corrected:
        return (
            f"{base} of the noisy value, NOT corrected: the noise scale is 1 or more on the "
            "transformed scale, where E[e^Y] is infinite, so the released values are biased "
            "away from 0 (post-processing of a DP output)"
        )
    if transform == "log":
        return (
            f"{base}(z - log E[e^Y]) = (1 + expm1(z)) / E[e^Y] - 1, clamped to the bounds: "
            "where nothing is clamped its mean is the noiseless expm1(z) (post-processing "
            "of a DP output)"
        )
    return (
        f"{base}(z) / E[cosh Y] (= E[e^Y]), clamped to the bounds: where nothing is clamped "
        "its mean is the noiseless sinh(z) (post-processing of a DP output)"
    )


def uncorrected(grids: Mapping[Hashable, tuple[Grid, int]], k: bool = True) -> str | None:
    """Return one line naming the transformed columns left uncorrected, or ``None``.

    ``k``: the method has a group size, whose increase lowers the noise.
    """
    columns = [
        (str(c), steps * g.gamma)
        for c, (g, steps) in grids.items()
        if g.transform is not None and not math.isfinite(_factor(g, steps))
    ]
    if not columns:
        return None
    named = ", ".join(f"{quoted(c)} (noise scale {b:.3g})" for c, b in columns)
    return (
        f"the noise scale of transformed column(s) {named} is 1 or more on the transformed "
        "scale, where the noise's mean factor E[e^Y] is infinite: their values are mapped "
        f"back without correction, biased away from 0. Raise {option('epsilon')}"
        f"{' or ' + option('k') if k else ''}, or give the column(s) a larger share of it "
        f"({weights_option()})"
    )


def transform_notes(grids: Mapping[Hashable, tuple[Grid, int]], k: bool = True) -> tuple[str, ...]:
    """Return a forecast's notes on the transformed columns (none without any)."""
    named = [
        f"{quoted(c)} ({g.transform})" for c, (g, _) in grids.items() if g.transform is not None
    ]
    if not named:
        return ()
    notes = [
        f"transformed column(s) {', '.join(named)}: the noise scale, its sd and the width are "
        "on the transformed scale, and the share on a bound takes the values as spread evenly "
        "over it"
    ]
    line = uncorrected(grids, k)
    if line is not None:
        notes.append(line)
    return tuple(notes)


def warn_uncorrected(
    alerts: list[str], grids: Mapping[Hashable, tuple[Grid, int]], k: bool = True
) -> None:
    """Warn (:class:`TransformBiasWarning`) of the columns :func:`uncorrected` names.

    The line also goes to ``alerts`` (the run's, which become the report's warnings).
    """
    line = uncorrected(grids, k)
    if line is not None:
        alerts.append(line)
        warnings.warn(line, TransformBiasWarning, stacklevel=3)
