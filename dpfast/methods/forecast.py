"""``forecast``: what a release will do to its columns, from public values only.

Every method's forecast is its own plan made from the row count, the column names and
its arguments (docs/forecast.md); this module finds the method, binds the arguments as
the release function binds them, and reads the row count and the names.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from dpfast._release import (
    DataForecast,
    Engine,
    Forecast,
    PublicTable,
    ReleaseOptions,
    TableView,
    method_call,
    open_run,
    options_class,
    release_options,
)
from dpfast._validation import (
    check_columns,
    check_int,
    check_k,
    check_k_anonymity,
    check_retention,
    did_you_mean,
    quoted,
)
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.methods.diffgen import diffgen, diffgen_forecast
from dpfast.methods.individual_ranking import individual_ranking
from dpfast.methods.ir_dp import ir_dp, ir_dp_data_forecast, ir_dp_forecast
from dpfast.methods.k_noise import k_noise
from dpfast.methods.k_pram import k_pram
from dpfast.methods.laplace_dp import laplace_dp, laplace_dp_forecast
from dpfast.methods.mdav import mdav
from dpfast.methods.mdav_dp import mdav_dp, mdav_dp_data_forecast, mdav_dp_forecast
from dpfast.methods.randomized_response import (
    randomized_response,
    randomized_response_data_forecast,
    randomized_response_forecast,
)
from dpfast.partitions.ranking import RankGroups
from dpfast.steps import value_dtype

__all__ = ["forecast", "forecast_from_data"]


def _no_epsilon(method: str, table: TableView, k: int, a: Mapping[str, Any], does: str) -> Forecast:
    """Return the forecast of a method with no ε: what it does, and that nothing is forecast."""
    check_columns(a["columns"], table.names)
    notes = (f"NOT differential privacy: no epsilon, so no noise scale to forecast: {does}",)
    return Forecast(method, None, table.n_rows, k=k, notes=notes)


def _individual_ranking(table: TableView, a: Mapping[str, Any]) -> Forecast:
    n = table.n_rows
    k = check_k_anonymity(a["k"], n, "individual ranking")
    layout = RankGroups(n, k, a["remainder"])
    extra = f", the {layout.remainder} one holding {layout.r} more" if layout.r else ""
    does = (
        f"each value becomes the mean of its rank group of {k} or more rows ({n // k:,} "
        f"groups per column{extra}), with no noise. Nothing is forecast: no value is pushed onto a "
        "bound, and the group means depend on the data"
    )
    return _no_epsilon("individual_ranking", table, k, a, does)


def _mdav(table: TableView, a: Mapping[str, Any]) -> Forecast:
    n = table.n_rows
    k = check_k_anonymity(a["k"], n, "mdav")
    does = (
        f"clusters of {k} to {2 * k - 1} similar rows (at most {n // k:,}) share their means "
        "on the chosen columns (k-anonymity), with no noise. Nothing is forecast: no value "
        "is pushed onto a bound, and the clusters depend on the data; for differential "
        f"privacy use {method_call('mdav_dp')}"
    )
    return _no_epsilon("mdav", table, k, a, does)


def _k_noise(table: TableView, a: Mapping[str, Any]) -> Forecast:
    k = check_k(a["k"], table.n_rows)
    does = (
        "each value gets uniform noise on [-delta, delta], delta the smallest half-width "
        f"that leaves at least {k} values within 2 delta of every point of the column's "
        "range; values are not clamped. Not forecast: delta depends on the data (the "
        "private report gives it after the release)"
    )
    return _no_epsilon("k_noise", table, k, a, does)


def _k_pram(table: TableView, a: Mapping[str, Any]) -> Forecast:
    k = check_k_anonymity(a["k"], table.n_rows, "k-PRAM")
    retention = check_retention(a["retention"])
    does = (
        f"each value is kept with probability {retention:g}, else replaced by the value of "
        f"a random record of its interval (equal-width intervals of {k} or more values): "
        f"at most {1 - retention:.0%} of the values change, none is clamped. Not forecast: "
        "the intervals depend on the data"
    )
    return _no_epsilon("k_pram", table, k, a, does)


_Public = Callable[[TableView, Mapping[str, Any]], Forecast]
_FromData = Callable[[Engine, Mapping[str, Any]], DataForecast]

#: Per method: the release, its forecast from public values, its forecast from the data.
_METHODS: dict[str, tuple[Callable[..., Any], _Public, _FromData | None]] = {
    "ir_dp": (ir_dp, ir_dp_forecast, ir_dp_data_forecast),
    "laplace_dp": (laplace_dp, laplace_dp_forecast, None),
    "mdav_dp": (mdav_dp, mdav_dp_forecast, mdav_dp_data_forecast),
    "randomized_response": (
        randomized_response,
        randomized_response_forecast,
        randomized_response_data_forecast,
    ),
    "diffgen": (diffgen, diffgen_forecast, None),
    "individual_ranking": (individual_ranking, _individual_ranking, None),
    "mdav": (mdav, _mdav, None),
    "k_noise": (k_noise, _k_noise, None),
    "k_pram": (k_pram, _k_pram, None),
}


def forecast(method: str | Callable[..., Any], data: Any, /, **arguments: Any) -> Forecast:
    """Forecast a release: from public values, and from the data when given a table.

    The dry run of a release: ``forecast("ir_dp", data, **arguments)`` takes the arguments
    ``dpfast.ir_dp(data, **arguments)`` takes, checks them as the release does, and makes
    the release's own plan (the same ε split, sensitivities and noise scales). It
    reserves no budget, spends no ε and writes nothing (docs/forecast.md).

    From public values (the row count, the column names and the arguments), per protected
    column: the ε share, the noise scale, the noise's standard deviation as a share of the
    public width, and the share of released values on a bound if the values were spread
    evenly over the bounds. Given a table, ``ir_dp``, ``mdav_dp`` and
    ``randomized_response`` also read its values for the forecast from the data,
    ``from_data`` (PRIVATE, docs/forecast.md#from-the-data): the expected outcome of this
    release on these values, without drawing noise (the share the noise pushes onto a
    bound, the bias and standard error of each column's mean and of one released value,
    a categorical column's expected total-variation distance). For a method with a ``k``
    it gives the smallest ``k`` that brings every column under 10 % (from the data when it
    was read), or says why none does. A release warns
    (:class:`~dpfast.exceptions.NoiseDominatesWarning`) from the public forecast, before
    it reserves its ε.

    Guarantee: none, and none is needed: a forecast is not a release and spends no ε. The
    public forecast reads only public values (bounds, taxonomies, the arguments) and the
    row count, which every bounded-DP release publishes in its report anyway (DiffGen's,
    under unbounded DP, does not use it). The forecast from the data is an exact function
    of the data without noise: it must not be published, and a parameter chosen from it
    is chosen from the data (docs/forecast.md#private). The release it forecasts has the
    guarantee its own function states.

    Parameters
    ----------
    method : str or callable
        The release: ``"ir_dp"``, ``"laplace_dp"``, ``"mdav_dp"``,
        ``"randomized_response"``, ``"diffgen"``, ``"individual_ranking"``, ``"mdav"``,
        ``"k_noise"``, ``"k_pram"``, or the function itself (``dpfast.ir_dp``).
    data : table, int or PublicTable
        The table the release would read (its row count, its column names and the types
        of the bounded columns for the public forecast, its values for the forecast from
        the data), on any engine the release runs on; or its row count, and then the protected
        columns are ``columns`` (``column`` for randomized response), or else those
        ``bounds`` and ``taxonomies`` name, all taken as float columns; or a
        :class:`~dpfast.PublicTable` (row count, names, integer columns).
    **arguments
        The release's own arguments; those that only change how it runs (``seed``,
        ``output``, ...) are checked where the release checks them before its plan, and
        otherwise ignored. A ``budget`` is read, never reserved: :attr:`Forecast.budget_note`
        says whether the release would fit in what is left. A name the release does not
        take is refused, naming it and the closest one it takes.

    Returns
    -------
    Forecast
        ``str(forecast)`` is what the CLI's ``--dry-run`` prints; ``to_dict()`` its fields;
        ``from_data`` the forecast from the data (PRIVATE; ``None`` unless a table was
        read); ``warning`` the one line a release warns with (``None``: no column reaches
        10 %), ``public_warning`` the one from public values only.

    Raises
    ------
    TypeError, ValueError
        As the release raises for its arguments; an unknown method or argument; bounds
        from the data (``bounds="data"``), which a forecast cannot read.

    Examples
    --------
    >>> expected = forecast("laplace_dp", 1000, epsilon=1.0, bounds={"age": (0, 100)})
    >>> round(expected.columns[0].on_bound, 3)
    0.632
    >>> expected.warning.startswith("the noise would put 10% or more")
    True
    >>> expected = forecast("ir_dp", 1000, k=50, epsilon=1.0, bounds={"age": (0, 100)})
    >>> round(expected.columns[0].on_bound, 3), expected.suggested_k
    (0.02, 10)
    """
    name = _name(method)
    release, build, from_data = _METHODS[name]
    bound = _bind(name, release, data, arguments)
    if isinstance(data, PublicTable) or (
        isinstance(data, numbers.Integral) and not isinstance(data, bool)
    ):
        return _with_budget(build(_table(name, data, bound), bound), bound.get("budget"))
    where = {key: bound[key] for key in ("engine", "output", "memory_limit")}
    with open_run(name, data, where, ReleaseOptions, reads_only=True) as run:
        expected = build(_read(run.engine, run.n_rows, bound), bound)
        found = None if from_data is None else from_data(run.engine, bound)
    return _with_budget(expected, bound.get("budget")).with_data(found)


def forecast_from_data(
    method: str | Callable[..., Any], data: Any, /, **arguments: Any
) -> DataForecast | None:
    """Return the forecast from the data alone (PRIVATE), or ``None`` for a method without one.

    As :func:`forecast` given a table, without its public part (the command line makes
    that one from the schema): ``forecast(...).with_data(forecast_from_data(...))``.
    """
    name = _name(method)
    release, _, from_data = _METHODS[name]
    if from_data is None:
        return None
    bound = _bind(name, release, data, arguments)
    where = {key: bound[key] for key in ("engine", "output", "memory_limit")}
    with open_run(name, data, where, ReleaseOptions, reads_only=True) as run:
        return from_data(run.engine, bound)


def _with_budget(expected: Forecast, budget: Any) -> Forecast:
    """Say whether the release fits in ``budget``, read without reserving anything."""
    shortfall = getattr(budget, "shortfall", None)
    if expected.epsilon is None or not callable(shortfall):
        return expected
    refusal = shortfall(expected.epsilon)
    if refusal is not None:
        note = f"will NOT fit: {refusal}"
    else:
        left, total = budget.remaining(), budget.total_epsilon
        note = f"fits: budget file {str(budget.path)!r} has {left:.6g} of {total:g} left"
    return dataclasses.replace(expected, budget_note=note)


def _name(method: Any) -> str:
    name = method if isinstance(method, str) else getattr(method, "__name__", None)
    if name not in _METHODS:
        raise DPFastValueError(
            f"method must be one of {sorted(_METHODS)} or the release function, got "
            f"{quoted(method)}"
        )
    return str(name)


def _bind(
    name: str, release: Callable[..., Any], data: Any, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """Bind ``arguments`` as ``release`` does (its defaults filled in); refuse others.

    The release's ``**options`` are checked as the release checks them and join its
    other arguments, each at its default where ``arguments`` leave it out.
    """
    parameters = inspect.signature(release).parameters
    known = [
        p
        for p, kind in parameters.items()
        if p != "data" and kind.kind is not inspect.Parameter.VAR_KEYWORD
    ] + sorted(options_class(release).__optional_keys__)
    unknown = [key for key in arguments if key not in known]
    if unknown:
        raise DPFastTypeError(
            f"{name}() got an unexpected keyword argument {quoted(unknown[0])}; "
            f"{did_you_mean(unknown[0], known)}a forecast takes the release's arguments: "
            f"{', '.join(known)}"
        )
    try:
        bound = inspect.signature(release).bind(data, **arguments)
        bound.apply_defaults()
        given = dict(bound.arguments)
        options = given.pop("options")
        given.update(release_options(name, options, options_class(release)))
    except TypeError as exc:
        raise DPFastTypeError(f"{name}: {exc}; a forecast takes the release's arguments") from None
    return {key: value for key, value in given.items() if key != "data"}


def _table(name: str, data: Any, arguments: Mapping[str, Any]) -> PublicTable:
    """Return the public table of a forecast given one, or a row count."""
    if isinstance(data, PublicTable):
        return data
    return PublicTable(check_int(data, "the row count", low=0), _named(name, arguments))


def _read(engine: Engine, n_rows: int, arguments: Mapping[str, Any]) -> PublicTable:
    """Return what the public forecast reads of a table: its row count, names, integer columns."""
    names = list(engine.names)
    bounds = arguments.get("bounds")
    bounded = [c for c in bounds if c in names] if isinstance(bounds, Mapping) else []
    flow = engine.dataflow
    integer = frozenset(c for c in bounded if value_dtype(flow, c).kind in "iu")
    return PublicTable(n_rows, names, integer)


def _named(name: str, arguments: Mapping[str, Any]) -> list[Hashable]:
    """Return the columns of a table known by its row count: those the arguments name."""
    if name == "randomized_response":
        return [arguments["column"]]
    if arguments.get("columns") is not None:
        return list(arguments["columns"])
    named: list[Hashable] = []
    for key in ("taxonomies", "bounds"):
        value = arguments.get(key)
        if isinstance(value, Mapping):
            named.extend(c for c in value if c not in named)
    if name == "diffgen" and arguments["target"] not in named:
        named.append(arguments["target"])
    return named
