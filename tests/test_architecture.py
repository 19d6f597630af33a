"""Layering and import-time rules of STYLE.md, checked by parsing the package's imports."""

import ast
import importlib
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpfast"

# A module may import dpfast modules of a strictly lower layer only (STYLE.md, "Layout"):
# cli -> methods -> _release/compare -> steps | engines -> dataflow -> noise/accounting/
# partitions/metrics/risk -> io/schema/taxonomy -> _validation -> _kernels -> _jit. Imports
# inside functions count, and so does a module named in a string (importlib.import_module,
# the engine registry).
LAYERS = {
    "_jit": 0,
    "exceptions": 0,
    "_version": 0,
    "_kernels": 1,
    "_wording": 1,
    "_validation": 2,
    "io": 3,
    "schema": 3,
    "taxonomy": 3,
    "_private_files": 3,
    "_staging": 2,
    "accounting": 4,
    "budget": 4,
    "noise": 4,
    "partitions": 4,
    "metrics": 4,
    "risk": 4,
    "datasets": 4,
    "dataflow": 5,
    "intervals": 5,
    "engines": 6,
    "steps": 6,
    "_release": 7,
    "compare": 7,
    "methods": 8,
    "cli": 9,
    "__init__": 10,
    "__main__": 11,
}

# The subpackages and modules a user may import by name.
PUBLIC_MODULES = [
    "dpfast.accounting",
    "dpfast.budget",
    "dpfast.cli",
    "dpfast.compare",
    "dpfast.dataflow",
    "dpfast.datasets",
    "dpfast.engines",
    "dpfast.engines.dask",
    "dpfast.engines.frames",
    "dpfast.engines.outofcore",
    "dpfast.engines.spark",
    "dpfast.exceptions",
    "dpfast.intervals",
    "dpfast.io",
    "dpfast.methods",
    "dpfast.methods.diffgen",
    "dpfast.methods.forecast",
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
    "dpfast.steps",
    "dpfast.taxonomy",
]


