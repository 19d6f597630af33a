"""CSV and TSV input out of core: read in batches, typed as a whole read types it.

A CSV file released out of core is converted batch by batch into Parquet scratch files;
its columns must be, type and value, those of the file read whole in memory
(``dpfast.io.read_table``, pyarrow's ``read_csv``), so that the release is the in-memory
one bit for bit (the conformance suite releases every method case from CSV too). The
conversion is removed however the release ends.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import cli
from dpfast.engines.outofcore import CsvSource
from dpfast.io import CsvFiles, read_table
from tests.engine_runs import apart_from_engine

#: Values of each kind pyarrow infers, missing values among them.
POOLS = {
    "missing": ["", "NA", "null", "NaN"],
    "int": ["0", "1", "-7", "123456789", "42"],
    "bool": ["true", "false", "True", "FALSE"],
    "float": ["1.5", "-0.25", "1e3", "inf", "3.0"],
    "date": ["2020-01-31", "1999-12-01"],
    "time": ["12:00:00", "23:59:59"],
    "timestamp": ["2020-01-01 12:00:00", "2021-06-30T01:02:03"],
    "timestamp_ns": ["2020-01-01 12:00:00.5"],
    "zoned": ["2020-01-01T12:00:00Z", "2020-01-01T12:00:00+01:00"],
    "text": ["a", "b c", "x,y", 'say "hi"'],
}


def _quoted(value: str) -> str:
    if any(c in value for c in ',"\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


def _random_csv(rng: np.random.Generator, n_rows: int, n_columns: int) -> str:
    """A CSV whose columns mostly hold one kind, with a few values of another, anywhere."""
    columns = []
    kinds = list(POOLS)
    for _ in range(n_columns):
        main = POOLS[kinds[rng.integers(len(kinds))]]
        other = POOLS[kinds[rng.integers(len(kinds))]]
        values = [main[i] for i in rng.integers(len(main), size=n_rows)]
        for row in rng.integers(n_rows, size=rng.integers(0, 3)):  # a surprise, maybe late
            values[row] = other[rng.integers(len(other))]
        columns.append(values)
    header = ",".join(f"c{j}" for j in range(n_columns))
    rows = [",".join(_quoted(c[i]) for c in columns) for i in range(n_rows)]
    return "\n".join([header, *rows]) + "\n"


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """CSV files read in blocks of 256 bytes: many batches, types decided by the first."""
    opened = CsvFiles.open.__func__  # type: ignore[attr-defined]

    def open_small(cls: Any, *args: Any, **kwargs: Any) -> CsvFiles:
        return dataclasses.replace(opened(cls, *args, **kwargs), block_size=256)

    monkeypatch.setattr(CsvFiles, "open", classmethod(open_small))


@pytest.fixture(params=["all CPUs", "one CPU"])
def pyarrow_cpus(request: pytest.FixtureRequest) -> Any:
    """pyarrow's thread pool as it is, or on one CPU (its messages then name the row)."""
    before = pa.cpu_count()
    if request.param == "one CPU":
        pa.set_cpu_count(1)
    yield request.param
    pa.set_cpu_count(before)


def _columns(source: Any) -> pa.Table:
    """Every column of ``source``, read through its passes (batch by batch, in row order)."""
    columns = {}
    for name in source.names:
        parts = sorted(source.map_column(name, 100, lambda a, first: (first, a)))
        columns[name] = pa.concat_arrays([a for _, a in parts]) if parts else pa.array([])
    return pa.table(columns, schema=source.schema)


