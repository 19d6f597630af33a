"""Writing a Dask release: by the workers, into a scratch directory, published by rename."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dpfast.accounting import Report
from dpfast.engines.base import Progress
from dpfast.engines.outofcore import GeneratedParts, generated_parts, publish_at, scratch_beside
from dpfast.exceptions import DPFastValueError

__all__ = ["check_dask_output", "local_cluster", "write_release"]

#: Seconds between two looks at the write's tasks.
_POLL_SECONDS = 0.5


def write_release(
    data: Any,
    output: str | os.PathLike[str],
    report: Report,
    *,
    progress: Progress | None = None,
    before_publish: Callable[[Report], None] | None = None,
    after_publish: Callable[[], None] | None = None,
) -> None:
    """Write a release frame as Parquet at ``output``, atomically.

    The workers write a dataset directory (``part-000000.parquet``, ..., one per
    partition, names sorting in row order; a frame that
    :func:`dpfast.engines.dask.ir_dp_dask` returned, untransformed, is written by the
    tasks that compute its parts: the same rows, without a pandas frame between two
    tasks) into a hidden scratch directory beside ``output``; ``before_publish(report)``
    runs once it is complete, then it is renamed into place and ``after_publish()`` runs.
    A failed or interrupted write cancels its tasks and leaves nothing at ``output``.
    With a cluster, ``output``'s directory must be one the workers share with the client.

    Raises
    ------
    ValueError
        For an ``output`` ending in ``.parquet``: the workers write a dataset directory.
    """
    from dask.delayed import delayed

    target = Path(output)
    check_dask_output(target)
    parts = generated_parts(data)
    with scratch_beside(target) as scratch:
        written = scratch / "release"
        written.mkdir()

        def path(i: int) -> str:
            return str((written / f"part-{i:06d}.parquet").absolute())

        if parts is not None:  # an ir_dp frame: each task computes its part and writes it
            name = f"dpfast-ir-dp-parts-{uuid.uuid4().hex}"
            state = delayed(parts, name=name, traverse=False)
            write_generated = delayed(_write_generated, pure=False)
            tasks = [write_generated(state, i, path(i)) for i in range(parts.count)]
        else:
            write = delayed(_write_part, pure=False)
            tasks = [write(part, path(i)) for i, part in enumerate(data.to_delayed())]
        _run(tasks, f"writing {target.name}", progress)
        if before_publish is not None:
            before_publish(report)
        publish_at(written, target)
        if after_publish is not None:
            after_publish()


def check_dask_output(output: str | os.PathLike[str]) -> None:
    """Refuse a single-file output, which the workers do not write, naming the alternative."""
    target = Path(output)
    if target.suffix.lower() == ".parquet":
        raise DPFastValueError(
            f"Dask writes a dataset directory (one Parquet file per partition), not the single "
            f"file {str(target)!r}; name OUTPUT without the .parquet extension, e.g. "
            f"{str(target.with_suffix(''))!r}"
        )


def _write_part(part: Any, path: str) -> int:
    """Write one partition (pandas) as a Parquet file, on a worker; return its rows."""
    return _write_table(pa.Table.from_pandas(part, preserve_index=False), path)


def _write_generated(parts: GeneratedParts, part: int, path: str) -> int:
    """Compute part ``part`` of an ``ir_dp`` frame and write it, on a worker; return its rows.

    The rows of :func:`_write_part` of the frame's partition ``part`` (labels as Arrow
    ``string``, as the other engines write them, not pandas' ``large_string``), without
    the pandas frame between two tasks (and its move when they run on different workers).
    """
    return _write_table(parts.table(part), path)


def _write_table(table: pa.Table, path: str) -> int:
    """Write ``table`` as a Parquet file at ``path``; return its rows.

    As the column engine writes: zstd, with a dictionary for text columns only (released
    numbers are near-random, so a dictionary costs time and saves nothing).
    """
    table = table.replace_schema_metadata(None)
    text = [f.name for f in table.schema if not _is_number(f.type)]
    pq.write_table(table, path, compression="zstd", use_dictionary=text)
    return int(table.num_rows)


def _is_number(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))


def _run(tasks: list[Any], phase: str, progress: Progress | None) -> None:
    """Compute ``tasks`` on the current distributed client, else on Dask's default scheduler.

    On a client, progress is shown and the tasks are cancelled if the block is left early.
    """
    from dask.base import compute

    client = _client()
    if client is None:
        compute(*tasks)
        if progress is not None:
            progress(phase, 1, 1)
        return
    futures = client.compute(tasks)
    try:
        while not all(f.done() for f in futures):
            if progress is not None:
                progress(phase, sum(f.done() for f in futures), len(futures))
            time.sleep(_POLL_SECONDS)
        client.gather(futures)  # raises the first task's error
    except BaseException:
        client.cancel(futures)
        raise
    if progress is not None:
        progress(phase, len(futures), len(futures))


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
        Numba's cache directory for the workers; default: ``NUMBA_CACHE_DIR`` if set, else
        ``dpfast-numba`` in the temporary directory. It is created, and set in this
        process's environment (if unset), which the workers inherit.
    **options
        More ``LocalCluster`` options.
    """
    from distributed import LocalCluster

    cache = os.fspath(
        numba_cache_dir
        or os.environ.get("NUMBA_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "dpfast-numba")
    )
    os.makedirs(cache, exist_ok=True)
    os.environ.setdefault("NUMBA_CACHE_DIR", cache)
    workers = n_workers if n_workers is not None else (os.cpu_count() or 1)
    return LocalCluster(
        n_workers=workers,
        threads_per_worker=threads_per_worker,
        processes=True,
        env={"NUMBA_CACHE_DIR": cache},
        **options,
    )
