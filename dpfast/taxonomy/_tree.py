"""The tree of a :class:`~dpfast.taxonomy.Taxonomy`: nodes, ancestor bitsets and codes.

:class:`_TaxonomyTree` holds the state of a taxonomy (built from ``{label: parent}``),
navigates the tree and maps data labels to domain codes. Distances live in
:mod:`dpfast.taxonomy._distance` and construction from files and mappings in
:mod:`dpfast.taxonomy._taxonomy`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpfast._kernels import taxonomy as _kernels
from dpfast._validation import quoted
from dpfast.exceptions import DPFastIndexError, DPFastTypeError, DPFastValueError


class TaxonomyError(DPFastValueError):
    """A taxonomy is not a valid tree, or data hold values it does not have."""


def _root_and_children(
    parents: Mapping[str, str | None], where: str
) -> tuple[str, dict[str, list[str]]]:
    """Return the root and each label's children; check there is one root, parents are nodes."""
    roots = sorted(label for label, p in parents.items() if p is None)
    if not roots:
        raise TaxonomyError(
            f"{where}: the taxonomy has no root: its generalisation chains form a cycle; "
            "every chain must end in the same top value, such as '*'"
        )
    if len(roots) != 1:
        raise TaxonomyError(
            f"{where}: a taxonomy needs exactly one root, found {len(roots)} "
            f"({quoted(roots, listed=True)}); make every generalisation chain end in the same "
            "top value, such as '*'"
        )
    children: dict[str, list[str]] = {label: [] for label in parents}
    for label, p in parents.items():
        if p is not None:
            if p not in children:
                raise TaxonomyError(
                    f"{where}: {quoted(label)} has parent {quoted(p)}, which is not a node"
                )
            children[p].append(label)
    return roots[0], children


def _breadth_first(
    parents: Mapping[str, str | None], root: str, children: Mapping[str, list[str]], where: str
) -> list[str]:
    """Return the labels numbered breadth-first from the root, children in label order.

    Nodes that are not reached lie on a cycle, which is an error.
    """
    order = [root]
    for label in order:
        order.extend(sorted(children[label]))
    if len(order) != len(parents):
        reached = set(order)
        stuck = sorted(label for label in parents if label not in reached)
        raise TaxonomyError(
            f"{where}: the taxonomy has a cycle through {quoted(stuck, listed=True)}; every chain "
            "of "
            "generalisations must end at the root"
        )
    return order


