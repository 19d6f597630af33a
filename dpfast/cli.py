"""The ``dpfast`` command line: read a table, call a release function, write the result.

No algorithm logic lives here. Exit codes: 0 on success, 2 on a usage or input error
(one line on stderr starting ``dpfast: error:``), 1 on an unexpected error, 130 on Ctrl-C.
Set ``DPFAST_DEBUG=1`` to see the traceback of an input error.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import traceback
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from dpfast._version import __version__

__all__ = ["main"]

_MAIN_EXAMPLES = """\
examples:
  dpfast demo                      release the bundled Adult data, write ./dpfast-demo/
  dpfast demo --mixed              the paper's mixed table: 2 numeric + 2 categorical columns
  dpfast release ir-dp people.parquet -o released.parquet --k 25 --epsilon 1 \\
      --schema people.schema.json
  dpfast release --help            list the release methods

The schema file declares each column's type and public bounds: see docs/schema.md.
"""

_RELEASE_EXAMPLES = """\
methods:
  ir-dp               individual-ranking microaggregation + Laplace noise (differential privacy)
  laplace             plain per-cell Laplace noise (the baseline)
  individual-ranking  microaggregation only: NOT differentially private
  mdav                MDAV microaggregation: k-anonymity, NOT differentially private
  mdav-dp             insensitive MDAV + noise on cluster centroids (differential privacy)
  k-noise             uniform noise of data-dependent width: NOT differentially private
  k-pram              PRAM within intervals of >= k values: NOT differentially private
  randomized-response one categorical column, epsilon-local differential privacy
  diffgen             generalised contingency table for classification (DiffGen, DP)

examples:
  dpfast release ir-dp people.csv -o released.csv --k 25 --epsilon 1 --schema s.json
  dpfast release laplace people.parquet -o noisy.parquet --epsilon 1 --schema s.json
  dpfast release individual-ranking people.csv -o grouped.csv --k 3 --columns age,income
"""

_IR_DP_EXAMPLES = """\
examples:
  # protect the schema's numeric columns with k = 25 and a total budget of epsilon = 1
  dpfast release ir-dp people.parquet -o released.parquet --k 25 --epsilon 1 \\
      --schema people.schema.json

  # provable epsilon-DP: shuffle each protected column independently (rows are unlinked)
  dpfast release ir-dp people.csv -o released.csv --k 25 --epsilon 1 \\
      --schema people.schema.json --linkage columns

  # reproducible noise for tests (the report says: not for publication)
  dpfast release ir-dp people.csv -o released.csv --k 25 --epsilon 1 \\
      --schema people.schema.json --seed 42

  # categorical columns with a "taxonomy" in the schema are protected too (exponential
  # mechanism); --sensitivity proven gives a provable but much flatter choice
  dpfast release ir-dp adult.parquet -o released.parquet --k 25 --epsilon 1 \\
      --schema dpfast/datasets/adult_mixed.schema.json --sensitivity proven

Writes OUTPUT and OUTPUT.report.json (method, epsilon ledger, guarantee, clamped counts).
Columns the schema does not protect are copied unchanged, and the report lists them.
Schema format: docs/schema.md. An example: dpfast/datasets/adult.schema.json.
"""

_LAPLACE_EXAMPLES = """\
examples:
  dpfast release laplace people.parquet -o noisy.parquet --epsilon 1 --schema people.schema.json
  dpfast release laplace people.csv -o noisy.csv --epsilon 1 --schema people.schema.json --seed 7

Every protected cell gets independent noise of scale m * (upper - lower) / epsilon.
"""

_IR_EXAMPLES = """\
examples:
  dpfast release individual-ranking people.csv -o grouped.csv --k 3 --columns age,income
  dpfast release individual-ranking people.parquet -o grouped.parquet --k 3 \\
      --schema people.schema.json

