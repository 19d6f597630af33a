"""``forecast``: what a release will do to its columns, from public values only.

Every method's forecast is its own plan made from the row count, the column names and
its arguments (docs/forecast.md); this module finds the method, binds the arguments as
the release function binds them, and reads the row count and the names.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from dpfast._release import (
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
)
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.methods.diffgen import diffgen, diffgen_forecast
from dpfast.methods.individual_ranking import individual_ranking
from dpfast.methods.ir_dp import ir_dp, ir_dp_forecast
from dpfast.methods.k_noise import k_noise
from dpfast.methods.k_pram import k_pram
from dpfast.methods.laplace_dp import laplace_dp, laplace_dp_forecast
from dpfast.methods.mdav import mdav
from dpfast.methods.mdav_dp import mdav_dp, mdav_dp_forecast
from dpfast.methods.randomized_response import randomized_response, randomized_response_forecast
from dpfast.partitions.ranking import RankGroups

__all__ = ["forecast"]


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


_METHODS: dict[str, tuple[Callable[..., Any], Callable[[TableView, Mapping[str, Any]], Forecast]]]
_METHODS = {
    "ir_dp": (ir_dp, ir_dp_forecast),
    "laplace_dp": (laplace_dp, laplace_dp_forecast),
    "mdav_dp": (mdav_dp, mdav_dp_forecast),
    "randomized_response": (randomized_response, randomized_response_forecast),
    "diffgen": (diffgen, diffgen_forecast),
    "individual_ranking": (individual_ranking, _individual_ranking),
    "mdav": (mdav, _mdav),
    "k_noise": (k_noise, _k_noise),
    "k_pram": (k_pram, _k_pram),
}


def forecast(method: str | Callable[..., Any], data: Any, /, **arguments: Any) -> Forecast:
    """Forecast a release from public values only: its noise per column; nothing is spent.

    The dry run of a release: ``forecast("ir_dp", data, **arguments)`` takes the arguments
    ``dpfast.ir_dp(data, **arguments)`` takes, checks them as the release does, and makes
    the release's own plan (the same ε split, sensitivities and noise scales) from the
    row count, the column names and the arguments. It reserves no budget, spends no ε and
    writes nothing. Per protected column it gives the ε share, the noise scale, the
    noise's standard deviation as a share of the public width, and a forecast of the
    share of released values on a bound if the values were spread evenly over the bounds
    (docs/forecast.md). For a method with a ``k`` it gives the smallest ``k`` that brings
    every column under 10 %, or says why none does. A release warns
    (:class:`~dpfast.exceptions.NoiseDominatesWarning`) from the same forecast, before it
    reserves its ε.

    Guarantee: none, and none is needed: a forecast is not a release and spends no ε. It
    reads no value of the data, only public values (bounds, taxonomies, the arguments) and
    the row count, which every bounded-DP release publishes in its report anyway
    (DiffGen's forecast, under unbounded DP, does not use it). The release it forecasts
    has the guarantee its own function states.

    Parameters
    ----------
    method : str or callable
        The release: ``"ir_dp"``, ``"laplace_dp"``, ``"mdav_dp"``,
        ``"randomized_response"``, ``"diffgen"``, ``"individual_ranking"``, ``"mdav"``,
        ``"k_noise"``, ``"k_pram"``, or the function itself (``dpfast.ir_dp``).
    data : table, int or PublicTable
        The table the release would read (only its row count, its column names and the
        types of the bounded columns are read); or its row count, and then the protected
        columns are ``columns`` (``column`` for randomized response), or else those
        ``bounds`` and ``taxonomies`` name, all taken as float columns; or a
        :class:`~dpfast.PublicTable` (row count, names, integer columns).
    **arguments
        The release's own arguments; those that only change how it runs (``seed``,
        ``output``, ``budget``, ...) are checked where the release checks them before
        its plan, and otherwise ignored.

    Returns
    -------
    Forecast
        ``str(forecast)`` is the table the CLI's ``--dry-run`` prints; ``to_dict()`` its
        fields; ``warning`` the one line a release warns with (``None``: no column reaches
        10 % on a bound).

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
    >>> expected.warning.startswith("the noise will put 10% or more")
    True
    >>> expected = forecast("ir_dp", 1000, k=50, epsilon=1.0, bounds={"age": (0, 100)})
    >>> round(expected.columns[0].on_bound, 3), expected.suggested_k
    (0.02, 10)
    """
    name = _name(method)
    release, build = _METHODS[name]
    bound = _bind(name, release, data, arguments)
    return build(_table(name, data, bound), bound)


def _name(method: Any) -> str:
    name = method if isinstance(method, str) else getattr(method, "__name__", None)
    if name not in _METHODS:
        raise DPFastValueError(
            f"method must be one of {sorted(_METHODS)} or the release function, got {method!r}"
        )
    return str(name)


def _bind(
    name: str, release: Callable[..., Any], data: Any, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """Bind ``arguments`` as ``release`` does (its defaults filled in); refuse others.

    The release's ``**options`` are checked as the release checks them and join its
    other arguments, each at its default where ``arguments`` leave it out.
    """
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
    """Return what the forecast reads of ``data``: its row count, names and integer columns."""
    if isinstance(data, PublicTable):
        return data
    if isinstance(data, numbers.Integral) and not isinstance(data, bool):
        return PublicTable(check_int(data, "the row count", low=0), _named(name, arguments))
    where = {key: arguments[key] for key in ("engine", "output", "memory_limit")}
    with open_run(name, data, where, ReleaseOptions) as run:
        names = list(run.engine.names)
        bounds = arguments.get("bounds")
        bounded = [c for c in bounds if c in names] if isinstance(bounds, Mapping) else []
        integer = frozenset(c for c in bounded if run.engine.value_dtype(c).kind in "iu")
        return PublicTable(run.n_rows, names, integer)


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
