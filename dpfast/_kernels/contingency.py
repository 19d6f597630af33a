"""Contingency kernels: class counts of coded columns, and a partition tree split in one scan.

DiffGen (docs/design.md#diffgen-tree) refines records into a partition tree, stored as flat
arrays indexed by partition id: ``part_start`` / ``part_end`` (the partition's segment of
the record order), ``first_child`` (``-1`` for a leaf partition) and ``n_children`` (the
children of a split partition have consecutive ids). The records of every leaf partition
are one contiguous segment of ``order``, a permutation of the row indices owned by the
``contingency`` step on a table held in memory (dpfast/steps/class_counts.py; never the
caller's data).

``benchmarks/bench_diffgen.py`` times the whole release; the scan below is the only
per-record work after the initial histograms, and replaces a NumPy version that needed
a stable argsort of each segment (``np.argsort(kind="stable")``) and several temporaries.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit


@jit
def expand_leaves(nodes, first_child, n_children):
    """Return the leaf partitions below ``nodes`` (``int64[k]``), in depth-first order.

    ``first_child``, ``n_children``: ``int64[n_partitions]``. A node that is a leaf is
    returned itself; children are visited in id order. O(number of tree nodes visited).
    """
    total = 0
    stack = np.empty(first_child.shape[0] + 1, dtype=np.int64)
    for pass_ in range(2):
        if pass_ == 1:
            out = np.empty(total, dtype=np.int64)
        count = 0
        for i in range(nodes.shape[0]):
            top = 0
            stack[0] = nodes[i]
            top = 1
            while top > 0:
                top -= 1
                p = stack[top]
                if first_child[p] < 0:
                    if pass_ == 1:
                        out[count] = p
                    count += 1
                else:
                    # push children in reverse so the first child is visited first
                    for c in range(n_children[p] - 1, -1, -1):
                        stack[top] = first_child[p] + c
                        top += 1
        total = count
    return out


@jit
def split_partitions(
    order,
    leaves,
    part_start,
    part_end,
    codes,
    classes,
    child_of,
    offset,
    n_children,
    n_codes,
    n_classes,
):
    """Split each leaf partition's records by the child of the specialised value, in one scan.

    Parameters (no validation):
    ``order`` ``int64[n]``: the builder's working permutation of row indices; each leaf
    partition ``p`` owns ``order[part_start[p]:part_end[p]]``, which is reordered in place
    (stably) so that the records of child 0 come first, then child 1, ... ``leaves``
    ``int64[L]``: the leaf partitions of ``Link_v``. ``codes`` ``int64[n]``: each record's
    value code on the specialised attribute; ``classes`` ``int64[n]``: class codes.
    ``child_of`` ``int64[n_codes]``: child index of code ``offset + i`` (every code of the
    records scanned is in range). ``n_children``, ``n_codes``, ``n_classes``: ints.

    Returns
    -------
    kids : int64[L]
        How many children of ``leaves[i]`` hold records.
    child, new_start, new_end : int64[q]
        The non-empty children, ordered by parent then child index: child index and
        segment of ``order`` (``q = kids.sum()``). Empty children are not returned: the
        builder keeps only partitions that hold records (empty cells of the output are
        the product of the cuts without them).
    hist : int64[n_codes, n_classes]
        Records per (value code - offset, class) over all scanned records: the counts from
        which the children's scores and split values are computed (docs/design.md#diffgen-tree).

    O(records of Link_v + L * n_children).
    """
    n_leaves = leaves.shape[0]
    k = n_children
    kids = np.zeros(n_leaves, dtype=np.int64)
    hist = np.zeros((n_codes, n_classes), dtype=np.int64)
    longest = 0
    total = 0
    for li in range(n_leaves):
        p = leaves[li]
        length = part_end[p] - part_start[p]
        total += length
        if length > longest:
            longest = length
    cap = min(total, n_leaves * k)
    child = np.empty(cap, dtype=np.int64)
    new_start = np.empty(cap, dtype=np.int64)
    new_end = np.empty(cap, dtype=np.int64)
    scratch = np.empty(longest, dtype=np.int64)
    child_buf = np.empty(longest, dtype=np.int64)
    counts = np.zeros(k + 1, dtype=np.int64)
    position = np.zeros(k, dtype=np.int64)
    q = 0
    for li in range(n_leaves):
        p = leaves[li]
        s = part_start[p]
        e = part_end[p]
        for c in range(k + 1):
            counts[c] = 0
        for i in range(s, e):
            r = order[i]
            code = codes[r] - offset
            c = child_of[code]
            child_buf[i - s] = c
            counts[c + 1] += 1
            hist[code, classes[r]] += 1
        for c in range(k):
            if counts[c + 1] > 0:
                child[q] = c
                new_start[q] = s + counts[c]
                new_end[q] = s + counts[c] + counts[c + 1]
                q += 1
                kids[li] += 1
            counts[c + 1] += counts[c]
            position[c] = counts[c]
        for i in range(s, e):
            c = child_buf[i - s]
            scratch[position[c]] = order[i]
            position[c] += 1
        for i in range(e - s):
            order[s + i] = scratch[i]
    return kids, child[:q], new_start[:q], new_end[:q], hist


@jit
def leaf_class_counts(order, leaves, part_start, part_end, classes, n_classes):
    """Count records per (leaf partition, class): ``int64[len(leaves), n_classes]``. O(n)."""
    out = np.zeros((leaves.shape[0], n_classes), dtype=np.int64)
    for li in range(leaves.shape[0]):
        p = leaves[li]
        for i in range(part_start[p], part_end[p]):
            out[li, classes[order[i]]] += 1
    return out


@jit
def class_histogram(codes, classes, n_codes, n_classes):
    """Count records per (value code, class) over all records: ``int64[n_codes, n_classes]``. O(n).

    One pass without the ``codes * n_classes + classes`` temporary of ``np.bincount``.
    """
    out = np.zeros((n_codes, n_classes), dtype=np.int64)
    for r in range(codes.shape[0]):
        out[codes[r], classes[r]] += 1
    return out


@jit
def leaf_cells(
    first_child, n_children, split_column, node_value, root_values, position, strides, capacity
):
    """Every stored leaf partition (one holding records) and its cell in the product of the cuts.

    ``split_column[p]``: the column on which internal node ``p``'s children differ;
    ``node_value[c]``: child ``c``'s value on that column; ``root_values`` ``int64[d]``:
    the root's value of every column; ``position`` ``int64[n_values]``: each final cut
    value's position in its column's cut; ``strides`` ``int64[d]``; ``capacity``: a bound
    on the depth-first stack (depth times the largest number of children, plus one).

    Returns ``(leaves, cells)``, both ``int64[n_leaves]``, leaves in the order of
    :func:`expand_leaves` from the root. O(tree nodes * d).
    """
    d = root_values.shape[0]
    n_leaves = 0
    for p in range(first_child.shape[0]):
        if first_child[p] < 0:
            n_leaves += 1
    leaves = np.empty(n_leaves, dtype=np.int64)
    cells = np.empty(n_leaves, dtype=np.int64)
    stack = np.empty(capacity, dtype=np.int64)
    values = np.empty((capacity, d), dtype=np.int64)
    stack[0] = 0
    for j in range(d):
        values[0, j] = root_values[j]
    top = 1
    count = 0
    while top > 0:
        top -= 1
        p = stack[top]
        if first_child[p] < 0:
            cell = 0
            for j in range(d):
                cell += position[values[top, j]] * strides[j]
            leaves[count] = p
            cells[count] = cell
            count += 1
            continue
        column = split_column[p]
        base = top
        for c in range(n_children[p] - 1, -1, -1):
            child = first_child[p] + c
            slot = top + (n_children[p] - 1 - c)
            if slot != base:
                for j in range(d):
                    values[slot, j] = values[base, j]
            stack[slot] = child
            values[slot, column] = node_value[child]
        top += n_children[p]
    return leaves, cells


@jit
def split_points(hist):
    """Codes present in ``hist`` (``int64[n_codes, C]``) and the class counts left of each.

    Returns ``(present, left)``: ``present`` ``int64[q]``, the codes with at least one
    record, ascending; ``left`` ``int64[q + 1, C]``, row ``i`` the class counts of the
    codes ``present[:i]`` (the left child of a split in interval ``I_i``,
    docs/design.md#diffgen-split). O(n_codes * C), one pass.
    """
    n_codes, n_classes = hist.shape
    q = 0
    for code in range(n_codes):
        for c in range(n_classes):
            if hist[code, c] != 0:
                q += 1
                break
    present = np.empty(q, dtype=np.int64)
    left = np.zeros((q + 1, n_classes), dtype=np.int64)
    i = 0
    for code in range(n_codes):
        any_record = False
        for c in range(n_classes):
            if hist[code, c] != 0:
                any_record = True
                break
        if any_record:
            present[i] = code
            for c in range(n_classes):
                left[i + 1, c] = left[i, c] + hist[code, c]
            i += 1
    return present, left
