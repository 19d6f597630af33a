"""Slow, obvious exact exponential mechanism: Fractions and the ChaCha20 stream word by word.

The weights are exact rationals ``mult_c * b**(q_max - q_c)`` with ``b = x / 2**y``; the
draw is the first ``c`` with ``U < C_c / S``, where ``U``'s binary expansion is the stream
``(key, nonce)`` read as little-endian 64-bit words, most significant bit of each first.
Words are read until the interval of ``U`` they leave open lies below one threshold.
"""

from __future__ import annotations

import math
from fractions import Fraction

from tests.reference.noise_reference import chacha20_block


def stream_word(key, nonce: int, j: int) -> int:
    """Word ``j`` of the stream ``(key, nonce)`` as a little-endian 64-bit integer."""
    block = chacha20_block([int(k) for k in key], j // 8, nonce)
    i = j % 8
    return block[2 * i] | (block[2 * i + 1] << 32)


def weights(quality, numerator: int, bits: int, mult=None) -> list[int]:
    """Integers proportional to the weights: ``mult_c x**d_c 2**(y (D - d_c))``."""
    mult = [1] * len(quality) if mult is None else mult
    top, spread = max(quality), max(quality) - min(quality)
    return [
        int(f) * numerator ** (top - q) * 2 ** (bits * (spread - top + q))
        for f, q in zip(mult, quality, strict=True)
    ]


def probabilities(quality, numerator: int, bits: int, mult=None) -> list[Fraction]:
    """Exact ``Pr[c]`` for an integer quality row (integer multipliers)."""
    w = weights(quality, numerator, bits, mult)
    return [Fraction(v, sum(w)) for v in w]


def choose(cumulative: list[int], word) -> int:
    """First ``c`` with ``U < cumulative[c] / cumulative[-1]``, ``U``'s words from ``word(j)``."""
    total = cumulative[-1]
    u, k, j = 0, 0, 0
    while True:
        u = (u << 64) | word(j)
        j += 1
        k += 64
        # U in [u, u + 1) / 2**k; c is the first threshold above the interval's low end
        c = next(i for i, t in enumerate(cumulative) if u * total < t << k)
        if (u + 1) * total <= cumulative[c] << k:
            return c


def draw(quality, numerator: int, bits: int, key, nonce: int, mult=None) -> int:
    """One exact draw from the stream ``(key, nonce)``."""
    cumulative, running = [], 0
    for w in weights(quality, numerator, bits, mult):
        running += w
        cumulative.append(running)
    return choose(cumulative, lambda j: stream_word(key, nonce, j))


def float_probabilities(quality, numerator: int, bits: int, mult=None) -> list[float]:
    """``Pr[c]`` rounded to float: floor of the exact ratio to 64 bits, then to float."""
    w = weights(quality, numerator, bits, mult)
    total = sum(w)
    out = []
    for v in w:
        shift = total.bit_length() - v.bit_length() + 64
        out.append(math.ldexp(float((v << shift) // total), -shift))
    return out
