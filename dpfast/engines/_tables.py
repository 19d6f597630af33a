"""What the in-memory engine does with a table's columns besides its primitives.

Coding a column by a public domain and back (:func:`encode`), and the warning that a
release in a new row order drops the input's pandas index (:func:`warn_index_dropped`).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dpfast._kernels import mechanisms as mechanism_kernels
from dpfast._validation import option, quoted
from dpfast.engines.values import check_in_domain, code_dtype
from dpfast.exceptions import IndexDroppedWarning
from dpfast.io import TableData

__all__ = ["encode", "warn_index_dropped"]


def encode(table: TableData, name: Hashable, domain: list[Any]) -> tuple[np.ndarray, Any]:
    """Codes of column ``name`` in ``domain``, and a function turning codes into the column.

    A pandas categorical is recoded by its categories (one pass over its codes); any
    other column is looked up value by value. A categorical (pandas, or an Arrow or
    polars dictionary of text) comes back as one (:meth:`TableData.categorical_output`:
    the categories its type declares, else ``domain``), any other column as ``domain``'s
    values. Refuses missing values and values outside the domain (:func:`check_in_domain`).
    """
    index = pd.Index(domain)
    dtype = code_dtype(len(domain))
    series = table.source[name] if table.kind == "pandas" else None
    if series is not None and isinstance(series.dtype, pd.CategoricalDtype):
        mapping = index.get_indexer(series.cat.categories).astype(np.int64)
        codes = np.empty(len(series), dtype=dtype)
        raw = series.cat.codes.to_numpy()
        missing, first = mechanism_kernels.map_codes(raw, mapping, codes)
        outside = []
        if first >= 0:  # the error path: name every category outside the domain
            unmapped = np.unique(raw[(raw >= 0) & (mapping[np.maximum(raw, 0)] < 0)])
            outside = [series.cat.categories[c] for c in unmapped]

        def decode(new: np.ndarray) -> Any:
            return table.categorical_output(name, new, domain)

    else:
        values = table.column(name)
        codes = index.get_indexer(values)
        bad = codes < 0
        missing = int(pd.isna(values[bad]).sum()) if bad.any() else 0
        outside = list(pd.unique(values[bad & ~pd.isna(values)])) if bad.any() else []
        labels = np.asarray(domain)
        if labels.dtype.kind in "USO":
            labels = np.asarray(domain, dtype=object)
        as_dictionary = _is_text_dictionary(table, name, domain)

        def decode(new: np.ndarray) -> Any:
            return table.categorical_output(name, new, domain) if as_dictionary else labels[new]

    check_in_domain(name, int(missing), outside)
    return np.ascontiguousarray(codes, dtype=dtype), decode


def _is_text_dictionary(table: TableData, name: Hashable, domain: list[Any]) -> bool:
    """Whether a column is an Arrow (or polars) dictionary coded by a domain of text."""
    if table.kind in ("pandas", "numpy"):
        return False
    kind = table.source.column(name).type
    return bool(pa.types.is_dictionary(kind) and all(isinstance(v, str) for v in domain))


def warn_index_dropped(index: Any) -> None:
    """Warn that a release in a new row order gives its rows a fresh index, and why.

    The caller's index cannot follow its rows there: output row ``i`` would then show
    which input row it came from, the permutation the release hides.
    """
    shown = type(index).__name__ + ("" if index.name is None else f" {quoted(index.name)}")
    message = (
        f"the input's index ({shown}) is dropped: this release puts the rows (or its "
        "unprotected columns) in a new random order, which the index would undo by showing "
        "where each output row came from; the output gets a fresh RangeIndex. To release the "
        "labels, make them a column first (frame.reset_index()): like every unprotected "
        f"column it is then released as {option('unprotected')} says "
        f"({option('unprotected', 'shuffle')}: in an order of its own)."
    )
    warnings.warn(message, IndexDroppedWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """Return the ``stacklevel`` of the first frame outside dpfast, for a warning here."""
    frame = sys._getframe(2)
    level = 2
    while frame.f_back is not None and _in_dpfast(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    return level


def _in_dpfast(module: str) -> bool:
    return module == "dpfast" or module.startswith("dpfast.")
