"""Kernels for MDAV-generic (SPEC §5.1) and insensitive MDAV (SPEC §4.2, §4.3).

Standard MDAV runs on a k-d tree whose node boxes, alive counts and smallest alive row
index are refreshed as records are removed. Farthest-point queries prune a node when the
squared distance to its farthest box corner is below the best so far; k-nearest queries
prune on the distance to the box. Both bounds are computed with the same operations, in
the same order, as the distances themselves; IEEE rounding is monotone, so a pruned node
can hold no record that would win, ties included (ties go to the lowest row index). The
partition is therefore identical to the brute-force loop of ``tests/reference``: the tree
only avoids distance evaluations, about 100x fewer at 20,000 records
(``benchmarks/bench_mdav.py``).

All distances are squared Euclidean, ``sum_j (a_j - b_j) ** 2`` with ``j`` ascending, in
float64. Kernels never write their inputs.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline

_NO_ROW = np.iinfo(np.int64).max
_SEED_SIZE = 256


# -- k-d tree ----------------------------------------------------------------------------


@jit_inline
def _select(points, perm, lo, hi, target, dim):  # type: ignore[no-untyped-def]
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
def build_tree(points, leaf_size):  # type: ignore[no-untyped-def]
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
def _refresh_leaf(node, tree_points, ids, alive, start, end, lo, hi, count, min_id):  # type: ignore[no-untyped-def]
    m = tree_points.shape[1]
    for j in range(m):
        lo[node, j] = np.inf
        hi[node, j] = -np.inf
    c = 0
    smallest = _NO_ROW
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
def _refresh_internal(node, lo, hi, count, min_id):  # type: ignore[no-untyped-def]
    a = 2 * node
    b = a + 1
    count[node] = count[a] + count[b]
    min_id[node] = min(min_id[a], min_id[b])
    for j in range(lo.shape[1]):
        lo[node, j] = min(lo[a, j], lo[b, j])
        hi[node, j] = max(hi[a, j], hi[b, j])


@jit_inline
def _distance(query, tree_points, pos):  # type: ignore[no-untyped-def]
    d = 0.0
    for j in range(query.shape[0]):
        t = query[j] - tree_points[pos, j]
        d += t * t
    return d


@jit_inline
def _upper_bound(query, lo, hi, node):  # type: ignore[no-untyped-def]
    d = 0.0
    for j in range(query.shape[0]):
        t = max(query[j] - lo[node, j], hi[node, j] - query[j])
        d += t * t
    return d


@jit_inline
def _lower_bound(query, lo, hi, node):  # type: ignore[no-untyped-def]
    d = 0.0
    for j in range(query.shape[0]):
        t = 0.0
        if query[j] < lo[node, j]:
            t = lo[node, j] - query[j]
        elif query[j] > hi[node, j]:
            t = query[j] - hi[node, j]
        d += t * t
    return d


@jit_inline
def _farthest(query, tree_points, ids, alive, start, end, lo, hi, count, min_id, first_leaf,
              stack_node, stack_bound, best_pos):  # type: ignore[no-untyped-def]
    """Position of the alive record farthest from ``query``; ties to the lowest row.

    ``best_pos`` (an alive position, or -1) seeds the search: a good first guess prunes
    more, and any guess gives the same answer.
    """
    best_d = -1.0
    best_id = _NO_ROW
    if best_pos >= 0:
        best_d = _distance(query, tree_points, best_pos)
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
                    d = _distance(query, tree_points, pos)
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
def _heap_greater(d1, id1, d2, id2):  # type: ignore[no-untyped-def]
    return d1 > d2 or (d1 == d2 and id1 > id2)


@jit_inline
def _nearest(query, wanted, tree_points, ids, alive, start, end, lo, hi, count, min_id,
             first_leaf, stack_node, stack_bound, heap_d, heap_id, heap_pos):  # type: ignore[no-untyped-def]
    """Fill ``heap_pos[:wanted]`` with the alive records nearest ``query`` (ties: lowest row)."""
    size = 0
    stack_node[0] = 1
    stack_bound[0] = 0.0
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack_node[sp]
        bound = stack_bound[sp]
        if size == wanted and (bound > heap_d[0] or (bound == heap_d[0]
                                                     and min_id[node] > heap_id[0])):
            continue
        if node >= first_leaf:
            for pos in range(start[node], end[node]):
                if not alive[pos]:
                    continue
                d = _distance(query, tree_points, pos)
                row = ids[pos]
                if size < wanted:
                    i = size
                    size += 1
                    while i > 0:  # sift up
                        parent = (i - 1) // 2
                        if _heap_greater(d, row, heap_d[parent], heap_id[parent]):
                            heap_d[i] = heap_d[parent]
                            heap_id[i] = heap_id[parent]
                            heap_pos[i] = heap_pos[parent]
                            i = parent
                        else:
                            break
                    heap_d[i] = d
                    heap_id[i] = row
                    heap_pos[i] = pos
                elif _heap_greater(heap_d[0], heap_id[0], d, row):
                    i = 0
                    while True:  # sift down from the root
                        child = 2 * i + 1
                        if child >= size:
                            break
                        if child + 1 < size and _heap_greater(
                                heap_d[child + 1], heap_id[child + 1], heap_d[child],
                                heap_id[child]):
                            child += 1
                        if _heap_greater(heap_d[child], heap_id[child], d, row):
                            heap_d[i] = heap_d[child]
                            heap_id[i] = heap_id[child]
                            heap_pos[i] = heap_pos[child]
                            i = child
                        else:
                            break
                    heap_d[i] = d
                    heap_id[i] = row
                    heap_pos[i] = pos
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


@jit_inline
def _kth_smallest(buffer, length, target):  # type: ignore[no-untyped-def]
    """Value of rank ``target`` (0-based) among ``buffer[:length]``, which is reordered."""
    lo = 0
    hi = length - 1
    while lo < hi:
        a = buffer[lo]
        b = buffer[(lo + hi) // 2]
        c = buffer[hi]
        pivot = max(min(a, b), min(max(a, b), c))
        lt = lo
        i = lo
        gt = hi
        while i <= gt:
            v = buffer[i]
            if v < pivot:
                buffer[lt], buffer[i] = buffer[i], buffer[lt]
                lt += 1
                i += 1
            elif v > pivot:
                buffer[i], buffer[gt] = buffer[gt], buffer[i]
                gt -= 1
            else:
                i += 1
        if target < lt:
            hi = lt - 1
        elif target > gt:
            lo = gt + 1
        else:
            return pivot
    return buffer[target]


@jit_inline
def _shell_bound(anchor_key, shift):  # type: ignore[no-untyped-def]
    """Upper bound on the computed distance to the centroid, with a 1e-9 rounding margin.

    ``|x - c| <= |x - a| + |a - c|``; float sums of squares are within ``(m + 2) 2**-53``
    relative error of the exact values, far inside the margin, so pruning stays exact.
    """
    t = (np.sqrt(anchor_key) + shift) * (1.0 + 1e-9)
    return t * t


@jit_inline
def _shell_farthest(query, shift, shell_pos, shell_key, n_shell, outside, tree_points, ids,
                    alive):  # type: ignore[no-untyped-def]
    """Farthest alive record from ``query`` among the shell list, or -1 if not provable.

    The list holds alive records by decreasing distance key to an anchor ``a``, with
    ``shift >= |query - a|``; every record not listed has a key of at most ``outside``.
    """
    best_d = -1.0
    best_id = _NO_ROW
    best_pos = -1
    for i in range(n_shell):
        pos = shell_pos[i]
        if not alive[pos]:
            continue
        if _shell_bound(shell_key[i], shift) < best_d:
            return best_pos
        d = _distance(query, tree_points, pos)
        if d > best_d or (d == best_d and ids[pos] < best_id):
            best_d = d
            best_id = ids[pos]
            best_pos = pos
    if outside >= 0.0 and _shell_bound(outside, shift) >= best_d:
        return -1
    return best_pos


@jit_inline
def _build_shell(query, shell_target, tree_points, alive, keys, buffer, shell_pos,
                 shell_key):  # type: ignore[no-untyped-def]
    """List the ``shell_target`` alive records farthest from ``query``, by decreasing key.

    Ties at the cut are included. Returns their number and the largest key left out.
    """
    n = tree_points.shape[0]
    n_alive = 0
    for pos in range(n):
        if alive[pos]:
            d = _distance(query, tree_points, pos)
            keys[pos] = d
            buffer[n_alive] = d
            n_alive += 1
    cut = -np.inf
    if n_alive > shell_target:
        cut = _kth_smallest(buffer, n_alive, n_alive - shell_target)
    n_shell = 0
    outside = -1.0
    for pos in range(n):
        if alive[pos]:
            if keys[pos] >= cut:
                shell_pos[n_shell] = pos
                buffer[n_shell] = keys[pos]
                n_shell += 1
            else:
                outside = max(outside, keys[pos])
    order = np.argsort(buffer[:n_shell])
    for i in range(n_shell):
        j = order[n_shell - 1 - i]
        shell_key[i] = buffer[j]
    tmp = shell_pos[:n_shell].copy()
    for i in range(n_shell):
        shell_pos[i] = tmp[order[n_shell - 1 - i]]
    return n_shell, outside


@jit
def mdav_partition(grid_points, k, leaf_size, shell_size):  # type: ignore[no-untyped-def]
    """MDAV-generic clusters of standardised records (SPEC §5.1), in formation order.

    Parameters
    ----------
    grid_points : float64[n, m]
        Standardised records in integer grid units (whole numbers below ``2**50`` in
        magnitude whose column sums fit in ``2**53``), so the running centroid sums are
        exact. Never written.
    k : int
        Cluster size, ``1 <= k <= n``.
    leaf_size : int
        Rows per k-d tree leaf (performance only).

    Returns
    -------
    labels : int64[n]
        Cluster of each row, numbered in formation order.
    n_clusters : int

    Notes
    -----
    While at least ``3k`` rows remain: ``x_r`` is the row farthest from the centroid of the
    remaining rows, its cluster is ``x_r`` plus its ``k - 1`` nearest rows; then ``x_s`` is
    the remaining row farthest from ``x_r``, with its ``k - 1`` nearest. With ``2k .. 3k-1``
    rows left one more cluster forms around the farthest row from the centroid; the rest
    (``k .. 2k-1`` rows, or all rows when ``n < 2k``) is the last cluster. Farthest and
    nearest ties go to the lowest row index. The centroid is ``float(S_j) / count`` with
    ``S_j`` the exact integer sum. Complexity: O(n log n) to build, then per cluster two
    pruned tree searches and O(k m log n) of box updates.
    """
    n, m = grid_points.shape
    perm, start, end, depth = build_tree(grid_points, leaf_size)
    n_nodes = start.shape[0]
    first_leaf = 1 << depth
    tree_points = np.empty((n, m), dtype=np.float64)
    for pos in range(n):
        for j in range(m):
            tree_points[pos, j] = grid_points[perm[pos], j]
    ids = perm
    alive = np.ones(n, dtype=np.bool_)
    leaf_of = np.empty(n, dtype=np.int64)
    lo = np.empty((n_nodes, m), dtype=np.float64)
    hi = np.empty((n_nodes, m), dtype=np.float64)
    count = np.zeros(n_nodes, dtype=np.int64)
    min_id = np.full(n_nodes, _NO_ROW, dtype=np.int64)
    for node in range(first_leaf, n_nodes):
        for pos in range(start[node], end[node]):
            leaf_of[pos] = node
        _refresh_leaf(node, tree_points, ids, alive, start, end, lo, hi, count, min_id)
    for node in range(first_leaf - 1, 0, -1):
        _refresh_internal(node, lo, hi, count, min_id)

    sums = np.zeros(m, dtype=np.int64)
    for pos in range(n):
        for j in range(m):
            sums[j] += np.int64(tree_points[pos, j])
    stack_node = np.empty(2 * depth + 4, dtype=np.int64)
    stack_bound = np.empty(2 * depth + 4, dtype=np.float64)
    heap_d = np.empty(k, dtype=np.float64)
    heap_id = np.empty(k, dtype=np.int64)
    heap_pos = np.empty(k, dtype=np.int64)
    query = np.empty(m, dtype=np.float64)
    labels = np.full(n, -1, dtype=np.int64)
    anchor = np.empty(m, dtype=np.float64)
    keys = np.empty(n, dtype=np.float64)
    buffer = np.empty(n, dtype=np.float64)
    shell_pos = np.empty(n, dtype=np.int64)
    shell_key = np.empty(n, dtype=np.float64)
    n_shell = 0
    outside = -1.0
    remaining = n
    cluster = 0
    while remaining >= 2 * k:
        for j in range(m):
            query[j] = np.float64(sums[j]) / remaining
        n_rounds = 2 if remaining >= 3 * k else 1
        for round_ in range(n_rounds):
            center = -1
            if round_ == 0 and n_shell > 0:
                shift = 0.0
                for j in range(m):
                    t = query[j] - anchor[j]
                    shift += t * t
                center = _shell_farthest(query, np.sqrt(shift), shell_pos, shell_key,
                                         n_shell, outside, tree_points, ids, alive)
            if round_ == 0 and center < 0:
                n_shell, outside = _build_shell(query, shell_size, tree_points, alive, keys,
                                                buffer, shell_pos, shell_key)
                anchor[:] = query
                center = _shell_farthest(query, 0.0, shell_pos, shell_key, n_shell, outside,
                                         tree_points, ids, alive)
            if center < 0:  # rounding margin too close to call, or the second round
                guess = -1
                best_d = -1.0
                seen = 0
                for i in range(n_shell):  # records far from the centroid: a good first guess
                    pos = shell_pos[i]
                    if alive[pos]:
                        d = _distance(query, tree_points, pos)
                        if d > best_d:
                            best_d = d
                            guess = pos
                        seen += 1
                        if seen == _SEED_SIZE:
                            break
                center = _farthest(query, tree_points, ids, alive, start, end, lo, hi, count,
                                   min_id, first_leaf, stack_node, stack_bound, guess)
            alive[center] = False
            for j in range(m):
                query[j] = tree_points[center, j]
            found = _nearest(query, k - 1, tree_points, ids, alive, start, end, lo, hi,
                             count, min_id, first_leaf, stack_node, stack_bound, heap_d,
                             heap_id, heap_pos)
            heap_pos[found] = center
            for i in range(found + 1):
                pos = heap_pos[i]
                alive[pos] = False
                labels[ids[pos]] = cluster
                for j in range(m):
                    sums[j] -= np.int64(tree_points[pos, j])
            for i in range(found + 1):
                node = leaf_of[heap_pos[i]]
                _refresh_leaf(node, tree_points, ids, alive, start, end, lo, hi, count,
                              min_id)
                node //= 2
                while node >= 1:
                    _refresh_internal(node, lo, hi, count, min_id)
                    node //= 2
            remaining -= found + 1
            cluster += 1
            # query now holds x_r: the second round looks for the row farthest from it
    if remaining > 0:
        for pos in range(n):
            if alive[pos]:
                labels[ids[pos]] = cluster
        cluster += 1
    return labels, cluster


# -- insensitive MDAV --------------------------------------------------------------------


@jit_inline
def _reference_key(values, row, point, widths):  # type: ignore[no-untyped-def]
    d = 0.0
    for j in range(values.shape[1]):
        if widths[j] > 0.0:
            t = (values[row, j] - point[j]) / widths[j]
            d += t * t
    return d


@jit
def reference_keys(values, point, widths):  # type: ignore[no-untyped-def]
    """Normalised squared distance of every row to one reference point (SPEC §4.2).

    Parameters
    ----------
    values : float64[n, m]
        Clamped records. Never written.
    point : float64[m]
    widths : float64[m]
        Domain widths; zero-width attributes are left out of the distance.

    Returns
    -------
    float64[n]
        ``sum_j ((x_j - point_j) / width_j) ** 2``, ``j`` ascending. Complexity O(n m).
    """
    n = values.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = _reference_key(values, i, point, widths)
    return out


@jit_inline
def _before(key_a, a, key_b, b, values):  # type: ignore[no-untyped-def]
    """Strict total order of SPEC §4.2: key, then values lexicographically, then row."""
    if key_a != key_b:
        return key_a < key_b
    for j in range(values.shape[1]):
        if values[a, j] != values[b, j]:
            return values[a, j] < values[b, j]
    return a < b


@jit
def insensitive_general(values, k, points, sequence, widths):  # type: ignore[no-untyped-def]
    """Insensitive MDAV with any reference sequence: O(n^2 m / k) (SPEC §4.2, §4.3).

    Parameters
    ----------
    values : float64[n, m]
        Clamped records. Never written.
    k : int
    points : float64[p, m]
        Distinct reference points.
    sequence : int64[n // k - 1] (or longer)
        Reference point used by each cluster taken while ``>= 2k`` rows remain.
    widths : float64[m]

    Returns
    -------
    int64[n]
        Cluster of each row in formation order; the last cluster holds the rest.

    Each step scans every remaining row and keeps the ``k`` smallest under the strict order
    (key, values, row) in a bounded max-heap.
    """
    n = values.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    heap_key = np.empty(k, dtype=np.float64)
    heap_row = np.empty(k, dtype=np.int64)
    remaining = n
    cluster = 0
    while remaining >= 2 * k:
        point = points[sequence[cluster]]
        size = 0
        for row in range(n):
            if labels[row] >= 0:
                continue
            key = _reference_key(values, row, point, widths)
            if size < k:
                i = size
                size += 1
                while i > 0:
                    parent = (i - 1) // 2
                    if _before(heap_key[parent], heap_row[parent], key, row, values):
                        heap_key[i] = heap_key[parent]
                        heap_row[i] = heap_row[parent]
                        i = parent
                    else:
                        break
                heap_key[i] = key
                heap_row[i] = row
            elif _before(key, row, heap_key[0], heap_row[0], values):
                i = 0
                while True:
                    child = 2 * i + 1
                    if child >= size:
                        break
                    if child + 1 < size and _before(heap_key[child], heap_row[child],
                                                    heap_key[child + 1], heap_row[child + 1],
                                                    values):
                        child += 1
                    if _before(key, row, heap_key[child], heap_row[child], values):
                        heap_key[i] = heap_key[child]
                        heap_row[i] = heap_row[child]
                        i = child
                    else:
                        break
                heap_key[i] = key
                heap_row[i] = row
        for i in range(size):
            labels[heap_row[i]] = cluster
        remaining -= size
        cluster += 1
    for row in range(n):
        if labels[row] < 0:
            labels[row] = cluster
    return labels


@jit
def take_in_order(orders, sequence, k):  # type: ignore[no-untyped-def]
    """Insensitive MDAV fast path: each cluster takes the first ``k`` unused rows of its order.

    Parameters
    ----------
    orders : int64[p, n]
        For each distinct reference point, all rows sorted by (key, values, row).
    sequence : int64[n // k - 1] (or longer)
    k : int

    Returns
    -------
    int64[n]
        The same labels as :func:`insensitive_general`. Complexity O(p n + n).
    """
    p, n = orders.shape
    labels = np.full(n, -1, dtype=np.int64)
    cursor = np.zeros(p, dtype=np.int64)
    remaining = n
    cluster = 0
    while remaining >= 2 * k:
        which = sequence[cluster]
        taken = 0
        c = cursor[which]
        while taken < k:
            row = orders[which, c]
            c += 1
            if labels[row] < 0:
                labels[row] = cluster
                taken += 1
        cursor[which] = c
        remaining -= k
        cluster += 1
    for row in range(n):
        if labels[row] < 0:
            labels[row] = cluster
    return labels


# -- release -----------------------------------------------------------------------------


@jit
def cluster_grid_sums(values, labels, n_clusters, lower, upper, gamma, d_int):  # type: ignore[no-untyped-def]
    """Clamp and quantise a column to its grid; exact integer sums per cluster.

    Parameters
    ----------
    values : float64[n]
        Never written.
    labels : int64[n]
    n_clusters : int
    lower, upper, gamma : float
    d_int : int

    Returns
    -------
    sums, sizes : int64[n_clusters]
    n_clamped : int
        Values outside ``[lower, upper]``.

    Quantisation is ``rint((clamp(x) - lower) / gamma)`` as in individual ranking. O(n).
    """
    sums = np.zeros(n_clusters, dtype=np.int64)
    sizes = np.zeros(n_clusters, dtype=np.int64)
    n_clamped = 0
    for i in range(values.shape[0]):
        x = values[i]
        if x < lower:
            x = lower
            n_clamped += 1
        elif x > upper:
            x = upper
            n_clamped += 1
        q = np.rint((x - lower) / gamma)
        if q > d_int:
            q = d_int
        sums[labels[i]] += np.int64(q)
        sizes[labels[i]] += 1
    return sums, sizes, n_clamped


@jit
def noisy_cluster_values(sums, sizes, noise, d_int):  # type: ignore[no-untyped-def]
    """Round each cluster mean to the grid (half to even), add its noise, clamp to the grid.

    Parameters
    ----------
    sums, sizes : int64[n_clusters]
    noise : int64[n_clusters]
        One discrete Laplace draw per cluster, in grid steps.
    d_int : int

    Returns
    -------
    int64[n_clusters]
        Values in ``[0, d_int]``. O(n_clusters).
    """
    n_clusters = sums.shape[0]
    out = np.empty(n_clusters, dtype=np.int64)
    for g in range(n_clusters):
        quotient = sums[g] // sizes[g]
        twice_rest = 2 * (sums[g] - quotient * sizes[g])
        if twice_rest > sizes[g] or (twice_rest == sizes[g] and quotient % 2 == 1):
            quotient += 1
        value = quotient + noise[g]
        out[g] = min(max(value, 0), d_int)
    return out


@jit
def broadcast_clusters(labels, cluster_values, lower, upper, gamma, round_values,  # type: ignore[no-untyped-def]
                       destination, out):
    """Write ``lower + gamma * cluster_values[label]`` of each row to ``out[destination[row]]``.

    ``destination`` empty means the input order; ``round_values`` rounds to integers. O(n).
    """
    n = labels.shape[0]
    shuffled = destination.shape[0] == n
    for row in range(n):
        value = lower + gamma * cluster_values[labels[row]]
        if round_values:
            value = np.rint(value)
        if value > upper:
            value = upper
        elif value < lower:
            value = lower
        if shuffled:
            out[destination[row]] = value
        else:
            out[row] = value
