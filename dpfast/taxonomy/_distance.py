"""Semantic distance, marginality, order and microaggregation helpers of a taxonomy.

:class:`_TaxonomyDistances` adds to the tree everything computed from the semantic distance
(Eq. 3): docs/design.md#categorical, #imdav-order, #imdav-categorical.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpfast._kernels import taxonomy as _kernels
from dpfast._validation import check_int
from dpfast.taxonomy._tree import _TaxonomyTree


class _TaxonomyDistances(_TaxonomyTree):
    """Distances, marginality, order and cluster helpers over the tree."""

    __slots__ = ()

    # -- distances ---------------------------------------------------------------------

    def distance(self, a: int | str, b: int | str) -> float:
        """Semantic distance between two nodes (labels or indices).

        See docs/design.md#semantic-distance.

        ``δ(a, b) = log2(1 + (|union| - |intersection|) / |union|)`` of the sets ``φa``
        and ``φb``, where ``φ`` is the set
        of ancestors including the node itself.

        Examples
        --------
        >>> from dpfast.taxonomy import Taxonomy
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
        """``Δq = max δ(a, b)`` over domain pairs: the quality sensitivity.

        See docs/design.md#em-centroid.
        """
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
        >>> from dpfast.taxonomy import Taxonomy
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
        """``(v*, t*)``: the most marginal value and the value farthest from it.

        See docs/design.md#marginality.

        Ties go to the lowest code. ``δ(v*, t*)`` normalises distances in insensitive
        MDAV (docs/design.md#imdav-order), and ``v*``, ``t*`` are its categorical domain corners.
        """
        v = int(np.argmax(self.marginality()))
        t = int(np.argmax(self.distance_matrix()[v]))
        return self.domain[v], self.domain[t]

    def order(self) -> tuple[str, ...]:
        """Return the domain in the data-independent total order of docs/design.md#marginality.

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
            # _rank first: another thread that sees _order set reads _rank next (rank)
            object.__setattr__(self, "_rank", rank)
            object.__setattr__(self, "_order", order)
        return self._order  # type: ignore[return-value]

    @property
    def rank(self) -> np.ndarray:
        """Position of each domain code in :meth:`order` (read-only ``int64[m]``)."""
        self.order_codes  # noqa: B018 (computes both)
        return self._rank  # type: ignore[return-value]

    # -- microaggregation helpers ----------------------------------------------------------

    def normalised_distance(self, codes: np.ndarray, reference: int | str) -> np.ndarray:
        """``δ(x, reference) / δ(v*, t*)`` per record: one term of the distance.

        See docs/design.md#imdav-order.

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
        *,
        big: int | None = None,
    ) -> np.ndarray:
        """Give every record its rank group's code (categorical individual ranking).

        Records are ordered by :attr:`rank` of their code, ties by row index, and cut
        into ``len(group_codes) = n // k`` groups of ``k``, group ``big`` also holding the
        ``n mod k`` records left over (:class:`~dpfast.partitions.ranking.RankGroups`).

        Parameters
        ----------
        codes : ndarray of int64, shape (n,)
            Domain codes of the records.
        k : int
        group_codes : ndarray of int64, shape (n // k,)
            The released domain code of each group.
        destination : ndarray of int64, shape (n,), optional
            Output position of each record (a shuffle); default: the input order.
        big : int, optional
            The group that holds the records left over (default the last).

        Returns
        -------
        ndarray of int64, shape (n,)
        """
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        counts = np.bincount(codes, minlength=len(self.domain))[self.order_codes]
        out = np.empty(codes.shape[0], dtype=np.int64)
        empty = np.empty(0, dtype=np.int64)
        n_groups = len(group_codes)
        big = n_groups - 1 if big is None else check_int(big, "big", low=0, high=n_groups - 1)
        _kernels.broadcast_rank_groups(
            codes,
            np.asarray(self.rank),
            counts.astype(np.int64),
            int(k),
            big,
            codes.shape[0] - int(k) * n_groups,
            np.ascontiguousarray(group_codes, dtype=np.int64),
            empty if destination is None else np.ascontiguousarray(destination, np.int64),
            out,
        )
        return out

    def rank_order(self, codes: np.ndarray) -> np.ndarray:
        """Return the records in :meth:`broadcast_rank_groups` order: by rank, ties by row.

        ``rank_order(codes)[p]`` is the row at sorted position ``p`` (``int64[n]``).
        """
        ranks = np.asarray(self.rank)[np.asarray(codes, np.int64)]
        return np.argsort(ranks, kind="stable").astype(np.int64, copy=False)

    def rank_counts(self, codes: np.ndarray) -> np.ndarray:
        """Count the records at each position of :meth:`order` (``int64[m]``)."""
        counts = np.bincount(np.asarray(codes, dtype=np.int64), minlength=len(self.domain))
        return counts[self.order_codes].astype(np.int64)  # type: ignore[no-any-return]

    def rank_distance_matrix(self) -> np.ndarray:
        """:meth:`distance_matrix` with rows and columns in the order of :meth:`order`."""
        order = self.order_codes
        return np.ascontiguousarray(self.distance_matrix()[np.ix_(order, order)])
