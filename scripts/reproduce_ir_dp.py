"""Reproduce the experiments of Sánchez et al. (2016), individual-ranking DP, with dpfast.

Usage:
    python scripts/reproduce_ir_dp.py [--census PATH] [--out DIR] [--quick] [--runs N]
                                      [--seed S] [--skip-census] [--skip-adult]

Writes CSV files, PNG plots (needs matplotlib: ``pip install 'dpfast[plots]'``) and
``findings.txt`` to ``--out`` (default ``out/reproduce_ir_dp``). See docs/reproduction.md.

- Census (1,080 x 13): domain [0, 1.5 * max] per attribute, as in the paper. This domain
  is computed from the data: it is the paper's non-private convenience, used here only to
  reproduce its figures. eps in {0.1, 1, 10}, m in {1, 8, 13} (the first m attributes),
  k = 2..100. Figure 1: ir_dp vs plain Laplace (laplace_dp) vs plain individual ranking;
  Figure 3: ir_dp vs insensitive-MDAV DP (mdav_dp, the paper's calibration and the
  L1-correct one); Table 1: variance variation for m = 8, k in {2, 25, 50, 100}.
- Adult (30,162 rows): AGE and HOURS-PER-WEEK (public bounds of the bundled schema), with
  OCCUPATION and NATIVE-COUNTRY through the bundled taxonomies, k = 2..200. Figure 2:
  ir_dp vs plain Laplace / per-record exponential mechanism (ir_dp with k = 1) vs plain
  individual ranking; Figure 4: ir_dp vs mdav_dp on the two numeric attributes (every k)
  and on all four (k = 2, 5, 10, 20, ..., 200).

Every noisy result is the mean of ``--runs`` (default 10) releases. Noise is drawn from
seeded generators so that the figures are reproducible: seeded noise is for experiments
only, never for publication. Releases keep their row order (``shuffle=False``) or, for
mdav_dp, which always shuffles, the report's metrics match rows through the shuffle, so
the relative error is record-linked.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import warnings
import zlib
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dpfast  # noqa: E402
from dpfast import metrics  # noqa: E402
from dpfast.exceptions import PrivacyLeakWarning, UnprovenReleaseWarning  # noqa: E402
from dpfast.partitions.categorical import cluster_centroids  # noqa: E402

EPSILONS = (0.1, 1.0, 10.0)
CENSUS_M = (1, 8, 13)
TABLE_K = (2, 25, 50, 100)
TABLE_M = 8
ADULT_NUMERIC = ("age", "hours-per-week")
ADULT_CATEGORICAL = ("occupation", "native-country")
#: The rank group holding the remainder n mod k: the authors' rule, the last group (dpfast's
#: default is the middle one; docs/privacy.md, "Which rank group holds the remainder").
REMAINDER = "last"
SEEDED = (
    "Noise is drawn from seeded generators so that these figures are reproducible; "
    "seeded noise is for experiments only, never for publication."
)

Row = dict[str, Any]


def _seed(base: int, *parts: Any) -> int:
    """Derive a distinct, reproducible seed for one release."""
    return (base * 1_000_003 + zlib.crc32("|".join(map(str, parts)).encode())) % (2**62)


def _log(start: float, message: str) -> None:
    print(f"[{time.perf_counter() - start:7.1f} s] {message}", flush=True)


def _summary(rows: list[Row], key: dict[str, Any], values: dict[str, list[float]]) -> None:
    for metric, series in values.items():
        array = np.asarray(series, dtype=np.float64)
        rows.append(
            {
                **key,
                "metric": metric,
                "mean": float(array.mean()),
                "std": float(array.std()),
                "runs": array.shape[0],
            }
        )


def _report_metrics(release: dpfast.Release) -> dict[str, Any]:
    result: dict[str, Any] = release.private.metrics
    return result


def _repeat(
    runs: int, release: Callable[[int], dpfast.Release], attributes: Iterable[str] = ()
) -> dict[str, list[float]]:
    """Run a release ``runs`` times; collect the mean RE, JSD and VV (and per attribute)."""
    attributes = list(attributes)
    values: dict[str, list[float]] = {"re": [], "jsd": []}
    for run in range(runs):
        report = _report_metrics(release(run))
        values["re"].append(report["mean_relative_error"])
        values["jsd"].append(report["mean_jensen_shannon"])
        for name in attributes:
            values.setdefault(f"re:{name}", []).append(report["relative_error"][name])
            values.setdefault(f"jsd:{name}", []).append(report["jensen_shannon"][name])
            if name in report["variance_variation"]:
                values.setdefault(f"vv:{name}", []).append(report["variance_variation"][name])
    return values


# -- Census ------------------------------------------------------------------------------


def census_bounds(census: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """The paper's domain [0, 1.5 * max]: computed from the data, so NOT private."""
    bounds = {name: (0.0, 1.5 * float(census[name].max())) for name in census.columns}
    # The same convention as dpfast's bounds="data", which warns that it leaks; the warning
    # is expected here and recorded rather than raised.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PrivacyLeakWarning)
        check = dpfast.ir_dp(census, k=census.shape[0], epsilon=1.0, bounds="data", seed=0)
    assert any(issubclass(w.category, PrivacyLeakWarning) for w in caught)
    derived = check.report.parameters["bounds"]
    for name, (lower, upper) in bounds.items():
        assert np.isclose(derived[name][0], lower) and np.isclose(derived[name][1], upper)
    return bounds


