"""Randomized response: uniform perturbation of one categorical column.

See docs/design.md#randomized-response.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpfast import noise
from dpfast._release import (
    Choices,
    ClassLookup,
    ColumnDataForecast,
    DataForecast,
    DPReleaseOptions,
    Engine,
    Forecast,
    Release,
    TableView,
    Unpack,
    check_in_domain,
    choice_forecast,
    column_threads,
    expected_tvd,
    keep_numerator,
    noise_source,
    open_run,
)
from dpfast._validation import (
    check_columns,
    check_epsilon,
    check_nonempty,
    check_retention,
    check_seed,
    option,
    quoted,
)
from dpfast.accounting import Ledger, LedgerEntry
from dpfast.dataflow.writes import WriteCodes
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.io import check_declared
from dpfast.steps import class_codes, contingency, declared_categories, value_dtype

_RHO1 = (0.01, 0.05, 0.1, 0.25, 0.5)


def _domain_values(domain: Any) -> list[Any]:
    if domain is None:
        raise DPFastValueError(
            "domain is required: pass the public list of categories (or a Taxonomy); it is "
            "never taken from the data"
        )
    for attribute in ("leaves", "domain"):
        if not isinstance(domain, (list, tuple, np.ndarray, pd.Index)) and hasattr(
            domain, attribute
        ):
            domain = getattr(domain, attribute)
            if callable(domain):
                domain = domain()
            break
    if isinstance(domain, (str, bytes)) or not hasattr(domain, "__iter__"):
        raise DPFastTypeError(
            f"domain must be a list of categories or a Taxonomy, got {type(domain).__name__}"
        )
    values = list(domain)
    if len(values) < 2:
        raise DPFastValueError(
            f"{option('domain')} must hold at least 2 categories, got {len(values)}; with one "
            "there is "
            "nothing to perturb"
        )
    if len(set(values)) != len(values):
        seen: set[Any] = set()
        twice = [v for v in values if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
        raise DPFastValueError(
            f"{option('domain')} lists categories more than once: {quoted(twice)}"
        )
    if len(values) > noise.KEEP_DENOMINATOR:
        raise DPFastValueError(
            f"{option('domain')} may hold at most 2**32 categories, got {len(values)}"
        )
    return values


def _in_column_type(domain: list[Any], dtype: np.dtype[Any]) -> list[Any]:
    """Read a domain given as text (``--domain 1,2``) in a numeric column's own type.

    A label matches a value when it equals it, or when it is the value's text, as DiffGen
    matches class labels; the release keeps the column's dtype. Labels that are not all
    exact numbers of that type are left as they are (and then do not match). ``dtype`` is
    the column's (:func:`dpfast.steps.value_dtype`).
    """
    kind = dtype.kind
    if kind not in "iuf" or not all(isinstance(label, str) for label in domain):
        return domain
    parse = int if kind in "iu" else float
    try:
        parsed = [parse(label) for label in domain]
    except ValueError:
        return domain
    if len(set(parsed)) < len(parsed):
        raise DPFastValueError(f"domain lists the same number twice: {domain}")
    return parsed


def _keep_from_epsilon(epsilon: float, m: int) -> int:
    """Largest ``a`` with ``1 + (a/2**32) m / (1 - a/2**32) <= e^ε`` (never overstated)."""
    # e^ε >= m 2**33 already keeps 2**32 - 1 of 2**32, the most the grid holds: a larger ε
    # gives the same keep (and Decimal cannot exponentiate ε near the float64 maximum)
    epsilon = min(epsilon, math.log(m) + 33 * math.log(2))
    with localcontext() as context:
        context.prec = 80
        growth = Decimal(epsilon).exp()
        retention = (growth - 1) / (growth - 1 + m)
        scaled = retention * (noise.KEEP_DENOMINATOR)
        keep = int(scaled.to_integral_value(rounding="ROUND_FLOOR"))
        if scaled - keep < Decimal(10) ** -60:
            keep -= 1  # too close to call at this precision: round down
        keep = max(0, min(keep, noise.KEEP_DENOMINATOR - 1))
        while (
            keep > 0 and Decimal(1) + Decimal(keep) * m / (noise.KEEP_DENOMINATOR - keep) > growth
        ):
            keep -= 1
    return int(keep)


def _rho_bound(gamma: float) -> dict[str, Any]:
    return {
        "amplification": gamma,
        "condition": "no upward rho1-to-rho2 or downward rho2-to-rho1 privacy breach when "
        "rho2 (1 - rho1) / (rho1 (1 - rho2)) > amplification (Evfimievski, "
        "Gehrke and Srikant 2003, as recalled in docs/design.md#randomized-response)",
        "rho2_above": {str(rho1): gamma * rho1 / (1 - rho1 + gamma * rho1) for rho1 in _RHO1},
    }


def randomized_response(
    data: Any,
    *,
    column: Hashable,
    domain: Any,
    epsilon: float | None = None,
    retention: float | None = None,
    n_threads: int | None = None,
    **options: Unpack[DPReleaseOptions],
) -> Release:
    """Uniform perturbation (k-ary randomized response) of one categorical column.

    See docs/design.md#randomized-response.

    Each value is kept with probability ``p`` (the retention), or else replaced by a
    uniform draw from the public ``domain`` of ``m`` categories (possibly itself), so
    ``Pr[x -> x] = p + (1 - p)/m`` and ``Pr[x -> y] = (1 - p)/m``. This is ε-local
    differential privacy with ``e^ε = 1 + p m / (1 - p)`` for the column, and
    ``(rho1, rho2)``-privacy for every pair with ``rho2 (1 - rho1) / (rho1 (1 - rho2))
    > e^ε``. The
    other columns are released unchanged and are not protected. Rows keep their order.

    Sampling is exact: ``p`` is the rational ``a / 2**32`` with the largest ``a`` such that
    ``a / 2**32 <= retention`` (or, from ``epsilon``, such that the resulting ε does not
    exceed the one asked for), and the replacement is an exact uniform draw.

    Parameters
    ----------
    data : pandas.DataFrame, pyarrow.Table, 2-D numpy.ndarray, Parquet path, Spark or Dask DataFrame
        Never modified. A Parquet file, directory or glob (or ``engine="outofcore"``) is
        released out of core into ``output``; a Spark or Dask DataFrame on its cluster
        (docs/engines.md).
    column : hashable
        The sensitive column.
    domain : sequence or Taxonomy
        The public categories (a Taxonomy gives its leaves); never inferred from the data.
        At least 2.
    epsilon : float, optional
        Local-DP budget ``> 0``: ``p = (e^ε - 1)/(e^ε - 1 + m)``, rounded down.
    retention : float, optional
        ``p`` in ``[0, 1)``. Give exactly one of ``epsilon`` and ``retention``.
    n_threads : int, optional
        Threads for the draws. Results do not depend on it.
    **options : Unpack[DPReleaseOptions]
        The options the releases share (:class:`dpfast.DPReleaseOptions`): ``seed``,
        ``budget``, ``risk``, ``progress``, ``engine``, ``output`` and
        ``memory_limit``. Out of core, ``memory_limit`` bounds the batches of the one
        pass over the column. ``budget`` needs ``epsilon`` (with ``retention`` alone the
        ε is not known before the release).

    Returns
    -------
    Release
        The report gives the retention and ε used (and asked for), the keep probability,
        the amplification and the ``(rho1, rho2)`` bound.

    Raises
    ------
    TypeError, ValueError
        Unknown column, a domain with fewer than 2 or repeated categories, values outside
        the domain or missing, both or neither of ``epsilon`` and ``retention``,
        ``epsilon <= 0``, ``retention`` outside ``[0, 1)``, a ``budget`` without ``epsilon``.

    References
    ----------
    A. Evfimievski, J. Gehrke and R. Srikant, "Limiting privacy breaches in privacy
    preserving data mining", PODS 2003. S. L. Warner, "Randomized response", JASA 1965.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"disease": ["flu", "cold", "flu", "none"], "zip": [1, 2, 3, 4]})
    >>> release = randomized_response(table, column="disease",
    ...                               domain=["cold", "flu", "none"], epsilon=1.0, seed=3)
    >>> release.report.epsilon <= 1.0, release.report.unprotected_columns
    (True, ['zip'])
    """
    with open_run("randomized_response", data, options, DPReleaseOptions) as run:
        with run.phase("validate"):
            check_nonempty(run.n_rows)
            (name,) = check_columns([column], run.engine.names, name="column")
            categories = _domain_values(domain)
            m = len(categories)
            keep, epsilon, retention = _keep(epsilon, retention, m)
            seed = check_seed(run.seed)
            threads = column_threads(n_threads)
            flow = run.engine.dataflow
            typed = _in_column_type(categories, value_dtype(flow, name))
            check_declared(name, declared_categories(flow, name), typed)
            if epsilon is not None:
                run.reserve(epsilon, [name])
            elif run.budget is not None:
                raise DPFastValueError(
                    f"{option('budget')} needs {option('epsilon')}, the budget this release "
                    f"may spend (with {option('retention')} alone the epsilon is not known "
                    "before the release)"
                )
        p = keep / noise.KEEP_DENOMINATOR
        ledger = Ledger(math.log(_amplification(keep, m)))
        entry = ledger.plan(_entry(name, ledger.total, p))
        source = noise_source(seed)
        with run.phase("perturb"):
            key = source.key("randomized_response", str(name))
            run.engine.write(WriteCodes(name, typed, ResponseCells(key, keep, m, threads)))
            ledger.spend(entry)
        run.keep(name)
        fields = _report_fields(name, categories, keep, epsilon, retention, ledger, seed)
        return run.finish(**fields)


def _amplification(keep: int, m: int) -> float:
    """Return the amplification ``1 + p m / (1 - p)``, ``p = keep / 2**32``: ε is its log."""
    return 1.0 + float(Fraction(keep * m, noise.KEEP_DENOMINATOR - keep))


def randomized_response_forecast(table: TableView, arguments: Mapping[str, Any]) -> Forecast:
    """Return the forecast of :func:`randomized_response` with ``arguments`` on ``table``.

    From the arguments only (the retention the release uses, its ε, the domain's size);
    nothing is spent or written. The share of values changed is exact for any data.
    """
    a = arguments
    check_nonempty(table.n_rows)
    (name,) = check_columns([a["column"]], table.names, name="column")
    m = len(_domain_values(a["domain"]))
    keep, _, _ = _keep(a["epsilon"], a["retention"], m)
    check_seed(a["seed"])
    p = keep / noise.KEEP_DENOMINATOR
    epsilon = math.log(_amplification(keep, m))
    changed = (1 - p) * (m - 1) / m
    notes = (
        f"each value is kept with probability {p + (1 - p) / m:.4g}, else replaced by a "
        f"uniform draw from the {m} public categories (the noise scale is the probability "
        f"of a draw, {1 - p:.4g}): {changed:.1%} of the released values are expected to "
        "differ from the input, whatever the data",
        "a categorical column has no bounds: nothing is clamped, so no share on a bound "
        "applies; the other columns are released unchanged and are NOT protected",
    )
    column = choice_forecast(_entry(name, epsilon, p), "every value of the column")
    return Forecast("randomized_response", epsilon, table.n_rows, (column,), notes=notes)


def randomized_response_data_forecast(engine: Engine, arguments: Mapping[str, Any]) -> DataForecast:
    """Return the forecast from the data of :func:`randomized_response` (PRIVATE).

    The column's rows per category of the domain (read over the engine's dataflow by
    :func:`~dpfast.steps.class_codes`), and the expected total-variation
    distance between its distribution and the release's: a row of category ``x`` is
    released as ``v`` with chance ``p [x = v] + (1 - p) / m``, independently
    (docs/forecast.md#categorical). Nothing is drawn, spent or written.
    """
    a = arguments
    check_nonempty(engine.n_rows)
    (name,) = check_columns([a["column"]], engine.names, name="column")
    categories = _domain_values(a["domain"])
    m = len(categories)
    keep, _, _ = _keep(a["epsilon"], a["retention"], m)
    p = keep / noise.KEEP_DENOMINATOR
    flow = engine.dataflow
    typed = _in_column_type(categories, value_dtype(flow, name))
    found = class_codes(flow, name, ClassLookup(tuple(typed)))
    check_in_domain(name, found.missing, found.unknown)
    table = contingency(flow, found, [])
    table.start([])
    counts = table.cells(np.zeros(0, dtype=np.int64), [])[0]
    chances = np.full((m, m), (1 - p) / m) + p * np.eye(m)
    choices = Choices(chances, np.ones(m, dtype=np.int64), counts.astype(np.int64))
    tvd, exact = expected_tvd(choices, counts)
    note = (
        "each row's release is kept or replaced independently, with the chances the "
        "retention gives: the expected distance between the column's distribution and the "
        "release's, from its rows per category"
    )
    column = ColumnDataForecast(str(name), tvd=tvd, exact=exact)
    return DataForecast("randomized_response", engine.n_rows, (column,), notes=(note,))


@dataclass(frozen=True)
class ResponseCells:
    """One column's codes kept or replaced by a uniform draw from the domain's ``m`` codes.

    Row ``i`` reads word ``i`` of the column's key (:func:`dpfast.noise.retain_or_replace`).
    """

    key: np.ndarray
    keep: int
    m: int
    n_threads: int

    def __call__(self, codes: np.ndarray, first_row: int) -> np.ndarray:
        """Return the batch's released codes."""
        pool = np.arange(self.m, dtype=codes.dtype)
        return noise.retain_or_replace(
            self.key, self.keep, codes, pool, start=first_row, n_threads=self.n_threads
        )


def _report_fields(
    name: Hashable,
    categories: list[Any],
    keep: int,
    epsilon: float | None,
    retention: float | None,
    ledger: Ledger,
    seed: int | None,
) -> dict[str, Any]:
    """Return the report fields of a release (:meth:`Run.finish`)."""
    m = len(categories)
    p = keep / noise.KEEP_DENOMINATOR
    gamma = _amplification(keep, m)
    notes = []
    if epsilon is not None:
        notes.append(
            f"retention rounded down to {keep}/2**32 for exact sampling: the epsilon spent, "
            f"{ledger.total:.10g}, is at most the {epsilon:g} asked for"
        )
    return {
        "parameters": _parameters(name, m, keep, epsilon, retention),
        "guarantee": (
            f"{ledger.total:.6g}-local differential privacy for column {quoted(str(name))}: each "
            f"record's value is kept with probability {p:.6g}, else replaced by a uniform "
            f"draw from the public domain of {m} categories, independently of every other "
            "record. Centrally this protects only that column's value of a record.",
            "local",
        ),
        "emphasis": True,
        "ledger": ledger,
        "seed": seed,
        "sampler": noise.RETAIN_SAMPLER_NAME,
        "notes": notes,
        "extra": {
            "domain": [c if isinstance(c, (str, int, float)) else str(c) for c in categories],
            "rho_bound": _rho_bound(gamma),
        },
    }


def _parameters(
    name: Hashable, m: int, keep: int, epsilon: float | None, retention: float | None
) -> dict[str, Any]:
    p = keep / noise.KEEP_DENOMINATOR
    gamma = _amplification(keep, m)
    return {
        "column": str(name),
        "domain_size": m,
        "epsilon_requested": epsilon,
        "retention_requested": retention,
        "retention": p,
        "retention_fraction": f"{keep}/2**32",
        "epsilon": math.log(gamma),
        "keep_probability": p + (1 - p) / m,
    }


def _keep(epsilon: Any, retention: Any, m: int) -> tuple[int, float | None, float | None]:
    """Return the exact retention numerator, and the checked ``epsilon`` or ``retention``."""
    if (epsilon is None) == (retention is None):
        raise DPFastValueError(
            "give exactly one of epsilon (local differential privacy) and retention "
            "(the probability of keeping a value)"
        )
    if epsilon is not None:
        epsilon = check_epsilon(epsilon)
        return _keep_from_epsilon(epsilon, m), epsilon, None
    retention = check_retention(retention)
    return keep_numerator(retention), None, retention


def _entry(name: Hashable, epsilon: float, p: float) -> LedgerEntry:
    return LedgerEntry(
        step="randomized response",
        columns=(str(name),),
        epsilon=epsilon,
        mechanism="k-ary randomized response (uniform perturbation), local DP",
        sensitivity=1.0,
        noise_scale=1.0 - p,
        sampler=noise.RETAIN_SAMPLER_NAME,
        details={
            "noise_scale_is": "replacement probability 1 - p",
            "sensitivity_is": "one record's category",
        },
    )
