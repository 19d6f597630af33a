"""Kernels for individual ranking: quantise, stable radix argsort, group, broadcast.

Each protected column is quantised to an integer grid ``q = rint((x - lower) / gamma)``.
The sorted values are cut into rank groups of ``k``, group ``big`` also holding the
remainder ``r``: every kernel takes the layout's ``(k, big, r)`` and maps ranks to groups
with :mod:`dpfast._kernels.groups`. A group's released value depends only on the
exact integer sum of its grid values (:func:`add_group_sums`, which also adds up the
sums of a sorted column cut into parts, in any order) and its noise draw
(:func:`noisy_group_values`).

* Rows not linked across columns: the sorted values are enough, and output row ``r`` gets
  the value of the group of rank ``order[r]`` (:func:`take_groups`).
* Record-linked rows: each value is packed with its row's output position into one
  ``uint64`` word, ``q << index_bits | position``; the radix sort on the key bits orders
  rows by ``(value, row index)``, the stable order of docs/design.md#ranking-partition
  with ties going to the lower row index, and :func:`scatter_groups` writes each group's
  value to its rows' positions.

The radix sort replaces ``np.argsort``: on 40-bit keys it is several times faster than
NumPy's comparison sort per column (``benchmarks/bench_ir_dp.py``).
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit
from dpfast._kernels.grid import grid_value, noisy_mean, quantise
from dpfast._kernels.groups import group_start, rank_group

RADIX_BITS = 11
_RADIX = 1 << RADIX_BITS


@jit
def quantise_column(values, lower, upper, gamma, d_int, warp):
    """Clamp and quantise a column: ``(q as uint64[n], number of values clamped)``.

    ``values`` may have any stride and is never written; ``warp`` is the grid's transform
    (:mod:`dpfast._kernels.grid`). Complexity O(n).
    """
    n = values.shape[0]
    out = np.empty(n, dtype=np.uint64)
    n_clamped = 0
    for i in range(n):
        q, clamped = quantise(values[i], lower, upper, gamma, d_int, warp)
        n_clamped += clamped
        out[i] = np.uint64(q)
    return out, n_clamped


@jit
def quantise_flagged(values, lower, upper, gamma, d_int, warp):
    """Clamp and quantise a column into ``q << 1 | clamped`` words (``uint64[n]``).

    The low bit says whether the value was clamped into the domain, so that a sort of the
    words orders them by ``q`` (ties in any order) and a count of the odd words gives
    :func:`quantise_column`'s clamped count. Needs ``d_int < 2**63``. O(n).
    """
    n = values.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        q, clamped = quantise(values[i], lower, upper, gamma, d_int, warp)
        out[i] = (np.uint64(q) << np.uint64(1)) | np.uint64(clamped)
    return out


@jit
def drop_flags(words):
    """Shift the low bit out of every word, in place; return how many words had it set.

    Undoes :func:`quantise_flagged`'s flag after its words are sorted: the grid values
    stay in their order, and the count is the clamped count. One pass, no temporary
    array (a sort task's keys fill most of its memory). O(n).
    """
    count = 0
    for i in range(words.shape[0]):
        word = words[i]
        count += np.int64(word & np.uint64(1))
        words[i] = word >> np.uint64(1)
    return count


@jit
def pack_quantised(values, lower, upper, gamma, d_int, index_bits, position, warp):
    """Clamp, quantise and pack a column with its rows' output positions.

    Parameters
    ----------
    values : float64[n]
        The column (any stride; never written).
    lower, upper : float
        The public domain.
    gamma : float
        The grid step, a power of two.
    d_int : int
        The domain width in grid steps; quantised values lie in ``[0, d_int]``.
    index_bits : int
        Bits reserved for the position in each packed word.
    position : int64[n] or int64[0]
        Output position of each row (a shuffle); empty means the row's own index.
    warp : tuple or None
        The grid's transform, ``(code, origin, shift)``, or ``None`` (:mod:`dpfast._kernels.grid`).

    Returns
    -------
    packed : uint64[n]
        ``q << index_bits | position[row]``, in row order. The radix sort orders the value
        bits only, so ties keep the row order; carrying the output position instead of the
        row index saves a dependent random read per row when the release is shuffled.
    n_clamped : int
        Values outside ``[lower, upper]``.

    Complexity O(n).
    """
    n = values.shape[0]
    packed = np.empty(n, dtype=np.uint64)
    shift = np.uint64(index_bits)
    shuffled = position.shape[0] == n
    n_clamped = 0
    for i in range(n):
        q, clamped = quantise(values[i], lower, upper, gamma, d_int, warp)
        n_clamped += clamped
        slot = position[i] if shuffled else i
        packed[i] = (np.uint64(q) << shift) | np.uint64(slot)
    return packed, n_clamped


@jit
def _lsd_passes(source, target, low_bit, n_bits, digit_bits, counts):
    """Stable LSD radix passes over ``source`` on bits ``[low_bit, low_bit + n_bits)``.

    ``target`` is scratch of the same length and ``counts`` an int64 scratch of shape
    ``(>= passes, 2**digit_bits)``. Returns True when the sorted words end in ``target``.
    Passes whose digit is the same for every word are skipped.
    """
    n = source.shape[0]
    radix = 1 << digit_bits
    n_passes = (n_bits + digit_bits - 1) // digit_bits
    mask = np.uint64(radix - 1)
    counts[:n_passes, :radix] = 0
    for i in range(n):
        word = source[i]
        for p in range(n_passes):
            counts[p, (word >> np.uint64(low_bit + p * digit_bits)) & mask] += 1
    in_target = False
    for p in range(n_passes):
        shift = np.uint64(low_bit + p * digit_bits)
        if counts[p, (source[0] >> shift) & mask] == n:
            continue
        total = 0
        for d in range(radix):
            count = counts[p, d]
            counts[p, d] = total
            total += count
        for i in range(n):
            word = source[i]
            digit = (word >> shift) & mask
            target[counts[p, digit]] = word
            counts[p, digit] += 1
        source, target = target, source
        in_target = not in_target
    return in_target


def radix_sort_packed(
    packed: np.ndarray, low_bit: int, n_bits: int, scratch: np.ndarray | None = None
) -> np.ndarray:
    """Stable radix sort of ``uint64`` words on bits ``[low_bit, low_bit + n_bits)``.

    One most-significant-digit pass (11 bits) scatters the words into buckets; each bucket
    is then sorted on its remaining bits by LSD passes of at most 10 bits while it sits
    in cache. Both steps are stable, so words with equal keys keep their input order.

    Parameters
    ----------
    packed : uint64[n]
        Used as scratch (overwritten).
    low_bit, n_bits : int
        The key's bit range; bits below ``low_bit`` keep their input order, and the bits
        above it must be 0 (a digit may read past ``low_bit + n_bits``).
    scratch : uint64[n], optional
        The second buffer the sort needs (overwritten); allocated when not given. A worker
        that sorts again and again passes buffers it keeps, instead of having the kernel
        fault in fresh pages each time (docs/engines.md, "Memory pages").

    Returns
    -------
    uint64[n]
        The sorted words: ``packed`` or ``scratch``.

    Complexity O(n * (1 + ceil((n_bits - 11) / 10))). On 10M words with 40-bit keys this
    takes about 55% of the time of four out-of-cache LSD passes of 11 bits
    (``benchmarks/bench_ir_dp.py``), and several times less than ``np.argsort``.
    """
    if scratch is None:
        return _radix_sort_new(packed, int(low_bit), int(n_bits))
    if scratch.shape != packed.shape or scratch.dtype != packed.dtype:
        raise ValueError(
            f"scratch must be {packed.dtype}[{packed.shape[0]}] like the words, got "
            f"{scratch.dtype}{list(scratch.shape)}"
        )
    if _radix_sort_into(packed, scratch, int(low_bit), int(n_bits)):
        return scratch
    return packed


@jit
def _radix_sort_new(packed, low_bit, n_bits):
    """:func:`radix_sort_packed` with a scratch of its own; return the sorted words."""
    target = np.empty_like(packed)
    if _radix_sort_into(packed, target, low_bit, n_bits):
        return target
    return packed


@jit
def _radix_sort_into(packed, target, low_bit, n_bits):
    """:func:`radix_sort_packed` with its scratch ``target``; True if the result is there."""
    n = packed.shape[0]
    inner_bits = 10
    counts = np.zeros((8, 1 << RADIX_BITS), dtype=np.int64)
    if n_bits <= RADIX_BITS or n < 4 * _RADIX:
        return _lsd_passes(packed, target, low_bit, n_bits, RADIX_BITS, counts)
    top_shift = np.uint64(low_bit + n_bits - RADIX_BITS)
    mask = np.uint64(_RADIX - 1)
    starts = np.zeros(_RADIX + 1, dtype=np.int64)
    for i in range(n):
        starts[((packed[i] >> top_shift) & mask) + 1] += 1
    for d in range(_RADIX):
        starts[d + 1] += starts[d]
    fill = starts[:_RADIX].copy()
    for i in range(n):
        word = packed[i]
        digit = (word >> top_shift) & mask
        target[fill[digit]] = word
        fill[digit] += 1
    rest = n_bits - RADIX_BITS
    for d in range(_RADIX):
        first, last = starts[d], starts[d + 1]
        if last - first < 2:
            continue
        if last - first <= 32:
            _insertion_sort(target, first, last, low_bit, rest)
        elif _lsd_passes(target[first:last], packed[first:last], low_bit, rest, inner_bits, counts):
            target[first:last] = packed[first:last]
    return True


@jit
def _insertion_sort(words, first, last, low_bit, n_bits):
    """Stable insertion sort of ``words[first:last]`` on bits ``[low_bit, low_bit + n_bits)``."""
    shift = np.uint64(low_bit)
    mask = (np.uint64(1) << np.uint64(n_bits)) - np.uint64(1)
    for i in range(first + 1, last):
        word = words[i]
        key = (word >> shift) & mask
        j = i - 1
        while j >= first and ((words[j] >> shift) & mask) > key:
            words[j + 1] = words[j]
            j -= 1
        words[j + 1] = word


@jit
def add_group_sums(sorted_words, shift, first_rank, k, big, r, sums, first_group=0):
    """Add the grid values of ranks ``first_rank ..`` to their groups' sums.

    Parameters
    ----------
    sorted_words : uint64[m]
        Consecutive ranks of a sorted column, from rank ``first_rank``; the grid value
        of a word is ``word >> shift``.
    shift, first_rank : int
    k, big, r : int
        The rank groups' layout (:mod:`dpfast._kernels.groups`).
    sums : int64[...]
        The sums of groups ``first_group ..``: rank ``rank``'s value is added to
        ``sums[rank_group(rank) - first_group]``. Integer sums are exact, so the parts of
        a column may be added in any order.
    first_group : int

    Complexity O(m), one division per group.
    """
    shift = np.uint64(shift)
    m = sorted_words.shape[0]
    i = 0
    rank = first_rank
    while i < m:
        g = rank_group(rank, k, big, r)
        stop = min(m, i + group_start(g + 1, k, big, r) - rank)
        total = np.int64(0)
        for t in range(i, stop):
            total += np.int64(sorted_words[t] >> shift)
        sums[g - first_group] += total
        rank += stop - i
        i = stop


@jit
def noisy_group_values(
    sums, k, big, r, noise, d_int, lower, upper, gamma, round_values, warp, first_group=0
):
    """Return groups' released values from their exact sums and their noise draws.

    The mean rounded to the grid (half to even), plus the group's draw, clamped to
    ``[0, d_int]``, mapped to ``lower + gamma * value`` (or back through the grid's
    transform ``warp``; rounded to an integer for integer columns, then clamped to
    ``[lower, upper]``).

    Parameters
    ----------
    sums : int64[m]
        The sums of groups ``first_group .. first_group + m - 1`` of the column, from
        :func:`add_group_sums` over their ranks.
    k, big, r : int
        The rank groups' layout: ``k`` ranks a group, ``k + r`` in group ``big``.
    noise : int64[m]
        One discrete Laplace draw per group, in grid steps (zeros for no noise).
    d_int : int
    lower, upper, gamma : float
    round_values : bool
    warp : tuple or None
        The grid's transform, ``(code, origin, shift)``, or ``None`` (:mod:`dpfast._kernels.grid`).
    first_group : int
        The first group's number: a task holding some of the groups computes theirs.

    Returns
    -------
    float64[m]
    """
    m = sums.shape[0]
    out = np.empty(m, dtype=np.float64)
    for i in range(m):
        g = first_group + i
        size = k + r if g == big else k
        y = noisy_mean(sums[i], size, noise[i], d_int)
        out[i] = grid_value(y, lower, upper, gamma, round_values, d_int, warp)
    return out


@jit
def take_groups(group_values, order, k, big, r, out):
    """``out[i] = group_values[rank_group(order[i])]``: rank ``order[i]``'s group value.

    ``order`` is a permutation of the ranks ``0 .. n-1`` (``int64[n]``); ``k, big, r``
    the rank groups' layout. Complexity O(n).
    """
    for i in range(order.shape[0]):
        out[i] = group_values[rank_group(order[i], k, big, r)]


@jit
def scatter_groups(sorted_packed, index_bits, k, big, r, group_values, out):
    """Write each rank's group value to ``out[position]`` of its packed word.

    ``sorted_packed`` is the output of :func:`radix_sort_packed`:
    ``q << index_bits | position``, in rank order; ``k, big, r`` the rank groups'
    layout. Complexity O(n), group by group.
    """
    position_mask = (np.uint64(1) << np.uint64(index_bits)) - np.uint64(1)
    for g in range(group_values.shape[0]):
        value = group_values[g]
        for rank in range(group_start(g, k, big, r), group_start(g + 1, k, big, r)):
            out[np.int64(sorted_packed[rank] & position_mask)] = value


@jit
def float_group_means(values, order, k, big, r):
    """Exact-as-float group means of ``values`` taken in ``order``, and each row's group.

    Parameters
    ----------
    values : float64[n]
    order : int64[n]
        A stable argsort of ``values``.
    k, big, r : int
        The rank groups' layout: ``n // k`` groups.

    Returns
    -------
    means : float64[n // k]
    row_group : int64[n]

    Complexity O(n).
    """
    n_groups = values.shape[0] // k
    means = np.empty(n_groups, dtype=np.float64)
    row_group = np.empty(values.shape[0], dtype=np.int64)
    for g in range(n_groups):
        lo, hi = group_start(g, k, big, r), group_start(g + 1, k, big, r)
        total = 0.0
        for rank in range(lo, hi):
            row = order[rank]
            total += values[row]
            row_group[row] = g
        means[g] = total / (hi - lo)
    return means, row_group


@jit
def add_group_run(value, count, first_rank, k, big, r, sums):
    """Add ``count`` copies of grid value ``value``, from rank ``first_rank``, to the sums.

    The same as :func:`add_group_sums` on ``count`` equal words: a long run of ties costs
    one step per group. Complexity O(count / k + 1).
    """
    rank = first_rank
    left = count
    while left > 0:
        g = rank_group(rank, k, big, r)
        m = min(left, group_start(g + 1, k, big, r) - rank)
        sums[g] += np.int64(value) * np.int64(m)
        rank += m
        left -= m
