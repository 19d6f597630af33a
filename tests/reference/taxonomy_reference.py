"""Slow, obvious references for taxonomies and the categorical exponential mechanism.

Distances work on Python sets of ancestor labels; the exponential mechanism recomputes
each group's quality, weights and integer CDF with plain floats and takes its random word
from the pure-Python ChaCha20 of ``noise_reference``.
"""

from __future__ import annotations

import math

from tests.reference.noise_reference import chacha20_block

TWO63 = 2**63


def ancestors(parents, label):
    """The set φ(label): the label and every ancestor, from a {child: parent} mapping."""
    out = {label}
    while parents.get(label) is not None:
        label = parents[label]
        out.add(label)
    return out


def distance(parents, a, b):
    """Eq. 3 (docs/design.md#semantic-distance) on ancestor sets."""
    pa, pb = ancestors(parents, a), ancestors(parents, b)
    union = len(pa | pb)
    return math.log2(1 + (union - len(pa & pb)) / union)


def distance_matrix(parents, domain):
    return [[distance(parents, a, b) for b in domain] for a in domain]


def marginality(parents, domain):
    return [math.fsum(distance(parents, a, b) for b in domain if b != a) for a in domain]


def order(parents, domain):
    """Domain sorted by δ(x, v*), ties by label; v* = most marginal, ties by label."""
    marg = marginality(parents, domain)
    best = max(range(len(domain)), key=lambda i: (marg[i], -i))
    star = domain[best]
    return sorted(domain, key=lambda x: (distance(parents, x, star), x))


def first_word(key, nonce):
    """The first little-endian 64-bit word of stream (key, nonce)."""
    words = chacha20_block([int(k) for k in key], 0, nonce)
    return words[0] | (words[1] << 32)


def thresholds(quality, scale):
    """Integer CDF of one exponential-mechanism draw, as the kernel computes it."""
    weights = [scale * q for q in quality]
    top = max(weights)
    total = 0.0
    for w in weights:
        total += math.exp(w - top)
    out = []
    running = 0.0
    for w in weights[:-1]:
        running += math.exp(w - top)
        t = running / total * float(TWO63)
        out.append(TWO63 if t >= float(TWO63) else int(t))
    out.append(TWO63)
    return out


def draw(quality, scale, key, nonce):
    u = first_word(key, nonce) >> 1
    for c, t in enumerate(thresholds(quality, scale)):
        if u < t:
            return c
    raise AssertionError("unreachable")


def ir_categorical(values, domain, parents, k, epsilon, sensitivity, key):
    """Categorical individual ranking with the exponential mechanism (Algorithm 2).

    Records sorted by the order (ties by row index), groups of k with the remainder in the
    last group; quality of candidate c = -Σ over the group's distinct values x, in order,
    of count(x) * δ(c, x). Candidates are the domain in order; returns released labels.
    """
    ordered = order(parents, domain)
    position = {label: i for i, label in enumerate(ordered)}
    rows = sorted(range(len(values)), key=lambda i: (position[values[i]], i))
    n_groups = len(values) // k
    groups = [rows[g * k : (g + 1) * k] for g in range(n_groups - 1)]
    groups.append(rows[(n_groups - 1) * k :])
    scale = epsilon / (2.0 * sensitivity)
    out = [None] * len(values)
    for g, members in enumerate(groups):
        counts = {}
        for i in members:
            counts[values[i]] = counts.get(values[i], 0) + 1
        runs = sorted(counts.items(), key=lambda item: position[item[0]])
        quality = []
        for c in ordered:
            q = 0.0
            for x, count in runs:
                q -= count * distance(parents, c, x)
            quality.append(q)
        chosen = ordered[draw(quality, scale, key, g)]
        for i in members:
            out[i] = chosen
    return out
