"""A simulated cluster: the cluster engine's task functions run in one process.

Checks docs/scale.md's cost model of ``ir_dp`` on a cluster against the counters of the
private report (``work``), at partition counts this machine cannot have as executors.

``simulate``
    Release ``--rows`` x ``--columns`` (uniform floats, generated in memory) with
    ``dpfast.ir_dp`` (``--method laplace_dp``: ``dpfast.laplace_dp`` with one more column
    copied in a keyed permutation, through the exchange; ``--method ir_dp_categorical``:
    ``dpfast.ir_dp`` of text columns of 16 labels under a two-level taxonomy) on the
    ``simulated`` engine (``--send-ranks yes`` or ``no`` forces the engine's choice), once
    per partition count in ``--partitions``. The engine is dpfast's cluster engine
    (``ClusterEngine``) over :class:`SimulatedSource`, which runs the same task functions
    Spark and Dask run (a batch pass per partition's batches; a sort that splits every
    partition's keys by range, then sorts and reduces each range; the exchange's emit per
    partition's batches, then its assembly per part) one after the other in this process.
    With ``P`` partitions each sort task may hold ``n / P`` values (so the sort cuts about
    ``P`` ranges) and the release is written in ``P`` output parts (each a task computing
    :meth:`GeneratedParts.table` or assembling its part); the driver's memory limit stays
    4 GiB.
    Writes each run's wall seconds and ``work`` counters to ``--json``.

``parts``
    The output of one rank-group column of ``--rows`` ranks, placed two ways in one
    process, alternated ``--repeats`` times (medians): through the exchange's parts
    (:class:`~dpfast.engines.frames.sent_ranks.RankedColumn`: ``--tasks`` tasks of sorted
    ranks emit, with pickling, and each part assembles), and as the cluster engine places
    it today (the groups' sums and values in one process, then each part placing its
    buckets' items from every group's value, :func:`dpfast.noise.permutation_part_groups`),
    once per part count in ``--parts``. Both give the same values; it is checked.

Example::

    python benchmarks/scale.py simulate --rows 10_000_000 --columns 2 \\
        --partitions 4,64,1024 --json benchmarks/results/DATE/scale-simulated.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dpfast
from dpfast._kernels import ranking
from dpfast.dataflow.flow import FAN, Limits
from dpfast.dataflow.sorted_ranges import Ranges, keys_by_range, sorted_runs
from dpfast.dataflow.source import column_batch, column_names, source_under
from dpfast.engines import EngineChoice, register
from dpfast.engines.frames import ExchangedParts, GeneratedParts
from dpfast.engines.frames.parts import PARTS_ATTRIBUTE
from dpfast.engines.outofcore import EXCHANGE_ATTRIBUTE, ClusterEngine
from dpfast.engines.outofcore._sources import ArrowSource, Columns
from dpfast.engines.partial_totals import combined, partials_of, totals

BOUNDS = (0.0, 1000.0)


@dataclass(frozen=True)
class SimulatedSource(ArrowSource):
    """A table cut into ``partitions`` consecutive partitions, each a task of a pass."""

    partitions: int = 1

    @property
    def firsts(self) -> list[int]:
        """The partitions' first rows, and the row count."""
        n = self.n_rows
        return [n * p // self.partitions for p in range(self.partitions + 1)]

    @property
    def sorts_in_place(self) -> bool:
        """True: :meth:`sort_ranges` sorts a range a task, as a cluster does."""
        return True

    @property
    def sort_tasks(self) -> int:
        """One task slot a partition, as on a cluster with as many executors."""
        return self.partitions

    def _batches(self, name: Columns, batch_rows: int) -> Iterator[tuple[pa.Array, int]]:
        """Each partition's batches of column ``name``: ``(batch, first_row)``."""
        for p in range(self.partitions):
            yield from self._partition(name, batch_rows, p)

    def _partition(self, name: Columns, batch_rows: int, p: int) -> Iterator[tuple[pa.Array, int]]:
        """Partition ``p``'s batches of column ``name`` (a struct array of a tuple's columns)."""
        columns = [self.table.column(c) for c in column_names(name)]
        lo, hi = self.firsts[p], self.firsts[p + 1]
        for first in range(lo, hi, batch_rows):
            rows = min(batch_rows, hi - first)
            yield (
                column_batch(name, [c.slice(first, rows).combine_chunks() for c in columns]),
                first,
            )

    def add_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], Any], most: int = FAN
    ) -> Any:
        """A partial total a partition, then partials added ``FAN`` at a time, as on Dask."""
        partials = [
            partials_of(self._partition(name, batch_rows, p), fn) for p in range(self.partitions)
        ]
        while len(partials) > max(1, most):
            partials = [combined(partials[i : i + FAN]) for i in range(0, len(partials), FAN)]
        return totals(partials)

    def map_column(
        self, name: Columns, batch_rows: int, fn: Callable[[pa.Array, int], Any]
    ) -> Iterator[Any]:
        for batch, first in self._batches(name, batch_rows):
            yield fn(batch, first)

    def sort_ranges(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Ranges,
        key_bits: int,
        reduce: Callable[[int, np.ndarray], Any],
    ) -> list[Any]:
        """Split every batch's keys by range, then sort and reduce each range (one task each)."""
        sorted_keys = self.sorted_by_range(name, batch_rows, keys, ranges, key_bits)
        return [reduce(index, run) for index, run in sorted_keys]

    def sorted_by_range(
        self,
        name: str,
        batch_rows: int,
        keys: Callable[[pa.Array, int], np.ndarray],
        ranges: Ranges,
        key_bits: int,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield each range's sorted keys: every batch's keys split by range, a sort each."""
        pieces: list[list[np.ndarray]] = [[] for _ in range(len(ranges))]
        for batch, first in self._batches(name, batch_rows):
            for i, piece in enumerate(keys_by_range(keys(batch, first), ranges)):
                if piece.shape[0]:
                    pieces[i].append(piece.copy())
        for i in range(len(ranges)):
            held = np.concatenate(pieces[i]) if pieces[i] else np.empty(0, dtype=np.uint64)
            pieces[i] = []
            yield from sorted_runs(held, key_bits, ranges)


@dataclass
class _Frame:
    """A release frame of generated parts (what ``groups_frame`` returns)."""

    parts: GeneratedParts


@dataclass
class _Exchanged:
    """A release frame made through the exchange (what ``exchange_frame`` returns)."""

    parts: ExchangedParts
    source: SimulatedSource
    batch_rows: int

    def tables(self) -> Iterator[tuple[pa.Table, list[int]]]:
        """The tasks emit their pieces; then each output task assembles its part.

        The input's tasks emit their batches' pieces; each ranked column's sort tasks,
        their ranks' (and each run of ties, its own).
        """
        parts, source = self.parts, self.source
        inbox: list[list[bytes]] = [[] for _ in range(parts.count)]
        table, firsts = source.table.select(parts.inputs), source.firsts
        for p in range(source.partitions if parts.inputs else 0):
            for first in range(firsts[p], firsts[p + 1], self.batch_rows):
                rows = min(self.batch_rows, firsts[p + 1] - first)
                batch = table.slice(first, rows).combine_chunks().to_batches()[0]
                for part, payload in parts.emit(batch, first):
                    inbox[part].append(payload)
        for column, ranked in enumerate(parts.ranked):
            plan = ranked.plan
            ordered_ranges = (
                source.sorted_by_range(
                    ranked.name, self.batch_rows, ranked.keys, plan.ranges, plan.key_bits
                )
                if len(plan.ranges)  # else only runs of ties: the column is not read
                else iter(())
            )
            sent = [parts.emit_sorted(column, index, ordered) for index, ordered in ordered_ranges]
            sent.extend(parts.emit_ties(column, i) for i in range(len(ranked.ties)))
            for by_part in sent:
                for part, held in enumerate(by_part):
                    inbox[part].extend(held)
        for part in range(parts.count):
            pieces, inbox[part] = inbox[part], []
            yield parts.assemble_counted(part, pieces)


class SimulatedEngine(ClusterEngine):
    """The cluster engine over :class:`SimulatedSource`: its task functions, in this process.

    Each sort task may hold ``n / partitions`` values (:meth:`sort_limits`), so no
    column fits one and ``ir_dp``'s ranks are sent by the sort's tasks; the releases
    into ``output`` of frames of generated parts and of the exchange (``ir_dp`` of
    numeric columns, ``laplace_dp`` with ``unprotected="shuffle"``) are simulated.
    """

    name = "simulated"
    frame = "a simulated cluster"
    in_memory = "a table"
    source_type = SimulatedSource
    ranks_exchanged = True

    @staticmethod
    def cluster_of(source: Any) -> SimulatedSource:
        return source_under(source, SimulatedSource, "the simulated engine reads a SimulatedSource")

    @classmethod
    def settings(cls, source: Any) -> tuple[int, Path]:
        return 4 << 30, Path(tempfile.gettempdir())

    def sort_limits(self) -> Limits | None:
        per_task = math.ceil(self.n_rows / self.cluster.partitions)
        return Limits(32 * per_task, self.limits.batch_rows)

    def groups_frame(self, parts: GeneratedParts) -> Any:
        frame = _Frame(parts)
        setattr(frame, PARTS_ATTRIBUTE, parts)
        return frame

    def rows_frame(self, columns: Any) -> Any:
        raise NotImplementedError("the simulated cluster releases ir_dp only")

    def exchange_frame(self, parts: ExchangedParts) -> Any:
        frame = _Exchanged(parts, self.cluster, self.limits.batch_rows)
        setattr(frame, EXCHANGE_ATTRIBUTE, parts)
        return frame

    def file_frame(self, path: Path) -> Any:
        raise NotImplementedError("the simulated cluster releases ir_dp only")

    def table_frame(self, table: pa.Table) -> Any:
        raise NotImplementedError("the simulated cluster releases ir_dp only")

    @classmethod
    def write_dataset(cls, frame: Any, directory: Path, target: Path, progress: Any) -> Any:
        """Each output task computes its part and writes it as one Parquet file.

        Returns the counts of an exchange's parts, by part; else None.
        """
        directory.mkdir(parents=True)
        if isinstance(frame, _Exchanged):
            counts = {}
            for part, (table, counted) in enumerate(frame.tables()):
                pq.write_table(table, directory / f"part-{part:05d}.parquet")
                counts[part] = counted
            return counts
        parts: GeneratedParts = frame.parts
        for part in range(parts.count):
            pq.write_table(parts.table(part), directory / f"part-{part:05d}.parquet")
        return None


register("simulated", "__main__", "SimulatedEngine", lambda data: isinstance(data, SimulatedSource))


#: The taxonomy of ``--method ir_dp_categorical``'s columns: 16 labels in 4 groups.
LABELS = [f"v{i}" for i in range(16)]
TAXONOMY = {"*": {f"g{g}": LABELS[4 * g : 4 * g + 4] for g in range(4)}}


def simulate(
    rows: int,
    columns: int,
    partitions: list[int],
    k: int,
    epsilon: float,
    method: str = "ir_dp",
    send_ranks: bool | None = None,
) -> list[Any]:
    """Release the same table on each partition count; return each run's figures.

    ``method`` ``"ir_dp"``: ``columns`` protected columns; ``"ir_dp_categorical"``: as
    many text columns; ``"laplace_dp"``: as many protected columns and one more copied
    unprotected, in a keyed permutation. ``send_ranks`` is the engine's option.
    """
    rng = np.random.default_rng(1)
    names = [f"x{j}" for j in range(columns)]
    data: dict[str, Any] = {name: rng.uniform(*BOUNDS, rows) for name in names}
    if method == "ir_dp_categorical":
        data = {name: pa.array(LABELS).take(rng.integers(0, 16, rows)) for name in names}
    if method == "laplace_dp":
        data["u"] = rng.uniform(*BOUNDS, rows)
    table = pa.table(data)
    bounds: Any = {name: BOUNDS for name in names}
    taxonomies = None
    if method == "ir_dp_categorical":
        bounds = None
        taxonomies = {name: dpfast.Taxonomy.from_mapping(TAXONOMY) for name in names}
    runs = []
    for count in partitions:
        out = Path(tempfile.mkdtemp(prefix="dpfast-scale-"))
        engine = {"part_rows": math.ceil(rows / count), "send_ranks": send_ranks}
        options = {
            "bounds": bounds, "seed": 1, "output": out / "release",
            "engine": EngineChoice("simulated", engine),
        }  # fmt: skip
        try:
            start = time.perf_counter()
            source = SimulatedSource(table, count)
            if method == "laplace_dp":
                release = dpfast.laplace_dp(
                    source, epsilon=epsilon, columns=names, unprotected="shuffle", **options
                )
            else:
                release = dpfast.ir_dp(
                    source, k=k, epsilon=epsilon, taxonomies=taxonomies, **options
                )
            seconds = time.perf_counter() - start
            work = release.private.to_dict()["work"]
        finally:
            shutil.rmtree(out, ignore_errors=True)
        total = work["task_rows"] + work["output_scanned"]
        runs.append({"partitions": count, "seconds": seconds, "total_items": total, **work})
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    return runs


def place_parts(rows: int, k: int, tasks: int, part_counts: list[int], repeats: int) -> list[Any]:
    """Time one column's output through the exchange's parts and as placed today."""
    import pickle
    import statistics

    from dpfast import noise
    from dpfast.engines.frames.parts import bucket_span, bucket_starts
    from dpfast.engines.frames.sent_ranks import RankedColumn
    from dpfast.methods.ir_dp import _NoisyCentroids
    from dpfast.partitions.grid import Grid
    from dpfast.partitions.ranking import RankGroups

    layout = RankGroups(rows, k)
    d_int = 1 << 20
    words = np.sort(np.random.default_rng(0).integers(0, d_int + 1, rows)).astype(np.uint64)
    key = noise.NoiseSource.from_seed(0).key("order")
    starts = bucket_starts(key, rows)
    grid = Grid(0.0, float(d_int), 1.0, d_int, 0)  # noiseless means: the placement is timed
    means = _NoisyCentroids("x", grid, layout, 0, False, key)
    column = RankedColumn(layout, key, starts, means, 0.0, float(d_int))
    cuts = np.linspace(0, rows, tasks + 1).astype(np.int64)
    runs = []
    for count in part_counts:
        bounds = np.linspace(0, rows, count + 1).astype(np.int64)
        exchange, today = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            by_part: list[list[Any]] = [[] for _ in range(count)]
            for a, b in itertools.pairwise(cuts):
                for part, piece in column.emit(bounds, int(a), words[a:b]):
                    by_part[part].append(pickle.loads(pickle.dumps(piece, protocol=5)))
            placed = [column.assemble(bounds, p, pieces)[0] for p, pieces in enumerate(by_part)]
            exchange.append(time.perf_counter() - start)
            del by_part
            start = time.perf_counter()
            sums = np.zeros(rows // k, dtype=np.int64)
            ranking.add_group_sums(words, 0, 0, *layout.scalars, sums)
            values = means(sums, 0)
            sizes = np.diff(starts)
            old = []
            for p in range(count):
                first, last = bucket_span(starts, bounds[p], bounds[p + 1])
                out = noise.permutation_part_groups(
                    key, rows, first, last, values, k, sizes, big=layout.big
                )
                old.append(out[bounds[p] - starts[first] : bounds[p + 1] - starts[first]])
            today.append(time.perf_counter() - start)
            if not np.array_equal(np.concatenate(placed), np.concatenate(old)):
                raise AssertionError("the two placements differ")
        runs.append({
            "parts": count, "tasks": tasks,
            "exchange_seconds": statistics.median(exchange),
            "today_seconds": statistics.median(today),
        })  # fmt: skip
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sim = commands.add_parser("simulate", help="a release on a simulated cluster of P partitions")
    sim.add_argument(
        "--method", choices=["ir_dp", "ir_dp_categorical", "laplace_dp"], default="ir_dp"
    )
    sim.add_argument("--send-ranks", choices=["auto", "yes", "no"], default="auto")
    sim.add_argument("--rows", type=lambda t: int(t.replace("_", "")), default=10_000_000)
    sim.add_argument("--columns", type=int, default=2)
    sim.add_argument("--partitions", default="4,64,1024")
    sim.add_argument("--k", type=int, default=10)
    sim.add_argument("--epsilon", type=float, default=1.0)
    sim.add_argument("--json", type=Path, required=True)
    place = commands.add_parser("parts", help="one column's output: the exchange against today")
    place.add_argument("--rows", type=lambda t: int(t.replace("_", "")), default=10_000_000)
    place.add_argument("--k", type=int, default=10)
    place.add_argument("--tasks", type=int, default=4)
    place.add_argument("--parts", default="4,16,64")
    place.add_argument("--repeats", type=int, default=3)
    place.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "parts":
        counts = [int(p) for p in args.parts.split(",")]
        found = place_parts(args.rows, args.k, args.tasks, counts, args.repeats)
        document = {
            "rows": args.rows, "k": args.k, "machine": platform.platform(),
            "dpfast": dpfast.__version__, "runs": found,
        }  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        return 0
    counts = [int(p) for p in args.partitions.split(",")]
    send = {"auto": None, "yes": True, "no": False}[args.send_ranks]
    runs = simulate(args.rows, args.columns, counts, args.k, args.epsilon, args.method, send)
    document = {
        "method": args.method, "rows": args.rows, "columns": args.columns, "k": args.k,
        "epsilon": args.epsilon, "send_ranks": args.send_ranks,
        "machine": platform.platform(), "dpfast": dpfast.__version__, "runs": runs,
    }  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
