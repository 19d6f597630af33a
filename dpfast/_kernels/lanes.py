"""The 16-lane ChaCha20 batching that every sampler shares, and the per-element lane loop.

:func:`dpfast._kernels.chacha.chacha20_blocks16` computes 16 blocks at once, one per lane
(about 18 ns per block against 90 ns for the scalar block, ``benchmarks/bench_noise.py``).
The samplers feed it in one of two ways, each a helper that fills a :class:`Lanes`
scratch:

* :func:`nonce_blocks`: block 0 of the 16 streams ``nonce0 .. nonce0 + 15``, for the
  per-element samplers (element ``i`` reads only stream ``start + i``);
* :func:`counter_blocks`: blocks ``block0 .. block0 + 15`` of one stream, for the samplers
  that read a stream as consecutive words (permutations, perturbation words, segments of
  dyadic draws).

:func:`per_element` is the one lane loop of the exact per-element samplers: it hands each
element's first block to a per-draw function passed as an argument. It is inlined into
each kernel, where the draw function is a compile-time constant (Numba specialises on a
dispatcher argument), so the loop costs what a hand-written one costs, and the draw
function, which takes only scalars and tuples, does no reference counting: timed
interleaved with the four hand-written loops it replaced, each sampler stays within 3%
(``benchmarks/bench_noise.py`` times the discrete Laplace and permutation samplers).
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline, struct
from dpfast._kernels.chacha import chacha20_blocks16

# Scratch of one 16-lane batch, chacha20_blocks16's arguments and output:
#   x, s      uint32[256], working and input state
#   counters  uint64[16], block counter of each lane
#   nonces    uint64[16], stream of each lane
#   words     uint64[16 * 8], the output: words[lane * 8 + j] is word j of lane's block
Lanes = struct("Lanes", "x s counters nonces words", __name__)


@jit
def new_lanes():
    """Return a fresh :class:`Lanes` scratch (about 3 KB)."""
    return Lanes(
        np.empty(256, dtype=np.uint32),
        np.empty(256, dtype=np.uint32),
        np.zeros(16, dtype=np.uint64),
        np.zeros(16, dtype=np.uint64),
        np.empty(128, dtype=np.uint64),
    )


@jit
def nonce_blocks(key, nonce0, lanes):
    """Block 0 of the streams ``nonce0 .. nonce0 + 15`` (uint64) into ``lanes.words``."""
    for lane in range(16):
        lanes.counters[lane] = np.uint64(0)
        lanes.nonces[lane] = nonce0 + np.uint64(lane)
    chacha20_blocks16(key, lanes.counters, lanes.nonces, lanes.x, lanes.s, lanes.words)


@jit
def counter_blocks(key, nonce, block0, lanes):
    """Blocks ``block0 .. block0 + 15`` of the stream ``nonce`` into ``lanes.words``.

    ``lanes.words[j]`` is then the 64-bit word ``block0 * 8 + j`` of the stream.
    """
    for lane in range(16):
        lanes.counters[lane] = np.uint64(block0 + lane)
        lanes.nonces[lane] = np.uint64(nonce)
    chacha20_blocks16(key, lanes.counters, lanes.nonces, lanes.x, lanes.s, lanes.words)


@jit_inline
def key_tuple(key):
    """Return the ``uint64[8]`` key as an 8-tuple, for :func:`chacha.chacha20_block64`."""
    return (key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7])


@jit_inline
def per_element(draw, params, key, start, out):
    """``out[i] = draw(params, blk, kt, nonce)`` with ``nonce = start + i``, 16 at a time.

    ``draw`` is a jitted function; ``params`` a tuple of scalars passed through to it;
    ``key`` ``uint64[8]``; ``start`` uint64; ``out`` 1-D (written). ``blk`` is block 0 of
    the stream ``(key, nonce)`` as an 8-tuple of little-endian ``uint64`` words and ``kt``
    the key as an 8-tuple (for the rare further blocks). O(n) calls of ``draw``.
    """
    n = out.shape[0]
    lanes = new_lanes()
    words = lanes.words
    kt = key_tuple(key)
    for g in range(0, n, 16):
        nonce_blocks(key, start + np.uint64(g), lanes)
        for lane in range(min(16, n - g)):
            # The block is copied into a tuple so that the draw takes no arrays.
            o = lane * 8
            blk = (
                words[o],
                words[o + 1],
                words[o + 2],
                words[o + 3],
                words[o + 4],
                words[o + 5],
                words[o + 6],
                words[o + 7],
            )
            out[g + lane] = draw(params, blk, kt, start + np.uint64(g + lane))
