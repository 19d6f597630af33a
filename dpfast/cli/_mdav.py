"""``dpfast release`` mdav and mdav-dp: MDAV microaggregation, k-anonymous or DP."""

from __future__ import annotations

import argparse
import os
from collections.abc import Hashable
from typing import Any

from dpfast.cli._inputs import protected_arguments, schema_taxonomies
from dpfast.cli._parsing import (
    Command,
    bounded_arguments,
    column_list,
    columns_argument,
    integer,
    io_arguments,
    memory_size,
    no_epsilon_arguments,
    quiet_argument,
    run_arguments,
    unprotected_argument,
)
from dpfast.cli._runner import OUT_OF_CORE, Method, release

_MDAV_EXAMPLES = """\
examples:
  dpfast release mdav people.csv -o anonymised.csv --k 5 --columns age,income
  dpfast release mdav people.parquet -o anonymised.parquet --k 5 --schema people.schema.json

MDAV replaces the chosen columns of each cluster of k..2k-1 similar rows by the cluster's
means: k-anonymity on these columns, NOT differential privacy (the report says so). Never
add noise to this output to make it DP: use mdav-dp. Protects --columns, or else the
schema's protected columns (numeric, and categorical with a "taxonomy": semantic distance,
marginality-based centroid), or else every column.
"""

_MDAV_DP_EXAMPLES = """\
examples:
  dpfast release mdav-dp people.parquet -o released.parquet --k 100 --epsilon 1 \\
      --schema people.schema.json

  # out of core: a directory of Parquet files, within about 2 GiB of working memory
  dpfast release mdav-dp people/ -o released/ --k 1000 --epsilon 1 \\
      --schema people.schema.json --memory-limit 2GiB

  # the paper's noise scale, for comparison (the report states the epsilon it really spends)
  dpfast release mdav-dp people.csv -o released.csv --k 100 --epsilon 1 \\
      --schema people.schema.json --calibration as_published --seed 7

Clusters are formed by distance to data-independent domain corners, so one changed record
changes each cluster by at most one record; each centroid gets discrete Laplace noise and
rows are released in random order. The noise grows with n/k: choose k above sqrt(n).
Categorical schema columns with a "taxonomy" are protected too: each cluster's value is
drawn from the taxonomy's leaves by the exponential mechanism (sensitivity n_c * Δq).
Columns the schema does not protect are left out unless --unprotected says otherwise.
Writes OUTPUT, OUTPUT.public-report.json (may be published with the data) and
OUTPUT.private-report.json (keep it private).
"""


def _mdav_arguments(parser: argparse.ArgumentParser) -> None:
    io_arguments(parser)
    parser.add_argument("--k", type=integer, required=True, help="minimum cluster size (>= 2)")
    parser.add_argument("--schema", help="schema JSON (its protected numeric and taxonomy columns)")
    parser.add_argument(
        "--columns", type=column_list, help="comma-separated quasi-identifier columns"
    )
    parser.add_argument(
        "--memory-limit",
        metavar="SIZE",
        type=memory_size,
        help="refuse before reading when MDAV would need more than SIZE (e.g. 8GiB; default: "
        "the memory available now). MDAV runs in memory only",
    )
    no_epsilon_arguments(parser)
    quiet_argument(parser)


def _check_mdav_fits(args: argparse.Namespace) -> None:
    """Refuse, before reading, a Parquet input that MDAV could not hold in memory."""
    from dpfast.engines import parse_memory
    from dpfast.io import output_format, parquet_shape
    from dpfast.methods.mdav import check_fits

    if not os.path.isfile(args.input) or output_format(args.input) != "parquet":
        return  # text is read to know its size; the limit applies to Parquet inputs
    rows, all_columns = parquet_shape(args.input)
    columns = len(args.columns) if args.columns else all_columns
    if args.memory_limit is not None:
        limit, what = parse_memory(args.memory_limit), f"--memory-limit {args.memory_limit}"
    else:
        limit = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        what = "the memory available now"
    check_fits(rows, columns, limit, what)


def _mdav_dp_arguments(parser: argparse.ArgumentParser) -> None:
    bounded_arguments(parser, k_help="minimum cluster size")
    parser.add_argument(
        "--reference",
        choices=("corners", "cycling"),
        default="corners",
        help="reference points: corners (the two opposite domain corners, alternating) or "
        "cycling (pairs of opposite corners in turn). Default: corners",
    )
    parser.add_argument(
        "--calibration",
        choices=("l1", "as_published"),
        default="l1",
        help="l1: noise for the L1 sensitivity of all centroids (proven epsilon); "
        "as_published: the paper's scale, reported with the epsilon it really spends. "
        "Default: l1",
    )
    columns_argument(parser)
    unprotected_argument(parser, "cluster")
    run_arguments(
        parser,
        memory_help="release out of core within about SIZE of working memory (e.g. 4GiB): "
        "Parquet input (a file, a directory or a glob) and output, every --unprotected policy; "
        "the same release as in memory (docs/engines.md). A directory or glob input implies 4GiB",
    )


def _mdav(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    columns = args.columns
    taxonomies: dict[Hashable, Any] = {}
    if schema is not None:
        if columns is None:
            columns = schema.protected_numeric() + schema.protected_categorical()
        taxonomies = schema_taxonomies(schema, columns)
    return {"k": args.k, "columns": columns, "taxonomies": taxonomies}


def _mdav_dp(args: argparse.Namespace, schema: Any) -> dict[str, Any]:
    return {
        **protected_arguments(args, schema, categorical=True),
        "k": args.k,
        "reference": args.reference,
        "calibration": args.calibration,
    }


#: What mdav says of data beyond memory.
_BEYOND_MEMORY = (
    "mdav is sequential (O(n^2/k) distance passes) and runs in memory only; for data beyond "
    "memory use ir-dp (individual ranking, proven DP) or mdav-dp (insensitive MDAV, proven "
    f"DP); {OUT_OF_CORE}"
)


def _release_mdav(args: argparse.Namespace) -> int:
    from dpfast.methods.mdav import mdav

    _check_mdav_fits(args)
    method = Method(
        "mdav",
        mdav,
        _mdav,
        in_memory_only=_BEYOND_MEMORY,
        note="mdav gives k-anonymity only: the output is NOT differentially private",
    )
    return release(args, method)


def _release_mdav_dp(args: argparse.Namespace) -> int:
    from dpfast.methods.mdav_dp import mdav_dp

    return release(args, Method("mdav-dp", mdav_dp, _mdav_dp, spends=True))


COMMANDS = (
    Command(
        "mdav",
        help="MDAV microaggregation: k-anonymity (NOT differentially private)",
        description="Standard MDAV-generic microaggregation of the chosen columns together: "
        "k-anonymity on them. Not differential privacy.",
        epilog=_MDAV_EXAMPLES,
        arguments=_mdav_arguments,
        handler=_release_mdav,
    ),
    Command(
        "mdav-dp",
        help="insensitive MDAV + noise on centroids (differential privacy)",
        description="Differential privacy via insensitive MDAV microaggregation "
        "(Soria-Comas et al. 2014): noisy cluster centroids, rows in random order.",
        epilog=_MDAV_DP_EXAMPLES,
        arguments=_mdav_dp_arguments,
        handler=_release_mdav_dp,
    ),
)
