"""Per-column shares of ε: the public ``epsilon_weights`` of a release, checked and applied.

Each protected column's ε is its weight's share of the total (docs/privacy.md#weights).
Weights are public: they are arguments, never read from the data. Without weights every
column gets an equal share, as before weights existed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from dpfast._validation import in_cli, option, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError

__all__ = [
    "budget_parts",
    "check_epsilon_weights",
    "epsilon_shares",
    "weight_parameters",
    "weights_option",
]


def weights_option() -> str:
    """Name the weights as the caller gives them: ``epsilon_weights`` or the schema's field.

    Examples
    --------
    >>> weights_option()
    'epsilon_weights'
    """
    return 'the schema\'s "epsilon_weight"' if in_cli() else option("epsilon_weights")


def check_epsilon_weights(
    weights: Any, protected: Sequence[Hashable]
) -> dict[Hashable, Fraction] | None:
    """Return each protected column's weight normalised to sum to 1 (exact), or ``None``.

    ``weights`` is ``None`` (an equal split) or a mapping ``{column: weight}`` with a
    finite weight ``> 0`` for every column of ``protected`` and for no other column.

    Examples
    --------
    >>> check_epsilon_weights({"a": 3, "b": 1.0}, ["a", "b"])
    {'a': Fraction(3, 4), 'b': Fraction(1, 4)}
    >>> check_epsilon_weights(None, ["a"]) is None
    True
    """
    if weights is None:
        return None
    name = weights_option()
    if not isinstance(weights, Mapping):
        raise DPFastTypeError(
            f"{name} must be a mapping {{column: weight}}, got {type(weights).__name__}; "
            "give every protected column a weight > 0, e.g. {'income': 2, 'age': 1}"
        )
    stray = [c for c in weights if c not in protected]
    if stray:
        raise DPFastValueError(
            f"{name} names column(s) {stray} that are not protected; the protected columns "
            f"are {list(protected)}: drop those weights or protect the columns"
        )
    missing = [c for c in protected if c not in weights]
    if missing:
        raise DPFastValueError(
            f"{name} must give every protected column a weight; missing {missing}: add "
            f"their weights, or leave out {name} for an equal split"
        )
    exact = {c: _weight(weights[c], c, name) for c in protected}
    total = sum(exact.values(), Fraction(0))
    return {c: w / total for c, w in exact.items()}


def _weight(value: Any, column: Hashable, name: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DPFastTypeError(
            f"{name}[{quoted(column)}] must be a number > 0, got "
            f"{type(value).__name__} {quoted(value)}"
        )
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise DPFastValueError(
            f"{name}[{quoted(column)}] must be a finite number > 0, got {quoted(value)}; a "
            "column that "
            "should get no budget cannot be protected: leave it out of the columns"
        )
    return Fraction(number)


def epsilon_shares(
    epsilon: float, protected: Sequence[Hashable], weights: Mapping[Hashable, Fraction] | None
) -> dict[Hashable, float]:
    """Return each protected column's ε: its weight's share, or ``ε / m`` without weights.

    A weighted share is rounded down to a float, so the shares' exact sum never exceeds
    ``epsilon`` and the ledger never understates what is spent.

    Examples
    --------
    >>> epsilon_shares(1.0, ["a", "b"], {"a": Fraction(3, 4), "b": Fraction(1, 4)})
    {'a': 0.75, 'b': 0.25}
    >>> epsilon_shares(2.0, ["a", "b"], None)
    {'a': 1.0, 'b': 1.0}
    """
    if weights is None:
        m = len(protected)
        return {c: epsilon / m for c in protected}
    return {c: _floor(Fraction(epsilon) * weights[c]) for c in protected}


def budget_parts(
    column: Hashable, protected: Sequence[Hashable], weights: Mapping[Hashable, Fraction] | None
) -> float:
    """Return how many of ``column``'s shares make the total: ``m``, or ``1 / weight``.

    The messages that give the smallest usable total budget multiply a share by it.
    """
    return len(protected) if weights is None else float(1 / weights[column])


def _floor(exact: Fraction) -> float:
    value = float(exact)
    return value if Fraction(value) <= exact else math.nextafter(value, 0.0)


def weight_parameters(weights: Mapping[Hashable, Fraction] | None) -> dict[str, Any]:
    """Return the report's parameters for the split: the normalised weights, if any."""
    if weights is None:
        return {"budget_split": "equal over protected columns"}
    return {
        "budget_split": "weighted by epsilon_weights (each column's epsilon is its weight "
        "times the total)",
        "epsilon_weights": {str(c): float(w) for c, w in weights.items()},
    }
