"""Plot MDAV and insensitive MDAV run time against the number of records (10k to 1M).

Usage: python scripts/plot_mdav_scaling.py [--out docs/mdav_scaling.png] [--max 1000000]

Needs matplotlib (``pip install 'dpfast[plots]'``). Data: 8 normal attributes, k = 10.
Each point is the median of a few runs after a warm-up call (one run above 200k records).
The timings are also written as JSON beside the PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dpfast.partitions.insensitive_mdav import insensitive_mdav_labels
from dpfast.partitions.mdav import mdav_labels

SIZES = [10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000]
K = 10
M = 8
BOUNDS = [(0.0, 100.0)] * M


def _time(call, n):
    runs = 3 if n <= 200_000 else 1
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/mdav_scaling.png")
    parser.add_argument("--max", type=int, default=1_000_000, help="largest size to run")
    parser.add_argument(
        "--general-max",
        type=int,
        default=100_000,
        help="largest size for the O(n^2/k) general path",
    )
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    warm = np.random.default_rng(0).normal(50, 15, size=(2000, M))
    mdav_labels(warm, K)
    for path in ("fast", "general"):
        insensitive_mdav_labels(warm, K, BOUNDS, path=path)

    results: dict[str, dict[int, float]] = {
        "MDAV (k-d tree, exact)": {},
        "insensitive MDAV, fast path": {},
        "insensitive MDAV, general path": {},
    }
    for n in [s for s in SIZES if s <= args.max]:
        data = np.random.default_rng(n).normal(50, 15, size=(n, M))
        jobs = {
            "MDAV (k-d tree, exact)": lambda d=data: mdav_labels(d, K),
            "insensitive MDAV, fast path": lambda d=data: insensitive_mdav_labels(
                d, K, BOUNDS, path="fast"
            ),
        }
        if n <= args.general_max:
            jobs["insensitive MDAV, general path"] = lambda d=data: insensitive_mdav_labels(
                d, K, BOUNDS, path="general"
            )
        for name, call in jobs.items():
            results[name][n] = _time(call, n)
            print(f"{name:<34} n={n:>9,}  {results[name][n]:8.3f} s", flush=True)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in results.items():
        if points:
            sizes = sorted(points)
            ax.loglog(sizes, [points[s] for s in sizes], marker="o", label=name)
    ax.axhline(120, color="grey", linestyle=":", linewidth=1)
    ax.text(11_000, 130, "2 min", color="grey")
    ax.set_xlabel("records (8 attributes, k = 10)")
    ax.set_ylabel("seconds (median)")
    ax.set_title(f"dpfast MDAV scaling ({os.cpu_count()} CPU cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    out.with_suffix(".json").write_text(
        json.dumps(
            {name: {str(n): t for n, t in points.items()} for name, points in results.items()},
            indent=2,
        )
    )
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
