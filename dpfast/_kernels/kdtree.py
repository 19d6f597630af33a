"""k-d tree kernels: exact farthest-point and k-nearest searches over alive records.

Balanced tree in heap layout (node ``i`` has children ``2i`` and ``2i + 1``). Each node
keeps the bounding box, the alive count and the smallest alive row index of its records,
refreshed as records are removed. Farthest searches prune a node when the squared
distance to its farthest box corner is below the best so far; nearest searches prune on
the distance to the box. Bounds use the same operations, in the same order, as the
distances (``sum_j (a_j - b_j) ** 2``, ``j`` ascending, float64): IEEE rounding is
monotone, so a pruned node holds no record that could win, ties (lowest row) included.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline, struct

NO_ROW = np.iinfo(np.int64).max

# A k-d tree over records, with the state that tracks which are still alive. Positions
# are tree order (see build_tree); nodes are in heap layout, node 0 unused:
#   points   float64[n, m], the records in tree order
#   ids      int64[n], row of each position; alive bool[n]; leaf_of int64[n], leaf node
#   start, end  int64[n_nodes], position range of each node
#   lo, hi   float64[n_nodes, m], bounding box of the node's alive records
#   count    int64[n_nodes], its alive records; min_id int64[n_nodes], their lowest row
#   depth    int, leaves are nodes 2**depth .. 2**(depth + 1) - 1
Tree = struct("Tree", "points ids alive leaf_of start end lo hi count min_id depth", __name__)
# Scratch of the searches: stack_node int64[2 * depth + 4], stack_bound float64[same];
# heap_d float64[k], heap_id int64[k], heap_pos int64[k] (nearest's max-heap).
Scratch = struct("Scratch", "stack_node stack_bound heap_d heap_id heap_pos", __name__)

# -- k-d tree ----------------------------------------------------------------------------


@jit_inline
def _select(points, perm, lo, hi, target, dim):
    """Reorder ``perm[lo:hi+1]`` so that position ``target`` holds its order statistic."""
    while lo < hi:
        a = points[perm[lo], dim]
        b = points[perm[(lo + hi) // 2], dim]
        c = points[perm[hi], dim]
        pivot = max(min(a, b), min(max(a, b), c))
        lt = lo
        i = lo
        gt = hi
        while i <= gt:
            v = points[perm[i], dim]
            if v < pivot:
                perm[lt], perm[i] = perm[i], perm[lt]
                lt += 1
                i += 1
            elif v > pivot:
                perm[i], perm[gt] = perm[gt], perm[i]
                gt -= 1
            else:
                i += 1
        if target < lt:
            hi = lt - 1
        elif target > gt:
            lo = gt + 1
        else:
            return


@jit
def build_tree(points, leaf_size):
    """Balanced k-d tree in heap layout: node ``i`` has children ``2i`` and ``2i + 1``.

    Parameters
    ----------
    points : float64[n, m]
    leaf_size : int

    Returns
    -------
    perm : int64[n]
        Row of each tree position.
    start, end : int64[n_nodes]
        Position range of each node (node 0 unused).
    depth : int
        Leaves are nodes ``2**depth .. 2**(depth + 1) - 1``, each with at most
        ``leaf_size`` rows.

    Complexity O(n m log n): each level splits at the median of the widest dimension.
    """
    n, m = points.shape
    depth = 0
    while ((n + (1 << depth) - 1) >> depth) > leaf_size:
        depth += 1
    n_nodes = 1 << (depth + 1)
    start = np.zeros(n_nodes, dtype=np.int64)
    end = np.zeros(n_nodes, dtype=np.int64)
    perm = np.arange(n)
    end[1] = n
    for node in range(1, 1 << depth):
        s = start[node]
        e = end[node]
        mid = (s + e) // 2
        if e - s >= 2:
            best_dim = 0
            best_spread = -1.0
            for j in range(m):
                low = np.inf
                high = -np.inf
                for p in range(s, e):
                    v = points[perm[p], j]
                    low = min(low, v)
                    high = max(high, v)
                if high - low > best_spread:
                    best_spread = high - low
                    best_dim = j
            _select(points, perm, s, e - 1, mid, best_dim)
        start[2 * node] = s
        end[2 * node] = mid
        start[2 * node + 1] = mid
        end[2 * node + 1] = e
    return perm, start, end, depth


@jit_inline
def refresh_leaf(node, tree):
    """Recompute the box, alive count and lowest alive row of leaf ``node``."""
    tree_points, ids, alive, lo, hi = tree.points, tree.ids, tree.alive, tree.lo, tree.hi
    start, end, count, min_id = tree.start, tree.end, tree.count, tree.min_id
    m = tree_points.shape[1]
    for j in range(m):
        lo[node, j] = np.inf
        hi[node, j] = -np.inf
    c = 0
    smallest = NO_ROW
    for pos in range(start[node], end[node]):
        if alive[pos]:
            c += 1
            smallest = min(smallest, ids[pos])
            for j in range(m):
                v = tree_points[pos, j]
                lo[node, j] = min(lo[node, j], v)
                hi[node, j] = max(hi[node, j], v)
    count[node] = c
    min_id[node] = smallest


@jit_inline
def refresh_internal(node, tree):
    """Recompute internal ``node``'s box, count and lowest row from its two children."""
    lo, hi, count, min_id = tree.lo, tree.hi, tree.count, tree.min_id
    a = 2 * node
    b = a + 1
    count[node] = count[a] + count[b]
    min_id[node] = min(min_id[a], min_id[b])
    for j in range(lo.shape[1]):
        lo[node, j] = min(lo[a, j], lo[b, j])
        hi[node, j] = max(hi[a, j], hi[b, j])


