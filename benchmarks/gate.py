"""The performance gate: check the quick tier against a baseline, compare revisions, plot.

Commands (``scripts/bench`` and ``scripts/bench-compare`` call them):

* ``check``: run the quick tier (``benchmarks/bench_quick.py``), compare each case's ratio
  and memory multiple with ``benchmarks/baseline.json``; re-measure the cases that fall
  short once; exit 1 with a table if any still does.
* ``update-baseline``: run the quick tier several times (or read runs already made) and
  write the median of each figure, with its tolerance, to ``benchmarks/baseline.json``.
* ``compare BASE [HEAD]``: run the quick tier on two revisions, alternating A B A B, and
  print each case's change with a confidence interval; exit 1 on a significant slowdown
  beyond 10 % (``benchmarks/gate_compare.py``).
* ``plot FILE... -o PNG``: the history of each case's ratio over a series of
  ``--benchmark-json`` files (one per commit; ``benchmarks/gate_history.py``).

Figures: a case's *ratio* is its baseline's time over dpfast's (higher is better; a 2x
slowdown of dpfast halves it); its *memory multiple* is dpfast's peak extra resident
memory over the input size (lower is better). See ``benchmarks/quick.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE = HERE / "baseline.json"
BENCH_FILE = "benchmarks/bench_quick.py"

#: A ratio may fall to this share of its expected figure before it counts as a regression;
#: the tolerance stored per case is between these two (from the spread of its runs). A 2x
#: slowdown halves the ratio, so it always fails: 0.5 < 1 - 0.35.
RATIO_TOLERANCE = (0.30, 0.35)
#: A memory multiple may grow by this share (at least; more if its runs spread more) ...
MEMORY_TOLERANCE = 0.25
#: ... plus this many times the input, for page and allocator granularity.
MEMORY_SLACK = 0.10

Results = dict[str, dict[str, Any]]
Measure = Callable[[Sequence[str] | None], Results]


# -- results files ---------------------------------------------------------------------


def load_results(path: str | Path) -> Results:
    """``{case: extra_info}`` from a pytest-benchmark JSON file of the quick tier."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    results = {}
    for bench in data.get("benchmarks", []):
        info = bench.get("extra_info", {})
        if "case" in info and "ratio" in info:
            results[info["case"]] = info
    return results


# -- check -----------------------------------------------------------------------------


@dataclass
class Row:
    """One case's verdict."""

    case: str
    ratio: float | None
    ratio_expected: float | None
    ratio_min: float | None
    memory: float | None
    memory_expected: float | None
    memory_max: float | None
    status: str  # "ok", "new", "missing", "slower", "memory", "slower+memory"
    remeasured: bool = False

    @property
    def failed(self) -> bool:
        return self.status not in ("ok", "new")


def limits(expected: dict[str, Any]) -> tuple[float, float]:
    """The lowest ratio and the highest memory multiple a case may show."""
    ratio_min = expected["ratio"] * (1.0 - expected["ratio_tolerance"])
    memory_max = expected["memory"] * (1.0 + expected["memory_tolerance"]) + MEMORY_SLACK
    return ratio_min, memory_max


def evaluate(results: Results, baseline: dict[str, Any]) -> list[Row]:
    """Compare measured figures with the baseline's cases, one row per case."""
    rows = []
    expected_cases = baseline["cases"]
    for case in list(expected_cases) + [c for c in results if c not in expected_cases]:
        got = results.get(case)
        expected = expected_cases.get(case)
        ratio = got["ratio"] if got else None
        memory = got.get("memory_multiple") if got else None
        if expected is None:
            rows.append(Row(case, ratio, None, None, memory, None, None, "new"))
            continue
        ratio_min, memory_max = limits(expected)
        if got is None:
            status = "missing"
        else:
            problems = []
            if ratio < ratio_min:
                problems.append("slower")
            if memory is None or memory > memory_max:
                problems.append("memory")
            status = "+".join(problems) or "ok"
        rows.append(
            Row(
                case,
                ratio,
                expected["ratio"],
                ratio_min,
                memory,
                expected["memory"],
                memory_max,
                status,
            )
        )
    return rows


