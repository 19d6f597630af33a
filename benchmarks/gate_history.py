"""The history plot: each quick-tier case's ratio and memory multiple over commits."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from gate import load_results


def plot_history(files: Sequence[str | Path], out: str | Path) -> Path:
    """Plot each case's ratio and memory multiple over ``files`` (one per commit) to a PNG."""
    try:
        import matplotlib
    except ImportError:
        sys.exit(
            "bench plot: matplotlib is missing; install it with .venv/bin/pip install -e '.[plots]'"
        )
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, series = [], []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            commit = (json.load(handle).get("commit_info") or {}).get("id") or ""
        labels.append(commit[:8] or Path(path).stem)
        series.append(load_results(path))
    cases = sorted({case for results in series for case in results})
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    x = list(range(len(files)))
    colours = plt.get_cmap("tab20").colors
    for i, case in enumerate(cases):
        style = {"color": colours[i % 20], "marker": "os^vD"[i % 5], "label": case}
        ratios = [r[case]["ratio"] if case in r else math.nan for r in series]
        memory = [r[case].get("memory_multiple") if case in r else None for r in series]
        top.plot(x, ratios, **style)
        bottom.plot(x, [math.nan if m is None else m for m in memory], **style)
    top.set_yscale("log")
    top.set_ylabel("ratio (baseline time / dpfast time)")
    top.set_title("dpfast quick tier: higher ratio is faster")
    bottom.set_ylabel("peak extra memory / input")
    bottom.set_xticks(x, labels, rotation=45, ha="right")
    top.legend(fontsize="small", ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return Path(out)
