"""``ir-dp`` through the column engine: Parquet datasets, ``--memory-limit``, one column at a time.

The command line sends ``dpfast release ir-dp`` here whenever the release is one the
engine runs (either linkage, shuffled or not, every ``--unprotected`` policy; Parquet
output) and the input is large (:data:`ENGINE_FROM_BYTES`) or asks for it:

* an input directory or glob, or ``--memory-limit``: the input is read as a Parquet
  dataset, column by column and part by part, never whole (out of core);
* otherwise the input is read into memory once, and the release still works on one
  column at a time and writes through scratch files, so the peak stays near the input's
  size instead of several times it.

Either way the release is the one ``dpfast.ir_dp`` gives (docs/engines.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from dpfast.cli._common import (
    _check_paths,
    _delayed_progress,
    _load,
    _mark_from_data,
    _selection,
    _spending,
    _summary,
    check_overwrite,
    check_schema_for,
    is_dataset_path,
    report_paths,
    write_reports,
)

#: The memory limit of the in-memory path: the release's own working memory, beside the
#: input table it has read (only how the work is cut depends on it, never the release).
DEFAULT_MEMORY = 4 * 2**30
#: Inputs smaller than this (rows x columns x 8 bytes, or a text file's size) are released
#: by the in-memory function, whose fixed costs are lower; larger ones column by column.
#: Both give the same release.
ENGINE_FROM_BYTES = 64 * 2**20


def _unsupported(args: argparse.Namespace, method: str) -> list[str]:
    """Return the options the engine does not run, as the CLI spells them."""
    found = []
    if method == "mdav-dp" and getattr(args, "unprotected", "drop") != "drop":
        found.append(f"--unprotected {args.unprotected}")
    if _is_text(args.output):
        found.append(f"a {Path(args.output).suffix} output")
    return found


def _is_text(path: str) -> bool:
    name = Path(path).name.lower()
    return any(name.endswith(s) for s in (".csv", ".tsv", ".csv.gz", ".tsv.gz"))


def wants_engine(args: argparse.Namespace) -> bool:
    """Return whether a release must run through the engine (a dataset or a memory limit)."""
    return (
        args.memory_limit is not None
        or is_dataset_path(args.input)
        or getattr(args, "engine", "local") == "spark"
        or getattr(args, "engine", "local") == "dask"
    )


def runs_on_engine(args: argparse.Namespace, method: str = "ir-dp") -> bool:
    """Return whether the engine runs this release; refuse what it cannot run.

    ``ir-dp`` runs on the engine whenever it can (one column at a time saves memory);
    ``laplace``, ``k-noise``, ``k-pram`` and ``randomized-response`` only when a dataset
    or ``--memory-limit`` asks for it.
    """
    unsupported = _unsupported(args, method)
    check_engine_options(args, method)
    if wants_engine(args):
        if unsupported:
            what = "an input directory or glob" if is_dataset_path(args.input) else "--memory-limit"
            raise ValueError(
                f"{what} runs {method} out of core, which does not support "
                f"{', '.join(unsupported)}; drop them, or give one input file without "
                "--memory-limit to release in memory"
            )
        return True
    return method == "ir-dp" and not unsupported and _input_bytes(args) >= ENGINE_FROM_BYTES


def executors_write(args: argparse.Namespace, method: str) -> bool:
    """Return whether the executors compute and write the release (else the driver writes).

    ``ir-dp`` with column linkage, shuffled, unprotected columns dropped, and ``laplace``
    dropping them: their output is a function of small global state and keyed draws.
    """
    if getattr(args, "unprotected", "drop") != "drop":
        return False
    if method == "ir-dp":
        return bool(args.linkage == "columns" and args.shuffle)
    return method == "laplace"


def dataset_source(args: argparse.Namespace) -> Any:
    """Return INPUT as the engine's source: read by Spark or Dask (``--engine``) or by files."""
    from dpfast.engines.outofcore import ParquetDataset

    if getattr(args, "engine", "local") == "spark":
        return _spark_source(args)
    if getattr(args, "engine", "local") == "dask":
        return _dask_source(args)
    return ParquetDataset.open(args.input)


def check_engine_options(args: argparse.Namespace, method: str) -> None:
    """Refuse ``--master`` or ``--scheduler`` without their engine.

    Spark and Dask run every out-of-core ``method``, with the options the column engine
    runs (refused before, by :func:`runs_on_engine`).
    """
    engine = getattr(args, "engine", "local")
    if getattr(args, "master", None) is not None and engine != "spark":
        raise ValueError("--master applies to --engine spark; add --engine spark or drop it")
    if getattr(args, "scheduler", None) is not None and engine != "dask":
        raise ValueError("--scheduler applies to --engine dask; add --engine dask or drop it")