@pytest.mark.parametrize("seed", range(40))
def test_the_columns_are_those_of_the_file_read_whole(tmp_path, small_blocks, seed):
    rng = np.random.default_rng(seed)
    path = tmp_path / "in.csv"
    path.write_text(_random_csv(rng, int(rng.integers(1, 120)), 4), encoding="utf-8")
    expected = read_table(path)
    source = CsvSource.open(path, tmp_path / "out.parquet", 2**20)
    try:
        got = _columns(source)
    finally:
        source.close()
    assert got.schema == expected.schema
    assert got.equals(expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # its scratch is gone


def test_a_glob_of_files_is_one_table_typed_as_one_file(tmp_path, small_blocks, pyarrow_cpus):
    # the first file alone is integers; the second holds a float: the column is float
    (tmp_path / "in").mkdir()
    rows = [f"{i},{'x' if i % 3 else ''}" for i in range(200)]
    rows[150] = "2.5,y"
    (tmp_path / "in" / "a.csv").write_text("n,s\n" + "\n".join(rows[:100]) + "\n")
    (tmp_path / "in" / "b.csv").write_text("n,s\n" + "\n".join(rows[100:]) + "\n")
    (tmp_path / "whole.csv").write_text("n,s\n" + "\n".join(rows) + "\n")
    expected = read_table(tmp_path / "whole.csv")
    source = CsvSource.open(tmp_path / "in" / "*.csv", tmp_path / "out", 2**20)
    try:
        assert source.n_rows == 200 and source.schema.field("n").type == pa.float64()
        assert _columns(source).equals(expected)
    finally:
        source.close()


@pytest.mark.parametrize(
    ("text", "extra"),
    [
        (b"a,b\n1,2\n3,4,5\n", {}),  # a ragged row
        (b"a,b\n1,2\n\xe9,3\n", {}),  # not UTF-8
        (b"a,a\n1,2\n", {}),  # a repeated name
        (b"a;b\n1;2\n", {}),  # another delimiter
        (b"a,b\n1,2\n", {"delimiter": "::"}),  # a bad delimiter
        (b"a,b\n1,2\n", {"encoding": "klingon"}),
    ],
)
def test_bad_files_get_the_errors_of_a_whole_read(tmp_path, text, extra, pyarrow_cpus):
    path = tmp_path / "bad.csv"
    path.write_bytes(text)
    with pytest.raises(ValueError) as whole:
        read_table(path, **extra)
    with pytest.raises(ValueError) as batches:
        CsvSource.open(path, tmp_path / "out.parquet", 2**20, **extra).close()
    assert type(batches.value) is type(whole.value)
    assert str(batches.value) == str(whole.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def _people(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(9)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": np.round(rng.lognormal(10, 1.2, n), 2),
            "town": rng.choice(["Zoë", "Åsa", "Béziers"], n),
        }
    )


BOUNDS = {"age": (17, 90), "income": (0.0, 500_000.0)}


def test_the_python_functions_release_a_csv_path_as_its_table_in_memory(tmp_path):
    _people().to_csv(tmp_path / "in.csv", index=False)
    arguments = {"k": 7, "epsilon": 2.0, "bounds": BOUNDS, "seed": 3, "unprotected": "shuffle"}
    arguments["columns"] = ["age", "income"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpfast.exceptions.NoiseDominatesWarning)
        expected = dpfast.ir_dp(read_table(tmp_path / "in.csv"), **arguments)
        got = dpfast.ir_dp(
            str(tmp_path / "in.csv"),
            output=tmp_path / "out.parquet",
            memory_limit="1MiB",
            **arguments,
        )
    assert pq.read_table(tmp_path / "out.parquet").equals(expected.data)
    assert apart_from_engine(got.report) == apart_from_engine(expected.report)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.parquet"]


def _failing_write(*args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("failure", ["a NaN", "an interrupt while converting"])
def test_the_conversion_is_removed_when_the_release_fails(tmp_path, monkeypatch, failure):
    frame = _people()
    if failure == "a NaN":
        frame.loc[1500, "income"] = np.nan
    else:
        monkeypatch.setattr(pq.ParquetWriter, "write_table", _failing_write)
    frame.to_csv(tmp_path / "in.csv", index=False)
    expected = (ValueError, "non-finite") if failure == "a NaN" else (KeyboardInterrupt, None)
    with warnings.catch_warnings(), pytest.raises(expected[0], match=expected[1]):
        warnings.simplefilter("ignore", dpfast.exceptions.NoiseDominatesWarning)
        dpfast.laplace_dp(
            str(tmp_path / "in.csv"),
            epsilon=1.0,
            bounds=BOUNDS,
            columns=["income"],
            output=tmp_path / "out.parquet",
            memory_limit="1MiB",
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_row_groups_stay_within_the_memory_limit(tmp_path):
    frame = pd.DataFrame({"x": np.arange(400_000, dtype=np.int64), "y": 0.5})
    frame.to_csv(tmp_path / "in.csv", index=False)
    source = CsvSource.open(tmp_path / "in.csv", tmp_path / "out", 16 * 2**20)
    try:
        (part,) = source.dataset.files
        metadata = pq.ParquetFile(part).metadata
        groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
        assert len(groups) > 1 and sum(g.num_rows for g in groups) == 400_000
        assert max(g.num_rows * 16 for g in groups) <= 2 * 2**20  # an eighth of the limit
    finally:
        source.close()


# -- the command line ------------------------------------------------------------------------

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 500000]},
        "town": {"type": "categorical", "protect": False},
    }
}


