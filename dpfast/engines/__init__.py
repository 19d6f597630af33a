"""Engines: where a release's work runs, and the registry that picks one (docs/engines.md).

A method is written once over the primitives of :class:`~dpfast.engines.base.Engine`; an
engine implements them for one place where data lives:

* ``"memory"`` (:mod:`dpfast.engines.memory`): a pandas, Arrow, polars or NumPy table, or any
  object with the Arrow C stream interface, held whole; the release is of the same kind;
* ``"outofcore"`` (:mod:`dpfast.engines.outofcore`): a ``pyarrow.dataset.Dataset`` or a
  Parquet file, directory or glob, read in batches within a memory limit; the release is
  written to ``output=`` and returned as a ``pyarrow.dataset.Dataset``;
* ``"spark"``, ``"dask"`` (:mod:`dpfast.engines.spark`, :mod:`dpfast.engines.dask`): a Spark
  or Dask DataFrame, its passes on the executors or workers; the release is of the same kind.

A new engine is a module or package implementing the protocol, plus one :func:`register` call.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dpfast._validation import option, quoted
from dpfast.dataflow.on_bound import BoundCount, OnBound, RankGroupValues
from dpfast.dataflow.source import Source
from dpfast.dataflow.values import (
    Bins,
    CategoricalColumn,
    Cells,
    Clusters,
    ClusterTotals,
    CodeCells,
    GroupCodes,
    GroupValues,
    NumericColumn,
    Opening,
    OrderStatistics,
    Progress,
    PublishHook,
    RangeValues,
)
from dpfast.engines.base import Engine
from dpfast.exceptions import DPFastError, DPFastImportError, DPFastTypeError, DPFastValueError

__all__ = [
    "BUILT_IN",
    "Bins",
    "BoundCount",
    "CategoricalColumn",
    "Cells",
    "ClusterTotals",
    "Clusters",
    "CodeCells",
    "Engine",
    "EngineChoice",
    "GroupCodes",
    "GroupValues",
    "NumericColumn",
    "OnBound",
    "Opening",
    "OrderStatistics",
    "Progress",
    "PublishHook",
    "RangeValues",
    "RankGroupValues",
    "engine_label",
    "engine_name",
    "engines",
    "open_engine",
    "parse_memory",
    "register",
]

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_memory(text: str | int) -> int:
    """Return the bytes of a size such as ``"4GiB"``, ``"512MiB"``, ``"2GB"``, ``"1e9"`` or 2**30.

    Parameters
    ----------
    text : str or int
        Bytes as a positive int, or a decimal number (exponent allowed) and a unit in any
        case: none, ``B``, ``KB``, ``MB``, ``GB``, ``TB`` (powers of 1000) or ``KiB``,
        ``MiB``, ``GiB``, ``TiB`` (powers of 1024).

    Returns
    -------
    int
        The size in bytes (a fractional result is truncated).

    Raises
    ------
    ValueError
        Not a number and a known unit, or not positive (``DPFastValueError``).

    Examples
    --------
    >>> parse_memory("4GiB"), parse_memory("1.5 GB"), parse_memory("64MiB"), parse_memory(1024)
    (4294967296, 1500000000, 67108864, 1024)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise DPFastValueError(f"the memory size must be positive, got {quoted(text)}")
        return text
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise DPFastValueError(
            f"cannot read {quoted(text)} as a memory size; write a number and a unit, e.g. 4GiB, "
            "512MiB or 2GB"
        )
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise DPFastValueError(f"the memory size must be positive, got {quoted(text)}")
    return value


# -- the registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """A registered engine: where its class lives, and which inputs are its own."""

    name: str
    module: str
    attribute: str
    accepts: Callable[[object], bool]