def _parents_and_depths(
    parents: Mapping[str, str | None], order: Sequence[str], index: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Return the parent node of each node (-1 for the root) and its depth (int64[n])."""
    n_nodes = len(order)
    parent = np.full(n_nodes, -1, dtype=np.int64)
    depth = np.zeros(n_nodes, dtype=np.int64)
    for i, label in enumerate(order):
        p = parents[label]
        if p is not None:
            parent[i] = index[p]
            depth[i] = depth[index[p]] + 1
    return parent, depth


def _ancestor_bits(parent: np.ndarray) -> np.ndarray:
    """Return each node's ancestors, itself included, as a bitset (uint64[n, words]).

    Parents must come before their children.
    """
    n_nodes = parent.shape[0]
    words = (n_nodes + 63) // 64
    bits = np.zeros((n_nodes, words), dtype=np.uint64)
    for i in range(n_nodes):
        if parent[i] >= 0:
            bits[i] = bits[parent[i]]
        bits[i, i // 64] |= np.uint64(1) << np.uint64(i % 64)
    return bits


class _TaxonomyTree:
    """Base of :class:`~dpfast.taxonomy.Taxonomy`: its state, the tree and the codes."""

    __slots__ = (
        "_bits",
        "_children",
        "_distance",
        "_index",
        "_leaf_code",
        "_leaves_under",
        "_marginality",
        "_order",
        "_rank",
        "depth",
        "domain",
        "labels",
        "leaf_nodes",
        "name",
        "parent",
    )

    labels: tuple[str, ...]
    parent: np.ndarray
    depth: np.ndarray
    domain: tuple[str, ...]
    leaf_nodes: np.ndarray
    name: str | None
    _index: dict[str, int]
    _children: tuple[tuple[int, ...], ...]
    _bits: np.ndarray
    _leaf_code: np.ndarray
    _leaves_under: tuple[np.ndarray, ...] | None
    _distance: np.ndarray | None
    _marginality: np.ndarray | None
    _order: np.ndarray | None
    _rank: np.ndarray | None

    def __init__(self, parents: Mapping[str, str | None], *, name: str | None = None) -> None:
        """Build from ``{label: parent label}`` (the root maps to ``None``); see from_edges."""
        where = name or "taxonomy"
        root, children = _root_and_children(parents, where)
        order = _breadth_first(parents, root, children, where)
        index = {label: i for i, label in enumerate(order)}
        parent, depth = _parents_and_depths(parents, order, index)
        bits = _ancestor_bits(parent)
        kids = tuple(tuple(index[c] for c in sorted(children[label])) for label in order)
        domain = tuple(sorted(label for label in order if not children[label]))
        leaf_nodes = np.array([index[label] for label in domain], dtype=np.int64)
        leaf_code = np.full(len(order), -1, dtype=np.int64)
        leaf_code[leaf_nodes] = np.arange(len(domain), dtype=np.int64)
        for array in (parent, depth, bits, leaf_nodes, leaf_code):
            array.setflags(write=False)
        set_ = object.__setattr__
        set_(self, "labels", tuple(order))
        set_(self, "parent", parent)
        set_(self, "depth", depth)
        set_(self, "domain", domain)
        set_(self, "leaf_nodes", leaf_nodes)
        set_(self, "name", name)
        set_(self, "_index", index)
        set_(self, "_children", kids)
        set_(self, "_bits", bits)
        set_(self, "_leaf_code", leaf_code)
        set_(self, "_leaves_under", None)
        set_(self, "_distance", None)
        set_(self, "_marginality", None)
        set_(self, "_order", None)
        set_(self, "_rank", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Taxonomy is immutable")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as ``{label: parent label}`` and the name: rebuilt, hence checked, on load.

        Engines send taxonomies to worker processes (docs/engines.md).
        """
        parents = {
            label: (None if self.parent[i] < 0 else self.labels[int(self.parent[i])])
            for i, label in enumerate(self.labels)
        }
        return _rebuild, (type(self), parents, self.name)

    def __repr__(self) -> str:
        where = f"{quoted(self.name)}, " if self.name else ""
        return (
            f"Taxonomy({where}{len(self.domain)} leaves, {len(self.labels)} nodes, "
            f"height {self.height})"
        )

    def __len__(self) -> int:
        return len(self.domain)

    def __contains__(self, label: object) -> bool:
        return isinstance(label, str) and label in self._index

    # -- the tree ----------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The root's label."""
        return self.labels[0]

    @property
    def height(self) -> int:
        """The largest depth of a node."""
        return int(self.depth.max())

    def node(self, label: str) -> int:
        """Return the node index of ``label``.

        Raises
        ------
        TaxonomyError
            If the taxonomy has no such label.
        """
        try:
            return self._index[label]
        except (KeyError, TypeError):
            raise TaxonomyError(f"{self.name or 'taxonomy'} has no value {quoted(label)}") from None

    def code(self, label: str) -> int:
        """Return the domain code of leaf ``label``.

        Raises
        ------
        TaxonomyError
            If ``label`` is not a leaf.
        """
        code = int(self._leaf_code[self.node(label)])
        if code < 0:
            raise TaxonomyError(
                f"{quoted(label)} is a generalisation in {self.name or 'the taxonomy'}, not a leaf"
            )
        return code

    def children(self, node: int | str) -> tuple[int, ...]:
        """Return the child nodes of ``node`` (an index or a label), in label order."""
        return self._children[self._as_node(node)]

    def is_leaf(self, node: int | str) -> bool:
        """Whether ``node`` has no children."""
        return not self._children[self._as_node(node)]

    def ancestors(self, node: int | str) -> tuple[int, ...]:
        """Return the node itself and its ancestors, up to the root (``φ``).

        See docs/design.md#semantic-distance.
        """
        i = self._as_node(node)
        out = [i]
        while self.parent[i] >= 0:
            i = int(self.parent[i])
            out.append(i)
        return tuple(out)

    def leaves_under(self, node: int | str) -> np.ndarray:
        """Domain codes of the leaves below ``node`` (itself if it is a leaf), ascending."""
        if self._leaves_under is None:
            under: list[list[int]] = [[] for _ in self.labels]
            for code, leaf in enumerate(self.leaf_nodes):
                i = int(leaf)
                while i >= 0:
                    under[i].append(code)
                    i = int(self.parent[i])
            frozen = []
            for codes in under:
                array = np.array(sorted(codes), dtype=np.int64)
                array.setflags(write=False)
                frozen.append(array)
            object.__setattr__(self, "_leaves_under", tuple(frozen))
        return self._leaves_under[self._as_node(node)]  # type: ignore[index]

    def _as_node(self, node: int | str) -> int:
        if isinstance(node, str):
            return self.node(node)
        if isinstance(node, (int, np.integer)) and not isinstance(node, bool):
            if not 0 <= int(node) < len(self.labels):
                raise DPFastIndexError(f"node index {node} out of range [0, {len(self.labels)})")
            return int(node)
        raise DPFastTypeError(f"node must be a label or a node index, got {quoted(node)}")

    # -- data ----------------------------------------------------------------------------

    def encode(self, values: Any, *, column: Hashable | None = None) -> np.ndarray:
        """Return the domain codes of ``values`` (labels), refusing unknown values.

        Non-string values are matched by ``str(value)``, so integer data match a
        hierarchy of numbers such as ARX's age file.

        Parameters
        ----------
        values : array-like
            Labels (a list, a NumPy array, a pandas Series or Categorical).
        column : hashable, optional
            The column name, for messages.

        Returns
        -------
        ndarray of int64

        Raises
        ------
        TaxonomyError
            If some values are missing (None, NaN) or not leaves of the taxonomy; the
            message lists them.
        """
        codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=True)
        return self.encode_categories(
            np.asarray(codes, dtype=np.int64), list(uniques), column=column
        )

    def encode_categories(
        self, codes: np.ndarray, categories: Sequence[Any], *, column: Hashable | None = None
    ) -> np.ndarray:
        """Map codes into ``categories`` (``-1`` for missing) to domain codes.

        Only categories that occur are checked, so an unused category that the taxonomy
        lacks is not an error.

        Raises
        ------
        TaxonomyError
            Missing values, or occurring categories that are not leaves (listed).
        """
        what = f"column {quoted(column)}" if column is not None else "the data"
        n_categories = len(categories)
        counts, missing = _kernels.count_codes(np.asarray(codes, dtype=np.int64), n_categories)
        if missing:
            raise TaxonomyError(
                f"{what} has {missing} missing value(s); drop or impute them with a public "
                "rule before the release"
            )
        lookup = np.full(max(n_categories, 1), -1, dtype=np.int64)
        unknown: list[Any] = []
        internal: list[Any] = []
        for i, category in enumerate(categories):
            label = category if isinstance(category, str) else str(category)
            node = self._index.get(label)
            if node is not None and self._leaf_code[node] >= 0:
                lookup[i] = self._leaf_code[node]
            elif counts[i]:
                (internal if node is not None else unknown).append(category)
        if unknown or internal:
            parts = []
            if unknown:
                missing_labels = quoted(sorted(map(str, unknown)), listed=True)
                parts.append(f"{len(unknown)} value(s) missing from the taxonomy: {missing_labels}")
            if internal:
                parts.append(
                    f"{len(internal)} generalisation(s) instead of leaves: "
                    f"{quoted(sorted(map(str, internal)), listed=True)}"
                )
            raise TaxonomyError(
                f"{what} holds {'; '.join(parts)} ({self.name or 'taxonomy'} has "
                f"{len(self.domain)} leaves, e.g. {quoted(self.domain, listed=True)}); add the "
                "values "
                "to the taxonomy or recode the data"
            )
        return lookup[np.asarray(codes, dtype=np.int64)]


def _rebuild(cls: Any, parents: Mapping[str, str | None], name: str | None) -> Any:
    """Unpickle a taxonomy (see ``_TaxonomyTree.__reduce__``)."""
    return cls(parents, name=name)
