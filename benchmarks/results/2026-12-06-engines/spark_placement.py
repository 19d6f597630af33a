"""The Spark sort job with its ranges placed two ways, in one session, alternating.

``repartitionById(ranges, "range")`` (the engine's way), against ``repartition(ranges,
"range")`` by hash with each range's index mapped to a preimage tag first (the engine's
way before pyspark 4.1's ``repartitionById``; the tags are found with Spark's own
``hash()``). Both run ``SparkSource.sort_ranges`` on 10M random 40-bit keys in 8
partitions, cut into 8 ranges, on ``local[2]``; the reductions must be equal.

Usage: ``python spark_placement.py [REPS]`` (default 10); prints the medians of all runs
but the first of each way, and the pair ratios. The dpfast imported is the one on
``PYTHONPATH``.
"""

import statistics
import sys
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dpfast.dataflow.sorted_ranges import Ranges
from dpfast.engines.spark import SparkSource, local_session

spark = local_session("local[2]")
values = np.random.default_rng(1).integers(0, 1 << 40, 10_000_000)
frame = spark.createDataFrame(pa.table({"v": values})).repartition(8).cache()
frame.count()
cuts = np.linspace(0, 1 << 40, 9).astype(np.uint64)
ranges = Ranges(cuts[:-1].copy(), cuts[1:].copy())


def keys(array, first_row):
    return np.asarray(array).astype(np.uint64)


def reduce(index, ordered):
    return int(ordered.shape[0]), int(ordered[0]), int(ordered[-1])


BY_ID = DataFrame.repartitionById
TAGS: dict[int, list[int]] = {}


def tags_of(parts):
    """The smallest int that Spark's hash partitioning sends to each of ``parts``."""
    if parts not in TAGS:
        hashed = F.pmod(F.hash(F.col("id").cast("int")), F.lit(parts)).alias("p")
        first: dict[int, int] = {}
        for i, p in spark.range(64 * parts).select("id", hashed).toArrow().to_pylist():
            first.setdefault(p, i)
        TAGS[parts] = [first[p] for p in range(parts)]
    return TAGS[parts]


def by_tags(self, parts, column):
    pairs = [x for i, tag in enumerate(tags_of(parts)) for x in (F.lit(i), F.lit(tag))]
    return self.withColumn(column, F.create_map(*pairs)[F.col(column)]).repartition(parts, column)


source = SparkSource(frame)
times: dict[str, list[float]] = {"id": [], "tags": []}
results = {}
for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    for way in ("tags", "id") if rep % 2 else ("id", "tags"):
        DataFrame.repartitionById = BY_ID if way == "id" else by_tags
        start = time.perf_counter()
        got = source.sort_ranges("v", 1 << 20, keys, ranges, 40, reduce)
        times[way].append(time.perf_counter() - start)
        assert results.setdefault(way, got) == got
DataFrame.repartitionById = BY_ID
print("equal", results["id"] == results["tags"], "ranges", len(results["id"]))
for way, seconds in times.items():
    print(way, f"median {statistics.median(seconds[1:]):.3f}", [round(s, 2) for s in seconds])
ratios = [a / b for a, b in zip(times["id"][1:], times["tags"][1:], strict=True)]
print(
    "id/tags pair ratios", [round(r, 3) for r in ratios], f"median {statistics.median(ratios):.3f}"
)
