"""scripts/_venv.sh: which install serves which script (no network: every case is served)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ensure(folder: Path, extras: str) -> subprocess.CompletedProcess[str]:
    script = f"set -euo pipefail; source {ROOT / 'scripts' / '_venv.sh'}; ensure_venv t '{extras}'"
    return subprocess.run(["bash", "-c", script], cwd=folder, capture_output=True, text=True)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A checkout's pyproject.toml and a .venv whose python is this one, nothing installed."""
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return tmp_path


def _stamp(folder: Path, tag: str) -> None:
    digest = hashlib.sha256((folder / "pyproject.toml").read_bytes()).hexdigest()
    (folder / ".venv" / f".dpfast-installed-{tag}").write_text(digest + "\n")


def test_the_demo_is_served_by_its_own_install_without_a_test_install(folder):
    # set -euo pipefail in the scripts: a missing test stamp must not end the script
    _stamp(folder, "base")
    done = _ensure(folder, ".")
    assert done.returncode == 0, done.stderr
    assert "installing" not in done.stderr


def test_the_demo_is_served_by_the_test_install(folder):
    _stamp(folder, "test")
    done = _ensure(folder, ".")
    assert done.returncode == 0, done.stderr
    assert "installing" not in done.stderr


def test_the_docs_are_served_by_their_own_install(folder):
    _stamp(folder, "docs")
    done = _ensure(folder, ".[docs]")
    assert done.returncode == 0, done.stderr
    assert "installing" not in done.stderr


def _fake_dpfast(folder: Path, exit_code: int = 0) -> Path:
    """A .venv/bin/dpfast that logs its arguments, one call a line, and exits with exit_code."""
    log = folder / "calls.log"
    script = folder / ".venv" / "bin" / "dpfast"
    script.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\nexit {exit_code}\n')
    script.chmod(0o755)
    # this Python with its packages (numba's version is in the warm-up's stamp)
    python = folder / ".venv" / "bin" / "python"
    python.unlink()
    python.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (folder / "dpfast" / "_kernels").mkdir(parents=True)
    (folder / "dpfast" / "_kernels" / "ranking.py").write_text("# a kernel\n")
    (folder / "dpfast" / "_jit.py").write_text("# the jit\n")
    return log


def _warm(folder: Path, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """ensure_warmed_up in ``folder``, with NUMBA_CACHE_DIR ``cache`` (unset if None)."""
    script = f"set -euo pipefail; source {ROOT / 'scripts' / '_venv.sh'}; ensure_warmed_up t"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    return subprocess.run(
        ["bash", "-c", script], cwd=folder, capture_output=True, text=True, env=env
    )


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_the_warm_up_runs_once_until_a_kernel_changes(folder):
    log = _fake_dpfast(folder)
    for _ in range(2):
        done = _warm(folder)
        assert done.returncode == 0, done.stderr
    assert _calls(log) == ["warm-up"]
    (folder / "dpfast" / "_kernels" / "ranking.py").write_text("# a changed kernel\n")
    assert _warm(folder).returncode == 0
    assert _calls(log) == ["warm-up", "warm-up"]


def test_each_numba_cache_is_warmed_up_once_and_again_when_it_is_gone(folder):
    # a NUMBA_CACHE_DIR cache and Numba's default one (the demo's and scripts/test's) apart
    log = _fake_dpfast(folder)
    cache = folder / ".venv" / "numba-cache"
    cache.mkdir()
    for _ in range(2):
        assert _warm(folder, cache).returncode == 0
        assert _warm(folder).returncode == 0
    assert _calls(log) == ["warm-up", "warm-up"]  # once for each cache, not at each switch
    cache.rmdir()
    assert _warm(folder, cache).returncode == 0
    assert _calls(log) == ["warm-up"] * 3
    assert _warm(folder).returncode == 0  # the default cache's stamp still holds
    assert _calls(log) == ["warm-up"] * 3


def test_a_failed_warm_up_is_tried_again(folder):
    log = _fake_dpfast(folder, exit_code=1)
    assert _warm(folder).returncode == 1  # set -e: the script stops on it
    assert not (folder / ".venv" / ".dpfast-warmed-up").exists()
    assert _warm(folder).returncode == 1
    assert _calls(log) == ["warm-up", "warm-up"]


def test_the_demo_warms_up_runs_the_demo_and_says_how_to_get_dpfast_on_the_path(folder):
    log = _fake_dpfast(folder)
    (folder / "scripts").mkdir()
    for name in ("demo", "_venv.sh"):
        (folder / "scripts" / name).write_bytes((ROOT / "scripts" / name).read_bytes())
    _stamp(folder, "base")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if "venv" not in p)
    done = subprocess.run(
        ["bash", str(folder / "scripts" / "demo"), "--k", "50"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
    )
    assert done.returncode == 0, done.stderr
    assert _calls(log) == ["warm-up", "demo --k 50"]
    assert f"source {folder.resolve()}/.venv/bin/activate" in done.stderr
    activated = {**os.environ, "PATH": f"{folder / '.venv' / 'bin'}{os.pathsep}{path}"}
    again = subprocess.run(
        ["bash", str(folder / "scripts" / "demo")], capture_output=True, text=True, env=activated
    )
    assert again.returncode == 0, again.stderr
    assert _calls(log) == ["warm-up", "demo --k 50", "demo"]  # warmed up already
    assert "activate" not in again.stderr  # dpfast is on the PATH
