"""Measure the figures of docs/skewed.md: Adult's skewed columns, from a poor release to a good one.

Usage: python scripts/skewed_guide.py [--seeds 20] [--rows N] [--out docs/figures/skewed_guide.json]

Releases Adult's training split (fnlwgt, capital-gain, hours-per-week) with ``ir_dp`` at
ε = 1, one step of the guide at a time, each step adding one remedy to the one before:
its public forecast, its forecast from the data (PRIVATE), and its measured outcome over
``--seeds`` seeded releases (seeds 0, 1, ...): the released column mean against the true
one, the spread of that mean over the seeds, and the share of values the noise pushed onto
a bound (the releases' private counts). Then one release of the last step (seed 0): its
public accuracy section and its private risk summary. Every figure measured against the
data is private to the data holder; the JSON holds them so that the guide can quote them.

``render(figures)`` turns the JSON into the guide's tables; tests/test_skewed_guide.py
checks that docs/skewed.md holds each of them as rendered, so the page cannot drift from
the JSON. ``--rows`` takes the first N rows only (a quick check of the script itself).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dpfast
from dpfast.datasets import adult

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("fnlwgt", "capital-gain", "hours-per-week")
OUTER = {"fnlwgt": (0, 10_000_000), "capital-gain": (0, 99_999), "hours-per-week": (1, 99)}
DP_BOUNDS = {"upper_quantile": 0.99, "epsilon_share": 0.25}
WEIGHTS = {"fnlwgt": 2.0, "capital-gain": 2.0, "hours-per-week": 1.0}
EPSILON = 1.0

#: The guide's steps, each the one before with one change: (key, title, arguments).
STEPS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("poor", "outer ranges, ε split equally, k = 50", {"k": 50}),
    ("dp_bounds", "+ fnlwgt's upper bound chosen with DP", {"dp_bounds": True}),
    ("log", "+ capital-gain released through log", {"transforms": {"capital-gain": "log"}}),
    ("weights", "+ ε weights 2 : 2 : 1", {"epsilon_weights": WEIGHTS}),
    ("last", "(the remainder in the last group instead)", {"remainder": "last"}),
    ("k100", "+ k = 100 (remainder in the middle)", {"k": 100, "remainder": "middle"}),
)


def step_arguments(key: str) -> dict[str, Any]:
    """Return the keywords of ``dpfast.ir_dp`` at step ``key`` (every change up to it)."""
    arguments: dict[str, Any] = {"epsilon": EPSILON, "bounds": dict(OUTER)}
    for name, _, change in STEPS:
        change = dict(change)
        if change.pop("dp_bounds", False):
            arguments["bounds"]["fnlwgt"] = dpfast.DPBounds(outer=OUTER["fnlwgt"], **DP_BOUNDS)
        if name == "last" and key != "last":
            continue  # a comparison, not kept
        arguments.update(change)
        if name == key:
            return arguments
    raise ValueError(f"no step {key!r}")


def _share(count: int, n: int) -> float:
    return count / n


def public_forecast(n: int, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return the public forecast of ``arguments``: per column ε, noise scale, on a bound."""
    table = dpfast.PublicTable(n, list(COLUMNS), frozenset(COLUMNS))
    found = dpfast.forecast("ir_dp", table, **arguments)
    columns = {
        c.column: {"epsilon": c.epsilon, "noise_scale": c.noise_scale, "on_bound": c.on_bound}
        for c in found.columns
    }
    return {"columns": columns, "suggested_k": found.suggested_k}


