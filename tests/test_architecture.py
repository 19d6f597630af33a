"""Layering and import-time rules of STYLE.md, checked by parsing the package's imports."""

import ast
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpfast"

# A module may import dpfast modules of a strictly lower layer only (STYLE.md, "Layout"):
# cli -> engines -> methods -> _release/compare -> noise/accounting/partitions/metrics
# -> taxonomy/schema/io
# -> _validation -> _kernels -> _jit.
LAYERS = {
    "_jit": 0,
    "exceptions": 0,
    "_version": 0,
    "_kernels": 1,
    "_validation": 2,
    "io": 3,
    "schema": 3,
    "taxonomy": 3,
    "accounting": 4,
    "budget": 4,
    "noise": 4,
    "partitions": 4,
    "metrics": 4,
    "risk": 4,
    "datasets": 4,
    "_release": 5,
    "compare": 5,
    "methods": 6,
    "engines": 7,
    "cli": 8,
    "__init__": 9,
    "__main__": 10,
}

# The subpackages and modules a user may import by name.
PUBLIC_MODULES = [
    "dpfast.accounting",
    "dpfast.budget",
    "dpfast.cli",
    "dpfast.compare",
    "dpfast.datasets",
    "dpfast.engines",
    "dpfast.engines.dask",
    "dpfast.engines.spark",
    "dpfast.exceptions",
    "dpfast.io",
    "dpfast.methods",
    "dpfast.methods.diffgen",
    "dpfast.methods.individual_ranking",
    "dpfast.methods.ir_dp",
    "dpfast.methods.k_noise",
    "dpfast.methods.k_pram",
    "dpfast.methods.laplace_dp",
    "dpfast.methods.mdav",
    "dpfast.methods.mdav_dp",
    "dpfast.methods.randomized_response",
    "dpfast.metrics",
    "dpfast.noise",
    "dpfast.partitions",
    "dpfast.partitions.categorical",
    "dpfast.partitions.grid",
    "dpfast.partitions.insensitive_mdav",
    "dpfast.partitions.mdav",
    "dpfast.partitions.ranking",
    "dpfast.risk",
    "dpfast.schema",
    "dpfast.taxonomy",
]


def _module_key(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def _dpfast_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "dpfast":
                yield from (alias.name for alias in node.names)
            elif node.module.startswith("dpfast."):
                yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dpfast."):
                    yield alias.name.split(".")[1]


def _all_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0]


def test_every_module_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        assert _module_key(path) in LAYERS, f"add {path.name} to LAYERS"
    assert all(isinstance(layer, int) for layer in LAYERS.values())


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_module_is_importable_as_a_module(name):
    module = importlib.import_module(name)
    assert isinstance(module, types.ModuleType)
    assert module.__name__ == name
    parent, _, child = name.rpartition(".")
    # reachable by attribute too: no function shadows it on its parent
    assert getattr(importlib.import_module(parent), child) is module


def test_every_subpackage_is_listed_as_public():
    found = {
        "dpfast." + ".".join(path.relative_to(PACKAGE).parent.parts)
        for path in PACKAGE.rglob("__init__.py")
        if path.parent != PACKAGE and not path.parent.name.startswith("_")
    }
    assert found <= set(PUBLIC_MODULES)


def test_public_functions_do_not_shadow_modules():
    import dpfast

    for name in dpfast.__all__:
        assert not (PACKAGE / f"{name}.py").exists(), name
        assert not (PACKAGE / name / "__init__.py").exists() or name in {
            "datasets",
            "metrics",
            "risk",
        }, name


def test_dependencies_point_one_way():
    for path in PACKAGE.rglob("*.py"):
        key = _module_key(path)
        for imported in _dpfast_imports(path):
            if imported == key:
                continue  # inside a subpackage
            assert LAYERS[imported] < LAYERS[key], f"{path.name} imports dpfast.{imported}"


def test_kernels_import_only_numpy_and_jit():
    for path in (PACKAGE / "_kernels").rglob("*.py"):
        external = set(_all_imports(path)) - {"__future__", "numpy", "dpfast"}
        assert not external, f"{path.name} imports {external}"
        assert set(_dpfast_imports(path)) <= {"_jit", "_kernels"}


def test_only_io_and_the_engines_import_pyarrow():
    # the engines work on Arrow batches; everything else goes through dpfast.io
    for path in PACKAGE.rglob("*.py"):
        if path.name != "io.py" and "engines" not in path.relative_to(PACKAGE).parts:
            assert "pyarrow" not in set(_all_imports(path)), path.name


def test_only_jit_calls_numba():
    for path in PACKAGE.rglob("*.py"):
        if path.name != "_jit.py":
            assert "numba" not in set(_all_imports(path)), path.name


def test_import_compiles_nothing():
    code = (
        "import sys, dpfast, numba\n"
        "import dpfast.cli, dpfast.metrics, dpfast.noise, dpfast.risk\n"
        "from numba.core.registry import CPUDispatcher\n"
        "compiled = [f'{m}.{n}' for m, mod in list(sys.modules.items()) if m.startswith('dpfast')\n"
        "            for n, obj in vars(mod).items()\n"
        "            if isinstance(obj, CPUDispatcher) and obj.signatures]\n"
        "kernels = [n for m, mod in list(sys.modules.items()) if m.startswith('dpfast._kernels')\n"
        "           for n, obj in vars(mod).items() if isinstance(obj, CPUDispatcher)]\n"
        "assert kernels, 'no kernels found'\n"
        "print(compiled)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
