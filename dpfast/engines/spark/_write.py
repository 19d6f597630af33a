"""Writing a Spark release: by the executors, into a scratch directory, published by rename."""

from __future__ import annotations

import errno
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpfast._release.dispatch import interrupt_in
from dpfast.accounting import Report
from dpfast.engines.outofcore import Progress, _publish, _scratch_beside

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["check_spark_output", "write_release"]

#: The thread's local properties that ``setJobGroup`` sets.
_JOB_GROUP = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
#: Seconds between two looks at the running job's tasks.
_POLL_SECONDS = 0.5


def write_release(
    data: DataFrame,
    output: str | os.PathLike[str],
    report: Report,
    *,
    progress: Progress | None = None,
    before_publish: Callable[[Report], None] | None = None,
    after_publish: Callable[[], None] | None = None,
) -> None:
    """Write a release frame as Parquet at ``output``, atomically.

    The executors write a dataset directory (``part-*.parquet``, one per partition, in
    row order) into a hidden scratch directory beside ``output``; ``before_publish(report)``
    runs once it is complete, then it is renamed into place and ``after_publish()`` runs.
    A failed or interrupted write leaves nothing at ``output``. On a cluster,
    ``output``'s directory must be one that the executors share with the driver.

    Raises
    ------
    ValueError
        For an ``output`` ending in ``.parquet``: Spark writes a dataset directory, one
        file per task (one file would put every row through one task; merging the
        coalesced partitions would also lose the partitions' row numbers).
    """
    target = Path(output)
    check_spark_output(target)
    with _scratch_beside(target) as scratch:
        written = scratch / "release"
        with _cancelled_if_left(data), _task_progress(data, f"writing {target.name}", progress):
            try:
                data.write.option("compression", "zstd").parquet(str(written.absolute()))
            except Exception as exc:
                stop = interrupt_in(exc) or _disk_error(exc, target)
                if stop is None:
                    raise
                raise stop from exc
        for extra in [*written.glob(".*.crc"), *written.glob("_SUCCESS")]:
            extra.unlink()
        if before_publish is not None:
            before_publish(report)
        _publish(written, target)
        if after_publish is not None:
            after_publish()


def _disk_error(exc: Exception, target: Path) -> OSError | None:
    """Return the full disk that failed a write on the executors as an ``OSError``, else None.

    The executors' Java writer fails with ``java.io.IOException: No space left on device``
    (or the quota's, or the file size limit's), which reaches Python as Spark's error text:
    the errno is found by its message, so that the caller sees an ``OSError`` it can explain.
    """
    text = str(exc)
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        if os.strerror(code) in text:
            return OSError(code, f"{os.strerror(code)} on an executor writing {str(target)!r}")
    return None


def check_spark_output(output: str | os.PathLike[str]) -> None:
    """Refuse a single-file output, which Spark does not write, naming the alternative."""
    target = Path(output)
    if target.suffix.lower() == ".parquet":
        raise ValueError(
            f"Spark writes a dataset directory (one Parquet file per task), not the single "
            f"file {str(target)!r}; name OUTPUT without the .parquet extension, e.g. "
            f"{str(target.with_suffix(''))!r}"
        )


@contextmanager
def _cancelled_if_left(frame: DataFrame) -> Iterator[None]:
    """Run the block's Spark jobs in a job group of their own, cancelled if it is left early.

    An interrupt (or any exception in this thread) would otherwise leave the write running
    on the executors, into a scratch directory that is being removed.
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
