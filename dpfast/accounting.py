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
from importlib import resources
from typing import Any, Literal

from dpfast._validation import epsilon_too_small, quoted
from dpfast.exceptions import BudgetExceededError, DPFastValueError

#: What a report's guarantee is: ``"proven"`` ε-DP of everything released, ε-DP of the
#: protected columns only (``"protected_only"``), the paper's unproven claim
#: (``"as_published"``), ``"heuristic"``, ``"local"`` DP of one column, or ``"none"``.
GuaranteeLevel = Literal["proven", "protected_only", "as_published", "heuristic", "local", "none"]

#: The version of the reports' JSON Schemas (``dpfast/schemas/``), in every report's
#: ``"schema_version"`` field. It changes when a field is removed or changes meaning
#: (docs/report-schema.md#versioning), never when one is added.
REPORT_SCHEMA_VERSION = "1"

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

    Examples
    --------
    >>> entry = LedgerEntry("cell noise", ("age",), 0.5, "discrete Laplace", 73.0, 146.0,
    ...                     "exact")
    >>> entry.noise_scale == entry.sensitivity / entry.epsilon, entry.details
    (True, {})
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
            raise DPFastValueError(
                f"a ledger step must spend a non-negative epsilon, got {epsilon}"
            )
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


#: What the release did with the input's unprotected columns (see :class:`Report`).
UnprotectedPolicy = Literal["drop", "shuffle", "keep"]


@dataclass
class Report:
    """The public report of a release: what it did, what it spent, what it guarantees.

    Every field is a public parameter, a function of public parameters, or a function of
    the released data: it is safe to publish beside the release. What may not be published
    (exact statistics of the input, timings, utility metrics) is in
    :class:`PrivateReport`, never here.

    Attributes
    ----------
    method : str
        The release method, e.g. ``"ir_dp"``.
    engine : str
        The engine that ran the release, by its registered name (``"memory"``,
        ``"outofcore"``, ``"spark"``, ``"dask"``); an engine dpfast does not ship adds
        its class, ``"name (module.Class)"`` (docs/engines.md).
    parameters : dict
        The arguments, as the report shows them.
    epsilon : float or None
        The total ε spent (the ledger's total); ``None`` for methods with no budget.
    ledger : list of LedgerEntry
        Every step that spent ε, with its mechanism, sensitivity and noise scale.
    guarantee : str
        What holds, in plain words.
    guarantee_level : {"proven", "protected_only", "as_published", "heuristic", "local", "none"}
        ``"proven"``: ε-DP for everything released (every column, the row order).
        ``"protected_only"``: ε-DP for the protected columns; the unprotected ones are
        released unchanged (NOT protected) in a way that does not weaken the protected
        columns' guarantee. The other levels are not differential privacy of the release.
    protected_columns : list of str
        The columns a mechanism protects (by default, the released ones).
    unprotected_columns : list of str
        The input's columns that no mechanism protects.
    unprotected : {"drop", "shuffle", "keep"} or None
        What the release did with them: left them out, released them in a row order
        independent of the protected columns, or kept them in their rows.
    seeded : bool
        Noise came from a seeded generator: reproducible, not for publication.
    sampler : str or None
        The noise sampler(s) the release used, by name (None for a method without noise).
    released_rows : int
        Rows of the released table (a function of the release).
    notes : list of str
        Remarks in plain words (first, for a seeded release, that it is not for
        publication).
    warnings : list of str
        Warnings raised from public quantities (e.g. noise that swamps a column).
    accuracy : dict or None
        Per column with DP noise of a known distribution, the noise in words and
        parameters and the 95 % intervals of its released mean and total, computed from
        the fields above only (:func:`dpfast.intervals.accuracy_section`,
        docs/accuracy.md); None for a release with no DP noise.
    extra : dict
        Method-specific public fields (merged into :meth:`to_dict`).

    Examples
    --------
    >>> import pandas as pd, dpfast
    >>> report = dpfast.laplace_dp(pd.DataFrame({"age": [23, 35, 41, 52]}), epsilon=1.0,
    ...                            bounds={"age": (17, 90)}, seed=7).report
    >>> report.method, report.engine, report.epsilon, report.guarantee_level
    ('laplace_dp', 'memory', 1.0, 'proven')
    >>> [entry.step for entry in report.ledger], report.seeded
    (['cell noise'], True)
    >>> report.to_dict()["report"]
    'public'
    """

    method: str
    engine: str
    parameters: dict[str, Any]
    epsilon: float | None
    ledger: list[LedgerEntry]
    guarantee: str
    guarantee_level: GuaranteeLevel
    protected_columns: list[str]
    unprotected_columns: list[str]
    unprotected: UnprotectedPolicy | None
    seeded: bool
    sampler: str | None
    released_rows: int
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    accuracy: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    #: The value of :meth:`to_dict`'s ``"report"`` field.
    KIND = "public"

    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain JSON-serialisable Python objects.

        It validates against :func:`report_schema` ``("public")``.
        """
        out = {"report": self.KIND, "schema_version": REPORT_SCHEMA_VERSION, **asdict(self)}
        out["ledger"] = [asdict(entry) for entry in self.ledger]
        out.update(out.pop("extra"))
        return _jsonable(out)  # type: ignore[no-any-return]

    def to_json(self, indent: int | None = 2) -> str:
        """Return the report as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


