"""``dpfast warm-up``: compile and cache the kernels every release uses, once per install.

dpfast's kernels compile on their first call with each type signature, and Numba caches
each compiled signature on disk. A kernel's signature follows the arrays it is given (the
releases normalise values to float64 and labels to int64, but a 2-D NumPy input gives
strided column views, a numeric-only MDAV another kernel than a mixed one, ...), so the
warm-up runs the releases themselves, as a user would: every release command on a small
synthetic table, read from CSV, from Parquet and out of core, and every public release
function on a pandas table and on 2-D NumPy arrays. Nothing it writes outlives it: its
files are in a temporary folder, and its releases are of synthetic data.

The releases are grouped by method, and the groups run in ``--processes`` processes (one
per core by default), most releases first: the methods share few kernels, so each kernel
compiles in one process, mostly. Processes that compile one kernel at once write its cache
under a lock (:mod:`dpfast._jit`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from dpfast.cli._parsing import Command, UsageError, integer, quiet_argument
from dpfast.cli._progress import ProgressLine

__all__ = ["WARM_UP"]

_EXAMPLES = """\
examples:
  dpfast warm-up                   compile what is not cached yet (scripts/demo runs it)
  dpfast warm-up --quiet           the same, printing only the summary line
  dpfast warm-up --processes 1     in this process only

The first release of each method compiles its kernels (tens of seconds on a 2-core
machine); Numba then caches them on disk, beside dpfast's code (or in NUMBA_CACHE_DIR), and
the next runs load them. dpfast warm-up runs every release on a small synthetic table, so
that the first real release starts at once. It is quick once everything is cached; run it
again after upgrading dpfast, Numba or Python. A release that still compiles (a type
signature the warm-up did not meet) says "compiling (first run only)".
"""

#: The synthetic table's rows: enough for every method's groups and intervals.
ROWS = 400

#: Its protected categorical columns: a nested taxonomy and a flat one (a list of values).
OCCUPATIONS = {
    "*": {
        "office": {"clerical": ["clerk", "secretary"], "management": ["manager"]},
        "field": {"care": ["nurse", "carer"], "transport": ["driver", "farmer"]},
    }
}
SEXES = ["female", "male"]
SALARIES = ["<=50K", ">50K"]

#: What the progress line says while the releases run.
PHASE = "warm-up: compiling the kernels of every release (first run only)"


def _schema() -> dict[str, Any]:
    """Return the synthetic table's schema: integer, float and categorical columns."""
    return {
        "version": 1,
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "hours": {"type": "integer", "bounds": [1, 99]},
            "income": {"type": "float", "bounds": [0, 1000000]},
            "profit": {"type": "float", "bounds": [-100000, 100000]},
            "occupation": {"type": "categorical", "taxonomy": OCCUPATIONS},
            "sex": {"type": "categorical", "taxonomy": SEXES},
            "salary": {"type": "categorical", "protect": False},
        },
    }


def synthetic_table() -> Any:
    """Return the warm-up's table: skewed and signed numeric columns, categorical ones.

    Synthetic (a fixed seed, no person's data): it is a table to run the releases on.
    """
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(20261201)
    leaves = ["clerk", "secretary", "manager", "nurse", "carer", "driver", "farmer"]
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, ROWS),
            "hours": rng.integers(1, 100, ROWS),
            "income": np.round(rng.lognormal(10.0, 1.0, ROWS), 2),
            "profit": np.round(rng.standard_t(2, ROWS) * 1000.0, 2),
            "occupation": rng.choice(leaves, ROWS),
            "sex": rng.choice(SEXES, ROWS),
            "salary": rng.choice(SALARIES, ROWS),
        }
    )


