"""The quick tier: one case per hot path, each timed against a same-run baseline.

A case builds its input once (untimed), then alternates baseline and dpfast calls, so that
both see the same load; its *ratio* is ``median(baseline seconds) / median(dpfast
seconds)``: a 2x slowdown of dpfast halves it. Its *memory multiple* is the peak extra
resident memory of one dpfast call (input excluded, output and temporaries included),
measured in a separate process, over the size of the input (for a sampler: of the array
it draws). The quick tier only calls dpfast's public API; the baselines are the ones of
the full benchmark files, imported from them.

Run it with ``scripts/bench --quick`` (pytest-benchmark, ``benchmarks/bench_quick.py``).
``python benchmarks/quick.py memory CASE`` prints one case's memory figure as JSON.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
for _path in (HERE, HERE.parent / "scripts"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

if os.environ.get("DPFAST_BENCH_REVISION"):
    # bench-compare runs a revision through PYTHONPATH. The current checkout's editable
    # install adds a finder that would supply any module the revision lacks from the
    # checkout instead; without it, every dpfast module comes from the revision.
    sys.meta_path[:] = [
        finder
        for finder in sys.meta_path
        if not getattr(finder, "__module__", "").startswith("__editable__")
    ]

import dpfast  # noqa: E402
from dpfast import noise  # noqa: E402

EPSILON = 1.0


@dataclass(frozen=True)
class Case:
    """One hot path: build the input, run dpfast, run the baseline, check the result."""

    id: str
    name: str
    baseline_name: str
    setup: Callable[[], Any]
    dpfast: Callable[[Any], Any]
    baseline: Callable[[Any], Any]
    input_bytes: Callable[[Any], int]
    check: Callable[[Any, Any], None] = field(default=lambda state, result: None)
    teardown: Callable[[Any], None] = field(default=lambda state: None)
    rounds: int = 9


# -- ir_dp, numeric and categorical --------------------------------------------------


def _ir_dp_numeric_setup():
    data = np.random.default_rng(0).normal(50.0, 15.0, size=(500_000, 5))
    return {"data": data, "bounds": {j: (0.0, 100.0) for j in range(5)}, "rng": _rng()}


def _ir_dp_numeric(state):
    return dpfast.ir_dp(state["data"], k=10, epsilon=EPSILON, bounds=state["bounds"]).data


def _ir_dp_numeric_baseline(state):
    import bench_ir_dp

    return bench_ir_dp.numpy_ir_dp(state["data"], 10, EPSILON, 0.0, 100.0, state["rng"])


def _categorical_setup():
    import pandas as pd

    from dpfast.datasets import adult, adult_taxonomy

    counts = adult("train", drop_missing=True)["native-country"].value_counts()
    values = _rng().choice(counts.index.to_numpy(), 2_000_000, p=(counts / counts.sum()).to_numpy())
    frame = pd.DataFrame({"country": pd.Categorical(values)})
    taxonomy = adult_taxonomy("native-country")
    return {"frame": frame, "taxonomy": taxonomy, "rng": _rng()}


def _categorical(state):
    return dpfast.ir_dp(
        state["frame"],
        k=10,
        epsilon=EPSILON,
        taxonomies={"country": state["taxonomy"]},
        sensitivity="paper",
        linkage="records",
        shuffle=False,
    ).data


def _categorical_baseline(state):
    import bench_categorical

    return bench_categorical.numpy_categorical(
        state["frame"]["country"], state["taxonomy"], 10, EPSILON, state["rng"]
    )


def _categorical_bytes(state):
    return 8 * len(state["frame"])  # the int64 codes the release works on


# -- noise samplers ------------------------------------------------------------------

T = 2**40 + 12345  # as bench_noise: not a power of two, so the uniform step rejects


def _key():
    return noise.NoiseSource.from_seed(0).key("bench", "quick")


def _laplace_setup():
    return {"key": _key(), "n": 2_000_000, "rng": _rng()}


def _laplace(state):
    return noise.discrete_laplace(state["key"], T, state["n"], n_threads=1)


def _laplace_baseline(state):
    return state["rng"].laplace(0.0, float(T), state["n"])


def _count_noise_setup():
    return {"key": _key(), "counts": np.zeros(5_000_000, dtype=np.int64), "rng": _rng()}


def _count_noise(state):
    return noise.add_count_noise(state["key"], state["counts"], 0.5, n_threads=1)[0]


def _count_noise_baseline(state):
    counts = state["counts"]
    rng = state["rng"]
    q = 1.0 - np.exp(-0.5)
    noisy = counts + rng.geometric(q, counts.shape[0]) - rng.geometric(q, counts.shape[0])
    return np.maximum(noisy, 0)


def _permutation_setup():
    return {"key": _key(), "n": 3_000_000, "rng": _rng()}


def _permutation(state):
    return noise.permutation(state["key"], state["n"])


def _permutation_baseline(state):
    return state["rng"].permutation(state["n"])


# -- MDAV and insensitive MDAV --------------------------------------------------------


def _mdav_setup():
    return {"data": np.random.default_rng(1).normal(50.0, 15.0, size=(10_000, 8))}


def _mdav(state):
    return dpfast.mdav(state["data"], k=10).data


def _mdav_baseline(state):
    import bench_mdav

    labels = bench_mdav.numpy_mdav(state["data"], 10)
    sums = np.zeros((labels.max() + 1, state["data"].shape[1]))
    np.add.at(sums, labels, state["data"])
    return sums[labels] / np.bincount(labels)[labels, None]


def _mdav_dp_setup():
    data = np.random.default_rng(4).normal(50.0, 15.0, size=(200_000, 8))
    return {"data": data, "bounds": {j: (0.0, 100.0) for j in range(8)}, "rng": _rng()}


def _mdav_dp(state):
    return dpfast.mdav_dp(state["data"], k=10, epsilon=EPSILON, bounds=state["bounds"]).data


def numpy_insensitive_mdav(data, k, epsilon, lower, upper, rng):
    """A NumPy yardstick for insensitive MDAV's fast path: the same kinds of passes.

    Clamp, order the records by their distance to the two extreme corners of the bounds
    (one argsort per corner, groups of k taken alternately from each end), cluster means,
    Laplace noise per cluster and column, broadcast back, shuffle. Not the same partition.
    """
    n, m = data.shape
    clamped = np.clip(data, lower, upper)
    n_clusters = n // k
    labels = np.full(n, -1, dtype=np.int64)
    orders = [
        np.argsort(((clamped - corner) ** 2).sum(axis=1), kind="stable")
        for corner in (lower, upper)
    ]
    taken = np.zeros(n, dtype=bool)
    heads = [0, 0]
    for cluster in range(n_clusters):
        side = cluster % 2
        order = orders[side]
        head = heads[side]
        chosen = []
        while len(chosen) < k and head < n:
            row = order[head]
            head += 1
            if not taken[row]:
                chosen.append(row)
        heads[side] = head
        taken[chosen] = True
        labels[chosen] = cluster
    labels[~taken] = n_clusters - 1
    sizes = np.bincount(labels, minlength=n_clusters)
    means = (
        np.stack(
            [np.bincount(labels, weights=clamped[:, j], minlength=n_clusters) for j in range(m)], 1
        )
        / sizes[:, None]
    )
    scale = m * (upper - lower) / (k * epsilon)
    noisy = np.clip(means + rng.laplace(0.0, scale, means.shape), lower, upper)
    return noisy[labels][rng.permutation(n)]


def _mdav_dp_baseline(state):
    return numpy_insensitive_mdav(state["data"], 10, EPSILON, 0.0, 100.0, state["rng"])


# -- DiffGen --------------------------------------------------------------------------


def _diffgen_setup():
    import diffgen_common as common

    return {"frame": common.scale_adult(common.adult_complete(), 100_000)}


def _diffgen(state):
    import diffgen_common as common

    return dpfast.diffgen(
        state["frame"],
        target=common.TARGET,
        epsilon=1.0,
        steps=15,
        taxonomies=common.taxonomies(),
        bounds=common.BOUNDS,
        classes=common.CLASSES,
        seed=1,
    ).counts


def _diffgen_baseline(state):
    import bench_diffgen

    return bench_diffgen.numpy_rescan(state["frame"], 15)


def _frame_bytes(state):
    return int(state["frame"].memory_usage(deep=True).sum())


# -- mechanisms -----------------------------------------------------------------------


def _column_setup():
    return {"column": np.random.default_rng(0).normal(50.0, 15.0, 4_000_000), "rng": _rng()}


def _k_noise(state):
    return dpfast.k_noise(state["column"].reshape(-1, 1), k=10, seed=1).data


def _k_noise_baseline(state):
    import bench_mechanisms

    rng = state["rng"]
    return bench_mechanisms.numpy_k_noise(state["column"], 10, lambda n: rng.uniform(-1, 1, n))[0]


def _k_pram_setup():
    return {"column": np.random.default_rng(0).normal(50.0, 15.0, 1_000_000), "rng": _rng()}


def _k_pram(state):
    return dpfast.k_pram(state["column"].reshape(-1, 1), k=10, seed=1).data


def _k_pram_baseline(state):
    import bench_mechanisms

    rng = state["rng"]

    def draws(n, sizes):
        return rng.random(n) < 0.5, rng.integers(0, sizes)

    return bench_mechanisms.numpy_k_pram(state["column"], 10, 0.5, draws)[0]


DOMAIN = [f"c{i:02d}" for i in range(12)]


def _rr_setup():
    import pandas as pd

    codes = np.random.default_rng(1).integers(0, len(DOMAIN), 5_000_000)
    frame = pd.DataFrame({"c": pd.Categorical.from_codes(codes, categories=DOMAIN)})
    return {"frame": frame, "rng": _rng()}


def _rr(state):
    return dpfast.randomized_response(
        state["frame"], column="c", domain=DOMAIN, epsilon=1.0, seed=1
    ).data


def _rr_baseline(state):
    import bench_mechanisms

    rng = state["rng"]
    growth = np.exp(1.0)
    retention = (growth - 1) / (growth - 1 + len(DOMAIN))

    def draws(n, m):
        return rng.random(n) < retention, rng.integers(0, m, n)

    return bench_mechanisms.numpy_randomized_response(state["frame"], DOMAIN, retention, draws)


# -- the CLI round trip on Parquet ---------------------------------------------------

CLI_SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "hours": {"type": "float", "bounds": [0, 100]},
    }
}


def _cli_setup():
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 300_000
    frame = pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.uniform(0, 150_000, n),
            "hours": rng.uniform(0, 100, n),
        }
    )
    directory = Path(tempfile.mkdtemp(prefix="dpfast-quick-cli-"))
    frame.to_parquet(directory / "in.parquet", index=False)
    (directory / "schema.json").write_text(json.dumps(CLI_SCHEMA), encoding="utf-8")
    return {"dir": directory, "rng": _rng(), "bytes": int(frame.memory_usage().sum())}


def _cli(state):
    from dpfast.cli import main

    directory = state["dir"]
    argv = ["release", "ir-dp", str(directory / "in.parquet"), "-o", str(directory / "out.parquet")]
    argv += ["--k", "10", "--epsilon", "1", "--schema", str(directory / "schema.json"), "--quiet"]
    code = main([*argv, "--force"])  # each round writes the same output again
    if code != 0:
        raise RuntimeError(f"dpfast release ir-dp exited with {code}")
    return code


def _cli_baseline(state):
    import bench_ir_dp
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = state["dir"]
    table = pq.read_table(directory / "in.parquet")
    data = np.column_stack(
        [table.column(name).to_numpy().astype(np.float64) for name in CLI_SCHEMA["columns"]]
    )
    released = np.empty_like(data)
    for j, spec in enumerate(CLI_SCHEMA["columns"].values()):
        lower, upper = spec["bounds"]
        released[:, j] = bench_ir_dp.numpy_ir_dp(
            data[:, [j]], 10, EPSILON, lower, upper, state["rng"]
        )[:, 0]
    out = pa.table({name: released[:, j] for j, name in enumerate(CLI_SCHEMA["columns"])})
    pq.write_table(out, directory / "out-numpy.parquet")
    return released


def _rng():
    return np.random.default_rng(1)


def _nbytes(key):
    return lambda state: int(state[key].nbytes)


def _draws_bytes(state):
    return 8 * state["n"]


#: Rounds per case: about 3 seconds of alternating baseline and dpfast calls each.
ROUNDS = {
    "ir_dp_numeric": 9,
    "ir_dp_categorical": 9,
    "discrete_laplace": 11,
    "count_noise": 9,
    "permutation": 11,
    "mdav": 7,
    "insensitive_mdav": 7,
    "diffgen": 7,
    "k_noise": 15,
    "k_pram": 11,
    "randomized_response": 15,
    "cli_parquet": 11,
}

CASES = {
    case.id: replace(case, rounds=ROUNDS[case.id])
    for case in [
        Case(
            "ir_dp_numeric",
            "ir_dp numeric 500k x 5",
            "numpy pipeline",
            _ir_dp_numeric_setup,
            _ir_dp_numeric,
            _ir_dp_numeric_baseline,
            _nbytes("data"),
            lambda state, result: _same_shape(result, state["data"].shape),
        ),
        Case(
            "ir_dp_categorical",
            "ir_dp categorical 2M, 41 leaves",
            "numpy/pandas pipeline",
            _categorical_setup,
            _categorical,
            _categorical_baseline,
            _categorical_bytes,
            lambda state, result: _same_shape(result, state["frame"].shape),
        ),
        Case(
            "discrete_laplace",
            "discrete laplace 2M draws",
            "numpy Generator.laplace",
            _laplace_setup,
            _laplace,
            _laplace_baseline,
            _draws_bytes,
            lambda state, result: _same_shape(result, (state["n"],)),
        ),
        Case(
            "count_noise",
            "count noise eps=0.5, 5M",
            "numpy geometric difference",
            _count_noise_setup,
            _count_noise,
            _count_noise_baseline,
            _nbytes("counts"),
            lambda state, result: _same_shape(result, state["counts"].shape),
        ),
        Case(
            "permutation",
            "permutation 3M",
            "numpy Generator.permutation",
            _permutation_setup,
            _permutation,
            _permutation_baseline,
            _draws_bytes,
            lambda state, result: _same_shape(result, (state["n"],)),
        ),
        Case(
            "mdav",
            "mdav 10k x 8",
            "numpy MDAV",
            _mdav_setup,
            _mdav,
            _mdav_baseline,
            _nbytes("data"),
            lambda state, result: _same_shape(result, state["data"].shape),
        ),
        Case(
            "insensitive_mdav",
            "insensitive mdav_dp 200k x 8",
            "numpy yardstick",
            _mdav_dp_setup,
            _mdav_dp,
            _mdav_dp_baseline,
            _nbytes("data"),
            lambda state, result: _same_shape(result, state["data"].shape),
        ),
        Case(
            "diffgen",
            "diffgen adult 100k steps=15",
            "numpy rescan",
            _diffgen_setup,
            _diffgen,
            _diffgen_baseline,
            _frame_bytes,
        ),
        Case(
            "k_noise",
            "k_noise 4M",
            "numpy (PCG64)",
            _column_setup,
            _k_noise,
            _k_noise_baseline,
            _nbytes("column"),
            lambda state, result: _same_shape(result, (state["column"].shape[0], 1)),
        ),
        Case(
            "k_pram",
            "k_pram 1M",
            "numpy (PCG64)",
            _k_pram_setup,
            _k_pram,
            _k_pram_baseline,
            _nbytes("column"),
            lambda state, result: _same_shape(result, (state["column"].shape[0], 1)),
        ),
        Case(
            "randomized_response",
            "randomized_response 5M, 12 categories",
            "numpy (PCG64)",
            _rr_setup,
            _rr,
            _rr_baseline,
            lambda state: 8 * len(state["frame"]),
            lambda state, result: _same_shape(result, state["frame"].shape),
        ),
        Case(
            "cli_parquet",
            "cli ir-dp parquet 300k x 3",
            "pyarrow + numpy pipeline",
            _cli_setup,
            _cli,
            _cli_baseline,
            lambda state: state["bytes"],
            teardown=lambda state: shutil.rmtree(state["dir"], ignore_errors=True),
        ),
    ]
}


def _same_shape(result, shape):
    assert tuple(result.shape) == tuple(shape), f"got shape {result.shape}, expected {shape}"


# -- measuring ------------------------------------------------------------------------


def ratio_of_rounds(dpfast_s: list[float], baseline_s: list[float]) -> float:
    """Median over the rounds of ``baseline seconds / dpfast seconds``.

    Each round times the baseline then dpfast back to back, so a round's two figures share
    the machine's load; the median of the per-round ratios is steadier than the ratio of
    the two medians when the load changes during the case.
    """
    return statistics.median(b / d for b, d in zip(baseline_s, dpfast_s, strict=True))


def time_case(case: Case, state: Any, rounds: int | None = None) -> dict[str, Any]:
    """Warm up, then alternate baseline and dpfast ``rounds`` times; return the times."""
    result = case.dpfast(state)  # warm-up: compile or load the kernels
    case.check(state, result)
    case.baseline(state)
    ours, theirs = [], []
    for _ in range(rounds or case.rounds):
        start = time.perf_counter()
        case.baseline(state)
        theirs.append(time.perf_counter() - start)
        start = time.perf_counter()
        case.dpfast(state)
        ours.append(time.perf_counter() - start)
    return {"dpfast_s": ours, "baseline_s": theirs, "ratio": ratio_of_rounds(ours, theirs)}


def _status(field_name: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field_name):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field_name} not in /proc/self/status")


def _memory_here(name: str) -> dict[str, float]:
    case = CASES[name]
    state = case.setup()
    case.dpfast(state)  # warm-up, freed before the measured call
    gc.collect()
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")  # reset the peak-RSS counter (VmHWM) to the current RSS
    result = case.dpfast(state)
    peak = _status("VmHWM")
    del result
    size = case.input_bytes(state)
    case.teardown(state)
    return {
        "input_bytes": size,
        "peak_extra_bytes": peak - before,
        "multiple": (peak - before) / size,
    }


def measure_memory(name: str) -> dict[str, float]:
    """One case's peak extra RSS over its input size, from a fresh process.

    ``MALLOC_MMAP_THRESHOLD_`` makes every large block its own mapping, so memory freed by
    the warm-up call goes back to the system and the measured call's peak is its own; Arrow
    allocates through the same ``malloc`` (its default mimalloc pool keeps freed memory).
    """
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", ARROW_DEFAULT_MEMORY_POOL="system")
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "memory", name],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"memory probe of {name!r} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "memory":
        print(json.dumps(_memory_here(sys.argv[2])))
    elif len(sys.argv) >= 2 and sys.argv[1] == "time":
        for name in sys.argv[2:] or list(CASES):
            case = CASES[name]
            state = case.setup()
            got = time_case(case, state)
            case.teardown(state)
            print(
                f"{name:<40} dpfast {statistics.median(got['dpfast_s']):8.4f} s  "
                f"baseline {statistics.median(got['baseline_s']):8.4f} s  "
                f"ratio {got['ratio']:7.2f}",
                flush=True,
            )
    else:
        sys.exit("usage: python benchmarks/quick.py memory CASE | time [CASE...]")
