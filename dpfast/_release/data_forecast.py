"""A release's forecast from the data: PRIVATE, computed from the values it reads.

The forecast from public values (:mod:`dpfast._release.forecast`) takes the values as
spread evenly over their bounds. When the data is read (``dpfast.forecast`` given a table,
the command line's ``--dry-run`` on a table, a release with ``max_on_bound``), each method
also computes the expected outcome of this release on these values, exactly where the
mechanism allows and without drawing noise (docs/forecast.md#from-the-data): per numeric
column the expected share of values pushed onto a bound by the noise, and the bias and
standard error of the column's mean and of one released value
(:mod:`dpfast._release.expected`); per categorical column the expected total-variation
distance between its distribution and the release's (:mod:`dpfast._release.choices`).

It is computed from the data without noise, so it is private: it goes to the data
holder's terminal and the private report, never to the public report; and a parameter
chosen from it (a ``k``, an ε, a bound) is chosen from the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dpfast._release.expected import NumericOutcome
from dpfast._release.forecast import THRESHOLD, Forecast, refuse_over, smallest_k
from dpfast._validation import in_cli, option, quoted

__all__ = [
    "PRIVATE_HEADER",
    "ColumnDataForecast",
    "DataForecast",
    "WeightsSuggestion",
    "advise_k_from_data",
    "current_shares",
    "forecast_check",
    "suggest_weights",
    "transformed_note",
]

#: How the forecast from the data introduces itself, wherever it is shown.
PRIVATE_HEADER = (
    "forecast from the data (PRIVATE: computed from the values of this table, without "
    "noise; not for publication): the expected outcome of this release on these values, "
    "nothing drawn, nothing spent"
)

#: What a parameter chosen from it is.
CHOSEN_FROM_DATA = (
    "a k, epsilon or bound tuned on this forecast is chosen from the data, which the "
    "release's guarantee does not cover (docs/forecast.md#private)"
)


@dataclass(frozen=True)
class ColumnDataForecast:
    """One protected column's expected outcome on the data (docs/forecast.md#from-the-data).

    Attributes
    ----------
    column : str
        The column's name.
    pushed : float or None
        A numeric column's expected share of rows pushed onto a bound by the noise (a
        row on a bound before the noise is not pushed: docs/forecast.md#pushed).
    before : float or None
        Its share of rows on a bound before the noise.
    clamped : int or None
        Its input values outside the public bounds (clamped before the release).
    mean : float or None
        Its mean before the noise (its values clamped to the bounds, on the grid).
    mean_bias, mean_se : float or None
        The released column mean's expected bias from ``mean``, and its standard error.
    value_bias, value_se : float or None
        One released value's (a typical row's): the mean over rows of the absolute bias
        of its group's released value from the group's mean, and the root mean square of
        its standard error.
    tvd : float or None
        A categorical column's expected total-variation distance between its
        distribution and the release's.
    exact : bool
        ``False`` where an approximation was used (an integer column's rounding under
        wide noise; a normal law for a category's count).
    pushed_upper : float or None
        The part of ``pushed`` pushed onto the upper bound.
    relative_error : float or None
        The root mean square error the noise adds to the released column mean, relative
        to the column's mean absolute value (docs/forecast.md#weights); ``None`` for a
        categorical column or a column of zeros.
    """

    column: str
    pushed: float | None = None
    before: float | None = None
    clamped: int | None = None
    mean: float | None = None
    mean_bias: float | None = None
    mean_se: float | None = None
    value_bias: float | None = None
    value_se: float | None = None
    tvd: float | None = None
    exact: bool = True
    pushed_upper: float | None = None
    relative_error: float | None = None

    @classmethod
    def numeric(cls, name: Any, outcome: NumericOutcome, clamped: int) -> ColumnDataForecast:
        """Return a numeric column's forecast from its :class:`NumericOutcome`."""
        return cls(
            str(name),
            pushed=outcome.pushed,
            before=outcome.before,
            clamped=int(clamped),
            mean=outcome.mean,
            mean_bias=outcome.mean_bias,
            mean_se=outcome.mean_se,
            value_bias=outcome.value_bias,
            value_se=outcome.value_se,
            exact=outcome.exact,
            pushed_upper=outcome.pushed_upper,
            relative_error=outcome.relative_error,
        )

    @property
    def share(self) -> float:
        """The figure compared with the threshold: ``pushed``, or ``tvd`` (categorical)."""
        if self.pushed is not None:
            return self.pushed
        return self.tvd or 0.0


#: The spread of the numeric columns' relative errors (largest over smallest) from which
#: the forecast from the data suggests epsilon weights, and the largest relative error
#: under which it does not (docs/forecast.md#weights).
WEIGHTS_SPREAD = 2.0
WEIGHTS_FLOOR = 0.01


@dataclass(frozen=True)
class WeightsSuggestion:
    """PRIVATE: ε weights that equalise the numeric columns' relative errors.

    Computed from the data (docs/forecast.md#weights): a weight chosen from it is chosen
    from the data.

    Attributes
    ----------
    weights : dict of str to float
        Every protected column's suggested weight, the smallest 1 (three significant
        digits); a categorical column keeps its share of ε.
    errors : dict of str to float
        Each numeric column's relative error at the split asked for
        (:attr:`ColumnDataForecast.relative_error`).
    expected : float
        The relative error every numeric column is expected to have with ``weights``,
        taking each one's error as inversely proportional to its ε.
    """

    weights: dict[str, float]
    errors: dict[str, float]
    expected: float

    def line(self) -> str:
        """Say what the weights do and how to pass them (the caller's spelling)."""
        errors = ", ".join(f"{e:.1%} in {quoted(c)}" for c, e in self.errors.items())
        if in_cli():
            given = ", ".join(f"{w:g} for {quoted(c)}" for c, w in self.weights.items())
            how = f'set each column\'s "epsilon_weight" in the schema file: {given}'
        else:
            given = ", ".join(f"{c!r}: {w:g}" for c, w in self.weights.items())
            how = f"pass epsilon_weights={{{given}}}"
        return (
            f"suggested epsilon weights (PRIVATE: chosen from the data): the noise's "
            f"relative error of the column mean is {errors}; to bring every numeric column "
            f"to about {self.expected:.1%}, {how} (weight proportional to relative error "
            "times share of epsilon: docs/forecast.md#weights)"
        )


def suggest_weights(
    columns: Sequence[ColumnDataForecast], shares: Mapping[str, float]
) -> WeightsSuggestion | None:
    """Return the ε weights that equalise the numeric columns' relative errors, if worth it.

    ``shares`` are every protected column's share of ε now (summing to 1). A numeric
    column's error is taken as inversely proportional to its ε, ``e_i' = e_i s_i / s_i'``;
    the shares that make them equal within the numeric columns' total ``S`` are ``s_i' =
    S e_i s_i / Σ_j e_j s_j``, each then at ``Σ_j e_j s_j / S`` (no more than the largest
    now). ``None`` with fewer than two numeric columns, or when the largest relative error
    is under :data:`WEIGHTS_FLOOR` or under :data:`WEIGHTS_SPREAD` times the smallest.

    Examples
    --------
    >>> columns = [ColumnDataForecast("income", relative_error=0.3),
    ...            ColumnDataForecast("age", relative_error=0.01)]
    >>> found = suggest_weights(columns, {"income": 0.5, "age": 0.5})
    >>> found.weights, round(found.expected, 3)
    ({'income': 30.0, 'age': 1.0}, 0.155)
    """
    errors = {c.column: c.relative_error for c in columns if c.relative_error is not None}
    if len(errors) < 2:
        return None
    worst, best = max(errors.values()), min(errors.values())
    if worst < WEIGHTS_FLOOR or worst < WEIGHTS_SPREAD * best:
        return None
    total = sum(shares[c] for c in errors)
    scores = {c: e * shares[c] for c, e in errors.items()}
    new = {c: total * scores[c] / sum(scores.values()) if c in errors else w
           for c, w in shares.items()}  # fmt: skip
    smallest = min(new.values())
    weights = {c: float(f"{w / smallest:.3g}") for c, w in new.items()}
    return WeightsSuggestion(weights, errors, sum(scores.values()) / total)


def current_shares(names: Sequence[Any], weights: Mapping[Any, Any] | None) -> dict[str, float]:
    """Return each protected column's share of ε: its normalised weight, or ``1 / m``."""
    if weights is None:
        return {str(c): 1.0 / len(names) for c in names}
    return {str(c): float(weights[c]) for c in names}


#: What the forecast from the data says of the transformed columns it read.
TRANSFORMED_NOTE = (
    "transformed column(s) {names}: released values through the grid's mapping back, "
    "their moments summed over the noise's whole distribution, the groups' means read in "
    "the data's units (docs/forecast.md#transformed)"
)


def transformed_note(names: Sequence[Any]) -> tuple[str, ...]:
    """Return the note on the transformed columns ``names`` (none without any)."""
    if not names:
        return ()
    return (TRANSFORMED_NOTE.format(names=", ".join(quoted(c) for c in names)),)


def advise_k_from_data(
    worst: Callable[[int], float], n_rows: int, groups: str, threshold: float = THRESHOLD
) -> tuple[int | None, str]:
    """Return the smallest ``k`` whose forecast from the data is under ``threshold``, and why.

    ``worst(k)`` is the largest expected share pushed onto a bound over the numeric
    columns at ``k``, from the data; it is taken to fall as ``k`` grows (as the noise
    scale does), and a bisection finds the edge.
    """
    k = smallest_k(worst, n_rows, threshold)
    if k is not None:
        count = n_rows // k
        return k, (
            f"smallest {option('k')} whose forecast from the data puts under "
            f"{threshold:.0%} of every numeric column's values onto a bound: {k} ({count:,} "
            f"{groups}{'s' if count != 1 else ''} of {k:,} rows or more; PRIVATE: chosen "
            "from the data)"
        )
    return None, (
        f"no {option('k')} brings every numeric column's forecast from the data under "
        f"{threshold:.0%} pushed onto a bound: protect fewer columns, raise "
        f"{option('epsilon')}, or narrow the bounds"
    )


@dataclass(frozen=True)
class DataForecast:
    """PRIVATE: what a release is expected to do to these values (module docstring).

    Attributes
    ----------
    method : str
        The release method forecast.
    n_rows : int
        The rows read.
    columns : tuple of ColumnDataForecast
        Per protected column.
    k : int or None
        The group size asked for, for a method with one.
    suggested_k : int or None
        The smallest ``k`` whose forecast from the data puts under :data:`THRESHOLD` of
        every numeric column's values onto a bound (chosen from the data).
    k_advice : str or None
        The sentence that gives it, or says why no ``k`` does.
    notes : tuple of str
        How it was computed.
    threshold : float
        The share pushed onto a bound (or the total-variation distance of a categorical
        column) from which a column is affected and the release warns: 10 %.
    weights : WeightsSuggestion or None
        The ε weights suggested where the numeric columns' relative errors differ
        (:func:`suggest_weights`); ``suggested_weights`` holds them alone.
    """

    method: str
    n_rows: int
    columns: tuple[ColumnDataForecast, ...] = ()
    k: int | None = None
    suggested_k: int | None = None
    k_advice: str | None = None
    notes: tuple[str, ...] = ()
    threshold: float = field(default=THRESHOLD)
    weights: WeightsSuggestion | None = None

    @property
    def suggested_weights(self) -> dict[str, float] | None:
        """The ε weights that equalise the numeric columns' errors (PRIVATE), or ``None``."""
        return None if self.weights is None else dict(self.weights.weights)

    @property
    def affected(self) -> tuple[ColumnDataForecast, ...]:
        """The columns at the threshold or above: pushed onto a bound, or moved (TVD)."""
        return tuple(c for c in self.columns if c.share >= self.threshold)

    def above(self, limit: float) -> tuple[ColumnDataForecast, ...]:
        """Return the numeric columns whose expected share pushed onto a bound exceeds ``limit``."""
        return tuple(c for c in self.columns if c.pushed is not None and c.pushed > limit)

    def pushed(self) -> dict[str, float]:
        """Return each numeric column's expected share pushed onto a bound."""
        return {c.column: c.pushed for c in self.columns if c.pushed is not None}

    @property
    def warning(self) -> str | None:
        """One line naming every affected column (PRIVATE), or ``None``."""
        numeric = [c for c in self.affected if c.pushed is not None]
        moved = [c for c in self.affected if c.pushed is None]
        parts = []
        if numeric:
            named = ", ".join(f"{c.pushed:.0%} in {quoted(c.column)}" for c in numeric)
            parts.append(
                f"the noise is expected to push {self.threshold:.0%} or more of the values of "
                f"{len(numeric)} numeric column(s) onto a bound: {named}"
            )
        if moved:
            named = ", ".join(f"{c.tvd:.2f} in {quoted(c.column)}" for c in moved)
            parts.append(
                f"the release is expected to move the distribution of {len(moved)} "
                f"categorical column(s) by a total-variation distance of "
                f"{self.threshold:.2f} or more: {named}"
            )
        if not parts:
            return None
        return f"{'; '.join(parts)} (forecast from the data, PRIVATE). {self.levers()}"

    def levers(self) -> str:
        """Say what lowers the noise's effect: the suggested ``k``, fewer columns, more ε."""
        if all(c.pushed is None for c in self.columns):  # categorical columns only
            return f"Raise {option('epsilon')}" + (
                " or protect fewer columns." if len(self.columns) > 1 or self.k else "."
            )
        fewer = f"protect fewer columns (each gets a share of {option('epsilon')})"
        if self.suggested_k is not None and (self.k is None or self.suggested_k > self.k):
            return (
                f"Raise {option('k')} to {self.suggested_k} or more, {fewer}, raise "
                f"{option('epsilon')}, or narrow the bounds."
            )
        return f"{fewer[0].upper()}{fewer[1:]}, raise {option('epsilon')}, or narrow the bounds."

    def to_dict(self) -> dict[str, Any]:
        """Return the forecast as plain JSON-serialisable Python objects (PRIVATE)."""
        out = asdict(self)
        out["report"] = "PRIVATE: forecast from the data, not for publication"
        out["columns"] = [asdict(c) for c in self.columns]
        out["notes"] = list(self.notes)
        out["suggested_weights"] = self.suggested_weights
        out["warning"] = self.warning
        return out

    def lines(self) -> list[str]:
        """Return the lines ``str(forecast)`` and ``--dry-run`` print."""
        lines = [PRIVATE_HEADER]
        if self.columns:
            lines.extend(_table(self.columns))
        if any(c.pushed is not None for c in self.columns):
            lines.append(
                "* pushed: the expected share of values the noise pushes onto a bound; those "
                "on a bound before the noise (their group's mean clamped and rounded as "
                "released) are counted in 'before' and not as pushed"
            )
        if any(not c.exact for c in self.columns):
            lines.append("~ approximated where marked (docs/forecast.md#from-the-data)")
        if self.k_advice is not None:
            lines.append(self.k_advice)
        if self.weights is not None:
            lines.append(self.weights.line())
        lines.extend(self.notes)
        lines.append(f"not for publication: {CHOSEN_FROM_DATA}")
        if self.warning is not None:
            lines.append(f"warning: {self.warning}")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def refuse_above(self, limit: float) -> None:
        """Refuse the release when a numeric column's share pushed exceeds ``limit``."""
        over = [(c.column, c.pushed or 0.0) for c in self.above(limit)]
        refuse_over(over, limit, self.suggested_k, "from the data (PRIVATE)")


def forecast_check(private: Any, forecast: Forecast, data: DataForecast | None) -> dict[str, Any]:
    """Return the private report's ``forecast``: the share pushed, forecast and measured.

    ``private`` is the release's :class:`~dpfast.accounting.PrivateReport` (its
    ``pushed_onto_bound`` counted); the forecast compared is ``data``, the forecast from
    the data, when the release read it, else the public ``forecast``'s share on a bound
    if the values were spread evenly. ``line`` is what the command line prints.
    """
    rows = max(int(private.input_rows), 1)
    measured = {name: count / rows for name, count in private.pushed_onto_bound.items()}
    if data is not None:
        predicted: dict[str, float | None] = dict(data.pushed())
        what = "the forecast from the data"
    else:
        predicted = {c.column: c.on_bound for c in forecast.columns}
        what = (
            "the public forecast (on a bound if the values were spread evenly; the forecast "
            "from the data is in --dry-run and dpfast.forecast)"
        )
    columns = {
        name: {"forecast": predicted.get(name), "measured": share}
        for name, share in measured.items()
    }
    shown = ", ".join(
        f"{name} {c['measured']:.1%} (forecast {_number(c['forecast'], percent=True)})"
        for name, c in list(columns.items())[:10]
    )
    more = ", ..." if len(columns) > 10 else ""
    line = f"pushed onto a bound by the noise, measured (PRIVATE) against {what}: {shown}{more}"
    out: dict[str, Any] = {"from_data": data is not None, "columns": columns, "line": line}
    if data is not None:
        out["data_forecast"] = data.to_dict()
    return out


def _number(value: float | None, percent: bool = False, signed: bool = False) -> str:
    if value is None:
        return "-"
    if percent:
        return f"{value:.1%}"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def _table(columns: Sequence[ColumnDataForecast]) -> list[str]:
    """Return the rows of the per-column table, aligned."""
    head = (
        "column",
        "pushed*",
        "before",
        "clamped",
        "mean",
        "mean bias",
        "mean se",
        "value bias",
        "value se",
        "tvd",
    )
    rows = [head] + [
        (
            c.column + ("" if c.exact else " ~"),
            _number(c.pushed, percent=True),
            _number(c.before, percent=True),
            "-" if c.clamped is None else f"{c.clamped:,}",
            _number(c.mean),
            _number(c.mean_bias, signed=True),
            _number(c.mean_se),
            _number(c.value_bias),
            _number(c.value_se),
            "-" if c.tvd is None else f"{c.tvd:.3f}",
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