def _input_bytes(args: argparse.Namespace) -> int:
    """Return the input's size in memory (Parquet: from its footer), or its file size."""
    from dpfast.io import output_format, parquet_shape

    path = Path(args.input)
    if not path.is_file():
        return 0  # the usual checks report it
    try:
        if output_format(path) == "parquet":
            rows, columns = parquet_shape(path)
            return rows * columns * 8
    except (ValueError, OSError):
        return 0  # not Parquet after all: the reader says so
    return path.stat().st_size


def _source(args: argparse.Namespace, method: str) -> tuple[Any, Any]:
    """Return the column source and the schema: a Parquet dataset, or the input in memory."""
    from dpfast.engines.outofcore import ArrowSource, SchemaCheckedSource
    from dpfast.schema import Schema

    if wants_engine(args):
        schema = Schema.from_json(args.schema)
        source = SchemaCheckedSource(dataset_source(args), schema)
        check_schema_for(args, method, schema)
        return source, schema
    table, schema = _load(args, method)
    return ArrowSource(table), schema


def _spark_source(args: argparse.Namespace) -> Any:
    """Read INPUT with Spark (``--master``, default ``local[*]``) as the engine's source."""
    from dpfast.engines.outofcore import ParquetDataset

    try:
        from dpfast.engines.spark import SparkSource, local_session
    except ImportError as exc:  # pragma: no cover - pyspark is in the test extras
        raise ValueError(
            "--engine spark needs pyspark: pip install 'dpfast[spark]' (and Java 17 or later)"
        ) from exc
    from pyspark.sql import SparkSession

    ParquetDataset.open(args.input)  # a missing or unreadable input fails before Spark starts
    running = SparkSession.getActiveSession()
    session = local_session(args.master or "local[*]")
    if running is None:  # this command started Spark: it stops it when done
        args.stop_spark = session.stop
    # rows numbered as ParquetDataset does, so that laplace keys them as in memory
    return SparkSource.from_parquet(session, args.input)


def _dask_source(args: argparse.Namespace) -> Any:
    """Read INPUT on Dask (``--scheduler``, default a local cluster) as the engine's source."""
    from dpfast.engines.outofcore import ParquetDataset

    try:
        from distributed import Client

        from dpfast.engines import dask as engine
    except ImportError as exc:  # pragma: no cover - dask is in the test extras
        raise ValueError("--engine dask needs dask: pip install 'dpfast[dask]'") from exc

    ParquetDataset.open(args.input)  # a missing or unreadable input fails before Dask starts
    cluster = None if args.scheduler else engine.local_cluster(dashboard_address=":0")
    try:
        client = Client(args.scheduler or cluster)
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    stops = [client.close] + ([cluster.close] if cluster is not None else [])
    args.stop_dask = lambda: [stop() for stop in stops]  # this command's client and cluster
    # rows numbered as ParquetDataset does, so that laplace keys them as in memory
    return engine.DaskSource.from_parquet(args.input)


def run_release(args: argparse.Namespace, method: str) -> int:
    """Release ``args.input`` through the engine; write the data and the reports."""
    from dpfast.engines import parse_memory

    _check_engine_paths(args)
    memory = DEFAULT_MEMORY if args.memory_limit is None else parse_memory(args.memory_limit)
    try:
        return _release_on_engine(args, method, memory)
    finally:
        stop = getattr(args, "stop_spark", None)
        if stop is not None:
            stop()
        stop = getattr(args, "stop_dask", None)
        if stop is not None:
            stop()


def _release_on_engine(args: argparse.Namespace, method: str, memory: int) -> int:
    from dpfast.cli._rowwise import ROWWISE, release_rowwise

    if method in ROWWISE:
        return release_rowwise(args, method, memory)
    if method == "individual-ranking":
        return _individual_ranking_on_engine(args, memory)

    with _spending(args, method):
        source, schema = _source(args, method)
        categorical = method in ("ir-dp", "mdav-dp")
        columns, bounds, taxonomies = _selection(args, schema, categorical=categorical)
        spend = args.spend
        # shown after a second: a quick refusal stays one line
        with _delayed_progress(args) as progress:
            if method == "mdav-dp":
                release = _mdav_dp_on_engine(
                    args, source, columns, bounds, taxonomies, memory, progress, schema
                )
                report, private = release.report, release.private
            else:
                release = _public_release(
                    args, method, source, columns, bounds, taxonomies, memory, progress, schema
                )
                report, private = release.report, release.private
        report = _mark_from_data(report, schema, args)
        public_path, private_path = write_reports(report, private, args.output)
    return _summary(args, report, public_path, private_path, source.n_rows, spend)


