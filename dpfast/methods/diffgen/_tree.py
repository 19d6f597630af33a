"""DiffGen's top-down specialisation (docs/design.md#diffgen): values, cuts, scores, draws.

The leaf partitions of DiffGen are always the product of the per-attribute cuts, and
every one is released. Specialising a value ``v`` of attribute ``j`` relabels the records
holding it by the child of ``v`` their code of ``j`` lies under; the engine's
:class:`~dpfast.engines.base.Contingency` does it (in memory through a partition tree and
``Link_v``, in O(records of ``v``); out of core by codes) and gives the (code, class)
counts from which the new candidates' scores and split values are computed. Other
candidates' scores do not change, so they are never recomputed. The values are labelled
by their ids.

Randomness (one keyed stream per use, so runs with a seed are reproducible):

* candidate selection in iteration ``i``: ``key("diffgen", "select")``, nonce ``i``;
* the split value of numeric value number ``j`` (values are numbered in creation order,
  the roots first, in column order): ``key("diffgen", "split-interval")`` (the run of
  grid points) and ``key("diffgen", "split-point")`` (the point in it), nonce ``j``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._kernels import contingency as _kernels
from dpfast._validation import option, quoted
from dpfast.exceptions import DPFastValueError
from dpfast.methods.diffgen._columns import CategoricalColumn, NumericColumn, Prepared
from dpfast.methods.diffgen._scores import score, split_scores

# The most leaf partitions (product of the cut sizes) a release may produce.
MAX_PARTITIONS = 2**24


@dataclass
class Value:
    """One value of an attribute's cut (a node of its taxonomy or interval tree)."""

    id: int
    column: int
    label: str
    node: int = -1  # taxonomy node (categorical)
    lo: float = 0.0  # interval [lo, hi) (numeric); hi is included when top is True
    hi: float = 0.0
    top: bool = False
    a: int = 0  # code range [a, b) of the interval
    b: int = 0
    split: float | None = None
    split_code: int = -1
    splittable: bool = False
    score: float = 0.0
    children: tuple[int, ...] = ()


@dataclass
class Trace:
    """What the builder computed, for tests against the slow reference."""

    selections: list[dict[str, Any]] = field(default_factory=list)
    splits: list[dict[str, Any]] = field(default_factory=list)


def _fmt(x: float, integer: bool) -> str:
    return str(int(x)) if integer else repr(float(x))


def interval_label(lo: float, hi: float, integer: bool, top: bool) -> str:
    """``[lo, hi)``, or ``[lo, hi]`` for the top interval of a float column."""
    return f"[{_fmt(lo, integer)}, {_fmt(hi, integer)}{']' if top else ')'}"


