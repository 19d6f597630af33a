"""``dpfast release`` k-noise, k-pram and randomized-response: perturbation mechanisms."""

from __future__ import annotations

import argparse
from typing import Any

from dpfast.cli._inputs import numeric_columns
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

_K_NOISE_EXAMPLES = """\
examples:
  dpfast release k-noise people.csv -o noisy.csv --k 5 --columns age,income
  dpfast release k-noise people.parquet -o noisy.parquet --k 5 --schema people.schema.json

Adds uniform noise on [-delta, delta] with the smallest delta that leaves >= k values within
2 delta of every point of each column's range. delta depends on the data: NOT differential
privacy. The report lists delta per column ("deltas").
"""

_K_PRAM_EXAMPLES = """\
examples:
  dpfast release k-pram people.csv -o pram.csv --k 20 --columns age --retention 0.5

Cuts each column's range into equal-width intervals of >= k values and replaces each value,
with probability 1 - retention, by the value of a random record of its interval. NOT
differential privacy. The report lists the number of intervals per column.
"""

_RR_EXAMPLES = """\
examples:
  dpfast release randomized-response people.csv -o rr.csv --column disease \\
      --domain flu,cold,none --epsilon 1
  dpfast release randomized-response people.parquet -o rr.parquet --column occupation \\
      --schema people.schema.json --retention 0.6

Keeps each value with probability p, else draws one uniformly from the PUBLIC domain
(--domain, or the column's taxonomy leaves in --schema; never taken from the data).
epsilon-local differential privacy for that column; the other columns are copied unchanged
and are NOT protected.
"""


def _k_noise_arguments(parser: argparse.ArgumentParser, smallest_k: int = 1) -> None:
    io_arguments(parser)
    parser.add_argument("--k", type=integer, required=True, help=f"k (>= {smallest_k})")
    parser.add_argument("--schema", help="schema JSON (its protected numeric columns)")
    parser.add_argument("--columns", type=column_list, help="comma-separated columns")
    run_arguments(parser, threads=True, budget=False)


def _k_pram_arguments(parser: argparse.ArgumentParser) -> None:
    _k_noise_arguments(parser, smallest_k=2)
    parser.add_argument(
        "--retention",
        type=number,
        default=0.5,
        help="probability of keeping a value, in [0, 1) (default: 0.5)",
    )


def _randomized_response_arguments(parser: argparse.ArgumentParser) -> None:
    io_arguments(parser)
    parser.add_argument("--column", required=True, help="the sensitive column")
    parser.add_argument(
        "--domain",
        type=column_list,
        help="comma-separated public categories (or give --schema with a taxonomy)",
    )
    parser.add_argument("--schema", help="schema JSON; the column's taxonomy is the domain")
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--epsilon", type=number, help="local-DP budget")
    budget.add_argument("--retention", type=number, help="probability of keeping a value")
    run_arguments(parser, threads=True)


def _k_noise(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    columns = numeric_columns(args, schema)
    return {"k": args.k, "columns": columns, "seed": args.seed, "n_threads": args.threads}


def _k_pram(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    return {**_k_noise(args, schema), "retention": args.retention}


def _randomized_response(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    return {
        "column": args.column,
        "domain": rr_domain(args, schema),
        "epsilon": args.epsilon,
        "retention": args.retention,
        "seed": args.seed,
        "n_threads": args.threads,
    }


def _method(name: str) -> Method:
    from dpfast.methods.k_noise import k_noise
    from dpfast.methods.k_pram import k_pram
    from dpfast.methods.randomized_response import randomized_response

    methods = {
        "k-noise": Method(
            "k-noise",
            k_noise,
            _k_noise,
            note="k-noise's noise width depends on the data: NOT differentially private",
        ),
        "k-pram": Method(
            "k-pram",
            k_pram,
            _k_pram,
            note="k-PRAM's intervals depend on the data: NOT differentially private",
        ),
        "randomized-response": Method(
            "randomized-response",
            randomized_response,
            _randomized_response,
            spends=True,
            schema_check=False,  # the schema gives the column's domain and the types
        ),
    }
    return methods[name]


def rr_domain(args: argparse.Namespace, schema: Any) -> Any:
    """Return randomized response's domain: ``--domain``, or the column's taxonomy."""
    domain: Any = args.domain
    if schema is not None and domain is None:
        taxonomy = schema[args.column].taxonomy if args.column in schema else None
        if taxonomy is None:
            from dpfast._validation import quoted

            raise DPFastValueError(
                f"{args.schema}: column {quoted(args.column)} has no taxonomy to take the "
                "domain from; add one, or pass --domain"
            )
        from dpfast.taxonomy import as_taxonomy

        domain = as_taxonomy(taxonomy, args.column)
    if domain is None:
        raise DPFastValueError(
            "the domain is required: pass --domain with the public categories, or --schema "
            "with a taxonomy for the column"
        )
    return domain


COMMANDS = (
    Command(
        "k-noise",
        help="uniform noise of data-dependent width (NOT differentially private)",
        description="k-noise (Biswal, Arbuckle and Kulik): uniform noise on [-delta, delta]. "
        "Not differential privacy.",
        epilog=_K_NOISE_EXAMPLES,
        arguments=_k_noise_arguments,
        handler=lambda args: release(args, _method("k-noise")),
    ),
    Command(
        "k-pram",
        help="PRAM within intervals of >= k values (NOT differentially private)",
        description="k-PRAM (Biswal, Arbuckle and Kulik). Not differential privacy.",
        epilog=_K_PRAM_EXAMPLES,
        arguments=_k_pram_arguments,
        handler=lambda args: release(args, _method("k-pram")),
    ),
    Command(
        "randomized-response",
        help="one categorical column, epsilon-local differential privacy",
        description="Uniform perturbation (k-ary randomized response) of one categorical column.",
        epilog=_RR_EXAMPLES,
        arguments=_randomized_response_arguments,
        handler=lambda args: release(args, _method("randomized-response")),
    ),
)
