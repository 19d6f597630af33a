"""What a run killed outright leaves: found by its name, removed by the next run (issue 43).

Each kind of scratch or staging file that dpfast makes is left by a real process killed
with SIGKILL at the step that has made it (the process pauses there, told by a marker
file, and is killed): the command line's staging directory in memory and out of core, a
CSV input's Parquet conversion, the staging directory of a table written in memory, the
out-of-core engine's scratch directory, the Dask client's and Spark driver's scratch
directories, a budget file's temporary file. Each is named for its output (or its
process) and the killed process; ``dpfast budget clear`` names and removes it, and so
does the next run to the same output, with a warning (a release command removes a
process's scratch in the temporary directory quietly); a running process's is left
alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import cli
from dpfast._staging import directory_beside, leftovers, remove_gone
from dpfast.budget import BudgetFile
from tests.test_cli_safety import cli_process, wait_for

SCHEMA = {"columns": {"age": {"type": "integer", "bounds": [17, 90]}}}
BOUNDS = {"age": (17, 90)}

#: The mark in a scratch name: the process, and this host (8 hex digits of SHA-256 of its name).
HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
MARK = rf"dpfast(?P<pid>\d+)h{HOST}-"

# Runs one kind of release (argv[1]) in the working directory, pausing for good once the
# step that makes its scratch is done; the marker file says so.
_PAUSING = """
import os, sys, time
from pathlib import Path
kind, output = sys.argv[1], os.path.abspath("out.parquet")
here = os.getcwd()

def pause():
    Path("marker").write_text(kind)
    time.sleep(300)

real_replace = os.replace

def pause_at_rename(when):
    def replace(src, dst, **kwargs):
        if when(Path(src), Path(os.path.abspath(dst))):
            pause()
        return real_replace(src, dst, **kwargs)
    os.replace = replace

import pandas as pd
import dpfast
from dpfast import cli
frame = pd.read_parquet("in.parquet")
release = ["release", "laplace", "--epsilon", "1", "--schema", "s.json", "--seed", "1",
           "--budget", "b.json", "-o", "out.parquet"]
if kind == "command line in memory":  # the data written into the staging directory
    pause_at_rename(lambda src, dst: dst.parent.name.startswith(".out.parquet.dpfast"))
    cli.main([*release, "in.csv"])
elif kind == "command line out of core":  # the engine's output complete in it
    pause_at_rename(lambda src, dst: src.name.startswith("release"))
    cli.main([*release, "in.parquet", "--memory-limit", "1MiB"])
elif kind == "CSV conversion":
    from dpfast.engines.outofcore import _csv
    convert = _csv._convert
    def converted(*args):
        done = convert(*args)
        pause()
        return done
    _csv._convert = converted
    cli.main([*release, "in.csv", "--memory-limit", "1MiB"])
elif kind == "table written in memory":
    pause_at_rename(lambda src, dst: str(dst) == output)
    dpfast.laplace_dp(frame, epsilon=1, bounds={"age": (17, 90)}, output=output,
                      budget=dpfast.BudgetFile("b.json"))
elif kind == "engine scratch":
    pause_at_rename(lambda src, dst: str(dst) == output)
    dpfast.laplace_dp("in.parquet", epsilon=1, bounds={"age": (17, 90)}, output=output,
                      memory_limit="1MiB", budget=dpfast.BudgetFile("b.json"))
elif kind == "Dask client scratch":
    from dpfast.engines.dask._settings import scratch_directory
    scratch_directory()
    pause()
elif kind == "Spark driver scratch":  # as scratch_directory(session) makes it
    from dpfast.engines.scratch_dirs import process_scratch
    process_scratch("", "dpfast-spark-")
    pause()
elif kind == "budget file":
    pause_at_rename(lambda src, dst: dst.name == "b.json")
    dpfast.BudgetFile("b.json").reserve(0.5, method="laplace", output=output)
