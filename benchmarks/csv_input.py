"""CSV input out of core: converted once to Parquet, against re-read on every pass.

The out-of-core engine reads a column per pass, several passes a column. A CSV file
cannot be read a column at a time: every pass over it parses every column of every row.
This script measures the two ways of releasing a CSV file within a memory limit, and the
same data read from Parquet, each in a child process of its own (wall and CPU seconds,
peak resident memory, from ``getrusage`` of the child):

``converted``
    ``dpfast.ir_dp("people.csv", output=..., memory_limit=...)``: the engine converts
    the file once, batch by batch, into Parquet scratch files, and the passes read those
    (``dpfast.engines.outofcore.CsvSource``; what dpfast does).
``reread``
    The same release over :class:`CsvPasses`, a column source whose every pass parses
    the CSV file again with pyarrow's streaming reader (``include_columns``).
``parquet``
    The same release of the same rows from a Parquet file (row groups of 1,048,576 rows).

The release is ``ir_dp`` of the four numeric columns, ``k = 25``, ``epsilon = 1``, seed
1; the three give the same rows. Results: benchmarks/results/2026-12-06-csv.

Examples
--------
::

    python benchmarks/csv_input.py gen --rows 34_000_000 --out /data/people.csv
    python benchmarks/csv_input.py run --csv /data/people.csv --memory-limit 256MiB \\
        --jobs converted,parquet,reread --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from dpfast.dataflow.source import Source

SCHEMA = pa.schema(
    [
        ("age", pa.int64()),
        ("income", pa.float64()),
        ("hours", pa.int64()),
        ("profit", pa.float64()),
        ("town", pa.string()),
    ]
)
BOUNDS = {"age": (17, 90), "income": (0, 1e6), "hours": (0, 80), "profit": (-1e5, 1e5)}
TOWNS = np.array(["Lyon", "Zürich", "Bern", "Graz", "Oslo", "Turku", "Porto", "Gent"])


def generate(rows: int, out: Path, chunk: int = 1_000_000) -> None:
    """Write ``rows`` rows of skewed columns as CSV at ``out``, and as Parquet beside it."""
    rng = np.random.default_rng(0)
    with pa_csv.CSVWriter(out, SCHEMA) as writer:
        for first in range(0, rows, chunk):
            n = min(chunk, rows - first)
            writer.write_table(
                pa.table(
                    {
                        "age": rng.integers(17, 91, n),
                        "income": np.round(rng.lognormal(10, 1.2, n), 2),
                        "hours": rng.integers(0, 81, n),
                        "profit": np.round(rng.pareto(1.5, n) * 1000 * rng.choice([-1, 1], n), 2),
                        "town": TOWNS[rng.integers(0, len(TOWNS), n)],
                    },
                    schema=SCHEMA,
                )
            )
    reader = pa_csv.open_csv(out, convert_options=pa_csv.ConvertOptions(column_types=SCHEMA))
    with pq.ParquetWriter(out.with_suffix(".parquet"), SCHEMA, compression="zstd") as writer:
        pending: list[pa.RecordBatch] = []
        for batch in reader:
            pending.append(batch)
            if sum(b.num_rows for b in pending) >= 1 << 20:
                writer.write_table(pa.Table.from_batches(pending), row_group_size=1 << 62)
                pending = []
        if pending:
            writer.write_table(pa.Table.from_batches(pending), row_group_size=1 << 62)


class CsvPasses(Source):
    """A CSV file as a column source that parses the file again on every pass."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._rows = sum(batch.num_rows for batch in self._batches(["age"]))
        self.passes = 0

    @property
    def names(self) -> list[str]:
        return list(SCHEMA.names)

    @property
    def schema(self) -> pa.Schema:
        return SCHEMA

    @property
    def n_rows(self) -> int:
        return self._rows

    def _batches(self, columns: list[str]) -> Iterator[pa.RecordBatch]:
        convert = pa_csv.ConvertOptions(column_types=SCHEMA, include_columns=columns)
        yield from pa_csv.open_csv(self.path, convert_options=convert)

    def map_column(
        self, name: str | tuple[str, ...], batch_rows: int, fn: Callable[[pa.Array, int], Any]
    ) -> Iterator[Any]:
        self.passes += 1
        columns = [name] if isinstance(name, str) else list(name)
        first = 0
        for batch in self._batches(columns):
            for start in range(0, batch.num_rows, batch_rows):
                piece = batch.slice(start, batch_rows)
                arrays = [piece.column(c) for c in columns]
                if isinstance(name, str):
                    array = arrays[0]
                else:
                    array = pa.StructArray.from_arrays(arrays, names=columns)
                yield fn(array, first)
                first += piece.num_rows


def release(job: str, csv: Path, out: Path, memory_limit: str) -> dict[str, Any]:
    """Run one job in this process; return its seconds and its source's passes."""
    import dpfast

    data: Any = {"converted": str(csv), "parquet": str(csv.with_suffix(".parquet"))}.get(job)
    if job == "reread":
        data = CsvPasses(csv)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = dpfast.ir_dp(
            data,
            k=25,
            epsilon=1.0,
            bounds=BOUNDS,
            columns=list(BOUNDS),
            seed=1,
            engine="outofcore",
            output=out,
            memory_limit=memory_limit,
        )
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process: Linux gives KiB
    return {
        "seconds": seconds,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_bytes": usage.ru_maxrss * 1024,
        "passes": getattr(data, "passes", None),
        "work": made.private.extra.get("work", {}),
    }


def measure(job: str, csv: Path, out: Path, memory_limit: str) -> dict[str, Any]:
    """Run ``job`` in a child process; return its times, peak memory and its output.

    ``seconds`` is the release's own wall time, ``wall`` the process's (imports too);
    ``cpu`` and ``peak_bytes`` the process's, as it reports them.
    """
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "one", job, str(csv), str(out), memory_limit],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(job=job, wall=time.perf_counter() - started, csv_bytes=csv.stat().st_size)
    result["peak_of_csv"] = result["peak_bytes"] / result["csv_bytes"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("gen")
    gen.add_argument("--rows", type=lambda s: int(s.replace("_", "")), required=True)
    gen.add_argument("--out", type=Path, required=True)
    run = commands.add_parser("run")
    run.add_argument("--csv", type=Path, required=True)
    run.add_argument("--memory-limit", default="256MiB")
    run.add_argument("--jobs", default="converted,parquet,reread")
    run.add_argument("--json", type=Path)
    one = commands.add_parser("one")
    one.add_argument("job")
    one.add_argument("csv", type=Path)
    one.add_argument("out", type=Path)
    one.add_argument("memory_limit")
    args = parser.parse_args(argv)
    if args.command == "gen":
        generate(args.rows, args.out)
    elif args.command == "one":
        print(json.dumps(release(args.job, args.csv, args.out, args.memory_limit)))
    else:
        results = []
        for job in args.jobs.split(","):
            out = args.csv.with_name(f"released-{job}.parquet")
            results.append(measure(job, args.csv, out, args.memory_limit))
            print(json.dumps(results[-1]), flush=True)
            os.remove(out)
        if args.json is not None:
            args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
