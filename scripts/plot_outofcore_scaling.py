"""Plot the out-of-core scaling of ir-dp against DuckDB from benchmarks/outofcore.py results.

Usage:
    .venv/bin/python scripts/plot_outofcore_scaling.py RESULTS.json [RESULTS.json ...] \\
        --out docs/figures/outofcore_scaling.png --csv docs/figures/outofcore_scaling.csv

Each RESULTS.json is the output of ``benchmarks/outofcore.py run`` on one dataset. The
figure shows, per job, the wall time per released value (flat means linear scaling) and the
peak RSS as a multiple of the table in memory; the CSV holds the numbers plotted.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

#: The memory limit of the plotted runs; a point run at another one is annotated.
LIMIT = "4GiB"


def load(paths: list[str]) -> list[dict[str, object]]:
    """Return one row per (dataset, job) that ran successfully, by rows then job."""
    rows = []
    for path in paths:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
        for job in result["jobs"]:
            if not job.get("ok"):
                continue
            rows.append(
                {
                    "job": job["job"],
                    "rows": result["rows"],
                    "columns": result["columns"],
                    "table_gb": result["table_bytes"] / 1e9,
                    "runs": len(job["runs"]),
                    "wall_s": job["wall_s_median"],
                    "ns_per_value": job["ns_per_value"],
                    "peak_gib": job["peak_rss_bytes_median"] / 2**30,
                    "peak_over_table": job["peak_over_table"],
                    "other_cpu_s": job.get("other_cpu_s_max"),
                    "memory_limit": result.get("memory_limit", ""),
                }
            )
    return sorted(rows, key=lambda r: (r["rows"], r["job"]))  # type: ignore[return-value]


def plot(rows: list[dict[str, object]], out: Path) -> None:
    """Write the two-panel figure: ns per value, and peak RSS over the table, against rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for job, marker in (("dpfast", "o"), ("duckdb", "s")):
        mine = [r for r in rows if r["job"] == job]
        if not mine:
            continue
        xs = [int(r["rows"]) / 1e6 for r in mine]  # type: ignore[call-overload]
        label = "dpfast (secure noise)" if job == "dpfast" else "DuckDB SQL (random(), not secure)"
        left.plot(xs, [r["ns_per_value"] for r in mine], marker=marker, label=label)
        right.plot(xs, [r["peak_over_table"] for r in mine], marker=marker, label=label)
        for x, r in zip(xs, mine, strict=True):  # a point run at another limit says so
            if r["memory_limit"] not in ("", LIMIT):
                note = f"--memory-limit {r['memory_limit']}"
                left.annotate(note, (x, r["ns_per_value"]), textcoords="offset points",
                              xytext=(-4, 8), ha="right", fontsize=8)  # fmt: skip
    left.set(xlabel="rows (millions), 10 float64 columns", ylabel="wall ns per released value")
    left.set_ylim(bottom=0)
    right.set(xlabel="rows (millions), 10 float64 columns", ylabel="peak RSS / table in memory")
    right.set_ylim(bottom=0)
    left.set_title(f"ir-dp out of core, --memory-limit {LIMIT}, 2 cores")
    right.set_title("peak memory")
    left.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--csv", required=True)
    args = parser.parse_args()
    rows = load(args.results)
    with open(args.csv, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, Path(args.out))


if __name__ == "__main__":
    main()
