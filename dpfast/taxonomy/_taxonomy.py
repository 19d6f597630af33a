"""The public :class:`Taxonomy` class and its constructors (ARX files, mappings, edges)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dpfast._validation import quoted
from dpfast.exceptions import DPFastTypeError
from dpfast.taxonomy._distance import _TaxonomyDistances
from dpfast.taxonomy._tree import TaxonomyError


class Taxonomy(_TaxonomyDistances):
    """A rooted tree of category labels whose leaves form an attribute's domain.

    Build one with :meth:`from_arx` or :meth:`from_mapping` (or :meth:`from_edges`).
    Instances are immutable; their arrays are read-only.

    Parameters
    ----------
    parents : mapping
        ``{label: parent label}`` for every node, the root mapped to ``None``. Nodes are
        numbered breadth-first from the root, children in label order.
    name : str, optional
        Where the taxonomy came from, for messages.

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

    Raises
    ------
    TaxonomyError
        No root or more than one, a parent that is not a node, or a cycle.

    Examples
    --------
    >>> Taxonomy({"*": None, "Care": "*", "nurse": "Care", "pilot": "*"}).domain
    ('nurse', 'pilot')
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

    __slots__ = ()

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

        Parameters
        ----------
        edges : iterable of (str, str, str)
            ``(child, parent, where)``: each child label and its generalisation. A repeated
            edge is one edge.
        leaves : iterable of (str, str)
            ``(leaf, where)``: the labels that are values of the attribute (the domain).
        name : str, optional
            Where the taxonomy came from, for messages.

        Returns
        -------
        Taxonomy

        Raises
        ------
        TaxonomyError
            A leaf declared twice, a leaf that also has children, a node with two
            parents, several roots, or a cycle.

        Examples
        --------
        >>> edges = [("Care", "*", "line 1"), ("nurse", "Care", "line 1"), ("pilot", "*", "line 2")]
        >>> Taxonomy.from_edges(edges, [("nurse", "line 1"), ("pilot", "line 2")]).domain
        ('nurse', 'pilot')
        """
        where = name or "taxonomy"
        leaf_at: dict[str, str] = {}
        for leaf, at in leaves:
            if leaf in leaf_at:
                raise TaxonomyError(
                    f"{where}: duplicate leaf {quoted(leaf)} ({leaf_at[leaf]} and {at}); "
                    "each value must appear once"
                )
            leaf_at[leaf] = at
        parent_of: dict[str, tuple[str, str]] = {}
        for child, parent, at in edges:
            if child == parent:
                raise TaxonomyError(f"{where}: {quoted(child)} is its own parent ({at}): a cycle")
            if child in parent_of and parent_of[child][0] != parent:
                raise TaxonomyError(
                    f"{where}: {quoted(child)} has two parents, {parent_of[child][0]!r} "
                    f"({parent_of[child][1]}) and {quoted(parent)} ({at}); a taxonomy must be a "
                    "tree: give each label one generalisation"
                )
            parent_of[child] = (parent, at)
            if parent in leaf_at:
                raise TaxonomyError(
                    f"{where}: {quoted(parent)} is a leaf ({leaf_at[parent]}) and also the "
                    f"generalisation of {quoted(child)} ({at}); rename one of them"
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
                    f"{name}: {at} has an empty cell: {quoted(line)}; write 'leaf;level1;...;*' "
                    "with a label in every cell"
                )
            chain = [cells[0]]
            for cell in cells[1:]:
                if cell != chain[-1]:
                    chain.append(cell)
            if len(cells) < 2:
                raise TaxonomyError(
                    f"{name}: {at} holds only {quoted(cells[0])}; each line must give a value and "
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
            raise DPFastTypeError(
                f"{where}: expected a mapping such as {{'*': {{'A': ['a1', 'a2']}}}}, got "
                f"{type(mapping).__name__}"
            )
        if len(mapping) != 1:
            raise TaxonomyError(
                f"{where}: the top level must hold exactly one root, got {len(mapping)} keys "
                f"({quoted(list(mapping), listed=True)}); wrap them, e.g. {{'*': {{...}}}}"
            )
        edges: list[tuple[str, str, str]] = []
        leaves: list[tuple[str, str]] = []
        seen_internal: dict[str, str] = {}

        def label_of(value: Any, path: str) -> str:
            if not isinstance(value, str) or not value:
                raise DPFastTypeError(
                    f"{where}: labels must be non-empty strings, got {quoted(value)} at {path}"
                )
            return value

        def visit(label: str, children: Any, path: str) -> None:
            here = f"{path}/{label}" if path else label
            if children is None or (isinstance(children, (list, tuple)) and not children):
                leaves.append((label, here))
                return
            if label in seen_internal:
                raise TaxonomyError(
                    f"{where}: {quoted(label)} appears twice ({seen_internal[label]} and {here}); "
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
                raise DPFastTypeError(
                    f"{where}: the children of {quoted(here)} must be a mapping, a list of labels "
                    f"or None, got {type(children).__name__}"
                )

        ((root, children),) = mapping.items()
        visit(label_of(root, ""), children, "")
        return cls.from_edges(edges, leaves, name=name)


def as_taxonomy(value: Any, name: Any = None) -> Taxonomy:
    """Return a :class:`Taxonomy` given in any of the forms dpfast accepts.

    Parameters
    ----------
    value : Taxonomy, str, os.PathLike, mapping or list
        A Taxonomy; the path of an ARX hierarchy file; a nested mapping with one root
        (:meth:`Taxonomy.from_mapping`); or a flat list of leaves, which become the
        children of one root ``"*"`` (every two leaves then share only the root).
    name : hashable, optional
        The column, for messages and as the taxonomy's name.

    Raises
    ------
    TypeError
        A value of another kind.
    TaxonomyError
        A malformed tree or file.

    Examples
    --------
    >>> as_taxonomy(["yes", "no"]).domain
    ('no', 'yes')
    >>> as_taxonomy({"*": {"A": ["a1", "a2"], "b": None}}).domain
    ('a1', 'a2', 'b')
    """
    if isinstance(value, Taxonomy):
        return value
    if isinstance(value, (str, os.PathLike)):
        return Taxonomy.from_arx(Path(value))
    label = None if name is None else str(name)
    if isinstance(value, Mapping):
        return Taxonomy.from_mapping(value, name=label)
    if isinstance(value, (list, tuple)):
        if "*" in value:
            raise TaxonomyError(
                f"{label or 'taxonomy'}: a flat list of leaves may not hold '*', the label "
                "of its root"
            )
        return Taxonomy.from_mapping({"*": list(value)}, name=label)
    where = "a taxonomy" if name is None else f"the taxonomy of {quoted(name)}"
    raise DPFastTypeError(
        f"{where} must be a dpfast.Taxonomy, the path of an ARX hierarchy file, a nested "
        "mapping such as {'*': {'A': ['a1', 'a2']}} or a list of leaves, got "
        f"{type(value).__name__}"
    )
