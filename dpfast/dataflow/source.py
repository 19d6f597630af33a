"""What an engine reads a table through (:class:`Source`), and the release it stages.

An engine's ``publish`` writes the whole release under a staging name (a hidden file or
directory beside the output, :mod:`dpfast._staging`) and returns it as a :class:`Staged`
release, still invisible. The release skeleton (:meth:`dpfast._release._run.Run.finish`),
not the engine, then commits the budget's reservation and writes the reports, and only
then calls :meth:`Staged.reveal` (one rename); a release that fails before that leaves
nothing at the output (:meth:`Staged.discard`). See docs/architecture.md, "The column source".
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pyarrow as pa

from dpfast._staging import directory_beside, leftovers, publish, remove_gone, remove_path
from dpfast.exceptions import DPFastTypeError, DPFastValueError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CastColumns",
    "Columns",
    "Source",
    "Staged",
    "WithRows",
    "batch_fields",
    "column_batch",
    "column_names",
    "source_under",
    "stage_beside",
]

T = TypeVar("T")
S = TypeVar("S")

#: What a pass reads: one column, or the same rows of several as a struct array.
Columns = str | tuple[str, ...]


def _nothing() -> None:
    return None


class Staged:
    """A release written whole and not yet visible.

    ``reveal()`` returns the released data (the table, the dataset, the cluster's frame); after
    the first call of it or ``discard()``, both do nothing more (``reveal``: the same data).

    Examples
    --------
    >>> staged = Staged.ready([1, 2, 3])
    >>> staged.reveal()
    [1, 2, 3]
    >>> staged.discard()  # revealed: nothing to remove
    """

    def __init__(self, reveal: Callable[[], Any], discard: Callable[[], None] = _nothing) -> None:
        self._reveal = reveal
        self._discard = discard
        self._done = False
        self._data: Any = None
        #: What the release's passes did (the private report's ``work``: tasks, result bytes,
        #: items its output passes scanned; docs/scale.md#counters); None in memory.
        self.work: dict[str, int] | None = None

    def counted(self, work: dict[str, int]) -> Staged:
        """Return this release, with what its passes did (:attr:`work`)."""
        self.work = work
        return self

    @classmethod
    def ready(cls, data: Any) -> Staged:
        """Return a release that nothing hides: ``data`` (in memory, or a lazy frame)."""
        return cls(lambda: data)

    def reveal(self) -> Any:
        """Make the release visible (once) and return its data; on failure, discard it."""
        if not self._done:
            try:
                self._data = self._reveal()
            except BaseException:
                self.discard()
                raise
            self._done = True
        return self._data

    def giving(self, data: Any) -> Staged:
        """Return this release, revealed as ``data`` instead of what it gave."""

        def reveal() -> Any:
            self.reveal()
            return data

        given = Staged(reveal, self.discard)
        given.work = self.work
        return given

    def discard(self) -> None:
        """Remove what was staged, if it was not revealed; safe to call twice."""
        if not self._done:
            self._done = True
            self._discard()


def stage_beside(target: str | os.PathLike[str], write: Callable[[Path], T]) -> tuple[Staged, T]:
    """Have ``write(path)`` make the whole output at a staging path beside ``target``.

    The path is ``release`` with ``target``'s suffixes, in a hidden directory beside it named
    for it and this process (a killed run's leftovers are removed first, with a warning).
    Returns ``(staged, write's result)``; ``staged.reveal()`` renames the output onto
    ``target``, over what is there, and returns that result. A failed ``write`` leaves nothing.
    """
    final = Path(target)
    parent = final.parent if str(final.parent) else Path(".")
    if not parent.is_dir():
        raise DPFastValueError(f"output directory {str(parent)!r} does not exist; create it first")
    remove_gone(leftovers(final))
    directory = directory_beside(final)
    staged_path = directory / ("release" + "".join(final.suffixes))  # its format kept
    try:
        result = write(staged_path)
    except BaseException:
        remove_path(directory)
        raise

    def reveal() -> T:
        try:
            publish([(staged_path, final)], aside=directory)
        finally:
            remove_path(directory)
        return result

    return Staged(reveal, lambda: remove_path(directory)), result


class Source(ABC):
    """A table an engine reads column by column: the column source protocol.

    Rows are numbered ``0 .. n_rows - 1`` in an order that does not depend on how the
    source is read. The members that are not abstract have defaults, which a source
    overrides where it can do better (a cluster, where its batches are read): a caller
    calls each member and never asks whether it is there.

    Examples
    --------
    >>> class Numbers(Source):
    ...     names = property(lambda self: ["x"])
    ...     schema = property(lambda self: pa.schema([("x", pa.int64())]))
    ...     n_rows = property(lambda self: 5)
    ...     def map_column(self, name, batch_rows, fn):
    ...         for first in range(0, 5, batch_rows):
    ...             yield fn(pa.array(range(first, min(5, first + batch_rows))), first)
    >>> source = Numbers()
    >>> list(source.add_column("x", 2, lambda batch, first: sum(batch.to_pylist())))
    [(1, 2), (5, 2), (4, 1)]
    >>> source.sorts_in_place, source.sort_tasks, source.dataset
    (False, 1, None)
    """

    @property
    @abstractmethod
    def names(self) -> list[str]:
        """The columns' names, in order (unique)."""

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The columns' Arrow types, as the batches of :meth:`map_column` arrive."""

    @property
    @abstractmethod
    def n_rows(self) -> int:
        """The number of rows."""

    @abstractmethod
    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T]
    ) -> Iterator[T]:
        """Yield ``fn(batch, first_row)`` for the batches of column ``name``, in any order.

        A batch holds at most ``batch_rows`` consecutive rows, ``first_row`` the source-wide
        number of its first; a tuple of names gives struct arrays of those columns.
        """

    def add_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], T], most: int = 1
    ) -> Iterable[tuple[T, int]]:
        """Return partial totals of ``fn(batch, first_row)`` over column ``name``'s batches.

        Each comes with the rows of the largest task added into it, for the caller to add up
        (:func:`dpfast.dataflow.flow.column_total`). A source that adds where its batches are
        read returns at most ``most``; this default yields each batch's result as it is read
        here, holding nothing.
        """
        for rows, result in self.map_column(name, batch_rows, WithRows(fn)):
            yield result, rows

    @property
    def sorts_in_place(self) -> bool:
        """Whether :meth:`sort_ranges` sorts a column's keys where its batches are read.

        Callers test it; if False (the default), the engine sorts here from passes of
        :meth:`map_column`.
        """
        return False

    def sort_ranges(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Any,
        key_bits: int,
        reduce: Callable[[int, np.ndarray], T],
    ) -> list[T]:
        """Sort column ``name``'s keys range by range where its batches are read.

        ``keys(batch, first_row)`` gives a batch's keys; the sorted keys of range ``i`` of
        ``ranges`` (:class:`~dpfast.dataflow.sorted_ranges.Ranges`) go to ``reduce(i, keys)``,
        whose results come back in range order (:mod:`dpfast.dataflow.sorted_ranges`). Where
        not :attr:`sorts_in_place`, raises :class:`~dpfast.exceptions.DPFastTypeError`.
        """
        raise DPFastTypeError(
            f"a {type(self).__name__} does not sort ranges where its batches are read "
            "(its sorts_in_place is False); sort from passes of map_column instead"
        )

    @property
    def sort_tasks(self) -> int:
        """How many of this source's tasks run at once (1: this process, one at a time)."""
        return 1

    @property
    def dataset(self) -> Source | None:
        """The source this one wraps (the same rows and columns), or None."""
        return None


