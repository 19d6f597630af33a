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


def chunk_bits(b: int) -> int:
    """Digits compared per step for denominator b: 16, or fewer when b >= 2**48."""
    return min(16, 64 - b.bit_length())


def bernoulli(a: int, b: int, bits: BitStream) -> bool:
    """Bernoulli(a/b): compare c-bit uniforms u with the c-digit blocks D of a/b in base 2**c.

    u < D: true; u > D: false; u == D: go on with the next block. No bits when a = 0 or
    a >= b.
    """
    if a >= b:
        return True
    c = chunk_bits(b)
    remainder = a
    while remainder != 0:
        digits, remainder = divmod(remainder * 2**c, b)
        u = bits.bits(c)
        if u != digits:
            return u < digits
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
    """Unif{0..m-1}: draw k = min(bit_length(m-1) + 8, 63) bits, keep x < lim, return x % m.

    lim is the largest multiple of m not above 2**k. No bits when m == 1.
    """
    if m == 1:
        return 0
    k = min((m - 1).bit_length() + 8, 63)
    lim = (2**k // m) * m
    while True:
        x = bits.bits(k)
        if x < lim:
            return x % m


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


def bounded(bound: int, bits: BitStream) -> int:
    """Unif{0..bound-1} from 32-bit stream words (Lemire for bound <= 2**32, else masking)."""
    if bound <= 2**32:
        while True:
            product = bits.words32() * bound
            if product % 2**32 >= 2**32 % bound:
                return product >> 32
    n_bits = (bound - 1).bit_length()
    while True:
        v = bits.bits(64) % 2**n_bits
        if v < bound:
            return v


def bounded_sequence(key: Sequence[int], top: int, m: int, nonce: int = 0) -> list[int]:
    """Draws j_b ~ Unif{0..top-b-1}, b = 0..m-1, from stream (key, nonce)."""
    bits = BitStream(key, nonce)
    return [bounded(top - b, bits) for b in range(m)]


def fisher_yates(items: list[int], bits: BitStream) -> list[int]:
    """Fisher-Yates: for i = m-1..1 swap out[i] and out[j], j ~ Unif{0..i}."""
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = bounded(i + 1, bits)
        out[i], out[j] = out[j], out[i]
    return out


def permutation(key: Sequence[int], n: int, bucket_bits: int | None = None) -> list[int]:
    """The bucketed permutation: item i to the top bits of lane i of stream (key, 0).

    Each bucket's items, in increasing order, are shuffled by Fisher-Yates on stream
    (key, 1 + bucket); the permutation is bucket 0's items, then bucket 1's, ...
    ``bucket_bits`` defaults to max(0, bit_length(n - 1) - 16).
    """
    if bucket_bits is None:
        bucket_bits = max(0, (n - 1).bit_length() - 16) if n > 1 else 0
    if bucket_bits == 0:
        return fisher_yates(list(range(n)), BitStream(key, 1))
    lane = 16 if bucket_bits <= 16 else 32 if bucket_bits <= 32 else 64
    words = BitStream(key, 0)  # lanes are consecutive runs of bits, lowest first
    buckets: dict[int, list[int]] = {}
    for i in range(n):
        buckets.setdefault(words.bits(lane) >> (lane - bucket_bits), []).append(i)
    out: list[int] = []
    for bucket in sorted(buckets):
        out += fisher_yates(buckets[bucket], BitStream(key, 1 + bucket))
    return out


def pmf_discrete_laplace(y: int, t: int) -> float:
    """P(Y = y) for the discrete Laplace of scale t (float, for tests only)."""
    import math

    return math.tanh(1 / (2 * t)) * math.exp(-abs(y) / t)


# ---------------------------------------------------------------- dyadic-base discrete Laplace

DYADIC_SEGMENT = 4096


def dyadic_base(epsilon, bits: int):
    """Smallest m with m / 2**bits >= exp(-epsilon), by 80-digit decimal arithmetic.

    Independent of dpfast's fixed-point Taylor bound. Returns None when m would reach
    2**bits.
    """
    import decimal
    from fractions import Fraction

    exact = Fraction(epsilon)
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        target = (-(decimal.Decimal(exact.numerator) / decimal.Decimal(exact.denominator))).exp()
        m = int((target * (1 << bits)).to_integral_value(rounding=decimal.ROUND_CEILING))
    return None if m >= 1 << bits else m


class _Trials:
    """The b-bit trials of stream (key, nonce), in order: lowest bits of each word first."""

    def __init__(self, key: Sequence[int], nonce: int, bits: int) -> None:
        self.key = [int(k) for k in key]
        self.nonce = nonce
        self.bits = bits
        self.words: list[int] = []  # the stream's 32-bit words generated so far
        self.position = 0

    def next(self) -> int:
        word, lane = divmod(self.position, 32 // self.bits)
        while word >= len(self.words):
            self.words.extend(chacha20_block(self.key, len(self.words) // 16, self.nonce))
        self.position += 1
        return (self.words[word] >> (self.bits * lane)) & ((1 << self.bits) - 1)


def dyadic_draws(key: Sequence[int], m: int, bits: int, n: int) -> list[int]:
    """n draws X = G1 - G2 of base m / 2**bits, read as the kernel's layout describes.

    Segment g (draws g*4096 ...) reads stream (key, nonce = g) from its start as b-bit
    trials, lowest bits first; a trial succeeds when its value is below m, and a
    geometric count is the successes before the first failure.
    """
    out: list[int] = []
    for segment in range(-(-n // DYADIC_SEGMENT)):
        trials = _Trials(key, segment, bits)
        for _ in range(min(DYADIC_SEGMENT, n - segment * DYADIC_SEGMENT)):
            pair = []
            for _half in range(2):
                g = 0
                while trials.next() < m:
                    g += 1
                pair.append(g)
            out.append(pair[0] - pair[1])
    return out


def pmf_dyadic(y: int, p: float) -> float:
    """P(X = y) for the discrete Laplace of base p (float, for tests only)."""
    return (1 - p) / (1 + p) * p ** abs(y)
