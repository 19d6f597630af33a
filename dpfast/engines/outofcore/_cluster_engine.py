"""The out-of-core engine on a cluster: passes on the workers, a lazy frame where it can be.

A cluster engine (Spark, Dask) runs the passes over its own source on the workers
(``map_column``, ``sort_ranges``). Where every released column allows it, its release is a
lazy frame the workers compute from small state:

* columns in a keyed permutation of their rank groups
  (:class:`~dpfast.dataflow.writes.WriteGroups`): a frame of :class:`GeneratedParts`;
* columns released row by row (:class:`~dpfast.dataflow.writes.WriteRows`): the input's
  batches mapped by :class:`RowsBatch`, after one pass counts what the private report counts;
* columns copied unprotected, in the rows' order or a keyed permutation, alone or beside
  either above (:class:`~dpfast.dataflow.writes.CopyColumns`): a frame of
  :class:`ExchangedParts`, whose input tasks send each row to its output part and whose
  output tasks order their parts (one exchange, no pass on the driver);
* with ``output``, numeric columns of rank groups whose ranks the sort's tasks send to the
  parts (:meth:`ClusterEngine.write_rank_groups`, where the engine chooses it): the same frame.

A table the method computed from small results (:class:`~dpfast.dataflow.writes.WriteTable`)
becomes a frame here (with ``output``, this process writes it there too). Any other release
(record-linked, resampled or coded columns, or copies of a type the cluster's frame does not
hold) this process writes from passes on the workers, as the out-of-core engine does, and
reads back as a frame in row order. With ``output``, the release is written there (by the
workers where the frame is lazy) and published in one rename. Until :meth:`ClusterEngine.publish`
one :class:`~dpfast.engines.outofcore._kept.KeptWrites` holds these writes; its ``shape`` says
which frame they make.
"""

from __future__ import annotations

import functools
import importlib
import os
import uuid
from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

import numpy as np
import pyarrow as pa

from dpfast._validation import option, quoted
from dpfast.dataflow.flow import Limits, column_total
from dpfast.dataflow.on_bound import BoundCount, OnBound, RankGroupValues
from dpfast.dataflow.rank_plans import RankPlan, plan_ranks, quantised_keys
from dpfast.dataflow.source import Source, Staged, stage_beside
from dpfast.dataflow.values import (
    CategoricalColumn,
    Cells,
    GroupCodes,
    NumericColumn,
    Opening,
    ProtectedColumn,
    PublishHook,
    RangeValues,
)
from dpfast.dataflow.writes import CopyColumns, Write, WriteGroups, WriteRows, WriteTable
from dpfast.engines.base import RankSender
from dpfast.engines.frames.exchange import (
    ExchangedParts,
    Shuffled,
    part_bounds,
)
from dpfast.engines.frames.parts import (
    GeneratedParts,
    GroupsColumn,
    RowsColumn,
    RowsCounts,
    output_part_rows,
)
from dpfast.engines.frames.sent_ranks import (
    BYTES_PER_SENT_RANK,
    CodedGroups,
    RankedColumn,
    RankedState,
    no_keys,
    ranks_of_counts,
)
from dpfast.engines.outofcore._engine import (
    BATCH_ROWS,
    OutOfCoreEngine,
    refuse_text_output,
)
from dpfast.engines.outofcore._kept import KeptWrites
from dpfast.engines.outofcore._sources import ColumnSource
from dpfast.exceptions import DPFastRuntimeError, DPFastTypeError
from dpfast.io import build_table
from dpfast.partitions.grid import Grid
from dpfast.partitions.ranking import RankGroups

__all__ = ["ClusterEngine"]

C = TypeVar("C", bound="ClusterEngine")
R = TypeVar("R")

