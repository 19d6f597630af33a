"""A release's forecast from public values only: its noise, before any ε is spent.

A method builds its :class:`Forecast` from its own plan (the same ledger entries, grids
and noise scales its release draws with) over a :class:`PublicTable`, which holds the
row count and the column names and nothing else; docs/forecast.md gives the formula
and how to read it. The release warns from it (:meth:`Forecast.warning`, one line) before
it reserves its ε; a dry run prints it and stops.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from dpfast import noise
from dpfast._validation import option, quoted
from dpfast.accounting import LedgerEntry
from dpfast.dataflow.flow import Dataflow
from dpfast.dataflow.values import CategoricalColumn, NumericColumn
from dpfast.exceptions import DPFastError, DPFastValueError
from dpfast.partitions.grid import Grid
from dpfast.taxonomy import Taxonomy

__all__ = [
    "THRESHOLD",
    "ColumnForecast",
    "Forecast",
    "PublicTable",
    "advise_k",
    "bound_steps",
    "choice_forecast",
    "numeric_forecast",
]

#: The forecast share of a column's released values on a bound from which a release
#: warns (docs/forecast.md#warning).
THRESHOLD = 0.10


@dataclass(frozen=True)
class PublicTable:
    """A table as a forecast sees it: its row count and column names, no value.

    A :class:`~dpfast._release.columns.TableView`, as an engine is: pass it to
    :func:`dpfast.forecast` in place of the data (the command line's ``--dry-run`` does).

    Attributes
    ----------
    n_rows : int
        The table's row count.
    names : list
        The table's column names, in order.
    integer : frozenset
        The columns of an integer type (their values are rounded after the noise);
        default none.

    Examples
    --------
    >>> import dpfast
    >>> table = dpfast.PublicTable(1000, ["age", "hours"], frozenset({"age"}))
    >>> expected = dpfast.forecast("laplace_dp", table, epsilon=1.0,
    ...                            bounds={"age": (0, 100), "hours": (0, 99)})
    >>> [column.column for column in expected.columns], expected.n_rows
    (['age', 'hours'], 1000)
    """

    n_rows: int
    names: list[Hashable]
    integer: frozenset[Hashable] = frozenset()

    def numeric_columns(
        self,
        names: Sequence[Hashable],
        *,
        integer: Mapping[Hashable, bool] | None = None,
        categorical: bool = True,
    ) -> list[NumericColumn]:
        """Return the columns ``names``, without values."""
        columns = []
        for name in names:
            whole = name in self.integer if integer is None else bool(integer.get(name))
            dtype = np.dtype(np.int64 if whole else np.float64)
            columns.append(NumericColumn(name, np.empty(0), whole, dtype))
        return columns

    def categorical_columns(
        self, taxonomies: Mapping[Hashable, Taxonomy]
    ) -> list[CategoricalColumn]:
        """Return the columns of ``taxonomies``, without codes."""
        return [
            CategoricalColumn(name, np.empty(0, dtype=np.int64), taxonomy)
            for name, taxonomy in taxonomies.items()
        ]

    @property
    def dataflow(self) -> Dataflow:
        """The table's columns as a source that refuses every read (a forecast reads no value).

        A step that would read a column (``bounds="data"`` takes a column's bounds from
        its values) raises a :class:`~dpfast.exceptions.DPFastValueError` naming it.
        """
        return Dataflow.without_values(self.names, self.n_rows, _refusal)


def _refusal(name: str | None) -> DPFastValueError:
    """Return the refusal of a forecast's read of column ``name`` (``None``: of the types)."""
    whose, give = (
        ("the columns'", "each column's") if name is None else (f"column {quoted(name)}'s", "its")
    )
    return DPFastValueError(
        f"a forecast reads public values only, and {option('bounds', 'data')} takes "
        f"{whose} bounds from the data; give {give} public bounds"
    )


@dataclass(frozen=True)
class ColumnForecast:
    """One protected column's noise, from public values only.

    Attributes
    ----------
    column : str
        The protected column's name.
    epsilon : float
        The column's share of ε (its ledger entry's).
    noise_scale : float
        The ledger entry's noise scale, in the data's units (the exponential mechanism's
        for a categorical column, a replacement probability for randomized response).
    noise_sd : float or None
        The numeric noise's standard deviation, in the data's units (on the transformed
        scale for a column with a transform, as the noise scale).
    width : float or None
        The public width ``upper - lower`` (``T(upper) - T(lower)`` for a column with a
        transform ``T``).
    on_bound : float or None
        The forecast share of released values on a bound if the values before the noise
        were spread evenly over the bounds (docs/forecast.md); ``None`` where nothing is
        clamped to bounds.
    released : str
        What one noise draw covers.

    Examples
    --------
    >>> import dpfast
    >>> column = dpfast.forecast("laplace_dp", 1000, epsilon=1.0,
    ...                          bounds={"age": (0, 100)}).columns[0]
    >>> column.column, column.epsilon, column.width, round(column.sd_share, 3)
    ('age', 1.0, 100.0, 1.414)
    """

    column: str
    epsilon: float
    noise_scale: float
    noise_sd: float | None = None
    width: float | None = None
    on_bound: float | None = None
    released: str = ""

    @property
    def sd_share(self) -> float | None:
        """The noise's standard deviation as a share of the public width."""
        if self.noise_sd is None or not self.width:
            return None
        return self.noise_sd / self.width


def numeric_forecast(
    entry: LedgerEntry, grid: Grid, steps: int, released: str, integer: bool = False
) -> ColumnForecast:
    """Return a numeric column's forecast from its ledger entry, grid and scale in steps.

    ``entry``, ``grid`` and ``steps`` are the ones the release draws with; an ``integer``
    column is rounded after the noise, which puts the values within half a unit of an
    integer bound on it too (:func:`bound_steps`).
    """
    low, high = bound_steps(grid, integer)
    return ColumnForecast(
        column=entry.columns[0],
        epsilon=entry.epsilon,
        noise_scale=entry.noise_scale,
        noise_sd=noise.discrete_laplace_sd(steps) * grid.gamma,
        width=grid.width,  # on the transformed scale for a transformed column
        on_bound=noise.on_bound_share(steps, grid.d_int, low, high),
        released=released,
    )


def _released(grid: Grid, integer: bool, y: int) -> float:
    """Return the value grid value ``y`` is released as (the kernels' ``grid_value``)."""
    return grid.value(y, integer)


@functools.lru_cache(maxsize=256)
def bound_steps(grid: Grid, integer: bool) -> tuple[int | None, int | None]:
    """Return how many grid steps from each end are released as that bound.

    ``(a, b)``: the grid values ``0 .. a`` are released as the lower bound and ``D - b ..
    D`` as the upper one (``None``: none is). A float column without a transform releases
    only its end points there (``(0, 0)``); an integer column rounds after the noise, so
    every grid value that rounds onto an integer bound counts; a transformed column's
    mapping back, divided by the noise's mean factor, can fall below the lower bound near
    it (``log``: every grid value under the correction ``shift``), and those count too.
    Found by bisection: the released value grows with the grid value. A function of the
    (frozen) grid alone, kept for the last grids asked: a forecast asks it for every ``k``
    it tries, and a release asks it again.
    """
    d = grid.d_int
    if (not integer and grid.transform is None) or d == 0:
        return 0, 0
    low: int | None = None
    if _released(grid, integer, 0) <= grid.lower:
        lo, hi = 0, d  # released(lo) on the bound; the answer is in [lo, hi]
        while lo < hi:
            middle = (lo + hi + 1) // 2
            lo, hi = (
                (middle, hi) if _released(grid, integer, middle) <= grid.lower else (lo, middle - 1)
            )
        low = lo
    high: int | None = None
    if _released(grid, integer, d) >= grid.upper:
        lo, hi = 0, d  # the first grid value released as the upper bound is in [lo, hi]
        while lo < hi:
            middle = (lo + hi) // 2
            lo, hi = (
                (lo, middle) if _released(grid, integer, middle) >= grid.upper else (middle + 1, hi)
            )
        high = d - lo
    return low, high


def choice_forecast(entry: LedgerEntry, released: str) -> ColumnForecast:
    """Return a categorical column's forecast from its ledger entry: its ε and scale, no bounds."""
    return ColumnForecast(entry.columns[0], entry.epsilon, entry.noise_scale, released=released)


def smallest_k(
    worst: Callable[[int], float], n_rows: int, threshold: float = THRESHOLD
) -> int | None:
    """Return the smallest ``k`` in ``[1, n_rows]`` whose worst forecast is under ``threshold``.

    ``worst(k)`` is the largest forecast share of the columns at ``k`` (an error: the plan
    cannot be made at that ``k``); it falls as ``k`` grows, so a bisection finds the edge.
    ``None`` when even ``k = n_rows`` leaves a column at the threshold or above.
    """

    def under(k: int) -> bool:
        try:
            return worst(k) < threshold
        except DPFastError:
            return False

    if n_rows < 1 or not under(n_rows):
        return None
    return bisect_edge(0, n_rows, under)[1]  # low = 0 is never asked


def bisect_edge(low: int, high: int, right: Callable[[int], bool]) -> tuple[int, int]:
    """Return ``(m - 1, m)`` for the smallest ``m`` in ``(low, high]`` where ``right`` holds.

    ``right`` must be false up to an edge and true from it on, and true at ``high``; it is
    asked only strictly between ``low`` and ``high`` (``low`` is taken to be left of the
    edge). Where ``high - low <= 1``, nothing is asked and ``(low, high)`` comes back.
    """
    while high - low > 1:
        middle = (low + high) // 2
        if right(middle):
            high = middle
        else:
            low = middle
    return low, high


def advise_k(
    worst: Callable[[int], float], n_rows: int, m: int, epsilon: float, groups: str
) -> tuple[int | None, str]:
    """Return the smallest ``k`` under the threshold and the sentence that gives it.

    ``groups`` names a group of ``k`` rows (``"rank group"``, ``"cluster"``); ``m`` is the
    number of protected columns, which share ``epsilon``. When no ``k`` is enough the
    sentence says why.
    """
    k = smallest_k(worst, n_rows)
    if k is not None:
        count = n_rows // k
        return k, (
            f"smallest {option('k')} that brings every column under {THRESHOLD:.0%}: {k} "
            f"({count:,} {groups}{'s' if count != 1 else ''} of {k:,} rows or more)"
        )
    try:
        share = f"{worst(n_rows):.0%}"
    except DPFastError:
        share = "every value"
    return None, (
        f"no {option('k')} brings every column under {THRESHOLD:.0%}: even "
        f"{option('k', n_rows)} (one {groups} of all {n_rows:,} rows) leaves {share} on a "
        f"bound, because the {m} protected column(s) share {option('epsilon')} = "
        f"{epsilon:g} ({epsilon / m:.3g} each); protect fewer columns or raise "
        f"{option('epsilon')}"
    )


def _assumption(k: bool) -> str:
    """Say what the share on a bound is: a forecast, and from what."""
    return (
        "the share of released values on a bound if the values were spread evenly over "
        f"their bounds: a forecast from public values only (the bounds, epsilon"
        f"{', k' if k else ''} and the row count), not a measurement of the data"
    )


@dataclass(frozen=True)
class Forecast:
    """What a release will do to its columns, from public values only; nothing spent.

    Attributes
    ----------
    method : str
        The release method forecast, e.g. ``"ir_dp"``.
    epsilon : float or None
        The ε the release spends (``None`` for a method without one).
    n_rows : int or None
        The row count used (``None`` where the guarantee keeps it private: DiffGen).
    columns : tuple of ColumnForecast
        Per protected column.
    k : int or None
        The group size asked for, for a method with one.
    suggested_k : int or None
        The smallest ``k`` whose forecast puts less than :data:`THRESHOLD` of every
        column's values on a bound (``None``: no ``k`` does, or no ``k`` to choose).
    k_advice : str or None
        The sentence that gives it, or says why no ``k`` does.
    notes : tuple of str
        What is and is not forecast, in plain words.
    budget_note : str or None
        What the ``budget`` given says of the release, read without reserving anything:
        that it fits (and what is left), or why the release would be refused (``None``:
        no budget given).
    threshold : float
        The share on a bound from which a column is affected (:attr:`affected`) and the
        release warns: :data:`THRESHOLD`, 10 %.
    from_data : DataForecast or None
        PRIVATE, when the data was read (:func:`dpfast.forecast` given a table): the
        expected outcome of this release on these values
        (:class:`~dpfast._release.data_forecast.DataForecast`, docs/forecast.md#from-the-data).
        Then :attr:`warning`, ``suggested_k`` and ``k_advice`` are its own.
    public_advice : tuple or None
        When the data was read, the ``(suggested_k, k_advice)`` from public values only,
        which :attr:`public_warning` names.

    Examples
    --------
    >>> import dpfast
    >>> expected = dpfast.forecast("ir_dp", 1000, k=50, epsilon=1.0, bounds={"age": (0, 100)})
    >>> expected.method, expected.epsilon, expected.k, expected.suggested_k
    ('ir_dp', 1.0, 50, 10)
    >>> expected.affected, expected.warning
    ((), None)
    """

    method: str
    epsilon: float | None
    n_rows: int | None
    columns: tuple[ColumnForecast, ...] = ()
    k: int | None = None
    suggested_k: int | None = None
    k_advice: str | None = None
    notes: tuple[str, ...] = ()
    budget_note: str | None = None
    threshold: float = field(default=THRESHOLD)
    from_data: DataForecastLike | None = None
    public_advice: tuple[int | None, str | None] | None = None

    @property
    def affected(self) -> tuple[ColumnForecast, ...]:
        """The columns whose forecast share on a bound is at the threshold or above."""
        return tuple(
            c for c in self.columns if c.on_bound is not None and c.on_bound >= self.threshold
        )

    @property
    def warning(self) -> str | None:
        """The line a release warns with: the forecast from the data's when the data was read.

        That one is PRIVATE (:attr:`from_data`); :attr:`public_warning` is the public one.
        """
        if self.from_data is not None:
            return self.from_data.warning
        return self.public_warning

    @property
    def public_warning(self) -> str | None:
        """One line naming every affected column, from public values only, or ``None``.

        The same for any data of this shape: the public report holds it.
        """
        affected = self.affected
        if not affected:
            return None
        shares: dict[str, list[str]] = {}
        for c in affected:  # columns of one rounded share together, in the columns' order
            shares.setdefault(f"{c.on_bound:.0%}", []).append(quoted(c.column))
        order = sorted(shares, key=lambda share: -float(share[:-1]))
        named = "; ".join(f"{share} in {', '.join(shares[share])}" for share in order)
        return (
            f"the noise would put {self.threshold:.0%} or more of the released values of "
            f"{len(affected)} column(s) on a bound if the values were spread evenly over "
            f"their bounds: {named} (forecast from public values only). {self._levers()}"
        )

    def _levers(self) -> str:
        """Say what lowers the noise, from public values only (the public advice)."""
        fewer = f"protect fewer columns (each gets a share of {option('epsilon')})"
        public = self.public_advice if self.from_data is not None else None
        suggested, advice = public or (self.suggested_k, self.k_advice)
        if suggested is not None:
            return (
                f"Raise {option('k')} to {suggested} or more, {fewer}, or raise "
                f"{option('epsilon')}."
            )
        if self.k is not None and advice is not None:
            return f"No {option('k')} is enough: {fewer} or raise {option('epsilon')}."
        return f"{fewer[0].upper()}{fewer[1:]} or raise {option('epsilon')}."

    def with_data(self, found: DataForecastLike | None) -> Forecast:
        """Return this forecast with its forecast from the data ``found`` (if any).

        Its suggested ``k`` and advice become the data's; the public ones are kept as
        :attr:`public_advice`, which :attr:`public_warning` names.
        """
        if found is None:
            return self
        if self.k is None:
            return replace(self, from_data=found)
        return replace(
            self,
            from_data=found,
            suggested_k=found.suggested_k,
            k_advice=found.k_advice,
            public_advice=(self.suggested_k, self.k_advice),
        )

    def refuse_above(self, limit: float) -> None:
        """Refuse a release (``max_on_bound``) whose forecast exceeds ``limit`` in a column.

        The forecast from the data's share pushed onto a bound when the data was read,
        else the public share on a bound if the values were spread evenly.
        """
        if self.from_data is not None:
            self.from_data.refuse_above(limit)
            return
        over = [(c.column, c.on_bound or 0.0) for c in self.columns if (c.on_bound or 0.0) > limit]
        source = "from public values only (the values taken as spread evenly)"
        refuse_over(over, limit, self.suggested_k, source)

    def to_dict(self) -> dict[str, Any]:
        """Return the forecast as plain JSON-serialisable Python objects.

        ``from_data`` (PRIVATE) holds the forecast from the data, when the data was read.
        """
        out = asdict(self)
        out["columns"] = [{**asdict(c), "sd_share": c.sd_share} for c in self.columns]
        out["notes"] = list(self.notes)
        out["warning"] = self.warning
        out["public_warning"] = self.public_warning
        out["from_data"] = None if self.from_data is None else self.from_data.to_dict()
        return out

    def __str__(self) -> str:
        lines = [
            f"forecast of {self.method} from public values only: nothing spent, nothing written",
            self._header(),
        ]
        if self.columns:
            lines.extend(_table(self.columns))
            if any(c.on_bound is not None for c in self.columns):
                lines.append(f"* on a bound: {_assumption(self.k is not None)}")
        if self.from_data is None and self.k_advice is not None:
            lines.append(self.k_advice)
        lines.extend(self.notes)
        if self.budget_note is not None:
            lines.append(f"budget: {self.budget_note}")
        if self.from_data is not None:
            lines.extend(self.from_data.lines())
        elif self.warning is not None:
            lines.append(f"warning: {self.warning}")
        return "\n".join(lines)

    def _header(self) -> str:
        parts = [] if self.n_rows is None else [f"{self.n_rows:,} rows"]
        if self.k is not None:
            parts.append(option("k", self.k))
        if self.epsilon is not None:
            parts.append(option("epsilon", float(f"{self.epsilon:.6g}")))
        return ", ".join(parts)


class DataForecastLike(Protocol):
    """What :class:`Forecast` reads of its forecast from the data (:class:`DataForecast`)."""

    @property
    def suggested_k(self) -> int | None: ...

    @property
    def k_advice(self) -> str | None: ...

    @property
    def warning(self) -> str | None: ...

    def refuse_above(self, limit: float) -> None: ...

    def lines(self) -> list[str]: ...

    def to_dict(self) -> dict[str, Any]: ...


def refuse_over(
    over: Sequence[tuple[str, float]], limit: float, suggested_k: int | None, source: str
) -> None:
    """Raise the refusal of ``max_on_bound``: the ``(column, share)`` over ``limit``, the levers.

    ``source`` says which forecast found them. Nothing when ``over`` is empty.
    """
    if not over:
        return
    named = ", ".join(f"{quoted(column)} {share:.1%}" for column, share in over)
    raise_k = (
        f"raise {option('k')} to {suggested_k} or more, "
        if suggested_k is not None
        else f"raise {option('k')} (where the method has one), "
    )
    raise DPFastValueError(
        f"the forecast {source} puts more than {limit:.1%} of the values of {len(over)} "
        f"column(s) onto a bound, the most {option('max_on_bound')} allows: {named}; "
        f"nothing was reserved or written. To release, {raise_k}protect fewer columns, "
        f"raise {option('epsilon')}, narrow the bounds, or raise {option('max_on_bound')}"
    )


def _number(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if percent else f"{value:.4g}"


def _table(columns: Sequence[ColumnForecast]) -> list[str]:
    """Return the rows of the per-column table, aligned."""
    head = ("column", "epsilon", "noise scale", "noise sd", "sd / width", "on a bound*")
    rows = [head] + [
        (
            c.column,
            _number(c.epsilon),
            _number(c.noise_scale),
            _number(c.noise_sd),
            _number(c.sd_share, percent=True),
            _number(c.on_bound, percent=True),
        )
        for c in columns
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
