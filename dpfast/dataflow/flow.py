"""What a step reads a table through: the dataflow under every engine (docs/architecture.md).

A step (:mod:`dpfast.steps`) is a data algorithm written once over a :class:`Dataflow`,
which an engine opens for its release (``Engine.dataflow``); the helpers every pass shares
are here too.
"""

from __future__ import annotations

import functools
import math
import pickle
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dpfast._validation import kernel_floats, quoted
from dpfast.dataflow.source import Columns, Source
from dpfast.exceptions import DPFastRuntimeError, DPFastValueError
from dpfast.io import is_declared_dictionary, same_dictionaries

if TYPE_CHECKING:
    from dpfast.dataflow.values import CategoricalColumn, NumericColumn
    from dpfast.io import TableData

__all__ = [
    "FAN",
    "HISTOGRAM_BITS",
    "SENT_BACK",
    "ColumnStats",
    "Dataflow",
    "HeldTable",
    "Limits",
    "NonFiniteValue",
    "add_up",
    "bucket_runs",
    "column_stats",
    "column_total",
    "cut_ranges",
    "declared_dictionary",
    "dumps_error",
    "numeric_values",
    "refined_shift",
    "taxonomy_codes",
]

T = TypeVar("T")

#: Partials added together by one task, and the most that come back to the driver.
FAN = 32

#: Bytes of working memory per value collected for sorting (the values, the sort's
#: scratch, the pieces before they are joined, and slack).
_BYTES_PER_SORTED_VALUE = 32


#: Bytes per row of a part of the output order (the order and the released values).
_BYTES_PER_ORDERED_ROW = 24


