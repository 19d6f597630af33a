"""Slow, obvious references for the utility metrics (SPEC §6)."""

import math


def relative_error(x, y, lower, upper, sanity=0.01):
    floor = sanity * (upper - lower)
    total = 0.0
    for a, b in zip(x, y, strict=False):
        denominator = max(abs(a), floor)
        total += abs(a - b) / denominator if denominator > 0 else (0.0 if a == b else math.inf)
    return total / len(x)


def _jsd(p, q):
    sp, sq = sum(p), sum(q)
    p = [v / sp for v in p]
    q = [v / sq for v in q]
    total = 0.0
    for a, b in zip(p, q, strict=False):
        m = (a + b) / 2
        if a > 0:
            total += 0.5 * a * math.log2(a / m)
        if b > 0:
            total += 0.5 * b * math.log2(b / m)
    return total


def jensen_shannon_binned(x, y, lower, upper, bins):
    def histogram(values):
        counts = [0] * bins
        for v in values:
            i = math.floor((v - lower) * bins / (upper - lower))
            counts[min(max(i, 0), bins - 1)] += 1
        return counts

    return _jsd(histogram(x), histogram(y))


def jensen_shannon_discrete(x, y):
    values = sorted(set(x) | set(y))
    return _jsd([list(x).count(v) for v in values], [list(y).count(v) for v in values])