def census_release(
    method: str,
    data: pd.DataFrame,
    domain: dict[str, tuple[float, float]],
    epsilon: float,
    k: int | None,
    base_seed: int,
    run: int,
) -> dpfast.Release:
    """One seeded Census release with metrics in its report (rows matched, not shuffled)."""
    m = data.shape[1]
    if method == "laplace_dp":
        return dpfast.laplace_dp(
            data,
            epsilon=epsilon,
            bounds=domain,
            metrics=True,
            seed=_seed(base_seed, "census", "laplace", m, epsilon, run),
        )
    assert k is not None
    if method == "ir_dp":
        return _record_linked(
            data,
            k=k,
            epsilon=epsilon,
            bounds=domain,
            shuffle=False,
            metrics=True,
            seed=_seed(base_seed, "census", "ir_dp", m, epsilon, k, run),
        )
    calibration = method.removeprefix("mdav_dp_")
    return _paper_mdav(
        data,
        k=k,
        epsilon=epsilon,
        bounds=domain,
        calibration=calibration,
        metrics=True,
        seed=_seed(base_seed, "census", "mdav", m, epsilon, k, run),
    )


def run_census(
    census: pd.DataFrame, ks: list[int], runs: int, seed: int, start: float
) -> tuple[list[Row], list[Row]]:
    bounds = census_bounds(census)
    print(
        "Census domain: [0, 1.5 * max] per attribute, as in the paper. These bounds are "
        "computed from the data: the paper's NON-PRIVATE convenience (dpfast's "
        "bounds='data' would warn with PrivacyLeakWarning), used only to reproduce its "
        "figures. A real release needs public bounds.",
        flush=True,
    )
    curves: list[Row] = []
    table: list[Row] = []
    names = list(census.columns)
    for m in CENSUS_M:
        data = census[names[:m]]
        domain = {name: bounds[name] for name in data.columns}
        for k in ks:
            released = dpfast.individual_ranking(data, k=k, remainder=REMAINDER).data
            _summary(
                curves,
                {
                    "dataset": "census",
                    "method": "individual_ranking",
                    "m": m,
                    "epsilon": "",
                    "k": k,
                    "attribute": "all",
                },
                {
                    "re": [metrics.relative_error(data, released, domain)],
                    "jsd": [metrics.jensen_shannon(data, released, domain)],
                },
            )
        for epsilon in EPSILONS:
            values = _repeat(
                runs, partial(census_release, "laplace_dp", data, domain, epsilon, None, seed)
            )
            _summary(
                curves,
                {
                    "dataset": "census",
                    "method": "laplace_dp",
                    "m": m,
                    "epsilon": epsilon,
                    "k": "",
                    "attribute": "all",
                },
                values,
            )
            for k in ks:
                table_row = m == TABLE_M and k in TABLE_K
                attributes = list(data.columns) if table_row else []
                for method in ("ir_dp", "mdav_dp_as_published", "mdav_dp_l1"):
                    values = _repeat(
                        runs,
                        partial(census_release, method, data, domain, epsilon, k, seed),
                        attributes,
                    )
                    key = {
                        "dataset": "census",
                        "method": method,
                        "m": m,
                        "epsilon": epsilon,
                        "k": k,
                    }
                    _summary(
                        curves,
                        {**key, "attribute": "all"},
                        {"re": values["re"], "jsd": values["jsd"]},
                    )
                    for name in attributes:
                        _summary(table, {**key, "attribute": name}, {"vv": values[f"vv:{name}"]})
            _log(start, f"census m={m} epsilon={epsilon:g}: {len(ks)} values of k")
    return curves, table


