"""What a release command reads: INPUT in memory, or as a column source read in passes.

A command reads INPUT whole, as a table, and releases it in memory, unless it is to be
read in passes: a directory of Parquet files or a glob, ``--memory-limit``, ``--engine
spark`` or ``dask``, or a Parquet INPUT of at least :data:`ENGINE_FROM_BYTES` released
to Parquet. Then INPUT is a column source (Parquet files, or Parquet files read by Spark
or Dask), its batches checked against the schema as they are read, and the public
function's engine is the one that source belongs to. Either way the release is the same.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpfast.cli._outputs import report_paths
from dpfast.cli._progress import delayed_progress
from dpfast.exceptions import DPFastImportError, DPFastValueError

__all__ = [
    "DEFAULT_MEMORY",
    "ENGINE_FROM_BYTES",
    "Input",
    "check_engine_options",
    "check_overwrite",
    "check_paths",
    "check_schema_for",
    "is_dataset_path",
    "numeric_columns",
    "opened",
    "output_delimiter",
    "protected_arguments",
    "read_input",
    "reads_in_passes",
    "schema_taxonomies",
    "selected",
]

#: The working memory of a release read in passes when ``--memory-limit`` is not given.
DEFAULT_MEMORY = 4 * 2**30
#: Inputs smaller than this (rows x columns x 8 bytes) are released in memory, whose fixed
#: costs are lower; larger ones are read in passes, column by column. Both give the same
#: release.
ENGINE_FROM_BYTES = 64 * 2**20


@dataclass
class Input:
    """INPUT as a command releases it: a table (in memory) or a column source, its schema."""

    data: Any
    schema: Any
    in_passes: bool

    @property
    def n_rows(self) -> int:
        """The number of input rows."""
        data = self.data
        if hasattr(data, "n_rows"):
            return int(data.n_rows)
        return int(data.num_rows if hasattr(data, "num_rows") else len(data))


def reads_in_passes(args: argparse.Namespace) -> bool:
    """Return whether INPUT is read in passes rather than whole (see the module docstring)."""
    if (
        getattr(args, "memory_limit", None) is not None
        or is_dataset_path(args.input)
        or getattr(args, "engine", "local") in ("spark", "dask")
    ):
        return True
    if _is_text(args.output) or not hasattr(args, "engine"):
        return False  # a text output is written in memory; a method without engines
    size = _parquet_bytes(args.input)
    return size is not None and size >= ENGINE_FROM_BYTES


@contextlib.contextmanager
def opened(
    args: argparse.Namespace, method: str, *, in_passes: bool, schema_check: bool = True
) -> Iterator[Input]:
    """Yield INPUT read whole, or as a column source (``in_passes``); stop what it started.

    The schema (``--schema``, if any) is read first; a table is cast to its declared
    types, a source's batches as they are read. ``schema_check`` refuses a schema whose
    protected columns ``method`` cannot release (:func:`check_schema_for`).
    """
    from dpfast.schema import Schema

    schema = None if getattr(args, "schema", None) is None else Schema.from_json(args.schema)
    try:
        if in_passes:
            data = _source(args)
            if schema is not None:
                from dpfast.engines.outofcore import SchemaCheckedSource

                data = SchemaCheckedSource(data, schema)
        else:
            data = read_input(args)
            if schema is not None:
                data = schema.check_table(data)
        if schema is not None and schema_check:
            check_schema_for(args, method, schema)
        yield Input(data, schema, in_passes)
    finally:
        for name in ("close_input", "stop_spark", "stop_dask"):  # what this command started
            stop = getattr(args, name, None)
            if stop is not None:
                delattr(args, name)
                stop()


def check_paths(args: argparse.Namespace, *, in_passes: bool) -> None:
    """Fail fast, before any work, on paths the release cannot read or write."""
    check_engine_options(args)
    if in_passes:
        _check_dataset_paths(args)
    else:
        _check_file_paths(args)


def _source(args: argparse.Namespace) -> Any:
    """Return INPUT as a column source: read by Spark or Dask (``--engine``) or by files."""
    from dpfast.engines.outofcore import ParquetDataset

    if getattr(args, "engine", "local") == "spark":
        return _spark_source(args)
    from dpfast.io import is_text_path

    if getattr(args, "engine", "local") == "dask":
        return _dask_source(args)
    if is_text_path(args.input):
        return _csv_source(args)
    return ParquetDataset.open(args.input)


def _csv_source(args: argparse.Namespace) -> Any:
    """Convert a CSV or TSV INPUT (a file or a glob) to Parquet beside OUTPUT, batch by batch.

    Within ``--memory-limit``, with ``--delimiter`` and ``--encoding`` as a table read in
    memory takes them; the converted files are removed when the command ends.
    """
    from dpfast.engines import parse_memory
    from dpfast.engines.outofcore import CsvSource

    memory = DEFAULT_MEMORY if args.memory_limit is None else parse_memory(args.memory_limit)
    with delayed_progress(args) as progress:
        source = CsvSource.open(
            args.input,
            args.output,
            memory,
            delimiter=getattr(args, "delimiter", None),
            encoding=getattr(args, "encoding", None) or "utf-8",
            progress=progress,
        )
    args.close_input = source.close
    return source


def _is_text(path: str) -> bool:
    name = Path(path).name.lower()
    return any(name.endswith(s) for s in (".csv", ".tsv", ".csv.gz", ".tsv.gz"))


def _parquet_bytes(path: str) -> int | None:
    """Return a Parquet file's size in memory (rows x columns x 8, from its footer).

    ``None`` for anything else (a text file is read whole; a missing or unreadable input
    is reported by the usual checks).
    """
    from dpfast.io import output_format, parquet_shape

    if not Path(path).is_file():
        return None
    try:
        if output_format(path) == "parquet":
            rows, columns = parquet_shape(path)
            return rows * columns * 8
    except (ValueError, OSError):
        return None  # not Parquet after all: the reader says so
    return None


def check_engine_options(args: argparse.Namespace) -> None:
    """Refuse ``--master`` or ``--scheduler`` without their engine."""
    engine = getattr(args, "engine", "local")
    if getattr(args, "master", None) is not None and engine != "spark":
        raise DPFastValueError("--master applies to --engine spark; add --engine spark or drop it")
    if getattr(args, "scheduler", None) is not None and engine != "dask":
        raise DPFastValueError("--scheduler applies to --engine dask; add --engine dask or drop it")


def _spark_source(args: argparse.Namespace) -> Any:
    """Read INPUT with Spark (``--master``, default ``local[*]``) as the engine's source."""
    from dpfast.engines.outofcore import ParquetDataset

    try:
        from pyspark.sql import SparkSession

        from dpfast.engines.spark import SparkSource, local_session
    except ImportError as exc:
        raise DPFastImportError(
            "--engine spark needs pyspark: pip install 'dpfast[spark]' (and Java 17 or later)"
        ) from exc

    ParquetDataset.open(args.input)  # a missing or unreadable input fails before Spark starts
    running = SparkSession.getActiveSession()
    session = local_session(args.master or "local[*]", quiet=args.quiet)
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
    except ImportError as exc:
        raise DPFastImportError("--engine dask needs dask: pip install 'dpfast[dask]'") from exc

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