Microaggregation without noise: NOT differentially private (the report says so).
Protects --columns, or else the schema's protected numeric columns, or else every column.
"""

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

  # the paper's noise scale, for comparison (the report states the epsilon it really spends)
  dpfast release mdav-dp people.csv -o released.csv --k 100 --epsilon 1 \\
      --schema people.schema.json --calibration as_published --seed 7

Clusters are formed by distance to data-independent domain corners, so one changed record
changes each cluster by at most one record; each centroid gets discrete Laplace noise and
rows are released in random order. The noise grows with n/k: choose k above sqrt(n).
Categorical schema columns with a "taxonomy" are protected too: each cluster's value is
drawn from the taxonomy's leaves by the exponential mechanism (sensitivity n_c * Δq).
Writes OUTPUT and OUTPUT.report.json.
"""

_DEMO_EXAMPLES = """\
examples:
  dpfast demo
  dpfast demo --out /tmp/adult-demo --k 50 --epsilon 0.5 --seed 1
  dpfast demo --mixed --epsilon 10

Releases the numeric columns of the bundled UCI Adult training data (30,162 complete rows)
with ir-dp, using the public bounds of dpfast/datasets/adult.schema.json. With --mixed it
releases the paper's mixed table instead: age, hours-per-week, occupation and
native-country (dpfast/datasets/adult_mixed.schema.json, bundled ARX taxonomies). Rows are
released in random order; the utility figures match each released row to its original
internally (metrics=True), so the report holds them and must stay private.
"""


def _version() -> str:
    return __version__


