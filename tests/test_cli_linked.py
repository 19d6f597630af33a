"""``dpfast release ir-dp|laplace`` out of core: record linkage and unprotected columns.

The engine's output (a dataset or ``--memory-limit``) must be the in-memory command's,
table for table: the same columns, values, rows and Arrow types, and the same reports.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import cli
from dpfast.datasets import adult
from tests.engine_runs import apart_from_engine

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "hours-per-week": {"type": "float", "bounds": [1, 99]},
        "occupation": {
            "type": "categorical",
            "taxonomy": str(
                Path(dpfast.__file__).parent / "datasets/hierarchies/adult_hierarchy_occupation.csv"
            ),
        },
        "sex": {"type": "categorical", "protect": False},
        "capital-gain": {"type": "float", "protect": False},  # int64 in the files: cast
    }
}
LAPLACE_SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "hours-per-week": {"type": "float", "bounds": [1, 99]},
    }
}
N = 5003
COLUMNS = ["age", "hours-per-week", "occupation", "sex", "capital-gain", "education", "fnlwgt"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    frame = adult("train", drop_missing=True)[COLUMNS].iloc[:N].reset_index(drop=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    (tmp_path / "parts").mkdir()
    for i, (first, last) in enumerate([(0, 1), (1, 1000), (1000, 1001), (1001, N)]):
        pq.write_table(table.slice(first, last - first), tmp_path / "parts" / f"p{i}.parquet")
    pq.write_table(table, tmp_path / "people.parquet")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    (tmp_path / "laplace.json").write_text(json.dumps(LAPLACE_SCHEMA), encoding="utf-8")
    return tmp_path


def _release(workdir: Path, method: str, source: str, output: str, *extra: str) -> int:
    paths = [str(workdir / source), "-o", str(workdir / output)]
    schema = "schema.json" if method == "ir-dp" else "laplace.json"
    options = ["--epsilon", "1.5", "--schema", str(workdir / schema), "--seed", "5"]
    if method == "ir-dp":
        options += ["--k", "9"]
    return cli.main(["release", method, *paths, *options, "--quiet", *extra])


def _same(workdir: Path, got: str, expected: str) -> None:
    mine, theirs = pq.read_table(workdir / got), pq.read_table(workdir / expected)
    assert mine.schema.names == theirs.schema.names
    for name in mine.schema.names:
        column, wanted = mine.column(name), theirs.column(name)
        assert column.type == wanted.type, name
        if pa.types.is_dictionary(column.type):  # the dictionary's order is the writer's
            column, wanted = (
                column.cast(column.type.value_type),
                wanted.cast(column.type.value_type),
            )
        assert column.equals(wanted), name
    public = [
        json.loads((workdir / f"{o}.public-report.json").read_text()) for o in (got, expected)
    ]
    assert apart_from_engine(public[0]) == apart_from_engine(public[1])
    private = [
        json.loads((workdir / f"{o}.private-report.json").read_text()) for o in (got, expected)
    ]
    for field in ("clamped", "clamped_output", "input_rows"):
        assert private[0][field] == private[1][field], field


@pytest.mark.parametrize(
    "extra",
    [
        ["--linkage", "records", "--unprotected", "keep"],
        ["--linkage", "records", "--no-shuffle", "--unprotected", "keep"],
        ["--linkage", "records", "--unprotected", "shuffle"],
        ["--linkage", "records", "--no-shuffle"],
        ["--unprotected", "shuffle"],
    ],
)
@pytest.mark.parametrize(
    ("source", "output", "limit"),
    [("parts", "released", ["--memory-limit", "120KB"]), ("people.parquet", "r.parquet", [])],
)
def test_ir_dp_engine_gives_the_in_memory_release(workdir, extra, source, output, limit):
    from dpfast.cli import _inputs

    with _engines_opened() as opened:
        assert _release(workdir, "ir-dp", "people.parquet", "memory.parquet", *extra) == 0
        # a single file below the size threshold ran in memory; now out of core
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_inputs, "ENGINE_FROM_BYTES", 0)
            assert _release(workdir, "ir-dp", source, output, *extra, *limit) == 0
    assert opened == ["memory", "outofcore"]
    _same(workdir, output, "memory.parquet")
    assert not [p for p in workdir.iterdir() if p.name.startswith(f".{output}")]


@contextlib.contextmanager
def _engines_opened() -> Iterator[list[str]]:
    """Record the name of every engine opened in the block."""
    import dpfast.engines

    opened: list[str] = []
    original = dpfast.engines.open_engine

    def recorded(data: Any, **kwargs: Any) -> Any:
        engine = original(data, **kwargs)
        opened.append(engine.name)
        return engine

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("dpfast._release._run.open_engine", recorded)
        yield opened


@pytest.mark.parametrize("policy", ["keep", "shuffle"])
def test_laplace_engine_gives_the_in_memory_release(workdir, policy):
    extra = ["--unprotected", policy]
    with _engines_opened() as opened:
        assert _release(workdir, "laplace", "people.parquet", "memory.parquet", *extra) == 0
        limit = ["--memory-limit", "90KB"]
        assert _release(workdir, "laplace", "parts", "released", *extra, *limit) == 0
    assert opened == ["memory", "outofcore"]
    _same(workdir, "released", "memory.parquet")


def test_csv_output_is_still_refused_out_of_core(workdir, capsys):
    extra = ["--linkage", "records", "--memory-limit", "1GiB"]
    assert _release(workdir, "ir-dp", "people.parquet", "r.csv", *extra) == 2
    err = capsys.readouterr().err
    assert "out of core writes Parquet" in err and "drop --memory-limit" in err
    assert not (workdir / "r.csv").exists()


@pytest.mark.parametrize(
    "extra",
    [
        ["--linkage", "records"],
        ["--linkage", "records", "--unprotected", "keep"],
        ["--unprotected", "shuffle"],
    ],
)
def test_spark_writes_a_dataset_directory_named_by_output(workdir, capsys, extra):
    # every linkage and policy runs on Spark (tests/test_engine_spark_methods.py); an
    # OUTPUT named .parquet is a dataset directory of that name, as Spark writes it
    assert _release(workdir, "ir-dp", "parts", "r.parquet", "--engine", "spark", *extra) == 0
    assert (workdir / "r.parquet").is_dir()
    assert (
        pq.read_table(workdir / "r.parquet").num_rows == pq.read_table(workdir / "parts").num_rows
    )