def check(
    baseline: dict[str, Any],
    measure: Measure,
    log: Callable[[str], None] = print,
    here: dict[str, Any] | None = None,
) -> int:
    """Measure, re-measure once what falls short, print the table; 1 if a case regressed.

    ``measure(cases)`` runs the quick tier (all cases when ``cases`` is None) and returns
    its results. A case counts as regressed only if its re-measure falls short too. A
    failure on another processor than the baseline's (``here``, default :func:`machine`)
    says so, and how to tell a regression from the processor.
    """
    rows = evaluate(measure(None), baseline)
    short = [row.case for row in rows if row.failed]
    if short:
        log(f"bench check: re-measuring {len(short)} case(s) that fell short: {', '.join(short)}")
        again = {row.case: row for row in evaluate(measure(short), baseline)}
        rows = [again[row.case] if row.case in short else row for row in rows]
        for row in rows:
            row.remeasured = row.case in short
    log(format_table(rows))
    failed = [row for row in rows if row.failed]
    new = [row.case for row in rows if row.status == "new"]
    if new:
        log(
            f"bench check: not in the baseline yet: {', '.join(new)} "
            "(record them with scripts/bench --update-baseline)"
        )
    if any(row.status == "missing" for row in rows):
        log("bench check: a missing case failed or did not run: see pytest's output above")
    if failed:
        log(
            f"bench check: FAILED: {len(failed)} case(s) regressed beyond their tolerance "
            f"after a re-measure: {', '.join(row.case for row in failed)}"
        )
        _processor_note(baseline, machine() if here is None else here, log)
        return 1
    log(f"bench check: passed ({len(rows)} cases)")
    return 0


def _processor_note(
    baseline: dict[str, Any], here: dict[str, Any], log: Callable[[str], None]
) -> None:
    """Log that the baseline came from another processor, when it did (as far as known)."""
    recorded = baseline.get("machine", {})
    if not any(recorded.get(key) and recorded[key] != here.get(key) for key in _PROCESSOR_KEYS):
        return

    def name(info: dict[str, Any]) -> str:
        return ", ".join(str(info.get(key) or "?") for key in _PROCESSOR_KEYS)

    log(
        f"bench check: the baseline was recorded on another processor ({name(recorded)}) "
        f"than this one ({name(here)}). Ratios move with the processor: run "
        f"scripts/bench-compare {baseline.get('commit', '<baseline commit>')} HEAD on this "
        "machine; if it finds no slowdown, re-record with scripts/bench --update-baseline --runs 5"
    )


def format_table(rows: Iterable[Row]) -> str:
    def number(value: float | None, width: int = 7) -> str:
        return f"{value:{width}.2f}" if value is not None else " " * (width - 1) + "-"

    lines = [
        f"{'case':<22} {'ratio':>7} {'expect':>7} {'min':>7}   {'memory':>7} {'expect':>7} "
        f"{'max':>7}   status",
    ]
    for row in rows:
        status = row.status if row.status in ("ok", "new") else f"REGRESSED ({row.status})"
        if row.remeasured:
            status += ", re-measured"
        lines.append(
            f"{row.case:<22} {number(row.ratio)} {number(row.ratio_expected)} "
            f"{number(row.ratio_min)}   {number(row.memory)} {number(row.memory_expected)} "
            f"{number(row.memory_max)}   {status}"
        )
    return "\n".join(lines)


# -- running the quick tier ------------------------------------------------------------


