"""``dpfast release diffgen``: DiffGen's generalised contingency table."""

from __future__ import annotations

import argparse
from collections.abc import Hashable
from typing import Any

from dpfast.cli._common import (
    Command,
    _budget_argument,
    _check_paths,
    _column_list,
    _delayed_progress,
    _finish,
    _integer,
    _io_arguments,
    _mark_from_data,
    _note,
    _number,
    _quiet_argument,
    _read_input,
    _spending,
    _summary,
    write_reports,
)
from dpfast.cli._numeric import _engine_arguments, _memory_argument

_DIFFGEN_EXAMPLES = """\
examples:
  dpfast release diffgen adult.parquet -o counts.parquet --target income --steps 10 \\
      --epsilon 1 --schema adult.diffgen.schema.json
  dpfast release diffgen adult.csv -o records.csv --target income --steps 10 --epsilon 1 \\
      --schema adult.diffgen.schema.json --classes "<=50K,>50K" --microdata --seed 7
  dpfast release diffgen adult-parts/ -o counts.parquet --target income --steps 10 \\
      --epsilon 1 --schema adult.diffgen.schema.json --memory-limit 2GiB

The schema gives each numeric predictor its public "bounds" and each categorical predictor
a "taxonomy" (ARX hierarchy file); columns with "protect": false are not released. The
class values must be public: a "taxonomy" for the target column, or --classes.
Writes OUTPUT (one row per leaf partition and class, with a noisy count; --microdata:
the counts expanded into records), OUTPUT.public-report.json (ledger, guarantee, the cut:
may be published with the data) and OUTPUT.private-report.json (keep it private).
An example schema: dpfast/datasets/adult_diffgen.schema.json (see docs/diffgen.md).
A directory or glob INPUT, or --memory-limit, runs out of core (Parquet in and out; the
same release; docs/engines.md).
"""


def _diffgen_arguments(parser: argparse.ArgumentParser) -> None:
    _io_arguments(parser)
    parser.add_argument("--target", required=True, help="the class column")
    parser.add_argument("--steps", type=_integer, required=True, help="specialisations (>= 0)")
    parser.add_argument("--epsilon", type=_number, required=True, help="total privacy budget")
    parser.add_argument(
        "--schema", required=True, help="schema JSON: numeric bounds and categorical taxonomies"
    )
    parser.add_argument(
        "--utility",
        choices=("max", "info_gain"),
        default="max",
        help="score of a specialisation (default: max)",
    )
    parser.add_argument(
        "--classes",
        type=_column_list,
        help="comma-separated public class values (else the target's taxonomy)",
    )
    parser.add_argument(
        "--microdata",
        action="store_true",
        help="write the counts expanded into records instead of the table",
    )
    parser.add_argument("--seed", type=_integer, help="seeded noise: NOT for publication")
    _memory_argument(parser)
    _engine_arguments(parser)
    _budget_argument(parser)
    _quiet_argument(parser)


def _release_diffgen(args: argparse.Namespace) -> int:
    from types import SimpleNamespace

    from dpfast.cli._engine import check_engine_options, wants_engine
    from dpfast.methods.diffgen import diffgen
    from dpfast.schema import Schema

    check_engine_options(args, "diffgen")
    if wants_engine(args):
        return _release_diffgen_out_of_core(args)
    _check_paths(args)
    with _spending(args, "diffgen"):
        table = _read_input(args)
        schema = Schema.from_json(args.schema)
        table = schema.check_table(table)
        release = diffgen(table, **_diffgen_options(args, schema))
        data = release.microdata() if args.microdata else release.counts
        for note in release.report.notes:
            _note(args, note)
        report = _mark_from_data(release.report, schema, args)
        return _finish(args, SimpleNamespace(data=data, report=report, private=release.private))