@dataclass(frozen=True)
class EngineChoice:
    """An engine named with options for it, as an ``engine=`` argument.

    :func:`engine_name` and :func:`open_engine` take it wherever they take a name.

    Attributes
    ----------
    name : str
        A registered engine's name (:func:`engines`), checked when used, not when made.
    options : dict
        Keywords for the engine's ``open`` (rows per batch, a Spark master, ...), default none.

    Examples
    --------
    >>> choice = EngineChoice("outofcore", {"batch_rows": 4096})
    >>> engine_name("people.parquet", choice), choice.options
    ('outofcore', {'batch_rows': 4096})
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)


_REGISTRY: dict[str, _Entry] = {}


#: The engines dpfast ships: :func:`register` replaces one only when told to.
BUILT_IN = ("memory", "outofcore", "spark", "dask")


def register(
    name: str,
    module: str,
    attribute: str,
    accepts: Callable[[object], bool],
    *,
    replace: bool = False,
) -> None:
    """Register engine ``name``: class ``attribute`` of ``module``, taking inputs ``accepts`` says.

    ``module`` is imported only when the engine is opened, so its optional dependencies
    (pyspark, dask) load only when it runs. Engines registered later are asked first, so a
    new engine may claim an older one's inputs; a name registered again is replaced in place.

    Parameters
    ----------
    name : str
        The name for ``engine=`` arguments and :func:`engines`.
    module : str
        The dotted name of the module that holds the engine's class.
    attribute : str
        That class's name: an :class:`~dpfast.engines.base.Engine` subclass whose
        ``open(data, opening, **options)`` :func:`open_engine` calls.
    accepts : callable
        ``accepts(data) -> bool``: whether the engine takes ``data`` when no ``engine=`` is
        given; it must not import the engine's optional dependencies.
    replace : bool, default False
        Replace a built-in engine (:data:`BUILT_IN`); its releases' public reports then name
        the class that ran (:func:`engine_label`).

    Returns
    -------
    None

    Raises
    ------
    DPFastValueError
        ``name`` is a built-in engine's and ``replace`` is not True.

    Examples
    --------
    An engine chosen by name only, claiming no input (the entry stays for the process):

    >>> import pandas as pd
    >>> register("memory-by-name", "dpfast.engines.memory", "MemoryEngine", lambda data: False)
    >>> table = pd.DataFrame({"age": [23, 35]})
    >>> "memory-by-name" in engines(), engine_name(table), engine_name(table, "memory-by-name")
    (True, 'memory', 'memory-by-name')

    A built-in engine is replaced only when told to:

    >>> register("memory", "dpfast.engines.memory", "MemoryEngine", lambda data: False)
    Traceback (most recent call last):
    ...
    dpfast.exceptions.DPFastValueError: 'memory' is a built-in engine: ...
    """
    if name in BUILT_IN and name in _REGISTRY and not replace:
        raise DPFastValueError(
            f"{name!r} is a built-in engine: register(...) would replace it; give your "
            "engine a name of its own, or pass replace=True to replace it"
        )
    _REGISTRY[name] = _Entry(name, module, attribute, accepts)


def engine_label(name: str) -> str:
    """Return how a public report names registered engine ``name``.

    Parameters
    ----------
    name : str
        A registered engine's name (:func:`engines`).

    Returns
    -------
    str
        A built-in engine's name; any other, or a built-in name replaced by another class,
        as ``"name (module.Class)"``: the class that runs.

    Examples
    --------
    >>> engine_label("outofcore")
    'outofcore'
    >>> register("memory-by-name", "dpfast.engines.memory", "MemoryEngine", lambda data: False)
    >>> engine_label("memory-by-name")
    'memory-by-name (dpfast.engines.memory.MemoryEngine)'
    """
    entry = _REGISTRY[name]
    built_in = _BUILT_IN_CLASSES.get(name) == (entry.module, entry.attribute)
    return name if built_in else f"{name} ({entry.module}.{entry.attribute})"


def engines() -> list[str]:
    """Return the registered engines' names.

    Returns
    -------
    list of str
        The names, sorted: the values an ``engine=`` argument takes (besides None).

    Examples
    --------
    >>> {"memory", "outofcore", "spark", "dask"} <= set(engines())
    True
    """
    return sorted(_REGISTRY)


def engine_name(data: object, engine: str | EngineChoice | None = None) -> str:
    """Return the engine that releases ``data``: the one ``engine`` names, else by its type.

    Parameters
    ----------
    data : object
        The release's input (what each engine takes: the module docstring).
    engine : str or EngineChoice, optional
        The engine asked for; None asks the engines by ``data``'s type, last registered first.

    Returns
    -------
    str
        The registered engine's name.

    Raises
    ------
    ValueError
        ``engine`` names no registered engine.
    TypeError
        ``engine`` is None and no engine accepts ``data``'s type.

    Examples
    --------
    >>> import pandas as pd
    >>> engine_name(pd.DataFrame({"age": [23, 35]}))
    'memory'
    >>> engine_name("people/*.parquet"), engine_name("people.parquet", "memory")
    ('outofcore', 'memory')
    >>> engine_name(pd.DataFrame(), "gpu")
    Traceback (most recent call last):
    ...
    dpfast.exceptions.DPFastValueError: engine must be one of [...] or None ..., got 'gpu'
    """
    if engine is not None:
        name = engine.name if isinstance(engine, EngineChoice) else engine
        if not isinstance(name, str) or name not in _REGISTRY:
            raise DPFastValueError(
                f"engine must be one of {engines()} or None (chosen from the input's type), "
                f"got {quoted(name)}"
            )
        return name
    for entry in reversed(list(_REGISTRY.values())):
        if entry.accepts(data):
            return entry.name
    raise DPFastTypeError(
        f"cannot release a {type(data).__module__}.{type(data).__name__}: give a pandas, "
        "polars or Arrow table, a 2-D NumPy array, a pyarrow.dataset.Dataset, a Parquet path "
        "or glob, a Spark DataFrame or a Dask DataFrame"
    )


def open_engine(
    data: object,
    *,
    method: str,
    engine: str | EngineChoice | None = None,
    output: str | os.PathLike[str] | None = None,
    memory_limit: str | int | None = None,
    progress: Progress | None = None,
    metrics: bool = False,
    risk: bool = False,
    reads_only: bool = False,
) -> Engine:
    """Open the engine that releases ``data`` for one release of ``method``.

    ``output`` and ``memory_limit`` mean the same on every engine that takes them.

    Parameters
    ----------
    data : object
        The release's input, as :func:`engine_name` takes it.
    method : str
        The release method's name, for messages.
    engine : str or EngineChoice, optional
        By default chosen by ``data``'s type; an :class:`EngineChoice`'s options go to its ``open``.
    output : str or os.PathLike, optional
        Where the release is written.
    memory_limit : str or int, optional
        The working memory of an engine that reads in passes (:func:`parse_memory`).
    progress : callable, optional
        Called as ``progress(phase, done, total)``.
    metrics, risk : bool
        Whether the release is compared with its input (utility metrics, disclosure risk).
    reads_only : bool
        A forecast: only the input's names, size and types are read; no ``output``, no writes.

    Returns
    -------
    Engine
        The engine opened for this one release; :meth:`~dpfast.engines.base.Engine.close`
        removes what it leaves behind.

    Raises
    ------
    ValueError, TypeError
        As :func:`engine_name` and :func:`parse_memory`, or what the engine cannot do, saying
        what to change (``memory_limit`` for a table in memory; ``metrics`` or ``risk`` beyond
        memory, as they need the original and the release in it); all ``DPFastError``.

    Examples
    --------
    >>> import pandas as pd
    >>> opened = open_engine(pd.DataFrame({"age": [23, 35, 41]}), method="laplace_dp")
    >>> opened.name, opened.n_rows, opened.names
    ('memory', 3, ['age'])
    >>> opened.close()
    """
    name = engine_name(data, engine)
    entry = _REGISTRY[name]
    options = dict(engine.options) if isinstance(engine, EngineChoice) else {}
    memory = None if memory_limit is None else parse_memory(memory_limit)
    opening = Opening(method, output, memory, progress, metrics, risk, reads_only)
    try:
        kind = getattr(importlib.import_module(entry.module), entry.attribute)
        opened: Engine = kind.open(data, opening, **options)
    except ImportError as exc:
        if isinstance(exc, DPFastError):
            raise
        raise _not_installed(name, exc) from exc
    return opened


#: The extra that installs each optional engine's dependencies (pyproject.toml).
_EXTRAS = {"spark": "spark", "dask": "dask"}


def _not_installed(name: str, exc: ImportError) -> DPFastImportError:
    """Say which package engine ``name`` needs and how to install it."""
    missing = (exc.name or str(exc)).split(".")[0]
    extra = _EXTRAS.get(name)
    how = f": pip install 'dpfast[{extra}]'" if extra else ", which is not installed"
    return DPFastImportError(
        f"{option('engine', name)} needs {missing}{how} (Python could not import it: {exc})"
    )


def _is_cluster_input(frames: str, sources: str, data: object) -> bool:
    """Whether ``data`` is a DataFrame of module ``frames`` or a source of module ``sources``."""
    kind = type(data)
    if kind.__name__ == "DataFrame" and kind.__module__.startswith(frames):
        return True
    return _source_module(data).startswith(sources)


_is_spark = functools.partial(_is_cluster_input, "pyspark.sql", "dpfast.engines.spark")
_is_dask = functools.partial(_is_cluster_input, "dask.dataframe", "dpfast.engines.dask")


def _source_module(data: object) -> str:
    """Return the module of a column source, looking through the sources that wrap one."""
    if not isinstance(data, Source):
        return ""
    inner = data
    while inner.dataset is not None:
        inner = inner.dataset
    return type(inner).__module__


def _is_outofcore(data: object) -> bool:
    if isinstance(data, (str, os.PathLike)):
        return True
    kind = type(data)
    if kind.__module__.startswith("pyarrow._dataset") or kind.__module__.startswith(
        "pyarrow.dataset"
    ):
        return True
    return isinstance(data, Source)


def _is_memory(data: object) -> bool:
    return not (_is_spark(data) or _is_dask(data) or _is_outofcore(data))


_BUILT_IN_CLASSES = {
    "memory": ("dpfast.engines.memory", "MemoryEngine"),
    "outofcore": ("dpfast.engines.outofcore", "OutOfCoreEngine"),
    "spark": ("dpfast.engines.spark", "SparkEngine"),
    "dask": ("dpfast.engines.dask", "DaskEngine"),
}
_ACCEPTS: dict[str, Callable[[object], bool]] = {
    "memory": _is_memory,
    "outofcore": _is_outofcore,
    "spark": _is_spark,
    "dask": _is_dask,
}
for _name in BUILT_IN:
    register(_name, *_BUILT_IN_CLASSES[_name], _ACCEPTS[_name])