def data_forecast(table: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return the forecast from the data (PRIVATE) of ``arguments`` on ``table``."""
    found = dpfast.forecast("ir_dp", table, **arguments).from_data
    columns = {
        c.column: {
            "pushed": c.pushed,
            "mean": c.mean,
            "mean_bias": c.mean_bias,
            "mean_se": c.mean_se,
            "exact": c.exact,
        }
        for c in found.columns
    }
    return {"columns": columns, "suggested_k": found.suggested_k}


def measure(table: Any, arguments: dict[str, Any], seeds: int) -> dict[str, Any]:
    """Return the measured outcome of ``seeds`` seeded releases (PRIVATE: the true data)."""
    n = len(table)
    truth = {c: float(table[c].mean()) for c in COLUMNS}
    means: dict[str, list[float]] = {c: [] for c in COLUMNS}
    pushed: dict[str, list[float]] = {c: [] for c in COLUMNS}
    clamped: dict[str, list[float]] = {c: [] for c in COLUMNS}
    jsd: dict[str, list[float]] = {c: [] for c in COLUMNS}
    relative: dict[str, list[float]] = {c: [] for c in COLUMNS}
    uppers, bounds_epsilon = [], []
    for seed in range(seeds):
        release = dpfast.ir_dp(table, seed=seed, metrics=True, **arguments)
        private = release.private.to_dict()
        for c in COLUMNS:
            means[c].append(float(release.data[c].mean()))
            pushed[c].append(_share(private["pushed_onto_bound"][c], n))
            clamped[c].append(_share(private["clamped"][c], n))
            jsd[c].append(private["metrics"]["jensen_shannon"][c])
            relative[c].append(private["metrics"]["relative_error"][c])
        uppers.append(release.report.parameters["bounds"]["fnlwgt"][1])
        bounds_epsilon.append(
            sum(e.epsilon for e in release.report.ledger if e.step.startswith("clamping bounds"))
        )
    columns = {
        c: {
            "mean_off": statistics.median(m / truth[c] - 1 for m in means[c]),
            "se": statistics.stdev(means[c]) / truth[c] if seeds > 1 else None,
            "pushed": statistics.fmean(pushed[c]),
            "clamped": statistics.fmean(clamped[c]),
            "jensen_shannon": statistics.median(jsd[c]),
            "relative_error": statistics.median(relative[c]),
        }
        for c in COLUMNS
    }
    return {
        "columns": columns,
        "epsilon_bounds": max(bounds_epsilon),
        "fnlwgt_upper": {
            "median": statistics.median(uppers),
            "min": min(uppers),
            "max": max(uppers),
        },
    }


def final_release(table: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Return the public accuracy and the private risk summary of one release (seed 0)."""
    release = dpfast.ir_dp(table, seed=0, risk=True, **arguments)
    accuracy = release.report.accuracy
    intervals = {
        c: {
            "mean": accuracy["columns"][c]["intervals"]["mean"]["half_width"],
            "total": accuracy["columns"][c]["intervals"]["total"]["half_width"],
            "rounding": accuracy["columns"][c]["intervals"]["mean"]["rounding"],
        }
        for c in accuracy["columns"]
    }
    subset = dpfast.accuracy(release.report, "mean", "hours-per-week", rows=1_000)
    disclosure = release.private.to_dict()["risk"]["interval_disclosure"]
    return {
        "guarantee_level": release.report.guarantee_level,
        "bounds": {c: list(b) for c, b in release.report.parameters["bounds"].items()},
        "accuracy": intervals,
        "subset_hours_1000": subset.half_width,
        "interval_disclosure": {"p": disclosure["p"], "rank": disclosure["rank"]},
        "truth": {c: float(table[c].mean()) for c in COLUMNS},
    }


def describe(table: Any) -> dict[str, Any]:
    """Return each column's mean, median, 0.99 quantile, maximum and share at each bound."""
    found = {}
    for c in COLUMNS:
        values = table[c]
        lower, upper = OUTER[c]
        found[c] = {
            "mean": float(values.mean()),
            "median": float(values.median()),
            "q99": float(values.quantile(0.99)),
            "max": float(values.max()),
            "at_lower": float((values <= lower).mean()),
            "at_upper": float((values >= upper).mean()),
        }
    return found


def describe_table(figures: dict[str, Any]) -> str:
    """Return the table describing the columns (PRIVATE: the true data)."""
    lines = [
        "| column | outer range | mean | median | 0.99 quantile | largest | at the lower bound "
        "| at the upper bound |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c, got in figures["table"].items():
        lower, upper = OUTER[c]
        lines.append(
            f"| {c} | [{lower:,}, {upper:,}] | {got['mean']:,.1f} | {got['median']:,.0f} "
            f"| {got['q99']:,.0f} | {got['max']:,.0f} | {_pct(got['at_lower'])} "
            f"| {_pct(got['at_upper'])} |"
        )
    return "\n".join(lines)


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} logical CPUs, {model}, {platform.system()} {platform.release()}"


def _commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def measure_all(seeds: int, rows: int | None) -> dict[str, Any]:
    """Return every figure of the guide."""
    table = adult("train")[list(COLUMNS)]
    if rows is not None:
        table = table.head(rows)
    steps = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warnings are the point: they are in the figures
        for key, title, _ in STEPS:
            arguments = step_arguments(key)
            steps.append(
                {
                    "key": key,
                    "title": title,
                    "public": public_forecast(len(table), arguments),
                    "from_data": data_forecast(table, arguments),
                    "measured": measure(table, arguments, seeds),
                }
            )
        final = final_release(table, step_arguments(STEPS[-1][0]))
    return {
        "measured": {
            "date": datetime.date.today().isoformat(),
            "commit": _commit(),
            "machine": _machine(),
            "dpfast": dpfast.__version__,
            "seeds": seeds,
            "rows": len(table),
            "epsilon": EPSILON,
        },
        "table": describe(table),
        "steps": steps,
        "final": final,
    }


def _pct(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.1%}" if sign else f"{value:.1%}"


def _step(figures: dict[str, Any], key: str) -> dict[str, Any]:
    return next(s for s in figures["steps"] if s["key"] == key)


def forecast_table(figures: dict[str, Any], key: str) -> str:
    """Return the table of step ``key``: its forecasts and what was measured, per column."""
    step = _step(figures, key)
    lines = [
        "| column | ε | on a bound if spread evenly (public) | pushed: forecast from the data "
        "| mean bias: forecast from the data | pushed: measured | mean off: measured "
        "| SE of the mean: measured |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in COLUMNS:
        public = step["public"]["columns"][c]
        data = step["from_data"]["columns"][c]
        got = step["measured"]["columns"][c]
        bias = data["mean_bias"] / data["mean"]
        lines.append(
            f"| {c} | {public['epsilon']:.3g} | {_pct(public['on_bound'])} "
            f"| {_pct(data['pushed'])} | {_pct(bias, sign=True)} | {_pct(got['pushed'])} "
            f"| {_pct(got['mean_off'], sign=True)} | {_pct(got['se'])} |"
        )
    return "\n".join(lines)


def summary_table(figures: dict[str, Any]) -> str:
    """Return the guide's last table: each step's mean off, SE and share pushed, and its ε."""
    head = " | ".join(f"{c}: mean off, SE, pushed" for c in COLUMNS)
    lines = [f"| step | ε (of which on bounds) | {head} |", "|---|---|---|---|---|"]
    for step in figures["steps"]:
        got = step["measured"]["columns"]
        cells = " | ".join(
            f"{_pct(got[c]['mean_off'], sign=True)}, {_pct(got[c]['se'])}, {_pct(got[c]['pushed'])}"
            for c in COLUMNS
        )
        spent = f"{figures['measured']['epsilon']:g} ({step['measured']['epsilon_bounds']:.3g})"
        lines.append(f"| {step['title']} | {spent} | {cells} |")
    return "\n".join(lines)


def detail_table(figures: dict[str, Any]) -> str:
    """Return the record-level metrics of the last steps: what the remainder and ``k`` change."""
    lines = [
        "| step | " + " | ".join(f"{c}: relative error, JSD" for c in COLUMNS) + " |",
        "|---|---|---|---|",
    ]
    for key in ("weights", "last", "k100"):
        step = _step(figures, key)
        got = step["measured"]["columns"]
        cells = " | ".join(
            f"{got[c]['relative_error']:.3g}, {got[c]['jensen_shannon']:.3g}" for c in COLUMNS
        )
        lines.append(f"| {step['title']} | {cells} |")
    return "\n".join(lines)


def render(figures: dict[str, Any]) -> list[str]:
    """Return every table and quoted line of docs/skewed.md, as the page must hold them."""
    measured = figures["measured"]
    final = figures["final"]
    dp = _step(figures, "dp_bounds")["measured"]
    upper = dp["fnlwgt_upper"]
    quoted = [describe_table(figures)]
    quoted += [forecast_table(figures, key) for key, _, _ in STEPS]
    quoted.append(summary_table(figures))
    quoted.append(detail_table(figures))
    quoted.append(
        f"Measured {measured['date']} at commit `{measured['commit']}` on {measured['machine']}, "
        f"dpfast {measured['dpfast']}: {measured['seeds']} seeded releases per step "
        f"of Adult's {measured['rows']:,} training rows"
    )
    quoted.append(
        f"upper bound chosen between {upper['min']:,.0f} and {upper['max']:,.0f} "
        f"(median {upper['median']:,.0f})"
    )
    quoted.append(f"{dp['columns']['fnlwgt']['clamped']:.1%} of its values clamped")
    quoted.append(f"spread evenly: {_step(figures, 'k100')['public']['suggested_k']} here")
    quoted.append(f"chosen `fnlwgt` bound is {final['bounds']['fnlwgt'][1]:,.0f}")
    for c, found in final["accuracy"].items():
        quoted.append(f"| {c} | ± {found['mean']:,.4g} | ± {found['total']:,.4g} |")
    quoted.append(f"± {final['subset_hours_1000']:.3g}")
    for c, share in final["interval_disclosure"]["rank"].items():
        quoted.append(f"| {c} | {share:.1%} |")
    return quoted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--rows", type=int, default=None, help="first N rows only (a check)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "figures" / "skewed_guide.json"))
    args = parser.parse_args()
    figures = measure_all(args.seeds, args.rows)
    Path(args.out).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    print("\n\n".join(render(figures)))


if __name__ == "__main__":
    main()
