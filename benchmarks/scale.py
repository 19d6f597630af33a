"""A simulated cluster: the cluster engine's task functions run in one process.

Checks docs/scale.md's cost model of ``ir_dp`` on a cluster against the counters of the
private report (``work``), at partition counts this machine cannot have as executors.

``simulate``
    Release ``--rows`` x ``--columns`` (uniform floats, generated in memory) with
    ``dpfast.ir_dp`` (``--method laplace_dp``: ``dpfast.laplace_dp`` with one more column
    copied in a keyed permutation, through the exchange) on the ``simulated`` engine, once
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

Example::

    python benchmarks/scale.py simulate --rows 10_000_000 --columns 2 \\
        --partitions 4,64,1024 --json benchmarks/results/DATE/scale-simulated.json
"""

from __future__ import annotations

import argparse
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
from dpfast.engines import EngineChoice, register
from dpfast.engines.outofcore import (
    EXCHANGE_ATTRIBUTE,
    FAN,
    ClusterEngine,
    ExchangedParts,
    GeneratedParts,
    combined,
    partials_of,
    totals,
)
from dpfast.engines.outofcore._lazy import PARTS_ATTRIBUTE
from dpfast.engines.outofcore._passes import Limits
from dpfast.engines.outofcore._sorted import Ranges, keys_by_range, sorted_runs
from dpfast.engines.outofcore._sources import ArrowSource, source_under

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
    def sort_tasks(self) -> int:
        """One task slot a partition, as on a cluster with as many executors."""
        return self.partitions

    def _batches(self, name: str, batch_rows: int) -> Iterator[tuple[pa.Array, int]]:
        """Each partition's batches of column ``name``: ``(batch, first_row)``."""
        for p in range(self.partitions):
            yield from self._partition(name, batch_rows, p)

    def _partition(self, name: str, batch_rows: int, p: int) -> Iterator[tuple[pa.Array, int]]:
        """Partition ``p``'s batches of column ``name``."""
        column, lo, hi = self.table.column(name), self.firsts[p], self.firsts[p + 1]
        for first in range(lo, hi, batch_rows):
            yield column.slice(first, min(batch_rows, hi - first)).combine_chunks(), first

    def add_column(self, name: str, batch_rows: int, fn: Callable[[pa.Array, int], Any]) -> Any:
        """A partial total a partition, then partials added ``FAN`` at a time, as on Dask."""
        partials = [
            partials_of(self._partition(name, batch_rows, p), fn) for p in range(self.partitions)
        ]
        while len(partials) > FAN:
            partials = [combined(partials[i : i + FAN]) for i in range(0, len(partials), FAN)]
        return totals(partials)

    def map_column(
        self, name: str, batch_rows: int, fn: Callable[[pa.Array, int], Any]
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
        pieces: list[list[np.ndarray]] = [[] for _ in range(len(ranges))]
        for batch, first in self._batches(name, batch_rows):
            for i, piece in enumerate(keys_by_range(keys(batch, first), ranges)):
                if piece.shape[0]:
                    pieces[i].append(piece.copy())
        results = []
        for i in range(len(ranges)):
            held = np.concatenate(pieces[i]) if pieces[i] else np.empty(0, dtype=np.uint64)
            pieces[i] = []
            results.extend(reduce(index, run) for index, run in sorted_runs(held, key_bits, ranges))
        return results


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

    def tables(self) -> Iterator[pa.Table]:
        """Each input task emits its batches' pieces; then each output task assembles its part."""
        parts, source = self.parts, self.source
        inbox: list[list[bytes]] = [[] for _ in range(parts.count)]
        table, firsts = source.table.select(parts.inputs), source.firsts
        for p in range(source.partitions):
            for first in range(firsts[p], firsts[p + 1], self.batch_rows):
                rows = min(self.batch_rows, firsts[p + 1] - first)
                batch = table.slice(first, rows).combine_chunks().to_batches()[0]
                for part, payload in parts.emit(batch, first):
                    inbox[part].append(payload)
        for part in range(parts.count):
            pieces, inbox[part] = inbox[part], []
            yield parts.assemble(part, pieces)


class SimulatedEngine(ClusterEngine):
    """The cluster engine over :class:`SimulatedSource`: its task functions, in this process.

    Each sort task may hold ``n / partitions`` values (:meth:`sort_limits`); the releases
    into ``output`` of lazy frames of generated parts (``ir_dp`` of numeric columns) and
    of the exchange (``laplace_dp`` with ``unprotected="shuffle"``) are simulated.
    """

    name = "simulated"
    frame = "a simulated cluster"
    in_memory = "a table"
    source_type = SimulatedSource

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
    def write_dataset(cls, frame: Any, directory: Path, target: Path, progress: Any) -> None:
        """Each output task computes its part and writes it as one Parquet file."""
        directory.mkdir(parents=True)
        if isinstance(frame, _Exchanged):
            for part, table in enumerate(frame.tables()):
                pq.write_table(table, directory / f"part-{part:05d}.parquet")
            return
        parts: GeneratedParts = frame.parts
        for part in range(parts.count):
            pq.write_table(parts.table(part), directory / f"part-{part:05d}.parquet")


register("simulated", "__main__", "SimulatedEngine", lambda data: isinstance(data, SimulatedSource))


def simulate(
    rows: int, columns: int, partitions: list[int], k: int, epsilon: float, method: str = "ir_dp"
) -> list[Any]:
    """Release the same table on each partition count; return each run's figures.

    ``method`` ``"ir_dp"``: ``columns`` protected columns; ``"laplace_dp"``: as many
    protected columns and one more copied unprotected, in a keyed permutation.
    """
    rng = np.random.default_rng(1)
    names = [f"x{j}" for j in range(columns)]
    data = {name: rng.uniform(*BOUNDS, rows) for name in names}
    if method == "laplace_dp":
        data["u"] = rng.uniform(*BOUNDS, rows)
    table = pa.table(data)
    bounds = {name: BOUNDS for name in names}
    runs = []
    for count in partitions:
        out = Path(tempfile.mkdtemp(prefix="dpfast-scale-"))
        options = {
            "bounds": bounds, "seed": 1, "output": out / "release",
            "engine": EngineChoice("simulated", {"part_rows": math.ceil(rows / count)}),
        }  # fmt: skip
        try:
            start = time.perf_counter()
            source = SimulatedSource(table, count)
            if method == "laplace_dp":
                release = dpfast.laplace_dp(
                    source, epsilon=epsilon, columns=names, unprotected="shuffle", **options
                )
            else:
                release = dpfast.ir_dp(source, k=k, epsilon=epsilon, **options)
            seconds = time.perf_counter() - start
            work = release.private.to_dict()["work"]
        finally:
            shutil.rmtree(out, ignore_errors=True)
        total = work["task_rows"] + work["output_scanned"]
        runs.append({"partitions": count, "seconds": seconds, "total_items": total, **work})
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sim = commands.add_parser("simulate", help="a release on a simulated cluster of P partitions")
    sim.add_argument("--method", choices=["ir_dp", "laplace_dp"], default="ir_dp")
    sim.add_argument("--rows", type=lambda t: int(t.replace("_", "")), default=10_000_000)
    sim.add_argument("--columns", type=int, default=2)
    sim.add_argument("--partitions", default="4,64,1024")
    sim.add_argument("--k", type=int, default=10)
    sim.add_argument("--epsilon", type=float, default=1.0)
    sim.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    counts = [int(p) for p in args.partitions.split(",")]
    runs = simulate(args.rows, args.columns, counts, args.k, args.epsilon, args.method)
    document = {
        "method": args.method, "rows": args.rows, "columns": args.columns, "k": args.k,
        "epsilon": args.epsilon,
        "machine": platform.platform(), "dpfast": dpfast.__version__, "runs": runs,
    }  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