def _public_release(
    args: argparse.Namespace,
    method: str,
    source: Any,
    columns: Any,
    bounds: Any,
    taxonomies: Any,
    memory: int,
    progress: Any,
    schema: Any,
) -> Any:
    """Run ``ir-dp`` or ``laplace`` on the engine that ``source`` belongs to, into OUTPUT."""
    from dpfast.methods.ir_dp import ir_dp
    from dpfast.methods.laplace_dp import laplace_dp

    budget = args.spend.budget(schema)
    common: dict[str, Any] = {
        "epsilon": args.epsilon,
        "bounds": bounds,
        "columns": columns,
        "unprotected": args.unprotected,
        "seed": args.seed,
        "progress": progress,
        "output": args.output,
        "memory_limit": memory,
        "budget": budget,
    }
    if method == "ir-dp":
        return ir_dp(
            source,
            k=args.k,
            taxonomies=taxonomies,
            sensitivity=args.sensitivity,
            linkage=args.linkage,
            shuffle=args.shuffle,
            n_threads=args.threads,
            **common,
        )
    return laplace_dp(source, **common)


def _mdav_dp_on_engine(
    args: argparse.Namespace,
    source: Any,
    columns: Any,
    bounds: Any,
    taxonomies: dict[Hashable, Any],
    memory: int,
    progress: Any,
    schema: Any,
) -> Any:
    """Run ``mdav-dp`` on the engine that ``source`` belongs to, into OUTPUT."""
    from dpfast.methods.mdav_dp import mdav_dp

    return mdav_dp(
        source,
        k=args.k,
        epsilon=args.epsilon,
        bounds=bounds,
        taxonomies=taxonomies,
        columns=columns,
        unprotected=args.unprotected,
        reference=args.reference,
        calibration=args.calibration,
        seed=args.seed,
        progress=progress,
        output=args.output,
        memory_limit=memory,
        budget=args.spend.budget(schema),
    )


def _individual_ranking_on_engine(args: argparse.Namespace, memory: int) -> int:
    """``individual-ranking`` out of core: the schema is optional, and nothing is spent."""
    from dpfast.engines.outofcore import SchemaCheckedSource
    from dpfast.methods.individual_ranking import individual_ranking
    from dpfast.schema import Schema

    with _spending(args, "individual-ranking"):
        source: Any = dataset_source(args)
        columns = args.columns
        if args.schema is not None:
            schema = Schema.from_json(args.schema)
            source = SchemaCheckedSource(source, schema)
            check_schema_for(args, "individual-ranking", schema)
            if columns is None:
                columns = schema.protected_numeric()
        with _delayed_progress(args) as progress:
            release = individual_ranking(
                source,
                k=args.k,
                columns=columns,
                output=args.output,
                memory_limit=memory,
                progress=progress,
            )
        report, private = release.report, release.private
        public_path, private_path = write_reports(report, private, args.output)
    return _summary(args, report, public_path, private_path, source.n_rows, args.spend)


def _check_engine_paths(args: argparse.Namespace) -> None:
    """Fail fast on paths the engine cannot read or write, with the in-memory messages."""
    from dpfast.io import output_format

    if getattr(args, "engine", "local") == "spark" and not _is_text(args.output):
        from dpfast.engines.spark import check_spark_output

        check_spark_output(args.output)  # before Spark starts
    if getattr(args, "engine", "local") == "dask" and not _is_text(args.output):
        from dpfast.engines.dask import check_dask_output

        check_dask_output(args.output)  # before Dask starts
    dataset_output = not Path(args.output).suffix
    if not is_dataset_path(args.input) and not dataset_output:
        _check_paths(args)  # one input file, one output file: the usual checks
        engine = "--engine spark" if getattr(args, "engine", "local") == "spark" else None
        if getattr(args, "engine", "local") == "dask":
            engine = "--engine dask"
        if (engine or args.memory_limit is not None) and output_format(args.input) != "parquet":
            raise ValueError(
                f"{engine or '--memory-limit'} reads Parquet, but {args.input!r} is "
                f"{output_format(args.input)}; convert it to Parquet first, or drop "
                "--memory-limit to release it in memory"
            )
        return
    if args.delimiter is not None or args.encoding is not None:
        raise ValueError(
            "--delimiter and --encoding apply to CSV and TSV files; a Parquet dataset takes neither"
        )
    if not is_dataset_path(args.input) and output_format(args.input) != "parquet":
        raise ValueError(
            f"a dataset directory output is written from Parquet input, but {args.input!r} "
            f"is {output_format(args.input)}; write OUTPUT as a .parquet file instead"
        )
    parent = Path(args.output).parent
    if not parent.is_dir():
        raise ValueError(f"output directory {str(parent)!r} does not exist; create it first")
    if not dataset_output:
        if output_format(args.output) != "parquet":
            raise ValueError(
                f"out of core writes Parquet, but {args.output!r} is "
                f"{output_format(args.output)}; name OUTPUT .parquet, or a directory"
            )
        if Path(args.output).is_dir():
            raise ValueError(
                f"output {args.output!r} is a directory; name OUTPUT without an extension "
                "to write a dataset directory"
            )
    elif Path(args.output).exists() and not Path(args.output).is_dir():
        raise ValueError(
            f"output {args.output!r} exists and is not a directory; choose another OUTPUT"
        )
    check_overwrite(args.output, force=args.force, flag="-o")
    for path in report_paths(args.output):
        check_overwrite(path, force=args.force, flag="-o")
