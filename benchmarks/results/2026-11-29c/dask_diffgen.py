"""diffgen on Dask, 2 workers of one thread, over adult340.parquet (the CLI): wall, driver bytes, peaks."""
import glob, json, resource, sys, time, warnings
warnings.simplefilter("ignore")
import dpfast
from dpfast import cli
from distributed import Client, LocalCluster

if __name__ == "__main__":
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="6GiB")
    client = Client(cluster)
    out = f"/tmp/dgbench/dask-out-{sys.argv[1]}"
    args = ["release", "diffgen", "/tmp/dgbench/adult340.parquet", "--schema",
            "/work/main/dpfast/datasets/adult_diffgen.schema.json", "--target", "income", "--steps", "10",
            "--epsilon", "1", "--seed", "3", "--memory-limit", "1GiB", "-o", out, "--quiet",
            "--engine", "dask", "--scheduler", cluster.scheduler_address]
    t = time.perf_counter()
    code = cli.main(args)
    wall = time.perf_counter() - t
    private = json.load(open(glob.glob(out + "*private*")[0]))
    work = private.get("work", {})
    workers = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    print(json.dumps({"label": sys.argv[1], "exit": code, "wall_s": round(wall, 2), "driver_bytes": work.get("driver_bytes"),
                      "tasks": work.get("tasks"), "client_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "worker_peak_bytes": sorted(workers.values()), "dpfast": dpfast.__file__}))
    client.close(); cluster.close()
