"""Writing a Dask release: by the workers, into a scratch directory, published by rename."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dpfast.dataflow.values import Progress
from dpfast.engines.frames import GeneratedParts, plan_of, text_columns
from dpfast.engines.scratch_dirs import worker_numba_cache

__all__ = ["local_cluster", "write_dataset"]

#: Seconds between two looks at the write's tasks.
_POLL_SECONDS = 0.5


def write_dataset(data: Any, written: Path, target: Path, progress: Progress | None) -> Any:
    """Have the workers write a release frame as the dataset directory ``written``.

    ``part-000000.parquet``, ... sort in row order; a failed or interrupted write cancels its
    tasks. A frame with a write plan is written by the tasks that compute its parts (no pandas
    frame between two tasks); for the exchange's, returns each part's counts by part
    (:meth:`~dpfast.engines.outofcore.ExchangedParts.assemble_counted`), else None.
    """
    from dask.delayed import delayed

    written.mkdir()

    def path(i: int) -> str:
        return str((written / f"part-{i:06d}.parquet").absolute())

    plan = plan_of(data)
    parts, assembled = plan.generated, plan.tasks
    if assembled is not None:  # each part's table and counts, as its task assembled them
        write_counted = delayed(_write_counted, pure=False)
        tasks = [write_counted(t, counts, path(i)) for i, (t, counts) in enumerate(assembled)]
        return dict(enumerate(_run(tasks, f"writing {target.name}", progress)))
    elif parts is not None:  # each task computes its part and writes it
        name = f"dpfast-parts-{uuid.uuid4().hex}"
        state = delayed(parts, name=name, traverse=False)
        write_generated = delayed(_write_generated, pure=False)
        tasks = [write_generated(state, i, path(i)) for i in range(parts.count)]
    else:
        write = delayed(_write_part, pure=False)
        tasks = [write(part, path(i)) for i, part in enumerate(data.to_delayed())]
    _run(tasks, f"writing {target.name}", progress)
    return None


def _write_counted(
    table: pa.Table, counts: list[tuple[int, int, int]], path: str
) -> list[tuple[int, int, int]]:
    """Write an assembled part, on a worker; return its counts (they stay off the file)."""
    _write_table(table, path)
    return counts


def _write_part(part: Any, path: str) -> int:
    """Write one partition (pandas) as a Parquet file, on a worker; return its rows."""
    return _write_table(pa.Table.from_pandas(part, preserve_index=False), path)


def _write_generated(parts: GeneratedParts, part: int, path: str) -> int:
    """Compute part ``part`` of an ``ir_dp`` frame and write it, on a worker; return its rows.

    The rows :func:`_write_part` writes of partition ``part``, labels as Arrow ``string`` as
    the other engines write them (not pandas' ``large_string``), no pandas frame made or moved.
    """
    return _write_table(parts.table(part), path)


def _write_table(table: pa.Table, path: str) -> int:
    """Write ``table`` as the column engine does (zstd, text in dictionaries); return its rows."""
    table = table.replace_schema_metadata(None)
    pq.write_table(table, path, compression="zstd", use_dictionary=text_columns(table.schema))
    return int(table.num_rows)


def _run(tasks: list[Any], phase: str, progress: Progress | None) -> list[Any]:
    """Compute ``tasks`` on the current client, else Dask's default scheduler; return results.

    On a client, progress is shown and the tasks are cancelled if the block is left early.
    """
    from dask.base import compute

    client = _client()
    if client is None:
        results = list(compute(*tasks))
        if progress is not None:
            progress(phase, 1, 1)
        return results
    futures = client.compute(tasks)
    try:
        while not all(f.done() for f in futures):
            if progress is not None:
                progress(phase, sum(f.done() for f in futures), len(futures))
            time.sleep(_POLL_SECONDS)
        gathered = list(client.gather(futures))  # raises the first task's error
    except BaseException:
        client.cancel(futures)
        raise
    if progress is not None:
        progress(phase, len(futures), len(futures))
    return gathered


def _client() -> Any:
    """Return the current ``distributed.Client``, or None when Dask runs locally."""
    try:
        from distributed import get_client
    except ImportError:  # pragma: no cover - distributed is in the dask extra
        return None
    try:
        return get_client()
    except ValueError:
        return None


def local_cluster(
    n_workers: int | None = None,
    *,
    threads_per_worker: int = 1,
    numba_cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Any:
    """Return a ``distributed.LocalCluster`` of worker processes configured for dpfast.

    Parameters
    ----------
    n_workers : int, optional
        Worker processes (default: one per core).
    threads_per_worker : int
        Threads of each worker.
    numba_cache_dir : path, optional
        Numba's cache directory for the workers, created and set in their environment (and
        this process's, if unset); default: ``NUMBA_CACHE_DIR``, else this process's cache
        (Numba's default, where ``dpfast warm-up`` puts the kernels).
    **options
        More ``LocalCluster`` options.
    """
    from distributed import LocalCluster

    cache = worker_numba_cache(numba_cache_dir, local=True)
    workers = n_workers if n_workers is not None else (os.cpu_count() or 1)
    return LocalCluster(
        n_workers=workers,
        threads_per_worker=threads_per_worker,
        processes=True,
        env={} if cache is None else {"NUMBA_CACHE_DIR": cache},
        **options,
    )
