"""Slow, obvious references for the utility metrics (docs/design.md#metrics)."""

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


def _mean(values):
    return sum(values) / len(values)


def _cov(a, b, ddof=0):
    ma, mb = _mean(a), _mean(b)
    return sum((u - ma) * (v - mb) for u, v in zip(a, b, strict=True)) / (len(a) - ddof)


def variance_variation(x, y, ddof=0):
    before, after = _cov(x, x, ddof), _cov(y, y, ddof)
    if before == 0:
        return 0.0 if after == 0 else math.inf
    return abs(before - after) / before


def _ratio(numerator, denominator):
    if denominator != 0:
        return numerator / abs(denominator)
    return 0.0 if numerator == 0 else None


def _average(terms):
    terms = [t for t in terms if t is not None]
    return sum(terms) / len(terms) if terms else math.nan


def information_loss(columns_x, columns_y, ddof=0):
    """IL1..IL6 from lists of columns, by the formulas, one term at a time.

    See docs/design.md#information-loss.
    """
    p = len(columns_x)
    n = len(columns_x[0])
    cov_x = [[_cov(columns_x[i], columns_x[j], ddof) for j in range(p)] for i in range(p)]
    cov_y = [[_cov(columns_y[i], columns_y[j], ddof) for j in range(p)] for i in range(p)]
    il1 = _average(
        [
            _ratio(
                sum(abs(a - b) for a, b in zip(columns_x[j], columns_y[j], strict=True)) / n,
                math.sqrt(2 * cov_x[j][j]),
            )
            for j in range(p)
        ]
    )
    il2 = _average(
        [
            _ratio(abs(_mean(columns_x[j]) - _mean(columns_y[j])), _mean(columns_x[j]))
            for j in range(p)
        ]
    )
    il3 = _average([_ratio(abs(cov_x[j][j] - cov_y[j][j]), cov_x[j][j]) for j in range(p)])
    il4 = _average(
        [
            _ratio(abs(cov_x[i][j] - cov_y[i][j]), cov_x[i][j])
            for j in range(p)
            for i in range(j + 1)
        ]
    )
    terms = []
    for j in range(p):
        for i in range(j):
            if min(cov_x[i][i], cov_x[j][j], cov_y[i][i], cov_y[j][j]) > 0:
                r = cov_x[i][j] / math.sqrt(cov_x[i][i] * cov_x[j][j])
                s = cov_y[i][j] / math.sqrt(cov_y[i][i] * cov_y[j][j])
                terms.append(abs(r - s))
            else:
                same = all(cov_x[a][b] == cov_y[a][b] for a, b in ((i, i), (j, j), (i, j)))
                terms.append(0.0 if same else None)
    il5 = _average(terms)
    defined = [v for v in (il1, il2, il3, il4, il5) if not math.isnan(v)]
    return {
        "IL1": il1,
        "IL2": il2,
        "IL3": il3,
        "IL4": il4,
        "IL5": il5,
        "IL6": 100 * sum(defined) / len(defined),
    }


def sse(column, labels):
    groups = {}
    for value, label in zip(column, labels, strict=True):
        groups.setdefault(label, []).append(value)
    total = 0.0
    for values in groups.values():
        centre = _mean(values)
        total += sum((v - centre) ** 2 for v in values)
    return total


def sst(column):
    return sse(column, [0] * len(column))
