"""Exact uniform integers, Bernoulli draws and permutations on ChaCha20 keyed streams.

Also the bit reader that every exact per-element sampler (here and in
:mod:`dpfast._kernels.dlaplace`) reads its stream with. Element ``i`` of the per-element
kernels reads only the stream ``(key, nonce = start + i)`` (see
:mod:`dpfast._kernels.chacha` for the stream and bit order): its counter-0 block comes from
the 16-lane loop of :mod:`dpfast._kernels.lanes`, which gives each element 512 random bits;
the rare element that needs more computes counter 1, 2, ... with the scalar block function.

Randomness is spent economically and all decisions use integer arithmetic only:

* ``Unif{0..m-1}``: draw ``k = min(bit_length(m - 1) + 8, 63)`` bits (little-endian) as
  ``x``, keep it when ``x < lim`` (the largest multiple of ``m`` not above ``2**k``) and
  return ``x mod m``. A try fails with probability below ``2**-7``, so the rejection
  branch is almost never taken whatever ``m`` is.
* ``Bernoulli(a/b)``: lazy comparison of a uniform ``U = 0.u1 u2 ...`` with ``a/b`` in
  base ``2**c`` (``c = 16``, fewer when ``b >= 2**48`` so that ``r * 2**c`` fits in 64
  bits): a ``c``-bit draw against the next ``c`` digits of ``a/b`` (long division)
  decides unless they are equal (probability ``2**-c``). No bits when ``a = 0`` or
  ``a >= b``. One division instead of a loop of unpredictable branches per digit.
* Permutations: bucketed (Rao-Sandelius) so that any part can be computed on its own.
  Item ``i`` of ``range(n)`` goes to the bucket given by the top ``bits`` bits of its
  lane of stream ``(key, 0)`` (:func:`lane_layout`: four 16-bit lanes per 64-bit word
  when ``bits <= 16``, two 32-bit ones up to 32 bits, else the whole word); the items of
  bucket ``b``, in increasing order, are shuffled by Fisher-Yates on bounded integers
  drawn by Lemire's method from the 32-bit words of stream ``(key, 1 + b)``
  (:func:`bounded_batch`); the permutation is the buckets' contents one after the other.
  With ``bits = 0`` it is plain Fisher-Yates on stream ``(key, 1)``.

References
----------
D. Lemire, "Fast Random Integer Generation in an Interval", ACM TOMACS 29(1), 2019.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.chacha import chacha20_block64
from dpfast._kernels.groups import group_start
from dpfast._kernels.lanes import counter_blocks, new_lanes, per_element

_ONE = np.uint64(1)
# Digits per step of the lazy Bernoulli comparison: 16 when b < 2**48, else the most that
# keep r * 2**c below 2**64. A tie continues with probability 2**-16.
_CHUNK = 16
_CHUNK_LIMIT = 2**48
# Extra bits drawn by the uniform sampler so that its rejections are rare (x mod m).
_UNIFORM_EXTRA_BITS = 8

# The bit reader keeps its whole state in scalars and tuples, which Numba passes through
# the inlined helpers without reference counting (arrays passed to inlined helpers cost
# atomic increments per call, several times the price of a random bit):
#   cur   uint64, the unread bits of the current 64-bit word, next bit lowest
#   nb    int64, how many bits cur still holds
#   widx  int64, index (0..8) in blk of the next word to load
#   ctr   int64, block counter of blk
#   blk   8-tuple of uint64, the current block as little-endian 64-bit words
#   kt, nonce: the stream (8-tuple of key words, uint64 nonce); read only.
# Every helper returns (result, cur, nb, widx, ctr, blk).


@jit_inline
def _word(widx, ctr, blk, kt, nonce):
    if widx == 8:
        ctr += 1
        blk = chacha20_block64(kt, np.uint64(ctr), nonce)
        widx = 0
    return blk[widx], widx + 1, ctr, blk


@jit_inline
def read_bit(cur, nb, widx, ctr, blk, kt, nonce):
    if nb == 0:
        cur, widx, ctr, blk = _word(widx, ctr, blk, kt, nonce)
        nb = 64
    b = np.int64(cur & _ONE)
    return b, cur >> _ONE, nb - 1, widx, ctr, blk


@jit_inline
def take_bits(k, cur, nb, widx, ctr, blk, kt, nonce):
    # Next k (0..63) stream bits as an int64; the first of them is the lowest bit.
    if k <= nb:
        v = cur & ((_ONE << np.uint64(k)) - _ONE)
        return np.int64(v), cur >> np.uint64(k), nb - k, widx, ctr, blk
    w, widx, ctr, blk = _word(widx, ctr, blk, kt, nonce)
    need = k - nb
    v = cur | ((w & ((_ONE << np.uint64(need)) - _ONE)) << np.uint64(nb))
    return np.int64(v), w >> np.uint64(need), 64 - need, widx, ctr, blk


@jit_inline
def draw_bernoulli(a, b, cur, nb, widx, ctr, blk, kt, nonce):
    # Exact Bernoulli(a / b) for 0 <= a and 1 <= b <= 2**62, by lazy comparison of a
    # uniform U in [0, 1) with a / b, CHUNK bits at a time: with c = _chunk(b) digits
    # D = floor(r * 2**c / b) of the expansion of r / b (r = a at first), a c-bit draw u
    # decides u < D (true) or u > D (false); u == D (probability 2**-c) moves on to the
    # remainder r * 2**c mod b. P(true) = D/2**c + 2**-c * P(r'/b) = a/b exactly.
    if a >= b:
        return True, cur, nb, widx, ctr, blk
    c = _CHUNK
    if b >= _CHUNK_LIMIT:
        c = 64
        while (b >> (64 - c)) != 0:
            c -= 1
    bu = np.uint64(b)
    r = np.uint64(a)
    while r != 0:
        shifted = r << np.uint64(c)
        d = shifted // bu
        r = shifted - d * bu
        u, cur, nb, widx, ctr, blk = take_bits(c, cur, nb, widx, ctr, blk, kt, nonce)
        if np.uint64(u) != d:
            return np.uint64(u) < d, cur, nb, widx, ctr, blk
    # U agreed with every digit and no digits of a / b remain: U >= a / b.
    return False, cur, nb, widx, ctr, blk


@jit
def uniform_params(m):
    """Return ``(k, lim)`` for :func:`draw_uniform` on ``{0..m-1}``, ``1 <= m < 2**63``.

    ``k = min(bit_length(m - 1) + 8, 63)`` bits per try and ``lim``, the largest multiple
    of ``m`` not above ``2**k``, as ``uint64``: a try is rejected with probability below
    ``2**-7`` (below 1/2 when ``m > 2**55``). ``k = 0`` when ``m == 1``.
    """
    if m == 1:
        return 0, np.uint64(1)
    nbits = 0
    while (m - 1) >> nbits:
        nbits += 1
    k = min(nbits + _UNIFORM_EXTRA_BITS, 63)
    span = _ONE << np.uint64(k)
    mu = np.uint64(m)
    return k, (span // mu) * mu


@jit_inline
def draw_uniform(m, k, lim, cur, nb, widx, ctr, blk, kt, nonce):
    # Exact Unif{0..m-1}: a k-bit draw x is kept when x < lim (a multiple of m) and
    # reduced mod m; (k, lim) from uniform_params(m). No bits when m == 1.
    if m == 1:
        return 0, cur, nb, widx, ctr, blk
    mu = np.uint64(m)
    while True:
        x, cur, nb, widx, ctr, blk = take_bits(k, cur, nb, widx, ctr, blk, kt, nonce)
        xu = np.uint64(x)
        if xu < lim:
            return np.int64(xu % mu), cur, nb, widx, ctr, blk


@jit_inline
def _uniform_draw(params, blk, kt, nonce):
    high, k, lim = params
    return draw_uniform(high, k, lim, np.uint64(0), 0, 0, 0, blk, kt, nonce)[0]


@jit
def uniform_integers_kernel(key, high, start, out):
    """Fill ``out`` (``int64[n]``) with exact draws of ``Unif{0..high-1}``.

    ``high``: int64 in ``[1, 2**63 - 1]``; ``out[i]`` reads only the stream
    ``(key, start + i)``: ``bit_length(high - 1)`` bits at a time, rejected while
    ``>= high``. O(n) expected.
    """
    k, lim = uniform_params(high)
    per_element(_uniform_draw, (high, k, lim), key, start, out)


@jit_inline
def _bernoulli_draw(params, blk, kt, nonce):
    numerator, denominator = params
    return draw_bernoulli(numerator, denominator, np.uint64(0), 0, 0, 0, blk, kt, nonce)[0]


@jit
def bernoulli_kernel(key, numerator, denominator, start, out):
    """Fill ``out`` (``bool[n]``) with exact ``Bernoulli(numerator / denominator)`` draws.

    ``0 <= numerator <= denominator``, ``1 <= denominator <= 2**62``; ``out[i]`` reads
    only the stream ``(key, start + i)`` (lazy bit comparison, 2 bits expected). O(n).
    """
    per_element(_bernoulli_draw, (numerator, denominator), key, start, out)


@jit
def bounded_batch(key, nonce, top, js, lanes, state):
    """Fill ``js`` with ``js[b] ~ Unif{0..top-b-1}`` from consecutive words of stream (key, nonce).

    ``key`` ``uint64[8]``; ``top`` int64 with ``top - len(js) >= 1``; ``lanes`` (a
    :class:`~dpfast._kernels.lanes.Lanes`, whose ``words`` hold 16 blocks) and ``state``
    ``int64[2]`` (next block counter, next 32-bit word index, 256 = empty) carry the stream
    between calls. Bounds ``<= 2**32`` use one 32-bit word ``w`` by Lemire's method:
    ``w * bound`` is kept unless its low 32 bits fall below ``2**32 mod bound``, and its
    high 32 bits are the draw. Larger bounds use two words
    (low first) as a 64-bit ``v``, keep its ``bit_length(bound - 1)`` low bits and reject
    while ``>= bound``. Exact; O(len(js)) expected.
    """
    next_block = state[0]
    widx = state[1]
    words = lanes.words
    mask32 = np.uint64(0xFFFFFFFF)
    for b in range(js.shape[0]):
        bound = top - b
        bu = np.uint64(bound)
        if bound <= 4294967296:
            while True:
                # The word reader is written out here, twice: an inlined helper taking
                # the Lanes made permutations 3.5x slower (reference counting per word).
                if widx >= 256:
                    counter_blocks(key, nonce, next_block, lanes)
                    next_block += 16
                    widx = 0
                w = words[widx >> 1]
                w = (w >> np.uint64(32)) if widx & 1 else (w & mask32)
                widx += 1
                prod = w * bu
                low = prod & mask32
                if low < bu:
                    if low < np.uint64(4294967296 - bound) % bu:
                        continue
                js[b] = np.int64(prod >> np.uint64(32))
                break
        else:
            nbits = 0
            while (bound - 1) >> nbits:
                nbits += 1
            mask = (_ONE << np.uint64(nbits)) - _ONE
            while True:
                v = np.uint64(0)
                for half in range(2):
                    if widx >= 256:
                        counter_blocks(key, nonce, next_block, lanes)
                        next_block += 16
                        widx = 0
                    w = words[widx >> 1]
                    w = (w >> np.uint64(32)) if widx & 1 else (w & mask32)
                    widx += 1
                    v |= w << np.uint64(32 * half)
                v &= mask
                if v < bu:
                    js[b] = np.int64(v)
                    break
    state[0] = next_block
    state[1] = widx


@jit
def shuffle_in_place(key, nonce, out):
    """Fisher-Yates (Durstenfeld) on ``out`` in place, drawing from stream ``(key, nonce)``.

    For ``i = m-1, ..., 1`` swap ``out[i]`` and ``out[j]`` with ``j ~ Unif{0..i}`` drawn
    by :func:`bounded_batch`. The indices are drawn in batches before the swaps so that the
    cache misses of the swaps overlap.
    """
    lanes = new_lanes()
    state = np.zeros(2, dtype=np.int64)
    state[1] = 256
    js = np.empty(4096, dtype=np.int64)
    i = out.shape[0] - 1
    while i >= 1:
        m = min(js.shape[0], i)
        batch = js[:m]
        bounded_batch(key, np.uint64(nonce), i + 1, batch, lanes, state)
        for b in range(m):
            k = i - b
            j = batch[b]
            tmp = out[k]
            out[k] = out[j]
            out[j] = tmp
        i -= m


@jit_inline
def lane_layout(bits):
    """Bits per bucket lane of a stream word, and lanes per word: 16 and 4 for ``bits <= 16``.

    Item ``i``'s bucket is the top ``bits`` bits of lane ``i % lanes`` (lowest lane first)
    of 64-bit word ``i // lanes`` of stream ``(key, 0)``.
    """
    if bits <= 16:
        return 16, 4
    if bits <= 32:
        return 32, 2
    return 64, 1


#: Items of one window of the bucket stream: 16 ChaCha blocks of 8 words, 4 lanes each at
#: most (a window of wider lanes holds fewer).
WINDOW_ITEMS = 16 * 8 * 4


@jit_inline
def window_buckets(words, count, bits, out):
    """Write the bucket of items ``0 .. count - 1`` of a window of ``words`` to ``out``.

    ``words`` are the window's 128 stream words (:func:`counter_blocks`); item ``j`` is
    lane ``j % lanes`` of word ``j // lanes`` (:func:`lane_layout`). The lanes are taken
    word by word with constant shifts, not by a division per item; ``out``
    (``int64[WINDOW_ITEMS]``) may be written past ``count``, up to the end of the last word.
    """
    lane_bits, per_word = lane_layout(bits)
    down = np.uint64(lane_bits - bits)
    used = (count + per_word - 1) // per_word
    if lane_bits == 16:
        m16 = np.uint64(0xFFFF)
        for w in range(used):
            word = words[w]
            o = 4 * w
            out[o] = np.int64((word & m16) >> down)
            out[o + 1] = np.int64(((word >> np.uint64(16)) & m16) >> down)
            out[o + 2] = np.int64(((word >> np.uint64(32)) & m16) >> down)
            out[o + 3] = np.int64((word >> np.uint64(48)) >> down)
    elif lane_bits == 32:
        m32 = np.uint64(0xFFFFFFFF)
        for w in range(used):
            word = words[w]
            out[2 * w] = np.int64((word & m32) >> down)
            out[2 * w + 1] = np.int64((word >> np.uint64(32)) >> down)
    else:
        for w in range(used):
            out[w] = np.int64(words[w] >> down)


@jit
def _window_of(key, bits, n, window, per_window, lanes, buckets):
    """Write the buckets of window ``window``'s items (of ``range(n)``) to ``buckets``.

    ``per_window`` items per window (one call of :func:`counter_blocks`, 16 blocks).
    Returns the window's first item and its number of items.
    """
    counter_blocks(key, 0, window * 16, lanes)
    base = window * per_window
    count = min(per_window, n - base)
    window_buckets(lanes.words, count, bits, buckets)
    return base, count


@jit
def bucket_counts(key, bits, n, counts):
    """Add to ``counts[b]`` the number of items of ``range(n)`` in bucket ``b`` (bits >= 1)."""
    lanes = new_lanes()
    buckets = np.empty(WINDOW_ITEMS, dtype=np.int64)
    per_window = 128 * lane_layout(bits)[1]
    for window in range((n + per_window - 1) // per_window):
        count = _window_of(key, bits, n, window, per_window, lanes, buckets)[1]
        for j in range(count):
            counts[buckets[j]] += 1


@jit
def item_buckets(key, bits, first, out):
    """Write the bucket of items ``first .. first + len(out) - 1`` to ``out`` (bits >= 1).

    Reads only the windows of the bucket stream that hold those items: a task that holds
    a range of the items finds their buckets without the rest of the stream.
    """
    count = out.shape[0]
    if count == 0:
        return
    lanes = new_lanes()
    words = lanes.words
    buckets = np.empty(WINDOW_ITEMS, dtype=np.int64)
    per_window = 128 * lane_layout(bits)[1]
    for window in range(first // per_window, (first + count - 1) // per_window + 1):
        counter_blocks(key, 0, window * 16, lanes)
        base = window * per_window
        window_buckets(words, per_window, bits, buckets)
        for i in range(max(first, base), min(first + count, base + per_window)):
            out[i - first] = buckets[i - base]


@jit
def bucket_scatter(key, bits, n, lo, hi, next_slot, out):
    """Write every item of buckets ``lo <= b < hi``, in increasing order, to ``out``.

    ``next_slot[b - lo]`` is where bucket ``b``'s next item goes; it is advanced (bits >= 1).
    """
    lanes = new_lanes()
    buckets = np.empty(WINDOW_ITEMS, dtype=np.int64)
    per_window = 128 * lane_layout(bits)[1]
    for window in range((n + per_window - 1) // per_window):
        base, count = _window_of(key, bits, n, window, per_window, lanes, buckets)
        for j in range(count):
            b = buckets[j]
            if lo <= b < hi:
                out[next_slot[b - lo]] = base + j
                next_slot[b - lo] += 1


@jit
def bucket_scatter_groups(key, bits, n, lo, hi, next_slot, group_values, k, big, r, out):
    """As :func:`bucket_scatter`, writing item ``i``'s group value instead of ``i``.

    Item ``i`` is a rank: ``out[slot] = group_values[rank_group(i, k, big, r)]``
    (:mod:`dpfast._kernels.groups`). The items come in increasing order, so their group
    is followed along (no division), and the reads of ``group_values`` run forwards
    through it instead of jumping across it as a lookup after the shuffle does (bits >= 1).
    """
    lanes = new_lanes()
    buckets = np.empty(WINDOW_ITEMS, dtype=np.int64)
    per_window = 128 * lane_layout(bits)[1]
    g = 0
    stop = group_start(1, k, big, r)  # the first rank after group g
    for window in range((n + per_window - 1) // per_window):
        base, count = _window_of(key, bits, n, window, per_window, lanes, buckets)
        for j in range(count):
            while base + j >= stop:
                g += 1
                stop = group_start(g + 1, k, big, r)
            b = buckets[j]
            if lo <= b < hi:
                out[next_slot[b - lo]] = group_values[g]
                next_slot[b - lo] += 1


@jit
def shuffle_buckets(key, lo, starts, out):
    """Shuffle ``out[starts[j]:starts[j+1]]`` with stream ``(key, 1 + lo + j)``, every ``j``."""
    for j in range(starts.shape[0] - 1):
        shuffle_in_place(key, np.uint64(1 + lo + j), out[starts[j] : starts[j + 1]])


@jit
def permutation_kernel(key, bits, out):
    """Fill ``out`` (``int64[n]``) with the bucketed permutation of ``range(n)``.

    See the module docstring: items to buckets by the top ``bits`` bits of their word of
    stream ``(key, 0)``, then each bucket shuffled by Fisher-Yates on its own stream. Two
    passes over the words (count, then place) keep the memory to ``out`` and the counts.
    O(n).
    """
    n = out.shape[0]
    if bits == 0:
        for i in range(n):
            out[i] = i
        shuffle_in_place(key, np.uint64(1), out)
        return
    n_buckets = np.int64(1) << np.int64(bits)
    counts = np.zeros(n_buckets, dtype=np.int64)
    bucket_counts(key, bits, n, counts)
    starts = np.zeros(n_buckets + 1, dtype=np.int64)
    for b in range(n_buckets):
        starts[b + 1] = starts[b] + counts[b]
    next_slot = starts[:-1].copy()
    bucket_scatter(key, bits, n, 0, n_buckets, next_slot, out)
    shuffle_buckets(key, 0, starts, out)