class _UsageError(Exception):
    """A command-line usage error (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message}; run '{self.prog} --help' for usage")


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _column_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated column names such as 'age,income', got {text!r}"
        )
    return names


def build_parser() -> argparse.ArgumentParser:
    """Return the ``dpfast`` argument parser."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="dpfast",
        description="Differentially private release of tabular microdata.",
        epilog=_MAIN_EXAMPLES,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"dpfast {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    release = commands.add_parser(
        "release",
        help="release a Parquet or CSV table with a privacy method",
        description="Release a Parquet or CSV table with a privacy method.",
        epilog=_RELEASE_EXAMPLES,
        formatter_class=formatter,
    )
    methods = release.add_subparsers(dest="method", metavar="METHOD", required=True)

    ir_dp = methods.add_parser(
        "ir-dp",
        help="individual-ranking microaggregation + noise (differential privacy)",
        description=(
            "Differential privacy via individual-ranking microaggregation "
            "(Sanchez et al. 2016, Algorithm 1)."
        ),
        epilog=_IR_DP_EXAMPLES,
        formatter_class=formatter,
    )
    _io_arguments(ir_dp)
    ir_dp.add_argument("--k", type=_integer, required=True, help="group size (>= 1)")
    ir_dp.add_argument("--epsilon", type=_number, required=True, help="total privacy budget")
    ir_dp.add_argument("--schema", required=True, help="schema JSON with public bounds")
    ir_dp.add_argument(
        "--linkage",
        choices=("records", "columns"),
        default="records",
        help="records: rows stay linked (the paper's release, guarantee as published); "
        "columns: each column shuffled on its own (proven epsilon-DP). Default: records",
    )
    ir_dp.add_argument(
        "--no-shuffle",
        dest="shuffle",
        action="store_false",
        help="keep rows in input order (default: random order)",
    )
    ir_dp.add_argument(
        "--sensitivity",
        choices=("paper", "proven"),
        default="paper",
        help="categorical columns' exponential mechanism: paper (the taxonomy's largest "
        "distance per group; heuristic) or proven (n_groups times it). Default: paper",
    )
    ir_dp.add_argument("--seed", type=_integer, help="seeded noise: NOT for publication")
    ir_dp.add_argument("--threads", type=_integer, help="worker threads (default: cores)")
    _quiet_argument(ir_dp)
    ir_dp.set_defaults(handler=_release_ir_dp)

    laplace = methods.add_parser(
        "laplace",
        help="plain per-cell Laplace noise (baseline)",
        description="Plain per-cell Laplace noise: the baseline of Sanchez et al. (2016).",
        epilog=_LAPLACE_EXAMPLES,
        formatter_class=formatter,
    )
    _io_arguments(laplace)
    laplace.add_argument("--epsilon", type=_number, required=True, help="total privacy budget")
    laplace.add_argument("--schema", required=True, help="schema JSON with public bounds")
    laplace.add_argument("--seed", type=_integer, help="seeded noise: NOT for publication")
    _quiet_argument(laplace)
    laplace.set_defaults(handler=_release_laplace)

    ranking = methods.add_parser(
        "individual-ranking",
        help="microaggregation only (NOT differentially private)",
        description="Individual-ranking microaggregation without noise. Not differential "
        "privacy: a utility reference.",
        epilog=_IR_EXAMPLES,
        formatter_class=formatter,
    )
    _io_arguments(ranking)
    ranking.add_argument("--k", type=_integer, required=True, help="group size (>= 1)")
    ranking.add_argument("--schema", help="schema JSON (its protected numeric columns)")
    ranking.add_argument(
        "--columns", type=_column_list, help="comma-separated columns to aggregate"
    )
    _quiet_argument(ranking)
    ranking.set_defaults(handler=_release_individual_ranking)
    _mechanism_parsers(methods, formatter)
    _diffgen_parser(methods, formatter)

    mdav = methods.add_parser(
        "mdav",
        help="MDAV microaggregation: k-anonymity (NOT differentially private)",
        description="Standard MDAV-generic microaggregation of the chosen columns together: "
        "k-anonymity on them. Not differential privacy.",
        epilog=_MDAV_EXAMPLES,
        formatter_class=formatter,
    )
    _io_arguments(mdav)
    mdav.add_argument("--k", type=_integer, required=True, help="minimum cluster size (>= 1)")
    mdav.add_argument("--schema", help="schema JSON (its protected numeric and taxonomy columns)")
    mdav.add_argument(
        "--columns", type=_column_list, help="comma-separated quasi-identifier columns"
    )
    _quiet_argument(mdav)
    mdav.set_defaults(handler=_release_mdav)

    mdav_dp = methods.add_parser(
        "mdav-dp",
        help="insensitive MDAV + noise on centroids (differential privacy)",
        description="Differential privacy via insensitive MDAV microaggregation "
        "(Soria-Comas et al. 2014): noisy cluster centroids, rows in random order.",
        epilog=_MDAV_DP_EXAMPLES,
        formatter_class=formatter,
    )
    _io_arguments(mdav_dp)
    mdav_dp.add_argument("--k", type=_integer, required=True, help="minimum cluster size")
    mdav_dp.add_argument("--epsilon", type=_number, required=True, help="total privacy budget")
    mdav_dp.add_argument("--schema", required=True, help="schema JSON with public bounds")
    mdav_dp.add_argument(
        "--reference",
        choices=("corners", "cycling"),
        default="corners",
        help="reference points: corners (the two opposite domain corners, alternating) or "
        "cycling (pairs of opposite corners in turn). Default: corners",
    )
    mdav_dp.add_argument(
        "--calibration",
        choices=("l1", "as_published"),
        default="l1",
        help="l1: noise for the L1 sensitivity of all centroids (proven epsilon); "
        "as_published: the paper's scale, reported with the epsilon it really spends. "
        "Default: l1",
    )
    mdav_dp.add_argument("--seed", type=_integer, help="seeded noise: NOT for publication")
    _quiet_argument(mdav_dp)
    mdav_dp.set_defaults(handler=_release_mdav_dp)

    demo = commands.add_parser(
        "demo",
        help="release the bundled Adult data with ir-dp and print a summary",
        description="Release the bundled UCI Adult data's numeric columns with ir-dp.",
        epilog=_DEMO_EXAMPLES,
        formatter_class=formatter,
    )
    demo.add_argument("--out", default="dpfast-demo", help="output folder (default: %(default)s)")
    demo.add_argument("--k", type=_integer, default=25, help="group size (default: 25)")
    demo.add_argument("--epsilon", type=_number, default=1.0, help="budget (default: 1)")
    demo.add_argument("--seed", type=_integer, help="seeded noise: NOT for publication")
    demo.add_argument(
        "--mixed",
        action="store_true",
        help="release the paper's mixed table (age, hours-per-week, occupation, "
        "native-country) instead of the numeric columns",
    )
    demo.add_argument(
        "--sensitivity",
        choices=("paper", "proven"),
        default="paper",
        help="with --mixed: the categorical sensitivity (default: paper)",
    )
    _quiet_argument(demo)
    demo.set_defaults(handler=_demo)
    return parser