def _cli(where: Path, source: str, output: str, *extra: str) -> None:
    argv = ["release", "ir-dp", source, "-o", str(where / output), "--k", "7"]
    argv += ["--epsilon", "2", "--schema", str(where / "s.json"), "--seed", "3", "--quiet"]
    argv += ["--unprotected", "shuffle", *extra]
    assert cli.main(argv) == 0


def _written(where: Path, output: str) -> tuple[pa.Table, dict[str, Any], dict[str, Any]]:
    public = json.loads((where / f"{output}.public-report.json").read_text(encoding="utf-8"))
    private = json.loads((where / f"{output}.private-report.json").read_text(encoding="utf-8"))
    private.pop("timings"), private.pop("work", None)
    return pq.read_table(where / output), apart_from_engine(public), private


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("in.csv", []),
        ("in.tsv.gz", []),
        ("in.csv", ["--delimiter", ";", "--encoding", "latin-1"]),
        ("parts/*.csv", []),
        ("parts", []),
    ],
    ids=["csv", "tsv.gz", "delimiter and encoding", "glob", "directory"],
)
def test_the_command_line_releases_csv_out_of_core_as_in_memory(tmp_path, name, extra):
    frame = _people()
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    separator = ";" if "--delimiter" in extra else "\t" if ".tsv" in name else ","
    encoding = "latin-1" if "--encoding" in extra else "utf-8"
    text = frame.to_csv(index=False, sep=separator).encode(encoding)
    whole = tmp_path / ("whole.tsv" if ".tsv" in name else "whole.csv")
    whole.write_bytes(text)
    if name.endswith(".gz"):
        (tmp_path / name).write_bytes(gzip.compress(text))
    elif name.startswith("parts"):
        (tmp_path / "parts").mkdir()
        header, *lines = text.decode(encoding).splitlines(True)
        for i, first in enumerate(range(0, len(lines), 700)):
            chunk = header + "".join(lines[first : first + 700])
            (tmp_path / "parts" / f"p{i}.csv").write_text(chunk, encoding=encoding)
    else:
        (tmp_path / name).write_bytes(text)
    _cli(tmp_path, str(whole), "memory.parquet", *extra)
    _cli(tmp_path, str(tmp_path / name), "out", *extra, "--memory-limit", "1MiB")
    got, expected = _written(tmp_path, "out"), _written(tmp_path, "memory.parquet")
    assert got[0].equals(expected[0]) and got[1] == expected[1] and got[2] == expected[2]
    assert not [p for p in os.listdir(tmp_path) if "dpfast" in p]