#: The output parts from which the sort's tasks send a column's ranks though the column
#: fits one task (:meth:`ClusterEngine._sends_ranks`): each part scans the column's whole
#: bucket stream, placing an item in about 3.2 ns, where sending it once costs 62 ns in one
#: process and 118 ns on Dask's workers, so sending is the cheaper from 20 to 37 parts
#: (docs/scale.md, "Rank groups through the exchange").
SEND_RANKS_PARTS = 32


class ClusterEngine(OutOfCoreEngine, RankSender):
    """The out-of-core engine over a cluster's source (see the module docstring).

    ``output`` is where the release is written, or ``None`` for a lazy frame (a release
    that cannot be lazy is then written into ``scratch``, a directory the workers read).
    """

    def __init__(
        self,
        source: ColumnSource,
        output: str | os.PathLike[str] | None,
        scratch: Path,
        *,
        memory_limit: int,
        batch_rows: int = BATCH_ROWS,
        part_rows: int | None = None,
        send_ranks: bool | None = None,
        progress: Any = None,
    ) -> None:
        self.final = None if output is None else Path(output)
        target = self.final or scratch / f"release-{uuid.uuid4().hex}.parquet"
        super().__init__(
            source, target, memory_limit=memory_limit, batch_rows=batch_rows, progress=progress
        )
        self.part_rows = part_rows
        self.send_ranks = send_ranks
        #: The writes kept for the lazy frame until the release is published.
        self.kept = KeptWrites()
        # the rows on a bound of the columns the workers sorted and sent, once written
        self._on_bound: dict[str, OnBound] = {}

    writes_dataset = True

    #: Whether :meth:`exchange_frame` sends rank groups from the sort's tasks
    #: (:meth:`write_rank_groups`), and :meth:`write_dataset` returns their counts.
    ranks_exchanged: ClassVar[bool] = False

    #: The input this engine releases (its type's module), and how to bring it into memory.
    frame: ClassVar[str]
    frame_module: ClassVar[str]
    in_memory: ClassVar[str]

    @classmethod
    def open(
        cls: type[C],
        data: Any,
        opening: Opening,
        *,
        batch_rows: int = BATCH_ROWS,
        part_rows: int | None = None,
        send_ranks: bool | None = None,
    ) -> C:
        """Open a release of the cluster's frame; ``memory_limit`` defaults to its setting.

        ``send_ranks``: whether ``ir_dp`` with ``output`` has the sort's tasks send its numeric
        columns (:meth:`write_rank_groups`, else the groups come to the driver); ``None``: by cost.
        """
        opening.refuse_comparisons(f"on {cls.frame}", cls.in_memory)
        if opening.output is not None:
            refuse_text_output(opening.output)
        source = cls.cluster_source(data)
        memory, scratch = cls.settings(source)
        return cls(
            source,
            opening.output,
            scratch,
            memory_limit=memory if opening.memory_limit is None else opening.memory_limit,
            batch_rows=batch_rows,
            part_rows=part_rows,
            send_ranks=send_ranks,
            progress=opening.progress,
        )

    #: The source over the cluster's frame: a :class:`ColumnSource` whose passes run on
    #: the cluster.
    source_type: ClassVar[type[Any]]

    @staticmethod
    @abstractmethod
    def cluster_of(source: Any) -> Any:
        """Return the cluster's source under ``source`` (itself, or a wrapper's), else refuse."""

    @classmethod
    def cluster_source(cls, data: Any) -> ColumnSource:
        """Return ``data`` (a frame, or a source over one) as this cluster's source.

        Anything that is not one, or a source over one, is refused before a pass runs.
        """
        importlib.import_module(cls.frame_module)  # not installed: open_engine says how
        kind = type(data)
        if not isinstance(data, Source) and not kind.__module__.startswith(cls.frame_module):
            raise DPFastTypeError(
                f"{option('engine', cls.name)} releases {cls.frame} or a column source over "
                f"one, got a {kind.__module__}.{kind.__name__}; leave out {option('engine')} "
                f"to release it on the engine its type selects, or give {cls.frame}"
            )
        source: ColumnSource = data if isinstance(data, Source) else cls.source_type(data)
        cls.cluster_of(source)
        return source

    @classmethod
    @abstractmethod
    def settings(cls, source: ColumnSource) -> tuple[int, Path]:
        """Return the cluster's configured working memory and this process's scratch."""

    # -- what a cluster does -------------------------------------------------------------

    @property
    def cluster(self) -> Any:
        """The cluster's own source under this engine's source."""
        return self.cluster_of(self.source)

    @property
    def tasks(self) -> int:
        """How many tasks run at once on the cluster."""
        return int(self.cluster.sort_tasks)

    @abstractmethod
    def groups_frame(self, parts: GeneratedParts) -> Any:
        """Return the lazy frame whose task ``p`` computes part ``p`` of ``parts``."""

    @abstractmethod
    def rows_frame(self, columns: Sequence[RowsColumn]) -> Any:
        """Return the lazy frame of the input's batches released by ``columns``."""

    @abstractmethod
    def exchange_frame(self, parts: ExchangedParts) -> Any:
        """Return the lazy frame of ``parts``: the input's tasks emit, part ``p``'s assembles."""

    def exchangeable(self, kind: pa.DataType) -> bool:
        """Whether the lazy frame of an exchange holds a copied column of type ``kind``."""
        return not pa.types.is_dictionary(kind)

    @abstractmethod
    def file_frame(self, path: Path) -> Any:
        """Return a Parquet file written here as a frame, its rows in the file's order."""

    @abstractmethod
    def table_frame(self, table: pa.Table) -> Any:
        """Return a small Arrow table computed here as a frame of the cluster."""

    @classmethod
    @abstractmethod
    def write_dataset(cls, frame: Any, directory: Path, target: Path, progress: Any) -> Any:
        """Have the workers write ``frame`` as the new dataset directory ``directory``.

        One Parquet file per part, names sorting in row order; ``progress`` follows the write's
        tasks; errors name ``target``, where it will be published; a failed or interrupted
        write stops its tasks. Returns each part's rows on a bound per ranked column (``{part:
        [count, ...]}``) for :class:`ExchangedParts` with ranked columns (where
        :attr:`ranks_exchanged`), else None.
        """

    @classmethod
    def write_release(
        cls,
        frame: Any,
        output: str | os.PathLike[str],
        report: Any,
        *,
        progress: Any = None,
        before_publish: PublishHook | None = None,
    ) -> Any:
        """Write a release frame as a dataset directory named ``output``, atomically.

        The workers write it beside ``output`` (:meth:`stage_release`), whose directory they
        must share, whatever its suffix (``out.parquet`` is a directory too, as the cluster's
        writers make it); ``before_publish(report)`` runs once it is complete, then a rename
        publishes it: a failed or interrupted write leaves nothing at ``output``.
        """
        staged, counts = cls.stage_release(frame, output, progress=progress)
        try:
            if before_publish is not None:
                before_publish(report)
            staged.reveal()
        finally:
            staged.discard()
        return counts

    @classmethod
    def stage_release(
        cls, frame: Any, output: str | os.PathLike[str], *, progress: Any
    ) -> tuple[Staged, Any]:
        """Have the workers write ``frame`` beside ``output``; return it staged and their counts.

        Its ``reveal()`` renames it onto ``output``; the counts are what :meth:`write_dataset`
        returned, and what :meth:`write_release` returns.
        """
        target = Path(output)
        return stage_beside(target, lambda path: cls.write_dataset(frame, path, target, progress))

    # -- the protocol ----------------------------------------------------------------------

    def sort_limits(self) -> Limits | None:
        """Each sort task on a worker may use the whole memory limit."""
        return self.limits

    def write(self, request: Write[R]) -> R:
        """Keep what the workers can compute lazily; write the rest as out of core."""
        match request:
            case WriteGroups(column):
                self.kept.groups[str(column.name)] = request
            case WriteRows(column, cells):
                return cast(R, self._keep_rows(column, cells))
            case CopyColumns(names):
                if names:
                    self.kept.copies.append(CopyColumns([str(n) for n in names], request.key))
            case WriteTable(columns, repeat):
                self.kept.table = build_table("arrow", columns)
                if self.final is not None:  # written here too, from the same Arrow table
                    self._write_table(self.kept.table, repeat)
            case _:
                return super().write(request)
        return cast(R, None)

    def write_rank_groups(
        self,
        column: NumericColumn,
        grid: Grid,
        layout: RankGroups,
        values: RankGroupValues,
        key: np.ndarray,
        domain: tuple[float, float],
    ) -> tuple[int, BoundCount]:
        """With ``output``, the workers sort the column, compute its groups and send them.

        The driver cuts the column into ranges by histogram passes (:func:`plan_ranks`) and
        keeps the plan; the release's write job sorts each range on a worker, which sends each
        rank's value to its output part (:class:`~dpfast.engines.frames.sent_ranks.RankedColumn`);
        the parts count the rows on a bound, known once the release is written. Called only
        where :meth:`rank_sender` is this engine; elsewhere the groups come to the driver as on
        one machine (the ``group_sums`` step).
        """
        name = str(column.name)
        passes = self.dataflow.passes(column.name)
        done = [0]

        def tick() -> None:
            done[0] += 1
            passes(done[0])

        # each range's task sends its keys' values: its ranges are cut smaller than a sort's
        limits = (self.sort_limits() or self.limits).sorting(BYTES_PER_SENT_RANK)
        plan = plan_ranks(self.source, column, grid, limits, tick)
        keys = quantised_keys(column, grid)
        self._rank(column, plan, layout, key, values, domain, keys, values.before_noise)
        return plan.clamped, functools.partial(self._counted_on_bound, name)

    def write_category_groups(
        self,
        column: CategoricalColumn,
        counts: np.ndarray,
        layout: RankGroups,
        codes: GroupCodes,
        key: np.ndarray,
    ) -> None:
        """With ``output``, the write's tasks draw the groups' codes and send them.

        The records per taxonomy rank give the column's sorted ranks, so no task sorts or
        reads it: each chunk of a rank's ranks draws its groups' codes and sends them as
        :meth:`write_rank_groups` sends ties. Only where :meth:`rank_sender` is this engine.
        """
        values = CodedGroups(codes, np.asarray(counts, dtype=np.int64))
        plan = ranks_of_counts(values.counts)
        self._rank(column, plan, layout, key, values, (-np.inf, np.inf))

    def _rank(
        self,
        column: ProtectedColumn,
        plan: RankPlan,
        layout: RankGroups,
        key: np.ndarray,
        values: RangeValues,
        domain: tuple[float, float],
        keys: Callable[[Any, int], np.ndarray] = no_keys,
        before: RangeValues | None = None,
    ) -> None:
        """Keep a column whose ranks the write's tasks send (:class:`RankedState`).

        ``before`` gives a numeric column's group values before the noise (its counts).
        """
        name = str(column.name)
        output = self._group_state(column, np.zeros(0), key)  # its bucket starts too
        placed = RankedColumn(layout, key, output.starts, values, *domain, before)
        self.kept.ranked[name] = RankedState(name, placed, plan, keys, output)

    def rank_sender(self, copied: Sequence[str] | None) -> RankSender | None:
        """Return this engine where the sort's tasks send the ranks (:meth:`_sends_ranks`)."""
        return self if self._sends_ranks(copied) else None

    def _sends_ranks(self, copied: Sequence[str] | None) -> bool:
        """Whether the sort's tasks send a column's ranks (:meth:`write_rank_groups`).

        Only with ``output`` (a lazy frame's report is complete when returned), on an engine
        that can, where the exchange holds every copied column's type (``copied``; ``None``:
        every input column). Then as :attr:`send_ranks` says, else the groups come to the
        driver where the column fits one sort task (so the driver holds at most ``24 / (32 k)``
        of the memory limit) and the release has fewer than :data:`SEND_RANKS_PARTS` parts.
        """
        schema = self.source.schema
        copied = schema.names if copied is None else copied
        if (
            self.final is None
            or not self.ranks_exchanged
            or not self._exchange_holds(schema, copied)
        ):
            return False
        if self.send_ranks is not None:
            return self.send_ranks
        n = self.n_rows
        fits = n <= (self.sort_limits() or self.limits).sorted_values
        parts = -(-n // self._part_rows(1))
        return not fits or parts >= SEND_RANKS_PARTS

    def _counted_on_bound(self, name: str) -> OnBound:
        """Return a ranked column's rows on a bound, as its parts counted them."""
        if name not in self._on_bound:
            raise DPFastRuntimeError(
                f"column {quoted(name)} was not written, so it was not counted"
            )
        return self._on_bound[name]

    def _keep_rows(self, column: NumericColumn, cells: Cells) -> np.ndarray:
        """Keep a row-wise column for the frame; return its counts, added up in one pass."""
        self._tick(f"column {column.name}", 0, 1)
        rows = RowsColumn(column, cells)
        name, batch_rows = str(column.name), self.limits.batch_rows
        start: Any = 0  # the counts' total, as many as a batch gives: none without a batch
        total = column_total(self.source, name, batch_rows, RowsCounts(rows), start)
        self.kept.rows[name] = rows
        return np.zeros(0, dtype=np.int64) if np.ndim(total) == 0 else np.asarray(total)

    @property
    def _written(self) -> bool:
        """Whether this process wrote a released column (linked, resampled, coded).

        The other writes are :attr:`kept` for a lazy frame until :meth:`publish`.
        """
        return bool(self.out.columns)

    # -- the end ------------------------------------------------------------------------

    def publish(self, report: Any, *, reindex: bool) -> Staged:
        """Make the frame :attr:`kept`'s shape says; stage it, with what the passes did."""
        return self._staged().counted(self.counters.to_dict())

    def _staged(self) -> Staged:
        kept, order = self.kept, [str(n) for n in self.source.names]
        shape = kept.shape(self._written)
        if shape == "table":
            return self._publish_table()
        exchanged = self._exchanged(order) if shape == "exchange" else None
        if kept.ranked and exchanged is None:
            raise DPFastRuntimeError("columns sorted by the workers need the exchange")
        parts: GeneratedParts | ExchangedParts | None = exchanged  # what the workers compute
        if exchanged is not None:
            frame = self.exchange_frame(exchanged)
        elif shape == "groups":
            parts = self._parts(kept.in_order(kept.groups, order))
            frame = self.groups_frame(parts)
        elif shape == "rows":
            frame = self.rows_frame(kept.in_order(kept.rows, order))
        else:
            self._materialize()
            return self.out.publish(self.file_frame)
        if self.final is None:
            return Staged.ready(frame)
        staged, written = self.stage_release(frame, self.final, progress=self.progress)
        try:
            if kept.ranked:
                self._add_on_bound(written, exchanged)
        except BaseException:
            staged.discard()
            raise
        if parts is not None:  # the workers computed and wrote every part
            for part in range(parts.count):
                scanned, written = parts.scanned(part)
                if written:  # a part placed in a permutation's order
                    self.counters.output_pass(scanned, written)
        return staged.giving(frame)

    def _add_on_bound(self, written: Any, parts: ExchangedParts | None) -> None:
        """Add the ranked columns' rows on a bound over the parts' counts of the write."""
        assert parts is not None
        counts = dict(written or {})
        if sorted(counts) != list(range(parts.count)):
            raise DPFastRuntimeError("the write did not return every part's counts")
        for i, state in enumerate(parts.ranked):
            self._on_bound[state.name] = sum(
                (OnBound.of_counts(counts[p][i]) for p in counts), OnBound()
            )

    def _exchanged(self, order: Sequence[str]) -> ExchangedParts | None:
        """Return the frame's parts through the exchange, or None where it cannot hold them.

        (A copied column's type not :meth:`exchangeable`, or copies in two permutations.)
        """
        schema, writes = self.source.schema, self.kept
        copied = writes.copied
        if not self._exchange_holds(schema, copied):
            return None
        keyed = [copy for copy in writes.copies if copy.key is not None]
        if len(keyed) > 1:
            return None
        kept = tuple(str(n) for copy in writes.copies if copy.key is None for n in copy.names)
        shuffled, key = None, keyed[0].key if keyed else None
        if key is not None:
            shuffled = Shuffled.of(tuple(map(str, keyed[0].names)), key, self.n_rows)
        held = writes.in_order(writes.groups, order)
        groups = self._group_states(held)
        rows = writes.in_order(writes.rows, order)
        types = {name: schema.field(name).type for name in copied}
        types.update((r.name, r.arrow_type) for r in rows)
        types.update((c.name, c.arrow_type) for c in groups)
        ranked = tuple(writes.in_order(writes.ranked, order))
        types.update((r.name, r.output.arrow_type) for r in ranked)
        names = tuple(n for n in order if n in types)
        starts = shuffled.starts if shuffled is not None else None
        return ExchangedParts(
            self.n_rows,
            part_bounds(self.n_rows, self._part_rows(len(names)), starts),
            names,
            tuple(types[n] for n in names),
            tuple(rows),
            kept,
            shuffled,
            groups,
            held[0].layout if held else None,
            tuple((name, schema.field(name).type) for name in copied),
            ranked,
        )

    def _exchange_holds(self, schema: pa.Schema, copied: Sequence[str]) -> bool:
        """Whether the exchange holds every copied column (:meth:`exchangeable`) of ``schema``."""
        return all(self.exchangeable(schema.field(name).type) for name in copied)

    def _group_state(
        self, column: ProtectedColumn, values: np.ndarray, key: np.ndarray
    ) -> GroupsColumn:
        """Return what a task needs to compute rows of a rank-group column."""
        original = self.source.schema.field(str(column.name)).type
        return GroupsColumn.of(key, self.n_rows, values, column, original)

    def _group_states(self, groups: Sequence[WriteGroups]) -> tuple[GroupsColumn, ...]:
        """Return the :meth:`_group_state` of each of the kept group columns ``groups``."""
        return tuple(self._group_state(g.column, g.values, g.key) for g in groups)

    def _part_rows(self, columns: int) -> int:
        """Return the output rows of a part of a lazy frame of ``columns`` released columns."""
        return int(
            self.part_rows or output_part_rows(self.n_rows, columns, self.tasks, self.limits.memory)
        )

    def _parts(self, groups: Sequence[WriteGroups]) -> GeneratedParts:
        """Return the lazy frame's parts: each group column's state, the rows each task computes."""
        states = self._group_states(groups)
        part_rows = self._part_rows(len(states))
        return GeneratedParts(states, self.n_rows, groups[0].layout, part_rows)

    def _materialize(self) -> None:
        """Write the kept columns into scratch files, as the out-of-core engine does."""
        kept = self.kept
        for groups in kept.groups.values():
            super().write(groups)
        for rows in kept.rows.values():
            super().write(WriteRows(rows.column, rows.cells))
        for copy in kept.copies:
            super().write(copy)

    def _publish_table(self) -> Staged:
        table = self.kept.table
        assert table is not None
        if self.final is not None:
            return self.out.publish(lambda _: self.table_frame(table))
        return Staged.ready(self.table_frame(table))
