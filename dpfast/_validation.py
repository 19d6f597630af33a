"""Validate and normalise public arguments once, at the boundary.

Each function returns the normalised value or raises ``TypeError`` (wrong type) or
``ValueError`` (wrong value) with a message that says what was expected, what was got,
and how to fix it.
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dpfast._kernels import checks
from dpfast._wording import (  # the words of every message: in __all__, one vocabulary
    QUOTED_CHARACTERS,
    QUOTED_VALUES,
    cli_spelling,
    did_you_mean,
    in_cli,
    join_listed,
    method_call,
    option,
    quoted,
)
from dpfast.exceptions import (
    DPFastTypeError,
    DPFastValueError,
    EpsilonRangeError,
    PrivacyLeakWarning,
)

__all__ = [
    "QUOTED_CHARACTERS",
    "QUOTED_VALUES",
    "all_finite",
    "as_numeric_column",
    "check_bool",
    "check_bounds",
    "check_choice",
    "check_columns",
    "check_em_epsilon",
    "check_epsilon",
    "check_int",
    "check_k",
    "check_k_anonymity",
    "check_nonempty",
    "check_positive",
    "check_retention",
    "check_seed",
    "check_share",
    "check_threads",
    "check_unique_names",
    "cli_spelling",
    "did_you_mean",
    "epsilon_too_large",
    "epsilon_too_small",
    "in_cli",
    "is_integer_column",
    "join_listed",
    "kernel_floats",
    "method_call",
    "non_finite_error",
    "not_numeric_error",
    "option",
    "quoted",
]


def check_int(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int, refusing bools, floats and other types.

    With ``low`` and/or ``high``, the value must also lie in ``[low, high]``; the message
    then states the range: ``"size must be an integer in [0, 10], got 11"``.
    """
    if low is not None and high is not None:
        expected = f"an integer in [{low}, {high}]"
    elif low is not None:
        expected = f"an integer >= {low}"
    elif high is not None:
        expected = f"an integer <= {high}"
    else:
        expected = "an integer"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise DPFastTypeError(
            f"{name} must be {expected}, got {quoted(value)} ({type(value).__name__})"
        )
    result = int(value)
    if (low is not None and result < low) or (high is not None and result > high):
        raise DPFastValueError(f"{name} must be {expected}, got {result}")
    return result