def run_quick(
    json_path: str | Path,
    cases: Sequence[str] | None = None,
    *,
    cwd: str | Path = ROOT,
    bench_file: str | Path | None = None,
    env: dict[str, str] | None = None,
    quiet: bool = False,
) -> Results:
    """Run the quick tier under pytest-benchmark into ``json_path``; return its results."""
    bench_file = str(bench_file or ROOT / BENCH_FILE)
    targets = [f"{bench_file}::test_quick[{case}]" for case in cases] if cases else [bench_file]
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rN"]
    command += ["--benchmark-columns=median,iqr,rounds", f"--benchmark-json={json_path}"]
    out = subprocess.run(
        command + targets,
        cwd=cwd,
        env=env,
        check=False,
        preexec_fn=_pin_to_one_cpu,  # safe: the gate starts no threads
        stdout=subprocess.PIPE if quiet else None,
        stderr=subprocess.STDOUT if quiet else None,
        text=True,
    )
    if out.returncode != 0:
        if quiet:
            print(out.stdout[-4000:], file=sys.stderr)
        print(f"bench: the quick tier's pytest exited with {out.returncode}", file=sys.stderr)
    if not Path(json_path).exists():
        return {}
    return load_results(json_path)


def _pin_to_one_cpu() -> None:
    """Run the quick tier on one CPU (the last allowed; ``DPFAST_BENCH_CPU`` to choose).

    Both sides of a ratio then get the same single core, so load from other processes on
    the machine's other cores changes neither, and a ratio does not depend on how many
    cores happen to be idle. ``DPFAST_BENCH_CPU=all`` leaves the affinity alone.
    """
    choice = os.environ.get("DPFAST_BENCH_CPU", "")
    if choice == "all" or not hasattr(os, "sched_setaffinity"):
        return
    os.sched_setaffinity(0, {int(choice)} if choice else {max(os.sched_getaffinity(0))})


def _pytest_measure(directory: Path, json_path: Path | None) -> Measure:
    runs = iter(range(1, 100))

    def measure(cases: Sequence[str] | None) -> Results:
        n = next(runs)
        path = directory / f"run{n}.json"
        results = run_quick(path, cases)
        if json_path is not None and path.exists():
            target = json_path if n == 1 else json_path.with_suffix(f".remeasure{n - 1}.json")
            shutil.copyfile(path, target)
        return results

    return measure


# -- baseline --------------------------------------------------------------------------


_VECTOR = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"))
_PROCESSOR_KEYS = ("cpu", "processor", "vector")


def machine() -> dict[str, Any]:
    """Where a baseline was recorded."""
    cpu = platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor's block
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    cpu = fields.get("model name", cpu)
    flags = set(fields.get("flags", "").split())
    # A brand such as "AMD EPYC" names several generations, and a kernel's ratio to NumPy
    # moves with the vector instructions (ChaCha20's rotates, sorting): both are recorded.
    vector = next((name for flag, name in _VECTOR if flag in flags), "")
    memory = None
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo", encoding="utf-8") as handle:
            memory = f"{int(handle.readline().split()[1]) / 2**20:.0f} GiB"
    versions = {}
    for name in ("numpy", "numba", "pandas", "pyarrow"):
        with contextlib.suppress(ImportError):
            versions[name] = __import__(name).__version__
    return {
        "node": platform.node(),
        "cpu": cpu,
        "processor": " ".join(
            f"{part} {fields[part]}" for part in ("cpu family", "model") if part in fields
        ),
        "vector": vector,
        "cpus": os.cpu_count(),
        "memory": memory,
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        **versions,
    }


def summarise(runs: Sequence[Results]) -> dict[str, dict[str, Any]]:
    """Each case's median ratio and memory multiple over ``runs``, with its tolerances."""
    cases: dict[str, dict[str, Any]] = {}
    names = [case for case in runs[0] if all(case in run for run in runs)]
    for case in names:
        ratios = [run[case]["ratio"] for run in runs]
        memories = [run[case]["memory_multiple"] for run in runs]
        ratio = statistics.median(ratios)
        memory = statistics.median(memories)
        ratio_spread = max(abs(r / ratio - 1.0) for r in ratios)
        memory_spread = max(abs(m - memory) for m in memories) / max(memory, MEMORY_SLACK)
        cases[case] = {
            "description": runs[0][case].get("description", case),
            "baseline": runs[0][case].get("baseline", ""),
            "ratio": round(ratio, 3),
            "ratio_tolerance": round(
                min(RATIO_TOLERANCE[1], max(RATIO_TOLERANCE[0], 2 * ratio_spread)), 3
            ),
            "memory": round(memory, 3),
            "memory_tolerance": round(max(MEMORY_TOLERANCE, 2 * memory_spread), 3),
            "ratio_runs": [round(r, 3) for r in ratios],
            "memory_runs": [round(m, 3) for m in memories],
        }
    return cases


