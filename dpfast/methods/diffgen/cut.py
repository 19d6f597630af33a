"""The final cut of a DiffGen release, and how to generalise new data with it."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast._validation import as_numeric_column, quoted
from dpfast.exceptions import DPFastKeyError, DPFastTypeError, DPFastValueError
from dpfast.io import as_table_data, build_table
from dpfast.taxonomy import Taxonomy


@dataclass(frozen=True)
class CutColumn:
    """The cut of one predictor: its generalised values in display order.

    Attributes
    ----------
    name : hashable
        The column.
    labels : tuple of str
        The generalised values: intervals ``[lo, hi)`` in ascending order for numeric
        columns, taxonomy labels in the taxonomy's depth-first order for categorical ones.
    edges : ndarray of float64 or None
        Numeric columns: the lower end of each interval (ascending).
    bounds : (float, float) or None
        Numeric columns: the public bounds; values outside are clamped before they are
        generalised.
    taxonomy : Taxonomy or None
        Categorical columns: the taxonomy.
    leaf_position : ndarray of int64 or None
        Categorical columns: the position in ``labels`` of each leaf (domain code).

    Examples
    --------
    A release builds its cut's columns; one by hand:

    >>> age = CutColumn("age", ("[17, 50)", "[50, 90)"), edges=np.array([17.0, 50.0]),
    ...                 bounds=(17.0, 90.0))
    >>> age.is_numeric, age.labels[1]
    (True, '[50, 90)')
    """

    name: Hashable
    labels: tuple[str, ...]
    edges: np.ndarray | None = None
    bounds: tuple[float, float] | None = None
    taxonomy: Taxonomy | None = None
    leaf_position: np.ndarray | None = None

    @property
    def is_numeric(self) -> bool:
        """Whether the column is numeric (generalised to intervals)."""
        return self.edges is not None

    def positions(self, table: Any) -> np.ndarray:
        """Position in :attr:`labels` of every row's value (``int64``)."""
        if self.edges is not None:
            assert self.bounds is not None
            values = as_numeric_column(table.column(self.name), self.name)
            clipped = np.clip(values, *self.bounds)
            return np.searchsorted(self.edges, clipped, side="right").astype(np.int64) - 1  # type: ignore[no-any-return]
        assert self.taxonomy is not None and self.leaf_position is not None
        codes, categories = table.category_codes(self.name)
        leaves = self.taxonomy.encode_categories(codes, categories, column=self.name)
        return self.leaf_position[leaves]  # type: ignore[no-any-return]


class Cut:
    """The final cut (the union of the ``Cut_i``) of a DiffGen release.

    See docs/design.md#diffgen-tree.

    Apply it to new data (a test set) to generalise it exactly as the released table.

    Attributes
    ----------
    columns : tuple of CutColumn
        One per predictor, in the table's column order.
    target : hashable
        The class column.

    Examples
    --------
    >>> import pandas as pd
    >>> age = CutColumn("age", ("[17, 50)", "[50, 90)"), edges=np.array([17.0, 50.0]),
    ...                 bounds=(17.0, 90.0))
    >>> cut = Cut([age], target="income")
    >>> cut, cut["age"], cut.n_cells
    (Cut(age: 2), ('[17, 50)', '[50, 90)'), 2)
    >>> test = pd.DataFrame({"age": [20, 60, 95], "income": ["<=50K", ">50K", ">50K"]})
    >>> cut.apply(test)["age"].tolist()  # 95 is clamped to the bound 90
    ['[17, 50)', '[50, 90)', '[50, 90)']
    """

    def __init__(self, columns: list[CutColumn], target: Hashable) -> None:
        self.columns = tuple(columns)
        self.target = target

    def __repr__(self) -> str:
        sizes = ", ".join(f"{c.name}: {len(c.labels)}" for c in self.columns)
        return f"Cut({sizes})"

    def __getitem__(self, name: Hashable) -> tuple[str, ...]:
        """Return the generalised values of column ``name``."""
        for column in self.columns:
            if column.name == name:
                return column.labels
        raise DPFastKeyError(name)

    @property
    def n_cells(self) -> int:
        """Number of leaf partitions: the product of the cut sizes."""
        return int(np.prod([len(c.labels) for c in self.columns], dtype=np.int64))

    def to_dict(self) -> dict[str, list[str]]:
        """``{column: [generalised values]}`` as plain Python objects."""
        return {str(c.name): list(c.labels) for c in self.columns}

    def apply(self, data: Any) -> Any:
        """Generalise ``data`` with this cut.

        Parameters
        ----------
        data : pandas.DataFrame or pyarrow.Table
            Must hold every predictor. Numeric values are clamped to the public bounds;
            categorical values must be leaves of their taxonomy.

        Returns
        -------
        pandas.DataFrame or pyarrow.Table
            Of the same kind: the predictors as categorical columns whose categories are
            the cut's values (as in the release's ``counts``), then the target column
            unchanged if ``data`` has it. Other columns are dropped.

        Raises
        ------
        TypeError, ValueError
            A missing column, a non-numeric or NaN value in a numeric predictor, or a
            categorical value missing from its taxonomy.
        """
        table = as_table_data(data)
        if table.kind == "numpy":
            raise DPFastTypeError("Cut.apply needs a pandas DataFrame or a pyarrow Table")
        missing = [c.name for c in self.columns if c.name not in table.names]
        if missing:
            raise DPFastValueError(
                f"the data lack predictor column(s) {quoted(missing)}; the cut generalises "
                f"{quoted([c.name for c in self.columns])}"
            )
        out: dict[Any, Any] = {}
        for column in self.columns:
            out[column.name] = (column.positions(table), column.labels)
        if self.target in table.names:
            # a copy: build_table keeps the arrays it is given, and this one may be a view
            # of the caller's data
            out[self.target] = np.array(table.column(self.target), copy=True)
        return build_table(table.kind, out)
