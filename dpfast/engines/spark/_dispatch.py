"""The public functions given a pyspark DataFrame: their arguments checked, then run on Spark.

Each function here takes the public function's own arguments, refuses those the Spark
engine cannot run (saying what to change), and returns a :class:`~dpfast.Release` whose
``data`` is the lazy Spark DataFrame of :mod:`dpfast.engines.spark._release`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dpfast._release import Progress, Release
from dpfast.engines.spark._methods import run_on_driver

__all__ = [
    "k_noise_frame",
    "k_pram_frame",
    "randomized_response_frame",
]


def _refuse(method: str, found: Sequence[str]) -> None:
    if found:
        raise ValueError(
            f"{method} on a Spark DataFrame does not support {', '.join(found)}; drop "
            f"{'it' if len(found) == 1 else 'them'} (the Spark engine computes no metrics and "
            "takes public bounds only), or release frame.toPandas() in memory"
        )


def _common(bounds: Any, metrics: Any, found: list[str]) -> None:
    if isinstance(bounds, str):
        found.append(f"bounds={bounds!r} (give public bounds per column)")
    if metrics:
        found.append("metrics=True")


def randomized_response_frame(
    data: Any,
    *,
    column: Hashable,
    domain: Any,
    epsilon: float | None = None,
    retention: float | None = None,
    seed: int | None = None,
    n_threads: int | None = None,
) -> Release:
    """:func:`dpfast.randomized_response` of a Spark DataFrame (passes on the executors)."""
    from dpfast.engines.rowwise import randomized_response_dataset

    return Release(
        *run_on_driver(
            randomized_response_dataset,
            data,
            column=column,
            domain=domain,
            epsilon=epsilon,
            retention=retention,
            seed=seed,
            n_threads=n_threads,
        )
    )


def k_noise_frame(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    seed: int | None = None,
    n_threads: int | None = None,
) -> Release:
    """:func:`dpfast.k_noise` of a Spark DataFrame (passes on the executors)."""
    from dpfast.engines.rowwise import k_noise_dataset

    return Release(
        *run_on_driver(k_noise_dataset, data, k=k, columns=columns, seed=seed, n_threads=n_threads)
    )


def k_pram_frame(
    data: Any,
    *,
    k: int,
    columns: Sequence[Hashable] | None = None,
    retention: float = 0.5,
    seed: int | None = None,
    n_threads: int | None = None,
) -> Release:
    """:func:`dpfast.k_pram` of a Spark DataFrame (passes on the executors)."""
    from dpfast.engines.rowwise import k_pram_dataset

    return Release(
        *run_on_driver(
            k_pram_dataset,
            data,
            k=k,
            columns=columns,
            retention=retention,
            seed=seed,
            n_threads=n_threads,
        )
    )
