"""Slow, obvious DiffGen (docs/design.md#diffgen): Python loops over records, no partition tree.

Every score is recomputed from scratch by scanning all records; the split-value EM lists
its runs of split points explicitly (float columns' grid in rational arithmetic). Random
draws read the same keyed ChaCha20 streams as dpfast (through the pure-Python bit reader
of ``noise_reference`` and the exact exponential mechanism of ``exponential_reference``),
so with the same seed the reference must build the same tree and release the same counts.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import product

from dpfast.noise import NoiseSource, exponential_base
from tests.reference import exponential_reference as eref
from tests.reference import noise_reference as nref

# ---------------------------------------------------------------- samplers


def discrete_laplace_rate(key, s: int, t: int, nonce: int, cap: int = 2**62) -> int:
    """One CKS20 Algorithm 2 draw of rate s/t from stream (key, nonce)."""
    bits = nref.BitStream(key, nonce)
    while True:
        u = nref.uniform(t, bits)
        if not nref.bernoulli_exp(u, t, bits):
            continue
        v = 0
        while nref.bernoulli_exp(1, 1, bits):
            v += 1
        y = min((u + t * v) // s, cap)
        sign = bits.bits(1)
        if sign == 1 and y == 0:
            continue
        return -y if sign else y


def count_noise(key, budget: Fraction, n: int) -> tuple[list[int], str]:
    """The count noise of dpfast.noise.add_count_noise, by its documented rule.

    A budget in [1/32, 4] uses the smallest base m/2**16 whose guarantee ln(2**b/m) is at
    most the budget, one in (4, 16] the smallest m/2**32 (dyadic sampler, segment
    streams); otherwise the rate s/t <= budget with t <= 2**32 (CKS20, one stream per
    cell).
    """
    if Fraction(1, 32) <= budget <= 16:
        bits = 16 if budget <= 4 else 32
        m = nref.dyadic_base(budget, bits)
        return nref.dyadic_draws(key, m, bits, n), f"p = {m}/2**{bits}"
    rate = budget if budget.denominator <= 2**32 else Fraction(math.floor(budget * 2**32), 2**32)
    draws = [discrete_laplace_rate(key, rate.numerator, rate.denominator, i) for i in range(n)]
    return draws, f"rate = {rate.numerator}/{rate.denominator}"


def pmf_rate(y: int, s: int, t: int) -> float:
    """P(Y = y) for the discrete Laplace of rate s/t (float, for tests)."""
    return math.tanh(s / (2 * t)) * math.exp(-abs(y) * s / t)


def em_units(scores, kind: str, delta: float) -> tuple[list[int], int]:
    """Scores as integer qualities: Max as they are (Δ = 1), InfoGain in units of 2**-12."""
    if kind == "max":
        return [int(s) for s in scores], 1
    return [round(s * 2**12) for s in scores], math.ceil(delta * 2**12) + 1


# ---------------------------------------------------------------- float split grid


def grid_step(lower: float, upper: float) -> Fraction:
    """The smallest power of two g with width/g < 2**40 and max|bound|/g < 2**52.

    The width is ``upper - lower`` rounded to float64, as the exact grid of ``ir_dp``
    (docs/design.md#exact-grid) computes it.
    """
    width = Fraction(upper - lower)
    largest = max(abs(Fraction(lower)), abs(Fraction(upper)))
    g = Fraction(1, 2**1074)
    while width / g >= 2**40 or largest / g >= 2**52:
        g *= 2
    return g


def first_index_left(x, g: Fraction) -> int:
    """The least k with x < k*g: the first grid split that sends x left."""
    return math.floor(Fraction(x) / g) + 1


def last_index_below(hi, g: Fraction) -> int:
    """The largest k with k*g < hi."""
    return math.ceil(Fraction(hi) / g) - 1


# ---------------------------------------------------------------- utilities


def entropy(counts) -> float:
    n = sum(counts)
    return -sum(c / n * math.log2(c / n) for c in counts if c) if n else 0.0


def utility(children, kind: str) -> float:
    """children: list of per-class count lists, one per child."""
    if kind == "max":
        return float(sum(max(c) for c in children))
    total = [sum(col) for col in zip(*children, strict=True)]
    n = sum(total)
    if n == 0:
        return 0.0
    return entropy(total) - sum(sum(c) / n * entropy(c) for c in children)


# ---------------------------------------------------------------- the algorithm


class Reference:
    """DiffGen on a list of records (dicts), columns given as specs.

    ``specs``: list of ``(name, "numeric", (lower, upper))`` (integer columns),
    ``(name, "float", (lower, upper))`` (float columns: root ``[lower, upper]``, split
    values on the grid of :func:`grid_step`) or ``(name, "categorical", taxonomy)``.
    """

    def __init__(self, records, specs, target, classes, *, epsilon, steps, utility_kind, seed):
        self.records = records
        self.specs = specs
        self.target = target
        self.classes = list(classes)
        self.kind = utility_kind
        self.delta = 1.0 if utility_kind == "max" else math.log2(len(classes))
        n_numeric = sum(1 for s in specs if s[1] in ("numeric", "float"))
        self.units = n_numeric + 2 * steps
        self.unit = Fraction(epsilon) / (2 * self.units)
        self.total = Fraction(epsilon)
        self.eps = float(self.unit)
        self.steps = steps
        source = NoiseSource.from_seed(seed)
        self.keys = {
            name: [int(w) for w in source.key("diffgen", name)]
            for name in ("select", "split-interval", "split-point", "counts")
        }
        self.values = []  # dicts
        self.cut = [[] for _ in specs]
        self.order = []
        self.selections = []
        self.splits = []

    # values -------------------------------------------------------------

    def value_of(self, record, j):
        name, kind, info = self.specs[j]
        for vid in self.cut[j]:
            v = self.values[vid]
            if kind == "categorical":
                leaf = info.node(record[name])
                if v["node"] in info.ancestors(leaf):
                    return vid
            else:
                x = min(max(record[name], info[0]), info[1])
                if v["lo"] <= x < v["hi"] or (v.get("top") and x == v["hi"]):
                    return vid
        raise AssertionError("no cut value holds the record")

    def new_value(self, j, **fields):
        v = {"id": len(self.values), "col": j, "split": None, **fields}
        self.values.append(v)
        self.cut[j].append(v["id"])
        self.order.append(v["id"])
        _name, kind, info = self.specs[j]
        if kind == "categorical":
            v["label"] = info.labels[v["node"]]
            v["splittable"] = not info.is_leaf(v["node"])
        elif kind == "float":
            close = "]" if v["top"] else ")"
            v["label"] = f"[{float(v['lo'])!r}, {float(v['hi'])!r}{close}"
            g = grid_step(*info)
            v["splittable"] = last_index_below(v["hi"], g) >= first_index_left(v["lo"], g)
        else:
            v["label"] = f"[{int(v['lo'])}, {int(v['hi'])})"
            v["splittable"] = v["hi"] - v["lo"] >= 2
        return v

    def records_in(self, vid):
        v = self.values[vid]
        return [r for r in self.records if self.value_of(r, v["col"]) == vid]

    def child_counts(self, vid, split=None):
        v = self.values[vid]
        name, kind, info = self.specs[v["col"]]
        if kind == "categorical":
            kids = info.children(v["node"])
            counts = [[0] * len(self.classes) for _ in kids]
            for r in self.records_in(vid):
                ancestors = info.ancestors(info.node(r[name]))
                c = next(i for i, kid in enumerate(kids) if kid in ancestors)
                counts[c][self.classes.index(r[self.target])] += 1
            return counts
        counts = [[0] * len(self.classes) for _ in range(2)]
        for r in self.records_in(vid):
            x = min(max(r[name], info[0]), info[1])
            counts[0 if x < split else 1][self.classes.index(r[self.target])] += 1
        return counts

    def choose_split(self, vid):
        v = self.values[vid]
        name, kind, info = self.specs[v["col"]]
        points = sorted({min(max(r[name], info[0]), info[1]) for r in self.records_in(vid)})
        if kind == "float":
            g = grid_step(*info)
            first, last = first_index_left(v["lo"], g), last_index_below(v["hi"], g)
            # run i: the grid indices that send exactly the first i values left
            cuts = [min(max(first_index_left(p, g), first), last + 1) for p in points]
            ends = [first, *cuts, last + 1]
            intervals = [(ends[i] * g, ends[i + 1] - ends[i]) for i in range(len(ends) - 1)]
            intervals = [(lo, size) for lo, size in intervals if size > 0]
        else:
            g = Fraction(1)
            lows = [v["lo"] + 1] + [p + 1 for p in points]
            highs = [*points, v["hi"] - 1]
            intervals = [
                (lo, hi - lo + 1) for lo, hi in zip(lows, highs, strict=True) if hi - lo + 1 > 0
            ]
        scores = [utility(self.child_counts(vid, lo), self.kind) for lo, _ in intervals]
        quality, x, y = self.em(scores)
        sizes = [size for _, size in intervals]
        i = eref.draw(quality, x, y, self.keys["split-interval"], vid, sizes)
        offset = nref.uniform_integer(self.keys["split-point"], intervals[i][1], vid)
        v["split"] = intervals[i][0] + offset * g
        if kind == "float":
            v["split"] = float(v["split"])  # a float64 exactly: the grid index has < 53 bits
            assert Fraction(v["split"]) == intervals[i][0] + offset * g
        v["score"] = scores[i]
        self.splits.append(
            {
                "value": (name, v["label"]),
                "lows": [lo for lo, _ in intervals],
                "sizes": [size for _, size in intervals],
                "scores": scores,
                "probabilities": eref.float_probabilities(quality, x, y, sizes),
                "chosen": i,
                "split": v["split"],
            }
        )

    def em(self, scores):
        """Integer qualities and the base ``(x, y)`` of the exact exponential mechanism."""
        quality, units = em_units(scores, self.kind, self.delta)
        base = exponential_base(epsilon=self.eps, sensitivity=units)
        return quality, base.numerator, base.bits

    def score(self, vid):
        v = self.values[vid]
        if self.specs[v["col"]][1] == "categorical":
            v["score"] = utility(self.child_counts(vid), self.kind) if v["splittable"] else 0.0

    # the loop -----------------------------------------------------------

    def run(self):
        for j, (_name, kind, info) in enumerate(self.specs):
            if kind == "categorical":
                self.new_value(j, node=0)
            elif kind == "float":
                self.new_value(j, lo=info[0], hi=info[1], top=True)
            else:
                self.new_value(j, lo=info[0], hi=info[1] + 1)
        for vid in list(self.order):
            self.score(vid)
        for vid in list(self.order):
            v = self.values[vid]
            if self.specs[v["col"]][1] in ("numeric", "float") and v["splittable"]:
                self.choose_split(vid)
        done = 0
        for i in range(self.steps):
            candidates = [vid for vid in self.order if self.values[vid]["splittable"]]
            if not candidates:
                break
            scores = [self.values[vid]["score"] for vid in candidates]
            quality, x, y = self.em(scores)
            pick = eref.draw(quality, x, y, self.keys["select"], i)
            chosen = candidates[pick]
            v = self.values[chosen]
            self.selections.append(
                {
                    "candidates": [
                        (self.specs[self.values[c]["col"]][0], self.values[c]["label"])
                        for c in candidates
                    ],
                    "scores": scores,
                    "probabilities": eref.float_probabilities(quality, x, y),
                    "chosen": (self.specs[v["col"]][0], v["label"]),
                }
            )
            self.specialise(chosen)
            done = i + 1
        self.done = done
        return self.release()

    def specialise(self, vid):
        v = self.values[vid]
        j = v["col"]
        _name, kind, info = self.specs[j]
        self.order.remove(vid)
        self.cut[j].remove(vid)
        if kind == "categorical":
            kids = [self.new_value(j, node=node) for node in info.children(v["node"])]
            for kid in kids:
                self.score(kid["id"])
        else:
            if kind == "float":
                left = self.new_value(j, lo=v["lo"], hi=v["split"], top=False)
                right = self.new_value(j, lo=v["split"], hi=v["hi"], top=v["top"])
            else:
                left = self.new_value(j, lo=v["lo"], hi=v["split"])
                right = self.new_value(j, lo=v["split"], hi=v["hi"])
            # v's records are generalised by the parent's cut until here: reassign
            for kid in (left, right):
                if kid["splittable"]:
                    self.choose_split(kid["id"])

    def display_cut(self, j):
        _name, kind, info = self.specs[j]
        values = [self.values[v] for v in self.cut[j]]
        if kind in ("numeric", "float"):
            return sorted(values, key=lambda v: v["lo"])
        preorder = []

        def visit(node):
            preorder.append(node)
            for child in info.children(node):
                visit(child)

        visit(0)
        return sorted(values, key=lambda v: preorder.index(v["node"]))

    def release(self):
        cuts = [self.display_cut(j) for j in range(len(self.specs))]
        cells = list(product(*[[v["id"] for v in cut] for cut in cuts]))
        index = {cell: i for i, cell in enumerate(cells)}
        counts = [[0] * len(self.classes) for _ in cells]
        for r in self.records:
            cell = tuple(self.value_of(r, j) for j in range(len(self.specs)))
            counts[index[cell]][self.classes.index(r[self.target])] += 1
        budget = self.total - self.unit * (self.units - 2 * (self.steps - self.done))
        noise_for, parameter = count_noise(
            self.keys["counts"], budget, len(cells) * len(self.classes)
        )
        rows = []
        for i, cell in enumerate(cells):
            for c, label in enumerate(self.classes):
                y = noise_for[i * len(self.classes) + c]
                rows.append(
                    (*[self.values[v]["label"] for v in cell], label, max(0, counts[i][c] + y))
                )
        return {
            "cut": {self.specs[j][0]: [v["label"] for v in cut] for j, cut in enumerate(cuts)},
            "rows": rows,
            "parameter": parameter,
            "true_counts": counts,
        }