def numeric_columns(args: argparse.Namespace, schema: Any) -> list[str] | None:
    """Return ``--columns``, else the schema's protected numeric columns (None: every column)."""
    columns: list[str] | None = args.columns
    if columns is None and schema is not None:
        columns = schema.protected_numeric()
    return columns


def protected_arguments(
    args: argparse.Namespace, schema: Any, *, categorical: bool
) -> dict[str, Any]:
    """Return the arguments of a release of the schema's protected columns, from the options.

    ``columns`` (:func:`selected`), their public ``bounds`` (a :class:`~dpfast.DPBounds`
    where the schema declares ``"dp_bounds"``) and, if ``categorical``, their
    ``taxonomies``; ``epsilon``, ``unprotected`` and ``seed``; and where the schema gives
    them, the columns' ``epsilon_weights`` and ``transforms``.
    """
    columns = selected(args, schema, categorical=categorical)
    bounds = {**schema.bounds(), **schema.dp_bounds()}  # "dp_bounds": chosen with DP within
    arguments: dict[str, Any] = {
        "epsilon": args.epsilon,
        "bounds": {name: bound for name, bound in bounds.items() if name in columns},
        "columns": columns,
        "unprotected": args.unprotected,
        "seed": args.seed,
    }
    if categorical:
        arguments["taxonomies"] = schema_taxonomies(schema, columns)
    weights = schema.epsilon_weights(columns)
    if weights is not None:
        arguments["epsilon_weights"] = weights
    transforms = {c: t for c, t in schema.transforms().items() if c in columns}
    if transforms:
        arguments["transforms"] = transforms
    return arguments


