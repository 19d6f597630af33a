"""What a release's passes did: the counters of the private report's ``work``.

Every pass of the out-of-core engine, on one machine or a cluster, runs through its source's
``map_column`` (a result a batch), ``sort_ranges`` (a result a sorted range) or
``add_column`` (a result a partial total added on the workers). :class:`CountedSource` wraps
the engine's source so that each batch's or range's function also returns its rows, and the
driver adds up :class:`Work` as the results arrive. docs/scale.md reads these counters
against its cost model.

The counters describe the run, not the data: a release's rows and reports are the same
whatever they say, and like the timings they differ from engine to engine.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa

from dpfast.dataflow.source import Columns, Source, WithRows
from dpfast.engines.outofcore._sources import WrappedSource

__all__ = ["CountedSource", "Work", "result_bytes"]

T = TypeVar("T")


def result_bytes(result: Any) -> int:
    """Return the bytes of a pass's result: its arrays' data, else its pickled size.

    Tuples and lists add up their items; NumPy and Arrow arrays count their buffers;
    numbers count 8; anything else counts its pickled size.
    """
    if isinstance(result, (tuple, list)):
        return sum(result_bytes(item) for item in result)
    if isinstance(result, (np.ndarray, pa.Array, pa.ChunkedArray, pa.RecordBatch, pa.Table)):
        return int(result.nbytes)
    if isinstance(result, (bool, int, float, np.generic)) or result is None:
        return 8
    if isinstance(result, (bytes, bytearray, memoryview)):
        return len(result)
    return len(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass
class Work:
    """A release's counters (thread-safe: columns run in threads).

    ``tasks`` counts the results that came back to the driver (one a batch of a pass, one a
    sorted range); ``task_rows`` adds up their rows, ``largest_task_rows`` is the most one of
    them covered, ``driver_bytes`` their bytes (:func:`result_bytes`). ``output_passes``
    counts the passes (:meth:`output_pass`) that placed released items in a permutation's
    order, reading ``output_scanned`` items of its bucket streams to write ``output_items``.
    """

    tasks: int = 0
    task_rows: int = 0
    largest_task_rows: int = 0
    driver_bytes: int = 0
    output_passes: int = 0
    output_scanned: int = 0
    output_items: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def task(self, rows: int, result: Any, largest: int | None = None) -> None:
        """Count one result of ``rows`` rows that came to the driver.

        ``largest``: the rows of the largest task behind it, where the workers added
        several tasks' results into it (else ``rows``).
        """
        size = result_bytes(result)
        biggest = int(rows if largest is None else largest)
        with self._lock:
            self.tasks += 1
            self.task_rows += int(rows)
            self.largest_task_rows = max(self.largest_task_rows, biggest)
            self.driver_bytes += size

    def output_pass(self, scanned: int, items: int) -> None:
        """Count one output pass that scanned ``scanned`` stream items to write ``items``."""
        with self._lock:
            self.output_passes += 1
            self.output_scanned += int(scanned)
            self.output_items += int(items)

    def to_dict(self) -> dict[str, int]:
        """Return the counters as the private report's ``work``."""
        with self._lock:
            return {
                "tasks": self.tasks,
                "task_rows": self.task_rows,
                "largest_task_rows": self.largest_task_rows,
                "driver_bytes": self.driver_bytes,
                "output_passes": self.output_passes,
                "output_scanned": self.output_scanned,
                "output_items": self.output_items,
            }


@dataclass(frozen=True)
class _SizedReduce(Generic[T]):
    """A sorted range's reduction that also returns the range's keys (shipped to the workers)."""

    reduce: Callable[[int, np.ndarray], T]

    def __call__(self, index: int, ordered: np.ndarray) -> tuple[int, T]:
        return int(ordered.shape[0]), self.reduce(index, ordered)


class CountedSource(WrappedSource):
    """A column source whose passes are counted into ``work`` (see the module docstring).

    ``map_column``, ``add_column`` and ``sort_ranges`` run on the source under it and
    count each result; the other members are the source's (:class:`WrappedSource`).
    """

    def __init__(self, source: Source, work: Work) -> None:
        super().__init__(source)
        self.work = work

    @property
    def schema(self) -> pa.Schema:
        """The columns' Arrow types."""
        schema: pa.Schema = self._dataset.schema
        return schema

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)`` as the source does, counting each batch."""
        for rows, result in self._dataset.map_column(name, batch_rows, WithRows(fn)):
            self.work.task(rows, result)
            yield result

    def add_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T], most: int = 1
    ) -> Iterator[tuple[T, int]]:
        """Yield the source's partial totals as they come, counting each."""
        for (rows, result), largest in self._dataset.add_column(
            name, batch_rows, WithRows(fn), most
        ):
            self.work.task(rows, result, largest)
            yield result, largest

    def sort_ranges(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Any,
        key_bits: int,
        reduce: Callable[[int, np.ndarray], T],
    ) -> list[T]:
        """Return the source's sorted ranges' reductions, counting each range's keys."""
        results = []
        sized = _SizedReduce(reduce)
        for rows, result in self._dataset.sort_ranges(
            name, batch_rows, keys, ranges, key_bits, sized
        ):
            self.work.task(rows, result)
            results.append(result)
        return results
