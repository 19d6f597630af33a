"""One conformance suite for every engine: a seeded release is the in-memory release.

Every method case below runs on every engine that runs its method, and must give what
the public in-memory function gives for the same table and seed: the same data (in the
same order where the method keeps rows in order, the same rows sorted where it shuffles
them), the same types, the same public report and the same private counts.

The engines:

- the column engine over an Arrow table in memory (``ArrowSource``): whole, in batches
  of 1,000 rows, and in batches of 64 rows under a memory limit so small that the method
  takes its out-of-core paths (refined histograms, ranges sorted one by one, runs of
  ties, windows of a pool);
- out of core over Parquet datasets of 1, 2 and 7 files (three of them of 1 row), in
  batches of 1,000 and 64 rows, the 2- and 7-file ones under that tiny limit;
- out of core over the table written as CSV: one file, and a glob of three files in
  batches of 64 rows under the tiny limit; the in-memory release is then that of the
  file read whole (``dpfast.io.read_table``), whose types the CSV's text decides;
- Spark, through the public functions given a pyspark DataFrame (the session-scoped
  fixture): every case at 2 partitions; the releases that the executors compute
  (``ir_dp``, ``laplace_dp``) at 1, 7 and 33 as well. The others run the out-of-core
  engine over the frame (each pass a Spark job, seconds each on a loaded machine), whose
  tiny-limit paths the Arrow and Parquet engines take;
- Dask, through the public functions given a Dask DataFrame on one module-scoped
  ``LocalCluster`` of two worker processes: every case at 2 partitions; each method's own
  case and the row-order and DP-bound variants (:data:`_PARTITIONED`) at 1, 7 and 33 as
  well.

Every method runs on every engine: there is no list of methods per engine, and a method
written in the tests alone (:mod:`tests.toy_method`) runs through the suite from its one
case.

The table has ties, a remainder group (``n % k != 0``), values beyond and on the bounds,
a column whose values sit in a sliver of a wide domain, and nulls in a column that the
methods copy or shuffle without protecting it. A new method or option is one entry of
:data:`CASES`.

Bad input gets the same error on every engine: the same exception type and message,
raised by the call itself, before any output exists (:data:`BAD_INPUTS`). Known gaps are
strict expected failures, so that fixing one shows.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast.dataflow.flow import FAN
from dpfast.datasets import adult, adult_taxonomy
from dpfast.engines import EngineChoice
from dpfast.engines.outofcore._sources import ArrowSource, ParquetDataset, WrappedSource
from dpfast.exceptions import NoiseDominatesWarning, PrivacyLeakWarning, UnprovenReleaseWarning
from dpfast.taxonomy import as_taxonomy
from tests import toy_method

N_ROWS, K, SEED = 3001, 7, 5  # 3001 = 7 * 428 + 5: rank group 214 (or the last) holds 12 rows
BOUNDS = {"age": (17, 90), "share": (0.0, 100.0), "tiny": (0.0, 1e6)}
#: Bytes: at most 1,024 values sorted at once (the engine's floor), so the ~1,500 zeros of
#: ``tiny`` are a tie added as a run, and its other values need a refined histogram.
TINY_MEMORY = 40_000
LARGE_MEMORY = 2**30
OCCUPATIONS = list(adult_taxonomy("occupation").domain)


#: ``job``'s taxonomy: the occupations and a leaf no row holds.
JOB_LEAVES = [*OCCUPATIONS, "Astronaut"]
#: ``job``'s declared categories: every leaf, in an order of their own, and one that no
#: leaf is (a type that lacked a leaf would be refused: docs/categorical.md#column-types).
JOB_CATEGORIES = [*reversed(JOB_LEAVES), "Retired"]
#: Public bounds that ``count8`` (uint8) and ``delta8`` (int8) cannot hold, and that
#: ``ratio32`` (float32) can.
NARROW_BOUNDS = {"count8": (0, 1000), "delta8": (-1000, 1000), "ratio32": (0.1, 0.9)}


@functools.cache
def table() -> pd.DataFrame:
    """Adult's rows: ties, values on the bounds, clamped values, a sliver, nulls.

    ``age`` (int64, 17 and 90 among them), ``occupation`` (text, in its taxonomy),
    ``share`` (rounded floats, some beyond and some on the bounds), ``tiny`` (half zeros,
    the rest in ``[0, 1e-3)`` of a ``[0, 1e6]`` domain), ``small`` (int32 in [-3, 3]),
    ``note`` (text, one null in five: never protected) and ``income`` (DiffGen's class);
    narrow types: ``count8`` (uint8), ``delta8`` (int8), ``ratio32`` (float32, some beyond
    its bounds) and ``job`` (the occupations as an ordered categorical of
    :data:`JOB_CATEGORIES`).
    """
    frame = adult("train", drop_missing=True)[["age", "occupation", "income"]].iloc[:N_ROWS]
    frame = frame.reset_index(drop=True)
    rng = np.random.default_rng(0)
    share = np.round(rng.uniform(-5, 105, N_ROWS), 1)
    share[::97] = 0.0
    share[1::89] = 100.0
    frame["share"] = share
    frame["tiny"] = np.where(rng.random(N_ROWS) < 0.5, 0.0, rng.uniform(0, 1e-3, N_ROWS))
    frame["small"] = rng.integers(-3, 4, N_ROWS).astype(np.int32)
    frame["note"] = [None if i % 5 == 0 else f"n{i % 11}" for i in range(N_ROWS)]
    frame["count8"] = rng.integers(0, 256, N_ROWS).astype(np.uint8)
    frame["delta8"] = rng.integers(-128, 128, N_ROWS).astype(np.int8)
    frame["ratio32"] = rng.uniform(0.0, 1.0, N_ROWS).astype(np.float32)
    frame["job"] = pd.Categorical(frame["occupation"], categories=JOB_CATEGORIES, ordered=True)
    return frame


# --------------------------------------------------------------------------- methods


STALE = "killed before it could remove it"


@dataclass(frozen=True)
class Case:
    """A method with its arguments, as every engine runs it.

    ``function`` is the public function: the in-memory reference, and every engine's entry
    point (``engine=``, or the input's type).
    ``columns`` are the input table's; ``tiny_memory`` a limit that makes the method take
    its out-of-core paths on this table (more passes than when it fits, where ``spills``).
    """

    name: str
    function: Callable[..., Any]
    columns: tuple[str, ...]
    arguments: Mapping[str, Any]
    keeps_order: bool
    tiny_memory: int = TINY_MEMORY
    spills: bool = True
    warning: type[Warning] | None = None
    counts: bool = False  # the release's data is its ``counts`` (DiffGen)

    @property
    def method(self) -> str:
        return self.function.__name__

    def input(self) -> pd.DataFrame:
        return table()[list(self.columns)]

    def run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Return ``function(*args, **kwargs)``, asserting that it warns as the case does.

        An error goes through unchecked (a refusal warns of nothing).
        """
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = function(*args, **kwargs)
        # the noise warning comes from the release's forecast, before any pass (its line is in
        # the report, which every engine must give alike; tests/test_forecast.py tests it)
        # scratch that a killed run (of any test session on this machine) left behind is
        # removed with a warning by whichever run comes next; not the case's own
        given = {
            w.category
            for w in caught
            if w.category is not NoiseDominatesWarning and STALE not in str(w.message)
        }
        assert given == ({self.warning} if self.warning else set()), [str(w) for w in caught]
        return result

    def in_memory(self, data: Any) -> Any:
        return self.run(self.function, data, **self.arguments)

    def reference(self, of: str, data: Callable[[], Any], types: Callable[[Any], Any]) -> Side:
        """The in-memory release of ``data()`` as compared, made once per case and input.

        ``of`` names the input (``"arrow"``, ``"csv"``, ``"pandas"``): each engine that is
        given the same table compares with the same release, so it is made once per module
        (a seeded release is a function of its table and arguments) instead of once per
        engine.
        """
        return _reference(self, of, data, types)

    def data(self, release: Any) -> Any:
        return release.counts if self.counts else release.data

    def out_of_core(
        self, source: Any, output: Path, *, memory_limit: int, batch_rows: int, **arguments: Any
    ) -> tuple[Any, Any]:
        """Run the case out of core over ``source`` into ``output``; return the two reports."""
        engine = EngineChoice("outofcore", {"batch_rows": batch_rows})
        release = self.run(
            self.function,
            source,
            engine=engine,
            output=output,
            memory_limit=memory_limit,
            **arguments,
        )
        return release.report, release.private


_TAXONOMIES = {"occupation": adult_taxonomy("occupation")}
_NUMERIC = {"bounds": {"age": BOUNDS["age"], "share": BOUNDS["share"]}, "seed": SEED}

CASES = [
    Case(
        "ir_dp",
        dpfast.ir_dp,
        ("age", "occupation", "share", "tiny"),
        {"k": K, "epsilon": 2.0, "bounds": BOUNDS, "taxonomies": _TAXONOMIES, "seed": SEED},
        keeps_order=False,  # every column in an order of its own
    ),
    Case(
        "ir_dp-remainder-last",
        dpfast.ir_dp,
        ("age", "occupation", "share"),
        {
            "k": K,
            "epsilon": 2.0,
            "bounds": {c: BOUNDS[c] for c in ("age", "share")},
            "taxonomies": _TAXONOMIES,
            "remainder": "last",
            "seed": SEED,
        },
        keeps_order=False,
    ),
    Case(
        "ir_dp-records-in-order-keep",
        dpfast.ir_dp,
        ("age", "share", "tiny", "note"),
        {
            "k": K,
            "epsilon": 4.0,
            "linkage": "records",
            "shuffle": False,
            "unprotected": "keep",
            "bounds": BOUNDS,
            "columns": ["age", "share", "tiny"],
            "seed": SEED,
        },
        keeps_order=True,
        warning=UnprovenReleaseWarning,
    ),
    Case(
        "ir_dp-unprotected-shuffled",
        dpfast.ir_dp,
        ("age", "share", "note"),
        {"k": K, "epsilon": 4.0, "unprotected": "shuffle", "columns": ["age", "share"], **_NUMERIC},
        keeps_order=False,
    ),
    Case(
        "ir_dp-bounds-from-data",
        dpfast.ir_dp,
        ("age", "share"),
        {"k": K, "epsilon": 2.0, "bounds": "data", "seed": SEED},
        keeps_order=False,
        warning=PrivacyLeakWarning,  # bounds from the data: one pass each, on every engine
    ),
    Case(
        "laplace_dp",
        dpfast.laplace_dp,
        ("age", "share", "tiny"),
        {"epsilon": 30.0, "bounds": BOUNDS, "seed": SEED},
        keeps_order=True,
        spills=False,  # cell by cell: no pass depends on the memory
    ),
    Case(
        "laplace_dp-keep",
        dpfast.laplace_dp,
        ("age", "share", "note"),
        {"epsilon": 30.0, "unprotected": "keep", "columns": ["age", "share"], **_NUMERIC},
        keeps_order=True,
        spills=False,
    ),
    Case(
        "individual_ranking",
        dpfast.individual_ranking,
        ("age", "share", "tiny", "small", "note"),
        {"k": K, "columns": ["age", "share", "tiny", "small"]},
        keeps_order=True,
    ),
    Case(
        "individual_ranking-remainder-last",
        dpfast.individual_ranking,
        ("age", "share", "tiny"),
        {"k": K, "columns": ["age", "share", "tiny"], "remainder": "last"},
        keeps_order=True,
    ),
    Case(
        "randomized_response",
        dpfast.randomized_response,
        ("occupation", "age", "note"),
        {
            "column": "occupation",
            "domain": [*OCCUPATIONS, "never seen"],
            "epsilon": 1.0,
            "seed": SEED,
        },
        keeps_order=True,
        spills=False,  # row by row
    ),
    Case(
        "k_noise",
        dpfast.k_noise,
        ("age", "share", "tiny", "small", "note"),
        {"k": K, "columns": ["age", "share", "tiny", "small"], "seed": SEED},
        keeps_order=True,
        tiny_memory=70_000,
    ),
    Case(
        "k_pram",
        dpfast.k_pram,
        ("age", "share", "small", "note"),
        {"k": K, "columns": ["age", "share", "small"], "retention": 0.3, "seed": SEED},
        keeps_order=True,
        tiny_memory=70_000,
    ),
    Case(
        "mdav_dp",
        dpfast.mdav_dp,
        ("age", "occupation", "share"),
        {"k": 25, "epsilon": 200.0, "taxonomies": _TAXONOMIES, **_NUMERIC},
        keeps_order=False,
        tiny_memory=150_000,  # the distance orders sorted in several ranges each
        spills=False,  # the same passes: guarded by test_mdav_dp_sorts_in_ranges
    ),
    Case(
        "mdav_dp-cycling-keep",
        dpfast.mdav_dp,
        ("age", "share", "tiny", "note"),
        {
            "k": 25,
            "epsilon": 200.0,
            "reference": "cycling",
            "unprotected": "keep",
            "columns": ["age", "share", "tiny"],
            "bounds": BOUNDS,
            "seed": SEED,
        },
        keeps_order=False,  # rows in a random order, the unprotected column in theirs
        tiny_memory=200_000,  # 8 reference points: the merge's buffers take more
        spills=False,
    ),
    Case(
        "diffgen",
        dpfast.diffgen,
        ("age", "occupation", "share", "income"),
        {
            "target": "income",
            "epsilon": 1.0,
            "steps": 8,
            "taxonomies": _TAXONOMIES,
            "classes": ["<=50K", ">50K"],
            **_NUMERIC,
        },
        keeps_order=True,  # one row per cell and class, in the cut's order
        tiny_memory=40_000,
        spills=False,  # one scan per step whatever the limit
        counts=True,
    ),
    Case(
        "diffgen-bounds-from-data",
        dpfast.diffgen,
        ("age", "share", "income"),
        {"target": "income", "epsilon": 1.0, "steps": 4, "bounds": "data", "seed": SEED},
        keeps_order=True,
        spills=False,
        counts=True,
        warning=PrivacyLeakWarning,  # bounds from the data, classes from the data
    ),
]
# narrow types: integers widened to hold their public bounds (never wrapped), float32
# kept, an ordered categorical's categories kept in their order (released or copied)
_JOB = {"job": as_taxonomy(JOB_LEAVES, "job")}
_NARROW = ("count8", "delta8", "ratio32")
CASES += [
    Case(
        "ir_dp-narrow-types",
        dpfast.ir_dp,
        (*_NARROW, "job"),
        {"k": K, "epsilon": 4.0, "bounds": NARROW_BOUNDS, "taxonomies": _JOB, "seed": SEED},
        keeps_order=False,
    ),
    Case(
        "laplace_dp-narrow-types-keep",
        dpfast.laplace_dp,
        (*_NARROW, "job"),
        {
            "epsilon": 30.0,
            "bounds": NARROW_BOUNDS,
            "columns": list(_NARROW),
            "unprotected": "keep",
            "seed": SEED,
        },
        keeps_order=True,
        spills=False,
    ),
    Case(
        "mdav_dp-narrow-types",
        dpfast.mdav_dp,
        (*_NARROW, "job"),
        {"k": 25, "epsilon": 200.0, "bounds": NARROW_BOUNDS, "taxonomies": _JOB, "seed": SEED},
        keeps_order=False,
        tiny_memory=150_000,
        spills=False,
    ),
    Case(
        "randomized_response-ordered",
        dpfast.randomized_response,
        ("job", "count8"),
        {"column": "job", "domain": JOB_LEAVES, "epsilon": 1.0, "seed": SEED},
        keeps_order=True,
        spills=False,
    ),
    Case(
        "k_pram-narrow-types",
        dpfast.k_pram,
        (*_NARROW, "job"),
        {"k": K, "columns": list(_NARROW), "retention": 0.3, "seed": SEED},
        keeps_order=True,
        tiny_memory=70_000,
    ),
    Case(
        "diffgen-ordered-class",
        dpfast.diffgen,
        ("age", "job"),
        {
            "target": "job",
            "epsilon": 1.0,
            "steps": 4,
            "bounds": {"age": BOUNDS["age"]},
            "classes": JOB_LEAVES,
            "seed": SEED,
        },
        keeps_order=True,
        spills=False,
        counts=True,
    ),
    Case(
        "individual_ranking-narrow-types",
        dpfast.individual_ranking,
        _NARROW,
        {"k": K},
        keeps_order=True,
    ),
]
# clamping bounds chosen with DP (one pass over each such column, then the release over
# the chosen bounds): an integer column with both bounds chosen, a float one with its upper
# bound, the sliver below a generous outer bound, and a column of public bounds beside them
_DP_BOUNDS = {
    "age": dpfast.DPBounds(
        outer=(0, 120), lower_quantile=0.02, upper_quantile=0.98, epsilon_share=0.3
    ),
    "share": dpfast.DPBounds(outer=(-10.0, 1000.0), upper_quantile=0.95, epsilon_share=0.2),
    "tiny": dpfast.DPBounds(outer=(0.0, 1e6), upper_quantile=0.9, epsilon_share=0.2),
}
CASES += [
    Case(
        "ir_dp-dp-bounds",
        dpfast.ir_dp,
        ("age", "share", "tiny", "small"),
        {"k": K, "epsilon": 2.0, "bounds": {**_DP_BOUNDS, "small": (-3, 3)}, "seed": SEED},
        keeps_order=False,
    ),
    Case(
        "laplace_dp-dp-bounds",
        dpfast.laplace_dp,
        ("age", "share", "tiny"),
        {"epsilon": 30.0, "bounds": _DP_BOUNDS, "seed": SEED},
        keeps_order=True,
        spills=False,
    ),
    Case(
        "mdav_dp-dp-bounds",
        dpfast.mdav_dp,
        ("age", "share"),
        {
            "k": 25,
            "epsilon": 200.0,
            "bounds": {c: _DP_BOUNDS[c] for c in ("age", "share")},
            "seed": SEED,
        },
        keeps_order=False,
        tiny_memory=150_000,
        spills=False,
    ),
]
# public transforms and shares of ε (docs/privacy.md#transforms, #weights): every engine
# quantises through the grid's transform, and the mapping back is the method's
_TRANSFORMED = {
    "bounds": BOUNDS,
    "transforms": {"age": "log", "share": "asinh", "tiny": "log"},
    "epsilon_weights": {"age": 1.0, "share": 2.0, "tiny": 5.0},
    "seed": SEED,
}
CASES += [
    Case(
        "ir_dp-transforms",
        dpfast.ir_dp,
        ("age", "share", "tiny"),
        {"k": K, "epsilon": 4.0, **_TRANSFORMED},
        keeps_order=False,
    ),
    Case(
        "ir_dp-records-transforms",
        dpfast.ir_dp,
        ("age", "share", "tiny"),
        {"k": K, "epsilon": 4.0, "linkage": "records", "shuffle": False, **_TRANSFORMED},
        keeps_order=True,
        warning=UnprovenReleaseWarning,
    ),
    Case(
        "laplace_dp-transforms",
        dpfast.laplace_dp,
        ("age", "share", "tiny"),
        {"epsilon": 30.0, **_TRANSFORMED},
        keeps_order=True,
        spills=False,
    ),
    Case(
        "mdav_dp-transforms",
        dpfast.mdav_dp,
        ("age", "share", "tiny"),
        {"k": 25, "epsilon": 200.0, **_TRANSFORMED},
        keeps_order=False,
        tiny_memory=150_000,
        spills=False,
    ),
]
# a method written in the tests alone (tests/toy_method.py): one case here is all it takes
# to run it on every engine
CASES.append(
    Case(
        "toy_groups",
        toy_method.toy_groups,
        ("age", "share", "tiny", "note"),
        {"k": K, "bounds": BOUNDS, "columns": ["age", "share", "tiny"], "seed": SEED},
        keeps_order=False,
    )
)
_BY_NAME = {case.name: case for case in CASES}


# --------------------------------------------------------------------------- engines


@dataclass(frozen=True)
class Engine:
    """How a table reaches an engine: its kind, split, batches and memory."""

    name: str
    kind: str  # "arrow", "parquet", "csv", "spark" or "dask"
    batch_rows: int = 1 << 20
    tiny: bool = False  # the case's tiny memory limit, else LARGE_MEMORY
    cuts: tuple[int, ...] = ()  # parquet, csv: the first row of every file but the first
    partitions: int = 1  # spark, dask
    persist: bool = False  # dask: the frame persisted on the workers before the release
    only: tuple[str, ...] = ()  # the cases it runs, if not all (to keep the suite fast)

    def memory(self, case: Case) -> int:
        return case.tiny_memory if self.tiny else LARGE_MEMORY

    def runs(self, case: Case) -> bool:
        """Whether this engine runs ``case``'s method (Spark and Dask: when listed)."""
        if self.only and case.name not in self.only:
            return False
        return True


#: The most partitions a frame is cut into: many small ones, and one more than ``FAN``, so
#: that the engines add the passes' partial totals in two rounds. More partitions would
#: check nothing more, and each of their tasks costs tens of milliseconds on Spark.
MANY = FAN + 1

#: The cases whose release the Spark executors compute and write (docs/engines.md).
_EXECUTORS = ("ir_dp", "laplace_dp")

#: The cases Dask also runs at 1, 7 and 33 partitions: each method's own case, and the
#: variants whose output depends on the rows' order or on a quantile across partitions.
_PARTITIONED = (
    "ir_dp",
    "ir_dp-records-in-order-keep",
    "ir_dp-unprotected-shuffled",
    "ir_dp-dp-bounds",
    "laplace_dp",
    "individual_ranking",
    "randomized_response",
    "k_noise",
    "k_pram",
    "mdav_dp",
    "diffgen",
    "toy_groups",
)

ENGINES = [
    Engine("memory", "arrow"),
    Engine("arrow-1000rows", "arrow", 1000),
    Engine("arrow-64rows-tiny", "arrow", 64, tiny=True),
    Engine("parquet-1file", "parquet", 1000),
    Engine("parquet-2files-64rows-tiny", "parquet", 64, tiny=True, cuts=(1500,)),
    # 7 files of 1, 1, 998, 500, 1,499, 1 and 1 rows
    Engine("parquet-7files-tiny", "parquet", 1000, tiny=True, cuts=(1, 2, 1000, 1500, 2999, 3000)),
    Engine("csv-1file", "csv", 1000),
    Engine("csv-3files-64rows-tiny", "csv", 64, tiny=True, cuts=(1, 1500)),
    # every case at 2 partitions; the releases that the executors compute at 1, 7 and 33
    # as well (the others run the column engine over the frame, whose tiny-limit paths
    # the Arrow and Parquet engines take: on Spark each of their passes is a job). For the
    # column engine 2 partitions take the branches 7 take: a task per partition per pass,
    # rows numbered across a boundary, fewer partials than FAN (no second adding round),
    # ranges sorted by a shuffle whatever the input's partitions; 7 only ran 7 tasks per
    # job on the 2 cores of local[2], four rounds instead of one
    Engine("spark-1", "spark", partitions=1, only=_EXECUTORS),
    Engine("spark-2", "spark", partitions=2),
    Engine("spark-7", "spark", partitions=7, only=_EXECUTORS),
    Engine(f"spark-{MANY}", "spark", partitions=MANY, only=_EXECUTORS),
    # every case at 2 partitions (a boundary in the rows: numbering, ordering and adding
    # across it), each method's own case and the row-order and DP-bound variants also at
    # 1 (no boundary), 7 and 33 (more partitions than cores; many small ones). A variant's
    # option changes what the steps compute, not how the frame's partitions reach them
    Engine("dask-1", "dask", partitions=1, only=_PARTITIONED),
    Engine("dask-2", "dask", partitions=2),
    Engine("dask-7", "dask", partitions=7, only=_PARTITIONED),
    # 33 partitions persisted, as docs/engines.md advises for a frame read in several
    # passes: a lazy frame of 33 partitions is rebuilt by the client at each pass (about a
    # second each, k_pram making 29), which costs time and checks nothing the lazy frames
    # of 1, 2 and 7 partitions do not
    Engine(f"dask-{MANY}", "dask", partitions=MANY, persist=True, only=_PARTITIONED),
]


def _runs() -> list[Any]:
    """Every (case, engine) pair whose engine runs the case's method, with a readable id."""
    return [
        pytest.param(case, engine, id=f"{case.name}-{engine.name}")
        for case in CASES
        for engine in ENGINES
        if engine.runs(case)
    ]


@dataclass
class Side:
    """A release as compared: its rows, the types of its columns, its two reports.

    ``categories`` are the categories, in order, of the columns whose type declares them
    (an ordered categorical, an Arrow dictionary marked ordered).
    """

    data: pd.DataFrame
    types: list[tuple[str, str]]
    report: dict[str, Any]
    private: dict[str, Any] = field(default_factory=dict)
    categories: dict[str, list[Any]] = field(default_factory=dict)
    engine: str = ""  # the report's engine: compared apart, it differs by engine


def _arrow(frame: pd.DataFrame) -> pa.Table:
    """``frame`` as Arrow: text as ``string`` (pandas 3 gives ``large_string``), NaN kept.

    A categorical's values are ``string`` too, as Parquet gives them back.
    """
    columns = {}
    for name in frame.columns:
        values = frame[name]
        if values.dtype == np.float64:  # NaN stays NaN (pandas' conversion makes it null)
            columns[name] = pa.array(values.to_numpy(), from_pandas=False)
            continue
        array = pa.array(values, from_pandas=True)
        if array.type == pa.large_string():
            array = array.cast(pa.string())
        elif pa.types.is_dictionary(array.type):
            kind = array.type
            array = array.cast(pa.dictionary(kind.index_type, pa.string(), kind.ordered))
        columns[name] = array
    return pa.table(columns)


def _side(data: Any, report: Any, private: Any, types: Callable[[Any], list[Any]]) -> Side:
    """Compare ``data`` (Arrow or pandas) by its rows, its ``types`` and the reports."""
    rows = data.to_pandas() if isinstance(data, pa.Table) else data
    rows = rows.reset_index(drop=True)
    categories = {}
    for name in rows.columns:  # an unordered dictionary's order is not part of the release
        if isinstance(rows[name].dtype, pd.CategoricalDtype):
            if rows[name].dtype.ordered:
                categories[str(name)] = list(rows[name].cat.categories)
            rows[name] = rows[name].astype(rows[name].cat.categories.dtype)
    # timings and work describe how the run ran, not the release: they differ by engine
    counts = {k: v for k, v in private.to_dict().items() if k not in ("timings", "work")}
    public = report.to_dict()
    engine = public.pop("engine")
    return Side(rows, types(data), public, counts, categories, engine)


def _arrow_types(data: pa.Table) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in data.schema]


def _spark_types(data: pa.Table) -> list[tuple[str, str]]:
    """Arrow types as Spark holds them: one string type, no dictionaries."""
    types = []
    for f in data.schema:
        kind = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        types.append((f.name, "string" if kind == pa.large_string() else str(kind)))
    return types


def _pandas_types(data: pd.DataFrame) -> list[tuple[str, str]]:
    return [(str(name), str(dtype)) for name, dtype in data.dtypes.items()]


_REFERENCES: dict[tuple[str, str], Side] = {}


def _reference(case: Case, of: str, data: Callable[[], Any], types: Callable[[Any], Any]) -> Side:
    """:meth:`Case.reference`: the release of ``data()``, kept by case name and input."""
    key = (case.name, of)
    if key not in _REFERENCES:
        want = case.in_memory(data())
        _REFERENCES[key] = _side(case.data(want), want.report, want.private, types)
    return _REFERENCES[key]


def _on_source(case: Case, engine: Engine, where: Path) -> tuple[Side, Side]:
    """The column engine over an Arrow table, or a Parquet or CSV dataset of the case's table."""
    arrow = _arrow(case.input())
    source: Any = ArrowSource(arrow)
    of = "arrow"
    if engine.kind == "parquet":
        source = _parquet_parts(arrow, where / "in", engine.cuts)
    elif engine.kind == "csv":  # every cut of the CSV text reads back as the whole file
        arrow, source = _csv_parts(arrow, where / "in", engine.cuts)
        of = "csv"
    want = case.reference(of, lambda: arrow, _arrow_types)
    output = where / "out.parquet"
    report, private = case.out_of_core(
        source,
        output,
        memory_limit=engine.memory(case),
        batch_rows=engine.batch_rows,
        **case.arguments,
    )
    return _side(pq.read_table(output), report, private, _arrow_types), want


def _parquet_parts(table: pa.Table, directory: Path, cuts: tuple[int, ...]) -> ParquetDataset:
    """Write ``table`` as one file per range between ``cuts``; open it as a dataset."""
    directory.mkdir()
    for i, (first, last) in enumerate(pairwise([0, *cuts, table.num_rows])):
        pq.write_table(table.slice(first, last - first), directory / f"part-{i:03d}.parquet")
    dataset = ParquetDataset.open(directory)
    assert len(dataset.files) == len(cuts) + 1
    return dataset


def _csv_parts(table: pa.Table, directory: Path, cuts: tuple[int, ...]) -> tuple[pa.Table, str]:
    """Write ``table`` as CSV, one file per range between ``cuts``; return it read whole, and
    the path (a glob of several files).

    The files are the lines of the whole file, so read as one table they hold its values
    and their types are those of the whole file read in memory.
    """
    directory.mkdir()
    whole = directory / "whole.csv"
    pa_csv.write_csv(table, whole)
    expected = dpfast.io.read_table(whole)
    header, *lines = whole.read_text(encoding="utf-8").splitlines(True)
    whole.unlink()
    for i, (first, last) in enumerate(pairwise([0, *cuts, len(lines)])):
        text = header + "".join(lines[first:last])
        (directory / f"part-{i:03d}.csv").write_text(text, encoding="utf-8")
    return expected, str(directory / ("*.csv" if cuts else "part-000.csv"))


@contextlib.contextmanager
def _spark_frame(spark: Any, frame: pd.DataFrame, where: Path, partitions: int) -> Iterator[Any]:
    """``frame`` as a cached Spark DataFrame of ``partitions`` partitions (Parquet-read)."""
    path = where / "in.parquet"
    pq.write_table(_arrow(frame), path)
    data = spark.read.parquet(str(path)).repartition(partitions).cache()
    try:
        assert data.rdd.getNumPartitions() == partitions
        yield data
    finally:
        data.unpersist()


def _on_spark(case: Case, engine: Engine, where: Path, spark: Any) -> tuple[Side, Side]:
    """The public function given a Spark DataFrame; the reference is the frame's rows.

    The rows of a repartitioned frame are numbered in its own order (partition, then
    position: ``frame.toArrow()``), so the in-memory release is that table's.
    """
    with _spark_frame(spark, case.input(), where, engine.partitions) as frame:
        ordered = frame.toArrow()
        want = case.in_memory(ordered)
        release = case.run(case.function, frame, **case.arguments)
        data = case.data(release)
        assert type(data).__module__.startswith("pyspark.sql")
        rows = data.toArrow()
    got = _side(rows, release.report, release.private, _spark_types)
    return got, _side(case.data(want), want.report, want.private, _spark_types)


def _on_dask(case: Case, engine: Engine) -> tuple[Side, Side]:
    """The public function given a Dask DataFrame; the reference is the frame's rows."""
    import dask.dataframe as dd

    frame = dd.from_pandas(case.input(), npartitions=engine.partitions)
    if engine.persist:
        frame = frame.persist()
    assert frame.npartitions == engine.partitions
    want = case.reference("pandas", case.input, _pandas_types)
    release = case.run(case.function, frame, **case.arguments)
    data = case.data(release)
    assert type(data).__module__.startswith("dask")
    return _side(data.compute(), release.report, release.private, _pandas_types), want


@pytest.fixture(scope="module")
def dask_client(dask_cluster: Any) -> Iterator[Any]:
    """A client of the pytest process's cluster of two worker processes of one thread."""
    from tests.dask_clients import dask_client as connected

    # the workers cannot import this module (pytest imports it by path): send its functions
    with connected(dask_cluster, sys.modules[__name__], toy_method) as client:
        yield client


# --------------------------------------------------------------------------- the suite


def _assert_same(got: Side, want: Side, keeps_order: bool) -> None:
    assert got.types == want.types
    assert got.categories == want.categories
    data, expected = got.data, want.data
    if not keeps_order:  # the same multiset of rows: compare them sorted
        columns = list(expected.columns)
        data = data.sort_values(columns, ignore_index=True)
        expected = expected.sort_values(columns, ignore_index=True)
    pd.testing.assert_frame_equal(data, expected, check_dtype=True, check_exact=True)
    assert got.report == want.report
    assert got.private == want.private


@pytest.mark.parametrize(("case", "engine"), _runs())
def test_engine_gives_the_in_memory_release(case, engine, tmp_path, request):
    if engine.kind == "spark":
        got, want = _on_spark(case, engine, tmp_path, request.getfixturevalue("spark"))
    elif engine.kind == "dask":
        request.getfixturevalue("dask_client")
        got, want = _on_dask(case, engine)
    else:
        got, want = _on_source(case, engine, tmp_path)
    _assert_same(got, want, case.keeps_order)
    ran = engine.kind if engine.kind in ("spark", "dask") else "outofcore"
    assert (got.engine, want.engine) == (ran, "memory")


class _CountingSource(WrappedSource):
    """A column source that counts the passes made over it."""

    def __init__(self, source: Any) -> None:
        super().__init__(source)
        self.passes = 0

    @property
    def schema(self) -> Any:
        return self.dataset.schema

    def map_column(self, name: Any, batch_rows: int, fn: Any) -> Any:
        self.passes += 1
        return self.dataset.map_column(name, batch_rows, fn)


@pytest.mark.parametrize("case", [c for c in CASES if c.spills], ids=lambda c: c.name)
def test_the_tiny_limit_takes_the_out_of_core_paths(case, tmp_path):
    # guards the suite: under its tiny limit a case makes more passes than when it fits
    passes = []
    for memory in (LARGE_MEMORY, case.tiny_memory):
        source = _CountingSource(ArrowSource(_arrow(case.input())))
        case.out_of_core(
            source,
            tmp_path / f"{memory}.parquet",
            memory_limit=memory,
            batch_rows=1000,
            **case.arguments,
        )
        passes.append(source.passes)
    assert passes[1] > passes[0]


def test_mdav_dp_sorts_in_ranges_under_the_tiny_limit(tmp_path, monkeypatch):
    # guards the suite: mdav_dp makes the same passes, but sorts each order range by range
    from dpfast.steps import point_orders

    case = _BY_NAME["mdav_dp"]
    sorted_ranges = []
    original = point_orders._sort_range

    def counted(*args: Any, **kwargs: Any) -> Any:
        sorted_ranges.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(point_orders, "_sort_range", counted)
    counts = []
    for memory in (LARGE_MEMORY, case.tiny_memory):
        sorted_ranges.clear()
        case.out_of_core(
            ArrowSource(_arrow(case.input())),
            tmp_path / f"{memory}.parquet",
            memory_limit=memory,
            batch_rows=1000,
            **case.arguments,
        )
        counts.append(len(sorted_ranges))
    assert counts[1] > counts[0]


def test_the_tiny_limit_adds_long_ties_as_runs(tmp_path, monkeypatch):
    # guards the suite: ir_dp's tiny limit adds a tie longer than a sorted range unsorted
    from dpfast._kernels import ranking

    runs: list[int] = []
    original = ranking.add_group_run

    def recorded(*args: Any) -> Any:
        runs.append(int(args[1]))
        return original(*args)

    monkeypatch.setattr(ranking, "add_group_run", recorded)
    case = _BY_NAME["ir_dp"]
    case.out_of_core(
        ArrowSource(_arrow(case.input())),
        tmp_path / "out.parquet",
        memory_limit=TINY_MEMORY,
        batch_rows=64,
        **case.arguments,
    )
    assert max(runs, default=0) > 1024


def test_the_table_has_ties_a_remainder_group_bounds_and_nulls():
    # guards the suite: what the forcing cases rely on is in the data
    frame = table()
    assert len(frame) % K != 0
    assert frame["age"].duplicated().sum() > len(frame) // 2
    assert {17, 90} <= set(frame["age"])  # on the bounds
    assert (frame["share"] < 0).any() and (frame["share"] > 100).any()
    assert (frame["share"] == 0).any() and (frame["share"] == 100).any()
    assert (frame["tiny"] == 0.0).sum() > TINY_MEMORY // 32
    assert frame["note"].isna().sum() > 0
    assert set(frame["occupation"]) <= set(OCCUPATIONS)


def test_every_case_runs_on_dask():
    # every method runs on every engine: each case has its Dask runs
    dask = {param.values[0].name for param in _runs() if param.values[1].kind == "dask"}
    assert dask == {case.name for case in CASES}


def test_every_method_runs_at_every_partitioning():
    # the thinned engines name real cases, and each method has a case at every partitioning
    for engine in ENGINES:
        assert set(engine.only) <= set(_BY_NAME), engine.name
    for partitions in (1, 2, 7, MANY):
        engine = next(e for e in ENGINES if e.kind == "dask" and e.partitions == partitions)
        ran = {case.function for case in CASES if engine.runs(case)}
        assert ran == {case.function for case in CASES}, partitions


# --------------------------------------------------------------------------- bad input


@dataclass(frozen=True)
class BadInput:
    """A case's method given bad input: changed arguments and/or a damaged table."""

    name: str
    case: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    damage: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    extra: tuple[str, ...] = ()  # columns of the table added to the case's

    def input(self) -> pd.DataFrame:
        columns = [*_BY_NAME[self.case].columns, *self.extra]
        frame = table()[columns].iloc[:BAD_ROWS].reset_index(drop=True)
        return frame if self.damage is None else self.damage(frame.copy())

    def arguments(self) -> dict[str, Any]:
        return {**_BY_NAME[self.case].arguments, **self.changes}


BAD_ROWS = 600  # rows of the bad inputs' table
BAD_ROW = 451  # the damaged row, in the second half (another file, partition)


def _nan_share(frame: pd.DataFrame) -> pd.DataFrame:
    frame.loc[BAD_ROW, "share"] = np.nan
    return frame


def _astronaut(frame: pd.DataFrame) -> pd.DataFrame:
    frame.loc[BAD_ROW, "occupation"] = "Astronaut"
    return frame


def _missing(case: str) -> dict[str, Any]:
    """Arguments of ``case`` selecting a column the table does not have, with its bounds."""
    arguments = _BY_NAME[case].arguments
    changes: dict[str, Any] = {"columns": [*arguments.get("columns", ["age"]), "nope"]}
    if "bounds" in arguments:
        changes["bounds"] = {**arguments["bounds"], "nope": (0.0, 1.0)}
    return changes


def _inverted(case: str) -> dict[str, Any]:
    return {"bounds": {**_BY_NAME[case].arguments["bounds"], "age": (90, 17)}}


def _text_as_numeric(case: str) -> BadInput:
    """``case`` with the text column ``note`` declared numeric."""
    arguments = _BY_NAME[case].arguments
    if "columns" in arguments:
        return BadInput("text declared numeric", case, {"columns": ["note"]})
    bounds = {**arguments["bounds"], "note": (0.0, 1.0)}
    return BadInput("text declared numeric", case, {"bounds": bounds}, extra=("note",))


_NUMERIC_METHODS = ("ir_dp", "laplace_dp", "individual_ranking", "k_noise", "k_pram", "mdav_dp")
_BOUNDED = ("ir_dp", "laplace_dp", "mdav_dp", "diffgen")
_WITH_K = ("ir_dp", "individual_ranking", "k_noise", "k_pram", "mdav_dp")

BAD_INPUTS = [
    *(BadInput("missing column", case, _missing(case)) for case in _NUMERIC_METHODS),
    BadInput("missing column", "randomized_response", {"column": "nope"}),
    BadInput("missing column", "diffgen", {"target": "nope"}),
    *(BadInput("inverted bound", case, _inverted(case)) for case in _BOUNDED),
    *(BadInput("k above n", case, {"k": BAD_ROWS + 1}) for case in _WITH_K),
    *(_text_as_numeric(case) for case in (*_NUMERIC_METHODS, "diffgen")),
    *(BadInput("outside the taxonomy", case, damage=_astronaut) for case in ("ir_dp", "diffgen")),
    BadInput("outside the taxonomy", "mdav_dp", damage=_astronaut),
    BadInput("outside the domain", "randomized_response", {"domain": OCCUPATIONS[:-1]}, _astronaut),
    # the column engine stops at the first batch with a NaN, then counts them all
    # (counts_non_finite), so its error is the in-memory one
    *(BadInput("NaN", case, damage=_nan_share) for case in (*_NUMERIC_METHODS, "diffgen")),
    # bounds chosen with DP: their pass is the first over the column, and finds the NaN
    *(BadInput("NaN", f"{m}-dp-bounds", damage=_nan_share) for m in _BOUNDED[:3]),
]


def _error(call: Callable[[], Any]) -> tuple[type[BaseException], str]:
    """The type and message of the error ``call`` raises (it must raise one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnprovenReleaseWarning)
        with pytest.raises((ValueError, TypeError, KeyError, LookupError)) as raised:
            call()
    return raised.type, str(raised.value)


def _bad_runs() -> list[Any]:
    engines = ["arrow", "parquet", "spark", "dask"]
    return [
        pytest.param(bad, engine, id=f"{bad.case}-{bad.name}-{engine}")
        for bad in BAD_INPUTS
        for engine in engines
        if Engine(engine, engine).runs(_BY_NAME[bad.case])
    ]


@pytest.mark.parametrize(("bad", "engine"), _bad_runs())
def test_bad_input_gets_the_in_memory_error_before_any_output(bad, engine, tmp_path, request):
    case = _BY_NAME[bad.case]
    frame, arguments = bad.input(), bad.arguments()
    if engine in ("arrow", "parquet"):
        arrow = _arrow(frame)
        expected = _error(lambda: case.function(arrow, **arguments))
        source: Any = ArrowSource(arrow)
        if engine == "parquet":
            source = _parquet_parts(arrow, tmp_path / "in", (200, 201, 400))
        got = _error(
            lambda: case.out_of_core(
                source,
                tmp_path / "out.parquet",
                memory_limit=case.tiny_memory,
                batch_rows=64,
                **arguments,
            )
        )
        assert [p.name for p in tmp_path.iterdir()] == (["in"] if engine == "parquet" else [])
    elif engine == "spark":
        spark = request.getfixturevalue("spark")
        got, expected = _spark_error(case, frame, arguments, tmp_path, spark)
    else:
        request.getfixturevalue("dask_client")
        import dask.dataframe as dd

        expected = _error(lambda: case.function(frame, **arguments))
        got = _error(lambda: case.function(dd.from_pandas(frame, npartitions=2), **arguments))
    assert got == expected


def _spark_error(
    case: Case, frame: pd.DataFrame, arguments: dict[str, Any], where: Path, spark: Any
) -> tuple[tuple[type[BaseException], str], tuple[type[BaseException], str]]:
    """The public function's error given a Spark frame; the in-memory one of its rows.

    The release files of the driver go to a scratch directory of this test's own, which
    must hold no release afterwards.
    """
    from dpfast.engines.spark._settings import SCRATCH_KEY

    scratch = where / "scratch"
    spark.conf.set(SCRATCH_KEY, str(scratch))
    try:
        with _spark_frame(spark, frame, where, 2) as data:
            ordered = data.toArrow()
            expected = _error(lambda: case.function(ordered, **arguments))
            got = _error(lambda: case.function(data, **arguments))
    finally:
        spark.conf.unset(SCRATCH_KEY)
    assert not any(path.is_file() for path in scratch.rglob("*"))
    return got, expected


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("method", "columns", "arguments"),
    [
        # an int32 column stays int32 (numeric_scratch restores the input's integer type)
        (dpfast.ir_dp, ["age", "small"], {"k": K, "epsilon": 4.0}),
        (dpfast.laplace_dp, ["age", "small"], {"epsilon": 30.0}),
        (dpfast.mdav_dp, ["age", "small"], {"k": 25, "epsilon": 200.0}),
        # a large_string column's labels stay large strings (categorical_scratch)
        (dpfast.ir_dp, ["age", "occupation"], {"k": K, "epsilon": 4.0, "taxonomies": _TAXONOMIES}),
    ],
    ids=["ir_dp-int32", "laplace_dp-int32", "mdav_dp-int32", "ir_dp-large_string-labels"],
)
def test_the_column_engine_keeps_the_input_types(method, columns, arguments, tmp_path):
    # the in-memory release keeps the input's Arrow types, and so does the column engine
    data = pa.Table.from_pandas(table()[columns], preserve_index=False)  # large_string text
    bounds = {"age": (17, 90), "small": (-3, 3)}  # of the case's columns only
    arguments = {
        **arguments,
        "bounds": {c: bounds[c] for c in columns if c in bounds},
        "seed": SEED,
    }
    expected = method(data, **arguments).data
    case = next(c for c in CASES if c.function is method)
    case.out_of_core(
        ArrowSource(data),
        tmp_path / "o.parquet",
        memory_limit=LARGE_MEMORY,
        batch_rows=1 << 20,
        **arguments,
    )
    assert pq.read_table(tmp_path / "o.parquet").schema == expected.schema