def _io_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", help="input table (.parquet or .csv)")
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT",
        required=True,
        help="output table (.parquet or .csv); OUTPUT.report.json is written beside it",
    )


def _quiet_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress display or notes")


# -- progress --------------------------------------------------------------------------


class ProgressLine:
    """Render ``progress(phase, done, total)`` calls on one line of a stream.

    On a terminal the line is redrawn in place, only when the phase or the whole percent
    changes. Elsewhere (a pipe, a log file) one line is printed per phase.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        try:
            self._tty = stream.isatty()
        except (AttributeError, ValueError):
            self._tty = False
        self._shown: tuple[str, int] | None = None
        self._width = 0
        self._lock = threading.Lock()

    def __call__(self, phase: str, done: int, total: int) -> None:
        percent = 100 if total <= 0 else max(0, min(100, (100 * done) // total))
        with self._lock:
            if self._tty:
                if self._shown == (phase, percent):
                    return
                text = f"dpfast: {phase} {percent:3d}%"
                self._stream.write("\r" + text.ljust(self._width))
                self._width = len(text)
            else:
                if self._shown is not None and self._shown[0] == phase:
                    return
                self._stream.write(f"dpfast: {phase}...\n")
            self._shown = (phase, percent)
            self._stream.flush()

    def close(self) -> None:
        """Clear the progress line (terminal only)."""
        with self._lock:
            if self._tty and self._width:
                self._stream.write("\r" + " " * self._width + "\r")
                self._stream.flush()
                self._width = 0


def _progress(args: argparse.Namespace) -> ProgressLine | None:
    return None if args.quiet else ProgressLine(sys.stderr)


def _note(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(f"dpfast: {text}", file=sys.stderr)


# -- release commands ------------------------------------------------------------------


def _report_path(output: str) -> str:
    return f"{output}.report.json"


def _check_paths(args: argparse.Namespace) -> None:
    """Fail fast, before any work, on output paths that cannot be written."""
    from dpfast.io import output_format

    output_format(args.input)
    output_format(args.output)
    out = Path(args.output)
    if out.is_dir():
        raise ValueError(
            f"output {args.output!r} is a directory; give a file name such as "
            f"{os.path.join(args.output, 'released.parquet')!r}"
        )
    parent = out.parent
    if not parent.is_dir():
        raise ValueError(f"output directory {str(parent)!r} does not exist; create it first")
    if Path(args.input).exists() and out.exists() and out.resolve() == Path(args.input).resolve():
        raise ValueError("the output would overwrite the input; choose another -o path")


def _load(args: argparse.Namespace, method: str) -> tuple[Any, Any]:
    """Read the input and the schema (if any) and check them against each other."""
    from dpfast.io import read_table
    from dpfast.schema import Schema

    table = read_table(args.input)
    schema = None
    if getattr(args, "schema", None) is not None:
        schema = Schema.from_json(args.schema)
        table = schema.check_table(table)
        categorical = schema.protected_categorical()
        with_taxonomies = method in ("ir-dp", "mdav", "mdav-dp")
        if with_taxonomies:
            categorical = [c for c in categorical if schema[c].taxonomy is None]
        if categorical:
            also = ' and categorical columns with a "taxonomy"' if with_taxonomies else ""
            raise ValueError(
                f"{args.schema}: {method} protects numeric columns only{also}, but the "
                f"schema protects categorical column(s) "
                f"{', '.join(repr(c) for c in categorical)}"
                f"{' without a taxonomy' if also else ''}; "
                + ('add "taxonomy": "hierarchy.csv" (ARX format), or ' if also else "")
                + 'set "protect": false for them to copy them unchanged, or drop them'
            )
        has_categorical = with_taxonomies and schema.protected_categorical()
        if (
            not schema.protected_numeric()
            and not has_categorical
            and not getattr(args, "columns", None)
        ):
            raise ValueError(
                f"{args.schema}: no protected numeric column, so there is nothing to release; "
                'declare at least one "integer" or "float" column with "bounds"'
            )
    return table, schema


def _write(args: argparse.Namespace, release: Any) -> None:
    """Write the data and its report, both atomically; never leave one without the other."""
    from dpfast.io import write_json_atomic, write_table_atomic

    report = release.report.to_dict()
    write_table_atomic(release.data, args.output)
    try:
        write_json_atomic(report, _report_path(args.output))
    except BaseException:
        Path(args.output).unlink(missing_ok=True)
        raise


def _finish(args: argparse.Namespace, release: Any) -> int:
    report = release.report
    if report.unprotected_columns:
        shown = ", ".join(report.unprotected_columns[:10])
        more = ", ..." if len(report.unprotected_columns) > 10 else ""
        _note(args, f"copied unchanged, NOT protected: {shown}{more}")
    _write(args, release)
    if not args.quiet:
        budget = "no privacy budget" if report.epsilon is None else f"epsilon = {report.epsilon:g}"
        print(f"wrote {args.output} ({report.n_rows} rows) and {_report_path(args.output)}")
        print(
            f"{report.method}: {budget}; guarantee: {report.guarantee_level}"
            + (" (seeded: not for publication)" if report.seeded else "")
        )
    return 0


def _run_release(
    args: argparse.Namespace, method: str, call: Callable[[Any, Any, Any], Any]
) -> int:
    _check_paths(args)
    table, schema = _load(args, method)
    progress = _progress(args)
    try:
        release = call(table, schema, progress)
    finally:
        if progress is not None:
            progress.close()
    return _finish(args, release)


def _schema_taxonomies(schema: Any) -> dict[Hashable, Any]:
    from dpfast.taxonomy import Taxonomy

    return {
        name: Taxonomy.from_arx(schema[name].taxonomy) for name in schema.protected_categorical()
    }


def _release_ir_dp(args: argparse.Namespace) -> int:
    from dpfast.release import ir_dp

    def call(table: Any, schema: Any, progress: Any) -> Any:
        return ir_dp(
            table,
            k=args.k,
            epsilon=args.epsilon,
            bounds=schema.bounds(),
            taxonomies=_schema_taxonomies(schema),
            sensitivity=args.sensitivity,
            columns=schema.protected_numeric() + schema.protected_categorical(),
            linkage=args.linkage,
            shuffle=args.shuffle,
            seed=args.seed,
            n_threads=args.threads,
            progress=progress,
        )

    return _run_release(args, "ir-dp", call)


def _release_laplace(args: argparse.Namespace) -> int:
    from dpfast.release import laplace_dp

    def call(table: Any, schema: Any, progress: Any) -> Any:
        return laplace_dp(
            table,
            epsilon=args.epsilon,
            bounds=schema.bounds(),
            columns=schema.protected_numeric(),
            seed=args.seed,
            progress=progress,
        )

    return _run_release(args, "laplace", call)


def _release_individual_ranking(args: argparse.Namespace) -> int:
    from dpfast.release import individual_ranking

    def call(table: Any, schema: Any, progress: Any) -> Any:
        columns = args.columns
        if columns is None and schema is not None:
            columns = schema.protected_numeric()
        return individual_ranking(table, k=args.k, columns=columns, progress=progress)

    _note(args, "individual-ranking adds no noise: the output is NOT differentially private")
    return _run_release(args, "individual-ranking", call)


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


def _mechanism_parsers(methods: Any, formatter: Any) -> None:
    k_noise = methods.add_parser(
        "k-noise",
        help="uniform noise of data-dependent width (NOT differentially private)",
        description="k-noise (Biswal, Arbuckle and Kulik): uniform noise on [-delta, delta]. "
        "Not differential privacy.",
        epilog=_K_NOISE_EXAMPLES,
        formatter_class=formatter,
    )
    k_pram = methods.add_parser(
        "k-pram",
        help="PRAM within intervals of >= k values (NOT differentially private)",
        description="k-PRAM (Biswal, Arbuckle and Kulik). Not differential privacy.",
        epilog=_K_PRAM_EXAMPLES,
        formatter_class=formatter,
    )
    for parser in (k_noise, k_pram):
        _io_arguments(parser)
        parser.add_argument("--k", type=_integer, required=True, help="k (>= 1)")
        parser.add_argument("--schema", help="schema JSON (its protected numeric columns)")
        parser.add_argument("--columns", type=_column_list, help="comma-separated columns")
        parser.add_argument("--seed", type=_integer, help="seeded noise: NOT for publication")
        parser.add_argument("--threads", type=_integer, help="worker threads (default: cores)")
    k_pram.add_argument(
        "--retention",
        type=_number,
        default=0.5,
        help="probability of keeping a value, in [0, 1) (default: 0.5)",
    )
    for parser, handler in ((k_noise, _release_k_noise), (k_pram, _release_k_pram)):
        _quiet_argument(parser)
        parser.set_defaults(handler=handler)

    response = methods.add_parser(
        "randomized-response",
        help="one categorical column, epsilon-local differential privacy",
        description="Uniform perturbation (k-ary randomized response) of one categorical column.",
        epilog=_RR_EXAMPLES,
        formatter_class=formatter,
    )
    _io_arguments(response)
    response.add_argument("--column", required=True, help="the sensitive column")
    response.add_argument(
        "--domain",
        type=_column_list,
        help="comma-separated public categories (or give --schema with a taxonomy)",
    )
    response.add_argument("--schema", help="schema JSON; the column's taxonomy is the domain")
    budget = response.add_mutually_exclusive_group(required=True)
    budget.add_argument("--epsilon", type=_number, help="local-DP budget")
    budget.add_argument("--retention", type=_number, help="probability of keeping a value")
    response.add_argument("--seed", type=_integer, help="seeded noise: NOT for publication")
    response.add_argument("--threads", type=_integer, help="worker threads (default: cores)")
    _quiet_argument(response)
    response.set_defaults(handler=_release_randomized_response)


def _numeric_columns(args: argparse.Namespace, schema: Any) -> Any:
    if args.columns is None and schema is not None:
        return schema.protected_numeric()
    return args.columns


def _release_k_noise(args: argparse.Namespace) -> int:
    from dpfast.mechanisms import k_noise

    def call(table: Any, schema: Any, progress: Any) -> Any:
        return k_noise(
            table,
            k=args.k,
            columns=_numeric_columns(args, schema),
            seed=args.seed,
            n_threads=args.threads,
        )

    _note(args, "k-noise's noise width depends on the data: NOT differentially private")
    return _run_release(args, "k-noise", call)


def _release_k_pram(args: argparse.Namespace) -> int:
    from dpfast.mechanisms import k_pram

    def call(table: Any, schema: Any, progress: Any) -> Any:
        return k_pram(
            table,
            k=args.k,
            columns=_numeric_columns(args, schema),
            retention=args.retention,
            seed=args.seed,
            n_threads=args.threads,
        )

    _note(args, "k-PRAM's intervals depend on the data: NOT differentially private")
    return _run_release(args, "k-pram", call)


def _release_randomized_response(args: argparse.Namespace) -> int:
    from dpfast.io import read_table
    from dpfast.mechanisms import randomized_response
    from dpfast.schema import Schema

    _check_paths(args)
    table = read_table(args.input)
    domain: Any = args.domain
    if args.schema is not None:
        schema = Schema.from_json(args.schema)
        table = schema.check_table(table)
        taxonomy = schema[args.column].taxonomy if args.column in schema else None
        if domain is None:
            if taxonomy is None:
                raise ValueError(
                    f"{args.schema}: column {args.column!r} has no taxonomy to take the "
                    "domain from; add one, or pass --domain"
                )
            from dpfast.taxonomy import Taxonomy

            domain = Taxonomy.from_arx(taxonomy)
    if domain is None:
        raise ValueError(
            "the domain is required: pass --domain with the public categories, or --schema "
            "with a taxonomy for the column"
        )
    release = randomized_response(
        table,
        column=args.column,
        domain=domain,
        epsilon=args.epsilon,
        retention=args.retention,
        seed=args.seed,
        n_threads=args.threads,
    )
    return _finish(args, release)


def _release_mdav(args: argparse.Namespace) -> int:
    from dpfast.release_mdav import mdav

    def call(table: Any, schema: Any, progress: Any) -> Any:
        columns = args.columns
        taxonomies: dict[Hashable, Any] = {}
        if schema is not None:
            if columns is None:
                columns = schema.protected_numeric() + schema.protected_categorical()
            taxonomies = {
                name: taxonomy
                for name, taxonomy in _schema_taxonomies(schema).items()
                if name in columns
            }
        return mdav(table, k=args.k, columns=columns, taxonomies=taxonomies, progress=progress)

    _note(args, "mdav gives k-anonymity only: the output is NOT differentially private")
    return _run_release(args, "mdav", call)


def _release_mdav_dp(args: argparse.Namespace) -> int:
    from dpfast.release_mdav import mdav_dp

    def call(table: Any, schema: Any, progress: Any) -> Any:
        return mdav_dp(
            table,
            k=args.k,
            epsilon=args.epsilon,
            bounds=schema.bounds(),
            taxonomies=_schema_taxonomies(schema),
            columns=schema.protected_numeric() + schema.protected_categorical(),
            reference=args.reference,
            calibration=args.calibration,
            seed=args.seed,
            progress=progress,
        )

    return _run_release(args, "mdav-dp", call)


_DIFFGEN_EXAMPLES = """\
examples:
  dpfast release diffgen adult.parquet -o counts.parquet --target income --steps 10 \\
      --epsilon 1 --schema adult.diffgen.schema.json
  dpfast release diffgen adult.csv -o records.csv --target income --steps 10 --epsilon 1 \\
      --schema adult.diffgen.schema.json --classes "<=50K,>50K" --microdata --seed 7

