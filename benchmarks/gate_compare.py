"""bench-compare: the quick tier on two revisions, alternating A B A B, on one machine.

Both revisions are checked out in temporary worktrees outside the repository (removed
afterwards, also on failure or interrupt) and run with the current checkout's quick tier,
each importing its own dpfast through ``PYTHONPATH`` with its own Numba cache.
``paired_change`` gives each case's change of dpfast's time with a t-interval over the
pairs; ``compare`` fails on a significant slowdown beyond ``SLOWDOWN_LIMIT``.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate import BENCH_FILE, HERE, ROOT, Results, _git, run_quick

#: bench-compare fails on a slowdown beyond this share that is significant at this level.
SLOWDOWN_LIMIT = 0.10
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Change:
    """HEAD's time relative to BASE, from paired runs: +0.10 is 10 % slower."""

    estimate: float
    low: float
    high: float
    n_pairs: int

    @property
    def significant_slowdown(self) -> bool:
        """Slower by more than the limit, and significantly slower at all."""
        return self.estimate > SLOWDOWN_LIMIT and self.low > 0.0


def paired_change(
    base_ratios: Sequence[float], head_ratios: Sequence[float], confidence: float = CONFIDENCE
) -> Change:
    """Change of dpfast's time from BASE to HEAD, with a t-interval over the pairs.

    Each pair holds the ratio (baseline time / dpfast time) of one BASE run and of the HEAD
    run just after it. ``log(base / head)`` is the log of HEAD's slowdown in that pair;
    the interval is the t-interval of its mean, mapped back to a relative change.
    """
    from scipy import stats

    if len(base_ratios) != len(head_ratios) or len(base_ratios) < 2:
        raise ValueError(
            f"need two or more pairs of ratios, got {len(base_ratios)} and {len(head_ratios)}"
        )
    logs = [math.log(b / h) for b, h in zip(base_ratios, head_ratios, strict=True)]
    n = len(logs)
    mean = statistics.fmean(logs)
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return Change(math.expm1(mean), math.expm1(mean - half), math.expm1(mean + half), n)


def format_changes(
    changes: dict[str, Change], memory: dict[str, tuple[float | None, float | None]]
) -> str:
    lines = [
        f"{'case':<22} {'time change':>11}   {int(CONFIDENCE * 100)}% interval      "
        f"{'memory A':>8} {'memory B':>8}   verdict"
    ]
    for case, change in changes.items():
        a, b = memory.get(case, (None, None))
        verdict = "SLOWER" if change.significant_slowdown else "ok"
        if change.high < 0.0:
            verdict = "faster"
        lines.append(
            f"{case:<22} {change.estimate:+10.1%}   [{change.low:+7.1%}, {change.high:+7.1%}]   "
            f"{_fmt(a):>8} {_fmt(b):>8}   {verdict}"
        )
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def compare(base: str, head: str, pairs: int, cases: Sequence[str] | None) -> int:
    """Run the quick tier on BASE and HEAD alternately; 1 on a significant slowdown."""
    if pairs < 2:
        sys.exit("bench-compare: --pairs must be 2 or more (3 or more gives a useful interval)")
    revisions = {"A": _git("rev-parse", "--verify", f"{base}^{{commit}}"), "B": ""}
    revisions["B"] = _git("rev-parse", "--verify", f"{head}^{{commit}}")
    top = Path(tempfile.mkdtemp(prefix="dpfast-compare-"))
    trees: list[Path] = []

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        # The harness (benchmarks/, the DiffGen helpers, the pytest configuration) is the
        # current checkout's, frozen for the run: both sides are measured the same way.
        harness = top / "harness"
        shutil.copytree(HERE, harness / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
        (harness / "scripts").mkdir()
        shutil.copy(ROOT / "scripts" / "diffgen_common.py", harness / "scripts")
        shutil.copy(ROOT / "pyproject.toml", harness)
        shutil.copy(ROOT / "conftest.py", harness)  # its warning filters go with the ini file
        for side, commit in revisions.items():
            tree = top / side
            _git("worktree", "add", "--detach", "--quiet", str(tree), commit)
            trees.append(tree)
        print(
            f"bench-compare: A = {base} ({revisions['A'][:10]}), B = {head} ({revisions['B'][:10]})"
        )
        results: dict[str, list[Results]] = {"A": [], "B": []}
        for pair in range(pairs):
            for side in ("A", "B"):
                print(f"bench-compare: pair {pair + 1}/{pairs}, {side}", flush=True)
                env = dict(os.environ)
                env["PYTHONPATH"] = os.pathsep.join(
                    [str(top / side)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
                )
                env["NUMBA_CACHE_DIR"] = str(top / f"numba-cache-{side}")
                env["DPFAST_BENCH_REVISION"] = str(top / side)
                if pair > 0:
                    env["DPFAST_BENCH_MEMORY"] = "0"  # measured once, in the first pair
                got = run_quick(
                    top / f"{side}{pair}.json",
                    cases,
                    cwd=top / side,
                    bench_file=harness / BENCH_FILE,
                    env=env,
                    quiet=True,
                )
                _check_imported(got, top / side)
                results[side].append(got)
        every = results["A"] + results["B"]
        names = [c for c in results["A"][0] if all(c in r for r in every)]
        missing = sorted(set().union(*every, cases or ()) - set(names))
        changes = {
            c: paired_change(
                [r[c]["ratio"] for r in results["A"]], [r[c]["ratio"] for r in results["B"]]
            )
            for c in names
        }
        memory = {
            c: (
                results["A"][0][c].get("memory_multiple"),
                results["B"][0][c].get("memory_multiple"),
            )
            for c in names
        }
        print(format_changes(changes, memory))
        slower = [c for c, change in changes.items() if change.significant_slowdown]
        if missing or not names:
            print(f"bench-compare: FAILED: cases without results: {', '.join(missing) or 'all'}")
            return 1
        if slower:
            print(
                f"bench-compare: FAILED: significantly slower by more than "
                f"{SLOWDOWN_LIMIT:.0%}: {', '.join(slower)}"
            )
            return 1
        print(f"bench-compare: no significant slowdown beyond {SLOWDOWN_LIMIT:.0%}")
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        for tree in trees:
            with contextlib.suppress(subprocess.CalledProcessError, OSError):
                _git("worktree", "remove", "--force", str(tree))
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            _git("worktree", "prune")
        shutil.rmtree(top, ignore_errors=True)


def _check_imported(results: Results, tree: Path) -> None:
    """Refuse results whose dpfast, or any of its modules, came from outside ``tree``."""
    for case, info in results.items():
        paths = [info.get("dpfast_path"), *info.get("dpfast_module_paths", [])]
        outside = [p for p in paths if p and not Path(p).is_relative_to(tree.resolve())]
        if outside:
            raise RuntimeError(f"{case} imported dpfast from {outside[0]}, not from {tree}")