def _diffgen_options(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    """Return the keyword arguments of ``diffgen`` from the options and the schema."""
    from dpfast.taxonomy import as_taxonomy

    if args.target not in schema:
        raise ValueError(
            f"{args.schema}: the target {args.target!r} is not declared; add it as a "
            '"categorical" column (with a "taxonomy" listing its public values, or pass '
            "--classes)"
        )
    no_taxonomy = [
        c for c in schema.protected_categorical() if schema[c].taxonomy is None and c != args.target
    ]
    if no_taxonomy:
        raise ValueError(
            f"{args.schema}: diffgen generalises categorical predictors with a taxonomy, but "
            f'{", ".join(repr(c) for c in no_taxonomy)} have none; add "taxonomy": '
            '"hierarchy.csv" (ARX format), or set "protect": false to leave them out'
        )
    taxonomies: dict[Hashable, Any] = {}
    for column in schema.protected_categorical():
        hierarchy = schema[column].taxonomy
        if hierarchy is not None:
            taxonomies[column] = as_taxonomy(hierarchy, column)
    if args.target not in taxonomies and args.classes is None:
        raise ValueError(
            'the class values must be public: give the target a "taxonomy" in the schema '
            "or pass --classes with its values"
        )
    bounds: dict[Hashable, tuple[float, float]] = {
        c: b for c, b in schema.bounds().items() if c != args.target
    }
    return {
        "target": args.target,
        "epsilon": args.epsilon,
        "steps": args.steps,
        "taxonomies": taxonomies,
        "bounds": bounds,
        "utility": args.utility,
        "classes": args.classes,
        "seed": args.seed,
    }


def _release_diffgen_out_of_core(args: argparse.Namespace) -> int:
    """Release a Parquet file or dataset out of core (``--memory-limit``, a directory, a glob)."""
    from dpfast.cli._engine import DEFAULT_MEMORY, _check_engine_paths, _is_text
    from dpfast.engines import parse_memory

    _check_engine_paths(args)
    if _is_text(args.output):
        raise ValueError(
            f"out of core writes Parquet, but {args.output!r} is text; name OUTPUT .parquet "
            "or a directory, or drop --memory-limit to release in memory"
        )
    memory = DEFAULT_MEMORY if args.memory_limit is None else parse_memory(args.memory_limit)
    try:
        return _diffgen_on_engine(args, memory)
    finally:
        for name in ("stop_spark", "stop_dask"):  # what this command started
            stop = getattr(args, name, None)
            if stop is not None:
                stop()


def _diffgen_on_engine(args: argparse.Namespace, memory: int) -> int:
    from dpfast.cli._engine import dataset_source
    from dpfast.engines.outofcore import ParquetDataset, SchemaCheckedSource
    from dpfast.methods.diffgen import diffgen
    from dpfast.schema import Schema

    with _spending(args, "diffgen"):
        schema = Schema.from_json(args.schema)
        source = SchemaCheckedSource(dataset_source(args), schema)
        options = _diffgen_options(args, schema)
        spend = args.spend
        with _delayed_progress(args) as progress:
            release = diffgen(
                source,
                output=args.output,
                microdata=args.microdata,
                memory_limit=memory,
                progress=progress,
                budget=spend.budget(schema),
                **options,
            )
        report = release.report
        for note in report.notes:
            _note(args, note)
        report = _mark_from_data(report, schema, args)
        public_path, private_path = write_reports(report, release.private, args.output)
        written = ParquetDataset.open(args.output).n_rows
    return _summary(args, report, public_path, private_path, written, spend)


COMMANDS = (
    Command(
        "diffgen",
        help="generalised contingency table for classification (DiffGen, differential privacy)",
        description="DiffGen (Mohammed et al., KDD 2011): top-down specialisation chosen by "
        "the exponential mechanism, then noisy counts of every leaf partition and class.",
        epilog=_DIFFGEN_EXAMPLES,
        arguments=_diffgen_arguments,
        handler=_release_diffgen,
    ),
)
