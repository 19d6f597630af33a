"""Totals of a batch function over a column, added where the batches are read.

A pass whose results are added up (a histogram, counts) need not send the driver a result a
batch. A source that runs its batches elsewhere overrides ``add_column(name, batch_rows,
fn)``: each task adds its batches' results into a :class:`Partial`, the workers add partials
:data:`~dpfast.dataflow.flow.FAN` at a time until at most ``FAN`` remain, and those come
back (:func:`totals`) for :func:`~dpfast.dataflow.flow.column_total` to add. From a source
that reads its batches here (the default ``add_column``), each batch's result is a partial of
its own, added as it comes.

Results are numbers, NumPy arrays or tuples of them, added exactly (integers): the total does
not depend on the order of the additions, the partitioning or retries. A batch raising
``ValueError`` or ``TypeError`` ends its task's partial, and the failure of the first row
among all partials is raised, as ``map_column`` raises it (its tasks end at that failure too:
:func:`batch_results`).
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dpfast.dataflow.flow import SENT_BACK, add_up, dumps_error

__all__ = [
    "Partial",
    "batch_results",
    "combined",
    "partials_of",
    "totals",
]


@dataclass(frozen=True)
class Partial:
    """Some batches' results added up, or the failure of the first row among them.

    ``error`` is the pickled exception of the failing batch that starts at row
    ``failed_row`` (a task stops at its first); ``total`` is ``None`` where no batch was
    added; ``largest`` is the rows of the largest task that read batches for it.
    """

    total: Any = None
    failed_row: int = -1
    error: bytes = b""
    largest: int = 0

    def __add__(self, other: Partial) -> Partial:
        total = (
            self.total
            if other.total is None
            else other.total
            if self.total is None
            else add_up(self.total, other.total)
        )
        largest = max(self.largest, other.largest)
        failures = [p for p in (self, other) if p.error]
        if not failures:
            return Partial(total, largest=largest)
        first = min(failures, key=lambda p: p.failed_row)
        return Partial(total, first.failed_row, first.error, largest)


def batch_results(
    batches: Iterable[tuple[pa.Array, int]], fn: Callable[[pa.Array, int], Any]
) -> Iterator[tuple[int, bool, Any]]:
    """Yield ``(first_row, False, fn(batch, first_row))`` for one task's batches, in order.

    The first exception of :data:`~dpfast.dataflow.flow.SENT_BACK`, raised by ``fn`` or while
    the batches are read, is yielded as ``(first_row, True, exception)`` (the last batch
    read's row, 0 before the first) and ends them: a ``map_column`` task's results.
    """
    first_row = 0
    try:
        for array, first_row in batches:
            yield first_row, False, fn(array, first_row)
    except SENT_BACK as exc:
        yield first_row, True, exc


def partials_of(
    batches: Iterable[tuple[pa.Array, int]], fn: Callable[[pa.Array, int], Any]
) -> Partial:
    """Add ``fn`` of one task's batches ``(batch, first_row)``; stop at the first failure."""
    partial, rows = Partial(), 0
    for array, first_row in batches:
        rows += len(array)
        try:
            result = fn(array, first_row)
        except SENT_BACK as exc:
            return partial + Partial(None, first_row, dumps_error(exc), rows)
        partial = partial + Partial(result)
    return partial + Partial(largest=rows)


def combined(partials: Sequence[Partial]) -> Partial:
    """Add partials (a task of the workers' tree)."""
    return functools.reduce(Partial.__add__, partials, Partial())


def totals(partials: Iterable[Partial]) -> list[tuple[Any, int]]:
    """Return each partial's total and largest task's rows, or raise the first row's failure."""
    held = list(partials)
    failures = [p for p in held if p.error]
    if failures:
        raise pickle.loads(min(failures, key=lambda p: p.failed_row).error)
    return [(p.total, p.largest) for p in held if p.total is not None]