@dataclass(frozen=True)
class WithRows(Generic[T]):
    """A batch function that also returns its batch's rows (shipped to the workers)."""

    fn: Callable[[pa.Array, int], T]

    def __call__(self, array: pa.Array, first_row: int) -> tuple[int, T]:
        """Return the batch's rows and ``fn`` of it."""
        return len(array), self.fn(array, first_row)


@dataclass(frozen=True)
class CastColumns:
    """``fn`` of a batch of ``name`` whose columns named in ``types`` are cast to those types.

    A source whose reader gives a column in a type other than the one its passes read
    (Spark reading Parquet files; a CSV's seconds stored as milliseconds) casts it back.
    """

    name: Columns
    types: dict[str, pa.DataType]
    fn: Callable[[pa.Array, int], Any]

    def __call__(self, array: pa.Array, first_row: int) -> Any:
        """Return ``fn`` of the batch, its columns cast."""

        def cast(values: pa.Array, column: str) -> pa.Array:
            kind = self.types.get(column)
            return values if kind is None or values.type == kind else values.cast(kind)

        return self.fn(batch_fields(self.name, array, cast), first_row)


def column_names(name: Columns) -> list[str]:
    """Return the columns a pass over ``name`` reads."""
    return [name] if isinstance(name, str) else list(name)


def column_batch(name: Columns, arrays: Sequence[pa.Array]) -> pa.Array:
    """Return a batch of ``name``: ``arrays[0]``, or a tuple's first ``len(name)`` as a struct."""
    if isinstance(name, str):
        return arrays[0]
    return pa.StructArray.from_arrays(list(arrays[: len(name)]), names=list(name))


def batch_fields(
    name: Columns, array: pa.Array, each: Callable[[pa.Array, str], pa.Array]
) -> pa.Array:
    """Return a batch of ``name`` with ``each(field, its column)`` applied to every column."""
    if isinstance(name, str):
        return each(array, name)
    return column_batch(name, [each(array.field(i), c) for i, c in enumerate(name)])


def source_under(source: Any, kind: type[S], reads: str) -> S:
    """Return the ``kind`` source under ``source`` (itself, or a checked wrapper's).

    ``reads`` says what the engine reads, for the error on anything else.
    """
    inner = source
    while not isinstance(inner, kind):
        inner = inner.dataset if isinstance(inner, Source) else None
        if inner is None:
            raise DPFastTypeError(f"{reads}, got {type(source).__name__}")
    return inner
