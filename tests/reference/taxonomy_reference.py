"""Slow, obvious references for taxonomies and the categorical exponential mechanism.

Distances work on Python sets of ancestor labels; the exponential mechanism recomputes
each group's integer quality (distances in units of ``2**-12``) and draws with the exact
Fraction sampler of ``exponential_reference``.
"""

from __future__ import annotations

import math

from tests.reference import exponential_reference as eref
from tests.reference import ir_reference


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


def distance_units(parents, a, b, bits=12):
    """Eq. 3 rounded to an integer number of units of ``2**-bits`` (half to even)."""
    return round(distance(parents, a, b) * 2**bits)


def ir_categorical(values, domain, parents, k, base, key, remainder="middle"):
    """Categorical individual ranking with the exponential mechanism (Algorithm 2).

    Records sorted by the order (ties by row index), groups of k with the remainder in the
    group ``remainder`` says (``ir_reference.group_sizes``); quality of candidate c = -Σ
    over the group's values x of count(x) times δ(c, x) in integer units. ``base =
    (numerator, bits)`` of the mechanism. Candidates are the domain in order; returns
    released labels.
    """
    ordered = order(parents, domain)
    position = {label: i for i, label in enumerate(ordered)}
    rows = sorted(range(len(values)), key=lambda i: (position[values[i]], i))
    groups, start = [], 0
    for size in ir_reference.group_sizes(len(values), k, remainder):
        groups.append(rows[start : start + size])
        start += size
    out = [None] * len(values)
    for g, members in enumerate(groups):
        counts = {}
        for i in members:
            counts[values[i]] = counts.get(values[i], 0) + 1
        quality = [
            -sum(count * distance_units(parents, c, x) for x, count in counts.items())
            for c in ordered
        ]
        chosen = ordered[eref.draw(quality, *base, key, g)]
        for i in members:
            out[i] = chosen
    return out
