"""``dpfast release`` ir-dp, laplace and individual-ranking: the numeric releases."""

from __future__ import annotations

import argparse
from typing import Any

from dpfast.cli._inputs import numeric_columns, protected_arguments
from dpfast.cli._parsing import (
    Command,
    bounded_arguments,
    column_list,
    columns_argument,
    integer,
    io_arguments,
    run_arguments,
    unprotected_argument,
)
from dpfast.cli._runner import Method, release

_IR_DP_EXAMPLES = """\
examples:
  # protect the schema's numeric columns with k = 25 and a total budget of epsilon = 1
  dpfast release ir-dp people.parquet -o released.parquet --k 25 --epsilon 1 \\
      --schema people.schema.json

  # keep the columns the schema does not protect, unchanged, in an order of their own
  # (they are NOT protected; the guarantee becomes "protected_only")
  dpfast release ir-dp people.csv -o released.csv --k 25 --epsilon 1 \\
      --schema people.schema.json --unprotected shuffle

  # reproducible noise for tests (the report says: not for publication)
  dpfast release ir-dp people.csv -o released.csv --k 25 --epsilon 1 \\
      --schema people.schema.json --seed 42

  # categorical columns with a "taxonomy" in the schema are protected too (exponential
  # mechanism with a proven sensitivity)
  dpfast release ir-dp adult.parquet -o released.parquet --k 25 --epsilon 1 \\
      --schema dpfast/datasets/adult_mixed.schema.json

By default each protected column is shuffled on its own (proven epsilon-DP; rows are not
linked across columns). --linkage records keeps rows linked as the paper does: NOT proven
differentially private (use mdav-dp for linked rows with a proof).
Writes OUTPUT, OUTPUT.public-report.json (method, epsilon ledger, guarantee: may be
published with the data) and OUTPUT.private-report.json (exact clamped counts, timings:
keep it private). Columns the schema does not protect are left out unless --unprotected
says otherwise. Schema format: docs/schema.md. Example: dpfast/datasets/adult.schema.json.
"""

_LAPLACE_EXAMPLES = """\
examples:
  dpfast release laplace people.parquet -o noisy.parquet --epsilon 1 --schema people.schema.json
  dpfast release laplace people.csv -o noisy.csv --epsilon 1 --schema people.schema.json --seed 7

Every protected cell gets independent noise of scale m * (upper - lower) / epsilon.
Columns the schema does not protect are left out unless --unprotected says otherwise.
"""

_IR_EXAMPLES = """\
examples:
  dpfast release individual-ranking people.csv -o grouped.csv --k 3 --columns age,income
  dpfast release individual-ranking people.parquet -o grouped.parquet --k 3 \\
      --schema people.schema.json

Microaggregation without noise: NOT differentially private (the report says so).
Protects --columns, or else the schema's protected numeric columns, or else every column.
"""


def _remainder_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--remainder",
        choices=("middle", "last"),
        default="middle",
        help="the rank group that holds the n mod k values left over: middle (among "
        "typical values, where the larger group costs least) or last (the largest values, "
        "as sdcMicro does; for comparison with it). Default: middle",
    )


def _ir_dp_arguments(parser: argparse.ArgumentParser) -> None:
    bounded_arguments(parser, k_help="group size (>= 1)")
    parser.add_argument(
        "--linkage",
        choices=("columns", "records"),
        default="columns",
        help="columns: each protected column shuffled on its own (proven epsilon-DP); "
        "records: rows stay linked as in the paper, NOT proven differentially private. "
        "Default: columns",
    )
    parser.add_argument(
        "--no-shuffle",
        dest="shuffle",
        action="store_false",
        help="keep rows in input order (default: random order)",
    )
    parser.add_argument(
        "--sensitivity",
        choices=("proven", "paper"),
        default="proven",
        help="categorical columns' exponential mechanism: proven (n_groups times the "
        "taxonomy's largest distance) or paper (the largest distance per group, as the "
        "paper does: NOT proven). Default: proven",
    )
    _remainder_argument(parser)
    columns_argument(parser)
    unprotected_argument(parser, "rank group", keep_needs="--linkage records")
    run_arguments(parser, threads=True)


def _laplace_arguments(parser: argparse.ArgumentParser) -> None:
    bounded_arguments(parser, k_help=None)
    columns_argument(parser)
    unprotected_argument(parser, None)
    run_arguments(parser)


def _individual_ranking_arguments(parser: argparse.ArgumentParser) -> None:
    io_arguments(parser)
    parser.add_argument("--k", type=integer, required=True, help="group size (>= 2)")
    parser.add_argument("--schema", help="schema JSON (its protected numeric columns)")
    parser.add_argument("--columns", type=column_list, help="comma-separated columns to aggregate")
    _remainder_argument(parser)
    run_arguments(parser, seed=False, budget=False)


def _ir_dp(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    return {
        **protected_arguments(args, schema, categorical=True),
        "k": args.k,
        "sensitivity": args.sensitivity,
        "linkage": args.linkage,
        "shuffle": args.shuffle,
        "n_threads": args.threads,
        "remainder": args.remainder,
    }


def _laplace(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    return protected_arguments(args, schema, categorical=False)


def _individual_ranking(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    return {"k": args.k, "columns": numeric_columns(args, schema), "remainder": args.remainder}


def _method(name: str) -> Method:
    from dpfast.methods.individual_ranking import individual_ranking
    from dpfast.methods.ir_dp import ir_dp
    from dpfast.methods.laplace_dp import laplace_dp

    methods = {
        "ir-dp": Method("ir-dp", ir_dp, _ir_dp, spends=True),
        "laplace": Method("laplace", laplace_dp, _laplace, spends=True),
        "individual-ranking": Method(
            "individual-ranking",
            individual_ranking,
            _individual_ranking,
            note="individual-ranking adds no noise: the output is NOT differentially private",
        ),
    }
    return methods[name]


COMMANDS = (
    Command(
        "ir-dp",
        help="individual-ranking microaggregation + noise (differential privacy)",
        description=(
            "Differential privacy via individual-ranking microaggregation "
            "(Sanchez et al. 2016, Algorithm 1)."
        ),
        epilog=_IR_DP_EXAMPLES,
        arguments=_ir_dp_arguments,
        handler=lambda args: release(args, _method("ir-dp")),
    ),
    Command(
        "laplace",
        help="plain per-cell Laplace noise (baseline)",
        description="Plain per-cell Laplace noise: the baseline of Sanchez et al. (2016).",
        epilog=_LAPLACE_EXAMPLES,
        arguments=_laplace_arguments,
        handler=lambda args: release(args, _method("laplace")),
    ),
    Command(
        "individual-ranking",
        help="microaggregation only (NOT differentially private)",
        description="Individual-ranking microaggregation without noise. Not differential "
        "privacy: a utility reference.",
        epilog=_IR_EXAMPLES,
        arguments=_individual_ranking_arguments,
        handler=lambda args: release(args, _method("individual-ranking")),
    ),
)
