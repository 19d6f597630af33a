"""The privacy ledger, the privacy maps from sensitivity to noise scale, and the report.

Every release follows *plan → draw → spend*: :meth:`Ledger.plan` reserves each step's ε
before any noise is drawn (so a release that would go over its total fails before any
work), and :meth:`Ledger.spend` records the step right after its noise is drawn. The
report carries the ledger, so every ε spent is listed once.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

from dpfast._validation import epsilon_too_small
from dpfast.exceptions import BudgetExceededError

#: What a report's guarantee is: ``"proven"`` ε-DP, the paper's claim (``"as_published"``),
#: ``"heuristic"``, ``"local"`` DP of one column, or ``"none"``.
GuaranteeLevel = Literal["proven", "as_published", "heuristic", "local", "none"]

# Relative slack for float sums of budget shares (e.g. three shares of 1/3).
_BUDGET_SLACK = 1e-9


@dataclass(frozen=True)
class LedgerEntry:
    """One application of a mechanism.

    Attributes
    ----------
    step : str
        What the step releases, e.g. ``"centroid noise"``.
    columns : tuple of str
        The columns whose values the step reads.
    epsilon : float
        The budget the step spends.
    mechanism : str
        E.g. ``"discrete Laplace"``.
    sensitivity : float
        The L1 sensitivity the noise is calibrated to, in the data's units (per column
        where the step covers one column).
    noise_scale : float
        The Laplace scale ``b`` in the data's units (``sensitivity / epsilon``, rounded up to
        the sampler's grid).
    sampler : str
        Which sampler drew the noise.
    details : dict
        Anything else needed to audit the step (grid, sensitivity inflation, ...).
    """

    step: str
    columns: tuple[str, ...]
    epsilon: float
    mechanism: str
    sensitivity: float
    noise_scale: float
    sampler: str
    details: dict[str, Any] = field(default_factory=dict)


class Ledger:
    """An ε budget and the list of what has been spent from it.

    Parameters
    ----------
    total : float
        The budget of the whole release.

    Examples
    --------
    >>> ledger = Ledger(1.0)
    >>> step = ledger.plan(LedgerEntry("noise", ("a",), 0.5, "Laplace", 1.0, 2.0, "exact"))
    >>> ledger.remaining
    0.5
    >>> ledger.spend(step)
    >>> ledger.spent, ledger.remaining
    (0.5, 0.5)
    """

    def __init__(self, total: float) -> None:
        self.total = float(total)
        self._entries: list[LedgerEntry] = []
        self._planned: list[LedgerEntry] = []

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The entries spent so far, in order."""
        return tuple(self._entries)

    @property
    def spent(self) -> float:
        """The budget spent so far."""
        return math.fsum(entry.epsilon for entry in self._entries)

    @property
    def remaining(self) -> float:
        """The budget neither spent nor reserved by a plan."""
        return self.total - math.fsum(e.epsilon for e in self._entries + self._planned)

    def check(self, epsilon: float) -> None:
        """Raise :class:`BudgetExceededError` if ``epsilon`` does not fit in what is left."""
        if not epsilon >= 0:  # 0: a step whose exact sampler needed none of its budget
            raise ValueError(f"a ledger step must spend a non-negative epsilon, got {epsilon}")
        if epsilon > self.remaining + _BUDGET_SLACK * self.total:
            raise BudgetExceededError(
                f"step needs epsilon={epsilon:.6g} but only {self.remaining:.6g} of "
                f"{self.total:.6g} is left"
            )

    def plan(self, entry: LedgerEntry) -> LedgerEntry:
        """Reserve ``entry``'s ε before its noise is drawn; return it for :meth:`spend`."""
        self.check(entry.epsilon)
        self._planned.append(entry)
        return entry

    def spend(self, entry: LedgerEntry) -> None:
        """Record ``entry``: a planned one, or a new one after checking that it fits."""
        for i, planned in enumerate(self._planned):
            if planned is entry:
                del self._planned[i]
                break
        else:
            self.check(entry.epsilon)
        self._entries.append(entry)


@dataclass
class Report:
    """What a release did, what it spent, and what it guarantees.

    The report is for the data holder. It may hold utility metrics computed on the
    original data: do not publish it with the released data.
    """

    method: str
    parameters: dict[str, Any]
    epsilon: float | None
    ledger: list[LedgerEntry]
    guarantee: str
    guarantee_level: GuaranteeLevel
    protected_columns: list[str]
    unprotected_columns: list[str]
    clamped: dict[str, int]
    seeded: bool
    sampler: str | None
    timings: dict[str, float]
    n_rows: int
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain JSON-serialisable Python objects."""
        out = asdict(self)
        out["ledger"] = [asdict(entry) for entry in self.ledger]
        out.update(out.pop("extra"))
        return _jsonable(out)  # type: ignore[no-any-return]

    def to_json(self, indent: int | None = 2) -> str:
        """Return the report as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # NumPy scalars
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class PhaseTimer:
    """Collects wall-clock seconds per named phase of a release."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` block and add it to phase ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start


#: The largest integer noise scale the discrete Laplace samplers draw (``scale < 2**62``).
MAX_SCALE_STEPS = 2**62 - 1


def scale_steps(
    sensitivity: Fraction | int, epsilon: float, *, what: str = "the noise", shares: int = 1
) -> int:
    """Return the privacy map's smallest integer scale ``t >= sensitivity / epsilon``.

    Both are exact (``epsilon`` is read as the exact binary fraction it holds), so the scale
    is never rounded below what the budget needs.

    Parameters
    ----------
    sensitivity : Fraction or int
        L1 sensitivity in grid steps, ``>= 0``.
    epsilon : float
        The step's budget: one of ``shares`` equal parts of the release's total.
    what : str
        What the noise protects, for the error message (e.g. ``"column 'age'"``).
    shares : int
        How many equal parts the total budget is split in.

    Raises
    ------
    EpsilonRangeError
        If the scale would pass :data:`MAX_SCALE_STEPS`, the samplers' limit; the message
        gives the smallest total budget that fits.

    Examples
    --------
    >>> scale_steps(Fraction(7, 2), 0.5)
    7
    >>> try:
    ...     scale_steps(1000, 1e-300, what="column 'age'")
    ... except ValueError as error:
    ...     print(str(error).split("; ")[-1])
    use epsilon >= 2.17e-16
    """
    exact = Fraction(sensitivity)
    if exact == 0:
        return 0
    steps = math.ceil(exact / Fraction(epsilon)) if epsilon > 0 else None
    if steps is None or steps > MAX_SCALE_STEPS:
        need = "an infinite" if steps is None else f"a {Decimal(steps):.3g}-step"
        raise epsilon_too_small(
            epsilon * shares,
            f"{what} would need {need} noise scale on its grid, more than the sampler's "
            "limit of 2**62 - 1 steps",
            float(exact * shares / MAX_SCALE_STEPS),
        )
    return steps


def epsilon_of_scale(sensitivity: Fraction | int, steps: int) -> float:
    """Return the ε a discrete-Laplace scale of ``steps`` spends: ``sensitivity / steps``.

    Rounded up to the next float, so the ledger never understates what is spent.

    Examples
    --------
    >>> epsilon_of_scale(Fraction(1, 3), 1) > 1 / 3
    True
    """
    exact = Fraction(sensitivity) / steps
    value = float(exact)
    return value if Fraction(value) >= exact else math.nextafter(value, math.inf)


def names(columns: Sequence[Hashable]) -> list[str]:
    """Column names as strings, for the report."""
    return [str(c) for c in columns]