# -- Adult -------------------------------------------------------------------------------


def plain_categorical_ir(values: pd.Series, taxonomy: dpfast.Taxonomy, k: int) -> np.ndarray:
    """Noise-free categorical individual ranking: each rank group gets its centroid.

    The last group holds the remainder (:data:`REMAINDER`, the default of
    ``broadcast_rank_groups``).
    """
    codes = taxonomy.encode(values)
    n_groups = codes.shape[0] // k
    order = np.argsort(np.asarray(taxonomy.rank)[codes], kind="stable")
    labels = np.empty(codes.shape[0], dtype=np.int64)
    labels[order] = np.minimum(np.arange(codes.shape[0]) // k, n_groups - 1)
    centroids = cluster_centroids(taxonomy, codes, labels, n_groups)
    out = taxonomy.broadcast_rank_groups(codes, k, centroids)
    return np.asarray(taxonomy.domain, dtype=object)[out]


def run_adult(ks: list[int], runs: int, seed: int, start: float) -> list[Row]:
    adult = dpfast.datasets.adult(drop_missing=True)
    data = adult[list(ADULT_NUMERIC + ADULT_CATEGORICAL)]
    numeric = data[list(ADULT_NUMERIC)]
    taxonomies = {name: dpfast.datasets.adult_taxonomy(name) for name in ADULT_CATEGORICAL}
    # Public bounds from the bundled schema (CPS top codes), not from the data.
    bounds = {"age": (17.0, 90.0), "hours-per-week": (1.0, 99.0)}
    print(
        f"Adult: {len(data)} rows; public bounds {bounds}; taxonomies for "
        f"{list(ADULT_CATEGORICAL)}.",
        flush=True,
    )
    names = list(data.columns)
    rows: list[Row] = []
    mixed_ks = [k for k in ks if k in (2, 5) or k % 10 == 0] if len(ks) > 10 else ks

    def add(
        method: str,
        epsilon: Any,
        k: Any,
        values: dict[str, list[float]],
        attributes: list[str],
        m: int,
    ) -> None:
        key = {"dataset": "adult", "method": method, "m": m, "epsilon": epsilon, "k": k}
        _summary(rows, {**key, "attribute": "all"}, {"re": values["re"], "jsd": values["jsd"]})
        for name in attributes:
            _summary(
                rows,
                {**key, "attribute": name},
                {"re": values[f"re:{name}"], "jsd": values[f"jsd:{name}"]},
            )

    for k in ks:
        released = dpfast.individual_ranking(numeric, k=k, remainder=REMAINDER).data.copy()
        for name in ADULT_CATEGORICAL:
            released[name] = plain_categorical_ir(data[name], taxonomies[name], k)
        released = released[names]
        re = metrics.relative_error(data, released, bounds, taxonomies=taxonomies, per_column=True)
        jsd = metrics.jensen_shannon(data, released, bounds, per_column=True)
        assert isinstance(re, dict) and isinstance(jsd, dict)
        values = {
            "re": [float(np.mean(list(re.values())))],
            "jsd": [float(np.mean(list(jsd.values())))],
        }
        for name in names:
            values[f"re:{name}"], values[f"jsd:{name}"] = [re[name]], [jsd[name]]
        add("individual_ranking", "", k, values, names, len(names))
    _log(start, f"adult individual ranking: {len(ks)} values of k")
    for epsilon in EPSILONS:
        # k = 1: plain Laplace on the numeric attributes and the per-record exponential
        # mechanism on the categorical ones, each with the same budget share epsilon / 4.
        values = _repeat(
            runs,
            lambda run, eps=epsilon: _record_linked(
                data,
                k=1,
                epsilon=eps,
                bounds=bounds,
                taxonomies=taxonomies,
                shuffle=False,
                metrics=True,
                seed=_seed(seed, "adult", "laplace", eps, run),
            ),
            names,
        )
        add("laplace_em (ir_dp k=1)", epsilon, "", values, names, len(names))
        for k in ks:
            values = _repeat(
                runs,
                lambda run, k=k, eps=epsilon: _record_linked(
                    data,
                    k=k,
                    epsilon=eps,
                    bounds=bounds,
                    taxonomies=taxonomies,
                    shuffle=False,
                    metrics=True,
                    seed=_seed(seed, "adult", "ir_dp", eps, k, run),
                ),
                names,
            )
            add("ir_dp", epsilon, k, values, names, len(names))
            # Figure 4, top: the two numeric attributes, every k; ir_dp on the same two for
            # a like-for-like comparison.
            values = _repeat(
                runs,
                lambda run, k=k, eps=epsilon: _record_linked(
                    numeric,
                    k=k,
                    epsilon=eps,
                    bounds=bounds,
                    shuffle=False,
                    metrics=True,
                    seed=_seed(seed, "adult", "ir_dp_numeric", eps, k, run),
                ),
                ADULT_NUMERIC,
            )
            add("ir_dp_numeric", epsilon, k, values, list(ADULT_NUMERIC), 2)
            values = _repeat(
                runs,
                lambda run, k=k, eps=epsilon: _paper_mdav(
                    numeric,
                    k=k,
                    epsilon=eps,
                    bounds=bounds,
                    calibration="as_published",
                    metrics=True,
                    seed=_seed(seed, "adult", "mdav", eps, k, run),
                ),
                ADULT_NUMERIC,
            )
            add("mdav_dp_as_published", epsilon, k, values, list(ADULT_NUMERIC), 2)
            if k in mixed_ks:
                # Figure 4, bottom: all four attributes (categorical centroids by the
                # exponential mechanism), on a coarser grid of k: mixed-data insensitive
                # MDAV costs about 0.1 s a release.
                values = _repeat(
                    runs,
                    lambda run, k=k, eps=epsilon: _paper_mdav(
                        data,
                        k=k,
                        epsilon=eps,
                        bounds=bounds,
                        taxonomies=taxonomies,
                        calibration="as_published",
                        metrics=True,
                        seed=_seed(seed, "adult", "mdav4", eps, k, run),
                    ),
                    names,
                )
                add("mdav_dp_as_published", epsilon, k, values, names, len(names))
        _log(start, f"adult epsilon={epsilon:g}: {len(ks)} values of k")
    return rows


# -- output ------------------------------------------------------------------------------


def write_csv(path: Path, rows: list[Row]) -> None:
    if not rows:
        return
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def read_rows(path: Path) -> list[Row]:
    """Read a CSV written by :func:`write_csv` back, blanks kept as empty strings."""
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    rows: list[Row] = frame.to_dict("records")
    for row in rows:
        for key in ("m", "k", "runs"):
            if row.get(key, "") != "":
                row[key] = int(row[key])
        for key in ("epsilon", "mean", "std"):
            if row.get(key, "") != "":
                row[key] = float(row[key])
    return rows


def _series(frame: pd.DataFrame, **where: Any) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for column, value in where.items():
        mask &= (frame[column].astype(str) == str(value)).to_numpy()
    return frame[mask]


STYLE = {
    "ir_dp": ("IR-DP (ir_dp)", "C0", "-"),
    "ir_dp_numeric": ("IR-DP (ir_dp)", "C0", "-"),
    "laplace_dp": ("plain Laplace", "C3", "--"),
    "laplace_em (ir_dp k=1)": ("plain Laplace / EM (k = 1)", "C3", "--"),
    "individual_ranking": ("individual ranking, no noise (not DP)", "C2", ":"),
    "mdav_dp_as_published": ("insensitive MDAV DP (paper's scale)", "C1", "-"),
    "mdav_dp_l1": ("insensitive MDAV DP (L1-correct scale)", "C4", "-."),
}


def plot_grid(
    frame: pd.DataFrame,
    path: Path,
    title: str,
    methods: list[str],
    rows: list[tuple[str, dict[str, Any]]],
    metric_names: tuple[str, ...],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_rows, n_cols = len(rows) * len(metric_names), len(EPSILONS)
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(3.3 * n_cols, 2.3 * n_rows), squeeze=False, sharex=True
    )
    for r, (row_label, where) in enumerate(rows):
        for j, metric in enumerate(metric_names):
            i = r * len(metric_names) + j
            for c, epsilon in enumerate(EPSILONS):
                ax = axes[i][c]
                for method in methods:
                    label, color, style = STYLE[method]
                    eps = "" if method == "individual_ranking" else epsilon
                    part = _series(
                        frame, method=method, epsilon=eps, metric=metric, attribute="all", **where
                    )
                    if part.empty:
                        continue
                    if (part["k"].astype(str) == "").all():
                        ax.axhline(
                            float(part["mean"].iloc[0]), color=color, ls=style, lw=1.2, label=label
                        )
                    else:
                        ks = part["k"].astype(int).to_numpy()
                        ax.plot(
                            ks, part["mean"].to_numpy(), color=color, ls=style, lw=1.2, label=label
                        )
                ax.set_yscale("log")
                ax.grid(True, which="major", alpha=0.3)
                if i == 0:
                    ax.set_title(f"ε = {epsilon:g}", fontsize=9)
                if c == 0:
                    ax.set_ylabel(f"{metric.upper()}  {row_label}", fontsize=8)
                if i == n_rows - 1:
                    ax.set_xlabel("k", fontsize=8)
                ax.tick_params(labelsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06 if n_rows > 2 else 0.1, 1, 0.97))
    fig.savefig(path, dpi=80)
    plt.close(fig)


