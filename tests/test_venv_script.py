"""scripts/_venv.sh: which install serves which script (no network: every case is served)."""

from __future__ import annotations

import hashlib
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