def _cli_jobs() -> list[tuple[str, ...]]:
    """Return the release commands the warm-up runs, as ``(method, input, options...)``.

    ``{csv}``, ``{parquet}`` and ``{schema}`` stand for the synthetic files' paths. The
    Parquet input with ``--memory-limit`` is released out of core.
    """
    schema = ("--schema", "{schema}")
    numeric = (*schema, "--columns", "age,income")
    classes = ("--target", "salary", "--classes", ",".join(SALARIES))
    dp = ("--epsilon", "1")
    in_memory = [
        ("ir-dp", "--k", "10", *dp, *schema),
        ("ir-dp", "--k", "10", *dp, *numeric, "--metrics", "--risk"),
        ("ir-dp", "--k", "10", *dp, *schema, "--linkage", "records"),
        ("laplace", *dp, *numeric, "--metrics", "--risk"),
        ("individual-ranking", "--k", "3", *numeric, "--metrics", "--risk"),
        ("mdav", "--k", "5", *schema, "--metrics", "--risk"),
        ("mdav", "--k", "5", *numeric),
        ("mdav-dp", "--k", "20", *dp, *schema, "--metrics", "--risk"),
        ("mdav-dp", "--k", "20", *dp, *numeric),
        ("diffgen", *classes, "--steps", "3", *dp, *schema, "--microdata"),
        ("diffgen", *classes, "--steps", "3", *dp, *schema),
        ("k-noise", "--k", "5", *numeric, "--risk"),
        ("k-pram", "--k", "5", *numeric, "--risk"),
        ("randomized-response", "--column", "occupation", *dp, *schema, "--risk"),
        ("randomized-response", "--column", "sex", "--retention", "0.6", *schema),
    ]
    out_of_core = [
        ("ir-dp", "--k", "10", *dp, *schema),
        ("laplace", *dp, *numeric),
        ("individual-ranking", "--k", "3", *numeric),
        ("mdav-dp", "--k", "20", *dp, *schema),
        ("diffgen", *classes, "--steps", "3", *dp, *schema),
        ("k-noise", "--k", "5", *numeric),
        ("k-pram", "--k", "5", *numeric),
        ("randomized-response", "--column", "occupation", *dp, *schema),
    ]
    return [(job[0], "{csv}", *job[1:]) for job in in_memory] + [
        (job[0], "{parquet}", *job[1:], "--memory-limit", "256MiB") for job in out_of_core
    ]


def _api_jobs(table: Any) -> list[tuple[str, Callable[[], Any]]]:
    """Return the public functions the warm-up calls, on a pandas table and 2-D arrays."""
    import numpy as np

    import dpfast
    from dpfast.taxonomy import as_taxonomy

    columns = _schema()["columns"]
    bounds: dict[Hashable, tuple[float, float]] = {
        c: (spec["bounds"][0], spec["bounds"][1]) for c, spec in columns.items() if "bounds" in spec
    }
    taxonomies: dict[Hashable, Any] = {
        "occupation": as_taxonomy(OCCUPATIONS),
        "sex": as_taxonomy(SEXES),
    }
    numeric = ["age", "hours", "income", "profit"]
    mixed = ["age", "income", "occupation", "sex"]
    floats = table[["income", "profit"]].to_numpy()
    matrices = {  # pandas' float and integer matrices (contiguous columns, as float64 too)
        "float": (floats, [bounds["income"], bounds["profit"]]),
        "integer": (table[["age", "hours"]].to_numpy(), [bounds["age"], bounds["hours"]]),
        # NumPy's own order: each column a strided view, the kernels' other signature
        "C-ordered float": (np.ascontiguousarray(floats), [bounds["income"], bounds["profit"]]),
    }
    jobs: list[tuple[str, Callable[[], Any]]] = [
        ("ir_dp", lambda: dpfast.ir_dp(table, k=10, epsilon=1.0, bounds=bounds, columns=numeric)),
        (
            "ir_dp categorical",
            lambda: dpfast.ir_dp(
                table, k=10, epsilon=1.0, bounds=bounds, columns=mixed, taxonomies=taxonomies
            ),
        ),
        (
            "laplace_dp",
            lambda: dpfast.laplace_dp(table, epsilon=1.0, bounds=bounds, columns=numeric),
        ),
        ("individual_ranking", lambda: dpfast.individual_ranking(table, k=3, columns=numeric)),
        ("mdav", lambda: dpfast.mdav(table, k=5, columns=numeric)),
        ("mdav mixed", lambda: dpfast.mdav(table, k=5, columns=mixed, taxonomies=taxonomies)),
        (
            "mdav_dp",
            lambda: dpfast.mdav_dp(table, k=20, epsilon=1.0, bounds=bounds, columns=numeric),
        ),
        ("k_noise", lambda: dpfast.k_noise(table, k=5, columns=numeric)),
        ("k_pram", lambda: dpfast.k_pram(table, k=5, columns=numeric)),
        (
            "randomized_response",
            lambda: dpfast.randomized_response(table, column="sex", domain=SEXES, epsilon=1.0),
        ),
        (
            "diffgen",
            lambda: dpfast.diffgen(
                table[["age", "income", "occupation", "sex", "salary"]],
                target="salary",
                classes=SALARIES,
                steps=3,
                epsilon=1.0,
                bounds={"age": bounds["age"], "income": bounds["income"]},
                taxonomies=taxonomies,
            ).microdata(),
        ),
    ]
    for kind, (matrix, limits) in matrices.items():
        jobs += _matrix_jobs(kind, matrix, dict(enumerate(limits)))
    return jobs


