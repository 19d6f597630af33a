"""A target's classes and the coded columns' class counts: DiffGen's and randomized response's.

Three steps, each one function over the dataflow (docs/engines.md, "DiffGen out of core"):
:func:`occurring_values` (DiffGen's labels, when none are declared), :func:`class_codes`
(through a public lookup) and :func:`contingency` (refined by DiffGen's cuts,
:class:`~dpfast.dataflow.values.Contingency`).

Held (``flow.holds``), each column is coded whole from the table's own category codes and the
records refined into a tree of partitions (docs/design.md#diffgen-tree): a label's records
are the leaf partitions under the tree nodes listed for it (``Link_v``); relabelling them
splits each such leaf by the records' codes in one scan
(:func:`dpfast._kernels.contingency.split_partitions`) that also counts their (code, class)
pairs. So a split costs O(records of the label), the cells' counts are read off the leaves
at the end, and only partitions holding records are stored. Elsewhere the steps are passes
whose counts are added where the batches are read (:mod:`dpfast.steps.coded_passes`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from dpfast._kernels import contingency as kernels
from dpfast.dataflow.flow import Dataflow
from dpfast.dataflow.values import (
    CategoricalColumn,
    Classes,
    CodedNumeric,
    Contingency,
    Lookup,
)
from dpfast.steps.coded_passes import CodedPasses, clamped, found_classes, occurring

__all__ = [
    "HeldContingency",
    "Partitions",
    "class_codes",
    "contingency",
    "occurring_values",
]


def occurring_values(flow: Dataflow, name: Hashable) -> list[Any]:
    """Return the values that occur in column ``name`` (not its missing values): one pass."""
    if flow.table is None:
        return CodedPasses(flow).occurring_values(name)
    return occurring(*flow.table.category_codes(name))


def class_codes(flow: Dataflow, name: Hashable, lookup: Lookup) -> Classes:
    """Return target ``name``'s classes through ``lookup``: one pass.

    The :class:`~dpfast.dataflow.values.Classes` count the missing values and list the
    values outside the lookup; only when there are none do they give the classes (held:
    every row's, int64; else a function coding a batch's, run again by each later pass).
    """
    if flow.table is None:
        return CodedPasses(flow).class_codes(name, lookup)
    codes, categories = flow.table.category_codes(name)
    missing, unknown, table = found_classes(codes, categories, lookup)
    if missing or unknown:
        return Classes(lookup.size, missing, [] if missing else unknown)
    return Classes(lookup.size, 0, [], np.ascontiguousarray(table[codes], dtype=np.int64))


def contingency(
    flow: Dataflow, classes: Classes, columns: Sequence[CodedNumeric | CategoricalColumn]
) -> Contingency:
    """Return the coded columns' (code, class) counts, to be refined by DiffGen's cuts.

    ``classes`` come from :func:`class_codes` on the same dataflow. Held, each column is
    coded whole (a numeric column coded by rank through one ``np.unique``); else a pass
    collects the distinct values of each column coded by rank, and one pass (or one per
    group of columns whose counts fit the memory limit) counts them all.
    """
    if flow.table is None:
        return CodedPasses(flow).contingency(classes, columns)
    codes, n_codes, code_values, clamped = [], [], [], []
    for column in columns:
        if isinstance(column, CategoricalColumn):
            coded, values, found = column.codes, None, 0
            n_codes.append(len(column.taxonomy.domain))
        else:
            coded, values, found = _numeric_codes(column)
            n_codes.append(int(values.shape[0]))
        codes.append(coded)
        code_values.append(values)
        clamped.append(found)
    return HeldContingency(classes.codes, classes.size, codes, n_codes, code_values, clamped)


def _numeric_codes(column: CodedNumeric) -> tuple[np.ndarray, np.ndarray, int]:
    """Return a held numeric column's codes, its code values and its clamped count."""
    clipped, found = clamped(column.column.values, column)
    lower, upper = column.lower, column.upper
    if column.by_offset:
        codes = (clipped - lower).astype(np.int64)
        return codes, np.arange(lower, upper + 1, dtype=np.float64), found
    code_values, inverse = np.unique(clipped, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), code_values, found


