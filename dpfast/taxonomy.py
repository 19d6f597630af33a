"""Taxonomies of categorical attributes: trees, semantic distance, marginality, order.

A :class:`Taxonomy` is a rooted tree of labels whose leaves are the attribute's *domain*:
the values a record may hold. It is read from an ARX hierarchy file
(:meth:`Taxonomy.from_arx`) or built from a nested mapping (:meth:`Taxonomy.from_mapping`),
and gives what the categorical methods of Sánchez et al. (2016) need (SPEC A6, §3):

* the semantic distance of Eq. 3, computed on ancestor bitsets (:meth:`Taxonomy.distance`,
  :meth:`Taxonomy.distance_matrix`);
* marginality (Eq. 4), the domain's most marginal value ``v*`` and the value ``t*``
  farthest from it (:attr:`Taxonomy.boundary`), and the largest distance ``Δq``
  (:attr:`Taxonomy.max_distance`), the exponential mechanism's sensitivity;
* the data-independent total order of §3.2 (:meth:`Taxonomy.order`);
* group qualities and centroids for microaggregation (§3.3, §3.4, §4.6):
  :meth:`Taxonomy.cluster_quality`, :meth:`Taxonomy.centroid`;
* the normalised per-attribute distance of insensitive MDAV (§4.2):
  :meth:`Taxonomy.normalised_distance`.

The tree itself (parents, children, depths, the leaves under each node) is exposed for
methods that generalise values, such as DiffGen.

Conventions
-----------
* Nodes are identified by their labels (strings), which must be unique in the tree. Node
  ``0`` is the root; nodes are numbered breadth first, children in label order.
* The domain is the set of leaves, in *canonical order*: sorted by label (Python string
  order). Domain codes ``0 .. m-1`` follow that order, and every tie in this module
  (most marginal value, order, centroid) goes to the lower code.
* Ancestor sets include the node itself and the root (SPEC §3.1), so distances lie in
  ``[0, 1)``.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpfast._kernels import taxonomy as _kernels

__all__ = ["Taxonomy", "TaxonomyError"]


class TaxonomyError(ValueError):
    """A taxonomy is not a valid tree, or data hold values it does not have."""


def _shown(labels: Sequence[Any], limit: int = 10) -> str:
    items = ", ".join(repr(v) for v in list(labels)[:limit])
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return f"{items}{more}"


class Taxonomy:
    """A rooted tree of category labels whose leaves form an attribute's domain.

    Build one with :meth:`from_arx` or :meth:`from_mapping` (or :meth:`from_edges`).
    Instances are immutable; their arrays are read-only.

    Attributes
    ----------
    labels : tuple of str
        Every node's label; node ``0`` is the root.
    parent : ndarray of int64, shape (n_nodes,)
        Each node's parent (``-1`` for the root).
    depth : ndarray of int64, shape (n_nodes,)
        Each node's depth (the root has depth 0).
    domain : tuple of str
        The leaves in canonical (label) order; domain code ``i`` is ``domain[i]``.
    leaf_nodes : ndarray of int64, shape (m,)
        The node of each domain code.
    name : str or None
        Where the taxonomy came from, for messages.

    Examples
    --------
    >>> tax = Taxonomy.from_mapping({"*": {"Technical": ["Tech-support", "Craft-repair"],
    ...                                    "Other": ["Sales"]}})
    >>> tax.domain
    ('Craft-repair', 'Sales', 'Tech-support')
    >>> round(tax.distance("Tech-support", "Craft-repair"), 4)  # log2(1 + 2/4)
    0.585
    >>> tax.most_marginal
    'Sales'
    >>> tax.order()
    ('Sales', 'Craft-repair', 'Tech-support')
    """

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
        roots = sorted(label for label, p in parents.items() if p is None)
        if not roots:
            raise TaxonomyError(
                f"{where}: the taxonomy has no root: its generalisation chains form a cycle; "
                "every chain must end in the same top value, such as '*'"
            )
        if len(roots) != 1:
            raise TaxonomyError(
                f"{where}: a taxonomy needs exactly one root, found {len(roots)} "
                f"({_shown(roots)}); make every generalisation chain end in the same "
                "top value, such as '*'"
            )
        children: dict[str, list[str]] = {label: [] for label in parents}
        for label, p in parents.items():
            if p is not None:
                if p not in children:
                    raise TaxonomyError(f"{where}: {label!r} has parent {p!r}, which is not a node")
                children[p].append(label)
        # breadth-first numbering from the root, children in label order; nodes that are
        # not reached lie on a cycle
        order = [roots[0]]
        for label in order:
            order.extend(sorted(children[label]))
        if len(order) != len(parents):
            reached = set(order)
            stuck = sorted(label for label in parents if label not in reached)
            raise TaxonomyError(
                f"{where}: the taxonomy has a cycle through {_shown(stuck)}; every chain of "
                "generalisations must end at the root"
            )
        index = {label: i for i, label in enumerate(order)}
        n_nodes = len(order)
        parent = np.full(n_nodes, -1, dtype=np.int64)
        depth = np.zeros(n_nodes, dtype=np.int64)
        for i, label in enumerate(order):
            p = parents[label]
            if p is not None:
                parent[i] = index[p]
                depth[i] = depth[index[p]] + 1
        words = (n_nodes + 63) // 64
        bits = np.zeros((n_nodes, words), dtype=np.uint64)
        for i in range(n_nodes):  # parents come before their children
            if parent[i] >= 0:
                bits[i] = bits[parent[i]]
            bits[i, i // 64] |= np.uint64(1) << np.uint64(i % 64)
        kids = tuple(tuple(index[c] for c in sorted(children[label])) for label in order)
        domain = tuple(sorted(label for label in order if not children[label]))
        leaf_nodes = np.array([index[label] for label in domain], dtype=np.int64)
        leaf_code = np.full(n_nodes, -1, dtype=np.int64)
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

    def __repr__(self) -> str:
        where = f"{self.name!r}, " if self.name else ""
        return (
            f"Taxonomy({where}{len(self.domain)} leaves, {len(self.labels)} nodes, "
            f"height {self.height})"
        )

    def __len__(self) -> int:
        return len(self.domain)

    def __contains__(self, label: object) -> bool:
        return isinstance(label, str) and label in self._index

    # -- construction ------------------------------------------------------------------

    @classmethod
    def from_edges(
        cls,
        edges: Iterable[tuple[str, str, str]],
        leaves: Iterable[tuple[str, str]],
        *,
        name: str | None = None,
    ) -> Taxonomy:
        """Build from ``(child, parent, where)`` edges and ``(leaf, where)`` declarations.

        ``where`` says where each item was declared (e.g. ``"line 3"``), for messages.

        Raises
        ------
        TaxonomyError
            A leaf declared twice, a leaf that also has children, a node with two
            parents, several roots, or a cycle.
        """
        where = name or "taxonomy"
        leaf_at: dict[str, str] = {}
        for leaf, at in leaves:
            if leaf in leaf_at:
                raise TaxonomyError(
                    f"{where}: duplicate leaf {leaf!r} ({leaf_at[leaf]} and {at}); "
                    "each value must appear once"
                )
            leaf_at[leaf] = at
        parent_of: dict[str, tuple[str, str]] = {}
        for child, parent, at in edges:
            if child == parent:
                raise TaxonomyError(f"{where}: {child!r} is its own parent ({at}): a cycle")
            if child in parent_of and parent_of[child][0] != parent:
                raise TaxonomyError(
                    f"{where}: {child!r} has two parents, {parent_of[child][0]!r} "
                    f"({parent_of[child][1]}) and {parent!r} ({at}); a taxonomy must be a "
                    "tree: give each label one generalisation"
                )
            parent_of[child] = (parent, at)
            if parent in leaf_at:
                raise TaxonomyError(
                    f"{where}: {parent!r} is a leaf ({leaf_at[parent]}) and also the "
                    f"generalisation of {child!r} ({at}); rename one of them"
                )
        parents: dict[str, str | None] = {child: p for child, (p, _) in parent_of.items()}
        for parent, _ in parent_of.values():
            parents.setdefault(parent, None)
        for leaf in leaf_at:
            parents.setdefault(leaf, None)
        return cls(parents, name=name)

    @classmethod
    def from_arx(cls, path: str | os.PathLike[str]) -> Taxonomy:
        """Read an ARX hierarchy file: one line per leaf, ``leaf;level1;...;*``.

        Cells are separated by semicolons and stripped of surrounding spaces; blank lines
        are skipped. A label repeated in consecutive cells (ARX's way of not generalising
        a value at some level) is one node.

        Parameters
        ----------
        path : path
            A UTF-8 text file such as ``adult_hierarchy_occupation.csv``.

        Returns
        -------
        Taxonomy

        Raises
        ------
        TaxonomyError
            An empty cell, a line with a single cell, or any error of :meth:`from_edges`.
        OSError
            If the file cannot be read.

        Examples
        --------
        >>> from dpfast.datasets import adult_hierarchy_path
        >>> Taxonomy.from_arx(adult_hierarchy_path("occupation"))
        Taxonomy('adult_hierarchy_occupation.csv', 14 leaves, 18 nodes, height 2)
        """
        file = Path(path)
        text = file.read_text(encoding="utf-8-sig")
        name = file.name
        edges: list[tuple[str, str, str]] = []
        leaves: list[tuple[str, str]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            cells = [cell.strip() for cell in line.split(";")]
            at = f"line {number}"
            if any(not cell for cell in cells):
                raise TaxonomyError(
                    f"{name}: {at} has an empty cell: {line!r}; write 'leaf;level1;...;*' "
                    "with a label in every cell"
                )
            chain = [cells[0]]
            for cell in cells[1:]:
                if cell != chain[-1]:
                    chain.append(cell)
            if len(cells) < 2:
                raise TaxonomyError(
                    f"{name}: {at} holds only {cells[0]!r}; each line must give a value and "
                    "its generalisations up to the root, e.g. 'Sales;Nontechnical;*'"
                )
            leaves.append((chain[0], at))
            edges.extend((a, b, at) for a, b in itertools.pairwise(chain))
        if not leaves:
            raise TaxonomyError(f"{name}: the file holds no hierarchy lines")
        return cls.from_edges(edges, leaves, name=name)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], *, name: str | None = None) -> Taxonomy:
        """Build from a nested mapping with one root key and lists of leaves at the bottom.

        Each value is a mapping (a generalisation and its children), a list or tuple of
        children (labels are leaves; mappings inside are subtrees), or ``None`` / an empty
        list (the key is a leaf).

        Parameters
        ----------
        mapping : mapping
            E.g. ``{"*": {"Technical": ["Tech-support", "Craft-repair"], "Other": [...]}}``.
        name : str, optional
            Used in messages.

        Returns
        -------
        Taxonomy

        Raises
        ------
        TypeError
            A label that is not a string, or a value of another type.
        TaxonomyError
            Not a single root, duplicate leaves, a label used twice, or a cycle.

        Examples
        --------
        >>> Taxonomy.from_mapping({"*": {"A": ["a1", "a2"], "b": None}}).domain
        ('a1', 'a2', 'b')
        """
        where = name or "taxonomy"
        if not isinstance(mapping, Mapping):
            raise TypeError(
                f"{where}: expected a mapping such as {{'*': {{'A': ['a1', 'a2']}}}}, got "
                f"{type(mapping).__name__}"
            )
        if len(mapping) != 1:
            raise TaxonomyError(
                f"{where}: the top level must hold exactly one root, got {len(mapping)} keys "
                f"({_shown(list(mapping))}); wrap them, e.g. {{'*': {{...}}}}"
            )
        edges: list[tuple[str, str, str]] = []
        leaves: list[tuple[str, str]] = []
        seen_internal: dict[str, str] = {}

        def label_of(value: Any, path: str) -> str:
            if not isinstance(value, str) or not value:
                raise TypeError(
                    f"{where}: labels must be non-empty strings, got {value!r} at {path}"
                )
            return value

        def visit(label: str, children: Any, path: str) -> None:
            here = f"{path}/{label}" if path else label
            if children is None or (isinstance(children, (list, tuple)) and not children):
                leaves.append((label, here))
                return
            if label in seen_internal:
                raise TaxonomyError(
                    f"{where}: {label!r} appears twice ({seen_internal[label]} and {here}); "
                    "labels must be unique"
                )
            seen_internal[label] = here
            if isinstance(children, Mapping):
                for key, sub in children.items():
                    child = label_of(key, here)
                    edges.append((child, label, here))
                    visit(child, sub, here)
            elif isinstance(children, (list, tuple)):
                for item in children:
                    if isinstance(item, Mapping):
                        for key, sub in item.items():
                            child = label_of(key, here)
                            edges.append((child, label, here))
                            visit(child, sub, here)
                    else:
                        child = label_of(item, here)
                        edges.append((child, label, here))
                        leaves.append((child, f"{here}/{child}"))
            else:
                raise TypeError(
                    f"{where}: the children of {here!r} must be a mapping, a list of labels "
                    f"or None, got {type(children).__name__}"
                )

        ((root, children),) = mapping.items()
        visit(label_of(root, ""), children, "")
        return cls.from_edges(edges, leaves, name=name)

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
            raise TaxonomyError(f"{self.name or 'taxonomy'} has no value {label!r}") from None

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
                f"{label!r} is a generalisation in {self.name or 'the taxonomy'}, not a leaf"
            )
        return code

    def children(self, node: int | str) -> tuple[int, ...]:
        """Return the child nodes of ``node`` (an index or a label), in label order."""
        return self._children[self._as_node(node)]

    def is_leaf(self, node: int | str) -> bool:
        """Whether ``node`` has no children."""
        return not self._children[self._as_node(node)]

    def ancestors(self, node: int | str) -> tuple[int, ...]:
        """Return the node itself and its ancestors, up to the root (``φ`` of SPEC §3.1)."""
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
                raise IndexError(f"node index {node} out of range [0, {len(self.labels)})")
            return int(node)
        raise TypeError(f"node must be a label or a node index, got {node!r}")

    # -- distances ---------------------------------------------------------------------

    def distance(self, a: int | str, b: int | str) -> float:
        """Semantic distance of SPEC §3.1 Eq. 3 between two nodes (labels or indices).

        ``δ(a, b) = log2(1 + (|union| - |intersection|) / |union|)`` of the sets ``φa``
        and ``φb``, where ``φ`` is the set
        of ancestors including the node itself.

        Examples
        --------
        >>> tax = Taxonomy.from_mapping({"*": {"A": ["a1", "a2"], "B": ["b1"]}})
        >>> tax.distance("a1", "a1"), round(tax.distance("a1", "b1"), 6)  # log2(1 + 4/5)
        (0.0, 0.847997)
        """
        return float(_kernels.semantic_distance(self._bits, self._as_node(a), self._as_node(b)))

    def distance_matrix(self) -> np.ndarray:
        """Distances between all domain values: read-only ``float64[m, m]`` in code order."""
        if self._distance is None:
            matrix = _kernels.distance_matrix(self._bits, np.asarray(self.leaf_nodes))
            matrix.setflags(write=False)
            object.__setattr__(self, "_distance", matrix)
        return self._distance  # type: ignore[return-value]

    def distances_between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Element-wise distances between two arrays of domain codes (``float64``)."""
        return self.distance_matrix()[np.asarray(a, np.int64), np.asarray(b, np.int64)]

    @property
    def max_distance(self) -> float:
        """``Δq = max δ(a, b)`` over domain pairs: the quality sensitivity of SPEC §3.4."""
        matrix = self.distance_matrix()
        return float(matrix.max()) if matrix.size else 0.0

    def marginality(self, values: Any = None) -> np.ndarray:
        """Marginality ``m(a, V) = Σ_{b in V, b != a} δ(a, b)`` of each domain value (Eq. 4).

        Parameters
        ----------
        values : array-like of labels, optional
            The multiset ``V`` (counted with repetition). By default ``V`` is the domain,
            each value once: the data-independent marginality that defines ``v*``.

        Returns
        -------
        ndarray of float64, shape (m,)
            In code order. Sums are exactly rounded (``math.fsum``), so values in
            symmetric positions of the tree get equal marginality.

        Examples
        --------
        >>> tax = Taxonomy.from_mapping({"*": {"A": ["a1", "a2"], "b": None}})
        >>> tax.marginality().round(4).tolist()
        [1.3923, 1.3923, 1.6147]
        """
        matrix = self.distance_matrix()
        if values is None:
            if self._marginality is None:
                out = np.array([math.fsum(row) for row in matrix], dtype=np.float64)
                out.setflags(write=False)
                object.__setattr__(self, "_marginality", out)
            return self._marginality  # type: ignore[return-value]
        counts = np.bincount(self.encode(values), minlength=len(self.domain))
        return np.array([math.fsum(row * counts) for row in matrix], dtype=np.float64)

    @property
    def most_marginal(self) -> str:
        """``v*``: the domain value of largest domain marginality (ties: lowest code)."""
        return self.domain[int(np.argmax(self.marginality()))]

    @property
    def boundary(self) -> tuple[str, str]:
        """``(v*, t*)``: the most marginal value and the value farthest from it (SPEC §3.2).

        Ties go to the lowest code. ``δ(v*, t*)`` normalises distances in insensitive
        MDAV (§4.2), and ``v*``, ``t*`` are its categorical domain corners.
        """
        v = int(np.argmax(self.marginality()))
        t = int(np.argmax(self.distance_matrix()[v]))
        return self.domain[v], self.domain[t]

    def order(self) -> tuple[str, ...]:
        """Return the domain in the data-independent total order of SPEC §3.2.

        Domain values sorted by ``δ(x, v*)``, ties by canonical label order; ``v*`` comes
        first. Records are ranked by this order in categorical individual ranking.
        """
        return tuple(self.domain[c] for c in self.order_codes)

    @property
    def order_codes(self) -> np.ndarray:
        """Domain codes in the order of :meth:`order` (read-only ``int64[m]``)."""
        if self._order is None:
            m = len(self.domain)
            star = int(np.argmax(self.marginality()))
            key = self.distance_matrix()[star]
            order = np.lexsort((np.arange(m), key)).astype(np.int64)
            rank = np.empty(m, dtype=np.int64)
            rank[order] = np.arange(m, dtype=np.int64)
            order.setflags(write=False)
            rank.setflags(write=False)
            object.__setattr__(self, "_order", order)
            object.__setattr__(self, "_rank", rank)
        return self._order  # type: ignore[return-value]

    @property
    def rank(self) -> np.ndarray:
        """Position of each domain code in :meth:`order` (read-only ``int64[m]``)."""
        self.order_codes  # noqa: B018 (computes both)
        return self._rank  # type: ignore[return-value]

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
        what = f"column {column!r}" if column is not None else "the data"
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
                missing_labels = _shown(sorted(map(str, unknown)))
                parts.append(f"{len(unknown)} value(s) missing from the taxonomy: {missing_labels}")
            if internal:
                parts.append(
                    f"{len(internal)} generalisation(s) instead of leaves: "
                    f"{_shown(sorted(map(str, internal)))}"
                )
            raise TaxonomyError(
                f"{what} holds {'; '.join(parts)} ({self.name or 'taxonomy'} has "
                f"{len(self.domain)} leaves, e.g. {_shown(self.domain, 5)}); add the values "
                "to the taxonomy or recode the data"
            )
        return lookup[np.asarray(codes, dtype=np.int64)]

    # -- microaggregation helpers ----------------------------------------------------------

    def cluster_quality(self, codes: np.ndarray, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        """Exponential-mechanism quality ``q(C, c) = -Σ_{x in C} δ(c, x)`` per cluster.

        Parameters
        ----------
        codes : ndarray of int64, shape (n,)
            Domain codes of the records.
        labels : ndarray of int64, shape (n,)
            Cluster of each record, in ``[0, n_clusters)``.
        n_clusters : int

        Returns
        -------
        ndarray of float64, shape (n_clusters, m)
            Row ``g``, column ``c``: the quality of candidate ``c`` (every domain value,
            a data-independent candidate set) for cluster ``g`` (SPEC §3.3-§3.4, §4.6).
            Feed it to :func:`dpfast.noise.exponential_mechanism` with sensitivity
            ``max_distance`` (``n_clusters * max_distance`` for insensitive MDAV, §4.6).
        """
        m = len(self.domain)
        flat = np.asarray(labels, np.int64) * m + np.asarray(codes, np.int64)
        histogram = np.bincount(flat, minlength=n_clusters * m).reshape(n_clusters, m)
        quality: np.ndarray = -(histogram.astype(np.float64) @ self.distance_matrix())
        return quality  # the matrix is symmetric: row c of (H @ D) sums δ(x, c)

    def centroid(self, codes: np.ndarray, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        """Marginality-based centroid of each cluster (SPEC §3.3, Eq. 5): NOT private.

        The domain value minimising ``Σ_{x in C} δ(c, x)``; ties go to the lowest code.

        Returns
        -------
        ndarray of int64, shape (n_clusters,)
            Domain codes.
        """
        best: np.ndarray = np.argmax(self.cluster_quality(codes, labels, n_clusters), axis=1)
        return best.astype(np.int64)

    def normalised_distance(self, codes: np.ndarray, reference: int | str) -> np.ndarray:
        """``δ(x, reference) / δ(v*, t*)`` per record: one term of SPEC §4.2's distance.

        Parameters
        ----------
        codes : ndarray of int64
            Domain codes of the records.
        reference : int or str
            A domain code or leaf label (e.g. a domain corner ``v*`` or ``t*``).

        Returns
        -------
        ndarray of float64
            Zeros when ``δ(v*, t*) = 0`` (a one-value domain).
        """
        ref = reference if not isinstance(reference, str) else self.code(reference)
        v, t = (self.code(label) for label in self.boundary)
        scale = float(self.distance_matrix()[v, t])
        column = self.distance_matrix()[:, int(ref)]
        if scale == 0:
            return np.zeros(np.shape(codes), dtype=np.float64)
        scaled: np.ndarray = column[np.asarray(codes, np.int64)] / scale
        return scaled

    def broadcast_rank_groups(
        self,
        codes: np.ndarray,
        k: int,
        group_codes: np.ndarray,
        destination: np.ndarray | None = None,
    ) -> np.ndarray:
        """Give every record its rank group's code (categorical individual ranking).

        Records are ordered by :attr:`rank` of their code, ties by row index, and cut
        into ``len(group_codes) = n // k`` groups of ``k`` (the remainder joins the last).

        Parameters
        ----------
        codes : ndarray of int64, shape (n,)
            Domain codes of the records.
        k : int
        group_codes : ndarray of int64, shape (n // k,)
            The released domain code of each group.
        destination : ndarray of int64, shape (n,), optional
            Output position of each record (a shuffle); default: the input order.

        Returns
        -------
        ndarray of int64, shape (n,)
        """
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        counts = np.bincount(codes, minlength=len(self.domain))[self.order_codes]
        out = np.empty(codes.shape[0], dtype=np.int64)
        empty = np.empty(0, dtype=np.int64)
        _kernels.broadcast_rank_groups(
            codes,
            np.asarray(self.rank),
            counts.astype(np.int64),
            int(k),
            np.ascontiguousarray(group_codes, dtype=np.int64),
            empty if destination is None else np.ascontiguousarray(destination, np.int64),
            out,
        )
        return out

    def rank_counts(self, codes: np.ndarray) -> np.ndarray:
        """Count the records at each position of :meth:`order` (``int64[m]``)."""
        counts = np.bincount(np.asarray(codes, dtype=np.int64), minlength=len(self.domain))
        return counts[self.order_codes].astype(np.int64)  # type: ignore[no-any-return]

    def rank_distance_matrix(self) -> np.ndarray:
        """:meth:`distance_matrix` with rows and columns in the order of :meth:`order`."""
        order = self.order_codes
        return np.ascontiguousarray(self.distance_matrix()[np.ix_(order, order)])
