"""Equivalence classes of quasi-identifiers: sizes, sample uniques, a k-anonymity check.

See docs/risk.md#uniqueness.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpfast._kernels import frequencies as _kernels
from dpfast._validation import check_columns, check_int, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.io import TableData
from dpfast.risk._common import as_table, dpfast_errors, json_name, release_data

#: Combined keys stay below this, so that ``key * cardinality + code`` cannot overflow.
_KEY_LIMIT = 1 << 62


@dataclass(frozen=True)
class Uniqueness:
    """Equivalence classes of a table's quasi-identifier combinations.

    Attributes
    ----------
    quasi_identifiers : list
        The columns whose combinations of values form the classes, as checked.
    k : int
        The class size checked (``>= 1``).
    class_sizes : ndarray of int64, shape (n,)
        Each record's class size ``f_k``: the records sharing its combination of values
        (sdcMicro's ``freqCalc(...)$fk``).
    n_records : int
        Rows of the table.
    n_classes : int
        Distinct combinations of the quasi-identifiers' values.
    sample_uniques : int
        Records alone in their class (``f_k = 1``).
    records_below_k : int
        Records in classes smaller than ``k``.
    share_below_k : float
        ``records_below_k / n_records``: 0 means the table is k-anonymous on these columns.
    smallest_class : int
        The size of the smallest class (the table is k-anonymous for every ``k`` up to it).

    Examples
    --------
    >>> import pandas as pd
    >>> from dpfast import risk
    >>> people = pd.DataFrame({"sex": ["f", "f", "m", "m"], "age": [30, 30, 41, 52]})
    >>> got = risk.uniqueness(people, ["sex", "age"], k=2)
    >>> got.n_classes, got.smallest_class, got.records_below_k
    (3, 1, 2)
    >>> got.as_dict()["share_below_k"]
    0.5
    """

    quasi_identifiers: list[Hashable]
    k: int
    class_sizes: np.ndarray
    n_records: int
    n_classes: int
    sample_uniques: int
    records_below_k: int
    share_below_k: float
    smallest_class: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-record class sizes)."""
        return {
            "quasi_identifiers": [json_name(name) for name in self.quasi_identifiers],
            "k": self.k,
            "n_records": self.n_records,
            "n_classes": self.n_classes,
            "sample_uniques": self.sample_uniques,
            "records_below_k": self.records_below_k,
            "share_below_k": self.share_below_k,
            "smallest_class": self.smallest_class,
        }


def _column_codes(table: TableData, name: Hashable) -> tuple[np.ndarray, int]:
    """Dense int64 codes ``0 .. c-1`` of a column's values, and ``c``; missing refused."""
    if table.kind == "numpy":  # factorized as numbers, not as Python objects
        codes, uniques = pd.factorize(table.column(name), use_na_sentinel=True)
        codes, cardinality = np.asarray(codes, dtype=np.int64), len(uniques)
    else:
        with dpfast_errors():
            codes, categories = table.category_codes(name)
        cardinality = len(categories)
    missing = np.flatnonzero(codes < 0)
    if missing.size:
        raise DPFastValueError(
            f"quasi-identifier {quoted(name)} has {missing.size} missing value(s) (first at row "
            f"{missing[0]}); give them a value of their own (e.g. 'unknown') or drop those rows"
        )
    return codes, max(cardinality, 1)


def _dense(key: np.ndarray) -> tuple[np.ndarray, int]:
    codes, uniques = pd.factorize(key)
    return np.asarray(codes, dtype=np.int64), len(uniques)


def class_keys(table: TableData, names: list[Hashable]) -> tuple[np.ndarray, int]:
    """One int64 key per record, equal exactly for equal combinations, in ``[0, span)``.

    Keys are mixed-radix numbers of the columns' codes, renumbered densely whenever the
    next column could overflow them.
    """
    key: np.ndarray | None = None
    span = 1
    for name in names:
        codes, cardinality = _column_codes(table, name)
        if key is None:
            key, span = np.array(codes, dtype=np.int64), cardinality
            continue
        if span > _KEY_LIMIT // cardinality:
            key, span = _dense(key)
        key *= cardinality
        key += codes
        span *= cardinality
    assert key is not None
    return key, span


def uniqueness(table: Any, quasi_identifiers: Any, *, k: int) -> Uniqueness:
    """Equivalence-class sizes, sample uniques and the share of records in classes below k.

    Records with equal values on every quasi-identifier form an equivalence class; a
    record in a class of size ``f_k`` hides among ``f_k`` records of the table. The table
    is k-anonymous on these columns when no class is smaller than ``k``
    (``share_below_k == 0``). Works on any table, original or released; values compare
    exactly (strings, categories and numbers alike). See docs/risk.md#uniqueness.

    Parameters
    ----------
    table : table
        Any table dpfast reads, or a :class:`dpfast.Release` (its data; any row order).
    quasi_identifiers : list
        The columns an intruder could know about a person (age, sex, region...).
    k : int
        The class size to check, >= 1.

    Returns
    -------
    Uniqueness

    Raises
    ------
    ValueError
        Unknown or repeated columns, missing values, ``k < 1``, an empty table (all also
        ``dpfast.exceptions.DPFastError``).

    References
    ----------
    sdcMicro's ``freqCalc`` (Templ, Kowarik and Meindl 2015); Sweeney (2002), k-anonymity.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpfast import risk
    >>> people = pd.DataFrame({"sex": ["f", "f", "m", "m", "m"], "age": [30, 30, 41, 41, 52]})
    >>> got = risk.uniqueness(people, ["sex", "age"], k=2)
    >>> got.class_sizes.tolist(), got.sample_uniques, got.share_below_k
    ([2, 2, 2, 2, 1], 1, 0.2)
    """
    data = as_table(release_data(table, "uniqueness", aligned=False), "table")
    with dpfast_errors():
        names = check_columns(quasi_identifiers, data.names, name="quasi_identifiers")
        k = check_int(k, "k", low=1)
    if data.n_rows == 0:
        raise DPFastValueError("the table is empty (0 rows); uniqueness needs at least one row")
    key, span = class_keys(data, names)
    if span <= max(4 * data.n_rows, 1 << 20):
        counts = np.bincount(key, minlength=span)
        sizes, n_classes = counts[key], int(np.count_nonzero(counts))
    else:  # sparse keys: a hash table instead of a histogram of every possible key
        sizes, n_classes = _kernels.class_sizes(key)
    below = int(np.count_nonzero(sizes < k))
    return Uniqueness(
        names,
        k,
        sizes,
        data.n_rows,
        int(n_classes),
        int(np.count_nonzero(sizes == 1)),
        below,
        below / data.n_rows,
        int(sizes.min()),
    )
