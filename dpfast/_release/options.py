"""The options the releases share, each defined and documented once.

A release function names its own arguments and takes the options it shares with the
other releases as ``**options``, typed by one of the :class:`~typing.TypedDict` classes
here (PEP 692): :class:`ReleaseOptions`, which every release takes, and the classes that
add ``metrics``, ``seed`` and ``budget`` to it. :func:`release_options` checks a call's
options against its class, refusing an unknown name as Python refuses an unknown keyword
argument, and fills in the defaults.
"""

from __future__ import annotations

import inspect
import os
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict

from dpfast._validation import did_you_mean, quoted
from dpfast.accounting import Report
from dpfast.engines import EngineChoice
from dpfast.exceptions import DPFastTypeError

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover - Python 3.10: typing_extensions (a dependency there)
    from typing_extensions import Unpack

__all__ = [
    "BudgetLike",
    "DPMetricsReleaseOptions",
    "DPReleaseOptions",
    "MetricsReleaseOptions",
    "Progress",
    "ReleaseOptions",
    "Reservation",
    "SeededReleaseOptions",
    "Unpack",
    "options_class",
    "release_options",
]

Progress = Callable[[str, int, int], None]


class Reservation(Protocol):
    """A release's spend held in a budget: committed before its output is visible."""

    def commit(self, report: Report) -> None:
        """Record the spend as final, from the release's public report."""
        ...

    def abandon(self) -> None:
        """Give the spend back: the release failed before any output became visible."""
        ...


class BudgetLike(Protocol):
    """A privacy budget a release spends from (:class:`dpfast.budget.BudgetFile`)."""

    def reserve(
        self, epsilon: float, *, method: str, output: str | None, columns: Sequence[str]
    ) -> Reservation:
        """Hold ``epsilon`` for a release, refusing it if it does not fit."""
        ...


class ReleaseOptions(TypedDict, total=False):
    """The options every release takes, by name, each optional.

    A release function takes them as ``**options``: ``dpfast.ir_dp(data, k=5,
    epsilon=1.0, bounds=..., engine="outofcore", output="out/", memory_limit="4GiB")``.
    A name the release does not take is refused with
    :class:`~dpfast.exceptions.DPFastTypeError` (a :class:`TypeError`) that names it and
    lists the options the release takes. The releases that take more options name their
    class: :class:`MetricsReleaseOptions`, :class:`SeededReleaseOptions`,
    :class:`DPReleaseOptions` or :class:`DPMetricsReleaseOptions`.

    Attributes
    ----------
    risk : bool or dict
        Disclosure risk, each released row paired with its source through the release's
        own order, into ``release.private.risk`` (private; in memory only; a dict says
        what to measure: docs/risk.md#risk-at-release-time). Default ``False``.
    progress : callable, optional
        Called as ``progress(phase, done, total)`` as the release goes; each release
        names its phases.
    engine : str or EngineChoice, optional
        Where the release runs: ``"memory"``, ``"outofcore"``, ``"spark"`` or ``"dask"``
        (default: chosen from ``data``'s type); see :func:`dpfast.engines.open_engine`.
    output : str or path, optional
        Where the release is written, published at once when complete: a ``.parquet``
        file or a directory of Parquet files (on Spark and Dask always a directory;
        required out of core). A table released in memory is written too, in the format
        of the extension (Parquet, CSV or TSV).
    memory_limit : str or int, optional
        The working memory of a release out of core (e.g. ``"4GiB"``; default 4 GiB).
        The release does not depend on it.

    Examples
    --------
    >>> import pandas as pd, dpfast
    >>> options: dpfast.ReleaseOptions = {"progress": lambda phase, done, total: None}
    >>> table = pd.DataFrame({"age": [23, 35, 41, 52]})
    >>> dpfast.individual_ranking(table, k=2, **options).data["age"].tolist()
    [29, 29, 46, 46]
    """

    risk: bool | Mapping[str, Any]
    progress: Progress | None
    engine: str | EngineChoice | None
    output: str | os.PathLike[str] | None
    memory_limit: str | int | None


class MetricsReleaseOptions(ReleaseOptions, total=False):
    """The options of a release that measures its utility: :class:`ReleaseOptions`' and this.

    Attributes
    ----------
    metrics : bool
        Add each released column's relative error and Jensen-Shannon divergence from the
        original, and each numeric column's variance variation, to the private report
        (``release.private.metrics``), which must not be published (in memory only).
        Default ``False``.
    """

    metrics: bool