def variance_table(table: list[Row]) -> pd.DataFrame:
    frame = pd.DataFrame(table)
    frame["column"] = frame["method"] + " ε=" + frame["epsilon"].map(lambda e: f"{e:g}")
    wide = frame.pivot_table(index=["k", "attribute"], columns="column", values="mean", sort=False)
    order = [
        f"{method} ε={e:g}"
        for e in EPSILONS
        for method in ("ir_dp", "mdav_dp_as_published", "mdav_dp_l1")
    ]
    return wide[[c for c in order if c in wide.columns]]


def census_findings(frame: pd.DataFrame) -> list[str]:
    lines = []
    re = _series(frame, dataset="census", metric="re", attribute="all")
    ir = re[re["method"] == "ir_dp"]
    laplace = re[re["method"] == "laplace_dp"].set_index(["m", "epsilon"])["mean"]
    worse = [
        f"(m={r.m}, eps={r.epsilon:g}, k={r.k}: {r.mean:.4g} vs {laplace[(r.m, r.epsilon)]:.4g})"
        for r in ir.itertuples()
        if int(r.k) > 1 and not r.mean < laplace[(r.m, r.epsilon)]
    ]
    lines.append(
        f"1. IR-DP has lower RE than plain Laplace for every k > 1: "
        f"{'HOLDS' if not worse else 'FAILS at ' + ', '.join(worse[:10])} "
        f"(of {len(ir)} (m, epsilon, k) points)."
    )
    jsd = _series(frame, dataset="census", metric="jsd", attribute="all")
    ir_jsd = jsd[jsd["method"] == "ir_dp"]
    laplace_jsd = jsd[jsd["method"] == "laplace_dp"].set_index(["m", "epsilon"])["mean"]
    for (m, epsilon), part in ir_jsd.groupby(["m", "epsilon"], sort=False):
        lose = sorted(int(r.k) for r in part.itertuples() if not r.mean < laplace_jsd[(m, epsilon)])
        if lose:
            lines.append(
                f"   JSD: m={m} eps={epsilon:g}: IR-DP's JSD is not below plain "
                f"Laplace's for k in {lose[0]}..{lose[-1]} ({len(lose)} values)"
            )
    lines.append("2. RE of IR-DP against k (mean of runs):")
    ks = sorted(set(ir["k"].astype(int)))
    shown = [k for k in (2, 5, 10, 25, 50, 75, 100) if k in ks]
    for (m, epsilon), part in ir.groupby(["m", "epsilon"], sort=False):
        series = part.set_index(part["k"].astype(int))["mean"]
        cells = "  ".join(f"k={k}: {series[k]:.4g}" for k in shown)
        best = int(series.idxmin())
        lines.append(f"   m={m:>2} eps={epsilon:<4g} {cells}   (minimum at k={best})")
    mdav = re[re["method"] == "mdav_dp_as_published"].set_index(["m", "epsilon", "k"])["mean"]
    mdav_l1 = re[re["method"] == "mdav_dp_l1"].set_index(["m", "epsilon", "k"])["mean"]
    for m in CENSUS_M:
        part = ir[ir["m"] == m]
        lose = [
            (r.epsilon, r.k) for r in part.itertuples() if not r.mean < mdav[(r.m, r.epsilon, r.k)]
        ]
        lose_l1 = [
            (r.epsilon, r.k)
            for r in part.itertuples()
            if not r.mean < mdav_l1[(r.m, r.epsilon, r.k)]
        ]
        verdict = "beats" if not lose else f"does not beat at {len(lose)} of {len(part)} points"
        lines.append(
            f"3. m={m:>2}: IR-DP {verdict} insensitive MDAV DP (paper's scale)"
            + (f", e.g. (eps, k) = {lose[:6]}" if lose else "")
            + f"; against the L1-correct scale it loses at {len(lose_l1)} points."
        )
    return lines


