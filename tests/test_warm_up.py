"""First use: a compile says so on the progress line.

Compiles are counted with Numba's ``numba:compile`` event (a cache hit emits none), never
guessed from seconds.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numba

from dpfast.cli._progress import COMPILING, ProgressLine

ROOT = Path(__file__).resolve().parent.parent


class FakeStream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _fresh_kernel():
    """A kernel no cache holds: its first call with each signature compiles."""
    return numba.njit(lambda x: x + 1)


def test_a_compile_shows_once_on_a_pipe_and_not_after_close():
    stream = FakeStream(tty=False)
    line = ProgressLine(stream)
    line.watch_compiles()
    line("noise", 1, 4)
    kernel = _fresh_kernel()
    kernel(1)
    kernel(1.0)  # a second signature, a second compile: said once
    kernel(2)  # compiled already: nothing
    line("assemble", 1, 1)
    line.close()
    _fresh_kernel()(1)  # after close: not watched
    expected = f"dpfast: noise...\ndpfast: {COMPILING}...\ndpfast: assemble...\n"
    assert stream.getvalue() == expected


def test_on_a_terminal_the_phase_comes_back_after_a_compile():
    stream = FakeStream(tty=True)
    line = ProgressLine(stream)
    line.watch_compiles()
    line("noise", 1, 4)
    _fresh_kernel()(1)
    got = stream.getvalue().split("\r")
    assert got[1:] == [
        "dpfast: noise  25%",
        f"dpfast: {COMPILING}",
        "dpfast: noise  25%".ljust(len(f"dpfast: {COMPILING}")),
    ]
    line.close()


def test_a_delayed_line_shows_a_compile_at_once(monkeypatch):
    monkeypatch.setattr("dpfast.cli._progress.time.monotonic", lambda: 10.0)
    stream = FakeStream(tty=False)
    line = ProgressLine(stream, delay=1.0)
    line.watch_compiles()
    line("reading a.csv", 0, 4)  # not shown: the phase is younger than its delay
    _fresh_kernel()(1)
    line.close()
    assert stream.getvalue() == f"dpfast: {COMPILING}...\n"


def _dpfast(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpfast", *args], capture_output=True, text=True, env=env
    )


def test_the_progress_line_says_when_a_release_compiles(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("x,y\n" + "".join(f"{i % 37},{i}\n" for i in range(200)), encoding="utf-8")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    release = ["release", "individual-ranking", str(data), "--k", "3", "--columns", "x"]
    first = _dpfast(*release, "-o", str(tmp_path / "a.csv"), env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr.count(f"dpfast: {COMPILING}...\n") == 1, first.stderr
    second = _dpfast(*release, "-o", str(tmp_path / "b.csv"), env=env)  # cached now
    assert second.returncode == 0, second.stderr[-3000:]
    assert "compiling" not in second.stderr, second.stderr
    quiet = _dpfast(*release, "-o", str(tmp_path / "c.csv"), "--quiet", env=env)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
