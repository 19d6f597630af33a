"""Engines: where a release's work runs (docs/engines.md).

The in-memory engine is the public functions themselves (``dpfast.ir_dp`` and the others).
The out-of-core engine (:mod:`dpfast.engines.outofcore`) runs a release over a Parquet
dataset larger than memory, column by column and part by part, with the same kernels,
keys and ledger, so that a seeded release is the same on both: every random draw is keyed
by what it is for (a column, a rank group, a bucket of a permutation), never by how the
data was split. The Spark engine (:mod:`dpfast.engines.spark`) runs a release's passes
and writes its output on Spark executors; the public functions send a pyspark DataFrame
there (:data:`SPARK_RELEASES`); the Dask engine (:mod:`dpfast.engines.dask`) does the same
for a Dask DataFrame on Dask's workers (:data:`DASK_RELEASES`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["DASK_RELEASES", "SPARK_RELEASES", "dask_release", "parse_memory", "spark_release"]

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_memory(text: str) -> int:
    """Return the bytes of a size such as ``"4GiB"``, ``"512MiB"``, ``"2GB"`` or ``"1e9"``.

    Examples
    --------
    >>> parse_memory("4GiB"), parse_memory("1.5 GB"), parse_memory("64MiB")
    (4294967296, 1500000000, 67108864)
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"cannot read {text!r} as a memory size; write a number and a unit, e.g. 4GiB, "
            "512MiB or 2GB"
        )
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"the memory size must be positive, got {text!r}")
    return value


#: The Spark release of each public function that runs on Spark, by the function's name:
#: a function of :mod:`dpfast.engines.spark` taking the public function's arguments. A
#: method joins with one line here, and two at the top of its public function
#: (``if is_spark_frame(data): return on_spark("name", locals())``, from dpfast._release).
SPARK_RELEASES = {
    "ir_dp": "ir_dp_frame",
    "laplace_dp": "laplace_dp_frame",
    "individual_ranking": "individual_ranking_frame",
    "randomized_response": "randomized_response_frame",
    "k_noise": "k_noise_frame",
    "k_pram": "k_pram_frame",
    "mdav_dp": "mdav_dp_frame",
    "diffgen": "diffgen_frame",
}


def spark_release(method: str) -> Callable[..., Any]:
    """Return the Spark release of public function ``method``, refusing one that has none."""
    if method not in SPARK_RELEASES:
        runs = ", ".join(sorted(SPARK_RELEASES))
        raise TypeError(
            f"{method} does not run on Spark (these do: {runs}); release frame.toPandas() in "
            "memory, or use one of them"
        )
    from dpfast.engines import spark

    function: Callable[..., Any] = getattr(spark, SPARK_RELEASES[method])
    return function


#: The Dask release of each public function that runs on Dask, by the function's name, as
#: :data:`SPARK_RELEASES` (``if is_dask_frame(data): return on_dask("name", locals())``).
DASK_RELEASES = {
    "ir_dp": "ir_dp_frame",
    "laplace_dp": "laplace_dp_frame",
    "individual_ranking": "individual_ranking_frame",
    "randomized_response": "randomized_response_frame",
    "k_noise": "k_noise_frame",
    "k_pram": "k_pram_frame",
    "mdav_dp": "mdav_dp_frame",
    "diffgen": "diffgen_frame",
}


def dask_release(method: str) -> Callable[..., Any]:
    """Return the Dask release of public function ``method``, refusing one that has none."""
    if method not in DASK_RELEASES:
        runs = ", ".join(sorted(DASK_RELEASES))
        raise TypeError(
            f"{method} does not run on Dask (these do: {runs}); release frame.compute() in "
            "memory, or use one of them"
        )
    from dpfast.engines import dask

    function: Callable[..., Any] = getattr(dask, DASK_RELEASES[method])
    return function
