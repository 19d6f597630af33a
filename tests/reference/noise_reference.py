"""Slow, obvious pure-Python references for dpfast.noise (integers only, no Fractions).

They consume exactly the same random bits as the Numba kernels, so tests compare draws
one by one. The stream of ``(key, nonce)`` is the ChaCha20 keystream (DJB layout, 64-bit
counter and nonce) read as one little-endian integer: bit ``i`` of the stream is bit
``i % 8`` of keystream byte ``i // 8``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

MASK32 = 0xFFFFFFFF
CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)


def _rotl(v: int, c: int) -> int:
    return ((v << c) | (v >> (32 - c))) & MASK32


def chacha20_block(key: Sequence[int], counter: int, nonce: int) -> list[int]:
    """The 16 output words of one ChaCha20 block (DJB layout)."""
    state = [
        *CONSTANTS,
        *(int(k) for k in key),
        counter & MASK32,
        counter >> 32,
        nonce & MASK32,
        nonce >> 32,
    ]
    x = list(state)

    def qr(a: int, b: int, c: int, d: int) -> None:
        x[a] = (x[a] + x[b]) & MASK32
        x[d] = _rotl(x[d] ^ x[a], 16)
        x[c] = (x[c] + x[d]) & MASK32
        x[b] = _rotl(x[b] ^ x[c], 12)
        x[a] = (x[a] + x[b]) & MASK32
        x[d] = _rotl(x[d] ^ x[a], 8)
        x[c] = (x[c] + x[d]) & MASK32
        x[b] = _rotl(x[b] ^ x[c], 7)

    for _ in range(10):
        qr(0, 4, 8, 12)
        qr(1, 5, 9, 13)
        qr(2, 6, 10, 14)
        qr(3, 7, 11, 15)
        qr(0, 5, 10, 15)
        qr(1, 6, 11, 12)
        qr(2, 7, 8, 13)
        qr(3, 4, 9, 14)
    return [(x[i] + state[i]) & MASK32 for i in range(16)]


class BitStream:
    """The bits of stream ``(key, nonce)``, least significant bit of each byte first."""

    def __init__(self, key: Sequence[int], nonce: int) -> None:
        self.key = [int(k) for k in key]
        self.nonce = nonce
        self.value = 0  # the keystream generated so far, as a little-endian integer
        self.n_bits = 0
        self.pos = 0

    def bits(self, k: int) -> int:
        """The next ``k`` bits as an integer, the first of them as the lowest bit."""
        while self.pos + k > self.n_bits:
            words = chacha20_block(self.key, self.n_bits // 512, self.nonce)
            block = int.from_bytes(struct.pack("<16I", *words), "little")
            self.value |= block << self.n_bits
            self.n_bits += 512
        out = (self.value >> self.pos) & ((1 << k) - 1)
        self.pos += k
        return out

    def words32(self) -> int:
        """The next 32-bit keystream word."""
        return self.bits(32)


def bernoulli(a: int, b: int, bits: BitStream) -> bool:
    """Bernoulli(a/b): is U = 0.u1 u2 ... (stream bits) below a/b = 0.d1 d2 ...?"""
    if a >= b:
        return True
    remainder = a
    while remainder != 0:
        remainder *= 2
        digit = remainder // b
        remainder -= digit * b
        u = bits.bits(1)
        if u < digit:
            return True
        if u > digit:
            return False
    return False


def bernoulli_exp(a: int, b: int, bits: BitStream) -> bool:
    """Bernoulli(exp(-a/b)) for 0 <= a <= b (CKS20 Algorithm 1)."""
    k = 1
    while True:
        # Bernoulli(a / (b k)) as Bernoulli(1/k) and then Bernoulli(a/b).
        if not bernoulli(1, k, bits):
            break
        if not bernoulli(a, b, bits):
            break
        k += 1
    return k % 2 == 1


def uniform(m: int, bits: BitStream) -> int:
    """Unif{0..m-1} by rejection on bit_length(m - 1) bits."""
    while True:
        u = bits.bits((m - 1).bit_length())
        if u < m:
            return u


def discrete_laplace(key: Sequence[int], t: int, nonce: int, cap: int = 2**62) -> int:
    """One CKS20 discrete Laplace draw of scale t from stream (key, nonce), |Y| <= cap."""
    bits = BitStream(key, nonce)
    while True:
        u = uniform(t, bits)
        if not bernoulli_exp(u, t, bits):
            continue
        v = 0
        while bernoulli_exp(1, 1, bits):
            v += 1
        x = min(u + t * v, cap)
        sign = bits.bits(1)
        if sign == 1 and x == 0:
            continue
        return -x if sign else x


def uniform_integer(key: Sequence[int], high: int, nonce: int) -> int:
    """One Unif{0..high-1} draw from stream (key, nonce)."""
    return uniform(high, BitStream(key, nonce))


def bernoulli_rational(key: Sequence[int], numerator: int, denominator: int, nonce: int) -> bool:
    """One Bernoulli(numerator/denominator) draw from stream (key, nonce)."""
    return bernoulli(numerator, denominator, BitStream(key, nonce))


def permutation(key: Sequence[int], n: int) -> list[int]:
    """Fisher-Yates on range(n) with Lemire's bounded integers from stream (key, 0)."""
    bits = BitStream(key, 0)
    out = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        while True:
            product = bits.words32() * bound
            if product % 2**32 >= 2**32 % bound:
                j = product >> 32
                break
        out[i], out[j] = out[j], out[i]
    return out


def pmf_discrete_laplace(y: int, t: int) -> float:
    """P(Y = y) for the discrete Laplace of scale t (float, for tests only)."""
    import math

    return math.tanh(1 / (2 * t)) * math.exp(-abs(y) / t)