class Partitions:
    """Flat arrays of the partition tree (see :mod:`dpfast._kernels.contingency`).

    ``split_column[p]`` is the column on which node ``p``'s children differ (``-1`` for a
    leaf) and ``node_value[c]`` child ``c``'s label on it, so a leaf's labels are read
    along its path from the root (whose labels are ``root_values``).
    """

    def __init__(self, n_rows: int, root_values: np.ndarray) -> None:
        capacity = 64
        self.size = 1
        self.root_values = root_values
        self.start = np.zeros(capacity, dtype=np.int64)
        self.end = np.zeros(capacity, dtype=np.int64)
        self.end[0] = n_rows
        self.first_child = np.full(capacity, -1, dtype=np.int64)
        self.n_children = np.zeros(capacity, dtype=np.int64)
        self.split_column = np.full(capacity, -1, dtype=np.int64)
        self.node_value = np.full(capacity, -1, dtype=np.int64)
        self.max_children = 1

    def _reserve(self, extra: int) -> None:
        need = self.size + extra
        capacity = self.start.shape[0]
        if need <= capacity:
            return
        capacity = max(need, 2 * capacity)

        def grown(old: np.ndarray, fill: int) -> np.ndarray:
            new = np.full(capacity, fill, dtype=np.int64)
            new[: self.size] = old[: self.size]
            return new

        self.start = grown(self.start, 0)
        self.end = grown(self.end, 0)
        self.first_child = grown(self.first_child, -1)
        self.n_children = grown(self.n_children, 0)
        self.split_column = grown(self.split_column, -1)
        self.node_value = grown(self.node_value, -1)

    def leaves(self, nodes: np.ndarray) -> np.ndarray:
        """Return the leaves under ``nodes``."""
        return kernels.expand_leaves(  # type: ignore[no-any-return]
            nodes, self.first_child[: self.size], self.n_children[: self.size]
        )

    def split(
        self,
        leaves: np.ndarray,
        kids: np.ndarray,
        child: np.ndarray,
        new_start: np.ndarray,
        new_end: np.ndarray,
        column: int,
        child_ids: np.ndarray,
    ) -> int:
        """Add the non-empty children of ``leaves`` (``split_partitions``); return the first id."""
        count = child.shape[0]
        self._reserve(count)
        base = self.size
        stop = base + count
        self.start[base:stop] = new_start
        self.end[base:stop] = new_end
        self.node_value[base:stop] = child_ids[child]
        self.first_child[leaves] = base + np.cumsum(kids) - kids
        self.n_children[leaves] = kids
        self.split_column[leaves] = column
        self.size = stop
        self.max_children = max(self.max_children, child_ids.shape[0])
        return base

    def leaf_cells(
        self, position: np.ndarray, strides: np.ndarray, depth: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return every leaf and its cell (its labels' positions times the strides)."""
        n = self.size
        return kernels.leaf_cells(  # type: ignore[no-any-return]
            self.first_child[:n],
            self.n_children[:n],
            self.split_column[:n],
            self.node_value[:n],
            self.root_values,
            position,
            strides,
            (depth + 1) * self.max_children + 2,
        )


class HeldContingency(Contingency):
    """Coded columns and classes held whole (:class:`~dpfast.dataflow.values.Contingency`).

    ``codes[j]`` is column ``j``'s int64 codes, ``classes`` every record's class (int64);
    :meth:`start` builds the tree, whose ``order`` holds the rows by partition.
    """

    def __init__(
        self,
        classes: np.ndarray,
        n_classes: int,
        codes: list[np.ndarray],
        n_codes: list[int],
        code_values: list[np.ndarray | None],
        clamped: list[int],
    ) -> None:
        super().__init__(n_classes, n_codes, code_values, clamped)
        self.classes = classes
        self.codes = codes
        self.order = np.empty(0, dtype=np.int64)
        self.partitions: Partitions | None = None
        self.link: dict[int, np.ndarray] = {}
        self.depth = 0

    def counts(self, column: int) -> np.ndarray:
        """Return the column's (code, class) counts over every record."""
        return kernels.class_histogram(  # type: ignore[no-any-return]
            self.codes[column], self.classes, self.n_codes[column], self.n_classes
        )

    def start(self, labels: Sequence[int]) -> None:
        """One leaf holding every record, linked to every first label."""
        n_rows = self.classes.shape[0]
        self.order = np.arange(n_rows, dtype=np.int64)
        self.partitions = Partitions(n_rows, np.array(labels, dtype=np.int64))
        self.link = {int(label): np.zeros(1, dtype=np.int64) for label in labels}
        self.depth = 0

    def split(
        self, column: int, label: int, child_of: np.ndarray, offset: int, children: np.ndarray
    ) -> np.ndarray:
        """Split the label's leaf partitions by child in one scan; link each child to its own."""
        parts = self.partitions
        assert parts is not None
        leaves = parts.leaves(self.link.pop(label))
        k = children.shape[0]
        kids_per_leaf, child, new_start, new_end, hist = kernels.split_partitions(
            self.order,
            leaves,
            parts.start,
            parts.end,
            self.codes[column],
            self.classes,
            child_of,
            offset,
            k,
            child_of.shape[0],
            self.n_classes,
        )
        base = parts.split(leaves, kids_per_leaf, child, new_start, new_end, column, children)
        for c in range(k):
            self.link[int(children[c])] = base + np.flatnonzero(child == c)
        self.depth += 1
        return hist  # type: ignore[no-any-return]

    def cells(self, position: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
        """Read each leaf's cell along its path, and its class counts off its records."""
        parts = self.partitions
        assert parts is not None
        n_cells = math.prod(sizes)
        strides = np.ones(len(sizes), dtype=np.int64)
        for j in range(len(sizes) - 2, -1, -1):
            strides[j] = strides[j + 1] * sizes[j + 1]
        leaves, cell = parts.leaf_cells(position, strides, self.depth)
        counts = kernels.leaf_class_counts(
            self.order, leaves, parts.start, parts.end, self.classes, self.n_classes
        )
        if np.unique(cell).shape[0] != cell.shape[0]:
            raise AssertionError("the leaf partitions are not the product of the cuts")
        table = np.zeros((n_cells, self.n_classes), dtype=np.int64)
        table[cell] = counts
        return table
