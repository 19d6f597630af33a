"""Kernel for distance-based record linkage: exact, on a k-d tree (docs/risk.md#record-linkage).

For released record ``i`` the linkage asks which original records are nearest to it, and
whether its own source ``i`` is among them. Only the records at distance at most
``r = d(y_i, x_i)`` matter, so the search is a ball query of radius ``r`` on a k-d tree of
the original records (:mod:`dpfast._kernels.kdtree`) that stops at the first record
strictly closer than ``r`` (the link fails) and otherwise counts the ``t`` records at
exactly ``r`` (ties, the source included). The records are compared with the squared
distance

    d(y, x) = sum_j w_j * (y_j - x_j) ** 2  +  sum_c table[c, y_c, x_c]

in float64, numeric attributes ``j`` ascending, then categorical attributes ``c``
ascending: ``w_j = 1 / variance_j`` standardises the attributes, and ``table[c]`` holds the
squared normalised semantic distances of a taxonomy. Differences are taken on the values
themselves, so equal differences in the data give equal distances (ties stay ties). The
box bound ``sum_j w_j * gap_j ** 2`` uses the same operations in the same order, and IEEE
rounding is monotone, so no pruned node holds a record within ``r``: the counts are exact.
Categorical attributes add nothing to the bound (their terms are >= 0), so mixed data are
exact too, with less pruning.

``benchmarks/bench_risk.py`` measures this against blockwise NumPy distance matrices (the
same scores) and scikit-learn's ``NearestNeighbors``. Kernels never write their inputs.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.kdtree import box_gap


@jit_inline
def _numeric_distance(query, weights, points, pos):
    d = 0.0
    for j in range(query.shape[0]):
        t = query[j] - points[pos, j]
        d += t * t * weights[j]
    return d


@jit_inline
def _categorical_distance(query_codes, codes, row, table):
    d = 0.0
    for c in range(query_codes.shape[0]):
        d += table[c, query_codes[c], codes[row, c]]
    return d


@jit_inline
def _box_bound(query, weights, lo, hi, node):
    d = 0.0
    for j in range(query.shape[0]):
        t = box_gap(query[j], lo[node, j], hi[node, j])
        d += t * t * weights[j]
    return d


@jit_inline
def _score(query, query_codes, source, tree, weights, codes, table, stack):
    """``1 / t`` if the source is among the ``t`` nearest records (ties), else 0."""
    points, ids, lo, hi = tree.points, tree.ids, tree.lo, tree.hi
    start, end, count = tree.start, tree.end, tree.count
    first_leaf = 1 << tree.depth
    radius = _numeric_distance(query, weights, points, source)
    radius += _categorical_distance(query_codes, codes, ids[source], table)
    ties = 0
    stack[0] = 1
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        if node >= first_leaf:
            for pos in range(start[node], end[node]):
                d = _numeric_distance(query, weights, points, pos)
                if d > radius:
                    continue
                d += _categorical_distance(query_codes, codes, ids[pos], table)
                if d < radius:
                    return 0.0
                if d == radius:
                    ties += 1
            continue
        a = 2 * node
        b = a + 1
        bound_a = _box_bound(query, weights, lo, hi, a) if count[a] > 0 else np.inf
        bound_b = _box_bound(query, weights, lo, hi, b) if count[b] > 0 else np.inf
        if bound_a < bound_b:  # push the nearer child last, so it is visited first
            a, b = b, a
            bound_a, bound_b = bound_b, bound_a
        if bound_a <= radius:
            stack[sp] = a
            sp += 1
        if bound_b <= radius:
            stack[sp] = b
            sp += 1
    return 1.0 / ties


@jit
def linkage_scores(tree, weights, codes, table, queries, query_codes, first, last, out):
    """Score the released records of tree positions ``first .. last - 1`` into ``out``.

    Parameters
    ----------
    tree : kdtree.Tree
        The original records' numeric values (all alive), from ``kdtree.tree_over``.
    weights : float64[m]
        ``1 / variance`` of each numeric attribute.
    codes : int64[n, c]
        The original records' categorical codes, in row order.
    table : float64[c, q, q]
        Squared normalised semantic distances of each categorical attribute.
    queries : float64[n, m]; query_codes : int64[n, c]
        The released records, row ``i`` released from original row ``i``.
    first, last : int
        A range of tree positions: released record ``tree.ids[pos]`` is scored for each
        ``pos``, in tree order, so that consecutive searches visit nearby nodes.
    out : float64[n]
        Written at ``tree.ids[first:last]`` only, so threads may share it.

    Score ``1 / t`` when no original record is strictly closer to ``y_i`` than its source
    and ``t`` records (the source included) are exactly as close; 0 otherwise.
    Complexity: a ball query per record, which stops at the first closer record; about
    O(log n) nodes when the source is among the nearest, O(n) at worst (all records tied).
    """
    stack = np.empty(2 * tree.depth + 4, dtype=np.int64)
    for pos in range(first, last):
        i = tree.ids[pos]
        out[i] = _score(queries[i], query_codes[i], pos, tree, weights, codes, table, stack)
