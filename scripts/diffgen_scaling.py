"""DiffGen run time against the number of rows: Adult scaled from 100k to 1M rows.

Adult's 30,162 complete training rows are scaled as in DiffGen's paper (each record plus
alpha - 1 variations with some predictor values replaced at random from the column's
domain, see ``diffgen_common.scale_adult``), then ``dpfast.diffgen`` runs with
``steps=15, epsilon=1`` (one warm-up call, then the median of ``--repeats`` calls; data
generation, reading and writing are excluded). The time splits into the per-row phases
(encoding, specialisation) and the per-cell phases (noisy counts, output table), whose
cost follows the number of leaf partitions, reported beside it.

Usage::

    python scripts/diffgen_scaling.py --out docs/figures

Writes ``diffgen_scaling.csv`` and ``diffgen_scaling.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import diffgen_common as common

import dpfast

SIZES = (100_000, 200_000, 400_000, 600_000, 800_000, 1_000_000)


def run(frame: pd.DataFrame, seed: int) -> tuple[float, dict[str, float], int]:
    start = time.perf_counter()
    release = dpfast.diffgen(
        frame,
        target=common.TARGET,
        epsilon=1.0,
        steps=15,
        taxonomies=common.taxonomies(),
        bounds=common.BOUNDS,
        classes=common.CLASSES,
        seed=seed,
    )
    return time.perf_counter() - start, release.private.timings, release.report.extra["n_cells"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/figures", help="output folder")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = common.adult_complete()
    rows = []
    for n in SIZES:
        frame = common.scale_adult(base, n)
        run(frame, 0)  # warm-up (and compilation on the first size)
        results = [run(frame, seed) for seed in range(1, args.repeats + 1)]
        total = float(np.median([r[0] for r in results]))
        per_row = float(np.median([r[1]["encode"] + r[1]["specialise"] for r in results]))
        per_cell = float(np.median([r[1]["counts"] + r[1]["assemble"] for r in results]))
        cells = int(np.median([r[2] for r in results]))
        rows.append(
            {
                "rows": n,
                "seconds": total,
                "row_phases_seconds": per_row,
                "cell_phases_seconds": per_cell,
                "cells": cells,
            }
        )
        print(
            f"{n:>9,} rows: {total:.3f} s (rows {per_row:.3f} s, cells {per_cell:.3f} s, "
            f"{cells:,} cells)",
            flush=True,
        )
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "diffgen_scaling.csv", index=False)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    millions = frame["rows"] / 1e6
    ax.plot(millions, frame["seconds"], marker="o", label="total")
    ax.plot(
        millions, frame["row_phases_seconds"], marker="s", label="encode + specialise (per row)"
    )
    ax.plot(
        millions, frame["cell_phases_seconds"], marker="^", label="noisy counts + table (per cell)"
    )
    ax.set_xlabel("rows (millions)")
    ax.set_ylabel("seconds (median)")
    ax.set_title("dpfast.diffgen on scaled Adult, steps=15, ε=1")
    ax.set_xlim(0, None)
    ax.set_ylim(0, None)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "diffgen_scaling.png", dpi=120)
    print(f"wrote {out / 'diffgen_scaling.csv'} and {out / 'diffgen_scaling.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