def check_positive(value: Any, name: str) -> float:
    """Return ``value`` as a float, requiring a finite real number greater than 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise DPFastTypeError(
            f"{name} must be a number, got {quoted(value)} ({type(value).__name__})"
        )
    result = float(value)
    if not math.isfinite(result) or result <= 0:
        raise DPFastValueError(f"{name} must be a finite number > 0, got {quoted(value)}")
    return result


def check_k(k: Any, n_records: int, *, low: int = 1, method: str | None = None) -> int:
    """Check the group size ``k``: an integer in ``[low, n_records]``.

    ``method`` names what needs groups of at least ``low`` when the table has fewer rows.
    """
    name = option("k")
    value = check_int(k, name)
    if n_records == 0:
        raise DPFastValueError(f"the table is empty (0 rows); a release needs at least {name} rows")
    if not low <= value <= n_records:
        raise DPFastValueError(
            f"{name} must be in [{low}, {n_records}] (the number of rows), got {value}; "
            f"choose a smaller {name} or release more rows"
            if n_records >= low
            else f"{method} needs at least {low} rows (groups of {name} >= {low}), got {n_records}"
        )
    return value


def check_k_anonymity(k: Any, n_records: int, method: str) -> int:
    """Check ``k`` of a method that mixes each record with its group: an integer in ``[2, n]``.

    Such a method (``mdav``, ``individual_ranking``, ``k_pram``) has no noise of its own:
    with ``k = 1`` a group may be one record, so it can release the input unchanged while
    its report names a k. Refused, naming the fix.
    """
    if check_int(k, option("k")) == 1:
        raise DPFastValueError(
            f"{option('k', 1)} can release the input unchanged: {method} replaces each value "
            "from its group, and a group of one record is the record itself; use "
            f"{option('k')} >= 2, or {method_call('ir_dp')} or {method_call('mdav_dp')} for "
            "differential privacy"
        )
    return check_k(k, n_records, low=2, method=method)


def check_epsilon(epsilon: Any) -> float:
    """Check a privacy budget: a finite number greater than 0.

    Raises
    ------
    TypeError
        If ``epsilon`` is not a real number.
    EpsilonRangeError
        If it is NaN, infinite, zero or negative.
    """
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, numbers.Real):
        raise DPFastTypeError(
            f"epsilon must be a number, got {quoted(epsilon)} ({type(epsilon).__name__})"
        )
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise EpsilonRangeError(
            f"{{parameter}} must be a finite number > 0, got {quoted(value)}; privacy budgets are "
            "positive, e.g. {parameter}=1"
        )
    return value


def _rounded(value: float, up: bool) -> str:
    """``value`` with 3 significant digits, rounded away from the forbidden side."""
    if value <= 0 or not math.isfinite(value):
        return f"{value:.3g}"
    exponent = math.floor(math.log10(value)) - 2
    mantissa = value / 10.0**exponent
    digits = math.ceil(mantissa * (1 + 1e-9)) if up else math.floor(mantissa * (1 - 1e-9))
    return f"{digits * 10.0**exponent:.3g}"


def epsilon_too_small(epsilon: float, reason: str, minimum: float) -> EpsilonRangeError:
    """Return the error for a budget below what a sampler serves: ``use epsilon >= minimum``.

    ``minimum`` is rounded up, so the budget the message suggests is always served.

    Examples
    --------
    >>> str(epsilon_too_small(1e-300, "it would need a scale of 1e300", 1.234e-12))
    'epsilon=1e-300 is too small: it would need a scale of 1e300; use epsilon >= 1.24e-12'
    """
    return EpsilonRangeError(
        f"{{parameter}}={epsilon:g} is too small: {reason}; use {{parameter}} >= "
        f"{_rounded(minimum, up=True)}"
    )


def epsilon_too_large(epsilon: float, reason: str, maximum: float) -> EpsilonRangeError:
    """Return the error for a budget above what a sampler serves: ``use epsilon <= maximum``."""
    return EpsilonRangeError(
        f"{{parameter}}={epsilon:g} is too large: {reason}; use {{parameter}} <= "
        f"{_rounded(maximum, up=False)}"
    )


def check_em_epsilon(epsilon: float, n_records: int, *, what: str, shares: float = 1) -> float:
    """Check the ε share of one exponential mechanism: refuse a share that is 0 in float64.

    The exact exponential mechanism serves every positive ε: its base is a dyadic
    rational, and a rate above its cap spends less than asked, which the ledger states
    (docs/design.md#em-sampler). Only a total budget split in ``shares`` equal parts so
    small that the share underflows to 0 cannot be served. ``n_records`` is kept for the
    callers' symmetry with the other checks.

    Raises
    ------
    EpsilonRangeError
        Naming ``what`` and the usable range of the total budget.
    """
    if not epsilon > 0:
        raise epsilon_too_small(
            epsilon * shares,
            f"{what}'s share of it is 0 in float64",
            shares * sys.float_info.min,
        )
    return epsilon


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        raise DPFastValueError(
            f"{option(name)} must be one of {list(choices)}, got {quoted(value)}"
        )
    return str(value)


def check_nonempty(n_rows: int) -> int:
    """Refuse an empty table."""
    if n_rows == 0:
        raise DPFastValueError("the table is empty (0 rows); nothing to release")
    return n_rows


def check_retention(retention: Any) -> float:
    """Check a retention probability: a number in ``[0, 1)``."""
    if isinstance(retention, (bool, np.bool_)) or not isinstance(
        retention, (int, float, np.number)
    ):
        raise DPFastTypeError(f"{option('retention')} must be a number, got {quoted(retention)}")
    value = float(retention)
    if not 0.0 <= value < 1.0:
        raise DPFastValueError(
            f"{option('retention')} must be in [0, 1), got {quoted(retention)}; 1 would release "
            "the "
            "data unchanged"
        )
    return value


def check_share(value: Any, name: str) -> float:
    """Check a share: a number in ``[0, 1]`` (``0.1`` for 10 %)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise DPFastTypeError(f"{option(name)} must be a number in [0, 1], got {quoted(value)}")
    share = float(value)
    if not 0.0 <= share <= 1.0:
        raise DPFastValueError(
            f"{option(name)} must be a share in [0, 1] (0.1 for 10%), got {quoted(value)}"
        )
    return share


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (NumPy booleans too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise DPFastTypeError(f"{option(name)} must be True or False, got {quoted(value)}")
    return bool(value)


def check_threads(n_threads: Any, default: int) -> int:
    """Check a thread count: ``None`` (use ``default``, at least 1) or an integer >= 1."""
    if n_threads is None:
        return max(1, default)
    name = option("n_threads")
    value = check_int(n_threads, name)
    if value < 1:
        or_none = "" if in_cli() else " or None"
        raise DPFastValueError(f"{name} must be >= 1{or_none}, got {value}")
    return value


def check_seed(seed: Any) -> int | None:
    """Check a seed: ``None`` (secure noise) or a non-negative integer."""
    if seed is None:
        return None
    name = option("seed")
    value = check_int(seed, name)
    if value < 0:
        secure = "; leave it out for secure noise" if in_cli() else " or None"
        raise DPFastValueError(f"{name} must be a non-negative integer{secure}, got {value}")
    return value


def check_columns(
    columns: Any, names: Sequence[Hashable], *, name: str = "columns"
) -> list[Hashable]:
    """Resolve ``columns`` (``None`` means all) against the table's column names.

    ``name`` is the keyword the caller gave them as (``columns``, or ``column``).
    """
    if columns is None:
        return list(names)
    if isinstance(columns, (str, int)) and not isinstance(columns, bool):
        columns = [columns]
    if not isinstance(columns, Iterable):
        raise DPFastTypeError(
            f"{option(name)} must be a list of column names or None, got {quoted(columns)}"
        )
    selected = list(columns)
    known = set(names)
    unknown = [c for c in selected if c not in known]
    if unknown:
        raise DPFastValueError(
            f"unknown column(s) {quoted(unknown)} in {option(name)}; the table has columns "
            f"{quoted(list(names))}"
        )
    if len(set(selected)) != len(selected):
        raise DPFastValueError(f"{option(name)} lists a column twice: {quoted(selected)}")
    if not selected:
        every = "" if in_cli() else ", or pass None for every column"
        raise DPFastValueError(
            f"{option(name)} is empty; name at least one column to protect{every}"
        )
    return selected


def check_unique_names(names: Sequence[Hashable], where: str, fix: str) -> None:
    """Refuse a table whose columns do not each have a name of their own.

    ``where`` names the table (``"the DataFrame"``, a file), ``fix`` says how to rename
    the repeated columns there. Every column named twice or more is listed.
    """
    counts: dict[Hashable, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    repeated = [(name, count) for name, count in counts.items() if count > 1]
    if repeated:
        shown = join_listed(
            [f"{count} columns named {quoted(name)}" for name, count in repeated[:QUOTED_VALUES]],
            len(repeated),
        )
        raise DPFastValueError(
            f"{where} has {shown}; each column needs a name of its own (a release and its "
            f"report name every column): {fix}"
        )


def all_finite(block: np.ndarray) -> bool:
    """Whether a float64 block holds no NaN or infinity, read in memory order in one pass.

    A C-ordered 2-D table is checked here once instead of column by column, which would
    read the whole table once per column through strided access.
    """
    if block.dtype != np.float64 or not block.flags.c_contiguous:
        return False
    count, _ = checks.non_finite(kernel_floats(block.reshape(-1)))
    return bool(count == 0)


def as_numeric_column(
    values: np.ndarray, name: Hashable, *, known_finite: bool = False
) -> np.ndarray:
    """Return a protected column as float64 (no copy when it already is), refusing bad values.

    ``known_finite`` skips the scan when the caller has checked the whole table.

    Raises
    ------
    TypeError
        If the column is not numeric.
    ValueError
        If it holds NaN, missing values or infinities.
    """
    if values.dtype.kind in "mM":
        raise not_numeric_error(name, values.dtype)
    if values.dtype == object or not (
        np.issubdtype(values.dtype, np.number) or values.dtype == np.bool_
    ):
        raise DPFastTypeError(
            f"column {quoted(name)} must be numeric to be protected, got dtype {values.dtype}; "
            f"convert it, or leave it out of {option('columns')}"
        )
    if np.issubdtype(values.dtype, np.complexfloating):
        raise DPFastTypeError(
            f"column {quoted(name)} is complex; only real numbers can be protected"
        )
    floats = kernel_floats(values)
    if known_finite:
        return floats
    count, first = checks.non_finite(floats)
    if count:
        raise non_finite_error(name, count, first, bool(np.isnan(floats[first])))
    return floats


def kernel_floats(values: Any) -> np.ndarray:
    """Return ``values`` as float64, read-only: the kernels' array type, without a copy.

    A kernel compiles once per type signature, and an array's writability is part of it
    (an Arrow or a read-only NumPy input is read-only): a read-only view gives every input
    the same one. A column of a C-ordered 2-D array stays a strided view (copying it would
    cost a copy of the table); its signature is the other one ``dpfast warm-up`` compiles.
    No copy when ``values`` is already float64; never a write to ``values``.

    >>> matrix = np.arange(6.0).reshape(3, 2)
    >>> column = kernel_floats(matrix[:, 1])
    >>> np.shares_memory(column, matrix), column.flags.writeable
    (True, False)
    >>> kernel_floats(np.arange(3)).dtype
    dtype('float64')
    """
    floats = np.asarray(values, dtype=np.float64).view()
    floats.flags.writeable = False
    return floats


def non_finite_error(name: Hashable, count: int, first: int, nan: bool) -> ValueError:
    """Return the error of a column with ``count`` non-finite values, the first at row ``first``."""
    kind = "NaN or missing" if nan else "infinite"
    return DPFastValueError(
        f"column {quoted(name)} has {count} non-finite value(s) (first at row {first}: "
        f"{kind}); drop or impute them with a public rule before the release"
    )


def not_numeric_error(name: Hashable, dtype: Any) -> TypeError:
    """Return the error of a column of ``dtype`` protected as numeric (a taxonomy would do).

    Durations and times (``timedelta64``, ``datetime64``) are refused too: a release would
    give them back as bare integers of an internal unit.
    """
    if getattr(dtype, "kind", "") in ("m", "M"):
        what, fix = ("durations", "dt.total_seconds()") if dtype.kind == "m" else ("times", "")
        return DPFastTypeError(
            f"column {quoted(name)} holds {what} ({dtype}), which a release would return as "
            f"bare integers of its internal unit; convert it to numbers in a unit you choose "
            f"(e.g. {fix or 'days since a public date'}) and give its bounds in that unit, or "
            f"leave it out of {option('columns')}"
        )
    where = 'give it a "taxonomy" in the schema' if in_cli() else "pass its taxonomy in taxonomies="
    return DPFastTypeError(
        f"column {quoted(name)} must be numeric to be protected, got dtype {dtype}; "
        f"{where} to protect it as a categorical column, or leave it out of "
        f"{option('columns')}"
    )


def is_integer_column(values: np.ndarray) -> bool:
    """Whether a column's dtype is integer (its released values are rounded)."""
    return bool(np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_)


def check_bounds(
    bounds: Any,
    columns: Sequence[Hashable],
    data_columns: Mapping[Hashable, np.ndarray] | Callable[[Hashable], tuple[float, float]],
    names: Sequence[Hashable] | None = None,
) -> tuple[dict[Hashable, tuple[float, float]], bool]:
    """Resolve the public domain ``(lower, upper)`` of every protected column.

    Parameters
    ----------
    bounds : mapping or "data"
        ``{column: (lower, upper)}``. The string ``"data"`` derives bounds from the data
        with the paper's convention (``upper = 1.5 * max``, ``lower = 0`` for non-negative
        columns, else ``min - 0.5 * max|x|``); this is not private and warns.
    columns : sequence
        The protected columns.
    data_columns : mapping or callable
        The protected columns' float64 values, or a function giving a column's
        ``(min, max)`` (only used when ``bounds == "data"``).
    names : sequence, optional
        The table's columns: a ``bounds`` key that names none of them is refused (a
        misspelt name would otherwise be ignored); unprotected columns' keys are accepted.

    Returns
    -------
    dict, bool
        The bounds, and whether they were derived from the data.
    """
    if isinstance(bounds, str) and bounds == "data":
        warnings.warn(
            "bounds='data' derives the domain from the data itself: the release is NOT "
            "differentially private; pass public bounds instead",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        return {name: _from_data(name, data_columns) for name in columns}, True
    if bounds is None:
        raise DPFastValueError(
            "bounds are required: pass public bounds={column: (lower, upper)} for every "
            f"protected column {quoted(list(columns))}"
        )
    if not isinstance(bounds, Mapping):
        raise DPFastTypeError(
            f"bounds must be a mapping {{column: (lower, upper)}}, got {quoted(bounds)}"
        )
    stray = [key for key in bounds if names is not None and key not in set(names)]
    if stray and names is not None:
        close = did_you_mean(stray[0], map(str, names)) if isinstance(stray[0], str) else ""
        raise DPFastValueError(
            f"bounds names {quoted(stray, listed=True)}, which the table does not have; "
            f"{close}fix the name or remove it (the table's columns: "
            f"{quoted(list(names), listed=True)})"
        )
    missing = [c for c in columns if c not in bounds]
    if missing:
        raise DPFastValueError(
            f"no bounds for protected column(s) {quoted(missing)}; add them to bounds as "
            "(lower, upper) public limits, or leave these columns out of columns"
        )
    result: dict[Hashable, tuple[float, float]] = {}
    for name in columns:
        pair = bounds[name]
        if not isinstance(pair, (tuple, list, np.ndarray)) or len(pair) != 2:
            hint = ""
            if type(pair).__name__ == "DPBounds":  # dpfast.schema's, a layer above this one
                hint = "; bounds chosen with DP are taken by ir_dp, mdav_dp and laplace_dp"
            raise DPFastValueError(
                f"bounds[{quoted(name)}] must be a pair (lower, upper), got {quoted(pair)}{hint}"
            )
        try:
            lower, upper = float(pair[0]), float(pair[1])
        except (TypeError, ValueError) as exc:
            raise DPFastTypeError(
                f"bounds[{quoted(name)}] must hold two numbers, got {quoted(pair)}"
            ) from exc
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise DPFastValueError(f"bounds[{quoted(name)}] must be finite, got {quoted(pair)}")
        if lower > upper:
            raise DPFastValueError(
                f"bounds[{quoted(name)}] is inverted: lower {lower} > upper {upper}; swap them"
            )
        result[name] = (lower, upper)
    return result, False


def _from_data(name: Hashable, data: Any) -> tuple[float, float]:
    """Return a column's bounds from its values: ``bounds="data"``'s convention."""
    lo, hi = data(name) if callable(data) else (float(data[name].min()), float(data[name].max()))
    low = 0.0 if lo >= 0 else lo - 0.5 * max(abs(lo), abs(hi))
    return low, 1.5 * hi if hi > 0 else 0.0
