"""``k-noise``, ``k-pram`` and ``randomized-response`` through the engine (docs/engines.md).

Reached from :func:`dpfast.cli._engine.run_release` when INPUT is a directory or a glob,
``--memory-limit`` or ``--engine spark|dask`` is given: the public function releases the
input's column source (a Parquet dataset, or a Spark or Dask frame of it) batch by batch
into OUTPUT, the release the in-memory function gives.
"""

from __future__ import annotations

import argparse
from typing import Any

from dpfast.cli._common import (
    _delayed_progress,
    _mark_from_data,
    _spending,
    _summary,
    check_schema_for,
    write_reports,
)

#: The CLI's row-wise methods that run out of core.
ROWWISE = ("k-noise", "k-pram", "randomized-response")


def _source(args: argparse.Namespace, method: str) -> tuple[Any, Any]:
    """Return the Parquet dataset of INPUT (checked against ``--schema``, if any) and the schema."""
    from dpfast.cli._engine import dataset_source
    from dpfast.engines.outofcore import SchemaCheckedSource
    from dpfast.schema import Schema

    files = dataset_source(args)
    if args.schema is None:
        return files, None
    schema = Schema.from_json(args.schema)
    source = SchemaCheckedSource(files, schema)
    if method != "randomized-response":
        check_schema_for(args, method, schema)
    return source, schema


def _numeric_columns(args: argparse.Namespace, schema: Any) -> Any:
    if args.columns is None and schema is not None:
        return schema.protected_numeric()
    return args.columns


def release_rowwise(args: argparse.Namespace, method: str, memory: int) -> int:
    """Release INPUT with a row-wise method out of core; write the data and the reports."""
    from dpfast.cli._mechanisms import rr_domain
    from dpfast.methods.k_noise import k_noise
    from dpfast.methods.k_pram import k_pram
    from dpfast.methods.randomized_response import randomized_response

    with _spending(args, method):
        source, schema = _source(args, method)
        spend = args.spend
        common: dict[str, Any] = {
            "seed": args.seed,
            "n_threads": args.threads,
            "output": args.output,
            "memory_limit": memory,
        }
        with _delayed_progress(args) as progress:
            if method == "k-noise":
                columns = _numeric_columns(args, schema)
                release = k_noise(source, k=args.k, columns=columns, progress=progress, **common)
            elif method == "k-pram":
                release = k_pram(
                    source,
                    k=args.k,
                    columns=_numeric_columns(args, schema),
                    retention=args.retention,
                    progress=progress,
                    **common,
                )
            else:
                release = randomized_response(
                    source,
                    column=args.column,
                    domain=rr_domain(args, schema),
                    epsilon=args.epsilon,
                    retention=args.retention,
                    progress=progress,
                    budget=spend.budget(schema),
                    **common,
                )
        report, private = release.report, release.private
        if schema is not None:
            report = _mark_from_data(report, schema, args)
        public_path, private_path = write_reports(report, private, args.output)
    return _summary(args, report, public_path, private_path, source.n_rows, spend)
