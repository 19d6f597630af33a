"""Kernels for MDAV-generic (docs/design.md#mdav-generic): exact, with pruned searches.

Both farthest-record searches (from the centroid, then from ``x_r``) first scan a *shell*
list: the alive records farthest from an anchor (the centroid when the list was built),
sorted by that distance, with their values copied contiguously. By the triangle
inequality, with a 1e-9 relative margin far above float rounding, a record can beat the
best so far only if its anchor distance is large enough, so the scan stops early, and
records outside the list are ruled out by the largest distance left out. When that cannot
be proven, the centroid search rebuilds the list (O(n)) and the ``x_r`` search falls back
to the exact k-d tree search of :mod:`dpfast._kernels.kdtree`, seeded with the shell's
answer; the k - 1 nearest records always come from the tree. The tree is rebuilt over the
alive records whenever they drop below half of it. Every pruning rule is exact, so the
partition equals the brute-force reference's, ties (lowest row) included;
``benchmarks/bench_mdav.py`` measures the speed-up over a vectorised NumPy MDAV.

All distances are squared Euclidean, ``sum_j (a_j - b_j) ** 2`` with ``j`` ascending, in
float64. Kernels never write their inputs.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline, struct
from dpfast._kernels.kdtree import (
    NO_ROW,
    Scratch,
    distance,
    farthest,
    nearest,
    refresh_internal,
    refresh_leaf,
    tree_over,
)

# The shell list of the farthest-record searches (see the module docstring), n rows:
#   pos int64[n], key float64[n], points float64[n, m]: listed positions, their keys
#       (decreasing) and values; anchor float64[m], the query the list was built from
#   keys, buffer float64[n]: scratch of _build_shell
Shell = struct("Shell", "pos key points anchor keys buffer", __name__)


@jit_inline
def _kth_smallest(buffer, length, target):
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
def _shell_bound(anchor_key, shift):
    """Upper bound on the computed distance to the centroid, with a 1e-9 rounding margin.

    ``|x - c| <= |x - a| + |a - c|``; float sums of squares are within ``(m + 2) 2**-53``
    relative error of the exact values, far inside the margin, so pruning stays exact.
    """
    t = (np.sqrt(anchor_key) + shift) * (1.0 + 1e-9)
    return t * t


@jit_inline
def _shell_farthest(query, shift, shell_pos, shell_key, shell_points, n_shell, outside, tree):
    """Farthest alive record from ``query`` among the shell list, and whether it is proven.

    The list holds records by decreasing distance key to an anchor ``a`` (their values in
    ``shell_points``), with ``shift >= |query - a|``; every record not listed has a key of
    at most ``outside``. Unproven answers are still good seeds for a tree search.
    """
    ids, alive = tree.ids, tree.alive
    best_d = -1.0
    best_id = NO_ROW
    best_pos = -1
    for i in range(n_shell):
        pos = shell_pos[i]
        if not alive[pos]:
            continue
        if _shell_bound(shell_key[i], shift) < best_d:
            return best_pos, True
        d = distance(query, shell_points, i)
        if d > best_d or (d == best_d and ids[pos] < best_id):
            best_d = d
            best_id = ids[pos]
            best_pos = pos
    if best_pos < 0 or (outside >= 0.0 and _shell_bound(outside, shift) >= best_d):
        return best_pos, False
    return best_pos, True


@jit_inline
def _build_shell(query, shell_target, tree, keys, buffer, shell_pos, shell_key, shell_points):
    """List the ``shell_target`` alive records farthest from ``query``, by decreasing key.

    Ties at the cut are included. Returns their number and the largest key left out.
    """
    tree_points, alive = tree.points, tree.alive
    n = tree_points.shape[0]
    n_alive = 0
    for pos in range(n):
        if alive[pos]:
            d = distance(query, tree_points, pos)
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
        for j in range(tree_points.shape[1]):
            shell_points[i, j] = tree_points[shell_pos[i], j]
    return n_shell, outside


@jit_inline
def integer_sums(points):
    """Column sums (int64[m]) of ``points`` (float64[n, m], whole numbers), exact. O(n m)."""
    n, m = points.shape
    sums = np.zeros(m, dtype=np.int64)
    for pos in range(n):
        for j in range(m):
            sums[j] += np.int64(points[pos, j])
    return sums


@jit_inline
def _alive_tree(grid_points, tree, remaining, leaf_size):
    """Return a new tree over the ``remaining`` alive records of ``tree``, all alive.

    A tree of the alive rows only is shallower and stays in cache.
    """
    rows = np.empty(remaining, dtype=np.int64)
    r = 0
    for pos in range(tree.ids.shape[0]):
        if tree.alive[pos]:
            rows[r] = tree.ids[pos]
            r += 1
    return tree_over(grid_points, rows, leaf_size, np.ones(grid_points.shape[1]))


@jit_inline
def _farthest_record(query, may_rebuild, shell_size, tree, scratch, shell, n_shell, outside):
    """Position of the alive record farthest from ``query``; ties to the lowest row.

    The shell list bounds every record's distance to ``query`` through its anchor. When
    that proves nothing and ``may_rebuild`` (``query`` is the centroid), the list is
    rebuilt around ``query``; when still unproven, the exact tree search decides, seeded
    with the shell's answer. Returns the position and the list's new ``n_shell`` and
    ``outside``.
    """
    shift = 0.0
    for j in range(query.shape[0]):
        t = query[j] - shell.anchor[j]
        shift += t * t
    center, proven = _shell_farthest(
        query, np.sqrt(shift), shell.pos, shell.key, shell.points, n_shell, outside, tree
    )
    if not proven and may_rebuild:
        n_shell, outside = _build_shell(
            query, shell_size, tree, shell.keys, shell.buffer, shell.pos, shell.key, shell.points
        )
        shell.anchor[:] = query
        center, proven = _shell_farthest(
            query, 0.0, shell.pos, shell.key, shell.points, n_shell, outside, tree
        )
    if not proven:  # the tree search is exact; the shell's answer seeds it
        center = farthest(query, tree, scratch, center)
    return center, n_shell, outside


@jit_inline
def _take_cluster(center, query, k, tree, scratch, labels, sums, cluster):
    """Form cluster ``cluster``: ``center`` and its ``k - 1`` nearest alive records.

    ``query`` holds the values of ``center`` (already dead). The members are marked dead,
    labelled and taken out of ``sums``, and the boxes above them refreshed. Returns the
    number of members.
    """
    heap_pos = scratch.heap_pos
    m = query.shape[0]
    found = nearest(query, k - 1, tree, scratch)
    heap_pos[found] = center
    for i in range(found + 1):
        pos = heap_pos[i]
        tree.alive[pos] = False
        labels[tree.ids[pos]] = cluster
        for j in range(m):
            sums[j] -= np.int64(tree.points[pos, j])
    for i in range(found + 1):
        node = tree.leaf_of[heap_pos[i]]
        refresh_leaf(node, tree)
        node //= 2
        while node >= 1:
            refresh_internal(node, tree)
            node //= 2
    return found + 1


@jit
def mdav_partition(grid_points, k, leaf_size, shell_size, min_rebuild):
    """MDAV-generic clusters of standardised records, in formation order.

    See docs/design.md#mdav-generic.

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
    shell_size : int
        Records listed by the farthest-from-centroid shell (performance only).
    min_rebuild : int
        The tree is rebuilt over the alive rows when they fall below half of it, while at
        least this many remain (performance only).

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
    ``S_j`` the exact integer sum. Complexity: O(n log n) per tree build (one per halving
    of the records), then per cluster pruned searches and O(k m log n) of box updates;
    memory O(n m).
    """
    n, m = grid_points.shape
    tree = tree_over(grid_points, np.arange(n), leaf_size, np.ones(m))
    sums = integer_sums(tree.points)
    # Rebuilt trees are shallower, so the first tree's depth sizes the stack for good.
    scratch = Scratch(
        np.empty(2 * tree.depth + 4, dtype=np.int64),
        np.empty(2 * tree.depth + 4, dtype=np.float64),
        np.empty(k, dtype=np.float64),
        np.empty(k, dtype=np.int64),
        np.empty(k, dtype=np.int64),
    )
    shell = Shell(
        np.empty(n, dtype=np.int64),
        np.empty(n, dtype=np.float64),
        np.empty((n, m), dtype=np.float64),
        np.zeros(m, dtype=np.float64),
        np.empty(n, dtype=np.float64),
        np.empty(n, dtype=np.float64),
    )
    query = np.empty(m, dtype=np.float64)
    labels = np.full(n, -1, dtype=np.int64)
    n_shell = 0
    outside = -1.0
    remaining = n
    cluster = 0
    while remaining >= 2 * k:
        if 2 * remaining < tree.ids.shape[0] and remaining >= min_rebuild:
            tree = _alive_tree(grid_points, tree, remaining, leaf_size)
            n_shell = 0
        for j in range(m):
            query[j] = np.float64(sums[j]) / remaining
        n_rounds = 2 if remaining >= 3 * k else 1
        for round_ in range(n_rounds):
            # query holds the centroid (round 0), then x_r (round 1)
            center, n_shell, outside = _farthest_record(
                query, round_ == 0, shell_size, tree, scratch, shell, n_shell, outside
            )
            tree.alive[center] = False
            for j in range(m):
                query[j] = tree.points[center, j]
            remaining -= _take_cluster(center, query, k, tree, scratch, labels, sums, cluster)
            cluster += 1
    if remaining > 0:
        for pos in range(tree.ids.shape[0]):
            if tree.alive[pos]:
                labels[tree.ids[pos]] = cluster
        cluster += 1
    return labels, cluster