def _git(*args: str, cwd: str | Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def write_baseline(runs: Sequence[Results], path: Path = BASELINE) -> dict[str, Any]:
    commit = "unknown"
    with contextlib.suppress(subprocess.CalledProcessError, OSError):
        commit = _git("rev-parse", "--short", "HEAD")
    baseline = {
        "about": (
            "Quick-tier baseline of scripts/bench --check: per case, the median over the runs "
            "of the ratio (baseline time / dpfast time; fails below ratio * (1 - "
            "ratio_tolerance)) and of the memory multiple (dpfast's peak extra RSS / input "
            f"size; fails above memory * (1 + memory_tolerance) + {MEMORY_SLACK}). Rewrite "
            "with scripts/bench --update-baseline; a commit that lowers a figure says why."
        ),
        "recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "runs": len(runs),
        "machine": machine(),
        "cases": summarise(runs),
    }
    path.write_text(json.dumps(baseline, indent=2) + "\n", encoding="utf-8")
    return baseline


def read_baseline(path: Path = BASELINE) -> dict[str, Any]:
    if not path.exists():
        sys.exit(f"bench: no baseline at {path}; record one with scripts/bench --update-baseline")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# -- command line ----------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/gate.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("check", help="quick tier against benchmarks/baseline.json")
    p.add_argument("--baseline", type=Path, default=BASELINE)
    p.add_argument("--json", type=Path, help="keep the pytest-benchmark JSON of the run here")
    p = commands.add_parser("update-baseline", help="rewrite benchmarks/baseline.json")
    p.add_argument("--baseline", type=Path, default=BASELINE)
    p.add_argument("--runs", type=int, default=3, help="quick-tier runs to take the median of")
    p.add_argument(
        "--from", dest="files", nargs="+", type=Path, help="use these JSON files, not new runs"
    )
    p = commands.add_parser("compare", help="quick tier on two revisions, A B A B")
    p.add_argument("base")
    p.add_argument("head", nargs="?", default="HEAD")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--cases", nargs="+", help="only these cases (default: all)")
    p = commands.add_parser("plot", help="history of a series of JSON files as a PNG")
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("-o", "--output", type=Path, default=Path("bench-history.png"))
    args = parser.parse_args(argv)

    if args.command == "check":
        baseline = read_baseline(args.baseline)
        with tempfile.TemporaryDirectory(prefix="dpfast-bench-check-") as directory:
            return check(baseline, _pytest_measure(Path(directory), args.json))
    if args.command == "update-baseline":
        if args.files:
            runs = [load_results(path) for path in args.files]
        else:
            with tempfile.TemporaryDirectory(prefix="dpfast-bench-baseline-") as directory:
                runs = [run_quick(Path(directory) / f"run{i}.json") for i in range(args.runs)]
        baseline = write_baseline(runs, args.baseline)
        for case, figures in baseline["cases"].items():
            print(
                f"{case:<22} ratio {figures['ratio']:7.2f} (min {limits(figures)[0]:6.2f})   "
                f"memory {figures['memory']:5.2f}x (max {limits(figures)[1]:5.2f}x)"
            )
        dropped = sorted({case for run in runs for case in run} - set(baseline["cases"]))
        if dropped:
            print(f"bench: not in every run, so left out: {', '.join(dropped)}")
        print(f"bench: wrote {args.baseline} from {len(runs)} run(s)")
        return 0
    if args.command == "compare":
        from gate_compare import compare

        try:
            return compare(args.base, args.head, args.pairs, args.cases)
        except KeyboardInterrupt:
            print("bench-compare: interrupted; its worktrees are removed", file=sys.stderr)
            return 130
    from gate_history import plot_history

    print(f"bench: wrote {plot_history(args.files, args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