def selected(args: argparse.Namespace, schema: Any, *, categorical: bool) -> list[str]:
    """Return the columns to protect: ``--columns`` (declared, protected), else the schema's."""
    declared: list[str] = schema.protected_numeric()
    if categorical:
        declared = declared + schema.protected_categorical()
    chosen = getattr(args, "columns", None)
    if chosen is None:
        return declared
    kinds = "numeric" + (' or categorical (with a "taxonomy")' if categorical else "")
    wrong = [c for c in chosen if c not in declared]
    if wrong:
        from dpfast._validation import quoted

        raise DPFastValueError(
            f"--columns names {quoted(wrong, listed=True)}, which {args.schema} does not "
            f"declare as a protected {kinds} column; declare it there (with its bounds or "
            "taxonomy), or leave it out of --columns"
        )
    return list(chosen)


def is_dataset_path(path: str) -> bool:
    """Return whether ``path`` names a directory or a glob rather than one file."""
    return Path(path).is_dir() or glob.has_magic(str(path))


def _check_file_paths(args: argparse.Namespace) -> None:
    """Fail fast, before any work, on output paths that cannot be written."""
    from dpfast.io import output_format

    text_input = output_format(args.input) != "parquet"
    text_output = output_format(args.output) != "parquet"
    if getattr(args, "delimiter", None) is not None and not (text_input or text_output):
        raise DPFastValueError(
            "--delimiter applies to CSV and TSV files, but the input and the output are "
            "Parquet; leave it out"
        )
    if getattr(args, "encoding", None) is not None and not text_input:
        raise DPFastValueError(
            f"--encoding applies to a CSV or TSV input, but {args.input!r} is Parquet; leave it out"
        )
    out = Path(args.output)
    if out.is_dir():
        raise DPFastValueError(
            f"output {args.output!r} is a directory; give a file name such as "
            f"{os.path.join(args.output, 'released.parquet')!r}"
        )
    parent = out.parent
    if not parent.is_dir():
        raise DPFastValueError(f"output directory {str(parent)!r} does not exist; create it first")
    if Path(args.input).exists() and out.exists() and out.resolve() == Path(args.input).resolve():
        raise DPFastValueError("the output would overwrite the input; choose another -o path")
    check_overwrite(args.output, force=args.force, flag="-o")


def check_overwrite(output: str | os.PathLike[str], *, force: bool, flag: str) -> None:
    """Refuse, before any work, to replace ``output`` or its reports unless ``force``.

    A release that overwrote an earlier one would publish a second draw on the same data
    and spend the privacy budget again.
    """
    if force:
        return
    for path in (os.fspath(output), *report_paths(output)):
        if os.path.lexists(path):
            raise DPFastValueError(
                f"{path!r} already exists; pass --force to overwrite it (a new release spends "
                f"the privacy budget again), or choose another {flag} path"
            )


def read_input(args: argparse.Namespace) -> Any:
    """Read the input with the command's --delimiter and --encoding; refuse an empty table."""
    from dpfast.io import output_format, read_table

    text = output_format(args.input) != "parquet"
    with delayed_progress(args) as progress:
        table = read_table(
            args.input,
            delimiter=getattr(args, "delimiter", None) if text else None,
            encoding=getattr(args, "encoding", None) or "utf-8",
            progress=progress,
        )
    if table.num_rows == 0:  # one message for a header-only CSV and an empty Parquet file
        raise DPFastValueError(f"{args.input}: the table is empty (0 rows); nothing to release")
    return table


def output_delimiter(args: argparse.Namespace) -> str | None:
    """Return --delimiter for a CSV or TSV output, else None."""
    from dpfast.io import output_format

    if output_format(args.output) == "parquet":
        return None
    return getattr(args, "delimiter", None)