@jit
def tree_over(points, rows, leaf_size, split_scale):
    """:class:`Tree` over ``points[rows]``, all alive.

    Parameters
    ----------
    points : float64[N, m]
        Never written; the tree holds a copy of ``points[rows]`` in tree order.
    rows : int64[n]
    leaf_size : int
    split_scale : float64[m]
        Positive factors by which the spreads are compared when choosing each split
        dimension (ones: raw spreads). Only the shape of the tree depends on them: the
        boxes are those of the records, so every search on it stays exact.

    Complexity O(n m log n) time, O(n m) memory.
    """
    n = rows.shape[0]
    m = points.shape[1]
    subset = np.empty((n, m), dtype=np.float64)
    for i in range(n):
        for j in range(m):
            subset[i, j] = points[rows[i], j] * split_scale[j]
    perm, start, end, depth = build_tree(subset, leaf_size)
    n_nodes = start.shape[0]
    first_leaf = 1 << depth
    tree_points = np.empty((n, m), dtype=np.float64)
    ids = np.empty(n, dtype=np.int64)
    for pos in range(n):
        ids[pos] = rows[perm[pos]]
        for j in range(m):
            tree_points[pos, j] = points[ids[pos], j]
    alive = np.ones(n, dtype=np.bool_)
    leaf_of = np.empty(n, dtype=np.int64)
    lo = np.empty((n_nodes, m), dtype=np.float64)
    hi = np.empty((n_nodes, m), dtype=np.float64)
    count = np.zeros(n_nodes, dtype=np.int64)
    min_id = np.full(n_nodes, NO_ROW, dtype=np.int64)
    tree = Tree(tree_points, ids, alive, leaf_of, start, end, lo, hi, count, min_id, depth)
    for node in range(first_leaf, n_nodes):
        for pos in range(start[node], end[node]):
            leaf_of[pos] = node
        refresh_leaf(node, tree)
    for node in range(first_leaf - 1, 0, -1):
        refresh_internal(node, tree)
    return tree


@jit_inline
def distance(query, tree_points, pos):
    d = 0.0
    for j in range(query.shape[0]):
        t = query[j] - tree_points[pos, j]
        d += t * t
    return d


@jit_inline
def _upper_bound(query, lo, hi, node):
    d = 0.0
    for j in range(query.shape[0]):
        t = max(query[j] - lo[node, j], hi[node, j] - query[j])
        d += t * t
    return d


@jit_inline
def box_gap(value, low, high):
    """Distance from ``value`` to the interval ``[low, high]``: 0 inside it."""
    if value < low:
        return low - value
    if value > high:
        return value - high
    return 0.0


@jit_inline
def _lower_bound(query, lo, hi, node):
    d = 0.0
    for j in range(query.shape[0]):
        t = box_gap(query[j], lo[node, j], hi[node, j])
        d += t * t
    return d


@jit_inline
def farthest(query, tree, scratch, best_pos):
    """Position of the alive record farthest from ``query``; ties to the lowest row.

    ``best_pos`` (an alive position, or -1) seeds the search: a good first guess prunes
    more, and any guess gives the same answer.
    """
    tree_points, ids, alive, lo, hi = tree.points, tree.ids, tree.alive, tree.lo, tree.hi
    start, end, count, min_id = tree.start, tree.end, tree.count, tree.min_id
    first_leaf = 1 << tree.depth
    stack_node, stack_bound = scratch.stack_node, scratch.stack_bound
    best_d = -1.0
    best_id = NO_ROW
    if best_pos >= 0:
        best_d = distance(query, tree_points, best_pos)
        best_id = ids[best_pos]
    stack_node[0] = 1
    stack_bound[0] = np.inf
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack_node[sp]
        bound = stack_bound[sp]
        if bound < best_d or (bound == best_d and min_id[node] > best_id):
            continue
        if node >= first_leaf:
            for pos in range(start[node], end[node]):
                if alive[pos]:
                    d = distance(query, tree_points, pos)
                    if d > best_d or (d == best_d and ids[pos] < best_id):
                        best_d = d
                        best_id = ids[pos]
                        best_pos = pos
            continue
        a = 2 * node
        b = a + 1
        bound_a = _upper_bound(query, lo, hi, a) if count[a] > 0 else -2.0
        bound_b = _upper_bound(query, lo, hi, b) if count[b] > 0 else -2.0
        if bound_a > bound_b:
            a, b = b, a
            bound_a, bound_b = bound_b, bound_a
        if bound_a > best_d or (bound_a == best_d and min_id[a] < best_id):
            stack_node[sp] = a
            stack_bound[sp] = bound_a
            sp += 1
        if bound_b > best_d or (bound_b == best_d and min_id[b] < best_id):
            stack_node[sp] = b
            stack_bound[sp] = bound_b
            sp += 1
    return best_pos


