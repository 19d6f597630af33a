"""ChaCha20 block function in Numba: scalar and 16-lane (SIMD-friendly) kernels.

Layout is D. J. Bernstein's original one (not RFC 7539's): state words 0-3 are the
constants ``"expand 32-byte k"``, words 4-11 the 256-bit key, words 12-13 a 64-bit block
counter (low word first) and words 14-15 a 64-bit nonce (low word first). 20 rounds.

A *stream* is identified by ``(key, nonce)``; its 32-bit output words are those of block
``counter = 0, 1, 2, ...`` in order. dpfast reads a stream as little-endian 64-bit words
``W[j] = w[2j] | w[2j+1] << 32`` (the keystream bytes read as ``uint64``), and bit ``i`` of
the stream is ``(W[i // 64] >> (i % 64)) & 1``.

Keys are passed as ``uint64`` arrays of shape ``(8,)`` whose entries hold one 32-bit key
word each (the façade in :mod:`dpfast.noise` builds them).

Costs on the 2-core AVX-512 development machine (``benchmarks/bench_noise.py``): the scalar
block takes about 90 ns; :func:`chacha20_blocks16` computes 16 blocks in about 18 ns
per block, because each quarter round is a 16-iteration loop over lanes (state stored as
``x[word * 16 + lane]``, every partial result truncated to ``uint32``) that LLVM turns into
AVX-512 ``vpaddd``/``vpxord``/``vprold``.

References
----------
D. J. Bernstein, "ChaCha, a variant of Salsa20", 2008.
Y. Nir and A. Langley, "ChaCha20 and Poly1305 for IETF Protocols", RFC 7539, 2015.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline

CONSTANTS = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)
_MASK32 = 0xFFFFFFFF


@jit_inline
def _rotl32(v, c):
    # Numba widens uint32 arithmetic to 64 bits; truncating every partial result lets
    # LLVM narrow the expression back to a 32-bit rotate (vprold when vectorised).
    return np.uint32(np.uint32(v << c) | np.uint32(v >> (32 - c)))


@jit_inline
def _qr(a, b, c, d):
    a = np.uint32(a + b)
    d = _rotl32(np.uint32(d ^ a), 16)
    c = np.uint32(c + d)
    b = _rotl32(np.uint32(b ^ c), 12)
    a = np.uint32(a + b)
    d = _rotl32(np.uint32(d ^ a), 8)
    c = np.uint32(c + d)
    b = _rotl32(np.uint32(b ^ c), 7)
    return a, b, c, d


@jit_inline
def _block_words(kt, counter, nonce):
    # One block as a 16-tuple of uint32; kt is an 8-tuple of key words. Tuples, not
    # arrays, so callers keep everything in registers (no reference counting).
    c = np.uint64(counter)
    n = np.uint64(nonce)
    s0 = np.uint32(0x61707865)
    s1 = np.uint32(0x3320646E)
    s2 = np.uint32(0x79622D32)
    s3 = np.uint32(0x6B206574)
    s4 = np.uint32(kt[0])
    s5 = np.uint32(kt[1])
    s6 = np.uint32(kt[2])
    s7 = np.uint32(kt[3])
    s8 = np.uint32(kt[4])
    s9 = np.uint32(kt[5])
    s10 = np.uint32(kt[6])
    s11 = np.uint32(kt[7])
    s12 = np.uint32(c & np.uint64(_MASK32))
    s13 = np.uint32(c >> np.uint64(32))
    s14 = np.uint32(n & np.uint64(_MASK32))
    s15 = np.uint32(n >> np.uint64(32))
    x0, x1, x2, x3, x4, x5, x6, x7 = s0, s1, s2, s3, s4, s5, s6, s7
    x8, x9, x10, x11, x12, x13, x14, x15 = s8, s9, s10, s11, s12, s13, s14, s15
    for _ in range(10):
        x0, x4, x8, x12 = _qr(x0, x4, x8, x12)
        x1, x5, x9, x13 = _qr(x1, x5, x9, x13)
        x2, x6, x10, x14 = _qr(x2, x6, x10, x14)
        x3, x7, x11, x15 = _qr(x3, x7, x11, x15)
        x0, x5, x10, x15 = _qr(x0, x5, x10, x15)
        x1, x6, x11, x12 = _qr(x1, x6, x11, x12)
        x2, x7, x8, x13 = _qr(x2, x7, x8, x13)
        x3, x4, x9, x14 = _qr(x3, x4, x9, x14)
    return (
        np.uint32(x0 + s0),
        np.uint32(x1 + s1),
        np.uint32(x2 + s2),
        np.uint32(x3 + s3),
        np.uint32(x4 + s4),
        np.uint32(x5 + s5),
        np.uint32(x6 + s6),
        np.uint32(x7 + s7),
        np.uint32(x8 + s8),
        np.uint32(x9 + s9),
        np.uint32(x10 + s10),
        np.uint32(x11 + s11),
        np.uint32(x12 + s12),
        np.uint32(x13 + s13),
        np.uint32(x14 + s14),
        np.uint32(x15 + s15),
    )


@jit
def chacha20_block(key, counter, nonce, out):
    """Write one ChaCha20 block (16 ``uint32`` words) into ``out``.

    ``key``: ``uint64[8]`` (32-bit words); ``counter``, ``nonce``: ``uint64`` scalars;
    ``out``: ``uint32[16]`` (written). O(1): 20 rounds of 32-bit add/xor/rotate.
    """
    kt = (key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7])
    w = _block_words(kt, counter, nonce)
    for i in range(16):
        out[i] = w[i]


@jit
def chacha20_block64(kt, counter, nonce):
    """Return one block as an 8-tuple of little-endian ``uint64`` words.

    ``kt``: 8-tuple of ``uint64`` key words; ``counter``, ``nonce``: ``uint64``. Used for
    the rare extra blocks of the exact samplers; tuples keep the callers free of arrays.
    """
    w = _block_words(kt, counter, nonce)
    s = np.uint64(32)
    return (
        np.uint64(w[0]) | (np.uint64(w[1]) << s),
        np.uint64(w[2]) | (np.uint64(w[3]) << s),
        np.uint64(w[4]) | (np.uint64(w[5]) << s),
        np.uint64(w[6]) | (np.uint64(w[7]) << s),
        np.uint64(w[8]) | (np.uint64(w[9]) << s),
        np.uint64(w[10]) | (np.uint64(w[11]) << s),
        np.uint64(w[12]) | (np.uint64(w[13]) << s),
        np.uint64(w[14]) | (np.uint64(w[15]) << s),
    )


@jit_inline
def _qr16(x, a, b, c, d):
    # x is uint32[16 * 16] laid out as x[word * 16 + lane]: the quarter round _qr on all
    # 16 lanes. The lane loop is innermost and _qr truncates every intermediate to uint32,
    # so the loop becomes one AVX-512 vpaddd/vpxord/vprold sequence.
    a0 = a * 16
    b0 = b * 16
    c0 = c * 16
    d0 = d * 16
    for lane in range(16):
        xa = x[a0 + lane]
        xb = x[b0 + lane]
        xc = x[c0 + lane]
        xd = x[d0 + lane]
        xa, xb, xc, xd = _qr(xa, xb, xc, xd)
        x[a0 + lane] = xa
        x[b0 + lane] = xb
        x[c0 + lane] = xc
        x[d0 + lane] = xd


@jit
def chacha20_blocks16(key, counters, nonces, x, s, out):
    """Compute 16 ChaCha20 blocks at once, one per lane, as little-endian 64-bit words.

    Parameters (all arrays; no validation):
    ``key`` ``uint64[8]``; ``counters``, ``nonces`` ``uint64[16]`` (lane ``l`` computes
    block ``counters[l]`` of stream ``nonces[l]``); ``x``, ``s`` ``uint32[256]`` scratch;
    ``out`` ``uint64[16 * 8]`` (written): ``out[l * 8 + j] = w[2j] | w[2j + 1] << 32`` for
    the block ``w`` of lane ``l``. O(1), vectorised across lanes.
    """
    for lane in range(16):
        s[0 * 16 + lane] = 0x61707865
        s[1 * 16 + lane] = 0x3320646E
        s[2 * 16 + lane] = 0x79622D32
        s[3 * 16 + lane] = 0x6B206574
    for i in range(8):
        k = key[i] & _MASK32
        for lane in range(16):
            s[(4 + i) * 16 + lane] = k
    for lane in range(16):
        c = counters[lane]
        n = nonces[lane]
        s[12 * 16 + lane] = c & np.uint64(_MASK32)
        s[13 * 16 + lane] = c >> np.uint64(32)
        s[14 * 16 + lane] = n & np.uint64(_MASK32)
        s[15 * 16 + lane] = n >> np.uint64(32)
    for i in range(256):
        x[i] = s[i]
    for _ in range(10):
        _qr16(x, 0, 4, 8, 12)
        _qr16(x, 1, 5, 9, 13)
        _qr16(x, 2, 6, 10, 14)
        _qr16(x, 3, 7, 11, 15)
        _qr16(x, 0, 5, 10, 15)
        _qr16(x, 1, 6, 11, 12)
        _qr16(x, 2, 7, 8, 13)
        _qr16(x, 3, 4, 9, 14)
    for i in range(256):
        x[i] = x[i] + s[i]
    for j in range(8):
        for lane in range(16):
            lo = np.uint64(x[(2 * j) * 16 + lane])
            hi = np.uint64(x[(2 * j + 1) * 16 + lane])
            out[lane * 8 + j] = lo | (hi << np.uint64(32))


@jit
def chacha20_words(key, nonce, n_blocks, out):
    """Fill ``out`` (``uint64[n_blocks * 8]``) with the first blocks of stream ``nonce``.

    Blocks ``0 .. n_blocks - 1`` are computed 16 at a time by :func:`chacha20_blocks16`
    (lanes differ by counter). O(n_blocks).
    """
    x = np.empty(256, dtype=np.uint32)
    s = np.empty(256, dtype=np.uint32)
    counters = np.empty(16, dtype=np.uint64)
    nonces = np.full(16, np.uint64(nonce), dtype=np.uint64)
    buf = np.empty(128, dtype=np.uint64)
    for b0 in range(0, n_blocks, 16):
        for lane in range(16):
            counters[lane] = np.uint64(b0 + lane)
        chacha20_blocks16(key, counters, nonces, x, s, buf)
        m = min(16, n_blocks - b0)
        for i in range(m * 8):
            out[b0 * 8 + i] = buf[i]