class SeededReleaseOptions(ReleaseOptions, total=False):
    """The options of a release that draws noise: :class:`ReleaseOptions`' and this.

    Attributes
    ----------
    seed : int, optional
        Draw the noise (and every random order) from a generator seeded with it:
        reproducible, not for publication. Default: a secure source.
    """

    seed: int | None


class DPReleaseOptions(SeededReleaseOptions, total=False):
    """The options of a release that spends ε: :class:`SeededReleaseOptions`' and this.

    Attributes
    ----------
    budget : BudgetLike, optional
        A privacy budget (:class:`dpfast.budget.BudgetFile`; a path is refused: open
        it with ``dpfast.BudgetFile(path)``) that holds the ε the release really spends
        before any pass over the data and records it before the output is published:
        before ``output`` is renamed into place, or, without ``output``, before the
        release is returned (the entry's output reads ``"(returned to the caller)"``).
    """

    budget: BudgetLike | None


class DPMetricsReleaseOptions(DPReleaseOptions, MetricsReleaseOptions, total=False):
    """The options of a release that spends ε on numeric columns and measures its utility.

    Those of :class:`DPReleaseOptions` (``seed``, ``budget``) and of
    :class:`MetricsReleaseOptions` (``metrics``), besides :class:`ReleaseOptions`', and
    this.

    Attributes
    ----------
    max_on_bound : float, optional
        A share in ``[0, 1]``: refuse the release (:class:`~dpfast.exceptions.DPFastValueError`),
        before anything is reserved or written, when its forecast puts more than this
        share of a numeric column's values onto a bound. The release then reads the data
        once more for its forecast from the data (PRIVATE: the share the noise is expected
        to push onto a bound, docs/forecast.md#from-the-data) where its method has one
        (``ir_dp``, ``mdav_dp``), else uses its public forecast (the share on a bound if
        the values were spread evenly). Default ``None``: no check, no extra read.
    """

    max_on_bound: float | None


#: Every option's value when a call leaves it out.
DEFAULTS: dict[str, Any] = {
    "risk": False,
    "progress": None,
    "engine": None,
    "output": None,
    "memory_limit": None,
    "metrics": False,
    "seed": None,
    "budget": None,
    "max_on_bound": None,
}


def release_options(method: str, given: Mapping[str, Any], kind: Any) -> dict[str, Any]:
    """Return ``given``, checked against ``kind``, with every option it leaves out at its default.

    ``kind`` is the release's options class (:class:`ReleaseOptions` or one built on it);
    a name it does not hold is refused as Python refuses an unknown keyword argument
    (:class:`~dpfast.exceptions.DPFastTypeError`, a :class:`TypeError`). The result holds
    every option of :data:`DEFAULTS`: those ``kind`` lacks at their defaults.
    """
    accepted: frozenset[str] = kind.__optional_keys__
    for name in given:
        if name not in accepted:
            raise DPFastTypeError(
                f"{method}() got an unexpected keyword argument {quoted(name)}; "
                f"{did_you_mean(name, accepted)}besides its own arguments it takes the options "
                f"{', '.join(sorted(accepted))} (dpfast.{kind.__name__})"
            )
    _check_budget(method, given.get("budget"))
    return {**DEFAULTS, **given}


def _check_budget(method: str, budget: Any) -> None:
    """Refuse a ``budget`` that is not a budget (a path: open it as a ``BudgetFile``)."""
    if budget is None or callable(getattr(budget, "reserve", None)):
        return
    path = repr(os.fspath(budget)) if isinstance(budget, (str, os.PathLike)) else "path"
    raise DPFastTypeError(
        f"{method}(): budget must be a dpfast.BudgetFile, got {quoted(budget)} "
        f"({type(budget).__name__}); open the file with budget=dpfast.BudgetFile({path})"
    )


def options_class(function: Callable[..., Any]) -> Any:
    """Return the options class of a release function: ``X`` of its ``**options: Unpack[X]``."""
    (name,) = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind is inspect.Parameter.VAR_KEYWORD
    ]
    (kind,) = typing.get_args(typing.get_type_hints(function)[name])
    return kind