def check_schema_for(args: argparse.Namespace, method: str, schema: Any) -> None:
    """Refuse a schema whose protected columns ``method`` cannot release."""
    categorical = schema.protected_categorical()
    if getattr(args, "columns", None) is not None:
        categorical = [c for c in categorical if c in args.columns]
    with_taxonomies = method in ("ir-dp", "mdav", "mdav-dp")
    if with_taxonomies:
        categorical = [c for c in categorical if schema[c].taxonomy is None]
    if categorical:
        from dpfast._validation import quoted

        also = ' and categorical columns with a "taxonomy"' if with_taxonomies else ""
        raise DPFastValueError(
            f"{args.schema}: {method} protects numeric columns only{also}, but the "
            f"schema protects categorical column(s) "
            f"{quoted(categorical, listed=True)}"
            f"{' without a taxonomy' if also else ''}; "
            + ('add "taxonomy": "hierarchy.csv" (ARX format), or ' if also else "")
            + 'set "protect": false for them (they are then released as --unprotected '
            "says), or drop them"
        )
    has_categorical = with_taxonomies and schema.protected_categorical()
    if (
        not schema.protected_numeric()
        and not has_categorical
        and not getattr(args, "columns", None)
    ):
        raise DPFastValueError(
            f"{args.schema}: no protected numeric column, so there is nothing to release; "
            'declare at least one "integer" or "float" column with "bounds"'
        )


def schema_taxonomies(schema: Any, columns: Sequence[str] | None = None) -> dict[Hashable, Any]:
    """Return the taxonomies of the protected categorical columns (of ``columns`` if given)."""
    from dpfast.taxonomy import as_taxonomy

    return {
        name: as_taxonomy(schema[name].taxonomy, name)
        for name in schema.protected_categorical()
        if columns is None or name in columns
    }


def _check_dataset_paths(args: argparse.Namespace) -> None:
    """Fail fast on paths the engine cannot read or write, with the in-memory messages."""
    from dpfast.io import is_text_path, output_format

    if _is_text(args.output):
        what = "--memory-limit" if getattr(args, "memory_limit", None) else "out of core"
        raise DPFastValueError(
            f"out of core writes Parquet, but {args.output!r} is text; name OUTPUT .parquet or "
            f"a directory, or drop {what} to release in memory"
        )
    dataset_output = not Path(args.output).suffix
    if not is_dataset_path(args.input) and not dataset_output:
        _check_file_paths(args)  # one input file, one output file: the usual checks
        engine = "--engine spark" if getattr(args, "engine", "local") == "spark" else None
        if getattr(args, "engine", "local") == "dask":
            engine = "--engine dask"
        if engine and output_format(args.input) != "parquet":
            raise DPFastValueError(
                f"{engine or '--memory-limit'} reads Parquet, but {args.input!r} is "
                f"{output_format(args.input)}; convert it to Parquet first, or drop "
                "--memory-limit to release it in memory"
            )
        return
    text_input = is_text_path(args.input)
    if (args.delimiter is not None or args.encoding is not None) and not text_input:
        raise DPFastValueError(
            "--delimiter and --encoding apply to CSV and TSV files; a Parquet dataset takes neither"
        )
    cluster = getattr(args, "engine", "local") in ("spark", "dask")
    if not is_dataset_path(args.input) and text_input and cluster:
        raise DPFastValueError(
            f"a dataset directory output is written from Parquet input, but {args.input!r} "
            f"is {output_format(args.input)}; write OUTPUT as a .parquet file instead"
        )
    parent = Path(args.output).parent
    if not parent.is_dir():
        raise DPFastValueError(f"output directory {str(parent)!r} does not exist; create it first")
    if not dataset_output:
        if output_format(args.output) != "parquet":
            raise DPFastValueError(
                f"out of core writes Parquet, but {args.output!r} is "
                f"{output_format(args.output)}; name OUTPUT .parquet, or a directory"
            )
        if Path(args.output).is_dir():
            raise DPFastValueError(
                f"output {args.output!r} is a directory; name OUTPUT without an extension "
                "to write a dataset directory"
            )
    elif Path(args.output).exists() and not Path(args.output).is_dir():
        raise DPFastValueError(
            f"output {args.output!r} exists and is not a directory; choose another OUTPUT"
        )
    check_overwrite(args.output, force=args.force, flag="-o")
    for path in report_paths(args.output):
        check_overwrite(path, force=args.force, flag="-o")
