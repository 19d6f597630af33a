"""``dpfast release diffgen``: DiffGen's generalised contingency table."""

from __future__ import annotations

import argparse
from collections.abc import Hashable
from typing import Any

from dpfast.cli._parsing import (
    Command,
    column_list,
    integer,
    io_arguments,
    number,
    run_arguments,
)
from dpfast.cli._runner import Method, release
from dpfast.exceptions import DPFastValueError

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
    io_arguments(parser)
    parser.add_argument("--target", required=True, help="the class column")
    parser.add_argument("--steps", type=integer, required=True, help="specialisations (>= 0)")
    parser.add_argument("--epsilon", type=number, required=True, help="total privacy budget")
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
        type=column_list,
        help="comma-separated public class values (else the target's taxonomy)",
    )
    parser.add_argument(
        "--microdata",
        action="store_true",
        help="write the counts expanded into records instead of the table",
    )
    run_arguments(parser)


def _release_diffgen(args: argparse.Namespace) -> int:
    from dpfast.methods.diffgen import diffgen

    method = Method(
        "diffgen",
        diffgen,
        _diffgen_options,
        spends=True,
        schema_check=False,  # its own checks (_diffgen_options)
        written=lambda made, args: made.microdata() if args.microdata else made.counts,
        options=lambda args: {"microdata": args.microdata},
        show_notes=True,
    )
    return release(args, method)


def _diffgen_options(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    """Return the keyword arguments of ``diffgen`` from the options and the schema."""
    from dpfast._validation import quoted
    from dpfast.taxonomy import as_taxonomy

    if args.target not in schema:
        raise DPFastValueError(
            f"{args.schema}: the target {quoted(args.target)} is not declared; add it as a "
            '"categorical" column (with a "taxonomy" listing its public values, or pass '
            "--classes)"
        )
    no_taxonomy = [
        c for c in schema.protected_categorical() if schema[c].taxonomy is None and c != args.target
    ]
    if no_taxonomy:
        raise DPFastValueError(
            f"{args.schema}: diffgen generalises categorical predictors with a taxonomy, but "
            f'{quoted(no_taxonomy, listed=True)} have none; add "taxonomy": '
            '"hierarchy.csv" (ARX format), or set "protect": false to leave them out'
        )
    taxonomies: dict[Hashable, Any] = {}
    for column in schema.protected_categorical():
        hierarchy = schema[column].taxonomy
        if hierarchy is not None:
            taxonomies[column] = as_taxonomy(hierarchy, column)
    if args.target not in taxonomies and args.classes is None:
        raise DPFastValueError(
            'the class values must be public: give the target a "taxonomy" in the schema '
            "or pass --classes with its values"
        )
    bounds: dict[Hashable, tuple[float, float]] = {
        c: b for c, b in schema.bounds().items() if c != args.target
    }
    chosen = [c for c in schema.dp_bounds() if c in bounds]
    if chosen:
        raise DPFastValueError(
            f'{args.schema} declares "dp_bounds" for {", ".join(repr(c) for c in chosen)}, '
            "but diffgen takes public bounds only (bounds chosen with DP are for ir-dp, "
            'mdav-dp and laplace); remove "dp_bounds" there, or use a schema without them'
        )
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
