"""Clamping bounds chosen with DP within a public outer range: what a caller declares.

A :class:`DPBounds` stands where a column's public ``(lower, upper)`` would: the release
spends ``epsilon_share`` of the column's ε on an exact DP quantile of the column, clamped
to ``outer``, for each bound it chooses (docs/privacy.md#bounds-chosen-with-dp).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from dpfast._validation import quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError

__all__ = ["BOUNDS_STEP", "DPBounds"]

#: The public report's ledger step of a column's bounds chosen with DP.
BOUNDS_STEP = "clamping bounds (DP quantile)"


def _number(value: Any, what: str, fix: str) -> float:
    """Return ``value`` as a float; refuse booleans and what is not a real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DPFastTypeError(f"DPBounds {what} must be a number, got {quoted(value)}; {fix}")
    return float(value)


def _quantile(value: Any, what: str) -> float | None:
    if value is None:
        return None
    fix = f"e.g. {what}=0.99 clamps near the 99th percentile"
    q = _number(value, what, fix)
    if not 0.0 <= q <= 1.0:
        raise DPFastValueError(
            f"DPBounds {what} must be a quantile in [0, 1], got {quoted(value)}; {fix}"
        )
    return q


@dataclass(frozen=True, kw_only=True)
class DPBounds:
    """A column's clamping bounds, chosen with DP inside a public outer range.

    Pass it in ``bounds=`` in place of a public pair (``ir_dp``, ``mdav_dp``,
    ``laplace_dp``), or declare it in a schema file (docs/schema.md). The release spends
    ``epsilon_share`` of the column's share of ε to choose the bounds (the rest goes to the
    column's noise, so the total stays ε): each bound asked for is an exact DP quantile of
    the column clamped to ``outer``, drawn by the exponential mechanism over a public
    grid of candidates (docs/privacy.md#bounds-chosen-with-dp). A bound not asked for
    stays at ``outer``'s. The chosen bounds are DP outputs: the public report gives them.

    Attributes
    ----------
    outer : (float, float)
        The public outer range ``(lower, upper)``, from knowledge that does not depend on
        the data (a codebook, a legal limit): finite, ``lower < upper``. The chosen bounds
        lie within it.
    epsilon_share : float
        The share of the column's ε spent on its bounds, in ``(0, 1)`` (0.1 is a good
        start; docs/privacy.md#choosing-the-quantile-and-the-share).
    upper_quantile : float, optional
        The quantile in ``[0, 1]`` the upper bound is chosen at (e.g. 0.99); ``None``:
        the upper bound stays ``outer[1]``.
    lower_quantile : float, optional
        The quantile the lower bound is chosen at (e.g. 0.01); ``None`` (default): the
        lower bound stays ``outer[0]``. At least one of the two quantiles is needed.

    Examples
    --------
    >>> import dpfast
    >>> DPBounds(outer=(0, 1e7), upper_quantile=0.99, epsilon_share=0.1)
    DPBounds(outer=(0.0, 10000000.0), epsilon_share=0.1, upper_quantile=0.99, lower_quantile=None)
    >>> DPBounds(outer=(0, 1e7), upper_quantile=1.5, epsilon_share=0.1)
    Traceback (most recent call last):
    ...
    dpfast.exceptions.DPFastValueError: DPBounds upper_quantile must be a quantile in [0, 1], \
got 1.5; e.g. upper_quantile=0.99 clamps near the 99th percentile
    """

    outer: tuple[float, float]
    epsilon_share: float
    upper_quantile: float | None = None
    lower_quantile: float | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # a frozen dataclass normalises its fields here
        set_(self, "outer", _outer(self.outer))
        set_(self, "epsilon_share", _share(self.epsilon_share))
        set_(self, "upper_quantile", _quantile(self.upper_quantile, "upper_quantile"))
        set_(self, "lower_quantile", _quantile(self.lower_quantile, "lower_quantile"))
        low, high = self.lower_quantile, self.upper_quantile
        if low is None and high is None:
            raise DPFastValueError(
                "DPBounds chooses no bound: give upper_quantile (e.g. 0.99), lower_quantile "
                "(e.g. 0.01) or both; for bounds not chosen with DP pass the pair "
                f"{self.outer} itself"
            )
        if low is not None and high is not None and not low < high:
            raise DPFastValueError(
                f"DPBounds lower_quantile {quoted(low)} must be below upper_quantile "
                f"{quoted(high)}; swap them"
            )

    @property
    def draws(self) -> int:
        """How many bounds are chosen (1 or 2): the share is split equally between them."""
        return int(self.lower_quantile is not None) + int(self.upper_quantile is not None)

    def to_dict(self) -> dict[str, Any]:
        """Return the declaration as a schema file writes it (without ``outer``: the bounds)."""
        out: dict[str, Any] = {"epsilon_share": self.epsilon_share}
        if self.upper_quantile is not None:
            out["upper_quantile"] = self.upper_quantile
        if self.lower_quantile is not None:
            out["lower_quantile"] = self.lower_quantile
        return out


def _outer(value: Any) -> tuple[float, float]:
    fix = "give the public outer range as a pair (lower, upper), e.g. outer=(0, 1e7)"
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise DPFastTypeError(
            f"DPBounds outer must be a pair (lower, upper), got {quoted(value)}; {fix}"
        )
    lower = _number(value[0], "outer lower", fix)
    upper = _number(value[1], "outer upper", fix)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise DPFastValueError(f"DPBounds outer must be finite, got {quoted(value)}; {fix}")
    if not lower < upper:
        raise DPFastValueError(
            f"DPBounds outer must have lower < upper, got {quoted(value)}; "
            + ("swap them" if lower > upper else "widen it to the column's public range")
        )
    if not math.isfinite(upper - lower):
        raise DPFastValueError(
            f"DPBounds outer {quoted(value)} is wider than float64 can hold; rescale the "
            "column first"
        )
    return lower, upper


def _share(value: Any) -> float:
    fix = "e.g. epsilon_share=0.1 spends a tenth of the column's epsilon on its bounds"
    share = _number(value, "epsilon_share", fix)
    if not 0.0 < share < 1.0:
        raise DPFastValueError(
            f"DPBounds epsilon_share must be in (0, 1), got {quoted(value)}; {fix} and the rest on "
            "its noise"
        )
    return share
