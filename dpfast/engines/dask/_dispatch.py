"""The public functions given a Dask DataFrame: their arguments checked, then run on Dask.

Each function here takes the public function's own arguments, refuses those the Dask
engine cannot run (saying what to change), and returns a :class:`~dpfast.Release` whose
``data`` is a lazy Dask DataFrame: computed by the workers from small global state for
``ir_dp`` (column linkage, shuffled, unprotected columns dropped) and ``laplace_dp``
(unprotected columns dropped), :mod:`dpfast.engines.dask._release`; otherwise the file
that the client wrote from passes run on the workers, read back in row order
(:mod:`dpfast.engines.dask._methods`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dpfast._release import Release
from dpfast.engines.dask._methods import run_on_client

__all__ = [
    "k_noise_frame",
    "k_pram_frame",
    "randomized_response_frame",
]


def _refuse(method: str, found: Sequence[str]) -> None:
    if found:
        raise ValueError(
            f"{method} on a Dask DataFrame does not support {', '.join(found)}; drop "
            f"{'it' if len(found) == 1 else 'them'} (the Dask engine computes no metrics and "
            "takes public bounds only), or release frame.compute() in memory"
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
    """:func:`dpfast.randomized_response` of a Dask DataFrame (passes on the workers)."""
    from dpfast.engines.rowwise import randomized_response_dataset

    return Release(
        *run_on_client(
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
    """:func:`dpfast.k_noise` of a Dask DataFrame (passes on the workers)."""
    from dpfast.engines.rowwise import k_noise_dataset

    return Release(
        *run_on_client(k_noise_dataset, data, k=k, columns=columns, seed=seed, n_threads=n_threads)
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
    """:func:`dpfast.k_pram` of a Dask DataFrame (passes on the workers)."""
    from dpfast.engines.rowwise import k_pram_dataset

    return Release(
        *run_on_client(
            k_pram_dataset,
            data,
            k=k,
            columns=columns,
            retention=retention,
            seed=seed,
            n_threads=n_threads,
        )
    )
