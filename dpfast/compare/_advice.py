"""Advice to release a table again, which always says what the new release costs.

A release made again with ``risk=True`` or ``metrics=True`` (``--risk``, ``--metrics``)
is a second release of the same data: for a DP release it spends its ε again, and the two
releases' ε add up (docs/budget.md); for a release without a budget, the two disclose
more together than either alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpfast._validation import option
from dpfast.compare._format import rounded


def release_cost(public: Mapping[str, Any] | None) -> str:
    """Say what releasing the same data again costs, from the release's public report.

    Examples
    --------
    >>> "which spends ε = 4 again" in release_cost({"epsilon": 4.0})
    True
    >>> release_cost({"epsilon": None, "method": "mdav"})[:50]
    'a second release of the same data; mdav spends no '
    """
    if public is None:
        return (
            "a second release of the same data, which spends ε again: as much as this one "
            "spent (its public report, not found, says how much)"
        )
    epsilon = public.get("epsilon")
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool):
        return (
            f"a second release of the same data, which spends ε = {rounded(float(epsilon))} "
            "again (the ε of this one, from its public report), on top of what this one spent"
        )
    return (
        f"a second release of the same data; {public.get('method')} spends no ε, but the two "
        "releases disclose more together than either alone"
    )


def release_again(public: Mapping[str, Any] | None, *names: str) -> str:
    """Advise releasing again with the switches ``names``, and say what that costs.

    Examples
    --------
    >>> release_again({"epsilon": 1.0}, "risk", "metrics")[:72]
    'release it again with risk=True and metrics=True: a second release of th'
    """
    switches = " and ".join(option(name, True) for name in names)
    return f"release it again with {switches}: {release_cost(public)}"