@dataclass
class PrivateReport:
    """What only the data holder may see: exact statistics of the input, timings, metrics.

    Never publish it: its counts are exact functions of the private data (one record more
    or less changes them) and no ε covers them.

    Attributes
    ----------
    method : str
        The release method, e.g. ``"ir_dp"``.
    input_rows : int
        Rows of the input table.
    clamped : dict
        Per protected column, the input values outside the public bounds (clamped).
    clamped_output : dict
        Per protected numeric column, the released values that lie on a bound (after the
        noise, clamped back into the domain).
    timings : dict
        Seconds per phase.
    metrics : dict or None
        Utility metrics against the input, when asked for.
    risk : dict or None
        Disclosure risk against the input, each released row paired with its source
        through the release's own order, when asked for (``risk=True``;
        docs/risk.md#risk-at-release-time).
    on_bound_before_noise : dict
        Per protected numeric column, the rows whose value before the noise (their
        group's mean on the grid, clamped and rounded as released) lies on a bound.
    pushed_onto_bound : dict
        Per protected numeric column, the rows pushed onto a bound by the noise: released
        on a bound, and not on one before the noise (docs/forecast.md#pushed).
    forecast : dict or None
        The forecast the release was checked against and what it measured, per numeric
        column (docs/forecast.md#after-the-release); the forecast from the data, when the
        release read the data for it (``max_on_bound``).
    extra : dict
        Method-specific private fields.

    Examples
    --------
    >>> import pandas as pd, dpfast
    >>> private = dpfast.laplace_dp(pd.DataFrame({"age": [23, 35, 41, 95]}), epsilon=1.0,
    ...                             bounds={"age": (17, 90)}, seed=7).private
    >>> private.input_rows, private.clamped, private.metrics
    (4, {'age': 1}, None)
    >>> private.to_dict()["report"]
    'PRIVATE: not for publication'
    """

    method: str
    input_rows: int
    clamped: dict[str, int]
    clamped_output: dict[str, int]
    timings: dict[str, float]
    metrics: dict[str, Any] | None = None
    risk: dict[str, Any] | None = None
    on_bound_before_noise: dict[str, int] = field(default_factory=dict)
    pushed_onto_bound: dict[str, int] = field(default_factory=dict)
    forecast: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    KIND = "PRIVATE: not for publication"

    def to_dict(self) -> dict[str, Any]:
        """Return the private report as plain JSON-serialisable Python objects.

        It validates against :func:`report_schema` ``("private")``.
        """
        out = {"report": self.KIND, "schema_version": REPORT_SCHEMA_VERSION, **asdict(self)}
        out.update(out.pop("extra"))
        return _jsonable(out)  # type: ignore[no-any-return]

    def to_json(self, indent: int | None = 2) -> str:
        """Return the private report as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


_SCHEMA_FILES = {"public": "report.schema.json", "private": "private-report.schema.json"}


def report_schema(kind: Literal["public", "private"] = "public") -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of :meth:`Report.to_dict` or of the private one.

    The schemas ship with the package (``dpfast/schemas/``); docs/report-schema.md
    describes every field and the versioning rule.

    Parameters
    ----------
    kind : {"public", "private"}
        The schema of :class:`Report` or of :class:`PrivateReport`.

    Returns
    -------
    dict
        The schema, as parsed JSON.

    Examples
    --------
    >>> schema = report_schema()
    >>> schema["properties"]["schema_version"]["const"] == REPORT_SCHEMA_VERSION
    True
    """
    if kind not in _SCHEMA_FILES:
        raise DPFastValueError(f'kind must be "public" or "private", got {quoted(kind)}')
    schemas = resources.files("dpfast") / "schemas"
    text = (schemas / _SCHEMA_FILES[kind]).read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


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
    sensitivity: Fraction | int, epsilon: float, *, what: str = "the noise", shares: float = 1
) -> int:
    """Return the privacy map's smallest integer scale ``t >= sensitivity / epsilon``.

    Both are exact (``epsilon`` is read as the exact binary fraction it holds), so the scale
    is never rounded below what the budget needs.

    Parameters
    ----------
    sensitivity : Fraction or int
        L1 sensitivity in grid steps, ``>= 0``.
    epsilon : float
        The step's budget: its share of the release's total.
    what : str
        What the noise protects, for the error message (e.g. ``"column 'age'"``).
    shares : float
        How many of this step's parts make the total budget (``m`` for an equal split in
        ``m``; ``1 / w`` for a column of weight ``w``).

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