class Builder:
    """Run DiffGen's specialisation loop on prepared columns.

    Parameters
    ----------
    prepared : Prepared
    epsilon_prime : float
        ``ε'``, the budget of every selection and split-value draw.
    utility : {"max", "info_gain"}
    delta_u : float
        The utility's sensitivity ``Δu``.
    source : NoiseSource
    spend : callable
        ``spend(kind, index, value_labels)`` is called before each draw (``kind`` is
        ``"root split"``, ``"selection"`` or ``"split"``) so that the caller's ledger can
        check and record it.
    trace : Trace, optional
    """

    def __init__(
        self,
        prepared: Prepared,
        *,
        epsilon_prime: float,
        utility: str,
        delta_u: float,
        source: noise.NoiseSource,
        trace: Trace | None = None,
    ) -> None:
        self.prepared = prepared
        self.columns = prepared.columns
        self.counts = prepared.contingency
        self.n_classes = len(prepared.class_labels)
        self.epsilon_prime = epsilon_prime
        self.utility = utility
        self.delta_u = delta_u
        self.trace = trace
        self.select_key = source.key("diffgen", "select")
        self.interval_key = source.key("diffgen", "split-interval")
        self.point_key = source.key("diffgen", "split-point")
        self.values: list[Value] = []
        self.cuts: list[list[int]] = [[] for _ in self.columns]
        self.candidates: list[int] = []  # the union of the cuts, in creation order
        self._child_index: dict[tuple[int, int], np.ndarray] = {}
        self.steps_done = 0

    @property
    def n_cells(self) -> int:
        """Leaf partitions, stored or empty: the product of the cut sizes."""
        return math.prod(len(cut) for cut in self.cuts)

    # -- values ------------------------------------------------------------------------

    def _child_index_of(self, column: int, node: int) -> np.ndarray:
        key = (column, node)
        if key not in self._child_index:
            col = self.columns[column]
            assert isinstance(col, CategoricalColumn)
            table = np.full(len(col.taxonomy.domain), -1, dtype=np.int64)
            for i, child in enumerate(col.taxonomy.children(node)):
                table[col.taxonomy.leaves_under(child)] = i
            self._child_index[key] = table
        return self._child_index[key]

    def _new_value(self, **fields: Any) -> Value:
        value = Value(id=len(self.values), **fields)
        self.values.append(value)
        self.cuts[value.column].append(value.id)
        self.candidates.append(value.id)
        return value

    def _categorical_value(self, column: int, node: int, hist: np.ndarray) -> Value:
        col = self.columns[column]
        assert isinstance(col, CategoricalColumn)
        value = self._new_value(column=column, label=col.taxonomy.labels[node], node=node)
        if not col.taxonomy.is_leaf(node):
            value.splittable = True
            index = self._child_index_of(column, node)
            counts = np.zeros((len(col.taxonomy.children(node)), self.n_classes), np.int64)
            under = index >= 0
            np.add.at(counts, index[under], hist[under])
            value.score = score(counts, self.utility)
        return value

    def _numeric_value(self, column: int, lo: float, hi: float, top: bool, a: int, b: int) -> Value:
        col = self.columns[column]
        assert isinstance(col, NumericColumn)
        value = self._new_value(
            column=column,
            label=interval_label(lo, hi, col.integer, top),
            lo=lo,
            hi=hi,
            top=top,
            a=a,
            b=b,
        )
        first, stop = col.split_range(lo, hi)
        value.splittable = stop > first  # a grid point strictly inside
        return value

    def _choose_split(self, value: Value, hist: np.ndarray) -> None:
        """Draw the split value of a numeric value from its (code, class) counts.

        The candidates are the grid points ``k * step`` strictly inside the interval; a
        data value ``x`` goes left when ``x < k * step``. The data values cut the
        candidates into runs (:func:`split_runs`) on which the score is constant: one
        exponential-mechanism draw picks a run with weight ``exp(scale * score) * size``,
        then one exact uniform integer picks the grid point within it. See
        docs/design.md#diffgen-split.
        """
        col = self.columns[value.column]
        assert isinstance(col, NumericColumn)
        present, left = _kernels.split_points(hist)
        points = col.code_values[value.a + present]
        first, stop = col.split_range(value.lo, value.hi)
        starts, sizes = split_runs(first, stop, col.grid_index(points, strict=True))
        scores = split_scores(left, left[-1], self.utility)
        kept = np.flatnonzero(sizes > 0)
        pick = self._draw(self.interval_key, scores[kept], value.id, sizes[kept])
        i = int(kept[pick])
        offset = noise.uniform_integers(self.point_key, int(sizes[i]), 1, start=value.id)
        split = float(int(starts[i]) + int(offset[0])) * col.step  # exact: |index| < 2**52
        value.split = split
        value.split_code = value.a + int(
            np.searchsorted(col.code_values[value.a : value.b], split, side="left")
        )
        value.score = float(scores[i])
        if self.trace is not None:
            self.trace.splits.append(
                {
                    "value": (self.prepared.columns[value.column].name, value.label),
                    "lows": starts[kept].astype(np.float64) * col.step,
                    "sizes": sizes[kept],
                    "scores": scores[kept],
                    "probabilities": self._probabilities(scores[kept], sizes[kept]),
                    "chosen": pick,
                    "split": split,
                }
            )

    # -- the algorithm -------------------------------------------------------------------

    def roots(self, spend: Callable[[str, int, Any], None]) -> None:
        """Lines 1-5: root values, their split values (numeric) and scores."""
        root_ids = []
        hists = []
        for j, col in enumerate(self.columns):
            if isinstance(col, CategoricalColumn):
                n_codes = len(col.taxonomy.domain)
            else:
                n_codes = col.code_values.shape[0]
            hist = self.counts.counts(j)
            hists.append(hist)
            if isinstance(col, CategoricalColumn):
                value = self._categorical_value(j, 0, hist)
            else:
                lo, hi = col.root
                value = self._numeric_value(j, lo, hi, not col.integer, 0, n_codes)
            root_ids.append(value.id)
        self.counts.start(root_ids)
        for j, col in enumerate(self.columns):
            if isinstance(col, NumericColumn):
                value = self.values[root_ids[j]]
                spend("root split", j, col.name)
                if value.splittable:
                    self._choose_split(value, hists[j])

    def step(self, i: int, spend: Callable[[str, int, Any], None]) -> bool:
        """One iteration (lines 7-10); False when no candidate is left (early stop)."""
        candidates = [v for v in self.candidates if self.values[v].splittable]
        if not candidates:
            return False
        scores = np.array([self.values[v].score for v in candidates], dtype=np.float64)
        spend("selection", i, None)
        pick = self._draw(self.select_key, scores, i)
        chosen = candidates[pick]
        if self.trace is not None:
            self.trace.selections.append(
                {
                    "candidates": [self._key(v) for v in candidates],
                    "scores": scores,
                    "probabilities": self._probabilities(scores),
                    "chosen": self._key(chosen),
                }
            )
        spend("split", i, self._key(chosen))
        self._specialise(chosen)
        self.steps_done = i + 1
        return True

    def _draw(
        self, key: np.ndarray, scores: np.ndarray, nonce: int, sizes: np.ndarray | None = None
    ) -> int:
        """One exact exponential-mechanism draw over ``scores`` (times ``sizes``).

        See docs/design.md#em-sampler.
        """
        units, delta = score_units(scores, self.utility, self.delta_u)
        chosen = noise.exponential_mechanism(
            key,
            units[None, :],
            epsilon=self.epsilon_prime,
            sensitivity=delta,
            multipliers=sizes,
            start=nonce,
        )
        return int(chosen[0])

    def _probabilities(self, scores: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
        """Return the exact probabilities of :meth:`_draw`, rounded to float (for the trace)."""
        units, delta = score_units(scores, self.utility, self.delta_u)
        exact = noise.exponential_probabilities(
            units, epsilon=self.epsilon_prime, sensitivity=delta, multipliers=sizes
        )
        return np.array([float(p) for p in exact])

    def _key(self, value_id: int) -> tuple[Any, str]:
        value = self.values[value_id]
        return (self.columns[value.column].name, value.label)

    def _specialise(self, value_id: int) -> None:
        value = self.values[value_id]
        col = self.columns[value.column]
        if isinstance(col, CategoricalColumn):
            kids = col.taxonomy.children(value.node)
            k = len(kids)
            child_of = self._child_index_of(value.column, value.node)
            offset = 0
        else:
            k = 2
            offset = value.a
            child_of = (np.arange(value.a, value.b) >= value.split_code).astype(np.int64)
        cut_size = len(self.cuts[value.column])
        cells = self.n_cells // cut_size * (cut_size - 1 + k)
        if cells > MAX_PARTITIONS:
            raise DPFastValueError(
                f"specialising {quoted(value.label)} would give {cells:,} leaf partitions, above "
                f"the limit of {MAX_PARTITIONS:,}; use a smaller {option('steps')}"
            )
        first_id = len(self.values)
        child_ids = np.arange(first_id, first_id + k, dtype=np.int64)
        hist = self.counts.split(value.column, value_id, child_of, offset, child_ids)
        self.candidates.remove(value_id)
        self.cuts[value.column].remove(value_id)
        if isinstance(col, CategoricalColumn):
            for node in kids:
                self._categorical_value(value.column, node, hist)
        else:
            split = value.split
            assert split is not None
            m = value.split_code
            left = self._numeric_value(value.column, value.lo, split, False, value.a, m)
            right = self._numeric_value(value.column, split, value.hi, value.top, m, value.b)
            for new, sub in ((left, hist[: m - value.a]), (right, hist[m - value.a :])):
                if new.splittable:
                    self._choose_split(new, sub)
        value.children = tuple(int(c) for c in child_ids)

    # -- output --------------------------------------------------------------------------

    def cut_order(self, column: int) -> list[int]:
        """Return the column's cut values: intervals ascending, taxonomy values in preorder."""
        col = self.columns[column]
        ids = list(self.cuts[column])
        if isinstance(col, NumericColumn):
            return sorted(ids, key=lambda v: self.values[v].lo)
        rank = _preorder_rank(col.taxonomy)
        return sorted(ids, key=lambda v: rank[self.values[v].node])

    def leaf_counts(self) -> tuple[list[list[int]], np.ndarray]:
        """Return the cut of every column (display order) and the class counts of every cell.

        Returns ``(cuts, counts)`` with ``counts`` of shape ``(n_cells, n_classes)``, cells
        in C order of the cut positions (the first column varies slowest).
        """
        cuts = [self.cut_order(j) for j in range(len(self.columns))]
        position = np.full(len(self.values), -1, dtype=np.int64)
        for cut in cuts:
            position[np.array(cut, dtype=np.int64)] = np.arange(len(cut), dtype=np.int64)
        return cuts, self.counts.cells(position, [len(c) for c in cuts])


def split_runs(first: int, stop: int, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cut the split candidates ``[first, stop)`` (grid indices) into runs by the data values.

    ``cuts[j]`` (int64, ascending, shape ``(q,)``) is the first grid index that sends the
    ``j``-th distinct data value left (:meth:`NumericColumn.grid_index`). Run ``i`` holds
    the splits that send exactly the first ``i`` values left: run 0 is ``[first,
    cuts[0])``, run ``i`` is ``[cuts[i - 1], cuts[i])`` and run ``q`` is ``[cuts[q - 1],
    stop)``, each clipped to ``[first, stop)``. Returns the runs' first indices and their
    sizes (int64, shape ``(q + 1,)``; a size may be 0, and the sizes sum to ``stop -
    first``). O(q).
    """
    inner = np.clip(cuts, first, stop)
    ends = np.concatenate((np.array([first], dtype=np.int64), inner, [stop]))
    return ends[:-1], np.diff(ends)


def score_units(scores: np.ndarray, utility: str, delta_u: float) -> tuple[np.ndarray, int]:
    """Scores as the exact exponential mechanism's integer qualities, and their sensitivity.

    ``Max`` scores are counts, already integers of sensitivity ``Δu = 1``; ``InfoGain``
    scores are rounded to units of ``2**-SCORE_BITS``, sensitivity
    ``ceil(Δu 2**SCORE_BITS) + 1`` units (:func:`dpfast.noise.quality_units`,
    docs/design.md#em-sampler).
    """
    if utility == "max":
        return np.rint(scores).astype(np.int64), math.ceil(delta_u)
    return noise.quality_units(scores, sensitivity=delta_u)


def _preorder_rank(taxonomy: Any) -> np.ndarray:
    rank = np.zeros(len(taxonomy.labels), dtype=np.int64)
    stack = [0]
    count = 0
    while stack:
        node = stack.pop()
        rank[node] = count
        count += 1
        stack.extend(reversed(taxonomy.children(node)))
    return rank
