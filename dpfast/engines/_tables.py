"""What the in-memory engine does with a table's columns besides its primitives."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from dpfast._validation import option, quoted
from dpfast.dataflow.row_outputs import decodes_to_dictionary, domain_labels
from dpfast.exceptions import IndexDroppedWarning
from dpfast.io import TableData

__all__ = ["decode", "warn_index_dropped"]


def decode(table: TableData, name: Hashable, codes: np.ndarray, domain: list[Any]) -> Any:
    """Return released ``codes`` of column ``name`` (indices into ``domain``) as the column.

    A categorical (pandas, or an Arrow or polars dictionary of text) comes back as one
    (:meth:`TableData.categorical_output`: the categories its type declares, else
    ``domain``), any other column as ``domain``'s values.
    """
    series = table.source[name] if table.kind == "pandas" else None
    categorical = series is not None and isinstance(series.dtype, pd.CategoricalDtype)
    if categorical or _is_text_dictionary(table, name, domain):
        return table.categorical_output(name, codes, domain)
    return domain_labels(domain)[codes]


def _is_text_dictionary(table: TableData, name: Hashable, domain: list[Any]) -> bool:
    """Whether a column is an Arrow (or polars) dictionary coded by a domain of text."""
    if table.kind in ("pandas", "numpy"):
        return False
    return decodes_to_dictionary(table.source.column(name).type, domain)


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
