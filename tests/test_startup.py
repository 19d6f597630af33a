"""Start-up cost: ``import dpfast`` and every ``--help`` import no NumPy, pandas, pyarrow or Numba.

The public names of ``dpfast`` are imported on first use (PEP 562), so the lazy table, the
imports the type checkers and the API reference read, and ``__all__`` must agree.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "pandas", "pyarrow", "numba")


def _imported(command: list[str]) -> set[str]:
    """Run ``command`` with ``-X importtime`` on; return the top-level modules it imported."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "argparse" in names, done.stderr[-2000:]  # the profile was read
    return names


def test_python_m_dpfast_help_imports_no_heavy_module():
    got = _imported([sys.executable, "-m", "dpfast", "--help"])
    assert not got & set(HEAVY), sorted(got & set(HEAVY))


def test_the_console_script_help_imports_no_heavy_module():
    script = Path(sys.executable).parent / "dpfast"
    if not script.exists():
        pytest.skip("no dpfast console script beside this Python")
    got = _imported([str(script), "--help"])
    assert not got & set(HEAVY), sorted(got & set(HEAVY))


def test_the_profile_sees_a_heavy_import():
    # guards the two tests above: a command that does import numpy is caught
    got = _imported([sys.executable, "-c", "import argparse, dpfast; dpfast.ir_dp"])
    assert {"numpy", "numba"} <= got


def test_every_subcommand_help_imports_no_heavy_module():
    code = (
        "import contextlib, io, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from docs_hooks import commands\n"
        "from dpfast.cli import build_parser, main\n"
        "paths = [p for p, _ in commands(build_parser())]\n"
        "for path in paths:\n"
        "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "        assert main([*path[1:], '--help']) == 0, path\n"
        "    assert 'usage: ' + ' '.join(path) in out.getvalue(), path\n"
        f"    heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "    assert not heavy, (path, heavy)\n"
        "print(len(paths))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "scripts")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) >= 15  # dpfast, release and its methods, the groups, ...


def test_import_dpfast_is_light_and_every_public_name_resolves():
    code = (
        "import sys, dpfast\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from dpfast import ir_dp, Release, metrics\n"
        "assert ir_dp.__module__ == 'dpfast.methods.ir_dp'\n"
        "assert dpfast.ir_dp is ir_dp and dpfast.Release is Release\n"
        "assert metrics is sys.modules['dpfast.metrics']\n"
        "names = {}\n"
        "exec('from dpfast import *', names)\n"
        "assert set(dpfast.__all__) <= set(names), set(dpfast.__all__) - set(names)\n"
        "assert set(dpfast.__all__) <= set(dir(dpfast))\n"
        "try:\n"
        "    dpfast.no_such_name\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """The names imported in ``if TYPE_CHECKING:`` blocks, each with its module."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                for alias in statement.names:
                    found[alias.asname or alias.name] = f"{statement.module}"
    return found


def test_the_lazy_table_the_typed_imports_and_all_agree():
    import dpfast

    tree = ast.parse((ROOT / "dpfast" / "__init__.py").read_text(encoding="utf-8"))
    typed = _type_checking_imports(tree)
    homes = dpfast._HOMES
    assert set(dpfast.__all__) == {*homes, "__version__"}
    assert set(typed) == set(homes)
    for name, module in typed.items():
        # ``from dpfast import metrics`` names a subpackage: its home is itself
        expected = f"dpfast.{name}" if module == "dpfast" else module
        assert homes[name] == expected, name


def test_every_public_module_is_an_attribute_after_import_dpfast():
    # as when the package imported them all: docs write dpfast.noise.permutation(...)
    from tests.test_architecture import PUBLIC_MODULES

    top = sorted({name.split(".")[1] for name in PUBLIC_MODULES})
    code = (
        "import sys, types, dpfast\n"
        f"for name in {top!r}:\n"
        "    assert isinstance(getattr(dpfast, name), types.ModuleType), name\n"
        "    assert name in dir(dpfast), name\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
