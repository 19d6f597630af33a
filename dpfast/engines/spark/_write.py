"""Writing a Spark release: by the executors, into a scratch directory, published by rename."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import pickle
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dpfast.dataflow.sorted_ranges import WORKER_BUFFERS
from dpfast.dataflow.values import Progress
from dpfast.engines.frames import ExchangedParts, GeneratedParts, plan_of, text_columns
from dpfast.engines.spark._exchange import received
from dpfast.engines.spark._rows import collected, quietly
from dpfast.exceptions import DPFastOSError, DPFastRuntimeError, interrupt_in

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["write_dataset"]

#: The thread's local properties that ``setJobGroup`` sets.
_JOB_GROUP = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
#: The names of the executors' temporary files of an ``ir_dp`` frame's parts.
_TEMPORARY = ".dpfast-part-*"
#: The rows of the tasks writing an exchange: each part's rows and pickled counts.
_COUNTED = "part long, rows long, counts binary"
#: Seconds between two looks at the running job's tasks.
_POLL_SECONDS = 0.5


def write_dataset(data: DataFrame, written: Path, target: Path, progress: Progress | None) -> Any:
    """Have the executors write a release frame as the dataset directory ``written``.

    ``part-*.parquet`` in row order, by Spark's writer, or part by part with pyarrow for a
    frame of rank groups (task ``p`` writes part ``p``: :func:`_write_part`) or a ranked
    exchange (the pieces, shuffled by part, are assembled: :func:`_write_assembled`, whose
    counts are returned). Spark's checksums and marker are removed. A full disk on an
    executor is an ``OSError``; a cancelled job, the interrupt.
    """
    counts = None
    with _cancelled_if_left(data), _task_progress(data, f"writing {target.name}", progress):
        plan = plan_of(data)  # the pieces: a function returning them, shuffled by part
        parts, exchanged, pieces = plan.generated, plan.exchanged, plan.tasks
        try:
            if exchanged is not None and exchanged.ranked and pieces is not None:
                found = _write_by_tasks(pieces(), _write_assembled, _COUNTED, exchanged, written)
                counts = {int(part): pickle.loads(counted) for part, _, counted in found}
            elif parts is None:
                data.write.option("compression", "zstd").parquet(str(written.absolute()))
            else:
                tasks = data.sparkSession.range(parts.count, numPartitions=parts.count)
                _write_by_tasks(tasks, _write_part, "part long, rows long", parts, written)
        except Exception as exc:
            stop = interrupt_in(exc) or _disk_error(exc, target)
            if stop is None:
                raise
            raise stop from exc
    for extra in [*written.glob(".*.crc"), *written.glob("_SUCCESS"), *written.glob(_TEMPORARY)]:
        extra.unlink()  # Spark's checksums and marker; a killed attempt's temporary
    return counts


def _write_by_tasks(
    tasks: DataFrame,
    write: Callable[..., Iterator[pa.RecordBatch]],
    schema: str,
    parts: GeneratedParts | ExchangedParts,
    directory: Path,
) -> list[tuple[Any, ...]]:
    """Have each task of ``tasks`` ``write`` its parts into ``directory``; return their rows.

    Rows of ``schema``, each a part's number and rows first (checked: :func:`_check_parts`).
    """
    directory.mkdir()
    task = functools.partial(write, parts=parts, directory=str(directory.absolute()))
    with quietly():
        planned = tasks.mapInArrow(task, schema)
    found = collected(planned)
    _check_parts({int(row[0]): int(row[1]) for row in found}, parts.count, parts.n)
    return found


def _write_assembled(
    batches: Iterable[pa.RecordBatch], parts: ExchangedParts, directory: str
) -> Iterator[pa.RecordBatch]:
    """Assemble and write the parts whose pieces this task received (on an executor)."""
    for part, payloads in received(batches):
        table, counts = parts.assemble_counted(part, payloads)
        _write_file(table, directory, part)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([part], pa.int64()),
                pa.array([table.num_rows], pa.int64()),
                pa.array([pickle.dumps(counts)], pa.binary()),
            ],
            names=["part", "rows", "counts"],
        )


def _write_file(table: pa.Table, directory: str, part: int) -> None:
    """Write ``part-{part:06d}.parquet`` as the column engine does: zstd, dictionaries for text.

    Through a temporary file renamed into place: a retried or speculative attempt writes
    the same bytes, and a killed one leaves only its temporary, removed before publishing.
    """
    final = os.path.join(directory, f"part-{part:06d}.parquet")
    temporary = os.path.join(directory, f".dpfast-part-{part:06d}-{uuid.uuid4().hex}")
    text = text_columns(table.schema)
    try:
        pq.write_table(table, temporary, compression="zstd", use_dictionary=text)
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def _check_parts(rows: dict[int, int], count: int, n: int) -> None:
    """Refuse a write whose parts did not all arrive with their rows."""
    if sorted(rows) != list(range(count)) or sum(rows.values()) != n:
        raise DPFastRuntimeError(
            f"the executors wrote {len(rows)} of {count} parts ({sum(rows.values())} of "
            f"{n} rows); nothing was published"
        )


def _write_part(
    batches: Iterable[pa.RecordBatch], parts: GeneratedParts, directory: str
) -> Iterator[pa.RecordBatch]:
    """Write this task's parts (on an executor); yield each part's number and rows.

    The float columns' values are computed into one buffer of the worker's
    (:data:`~dpfast.dataflow.sorted_ranges.WORKER_BUFFERS`), taken back by its next part: fresh
    memory costs a page fault per page (docs/engines.md, "Memory pages"). The buffer
    goes back only once the part's table is written and dropped; a failed part drops it.
    """
    words = parts.most_words()
    for batch in batches:
        for part in batch.column(0).to_pylist():
            buffer = WORKER_BUFFERS.take(words)
            WORKER_BUFFERS.clear()  # the sort buffers that did not serve
            table = parts.table(part, buffer)
            rows = table.num_rows
            _write_file(table, directory, part)
            del table  # the buffer's views: none is left when it goes back
            WORKER_BUFFERS.give(buffer)
            yield pa.RecordBatch.from_arrays(
                [pa.array([part], pa.int64()), pa.array([rows], pa.int64())],
                names=["part", "rows"],
            )


def _disk_error(exc: Exception, target: Path) -> OSError | None:
    """Return the full disk that failed a write on the executors as an ``OSError``, else None.

    Spark's error text for ``java.io.IOException: No space left on device`` (or the quota's,
    or the file size limit's) has no errno: it is found by its message.
    """
    text = str(exc)
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        if os.strerror(code) in text:
            return DPFastOSError(
                code, f"{os.strerror(code)} on an executor writing {str(target)!r}"
            )
    return None


@contextmanager
def _cancelled_if_left(frame: DataFrame) -> Iterator[None]:
    """Run the block's Spark jobs in a job group of their own, cancelled if it is left early.

    An interrupt (or any exception in this thread) would otherwise leave the write running on
    the executors, into a scratch directory being removed.
    """
    context = frame.sparkSession.sparkContext
    saved = {key: context.getLocalProperty(key) for key in _JOB_GROUP}
    group = f"dpfast-write-{uuid.uuid4().hex}"
    context.setJobGroup(group, "dpfast: writing a release", interruptOnCancel=True)
    try:
        yield
    except BaseException:
        context.cancelJobGroup(group)
        raise
    finally:  # the caller's job group, if any, is this thread's again
        for key, value in saved.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]


@contextmanager
def _task_progress(frame: DataFrame, phase: str, progress: Progress | None) -> Iterator[None]:
    """Call ``progress(phase, tasks done, tasks)`` every half second while the block runs."""
    if progress is None:
        yield
        return
    tracker = frame.sparkSession.sparkContext.statusTracker()
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(_POLL_SECONDS):
            done, total = _tasks(tracker)
            if total:
                progress(phase, done, total)

    poller = threading.Thread(target=poll, name="dpfast-spark-progress", daemon=True)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()
    progress(phase, 1, 1)


def _tasks(tracker: Any) -> tuple[int, int]:
    """Return the tasks done and the tasks of the stages running now."""
    done = total = 0
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return done, total
