"""One 64-bit ChaCha20 word per element: uniform noise and retain-or-replace draws.

The per-element samplers (:func:`dpfast._kernels.lanes.per_element`) spend one ChaCha20 block
(512 bits, about 18 ns) on every element. The perturbation mechanisms of docs/design.md#mechanisms
need far fewer bits per row, so here element ``q`` (its global index, ``start + i``) reads the
64-bit word ``q`` of the stream ``(key, nonce = 0)``: word ``q % 8`` of block ``q // 8``.
Eight rows share a block, about 2.3 ns of ChaCha20 per row. An element that needs more
bits (a rejected uniform draw, probability below ``high / 2**32``) reads its own stream
``(key, nonce = q + 1)``. Element ``q`` reads nothing else, so any split of the rows into
chunks (or threads) gives the same values.

Costs: ``benchmarks/bench_mechanisms.py`` (k-noise and randomized response on
10,000,000 rows against NumPy's ``Generator``).
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.chacha import chacha20_block64
from dpfast._kernels.lanes import counter_blocks, key_tuple, new_lanes

_MASK32 = np.uint64(0xFFFFFFFF)
_TWO32 = np.uint64(1) << np.uint64(32)


@jit
def uniform_add_kernel(key, start, first, last, values, half_width, out):
    """``out[i] = values[i] + half_width * T_i`` for ``first <= i < last``.

    ``T_i = (2 * (w >> 11) + 1 - 2**53) / 2**53`` from word ``w = start + i`` of stream
    ``(key, 0)``: uniform on the 2**53 odd multiples of ``2**-53`` in ``(-1, 1)``,
    symmetric about 0; the product with ``half_width`` is rounded once. ``start``: int64
    (global index of row 0). ``values``, ``out``: float64[n]; ``values`` is never written.
    O(last - first).
    """
    lanes = new_lanes()
    buf = lanes.words
    q0 = start + first
    base = (q0 // 128) * 128
    q_end = start + last
    scale = 2.0**-53
    offset = np.int64(1) - (np.int64(1) << np.int64(53))
    while base < q_end:
        # buf[j] is word base + j of the stream (key, 0)
        counter_blocks(key, 0, base // 8, lanes)
        lo = max(base, q0)
        hi = min(base + 128, q_end)
        for q in range(lo, hi):
            w = buf[q - base]
            t = np.float64(np.int64(w >> np.uint64(11)) * 2 + offset) * scale
            i = q - start
            out[i] = values[i] + half_width * t
        base += 128


@jit
def _spill_uniform(kt, q, high):
    # Exact Unif{0..high-1} (high <= 2**32) by Lemire's method on the 32-bit words of the
    # row's own stream (key, nonce = q + 1), blocks 0, 1, ... in order.
    hu = np.uint64(high)
    threshold = (_TWO32 - hu) % hu
    nonce = np.uint64(q + 1)
    counter = 0
    while True:
        blk = chacha20_block64(kt, np.uint64(counter), nonce)
        for j in range(8):
            for half in range(2):
                u = (blk[j] >> np.uint64(32 * half)) & _MASK32
                prod = u * hu
                if (prod & _MASK32) >= threshold:
                    return np.int64(prod >> np.uint64(32))
        counter += 1


@jit_inline
def _replacement(kt, q, w, size):
    # Exact Unif{0..size-1} (size <= 2**32) for row q by Lemire's method on w >> 32, the
    # high half of the row's word w; a rejected draw continues on the row's own stream.
    hu = np.uint64(size)
    prod = (w >> np.uint64(32)) * hu
    low = prod & _MASK32
    if low < hu and low < (_TWO32 - hu) % hu:
        return _spill_uniform(kt, q, size)
    return np.int64(prod >> np.uint64(32))


@jit
def retain_or_replace_kernel(
    key, start, first, last, keep, values, groups, group_start, group_size, pool, out
):
    """Keep each value with probability ``keep / 2**32``, else draw from its group's pool.

    Row ``i`` keeps ``values[i]`` or takes ``pool[group_start[g] + U]`` with
    ``U ~ Unif{0..group_size[g]-1}`` and ``g = groups[i]`` (``g = 0`` for every row when
    ``groups`` is empty), for ``first <= i < last``.

    Word ``w`` (``start + i`` of stream ``(key, 0)``): the Bernoulli is exact, ``(w & (2**32
    - 1)) < keep``; ``U`` is Lemire's exact bounded draw on ``w >> 32`` (``group_size <=
    2**32``), rejected with probability ``(2**32 mod size) / 2**32``, in which case it comes
    from the row's own stream (:func:`_replacement`). ``keep``: uint64 in ``[0, 2**32]``.
    ``values``, ``pool``, ``out`` share a dtype; inputs are never written. O(last - first).
    """
    lanes = new_lanes()
    buf = lanes.words
    kt = key_tuple(key)
    single = groups.shape[0] == 0
    rows = np.empty(128, dtype=np.int64)
    sources = np.empty(128, dtype=np.int64)
    n_replaced = 0
    q0 = start + first
    base = (q0 // 128) * 128
    q_end = start + last
    while base < q_end:
        # buf[j] is word base + j of the stream (key, 0)
        counter_blocks(key, 0, base // 8, lanes)
        lo = max(base, q0)
        hi = min(base + 128, q_end)
        for q in range(lo, hi):
            w = buf[q - base]
            i = q - start
            out[i] = values[i]
            if (w & _MASK32) < keep:
                continue
            g = 0 if single else groups[i]
            rows[n_replaced] = i
            sources[n_replaced] = group_start[g] + _replacement(kt, q, w, group_size[g])
            n_replaced += 1
        # The pool reads are gathered in a loop of their own: interleaved with the
        # ChaCha20 rounds, only one or two cache misses would be in flight at a time.
        for t in range(n_replaced):
            out[rows[t]] = pool[sources[t]]
        n_replaced = 0
        base += 128


@jit
def retain_draws_kernel(key, start, first, last, keep, groups, group_size, out):
    """Draw as :func:`retain_or_replace_kernel` does, without a pool: ``-1`` or ``U``.

    ``out[i]`` is ``-1`` when row ``i`` keeps its value, else the index ``U`` of its
    replacement within its group's slice (``first <= i < last``), from the same words
    and rule as :func:`retain_or_replace_kernel`. ``groups``: int64[n] (empty: group 0
    for every row); ``group_size``: int64; ``out``: int64[n]. O(last - first).
    """
    lanes = new_lanes()
    buf = lanes.words
    kt = key_tuple(key)
    single = groups.shape[0] == 0
    q0 = start + first
    base = (q0 // 128) * 128
    q_end = start + last
    while base < q_end:
        counter_blocks(key, 0, base // 8, lanes)
        lo = max(base, q0)
        hi = min(base + 128, q_end)
        for q in range(lo, hi):
            w = buf[q - base]
            i = q - start
            if (w & _MASK32) < keep:
                out[i] = -1
                continue
            out[i] = _replacement(kt, q, w, group_size[0 if single else groups[i]])
        base += 128