@jit_inline
def _heap_greater(d1, id1, d2, id2):
    return d1 > d2 or (d1 == d2 and id1 > id2)


@jit_inline
def _heap_set(scratch, i, d, row, pos):
    """Write ``(d, row, pos)`` at slot ``i`` of nearest's max-heap."""
    scratch.heap_d[i] = d
    scratch.heap_id[i] = row
    scratch.heap_pos[i] = pos


@jit_inline
def _heap_insert(scratch, size, d, row, pos):
    """Add ``(d, row, pos)`` to the max-heap of ``size`` entries (which has room): sift up."""
    heap_d, heap_id, heap_pos = scratch.heap_d, scratch.heap_id, scratch.heap_pos
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _heap_greater(d, row, heap_d[parent], heap_id[parent]):
            break
        _heap_set(scratch, i, heap_d[parent], heap_id[parent], heap_pos[parent])
        i = parent
    _heap_set(scratch, i, d, row, pos)


@jit_inline
def _heap_replace_top(scratch, size, d, row, pos):
    """Replace the max-heap's largest entry with the smaller ``(d, row, pos)``: sift down."""
    heap_d, heap_id, heap_pos = scratch.heap_d, scratch.heap_id, scratch.heap_pos
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _heap_greater(
            heap_d[child + 1], heap_id[child + 1], heap_d[child], heap_id[child]
        ):
            child += 1
        if not _heap_greater(heap_d[child], heap_id[child], d, row):
            break
        _heap_set(scratch, i, heap_d[child], heap_id[child], heap_pos[child])
        i = child
    _heap_set(scratch, i, d, row, pos)


@jit_inline
def _nearest_in_leaf(query, wanted, node, tree, scratch, size):
    """Offer leaf ``node``'s alive records to the heap of the ``wanted`` nearest; new size."""
    tree_points, ids, alive = tree.points, tree.ids, tree.alive
    heap_d, heap_id = scratch.heap_d, scratch.heap_id
    for pos in range(tree.start[node], tree.end[node]):
        if not alive[pos]:
            continue
        d = distance(query, tree_points, pos)
        row = ids[pos]
        if size < wanted:
            _heap_insert(scratch, size, d, row, pos)
            size += 1
        elif _heap_greater(heap_d[0], heap_id[0], d, row):
            _heap_replace_top(scratch, size, d, row, pos)
    return size


@jit_inline
def nearest(query, wanted, tree, scratch):
    """Fill ``scratch.heap_pos[:wanted]`` with the alive records nearest ``query``.

    Ties go to the lowest row. Returns how many were found (fewer when fewer are alive).
    """
    lo, hi, count, min_id = tree.lo, tree.hi, tree.count, tree.min_id
    first_leaf = 1 << tree.depth
    stack_node, stack_bound = scratch.stack_node, scratch.stack_bound
    heap_d, heap_id = scratch.heap_d, scratch.heap_id
    size = 0
    stack_node[0] = 1
    stack_bound[0] = 0.0
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack_node[sp]
        bound = stack_bound[sp]
        if size == wanted and (
            bound > heap_d[0] or (bound == heap_d[0] and min_id[node] > heap_id[0])
        ):
            continue
        if node >= first_leaf:
            size = _nearest_in_leaf(query, wanted, node, tree, scratch, size)
            continue
        a = 2 * node
        b = a + 1
        bound_a = _lower_bound(query, lo, hi, a) if count[a] > 0 else -1.0
        bound_b = _lower_bound(query, lo, hi, b) if count[b] > 0 else -1.0
        if bound_a < bound_b:  # push the nearer child last, so it is visited first
            a, b = b, a
            bound_a, bound_b = bound_b, bound_a
        if bound_a >= 0.0:
            stack_node[sp] = a
            stack_bound[sp] = bound_a
            sp += 1
        if bound_b >= 0.0:
            stack_node[sp] = b
            stack_bound[sp] = bound_b
            sp += 1
    return size
