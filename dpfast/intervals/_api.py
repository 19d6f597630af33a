"""``dpfast.accuracy``: the interval of a statistic a user computes on a released file."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpfast._validation import quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.intervals._models import Accuracy
from dpfast.intervals._report import LEVEL, read_models

__all__ = ["accuracy"]

_STATISTICS = ("mean", "sum", "count")


def accuracy(
    report: Any,
    statistic: str = "mean",
    column: str | None = None,
    *,
    rows: int | None = None,
    level: float = LEVEL,
) -> Accuracy:
    """Return how far a mean, sum or count computed on a released file may be from the truth.

    Reads the public report alone (the noise scales of its ledger, the grid step, the
    released row count, ``k`` and the group sizes they make), so anyone holding a
    published release and its public report can call it. The interval
    ``estimate ± half_width`` holds what the statistic estimates with probability
    ``level`` over the release's noise, provided no released value was clamped onto a
    bound after the noise: that clamping biases the statistic by an amount that depends
    on the data, and is outside the interval (docs/accuracy.md).

    Parameters
    ----------
    report : Report, dict or path
        The release's public report: a :class:`~dpfast.accounting.Report`, its
        ``to_dict()``, or the path of the ``OUTPUT.public-report.json`` file the command
        line writes.
    statistic : {"mean", "sum", "count"}
        ``"mean"`` or ``"sum"`` of a numeric column (``ir_dp``, ``mdav_dp``,
        ``laplace_dp``); ``"count"``: DiffGen's records in a set of cells, or randomized
        response's unbiased estimate of one category's count,
        ``(released count - rows * (1 - p) / m) / p``.
    column : str, optional
        The column; may be left out when the report has one column with an interval.
    rows : int, optional
        The released rows the statistic covers (default: all). For a subset of rows the
        interval holds for any subset of that size chosen without looking at this column's
        released values; where rows share a draw (``ir_dp``'s rank groups, ``mdav_dp``'s
        clusters) and which rows share it is not public, it is the widest over every way
        the rows can fall into the groups. For DiffGen: the cells (rows of the counts
        table) summed.
    level : float
        The interval's probability, in ``(0, 1)``; the public report states 0.95.

    Returns
    -------
    Accuracy
        ``half_width``, ``level``, ``rounding`` (what rounding to integers after the noise
        can add, outside the level), the noise in words, how the half-width was computed,
        what the interval is for, its assumptions and what is outside it.

    Raises
    ------
    TypeError
        ``report`` is none of the above, or ``rows`` or ``level`` is not a number.
    ValueError
        A report of a release with no DP noise, the private report, a column that is
        not protected or has no interval (categorical, or released through a transform),
        a statistic the method's noise does not cover, ``rows`` out of range.

    Examples
    --------
    >>> import numpy as np, pandas as pd, dpfast
    >>> table = pd.DataFrame({"income": np.linspace(1_000, 9_000, 1_000)})
    >>> release = dpfast.ir_dp(table, k=50, epsilon=1.0, bounds={"income": (0, 10_000)},
    ...                        seed=3)
    >>> found = dpfast.accuracy(release.report, "mean", "income")
    >>> round(found.half_width, 2), found.level
    (124.63, 0.95)
    >>> stated = release.report.accuracy["columns"]["income"]["intervals"]["mean"]
    >>> stated["half_width"] == found.half_width
    True
    >>> subset = dpfast.accuracy(release.report, "mean", "income", rows=100)  # 2 groups' noise
    >>> round(subset.half_width, 1)
    411.3
    """
    public = _public(report)
    read = read_models(public)
    if read is None:
        raise DPFastValueError(
            f"method {quoted(public.get('method'))} adds no differentially private noise of a "
            "known distribution, so its released values have no stated accuracy; "
            "dpfast.accuracy covers ir_dp, mdav_dp, laplace_dp, diffgen and "
            "randomized_response"
        )
    models, skipped = read
    statistic = _check_statistic(statistic)
    name = _check_column(column, models, skipped)
    model = models[name]
    available = model.cells if hasattr(model, "cells") else model.rows
    return model.interval(statistic, _check_rows(rows, available), _check_level(level))


def _public(report: Any) -> dict[str, Any]:
    """Return the public report as a dict: from a Report, a mapping or a file."""
    if hasattr(report, "to_dict") and callable(report.to_dict):
        report = report.to_dict()
    elif isinstance(report, (str, os.PathLike)):
        report = _read_file(Path(report))
    if not isinstance(report, Mapping):
        raise DPFastTypeError(
            "report must be a public Report, its to_dict(), or the path of a "
            f"public-report JSON file, got {type(report).__name__}"
        )
    kind = report.get("report")
    if kind != "public":
        what = (
            "the PRIVATE report"
            if isinstance(kind, str) and "PRIVATE" in kind
            else (f"not a dpfast public report (its 'report' field is {quoted(kind)})")
        )
        raise DPFastValueError(
            f"report is {what}; give the release's public report "
            "(release.report, or OUTPUT.public-report.json)"
        )
    return dict(report)


def _read_file(path: Path) -> Any:
    beside = Path(f"{path}.public-report.json")
    if path.suffix != ".json" and beside.exists():
        raise DPFastValueError(
            f"{quoted(str(path))} is the released data, not its report; give {quoted(str(beside))}"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise DPFastValueError(
            f"cannot read the report {quoted(str(path))}: {error.strerror or error}; give the path "
            "of the OUTPUT.public-report.json file the release wrote"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DPFastValueError(
            f"{quoted(str(path))} is not a JSON report; give the OUTPUT.public-report.json file "
            "the release wrote"
        ) from None


def _check_statistic(statistic: Any) -> str:
    if statistic not in _STATISTICS:
        raise DPFastValueError(
            f"statistic must be one of {list(_STATISTICS)}, got {quoted(statistic)}"
        )
    return str(statistic)


def _check_column(column: Any, models: Mapping[str, Any], skipped: Mapping[str, str]) -> str:
    if column is None:
        if len(models) == 1:
            return next(iter(models))
        raise DPFastValueError(f"name the column: the report has intervals for {sorted(models)}")
    name = str(column)
    if name in skipped:
        raise DPFastValueError(f"column {quoted(name)} has no interval: {skipped[name]}")
    if name not in models:
        raise DPFastValueError(
            f"column {quoted(name)} is not protected by this release's noise; the report has "
            f"intervals for {sorted(models)}"
        )
    return name


def _check_rows(rows: Any, available: int) -> int:
    if rows is None:
        return available
    if isinstance(rows, bool) or not isinstance(rows, int):
        raise DPFastTypeError(f"rows must be an integer, got {type(rows).__name__}")
    if not 1 <= rows <= available:
        raise DPFastValueError(
            f"rows must be in [1, {available:,}] (the released rows), got {rows:,}"
        )
    return rows


def _check_level(level: Any) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise DPFastTypeError(f"level must be a number in (0, 1), got {type(level).__name__}")
    if not (0 < level < 1 and math.isfinite(level)):
        raise DPFastValueError(f"level must be in (0, 1), e.g. 0.95, got {quoted(level)}")
    return float(level)