def _matrix_jobs(
    kind: str, matrix: Any, bounds: dict[Hashable, tuple[float, float]]
) -> list[tuple[str, Callable[[], Any]]]:
    """Return the releases of a 2-D NumPy array of ``kind`` (float or integer) values."""
    import dpfast

    return [
        (f"ir_dp {kind} array", lambda: dpfast.ir_dp(matrix, k=10, epsilon=1.0, bounds=bounds)),
        (f"laplace_dp {kind} array", lambda: dpfast.laplace_dp(matrix, epsilon=1.0, bounds=bounds)),
        (f"individual_ranking {kind} array", lambda: dpfast.individual_ranking(matrix, k=3)),
        (f"mdav {kind} array", lambda: dpfast.mdav(matrix, k=5)),
        (
            f"mdav_dp {kind} array",
            lambda: dpfast.mdav_dp(matrix, k=20, epsilon=1.0, bounds=bounds),
        ),
        (f"k_noise {kind} array", lambda: dpfast.k_noise(matrix, k=5)),
        (f"k_pram {kind} array", lambda: dpfast.k_pram(matrix, k=5)),
    ]


def _write_inputs(folder: str) -> dict[str, str]:
    """Write the synthetic table as CSV and Parquet and its schema in ``folder``; their paths."""
    paths = {name: os.path.join(folder, f"people.{name}") for name in ("csv", "parquet")}
    paths["schema"] = os.path.join(folder, "people.schema.json")
    table = synthetic_table()
    table.to_csv(paths["csv"], index=False)
    table.to_parquet(paths["parquet"], index=False)
    with open(paths["schema"], "w", encoding="utf-8") as file:
        json.dump(_schema(), file)
    return paths


def _run_command(job: tuple[str, ...], paths: dict[str, str], output: str) -> None:
    """Run one release command on the synthetic files, writing ``output``."""
    from dpfast.cli import build_parser  # here: dpfast.cli imports this module

    argv = ["release", *job[:2], "-o", output, *job[2:], "--quiet"]
    for name, path in paths.items():
        argv = [a.replace(f"{{{name}}}", path) for a in argv]
    args = build_parser().parse_args(argv)
    with contextlib.redirect_stdout(io.StringIO()):  # each release's summary
        args.handler(args)


def _method(name: str) -> str:
    """Return the public function a job releases with (``k_noise`` for ``k-noise``)."""
    function = name.split()[0].replace("-", "_")
    return "laplace_dp" if function == "laplace" else function


#: A job: a release command (``"command"``) or a public function (``"function"``), by its
#: index in :func:`_cli_jobs` or :func:`_api_jobs`.
Job = tuple[str, int]


