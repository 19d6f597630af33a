"""Kernels for individual ranking: quantise, stable radix argsort, group, broadcast.

Each protected column is quantised to an integer grid ``q = rint((x - lower) / gamma)``
and packed with its row index into one ``uint64`` word, ``q << index_bits | row``. An LSD
radix sort on the key bits then orders rows by ``(value, row index)``: the stable order of
SPEC §1.3, with ties going to the lower row index. Rank ``r`` belongs to group
``min(r // k, n_groups - 1)``: groups of ``k`` with the remainder in the last group.

The radix sort replaces ``np.argsort`` because, on 41-bit keys, four passes of 11 bits beat
NumPy's comparison sort by about 5x per column (``benchmarks/bench_ir_dp.py``).
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit

RADIX_BITS = 11
_RADIX = 1 << RADIX_BITS


@jit
def pack_quantised(values, lower, upper, gamma, d_int, index_bits):  # type: ignore[no-untyped-def]
    """Clamp, quantise and pack a column with its row indices.

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
        Bits reserved for the row index in each packed word.

    Returns
    -------
    packed : uint64[n]
        ``q << index_bits | row``.
    n_clamped : int
        Values outside ``[lower, upper]``.

    Complexity O(n).
    """
    n = values.shape[0]
    packed = np.empty(n, dtype=np.uint64)
    shift = np.uint64(index_bits)
    n_clamped = 0
    for i in range(n):
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
        packed[i] = (np.uint64(q) << shift) | np.uint64(i)
    return packed, n_clamped


@jit
def radix_sort_packed(packed, low_bit, n_bits):  # type: ignore[no-untyped-def]
    """Stable LSD radix sort of ``uint64`` words on bits ``[low_bit, low_bit + n_bits)``.

    Parameters
    ----------
    packed : uint64[n]
        Sorted in place (a scratch buffer of the same size is allocated).
    low_bit, n_bits : int
        The key's bit range; bits below ``low_bit`` keep their input order (stability).

    Returns
    -------
    uint64[n]
        The sorted words (``packed`` itself or the scratch buffer).

    Complexity O(n * ceil(n_bits / 11)); passes whose digit is constant are skipped.
    """
    n = packed.shape[0]
    n_passes = (n_bits + RADIX_BITS - 1) // RADIX_BITS
    counts = np.zeros((n_passes, _RADIX), dtype=np.int64)
    mask = np.uint64(_RADIX - 1)
    for i in range(n):
        word = packed[i]
        for p in range(n_passes):
            digit = (word >> np.uint64(low_bit + p * RADIX_BITS)) & mask
            counts[p, digit] += 1
    source = packed
    target = np.empty_like(packed)
    offsets = np.empty(_RADIX, dtype=np.int64)
    for p in range(n_passes):
        skip = False
        for d in range(_RADIX):
            if counts[p, d] == n:
                skip = True
                break
            if counts[p, d] != 0:
                break
        if skip:
            continue
        total = 0
        for d in range(_RADIX):
            offsets[d] = total
            total += counts[p, d]
        shift = np.uint64(low_bit + p * RADIX_BITS)
        for i in range(n):
            word = source[i]
            digit = (word >> shift) & mask
            target[offsets[digit]] = word
            offsets[digit] += 1
        source, target = target, source
    return source


@jit
def group_sums(sorted_packed, index_bits, k, n_groups):  # type: ignore[no-untyped-def]
    """Exact integer sums of quantised values per rank group.

    Parameters
    ----------
    sorted_packed : uint64[n]
        Output of :func:`radix_sort_packed`.
    index_bits, k, n_groups : int
        Packing layout and grouping (``n_groups = n // k``; the last group takes the rest).

    Returns
    -------
    sums : int64[n_groups]
    sizes : int64[n_groups]

    Complexity O(n).
    """
    n = sorted_packed.shape[0]
    sums = np.zeros(n_groups, dtype=np.int64)
    sizes = np.zeros(n_groups, dtype=np.int64)
    shift = np.uint64(index_bits)
    for r in range(n):
        g = min(r // k, n_groups - 1)
        sums[g] += np.int64(sorted_packed[r] >> shift)
        sizes[g] += 1
    return sums, sizes


@jit
def noisy_centroids(sums, sizes, noise, d_int):  # type: ignore[no-untyped-def]
    """Round each group mean to the grid (half to even), add its noise, clamp to ``[0, d_int]``.

    Parameters
    ----------
    sums, sizes : int64[n_groups]
    noise : int64[n_groups]
        One discrete Laplace draw per group (zeros for no noise).
    d_int : int

    Returns
    -------
    int64[n_groups]

    Complexity O(n_groups).
    """
    n_groups = sums.shape[0]
    out = np.empty(n_groups, dtype=np.int64)
    for g in range(n_groups):
        quotient = sums[g] // sizes[g]
        twice_rest = 2 * (sums[g] - quotient * sizes[g])
        if twice_rest > sizes[g] or (twice_rest == sizes[g] and quotient % 2 == 1):
            quotient += 1
        value = quotient + noise[g]
        if value < 0:
            value = 0
        elif value > d_int:
            value = d_int
        out[g] = value
    return out


@jit
def broadcast_groups(  # type: ignore[no-untyped-def]
    sorted_packed, index_bits, k, group_values, lower, upper, gamma, round_values, destination, out
):
    """Write each row's group value, ``lower + gamma * value``, to ``out[destination[row]]``.

    Parameters
    ----------
    sorted_packed : uint64[n]
    index_bits, k : int
    group_values : int64[n_groups]
        Grid values per group.
    lower, upper, gamma : float
    round_values : bool
        Round to the nearest integer (integer attributes; post-processing).
    destination : int64[n] or int64[0]
        Output position of each input row; empty means the input order.
    out : float64[n]
        Written, never read.

    Complexity O(n) with random writes.
    """
    n = sorted_packed.shape[0]
    n_groups = group_values.shape[0]
    index_mask = (np.uint64(1) << np.uint64(index_bits)) - np.uint64(1)
    shuffled = destination.shape[0] == n
    for r in range(n):
        g = min(r // k, n_groups - 1)
        value = lower + gamma * group_values[g]
        if round_values:
            value = np.rint(value)
        if value > upper:
            value = upper
        elif value < lower:
            value = lower
        row = np.int64(sorted_packed[r] & index_mask)
        if shuffled:
            out[destination[row]] = value
        else:
            out[row] = value


@jit
def float_group_means(values, order, k, n_groups):  # type: ignore[no-untyped-def]
    """Exact-as-float group means of ``values`` taken in ``order``, and each row's group.

    Parameters
    ----------
    values : float64[n]
    order : int64[n]
        A stable argsort of ``values``.
    k, n_groups : int

    Returns
    -------
    means : float64[n_groups]
    row_group : int64[n]

    Complexity O(n).
    """
    n = values.shape[0]
    sums = np.zeros(n_groups, dtype=np.float64)
    sizes = np.zeros(n_groups, dtype=np.int64)
    row_group = np.empty(n, dtype=np.int64)
    for r in range(n):
        g = min(r // k, n_groups - 1)
        row = order[r]
        sums[g] += values[row]
        sizes[g] += 1
        row_group[row] = g
    return sums / sizes, row_group
