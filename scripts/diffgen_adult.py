"""DiffGen's classification experiment on UCI Adult (Mohammed et al., KDD 2011, §5).

Data: the UCI Adult training rows without missing values (30,162), shuffled with a fixed
seed and split two thirds for training (20,108 rows) and one third for testing (10,054),
as in the paper. Six numeric predictors with public root intervals (age [17, 91), ...) and
eight categorical predictors with taxonomies: the bundled ARX hierarchies, and a flat one
for relationship (ARX has none). Class: income.

For every epsilon in {0.1, 0.25, 0.5, 1}, steps h in {4, 7, 10, 13, 16} and utility
(Max, InfoGain), DiffGen runs ``--runs`` times (default 10) on the training part; a
decision tree (scikit-learn, criterion="entropy", a C4.5-like learner) is trained on the
release's microdata and tested on ``release.cut.apply(test)``. The microdata are passed
as the distinct rows of ``release.counts`` weighted by their count, which is the same
training set as ``release.microdata()`` without materialising millions of identical rows
(``--expand`` uses ``release.microdata()`` itself). Numeric cut values are ordinal
features (their interval order), categorical ones are one-hot encoded.

Also reported: the baseline accuracy (the same learner on the raw training data) and the
lower bound (always predict the training majority class).

Usage::

    python scripts/diffgen_adult.py --out docs/figures            # the full grid, 10 runs
    python scripts/diffgen_adult.py --quick --out out/            # 2 runs, fewer settings

Writes ``diffgen_adult.csv`` (every run), ``diffgen_adult_summary.csv`` (means) and
``diffgen_adult.png`` into the output folder. Needs ``pip install dpfast[experiments]``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import diffgen_common as common

import dpfast

EPSILONS = (0.1, 0.25, 0.5, 1.0)
STEPS = (4, 7, 10, 13, 16)
UTILITIES = ("max", "info_gain")


def split(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    frame = common.adult_complete()
    order = np.random.default_rng(seed).permutation(len(frame))
    cut = (2 * len(frame)) // 3
    train = frame.iloc[order[:cut]].reset_index(drop=True)
    test = frame.iloc[order[cut:]].reset_index(drop=True)
    return train, test


def features(
    frame: pd.DataFrame,
    numeric: list[str],
    categorical: list[str],
    categories: dict[str, list[str]],
) -> np.ndarray:
    """Numeric columns as numbers (interval codes when generalised), one-hot categoricals."""
    parts = []
    for column in numeric:
        values = frame[column]
        parts.append(
            (values.cat.codes if hasattr(values, "cat") else values).to_numpy(np.float32)[:, None]
        )
    for column in categorical:
        codes = pd.Categorical(frame[column], categories=categories[column]).codes
        parts.append(np.eye(len(categories[column]), dtype=np.float32)[codes])
    return np.hstack(parts)


def tree() -> object:
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier(criterion="entropy", random_state=0)


def predictors() -> tuple[list[str], list[str]]:
    numeric = list(common.BOUNDS)
    categorical = [*common.ARX_COLUMNS, "relationship"]
    return numeric, categorical


def baseline(train: pd.DataFrame, test: pd.DataFrame) -> tuple[float, float]:
    numeric, categorical = predictors()
    taxonomies = common.taxonomies()
    categories = {c: list(taxonomies[c].domain) for c in categorical}
    model = tree()
    model.fit(features(train, numeric, categorical, categories), train[common.TARGET])
    accuracy = float(
        (
            model.predict(features(test, numeric, categorical, categories)) == test[common.TARGET]
        ).mean()
    )
    majority = train[common.TARGET].value_counts().idxmax()
    return accuracy, float((test[common.TARGET] == majority).mean())


def one_run(
    train: pd.DataFrame,
    test: pd.DataFrame,
    epsilon: float,
    steps: int,
    utility: str,
    seed: int | None,
    expand: bool,
) -> tuple[float, float, int]:
    numeric, categorical = predictors()
    start = time.perf_counter()
    release = dpfast.diffgen(
        train,
        target=common.TARGET,
        epsilon=epsilon,
        steps=steps,
        taxonomies=common.taxonomies(),
        bounds=common.BOUNDS,
        classes=common.CLASSES,
        utility=utility,
        seed=seed,
    )
    seconds = time.perf_counter() - start
    categories = {c: list(release.cut[c]) for c in categorical}
    if expand:
        data = release.microdata()
        weights = None
    else:
        counts = release.counts
        data = counts[counts["count"] > 0]
        weights = data["count"].to_numpy(np.float64)
    model = tree()
    model.fit(
        features(data, numeric, categorical, categories), data[common.TARGET], sample_weight=weights
    )
    generalised = release.cut.apply(test)
    predicted = model.predict(features(generalised, numeric, categorical, categories))
    accuracy = float((predicted == generalised[common.TARGET].astype(str)).mean())
    return accuracy, seconds, int(release.report.extra["n_cells"])


def plot(summary: pd.DataFrame, base: float, lower: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, utility in zip(axes, UTILITIES, strict=True):
        part = summary[summary["utility"] == utility]
        for epsilon, group in part.groupby("epsilon"):
            ax.plot(group["steps"], 100 * group["accuracy"], marker="o", label=f"ε = {epsilon:g}")
        ax.axhline(100 * base, color="k", linestyle="--", label="baseline (raw data)")
        ax.axhline(100 * lower, color="grey", linestyle=":", label="lower bound (majority)")
        ax.set_title(f"DiffGen on Adult, utility {utility}")
        ax.set_xlabel("specialisations h")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("classification accuracy (%)")
    axes[1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/figures", help="output folder")
    parser.add_argument("--runs", type=int, default=10, help="runs per setting (default 10)")
    parser.add_argument(
        "--quick", action="store_true", help="2 runs, epsilon in {0.1, 1}, h in {4, 10, 16}"
    )
    parser.add_argument(
        "--expand",
        action="store_true",
        help="train on release.microdata() (slow: millions of rows)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the releases (run r uses seed + r); default: secure noise",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    epsilons, steps_grid, runs = EPSILONS, STEPS, args.runs
    if args.quick:
        epsilons, steps_grid, runs = (0.1, 1.0), (4, 10, 16), 2
    train, test = split()
    base, lower = baseline(train, test)
    print(
        f"train {len(train)} rows, test {len(test)} rows; baseline accuracy {base:.4f}, "
        f"lower bound {lower:.4f}"
    )
    rows = []
    for utility in UTILITIES:
        for epsilon in epsilons:
            for steps in steps_grid:
                for run in range(runs):
                    seed = None if args.seed is None else args.seed + run
                    accuracy, seconds, cells = one_run(
                        train, test, epsilon, steps, utility, seed, args.expand
                    )
                    rows.append(
                        {
                            "utility": utility,
                            "epsilon": epsilon,
                            "steps": steps,
                            "run": run,
                            "accuracy": accuracy,
                            "seconds": seconds,
                            "cells": cells,
                        }
                    )
                mean = np.mean([r["accuracy"] for r in rows[-runs:]])
                print(
                    f"{utility:<9} eps={epsilon:<5g} h={steps:<3d} accuracy {mean:.4f}", flush=True
                )
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "diffgen_adult.csv", index=False, quoting=csv.QUOTE_MINIMAL)
    summary = frame.groupby(["utility", "epsilon", "steps"], as_index=False).agg(
        accuracy=("accuracy", "mean"),
        accuracy_sd=("accuracy", "std"),
        seconds=("seconds", "median"),
        cells=("cells", "median"),
    )
    summary["baseline"] = base
    summary["lower_bound"] = lower
    summary.to_csv(out / "diffgen_adult_summary.csv", index=False)
    plot(summary, base, lower, out / "diffgen_adult.png")
    print(
        f"wrote {out / 'diffgen_adult.csv'}, {out / 'diffgen_adult_summary.csv'}, "
        f"{out / 'diffgen_adult.png'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
