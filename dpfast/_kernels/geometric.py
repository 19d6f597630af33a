"""Exact discrete Laplace noise with a dyadic base, read from per-segment ChaCha20 streams.

The distribution is ``P(X = x) = (1 - p) / (1 + p) * p**|x|`` with ``p = m / 2**b``
(``b`` in ``{16, 32}``, ``0 < m < 2**b``): the two-sided geometric mechanism, which is
``ln(1/p)``-DP for a query of sensitivity 1. Because ``p`` is a dyadic rational, a
Bernoulli(p) trial is one comparison of ``b`` uniform bits ``u`` with ``m`` (success when
``u < m``), and ``X = G1 - G2`` with ``G1``, ``G2`` independent geometric counts
(``P(G = g) = (1 - p) p**g``: the successes before the first failure). No rejection, no
division, no floating point.

Stream layout: draws are cut into segments of :data:`SEGMENT` consecutive indices, and
segment ``g`` reads the stream ``(key, nonce = g)`` from block 0 on, as 64-bit words in
order (:mod:`dpfast._kernels.chacha`); each word holds ``64 / b`` trials, lowest bits
first. Trial ``j`` of the segment is thus a success or a failure, and the segment's
draws consume the trials in order: ``G1`` of draw ``i`` counts the successes before the
next failure, then ``G2`` those before the one after. A segment's draws never read
another segment's stream, so splitting a request on segment boundaries (threads) never
changes a value.

Speed: the trials of 16 blocks are compared at once into a bitmap of failures (a loop
LLVM vectorises), and a draw is then two ``cttz`` (count trailing zeros) on that bitmap
when both failures lie in the current 64-bit word, which is the usual case. About 51
bits per draw at ``b = 16`` and ``p = e**-0.5``; ``benchmarks/bench_noise.py`` measures
it against the rational-rate sampler.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import count_trailing_zeros as _cttz
from dpfast._jit import jit, jit_inline
from dpfast._kernels.lanes import counter_blocks, new_lanes

#: Draws per stream (the unit of threading).
SEGMENT = 4096
_ONE = np.uint64(1)


@jit_inline
def _failures_of(buf, mu, fb, b):
    # Bit t of fb[t // 64] = trial t of buf failed (u >= m); trial t is lane t % (64/b) of
    # word t // (64/b), lowest lane first. b is a constant at each call (see _failures),
    # so the shifts and masks of the loops are constants.
    per_word = 64 // b
    words = 64 // per_word  # buffer words per bitmap word
    mask = (_ONE << np.uint64(b)) - _ONE
    for k in range(128 // words):
        acc = np.uint64(0)
        for w in range(words):
            word = buf[k * words + w]
            for j in range(per_word):
                u = (word >> np.uint64(b * j)) & mask
                acc |= np.uint64(u >= mu) << np.uint64(w * per_word + j)
        fb[k] = acc


@jit
def _failures(buf, b, mu, fb):
    # The bitmap of failures of the 128 words of buf, for b in {16, 32}.
    if b == 16:
        _failures_of(buf, mu, fb, 16)
    else:
        _failures_of(buf, mu, fb, 32)


@jit
def dyadic_laplace_kernel(key, m, b, seg_lo, seg_hi, floor, out):
    """``out[i] = max(out[i] + X_i, floor)`` in place for the segments ``[seg_lo, seg_hi)``.

    ``key`` ``uint64[8]``; ``m``, ``b`` int64 with ``b`` in ``{16, 32}`` and
    ``0 < m < 2**b``; ``out`` ``int64[n]`` with ``|out| <= 2**62``; ``floor`` int64
    (``-2**63`` for no clamp). Draw ``i`` belongs to segment
    ``i // SEGMENT``. ``G1``, ``G2`` saturate at ``2**61`` (probability ``p**(2**61)``).
    O(number of draws / (1 - p)) expected.
    """
    n = out.shape[0]
    mu = np.uint64(m)
    nf = 8 if b == 16 else 4
    lanes = new_lanes()
    fb = np.empty(nf, dtype=np.uint64)
    cap = np.int64(1) << np.int64(61)
    for seg in range(seg_lo, seg_hi):
        lo = seg * SEGMENT
        hi = min(lo + SEGMENT, n)
        nonce = np.uint64(seg)
        block = 0
        fidx = nf  # bitmap used up: refill first
        cur = np.uint64(0)  # unread trials of the current bitmap word, next one lowest
        left = 0  # how many
        for i in range(lo, hi):
            rest = cur & (cur - _ONE)
            if rest != 0:
                # Usual case: the next two failures are in cur (bits above `left` are 0).
                z1 = np.int64(_cttz(cur))
                z2 = np.int64(_cttz(rest))
                d = z1 - (z2 - z1 - 1)
                cur = (rest >> np.uint64(z2)) >> _ONE
                left -= z2 + 1
            else:
                g1 = np.int64(0)
                g2 = np.int64(0)
                for half in range(2):
                    g = np.int64(0)
                    while True:
                        if left == 0:
                            if fidx == nf:
                                counter_blocks(key, nonce, block, lanes)
                                _failures(lanes.words, b, mu, fb)
                                block += 16
                                fidx = 0
                            cur = fb[fidx]
                            fidx += 1
                            left = 64
                        z = np.int64(_cttz(cur))
                        if z < left:
                            g += z
                            cur = (cur >> np.uint64(z)) >> _ONE
                            left -= z + 1
                            break
                        g += left
                        left = 0
                        if g > cap:
                            g = cap
                    if half == 0:
                        g1 = g
                    else:
                        g2 = g
                d = g1 - g2
            v = out[i] + d
            out[i] = v if v > floor else floor