def _groups() -> list[list[Job]]:
    """Every job, grouped by the method it releases with, the largest groups first."""
    by_method: dict[str, list[Job]] = {}
    for index, command in enumerate(_cli_jobs()):
        by_method.setdefault(_method(command[0]), []).append(("command", index))
    for index, (name, _) in enumerate(_api_jobs(synthetic_table())):
        by_method.setdefault(_method(name), []).append(("function", index))
    return sorted(by_method.values(), key=len, reverse=True)


def _run_group(group: list[Job], folder: str, paths: dict[str, str]) -> set[str]:
    """Run ``group``'s jobs; return the kernel signatures they compiled.

    It runs in a process of its own (or the command's, with one process): it is given the
    jobs by index, and makes the functions' table itself.
    """
    commands = _cli_jobs()
    functions = _api_jobs(synthetic_table())
    with _recording_compiles() as compiled, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # advice about the synthetic table's noise
        for kind, index in group:
            if kind == "command":
                output = os.path.join(folder, f"release-{index}.parquet")
                _run_command(commands[index], paths, output)
            else:
                functions[index][1]()
    return compiled


@contextlib.contextmanager
def _recording_compiles() -> Iterator[set[str]]:
    """Within the block, record the kernel signatures compiled (in the set)."""
    from dpfast._jit import watch_compiles

    compiled: set[str] = set()
    stop = watch_compiles(lambda: None, lambda: None, compiled.add)
    try:
        yield compiled
    finally:
        stop()


def _processes(args: argparse.Namespace) -> int:
    """Return the processes to run the groups in: ``--processes``, else one per core."""
    if args.processes is None:
        return max(1, os.cpu_count() or 1)
    if args.processes < 1:
        raise UsageError(f"--processes must be 1 or more, got {args.processes}")
    return int(args.processes)


def _run_groups(
    groups: list[list[Job]],
    folder: str,
    processes: int,
    done: Callable[[int], None],
) -> set[str]:
    """Run every group, in ``processes`` processes; ``done(jobs)`` after each group.

    Returns the kernel signatures compiled (two processes may both compile one). With one
    process the groups run here, one after the other; else in a pool of new processes
    (spawned: this one may hold Numba's threads).
    """
    paths = _write_inputs(folder)
    compiled: set[str] = set()
    if processes == 1 or len(groups) == 1:
        for group in groups:
            compiled |= _run_group(group, folder, paths)
            done(len(group))
        return compiled
    import concurrent.futures
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    workers = min(processes, len(groups))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        running = {pool.submit(_run_group, group, folder, paths): group for group in groups}
        for future in concurrent.futures.as_completed(running):
            compiled |= future.result()
            done(len(running[future]))
    return compiled


def _warm_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    processes = _processes(args)
    line = None if args.quiet else ProgressLine(sys.stderr)
    groups = _groups()
    total = sum(len(group) for group in groups)
    finished = [0]

    def done(jobs: int) -> None:
        finished[0] += jobs
        if line is not None:
            line(PHASE, finished[0], total)

    with tempfile.TemporaryDirectory(prefix="dpfast-warm-up-") as folder:
        try:
            if line is not None:
                line(PHASE, 0, total)
            compiled = _run_groups(groups, folder, processes, done)
        finally:
            if line is not None:
                line.close()
    seconds = time.monotonic() - started
    if compiled:
        print(
            f"dpfast warm-up: compiled and cached {len(compiled)} kernel signature(s) in "
            f"{seconds:.0f} s; the first release of each method no longer compiles"
        )
    else:
        print(f"dpfast warm-up: every kernel was compiled and cached already ({seconds:.1f} s)")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    quiet_argument(parser)
    parser.add_argument(
        "--processes",
        type=integer,
        metavar="N",
        help="processes to compile in (default: one per core)",
    )


#: ``dpfast warm-up``.
WARM_UP = Command(
    "warm-up",
    help="compile and cache the kernels of every release, so that a first release starts at "
    "once (scripts/demo runs it)",
    description="Compile and cache on disk the Numba kernels every release uses, by running "
    "each release on a small synthetic table. Nothing is written outside a temporary folder.",
    epilog=_EXAMPLES,
    arguments=_arguments,
    handler=_warm_up,
)