The schema gives each numeric predictor its public "bounds" and each categorical predictor
a "taxonomy" (ARX hierarchy file); columns with "protect": false are not released. The
class values must be public: a "taxonomy" for the target column, or --classes.
Writes OUTPUT (one row per leaf partition and class, with a noisy count; --microdata:
the counts expanded into records) and OUTPUT.report.json (ledger, guarantee, the cut).
An example schema: dpfast/datasets/adult_diffgen.schema.json (see docs/diffgen.md).
"""


def _diffgen_parser(methods: Any, formatter: Any) -> None:
    parser = methods.add_parser(
        "diffgen",
        help="generalised contingency table for classification (DiffGen, differential privacy)",
        description="DiffGen (Mohammed et al., KDD 2011): top-down specialisation chosen by "
        "the exponential mechanism, then noisy counts of every leaf partition and class.",
        epilog=_DIFFGEN_EXAMPLES,
        formatter_class=formatter,
    )
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
    _quiet_argument(parser)
    parser.set_defaults(handler=_release_diffgen)


def _release_diffgen(args: argparse.Namespace) -> int:
    from types import SimpleNamespace

    from dpfast.diffgen import diffgen
    from dpfast.io import read_table
    from dpfast.schema import Schema
    from dpfast.taxonomy import Taxonomy

    _check_paths(args)
    table = read_table(args.input)
    schema = Schema.from_json(args.schema)
    table = schema.check_table(table)
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
            taxonomies[column] = Taxonomy.from_arx(hierarchy)
    if args.target not in taxonomies and args.classes is None:
        raise ValueError(
            'the class values must be public: give the target a "taxonomy" in the schema '
            "or pass --classes with its values"
        )
    bounds: dict[Hashable, tuple[float, float]] = {
        c: b for c, b in schema.bounds().items() if c != args.target
    }
    release = diffgen(
        table,
        target=args.target,
        epsilon=args.epsilon,
        steps=args.steps,
        taxonomies=taxonomies,
        bounds=bounds,
        utility=args.utility,
        classes=args.classes,
        seed=args.seed,
    )
    data = release.microdata() if args.microdata else release.counts
    for note in release.report.notes:
        _note(args, note)
    return _finish(args, SimpleNamespace(data=data, report=release.report))


# -- demo ------------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    from dpfast.datasets import adult, adult_mixed_schema_path, adult_schema_path
    from dpfast.io import write_json_atomic, write_table_atomic
    from dpfast.release import ir_dp
    from dpfast.schema import Schema

    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {args.out!r} is a file; give a folder")
    schema = Schema.from_json(adult_mixed_schema_path() if args.mixed else adult_schema_path())
    taxonomies = _schema_taxonomies(schema)
    columns = schema.protected_numeric() + schema.protected_categorical()
    bounds: dict[Hashable, tuple[float, float]] = dict(schema.bounds().items())
    original = adult("train", drop_missing=True)[columns]
    progress = _progress(args)
    try:
        release = ir_dp(
            original,
            k=args.k,
            epsilon=args.epsilon,
            bounds=bounds,
            taxonomies=taxonomies,
            sensitivity=args.sensitivity,
            seed=args.seed,
            metrics=True,
            progress=progress,
        )
    finally:
        if progress is not None:
            progress.close()
    report = release.report.to_dict()
    errors = _by_column(report["metrics"]["relative_error"])
    divergences = _by_column(report["metrics"]["jensen_shannon"])
    error = report["metrics"]["mean_relative_error"]
    divergence = report["metrics"]["mean_jensen_shannon"]

    out_dir.mkdir(parents=True, exist_ok=True)
    data_path = out_dir / "adult_ir_dp.parquet"
    report_path = out_dir / "adult_ir_dp.parquet.report.json"
    write_table_atomic(release.data, data_path)
    try:
        write_json_atomic(report, report_path)
    except BaseException:
        data_path.unlink(missing_ok=True)
        raise

    r = release.report
    width = max(len(c) for c in columns) + 2
    kinds = f"{len(columns)} numeric columns"
    if taxonomies:
        kinds = (
            f"{len(columns) - len(taxonomies)} numeric + {len(taxonomies)} categorical "
            f"columns (sensitivity {args.sensitivity})"
        )
    lines = [
        f"dpfast demo: ir-dp on UCI Adult (train, {r.n_rows:,} complete rows), "
        f"{kinds}, k = {args.k}, epsilon = {r.epsilon:g}",
        "",
        "epsilon ledger",
        f"  {'step':<20}{'column':<{width}}{'epsilon':>9}{'sensitivity':>13}{'noise scale':>13}",
    ]
    for entry in r.ledger:
        lines.append(
            f"  {entry.step:<20}{', '.join(entry.columns):<{width}}{entry.epsilon:>9.4g}"
            f"{_number_text(entry.sensitivity):>13}{_number_text(entry.noise_scale):>13}"
        )
    total = sum(entry.epsilon for entry in r.ledger)
    lines += [
        f"  {'total':<20}{'':<{width}}{total:>9.4g}",
        "",
        f"guarantee ({r.guarantee_level}): {r.guarantee}",
    ]
    if r.seeded:
        lines.append("noise: seeded, reproducible, NOT for publication")
    lines += [
        "",
        "utility against the original (0 is perfect; in the report, which must stay private)",
        f"  {'column':<{width}}{'relative error':>16}{'JSD':>10}",
    ]
    for column in columns:
        lines.append(f"  {column:<{width}}{errors[column]:>16.4f}{divergences[column]:>10.4f}")
    lines += [
        f"  {'mean':<{width}}{error:>16.4f}{divergence:>10.4f}",
        "",
        f"clamped values: {sum(r.clamped.values())}",
        f"wrote {data_path} and {report_path}",
    ]
    print("\n".join(lines))
    return 0


def _by_column(values: Any) -> dict[str, float]:
    return {str(name): float(value) for name, value in dict(values).items()}


def _number_text(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


# -- entry point -----------------------------------------------------------------------


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _error(message: str) -> int:
    print(f"dpfast: error: {_one_line(message)}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dpfast`` command line.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 success, 2 usage or input error, 1 unexpected error.

    Examples
    --------
    >>> main(["--version"])
    dpfast 0.1.0
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        return _error(str(exc))
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("dpfast: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError) as exc:
        if os.environ.get("DPFAST_DEBUG"):
            raise
        message = str(exc)
        if isinstance(exc, OSError) and exc.strerror:
            target = f" {exc.filename!r}" if exc.filename else ""
            message = f"{exc.strerror}{target}; check the path and its permissions"
        return _error(message or type(exc).__name__)
    except Exception:
        traceback.print_exc()
        print(
            "dpfast: internal error: this is a bug in dpfast; please report it with the "
            "traceback above",
            file=sys.stderr,
        )
        return 1
