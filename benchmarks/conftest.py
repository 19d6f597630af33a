"""Benchmark collection and the ratio summary.

Benchmarks live in ``bench_*.py`` files, collected only when ``benchmarks/`` is named on
the command line (``scripts/bench``). Each job is timed for dpfast and for a baseline that
does the same job, in the same run; the summary prints the ratio of their medians.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

_MEDIANS: dict[str, dict[str, float]] = defaultdict(dict)
_NOTES: list[str] = []


def pytest_collect_file(parent, file_path):
    # A file named on the command line is already collected by pytest itself.
    if (
        file_path.suffix == ".py"
        and file_path.name.startswith("bench_")
        and not parent.session.isinitpath(file_path)
    ):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_configure(config):
    # Some jobs time the papers' own modes (record-linked ir_dp, the paper's categorical
    # sensitivity) against baselines doing exactly that job; they warn by design.
    # Only the warnings the measured revision has (bench-compare runs older ones too).
    from dpfast import exceptions

    if hasattr(exceptions, "UnprovenReleaseWarning"):
        config.addinivalue_line(
            "filterwarnings", "ignore::dpfast.exceptions.UnprovenReleaseWarning"
        )


def pytest_addoption(parser):
    parser.addoption("--ratios-json", default=None, help="write the ratio table to this JSON file")


@pytest.fixture
def record(benchmark):
    """Call ``record(job, implementation)`` after ``benchmark(...)`` to keep its median."""

    def _record(job: str, implementation: str) -> None:
        _MEDIANS[job][implementation] = benchmark.stats.stats.median

    return _record


@pytest.fixture(scope="session")
def note():
    """Call ``note(text)`` to print a line in the summary (e.g. a measured memory peak)."""
    return _NOTES.append


@pytest.fixture(scope="session")
def fresh_process():
    """Call ``fresh_process(code, *args)`` to run ``code`` in a new Python (e.g. a memory probe).

    Returns the JSON object the code prints on its last line of output.
    """

    def _run(code: str, *args: object) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", code, *map(str, args)],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    return _run


def pytest_terminal_summary(terminalreporter, config):
    if not _MEDIANS and not _NOTES:
        return
    rows = []
    terminalreporter.section("dpfast ratios (median seconds; ratio = baseline / dpfast)")
    for job, impls in sorted(_MEDIANS.items()):
        ours = impls.get("dpfast")
        if len(impls) > 1 and "dpfast" in impls:
            others = {name: m for name, m in impls.items() if name != "dpfast"}
            impls = {"dpfast": ours, **others}
        for name, median in impls.items():
            ratio = (median / ours) if ours and name != "dpfast" else None
            rows.append({"job": job, "implementation": name, "median_s": median, "ratio": ratio})
            text = f"{job:<40} {name:<22} {median:10.4f} s"
            if ratio is not None:
                text += f"   dpfast is {ratio:6.1f}x faster"
            terminalreporter.write_line(text)
    for line in _NOTES:
        terminalreporter.write_line(line)
    path = config.getoption("--ratios-json")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"ratios": rows, "notes": _NOTES, "cpus": os.cpu_count()}, handle, indent=2)
