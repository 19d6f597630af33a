"""Dask benchmark of issue 16: dpfast's ir_dp on Dask against the naive Dask job.

``python benchmarks/dask_engine.py --data DIR --workers 2 --job dpfast --json OUT.json``
starts a ``LocalCluster`` of ``--workers`` worker processes (one thread each) and runs one
job on the Parquet dataset ``DIR`` (``benchmarks/outofcore.py gen``; columns in [0, 1000]):

``dpfast``
    ``dpfast.ir_dp`` over ``DaskSource.from_parquet(DIR)``, every column, written by the
    workers to ``output``.
``dpfast-shuffle``
    ``dpfast.laplace_dp`` over ``DaskSource.from_parquet(DIR)``, every column but the last
    protected, the last copied unprotected in a keyed permutation (``unprotected=
    "shuffle"``), written by the workers to ``output``.
``naive``
    Plain Dask doing the job without dpfast: per column Dask's general sort
    (``sort_values``), ranks, group means with Laplace noise from numpy (NOT a secure
    source: a speed baseline only, never to be published), mapped back to the rows and
    written with ``to_parquet``.

The JSON holds the wall seconds, the CPU seconds of the client and of each worker
during the job, the client's peak RSS and every worker's peak RSS (sampled every half
second with ``client.run``), in bytes, and the workers' task seconds by kind of task
(Dask's task stream: the compute time of every task, summed by the task's name prefix,
and the time spent fetching its inputs from other workers, as ``transfer PREFIX``).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

LOWER, UPPER = 0.0, 1000.0


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _cpu() -> float:
    """Seconds of CPU this process (a worker) has used, its own threads' and children's."""
    import psutil

    times = psutil.Process().cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Peaks:
    """Every worker's peak RSS, sampled every half second while the block runs."""

    def __init__(self, client: Any) -> None:
        self.client, self.peaks = client, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            try:
                found = self.client.run(_rss)
            except Exception:  # a worker going away between two looks
                continue
            for worker, rss in found.items():
                self.peaks[worker] = max(self.peaks.get(worker, 0), rss)

    def __enter__(self) -> _Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _dpfast(data: Path, out: Path, k: int, epsilon: float, memory_limit: str) -> Any:
    """Release ``data`` on the cluster into ``out``; return the private report's ``work``."""
    import dpfast
    from dpfast.engines.dask import DaskSource

    source = DaskSource.from_parquet(data)
    bounds = {name: (LOWER, UPPER) for name in source.names}
    release = dpfast.ir_dp(
        source, k=k, epsilon=epsilon, bounds=bounds, seed=1, memory_limit=memory_limit, output=out
    )
    return release.private.to_dict().get("work")


def _dpfast_shuffle(data: Path, out: Path, k: int, epsilon: float, memory_limit: str) -> Any:
    """Release ``data`` with ``laplace_dp``, its last column shuffled; return ``work``."""
    import dpfast
    from dpfast.engines.dask import DaskSource

    source = DaskSource.from_parquet(data)
    protected = source.names[:-1]
    release = dpfast.laplace_dp(
        source, epsilon=epsilon, bounds={name: (LOWER, UPPER) for name in protected},
        columns=protected, unprotected="shuffle", seed=1, memory_limit=memory_limit, output=out,
    )  # fmt: skip
    return release.private.to_dict().get("work")


def _naive(data: Path, out: Path, k: int, epsilon: float, memory_limit: str) -> Any:
    import dask.dataframe as dd

    frame = dd.read_parquet(str(data))
    columns = list(frame.columns)
    scale = (UPPER - LOWER) / k / (epsilon / len(columns))
    for c in columns:
        ranked = frame[[c]].sort_values(c)
        ranked = ranked.assign(g=(ranked[c].notnull().astype("int64").cumsum() - 1) // k)
        means = ranked.groupby("g")[c].mean().compute()
        noisy = means + np.random.default_rng(1).laplace(0.0, scale, len(means))
        noisy = noisy.clip(LOWER, UPPER)
        released = ranked[["g"]].map_partitions(_mapped_back, c, noisy, meta={c: "float64"})
        released.to_parquet(str(out / c), write_index=False)


def _mapped_back(part: Any, name: str, noisy: Any) -> Any:
    """Return the rows of a partition of the sorted column, each its group's noisy mean."""
    import pandas as pd

    return pd.DataFrame({name: noisy.reindex(part["g"]).to_numpy()})


def _task_seconds(records: list[dict[str, Any]]) -> dict[str, float]:
    """Return the compute and transfer seconds of the task stream's tasks, by name prefix."""
    from dask.utils import key_split

    seconds: dict[str, float] = {}
    for record in records:
        name = key_split(record["key"])
        for part in record.get("startstops", ()):
            if part["action"] in ("compute", "transfer"):
                label = name if part["action"] == "compute" else f"transfer {name}"
                seconds[label] = seconds.get(label, 0.0) + part["stop"] - part["start"]
    return {name: round(s, 2) for name, s in sorted(seconds.items(), key=lambda i: -i[1])}


_JOBS = {"dpfast": _dpfast, "dpfast-shuffle": _dpfast_shuffle, "naive": _naive}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--job", choices=tuple(_JOBS), required=True)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument(
        "--memory-limit",
        default="1GiB",
        help="dpfast's memory limit (the client's, and a sort task's): a column of at most "
        "LIMIT / 32 values is sorted whole by one task (default 1GiB, the engine's)",
    )
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)

    from distributed import Client, get_task_stream

    from dpfast.engines.dask import local_cluster

    out = Path(tempfile.mkdtemp(prefix="dask-bench-", dir=args.data.parent))
    try:
        with (
            local_cluster(args.workers, dashboard_address=":0") as cluster,
            Client(cluster) as client,
        ):
            with _Peaks(client) as peaks, get_task_stream(client) as stream:
                workers_before, client_before = client.run(_cpu), _own_cpu()
                start = time.perf_counter()
                job = _JOBS[args.job]
                work = job(args.data, out / "release", args.k, args.epsilon, args.memory_limit)
                seconds = time.perf_counter() - start
                client_cpu = _own_cpu() - client_before
                workers_after = client.run(_cpu)
            worker_cpu = sorted(
                workers_after[w] - workers_before.get(w, 0.0) for w in workers_after
            )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    result = {
        "job": args.job,
        "data": str(args.data),
        "workers": args.workers,
        "k": args.k,
        "epsilon": args.epsilon,
        "memory_limit": args.memory_limit if args.job != "naive" else None,
        "seconds": round(seconds, 2),
        "client_cpu_seconds": round(client_cpu, 2),
        "worker_cpu_seconds": [round(c, 2) for c in worker_cpu],
        "client_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "worker_peak_rss": sorted(peaks.peaks.values()),
        "task_seconds": _task_seconds(stream.data),
        "work": work,  # dpfast's counters (docs/scale.md#counters); None for the naive job
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