def _record_linked(data: Any, **kwargs: Any) -> Any:
    """The paper's record-linked ``ir_dp`` (NOT proven DP), whose utility the paper reports."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnprovenReleaseWarning)
        return dpfast.ir_dp(data, linkage="records", remainder=REMAINDER, **kwargs)


def _paper_mdav(data: Any, **kwargs: Any) -> Any:
    """``mdav_dp``, whose ``calibration="as_published"`` spends more than asked (reported)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "calibration=", PrivacyLeakWarning)
        return dpfast.mdav_dp(data, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--census",
        type=Path,
        default=ROOT.parent / "shared" / "data" / "census" / "census.csv",
        help="path of census.csv (default: ../shared/data/census/census.csv)",
    )
    parser.add_argument("--out", type=Path, default=Path("out") / "reproduce_ir_dp")
    parser.add_argument(
        "--quick", action="store_true", help="a few values of k and 3 runs (under 2 minutes)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="releases averaged per point (default 10, 3 with --quick)",
    )
    parser.add_argument("--seed", type=int, default=2016, help="base seed (experiments only)")
    parser.add_argument("--skip-census", action="store_true")
    parser.add_argument("--skip-adult", action="store_true")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument(
        "--plot-only",
        action="store_true",
        help="redraw plots and findings from the CSV files already in --out",
    )
    args = parser.parse_args(argv)
    runs = args.runs or (3 if args.quick else 10)
    census_ks = [2, 5, 10, 25, 50, 75, 100] if args.quick else list(range(2, 101))
    adult_ks = [2, 10, 50, 100, 200] if args.quick else list(range(2, 201))
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(SEEDED, flush=True)
    print(f"runs per point: {runs}; output: {args.out}", flush=True)

    frames = []
    findings = [
        SEEDED,
        f"runs per point: {runs}; census k: {census_ks[0]}..{census_ks[-1]} "
        f"({len(census_ks)} values); adult k: {adult_ks[0]}..{adult_ks[-1]} "
        f"({len(adult_ks)} values)",
        "",
    ]
    if not args.skip_census:
        if args.plot_only:
            curves = read_rows(args.out / "census_curves.csv")
            table = read_rows(args.out / "census_variance_variation.csv")
        else:
            census = pd.read_csv(args.census)
            curves, table = run_census(census, census_ks, runs, args.seed, start)
            write_csv(args.out / "census_curves.csv", curves)
            write_csv(args.out / "census_variance_variation.csv", table)
        frame = pd.DataFrame(curves)
        frames.append(frame)
        wide = variance_table(table)
        wide.to_csv(args.out / "census_table1.csv", float_format="%.4g")
        findings += census_findings(frame)
        findings += [
            "",
            f"Table 1 (variance variation, m = {TABLE_M}, mean of runs):",
            wide.to_string(float_format=lambda v: f"{v:.3g}"),
        ]
        if not args.no_plots:
            rows = [(f"m={m}", {"m": m}) for m in CENSUS_M]
            base = ["ir_dp", "laplace_dp", "individual_ranking"]
            versus = ["ir_dp", "mdav_dp_as_published", "mdav_dp_l1", "individual_ranking"]
            census_frame = _series(frame, dataset="census")
            for metric in ("re", "jsd"):
                plot_grid(
                    census_frame,
                    args.out / f"census_fig1_{metric}.png",
                    f"Census: {metric.upper()} of IR-DP, plain Laplace and individual "
                    "ranking (Figure 1)",
                    base,
                    rows,
                    (metric,),
                )
                plot_grid(
                    census_frame,
                    args.out / f"census_fig3_{metric}.png",
                    f"Census: {metric.upper()} of IR-DP and insensitive MDAV DP (Figure 3)",
                    versus,
                    rows,
                    (metric,),
                )
        _log(start, "census done")
    if not args.skip_adult:
        if args.plot_only:
            rows_adult = read_rows(args.out / "adult_curves.csv")
        else:
            rows_adult = run_adult(adult_ks, runs, args.seed, start)
            write_csv(args.out / "adult_curves.csv", rows_adult)
        frame = pd.DataFrame(rows_adult)
        frames.append(frame)
        if not args.no_plots:
            plot_grid(
                frame,
                args.out / "adult_fig2.png",
                "Adult (age, hours, occupation, native-country): IR-DP, plain "
                "Laplace/EM, individual ranking (Figure 2)",
                ["ir_dp", "laplace_em (ir_dp k=1)", "individual_ranking"],
                [("4 attr.", {"m": 4})],
                ("re", "jsd"),
            )
            plot_grid(
                frame,
                args.out / "adult_fig4.png",
                "Adult: IR-DP and insensitive MDAV DP (Figure 4); top: age and "
                "hours-per-week, bottom: with occupation and native-country",
                ["ir_dp_numeric", "ir_dp", "mdav_dp_as_published"],
                [("2 attr.", {"m": 2}), ("4 attr.", {"m": 4})],
                ("re", "jsd"),
            )
        _log(start, "adult done")
    total = time.perf_counter() - start
    findings += [
        "",
        f"total time: {total:.0f} s" + (" (redrawn from the CSV files)" if args.plot_only else ""),
    ]
    (args.out / "findings.txt").write_text("\n".join(findings) + "\n", encoding="utf-8")
    print("\n".join(findings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