@dataclass(frozen=True)
class Limits:
    """What fits in the memory limit: values per sorted range, rows per order part."""

    memory: int
    batch_rows: int

    @property
    def sorted_values(self) -> int:
        """The values a sort collects at once (32 bytes each, at least 1,024)."""
        return max(1024, self.memory // _BYTES_PER_SORTED_VALUE)

    @property
    def ordered_rows(self) -> int:
        """The rows of a part of a column's output order (24 bytes each, at least 1,024)."""
        return max(1024, self.memory // _BYTES_PER_ORDERED_ROW)

    def sorting(self, bytes_per_value: int) -> Limits:
        """Return the limits of sorts holding ``bytes_per_value`` bytes for each value."""
        return Limits(self.memory * _BYTES_PER_SORTED_VALUE // bytes_per_value, self.batch_rows)


#: The exceptions a batch function raises to say the data is bad (sent back as they are).
SENT_BACK = (ValueError, TypeError)


def dumps_error(exc: BaseException) -> bytes:
    """Pickle an exception, or a RuntimeError with its type and message if it cannot be."""
    try:
        payload = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(payload)
    except Exception:
        payload = pickle.dumps(DPFastRuntimeError(f"{type(exc).__name__}: {exc}"))
    return payload


class NonFiniteValue(DPFastValueError):
    """A batch of protected column ``column`` holds NaN, an infinity or a missing value.

    Raised by the first bad batch; the engine's ``explain`` gives the in-memory error, counting all.
    """

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:  # pickled by Spark and Dask tasks
        return (NonFiniteValue, (str(self), self.column))


def numeric_values(
    array: pa.Array, column: NumericColumn, first_row: int, method: str = "ir_dp"
) -> np.ndarray:
    """One batch of a numeric column as float64, refusing what ``method`` refuses."""
    if array.null_count:
        row = first_row + int(pc.index(array.is_null(), True).as_py())
        raise NonFiniteValue(
            f"column {quoted(column.name)} has a missing value at row {row}; {method} needs a "
            "value in every row of a protected column",
            str(column.name),
        )
    values = array.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    finite = np.isfinite(values)
    if not finite.all():
        row = first_row + int(np.flatnonzero(~finite)[0])
        raise NonFiniteValue(
            f"column {quoted(column.name)} has NaN or infinity at row {row}; protected columns "
            "must be finite",
            str(column.name),
        )
    if column.integer and not np.array_equal(values, np.rint(values)):
        row = first_row + int(np.flatnonzero(values != np.rint(values))[0])
        raise DPFastValueError(
            f"column {quoted(column.name)} is declared integer but row {row} holds "
            f"{quoted(values[row - first_row])}; declare it float in the schema"
        )
    return kernel_floats(values)


def add_up(a: Any, b: Any) -> Any:
    """Add two results of a batch function: numbers, NumPy arrays, or tuples of them."""
    if isinstance(a, tuple):
        return tuple(add_up(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def column_total(
    source: Source,
    name: Columns,
    batch_rows: int,
    fn: Callable[[pa.Array, int], T],
    start: T,
    most: int = FAN,
) -> T:
    """Return ``start`` plus ``fn(batch, first_row)`` of every batch of column ``name``.

    ``name`` may be a tuple of columns (read as a struct array). Added on the workers where
    the source's ``add_column`` adds there, until at most ``most`` partials remain (1 for
    results as large as a release's table), else here as the batches' results come.
    """
    partials = source.add_column(name, batch_rows, fn, most)
    return functools.reduce(add_up, (total for total, _ in partials), start)


# -- a numeric column's range and its non-finite values ----------------------------------


@dataclass(frozen=True)
class ColumnStats:
    """What one pass finds in a numeric column: its range and its non-finite values."""

    lo: float
    hi: float
    non_finite: int
    first_bad: int
    first_kind: str


def _float_values(array: pa.Array) -> np.ndarray:
    """One batch of a numeric column as float64 (missing values as NaN)."""
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


def _batch_stats(array: pa.Array, first_row: int) -> ColumnStats:
    values = _float_values(array)
    bad = ~np.isfinite(values)
    count = int(bad.sum())
    if count:
        first = int(np.argmax(bad))
        kind = "NaN or missing" if np.isnan(values[first]) else "infinite"
        return ColumnStats(math.inf, -math.inf, count, first_row + first, kind)
    if not values.shape[0]:
        return ColumnStats(math.inf, -math.inf, 0, -1, "")
    return ColumnStats(float(values.min()), float(values.max()), 0, -1, "")


def column_stats(dataset: Source, name: str, batch_rows: int) -> ColumnStats:
    """One pass: a numeric column's min and max, and its non-finite values."""
    lo, hi, count, first, kind = math.inf, -math.inf, 0, -1, ""
    for part in dataset.map_column(name, batch_rows, _batch_stats):
        lo, hi, count = min(lo, part.lo), max(hi, part.hi), count + part.non_finite
        if part.non_finite and (first < 0 or part.first_bad < first):
            first, kind = part.first_bad, part.first_kind
    return ColumnStats(lo, hi, count, first, kind)


# -- categorical columns -----------------------------------------------------------------


def taxonomy_codes(array: pa.Array, cat: CategoricalColumn) -> np.ndarray:
    """One batch of a categorical column as its taxonomy's codes, refusing values not in it."""
    encoded = array if pa.types.is_dictionary(array.type) else array.dictionary_encode()
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    if encoded.indices.null_count:
        missing = encoded.indices.is_null().to_numpy(zero_copy_only=False)
        indices = np.where(missing, -1, indices)
    codes = cat.taxonomy.encode_categories(
        indices.astype(np.int64), encoded.dictionary.to_pylist(), column=cat.name
    )
    return np.asarray(codes, dtype=np.int64)


def _batch_dictionary(array: pa.Array, first_row: int) -> tuple[int, pa.Array]:
    """Return a dictionary batch's first row and its dictionary."""
    return first_row, array.dictionary


def declared_dictionary(source: Source, name: Hashable, batch_rows: int) -> tuple[str, ...] | None:
    """Return the categories column ``name``'s type declares (an ordered dictionary's), if any.

    One pass over the column reads every batch's dictionary, which must be the same
    (:func:`dpfast.io.same_dictionaries`); other columns declare none, and are not read.
    """
    if not is_declared_dictionary(source.schema.field(str(name)).type):
        return None
    batches = sorted(source.map_column(str(name), batch_rows, _batch_dictionary), key=_first)
    return tuple(same_dictionaries(name, [dictionary for _, dictionary in batches]))


def _first(batch: tuple[int, pa.Array]) -> int:
    return batch[0]


# -- ordered keys cut into ranges that fit ------------------------------------------------

#: Bits of a histogram pass: a range's keys are counted per bucket of their top bits.
HISTOGRAM_BITS = 16


def refined_shift(lo: int, hi: int) -> int:
    """Return the shift of a histogram of ``[lo, hi)`` in at most ``2**HISTOGRAM_BITS`` buckets."""
    return max(0, (hi - lo - 1).bit_length() - HISTOGRAM_BITS)


def cut_ranges(
    counts: np.ndarray,
    lo: int,
    hi: int,
    shift: int,
    first_rank: int,
    capacity: int,
    process: Callable[[int, int, int, int], None],
) -> None:
    """Cut ``[lo, hi)`` into runs of histogram buckets holding at most ``capacity`` keys.

    ``counts[b]`` counts the keys in ``[lo + (b << shift), lo + ((b + 1) << shift))``. Calls
    ``process(run_lo, run_hi, first_rank, count)`` for every run in key order, ``first_rank``
    the rank of its first key. A run spans its first to last non-empty bucket, so a bucket
    above ``capacity`` is a run exactly as wide as itself: refining it always narrows it (a
    heavy tie with empty buckets beside it would otherwise give the same range again).
    """
    start = end = held = 0
    rank = first_rank
    for b in np.flatnonzero(counts).tolist():
        count = int(counts[b])
        if held and held + count > capacity:
            process(lo + (start << shift), min(hi, lo + (end << shift)), rank, held)
            rank += held
            held = 0
        if held == 0:
            start = b
        held += count
        end = b + 1
    if held:
        process(lo + (start << shift), min(hi, lo + (end << shift)), rank, held)


def bucket_runs(sizes: np.ndarray, most: int) -> list[int]:
    """Cut a keyed permutation's buckets into runs of at most ``most`` rows, in order.

    ``sizes[b]`` counts bucket ``b``'s rows (:func:`dpfast.noise.permutation_bucket_sizes`).
    Returns the runs' first buckets, then ``len(sizes)``: run ``i`` is buckets
    ``[runs[i], runs[i + 1])``. A bucket of more than ``most`` rows is a run of its own.

    Examples
    --------
    >>> bucket_runs(np.array([3, 4, 2, 9, 1]), 6)
    [0, 1, 3, 4, 5]
    """
    runs, held = [0], 0
    for b, size in enumerate(sizes.tolist()):
        if b and held + size > most:
            runs.append(b)
            held = 0
        held += size
    runs.append(len(sizes))
    return runs


def _no_tick(phase: str, done: int, total: int) -> None:
    """Progress that nobody follows."""


def _no_scratch() -> Path:
    """Refuse: a dataflow held in memory has no scratch folder."""
    raise DPFastRuntimeError(
        "this dataflow has no scratch folder: open the release on an engine that reads in "
        "passes (engine='outofcore', or a memory limit), or hold the table in memory"
    )


@dataclass(frozen=True)
class Dataflow:
    """What a step reads a table through, opened by an engine for its release.

    ``source`` gives the columns' batches, ``limits`` what fits in memory, ``tick(phase, done,
    total)`` the progress line a step advances before each pass, and ``scratch()`` the folder
    of the release's scratch files (made when first asked for; none when held in memory).
    ``task_limits`` bound each sort task a cluster's workers run (``None``: as ``limits``);
    ``keep_order(name, rows)``, where given, keeps a held column's rows in rank order (the
    in-memory engine, for its metrics and risk). ``table`` is the table the engine holds in
    memory, or ``None``; where held (:attr:`holds`), a step may take its fast path: every
    protected column's values are in its :class:`~dpfast.dataflow.values.NumericColumn`,
    and the table's own category codes are at hand.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpfast.io import as_table_data
    >>> flow = Dataflow.held(as_table_data(pd.DataFrame({"x": [3.0, 1.0, 2.0]})))
    >>> flow.holds, flow.source.n_rows, flow.limits.batch_rows
    (True, 3, 3)
    >>> column_total(flow.source, "x", flow.limits.batch_rows, lambda a, first: len(a), 0)
    3
    """

    source: Source
    limits: Limits
    tick: Callable[[str, int, int], None] = _no_tick
    table: TableData | None = None
    scratch: Callable[[], Path] = _no_scratch
    task_limits: Limits | None = None
    keep_order: Callable[[Hashable, np.ndarray], None] | None = None

    @classmethod
    def held(
        cls,
        table: TableData,
        keep_order: Callable[[Hashable, np.ndarray], None] | None = None,
    ) -> Dataflow:
        """Return a held table's dataflow: whole columns, read when asked (:class:`HeldTable`)."""
        source = HeldTable(tuple(table.names), table.column, table.n_rows)
        limits = Limits(memory=_HELD_MEMORY, batch_rows=max(1, table.n_rows))
        return cls(source, limits, table=table, keep_order=keep_order)

    @classmethod
    def without_values(
        cls,
        names: Sequence[Hashable],
        n_rows: int,
        refusal: Callable[[str | None], Exception],
    ) -> Dataflow:
        """Return the dataflow of a table known by its names and row count, with no value.

        Reading column ``name`` raises ``refusal(name)``, reading the types ``refusal(None)``:
        a step that would read the table refuses, naming the column (a forecast, from public
        values only).
        """
        source = _NoValues(tuple(names), n_rows, refusal)
        return cls(source, Limits(memory=_HELD_MEMORY, batch_rows=max(1, n_rows)))

    @property
    def holds(self) -> bool:
        """Whether the engine holds the table in memory (the steps' fast path)."""
        return self.table is not None

    def passes(self, name: Hashable) -> Callable[[int], None]:
        """Return the tick of the passes over column ``name``: ``tick(passes_made)``."""
        return functools.partial(_column_tick, self.tick, f"column {name}")


def _column_tick(tick: Callable[[str, int, int], None], phase: str, passes: int) -> None:
    tick(phase, passes, passes + 1)


@dataclass(frozen=True)
class _NoValues(Source):
    """A table's names and row count as a source whose every read is refused."""

    held_names: tuple[Hashable, ...]
    rows: int
    refusal: Callable[[str | None], Exception]

    @property
    def names(self) -> list[str]:
        return [str(name) for name in self.held_names]

    @property
    def schema(self) -> pa.Schema:
        raise self.refusal(None)

    @property
    def n_rows(self) -> int:
        return self.rows

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        raise self.refusal(name[0] if isinstance(name, tuple) else name)


#: The memory limit of a dataflow held in memory: none (what is held is held already).
_HELD_MEMORY = 1 << 62


@dataclass(frozen=True)
class HeldTable(Source):
    """A table held in memory as a column source, read whole or in slices.

    ``read(name)`` gives column ``name``'s values (anything ``pyarrow.array`` takes); the
    source names each column by its name's text (unique: :func:`dpfast.io.as_table_data`
    refuses ``0`` beside ``"0"``).

    Examples
    --------
    >>> table = {"x": np.array([3.0, 1.0, 2.0])}
    >>> source = HeldTable(("x",), table.__getitem__, 3)
    >>> source.names, source.n_rows, str(source.schema.field("x").type)
    (['x'], 3, 'double')
    >>> list(source.map_column("x", 3, lambda batch, first: (len(batch), first)))
    [(3, 0)]
    >>> list(source.map_column("x", 2, lambda batch, first: (len(batch), first)))
    [(2, 0), (1, 2)]
    """

    held_names: tuple[Hashable, ...]
    read: Callable[[Hashable], Any]
    rows: int

    @property
    def names(self) -> list[str]:
        """The columns' names, as text."""
        return [str(name) for name in self.held_names]

    @property
    def schema(self) -> pa.Schema:
        """The columns' Arrow types (each column read to find its own)."""
        return pa.schema([(name, self._array(name).type) for name in self.names])

    @property
    def n_rows(self) -> int:
        """The number of rows."""
        return self.rows

    def _array(self, name: str) -> pa.Array:
        by_text = dict(zip(self.names, self.held_names, strict=True))
        return pa.array(self.read(by_text[name]))

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)`` for slices of ``batch_rows`` rows, in row order.

        :meth:`Dataflow.held` reads a column whole, in one batch.
        """
        if isinstance(name, tuple):
            arrays = [self._array(n) for n in name]
            whole = pa.StructArray.from_arrays(arrays, names=list(name))
        else:
            whole = self._array(name)
        for first in range(0, self.rows, batch_rows):
            yield fn(whole.slice(first, batch_rows), first)
