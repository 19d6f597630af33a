"""DiffGen on Dask over adult340.parquet through the CLI: wall time, driver bytes, peaks.

Usage: ``python dask_diffgen.py LABEL`` (2 worker processes of one thread); prints one
JSON line. The dpfast imported is the one on ``PYTHONPATH``.
"""

import glob
import json
import resource
import sys
import time
import warnings

from distributed import Client, LocalCluster

import dpfast
from dpfast import cli

SCHEMA = "/work/main/dpfast/datasets/adult_diffgen.schema.json"


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="6GiB")
    client = Client(cluster)
    out = f"/tmp/dgbench/dask-out-{sys.argv[1]}"
    release = ["release", "diffgen", "/tmp/dgbench/adult340.parquet", "--schema", SCHEMA]
    options = ["--target", "income", "--steps", "10", "--epsilon", "1", "--seed", "3"]
    engine = ["--memory-limit", "1GiB", "--engine", "dask"]
    engine += ["--scheduler", cluster.scheduler_address]
    started = time.perf_counter()
    code = cli.main([*release, *options, *engine, "-o", out, "--quiet"])
    wall = time.perf_counter() - started
    with open(glob.glob(out + "*private*")[0]) as file:
        work = json.load(file).get("work", {})
    workers = client.run(_peak)
    found = {
        "label": sys.argv[1],
        "exit": code,
        "wall_s": round(wall, 2),
        "driver_bytes": work.get("driver_bytes"),
        "tasks": work.get("tasks"),
        "client_peak_bytes": _peak(),
        "worker_peak_bytes": sorted(workers.values()),
        "dpfast": dpfast.__file__,
    }
    print(json.dumps(found))
    client.close()
    cluster.close()
