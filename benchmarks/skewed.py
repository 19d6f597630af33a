"""Utility of DP releases on skewed columns, with and without a public transform.

Measures, over seeded releases, how far each released column's mean is from the mean of
its clamped values, and the share of released values on a bound, for ``ir_dp`` (and
``mdav_dp``) without a transform, with ``log`` (``log1p``) or ``asinh``, and with the
transform at an ε so large that the noise is nil (what the grouping on the transformed
scale alone does to the mean). Quoted in docs/privacy.md#transforms.

Run: ``.venv/bin/python benchmarks/skewed.py --seeds 20 --json out.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import dpfast
from dpfast.datasets import adult

#: An ε so large that the noise is nil: the grouping on the transformed scale alone.
NOISELESS = 1e9


@dataclass(frozen=True)
class Column:
    """A skewed column and its public bounds."""

    name: str
    values: np.ndarray
    bounds: tuple[float, float]
    transform: str


def synthetic(n: int, rng: np.random.Generator) -> list[Column]:
    """Lognormal, Pareto and signed-profit columns, bounds 1,000 times the median."""
    lognormal = rng.lognormal(0.0, 1.5, n)  # median 1
    pareto = rng.pareto(1.5, n) + 1.0  # median 2 ** (1 / 1.5)
    sign = np.where(rng.random(n) < 0.3, -1.0, 1.0)
    profit = rng.lognormal(0.0, 1.5, n) * sign  # 30 % losses
    return [
        Column("lognormal (sigma 1.5)", lognormal, (0.0, 1000.0), "log"),
        Column("Pareto (alpha 1.5)", pareto, (0.0, 1000.0 * 2 ** (1 / 1.5)), "log"),
        Column("signed profit", profit, (-1000.0, 1000.0), "asinh"),
    ]


def adult_columns() -> list[Column]:
    """Adult's skewed columns, with bounds from its codebook's ranges."""
    table = adult("train", drop_missing=True)
    return [
        Column("Adult capital-gain", table["capital-gain"].to_numpy(float), (0, 99999), "log"),
        Column("Adult capital-loss", table["capital-loss"].to_numpy(float), (0, 4356), "log"),
        Column("Adult fnlwgt", table["fnlwgt"].to_numpy(float), (0, 1.5e6), "log"),
    ]


def measure(
    release: Callable[..., Any], columns: list[Column], seeds: int, **arguments: Any
) -> dict[str, dict[str, float]]:
    """Median relative error of each column's mean and mean share on a bound, over seeds."""
    frame = pd.DataFrame({c.name: c.values for c in columns})
    bounds = {c.name: c.bounds for c in columns}
    errors: dict[str, list[float]] = {c.name: [] for c in columns}
    shares: dict[str, list[float]] = {c.name: [] for c in columns}
    for seed in range(seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = release(frame, bounds=bounds, seed=seed, **arguments).data
        for c in columns:
            truth = np.clip(c.values, *c.bounds).mean()
            got = out[c.name].to_numpy(float)
            errors[c.name].append((got.mean() - truth) / abs(truth))
            shares[c.name].append(float(np.mean((got <= c.bounds[0]) | (got >= c.bounds[1]))))
    return {
        c.name: {
            "median_abs_error": float(np.median(np.abs(errors[c.name]))),
            "median_error": float(np.median(errors[c.name])),
            "on_bound": float(np.mean(shares[c.name])),
            "on_bound_input": float(np.mean((c.values <= c.bounds[0]) | (c.values >= c.bounds[1]))),
        }
        for c in columns
    }


def scenario(
    label: str,
    release: Callable[..., Any],
    columns: list[Column],
    seeds: int,
    **arguments: Any,
) -> dict[str, Any]:
    """One table and release: untransformed, transformed, and transformed without noise."""
    transforms = {c.name: c.transform for c in columns}
    start = time.perf_counter()
    rows = {
        "none": measure(release, columns, seeds, **arguments),
        "transform": measure(release, columns, seeds, transforms=transforms, **arguments),
        "transform, no noise": measure(
            release, columns, 1, transforms=transforms, **{**arguments, "epsilon": NOISELESS}
        ),
    }
    print(f"{label}: {time.perf_counter() - start:.0f} s", flush=True)
    return {"label": label, "arguments": arguments, "n_rows": len(columns[0].values), **rows}


def table(results: list[dict[str, Any]]) -> str:
    """The Markdown table of docs/privacy.md#transforms."""
    lines = [
        "| release | column | on a bound in the input | mean off, none | on a bound, none | "
        "mean off, transform | on a bound, transform | mean off, transform without noise |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for column, plain in result["none"].items():
            chosen = result["transform"][column]
            nil = result["transform, no noise"][column]
            lines.append(
                f"| {result['label']} | {column} | {plain['on_bound_input']:.1%} | "
                f"{plain['median_abs_error']:.1%} | {plain['on_bound']:.1%} | "
                f"{chosen['median_abs_error']:.1%} | {chosen['on_bound']:.1%} | "
                f"{nil['median_error']:+.1%} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--table", help="print the table of figures written before, and stop")
    args = parser.parse_args()
    if args.table:
        with open(args.table, encoding="utf-8") as saved:
            print(table(json.load(saved)))
        return
    rng = np.random.default_rng(2024)
    big = synthetic(100_000, rng)
    survey = synthetic(4092, rng)  # the size of a business survey
    results = []
    for column in big:
        results.append(
            scenario("ir_dp, n 100,000, k 50, eps 1", dpfast.ir_dp, [column], args.seeds,
                     k=50, epsilon=1.0, n_threads=1)
        )  # fmt: skip
    for column in adult_columns():
        results.append(
            scenario("ir_dp, Adult (30,162 rows), k 50, eps 1", dpfast.ir_dp, [column],
                     args.seeds, k=50, epsilon=1.0, n_threads=1)
        )  # fmt: skip
    for k in (100, 200):
        results.append(
            scenario(f"ir_dp, 3 columns, n 4,092, k {k}, eps 1", dpfast.ir_dp, survey,
                     args.seeds, k=k, epsilon=1.0, n_threads=1)
        )  # fmt: skip
    results.append(
        scenario("mdav_dp, n 100,000, k 1,000, eps 1", dpfast.mdav_dp, big[:1], args.seeds,
                 k=1000, epsilon=1.0)
    )  # fmt: skip
    print(table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
