"""DiffGen on Adult (30,162 rows, steps=16) and on Adult scaled to 100k-1M rows (steps=15).

The baseline is the same job done the plain-NumPy way: the generalised value of every
record is kept per column, and every step rescans all records to score every candidate
(``np.bincount`` over the whole table), then rescans them to relabel the records of the
specialised value; the counts come from one ``np.bincount`` over the cell index, with
the same exact noise sampler. dpfast scans only the records of ``Link_v`` in each step.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import diffgen_common as common

import dpfast
from dpfast import noise
from dpfast.io import as_table_data

if (Path(dpfast.__file__).parent / "methods").is_dir():
    from dpfast.methods.diffgen._columns import CategoricalColumn, prepare
    from dpfast.methods.diffgen._tree import _preorder_rank
else:  # a revision before the methods/partitions layout (bench-compare BASE)
    from dpfast.diffgen._columns import CategoricalColumn, prepare
    from dpfast.diffgen._tree import _preorder_rank

TAXONOMIES = common.taxonomies()
#: Whether ``prepare`` takes an engine (the columns written once over the engine protocol).
_ENGINE = any(
    (Path(dpfast.__file__).parent / place).is_file()
    for place in ("engines/_contingency.py", "steps/class_counts.py")
)


def _release(frame, steps, seed=1):
    return dpfast.diffgen(
        frame,
        target=common.TARGET,
        epsilon=1.0,
        steps=steps,
        taxonomies=TAXONOMIES,
        bounds=common.BOUNDS,
        classes=common.CLASSES,
        seed=seed,
    )


def _encoded(frame):
    """The predictors, their codes, the classes and their count, as dpfast encodes them."""
    if _ENGINE:  # the in-memory engine holds the codes (its contingency)
        from dpfast.engines import open_engine

        engine = open_engine(frame, method="diffgen")
        prepared = prepare(engine, common.TARGET, TAXONOMIES, common.BOUNDS, common.CLASSES)
        held = prepared.contingency
        return prepared.columns, held.codes, held.classes, len(prepared.class_labels)
    prepared = prepare(
        as_table_data(frame), common.TARGET, TAXONOMIES, common.BOUNDS, common.CLASSES
    )
    codes = [col.codes for col in prepared.columns]
    return prepared.columns, codes, prepared.classes, len(prepared.class_labels)


def numpy_rescan(frame, steps, seed=1):
    """DiffGen (Max utility) by rescanning every record in every step.

    Same keys, nonces and candidate order as dpfast, so it builds the same tree and
    releases the same counts (checked in ``test_numpy_rescan_is_the_same_release``).
    """
    columns, codes, classes, n_classes = _encoded(frame)
    n_rows = classes.shape[0]
    source = noise.NoiseSource.from_seed(seed)
    keys = {
        k: source.key("diffgen", k) for k in ("select", "split-interval", "split-point", "counts")
    }
    n_numeric = sum(not isinstance(c, CategoricalColumn) for c in columns)
    eps = 1.0 / (2 * (n_numeric + 2 * steps))
    current = [np.full(n_rows, j, dtype=np.int64) for j in range(len(columns))]
    values = []  # global ids: (column, kind, node or (lo, hi), split)
    order = []

    def new_value(j, entry):
        values.append([j, *entry])
        order.append(len(values) - 1)
        return len(values) - 1

    def splittable(v):
        j, kind, a, b, _ = values[v]
        return b - a >= 2 if kind == "num" else not columns[j].taxonomy.is_leaf(a)

    def split_value(v):
        j, _, lo, hi, _ = values[v]
        col = columns[j]
        mask = current[j] == v
        points, inverse = np.unique(col.code_values[codes[j][mask]], return_inverse=True)
        hist = np.zeros((points.shape[0], n_classes), dtype=np.int64)
        np.add.at(hist, (inverse, classes[mask]), 1)
        left = np.vstack([np.zeros(n_classes, np.int64), np.cumsum(hist, axis=0)])
        scores = left.max(1) + (left[-1] - left).max(1)
        lows = np.concatenate(([lo + 1], points + 1))
        sizes = np.concatenate((points, [hi - 1])) - lows + 1
        keep = np.flatnonzero(sizes > 0)
        i = int(
            keep[
                noise.exponential_mechanism(
                    keys["split-interval"],
                    scores[keep].astype(np.int64)[None, :],
                    epsilon=eps,
                    sensitivity=1,
                    multipliers=sizes[keep],
                    start=v,
                )[0]
            ]
        )
        offset = noise.uniform_integers(keys["split-point"], int(sizes[i]), 1, start=v)[0]
        values[v][4] = (float(lows[i] + offset), float(scores[i]))

    def score(v):
        j, kind, node, _, split = values[v]
        if kind == "num":
            return split[1]
        col = columns[j]
        kids = col.taxonomy.children(node)
        child = np.full(len(col.taxonomy.domain), -1)
        for i, kid in enumerate(kids):
            child[col.taxonomy.leaves_under(kid)] = i
        mask = current[j] == v
        counts = np.bincount(
            child[codes[j][mask]] * n_classes + classes[mask], minlength=len(kids) * n_classes
        ).reshape(len(kids), n_classes)
        return float(counts.max(1).sum())

    for j, col in enumerate(columns):
        if isinstance(col, CategoricalColumn):
            new_value(j, ("cat", 0, 0, None))
        else:
            new_value(j, ("num", *col.root, None))
    for v in list(order):
        if values[v][1] == "num" and splittable(v):
            split_value(v)
    done = 0
    for step in range(steps):
        candidates = [v for v in order if splittable(v)]
        if not candidates:
            break
        done = step + 1
        scores = np.array([score(v) for v in candidates])
        v = candidates[
            int(
                noise.exponential_mechanism(
                    keys["select"],
                    scores.astype(np.int64)[None, :],
                    epsilon=eps,
                    sensitivity=1,
                    start=step,
                )[0]
            )
        ]
        j, kind, a, b, split = values[v]
        mask = current[j] == v
        order.remove(v)
        col = columns[j]
        if kind == "cat":
            for kid in col.taxonomy.children(a):
                new = new_value(j, ("cat", kid, 0, None))
                under = np.zeros(len(col.taxonomy.domain), dtype=bool)
                under[col.taxonomy.leaves_under(kid)] = True
                current[j][mask & under[codes[j]]] = new
        else:
            x = col.code_values[codes[j]]
            children = [
                new_value(j, ("num", a, split[0], None)),
                new_value(j, ("num", split[0], b, None)),
            ]
            current[j][mask & (x < split[0])] = children[0]
            current[j][mask & (x >= split[0])] = children[1]
            for new in children:
                if splittable(new):
                    split_value(new)
    cell = np.zeros(n_rows, dtype=np.int64)
    n_cells = 1
    for j, col in enumerate(columns):
        cut = [v for v in order if values[v][0] == j]
        if isinstance(col, CategoricalColumn):
            rank = _preorder_rank(col.taxonomy)
            cut.sort(key=lambda v: rank[values[v][2]])
        else:
            cut.sort(key=lambda v: values[v][2])
        position = np.zeros(len(values), dtype=np.int64)
        position[cut] = np.arange(len(cut))
        cell = cell * len(cut) + position[current[j]]
        n_cells *= len(cut)
    counts = np.bincount(cell * n_classes + classes, minlength=n_cells * n_classes)
    unit = Fraction(1, 2 * (n_numeric + 2 * steps))
    noisy, _ = noise.add_count_noise(keys["counts"], counts, 1 - unit * (n_numeric + 2 * done))
    return noisy


@pytest.fixture(scope="module")
def adult_frame():
    return common.adult_complete()


def test_diffgen_adult(benchmark, record, adult_frame):
    _release(adult_frame, 16)
    release = benchmark.pedantic(_release, args=(adult_frame, 16), rounds=7, warmup_rounds=1)
    record("diffgen adult 30k steps=16", "dpfast")
    assert len(release.counts) == release.report.extra["n_cells"]


def test_diffgen_adult_numpy(benchmark, record, adult_frame):
    counts = benchmark.pedantic(numpy_rescan, args=(adult_frame, 16), rounds=3, warmup_rounds=1)
    record("diffgen adult 30k steps=16", "numpy rescan")
    assert counts.ndim == 1


@pytest.mark.parametrize("n_rows", [100_000, 1_000_000])
def test_diffgen_scaled(benchmark, record, note, adult_frame, n_rows):
    frame = common.scale_adult(adult_frame, n_rows)
    _release(frame, 15)
    release = benchmark.pedantic(_release, args=(frame, 15), rounds=3, warmup_rounds=1)
    record(f"diffgen adult {n_rows // 1000}k steps=15", "dpfast")
    note(f"diffgen {n_rows} rows: {release.report.extra['n_cells']} cells")
    assert len(release.counts) == release.report.extra["n_cells"]


@pytest.mark.parametrize("n_rows", [100_000, 1_000_000])
def test_diffgen_scaled_numpy(benchmark, record, adult_frame, n_rows):
    frame = common.scale_adult(adult_frame, n_rows)
    counts = benchmark.pedantic(numpy_rescan, args=(frame, 15), rounds=2, warmup_rounds=0)
    record(f"diffgen adult {n_rows // 1000}k steps=15", "numpy rescan")
    assert counts.ndim == 1


def test_numpy_rescan_is_the_same_release(adult_frame):
    release = _release(adult_frame, 16)
    assert numpy_rescan(adult_frame, 16).tolist() == release.counts["count"].tolist()
