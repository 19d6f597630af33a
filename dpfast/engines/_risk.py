"""Disclosure risk of a release held in memory, for the private part of the report.

The in-memory engine holds the original and every released column; it knows, per column,
which input row each output row came from (the permutation a shuffle drew). Risk is then
measured through the shuffle, each released value against its own source
(:func:`dpfast.risk.release_risk`, docs/risk.md#risk-at-release-time).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpfast.dataflow.values import inverse_permutation
from dpfast.io import TableData
from dpfast.taxonomy import Taxonomy


def released_columns(
    released: Mapping[Hashable, Any],
    codes: Mapping[Hashable, np.ndarray],
    taxonomies: Mapping[Hashable, Taxonomy],
    destinations: Mapping[Hashable, np.ndarray],
) -> tuple[dict[Hashable, Any], dict[Hashable, np.ndarray | None]]:
    """Return the protected columns in the output's order, and each one's source rows.

    ``destinations[name][i]`` is the output row of input row ``i`` (absent: row ``i``); a
    categorical column is read from its taxonomy codes, as a pandas Categorical.
    """
    values: dict[Hashable, Any] = {}
    sources: dict[Hashable, np.ndarray | None] = {}
    for name, column in released.items():
        if name in codes:
            labels = list(taxonomies[name].domain)
            values[name] = pd.Categorical.from_codes(codes[name], categories=labels)
        else:
            values[name] = column
        destination = destinations.get(name)
        sources[name] = None if destination is None else inverse_permutation(destination)
    return values, sources


def copied_columns(
    table: TableData, names: Sequence[Hashable], order: np.ndarray | None
) -> tuple[dict[Hashable, Any], dict[Hashable, np.ndarray | None]]:
    """Return the unprotected columns as released (input row ``order[r]`` at row ``r``).

    ``names`` may be the columns' names as text (a report's): each is read as the table's.
    """
    by_text = {str(name): name for name in table.names}
    values: dict[Hashable, Any] = {}
    for given in names:
        name = by_text.get(str(given), given)
        column = table.column(name)
        values[name] = column if order is None else column[order]
    return values, dict.fromkeys(values, order)


def computed_columns(
    columns: Mapping[Hashable, Any],
) -> tuple[dict[Hashable, Any], dict[Hashable, np.ndarray | None]]:
    """Return the columns of a table the method computed, ``(codes, labels)`` decoded.

    No column has source rows: a computed row stands for no one input record.
    """
    values = {
        name: pd.Categorical.from_codes(np.asarray(column[0]), categories=list(column[1]))
        if isinstance(column, tuple)
        else column
        for name, column in columns.items()
    }
    return values, {}