"""

#: Each kind: where it lies (``"out"``: beside the output, ``"budget"``: beside the budget
#: file, ``"temp"``: the temporary directory), its name's pattern, a file or a directory.
KINDS = {
    "command line in memory": ("out", rf"\.out\.parquet\.{MARK}", "dir"),
    "command line out of core": ("out", rf"\.out\.parquet\.{MARK}", "dir"),
    "CSV conversion": ("out", rf"\.out\.parquet\.{MARK}", "dir"),
    "table written in memory": ("out", rf"\.out\.parquet\.{MARK}", "dir"),
    "engine scratch": ("out", rf"\.out\.parquet\.{MARK}", "dir"),
    "Dask client scratch": ("temp", rf"dpfast-dask-{MARK}", "dir"),
    "Spark driver scratch": ("temp", rf"dpfast-spark-{MARK}", "dir"),
    "budget file": ("budget", rf"\.b\.json\.{MARK}.*\.tmp$", "file"),
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"age": rng.integers(17, 91, 500)})
    frame.to_parquet(tmp_path / "in.parquet")
    frame.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    BudgetFile.create(tmp_path / "b.json", 10.0)
    temporary = tmp_path / "tmp"  # this test's own temporary directory, and its processes'
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _killed(workdir: Path, kind: str) -> tuple[Path, int]:
    """Run ``kind`` in a process killed with SIGKILL at its step; return what it left."""
    process = cli_process(_PAUSING, [kind], workdir)
    try:
        wait_for(workdir / "marker", process)
        process.send_signal(signal.SIGKILL)  # no handler runs, nothing is removed
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    (workdir / "marker").unlink()
    where, pattern, shape = KINDS[kind]
    parent = {"out": workdir, "budget": workdir, "temp": workdir / "tmp"}[where]
    found = [p for p in parent.iterdir() if re.fullmatch(pattern + ".*", p.name)]
    assert len(found) == 1, sorted(p.name for p in parent.iterdir())
    (left,) = found
    assert re.search(MARK, left.name).group("pid") == str(process.pid)  # type: ignore[union-attr]
    assert left.is_dir() == (shape == "dir")
    if shape == "dir" and where == "out":
        assert any(left.iterdir())  # it holds what the run wrote
    assert not (workdir / "out.parquet").exists()
    return left, process.pid


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_budget_clear_names_and_removes_what_a_killed_run_left(
    workdir: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    # a release to the output that runs on (in this process): the budget names the output
    # even where the killed run reserved nothing (a CSV conversion comes before that)
    BudgetFile("b.json").reserve(1.0, method="laplace", output=str(workdir / "out.parquet"))
    left, pid = _killed(workdir, kind)
    mine = directory_beside(workdir / "out.parquet")  # this process runs
    other_host = "0" * 8 if HOST != "0" * 8 else "1" * 8
    elsewhere = workdir / f".out.parquet.dpfast{pid}h{other_host}-x"  # cannot be checked here
    elsewhere.mkdir()
    assert cli.main(["budget", "clear", "b.json"]) == 0
    said = capsys.readouterr().out
    assert f"{str(left)!r} (process {pid})" in said and "removed what runs killed" in said
    assert not os.path.lexists(left)
    assert mine.is_dir() and f"left alone, their process still runs: {str(mine)!r}" in said
    assert elsewhere.is_dir() and "made on another host, which this one cannot check" in said
    assert str(elsewhere) in said.splitlines()[-1]


def _next_run(kind: str) -> None:
    """Run what comes next to the same output (or, for a process's scratch, any release)."""
    if kind == "table written in memory":
        frame = pd.read_parquet("in.parquet")
        dpfast.laplace_dp(frame, epsilon=1, bounds=BOUNDS, output=os.path.abspath("out.parquet"))
    elif kind == "engine scratch":
        dpfast.laplace_dp(
            "in.parquet", epsilon=1, bounds=BOUNDS, output="out.parquet", memory_limit="1MiB"
        )
    else:
        argv = ["release", "laplace", "in.csv", "-o", "out.parquet", "--epsilon", "1"]
        argv += ["--schema", "s.json", "--seed", "1", "--budget", "b.json"]
        if kind in ("command line out of core", "CSV conversion"):
            argv += ["--memory-limit", "1MiB"]
        assert cli.main(argv) == 0


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_next_run_removes_what_a_killed_run_left_saying_so(
    workdir: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    left, pid = _killed(workdir, kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _next_run(kind)
    said = capsys.readouterr().err + "\n".join(str(w.message) for w in caught)
    if KINDS[kind][0] != "temp":  # the temporary directory's go quietly
        assert f"removed {str(left)!r}: scratch left by an earlier run (process {pid})" in said
    assert not os.path.lexists(left)
    assert (workdir / "out.parquet").exists()
    assert [p.name for p in workdir.iterdir() if "dpfast" in p.name] == []


def test_a_running_process_scratch_is_never_removed(workdir: Path) -> None:
    made = directory_beside(workdir / "out.parquet")
    found = leftovers(workdir / "out.parquet")
    assert [(f.path, f.state) for f in found] == [(made, "running")]
    assert remove_gone(found) == [] and made.is_dir()