def _module_key(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


#: A module of dpfast named in a string (``importlib.import_module("dpfast.engines.spark")``).
_NAMED = re.compile(r"dpfast(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _imported_modules(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Yield every dpfast module ``path`` imports, anywhere in it, with the names it takes.

    ``from dpfast.a.b import c`` gives ``("dpfast.a.b", ["c"])`` (``c`` may be a module);
    ``import dpfast.a.b`` and a string naming a module of the package give no names.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for block in ast.walk(tree)
        if isinstance(block, ast.If)
        and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for statement in block.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # for the type checker only: not an import at run time
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "dpfast" or node.module.startswith("dpfast."):
                yield node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dpfast."):
                    yield alias.name, []
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _NAMED.fullmatch(node.value) and _is_module(node.value):
                yield node.value, []


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    where = PACKAGE.joinpath(*parts)
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def _dpfast_imports(path: Path) -> Iterator[str]:
    """The top-level units (``LAYERS`` keys) of dpfast that ``path`` imports."""
    for module, names in _imported_modules(path):
        if module == "dpfast":
            yield from names
        else:
            yield module.split(".")[1]


def _all_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for block in ast.walk(tree)
        if isinstance(block, ast.If)
        and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for statement in block.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # for the type checker only: not an import at run time
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


def test_the_layers_see_lazy_and_named_imports():
    # guards the test above: an import inside a function and a module named for importlib
    # are edges too (the engine registry names its engines' modules)
    registry = dict(_imported_modules(PACKAGE / "engines" / "__init__.py"))
    assert "dpfast.engines.spark" in registry
    source = "def f():\n    import importlib\n    importlib.import_module('dpfast.cli')\n"
    path = PACKAGE / "engines" / "_probe_for_the_test.py"
    try:
        path.write_text(source, encoding="utf-8")
        assert "cli" in set(_dpfast_imports(path))
    finally:
        path.unlink()


def _unit(path: Path) -> tuple[str, ...]:
    """The package a file belongs to, as the parts of its directory below dpfast."""
    return path.relative_to(PACKAGE).parent.parts


def _private_parts(dotted: str) -> list[str]:
    """The private modules of a dotted path below its unit (``dpfast._release`` is a unit)."""
    return [p for p in dotted.split(".")[2:] if p.startswith("_") and not p.startswith("__")]


def test_no_private_name_crosses_a_package_boundary():
    # what another package needs is public in its __init__ (STYLE.md, "Layout")
    found = []
    for path in PACKAGE.rglob("*.py"):
        home = _unit(path)
        for module, names in _imported_modules(path):
            parts = tuple(module.split(".")[1:])
            is_package = (PACKAGE.joinpath(*parts) / "__init__.py").is_file()
            directory = parts if is_package else parts[:-1]
            if directory == home or (directory[: len(home)] == home and not home == ()):
                continue  # inside its own package (or a package below it)
            private = _private_parts(module) + [
                n for n in names if n.startswith("_") and not n.startswith("__")
            ]
            if private:
                found.append(f"{path.relative_to(PACKAGE)}: {module} {private}")
    assert not found, "\n".join(found)


def test_no_import_cycle_between_packages():
    # between the units of a package (its modules, its subpackages and its __init__):
    # within a layer nothing else keeps two units from importing each other
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        source = ".".join(relative.with_suffix("").parts)
        for module, names in _imported_modules(path):
            targets = [module] + [f"{module}.{n}" for n in names if _is_module(f"{module}.{n}")]
            for target in targets:
                edges.setdefault(_node(source), set()).add(_node(target.removeprefix("dpfast.")))
    cycles = [c for c in _cycles(edges) if len({n.split(".")[0] for n in c}) >= 1 and len(c) > 1]
    assert not cycles, cycles


def _node(dotted: str) -> str:
    """A module's unit for the cycle test: its package's child it lies in."""
    parts = dotted.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else dotted


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in edges.get(node, ()):
            if nxt == node:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_over_600_lines_and_no_function_body_over_60():
    long_modules, long_functions = [], []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 600:
            long_modules.append(str(path.relative_to(PACKAGE)))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if (
                    body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                ):
                    body = body[1:]  # the docstring
                if body:
                    lines = text.splitlines()[body[0].lineno - 1 : node.end_lineno]
                    code = [x for x in lines if x.strip() and not x.strip().startswith("#")]
                    if len(code) > 60:
                        where = f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"
                        long_functions.append(f"{where} ({len(code)} lines)")
    assert not long_modules, long_modules
    assert not long_functions, long_functions


def test_kernels_import_only_numpy_and_jit():
    for path in (PACKAGE / "_kernels").rglob("*.py"):
        external = set(_all_imports(path)) - {"__future__", "numpy", "dpfast"}
        assert not external, f"{path.name} imports {external}"
        assert set(_dpfast_imports(path)) <= {"_jit", "_kernels"}


def test_only_io_the_dataflow_the_engines_and_the_steps_import_pyarrow():
    # they work on Arrow batches; everything else goes through dpfast.io
    for path in PACKAGE.rglob("*.py"):
        if not {"io", "dataflow", "engines", "steps"} & set(path.relative_to(PACKAGE).parts):
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


BUILTIN_ERRORS = {
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "OSError",
    "ImportError",
    "RuntimeError",
    "Exception",
}


def test_every_error_raised_is_a_dpfast_error():
    # one error family for embedding tools: a raise site outside the Numba kernels (which
    # the façade validates before calling) constructs a dpfast.exceptions class
    found = []
    for path in PACKAGE.rglob("*.py"):
        if "_kernels" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id in BUILTIN_ERRORS:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {func.id}")
    assert not found, found


def test_every_error_class_is_a_dpfast_error():
    # an exception class dpfast defines derives from DPFastError (directly or through
    # another dpfast error), so that one except clause catches every dpfast error
    import dpfast.exceptions as family

    roots = {"DPFastError"} | {
        name
        for name, value in vars(family).items()
        if isinstance(value, type) and issubclass(value, family.DPFastError)
    }
    classes = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                classes[node.name] = (bases, f"{path.relative_to(PACKAGE)}:{node.lineno}")

    def is_error(name, seen=()):
        if name in BUILTIN_ERRORS or name in {"Warning", "UserWarning"}:
            return name in BUILTIN_ERRORS
        bases = classes.get(name, ((), ""))[0]
        return any(is_error(b, (*seen, name)) for b in bases if b not in seen)

    def in_family(name, seen=()):
        if name in roots:
            return True
        bases = classes.get(name, ((), ""))[0]
        return any(in_family(b, (*seen, name)) for b in bases if b not in seen)

    outside = [
        f"{where} {name}"
        for name, (_, where) in classes.items()
        if is_error(name) and not in_family(name)
    ]
    assert not outside, outside


# The engines' ratchet (issue 44, docs/architecture.md "Measures of the engines"): each
# measure of scripts/engine-measures may only fall. A change that lowers one lowers its
# ceiling here in the same commit (the test fails until it does), so that it cannot rise
# again unnoticed. The lines of dpfast/engines/, and of it and dpfast/dataflow/ together
# (so that moving code between the two hides nothing), are held under ceilings with room
# for work under way in other branches (the count moves with every feature); the
# structural counts are held exactly.
ENGINE_CEILINGS = {
    "members": 14,  # of the engine protocol (Engine: functions and properties)
    "abstract_members": 8,
    "hasattr": 0,  # calls in dpfast/engines/ (none probes a source: Source declares it)
    "getattr": 6,
    "setattr": 0,
    "vars": 0,
    "__getattr__": 0,  # methods that forward attributes by name
    "outofcore_exports": 8,  # dpfast/engines/outofcore/__init__.py's __all__
    "underscore_imports": 0,  # underscore names imported from another module
    "plural_pairs": 0,  # module names of one folder that differ by a plural or a suffix
}
#: Lines of dpfast/engines/: 12,455 at f9a0b2b, with what is now dpfast/dataflow/.
ENGINE_LINES = 7_623
#: What dpfast/engines/ is held to, whatever the room above.
ENGINE_LINES_MOST = 8_000
#: Lines of dpfast/engines/ and dpfast/dataflow/ together.
BOTH_LINES = 11_705
LINES_ROOM = 100
#: Code lines (no docstring, comment or blank line) of dpfast/engines/, and of it and
#: dpfast/dataflow/ together: 7,847 at f9a0b2b.
ENGINE_CODE_LINES = 4_774
BOTH_CODE_LINES = 7_181
CODE_LINES_ROOM = 100
#: The column source protocol (``Source``, dpfast/dataflow/source.py) grows as the engine
#: protocol's members move into it, to at most this many.
SOURCE_MEMBERS = 14


def _engine_measures(root: Path) -> dict:
    """Return scripts/engine-measures' ``measures(root)`` (a script: loaded from its file)."""
    from importlib.machinery import SourceFileLoader

    path = PACKAGE.parent / "scripts" / "engine-measures"
    module = types.ModuleType("engine_measures")
    module.__file__ = str(path)
    SourceFileLoader("engine_measures", str(path)).exec_module(module)
    return module.measures(root)


def test_the_engine_measures_only_fall():
    found = _engine_measures(PACKAGE.parent)
    risen = {k: (found[k], v) for k, v in ENGINE_CEILINGS.items() if found[k] > v}
    assert not risen, f"(measure, ceiling), see scripts/engine-measures --where: {risen}"
    fallen = {k: found[k] for k, v in ENGINE_CEILINGS.items() if found[k] < v}
    assert not fallen, f"lower ENGINE_CEILINGS to these measures: {fallen}"
    ceilings = {
        "engines_lines": min(ENGINE_LINES + LINES_ROOM, ENGINE_LINES_MOST),
        "both_lines": BOTH_LINES + LINES_ROOM,
        "engines_code_lines": ENGINE_CODE_LINES + CODE_LINES_ROOM,
        "both_code_lines": BOTH_CODE_LINES + CODE_LINES_ROOM,
    }
    over = {k: (found[k], v) for k, v in ceilings.items() if found[k] > v}
    assert not over, f"(lines, ceiling): {over}"
    assert found["source_members"] <= SOURCE_MEMBERS, found["source_members"]


def test_the_engine_measures_count_what_they_say(tmp_path):
    # guards the ratchet: a probe in a docstring is not counted, one in code is
    engines = tmp_path / "dpfast" / "engines"
    (engines / "outofcore").mkdir(parents=True)
    (engines / "base.py").write_text(
        "from abc import ABC, abstractmethod\n"
        "class Engine(ABC):\n"
        '    """Never hasattr(self, "x")."""\n'
        "    @property\n"
        "    @abstractmethod\n"
        "    def n_rows(self): ...\n"
        "    def close(self):\n"
        '        return hasattr(self, "a") and getattr(self, "b", None)\n'
    )
    (engines / "outofcore" / "__init__.py").write_text('__all__ = ["A", "B"]\n')
    (engines / "outofcore" / "_ranks.py").write_text(
        "from dpfast.engines.base import _hidden, Engine\n"
        "class W:\n"
        "    def __getattr__(self, name):\n"
        "        return vars(self)[name]\n"
    )
    (engines / "outofcore" / "_ranked.py").write_text("")
    (engines / "lines.py").write_text(
        '"""A module docstring\n\nof three lines."""\n'
        "\n"
        "# a comment\n"
        "X = (  # code, with a comment\n"
        "    1,\n"
        ")\n"
        "def f():\n"
        '    """A docstring."""\n'
        '    return """a string\n'
        'that is not a docstring"""\n'
    )
    # the dataflow's source protocol, and a probe and a plural pair there count too
    dataflow = tmp_path / "dpfast" / "dataflow"
    dataflow.mkdir()
    (dataflow / "source.py").write_text(
        "class Source:\n    def names(self): ...\n    def n_rows(self): ...\n"
    )
    (dataflow / "ranks.py").write_text("# a comment\n\nsetattr(1, 'a', 2)\n")
    (dataflow / "rank.py").write_text("")
    found = _engine_measures(tmp_path)
    # lines.py: X's three lines, f's def and its return's two; base.py: all 8 but its
    # docstring; _ranks.py: 4; outofcore/__init__.py: 1
    assert found["engines_code_lines"] == 6 + 7 + 4 + 1
    assert (found["dataflow_lines"], found["dataflow_code_lines"]) == (6, 4)
    assert found["both_lines"] == found["engines_lines"] + 6
    assert found["both_code_lines"] == 6 + 7 + 4 + 1 + 4
    assert (found["members"], found["abstract_members"]) == (2, 1)
    assert (found["source_members"], found["source_abstract"]) == (2, 0)
    assert (found["hasattr"], found["getattr"], found["vars"], found["setattr"]) == (1, 1, 1, 1)
    assert (found["__getattr__"], found["outofcore_exports"]) == (1, 2)
    assert (found["underscore_imports"], found["plural_pairs"]) == (1, 2)
