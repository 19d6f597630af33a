"""Declared types decide, never the values (issue 13, point 3).

A ``"float"`` column whose values happen to be whole numbers is float64 and released
unrounded, like its neighbour with one fractional value; an ``"integer"`` column is int64
and rounded, whatever file format and Arrow type hold it. Every release command gives the
same seeded release for the same declared schema and the same values, from CSV and from
Parquet with integer or float columns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpfast
from dpfast import cli
from dpfast.engines import Opening
from dpfast.engines.memory import MemoryEngine
from dpfast.schema import Schema

N_ROWS = 80
SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "protect": False},
        "label": {"type": "categorical", "protect": False},
    }
}
DIFFGEN_SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "label": {"type": "categorical"},
        "job": {"type": "categorical", "protect": False},
    }
}
DOMAIN = "clerk,nurse,pilot"


def people() -> pd.DataFrame:
    """Income holds whole numbers only: CSV inference reads it as int64."""
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, N_ROWS).astype(np.int64),
            "income": rng.integers(0, 150_000, N_ROWS).astype(np.float64),
            "job": rng.choice(DOMAIN.split(","), N_ROWS),
            "label": rng.choice(["no", "yes"], N_ROWS),
        }
    )


def _write_inputs(directory: Path) -> None:
    frame = people()
    as_ints = frame.assign(income=frame["income"].astype(np.int64))
    as_ints.to_csv(directory / "whole.csv", index=False)
    assert pd.read_csv(directory / "whole.csv")["income"].dtype == np.int64  # the trap
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), directory / "float.parquet")
    pq.write_table(pa.Table.from_pandas(as_ints, preserve_index=False), directory / "int.parquet")
    # age as whole float64 and income as int32: each cast to its declared type
    other = frame.assign(age=frame["age"].astype(np.float64), income=as_ints["income"])
    table = pa.Table.from_pandas(other, preserve_index=False)
    table = table.set_column(1, "income", table.column("income").cast(pa.int32()))
    pq.write_table(table, directory / "mixed.parquet")
    neighbour = as_ints.astype({"income": np.float64})
    neighbour.loc[0, "income"] += 0.5
    neighbour.to_csv(directory / "neighbour.csv", index=False)


INPUTS = ("whole.csv", "float.parquet", "int.parquet", "mixed.parquet")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("declared")
    _write_inputs(directory)
    (directory / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    (directory / "diffgen.json").write_text(json.dumps(DIFFGEN_SCHEMA), encoding="utf-8")
    return directory


COMMANDS: dict[str, list[str]] = {
    "ir-dp": ["--k", "4", "--epsilon", "100", "--schema", "schema.json", "--seed", "3"],
    "laplace": ["--epsilon", "100", "--schema", "schema.json", "--seed", "3"],
    "mdav-dp": ["--k", "10", "--epsilon", "100", "--schema", "schema.json", "--seed", "3"],
    "diffgen": [
        *("--target", "label", "--steps", "3", "--epsilon", "1"),
        *("--schema", "diffgen.json", "--classes", "no,yes", "--seed", "3"),
    ],
    "randomized-response": [
        *("--column", "job", "--domain", DOMAIN, "--epsilon", "1"),
        *("--schema", "schema.json", "--seed", "3"),
    ],
    "individual-ranking": ["--k", "4", "--schema", "schema.json"],
    "mdav": ["--k", "4", "--schema", "schema.json"],
    "k-noise": ["--k", "4", "--schema", "schema.json", "--seed", "3"],
    "k-pram": ["--k", "4", "--schema", "schema.json", "--seed", "3"],
}
# The commands that add noise to the float column "income".
NOISY_FLOAT = ("ir-dp", "laplace", "mdav-dp", "k-noise")


def _release(workdir: Path, method: str, source: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(workdir)
    output = f"{method}-{source.replace('.', '-')}.parquet"
    # --force: the module's tests release the same source more than once
    argv = ["release", method, source, "-o", output, "--quiet", "--force", *COMMANDS[method]]
    code = cli.main(argv)
    assert code == 0
    return pq.read_table(workdir / output)


def test_every_command_is_listed() -> None:
    from dpfast.cli import RELEASE_COMMANDS

    assert {command.name for command in RELEASE_COMMANDS} == set(COMMANDS)


@pytest.mark.parametrize("method", sorted(COMMANDS))
def test_same_release_whatever_holds_the_values(
    workdir: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _release(workdir, method, INPUTS[0], monkeypatch)
    for source in INPUTS[1:]:
        got = _release(workdir, method, source, monkeypatch)
        # string columns differ in Arrow type (string, large_string) between the inputs
        pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas(), obj=source)
    if method != "diffgen":
        assert expected.schema.field("income").type == pa.float64()
    if method not in ("diffgen", "k-noise"):  # k-noise releases every column as float
        assert expected.schema.field("age").type == pa.int64()


@pytest.mark.parametrize("method", NOISY_FLOAT)
def test_float_column_is_released_unrounded_like_its_neighbour(
    workdir: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for source in ("whole.csv", "neighbour.csv"):
        got = _release(workdir, method, source, monkeypatch).to_pandas()
        assert got["income"].dtype == np.float64
        income = got["income"].to_numpy()
        assert (income != np.round(income)).mean() > 0.5, source  # not rounded
        if method != "k-noise":
            assert got["age"].dtype == np.int64
            assert got["age"].between(17, 90).all()


# -- refusals --------------------------------------------------------------------------------


def _one_line_error(capsys: pytest.CaptureFixture[str], *parts: str) -> None:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dpfast: error: "), lines[0]
    for part in parts:
        assert part in lines[0], lines[0]


def _laplace(directory: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.chdir(directory)
    return cli.main(
        ["release", "laplace", source, "-o", "out.parquet", "--quiet", *COMMANDS["laplace"]]
    )


def test_fractional_value_in_integer_column_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = people().assign(age=people()["age"].astype(np.float64))
    frame.loc[7, "age"] = 40.5
    frame.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    assert _laplace(tmp_path, "in.csv", monkeypatch) == 2
    _one_line_error(
        capsys, "column 'age' is declared integer", "holds 40.5 at row 7", 'declare it "float"'
    )
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize(
    ("column", "arrow", "message"),
    [
        ("age", pa.array([np.inf] + [30.0] * (N_ROWS - 1)), "holds inf at row 0"),
        (
            "age",
            pa.array([2**63] + [30] * (N_ROWS - 1), pa.uint64()),
            "outside the int64 range",
        ),
        ("age", pa.array([1e19] + [30.0] * (N_ROWS - 1)), "outside the int64 range"),
        (
            "income",
            pa.array([2**53 + 1] + [3] * (N_ROWS - 1), pa.int64()),
            "float64 cannot hold exactly",
        ),
    ],
)
def test_values_the_declared_type_cannot_hold_are_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    column: str,
    arrow: pa.Array,
    message: str,
) -> None:
    table = pa.Table.from_pandas(people(), preserve_index=False)
    table = table.set_column(table.column_names.index(column), column, arrow)
    pq.write_table(table, tmp_path / "in.parquet")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    assert _laplace(tmp_path, "in.parquet", monkeypatch) == 2
    _one_line_error(capsys, f"column {column!r} is declared", message)


def test_exact_casts_keep_missing_values_of_unprotected_columns() -> None:
    schema = Schema.from_dict(
        {
            "columns": {
                "n": {"type": "integer", "protect": False},
                "x": {"type": "float", "protect": False},
            }
        }
    )
    table = pa.table(
        {
            "n": pa.array([1.0, None, 2.0**60]),
            "x": pa.array([2**60, None, -(2**53)], pa.int64()),
        }
    )
    got = schema.check_table(table)
    assert got.schema.field("n").type == pa.int64()
    assert got.column("n").to_pylist() == [1, None, 2**60]
    assert got.schema.field("x").type == pa.float64()
    assert got.column("x").to_pylist() == [2.0**60, None, -(2.0**53)]


# -- the API: the dtype decides ----------------------------------------------------------------


def _api_releases(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    bounds = {"age": (17, 90), "income": (0, 200_000)}
    columns = ["age", "income"]
    return {
        "ir_dp": dpfast.ir_dp(
            frame, k=4, epsilon=100.0, bounds=bounds, columns=columns, seed=3
        ).data,
        "laplace_dp": dpfast.laplace_dp(
            frame, epsilon=100.0, bounds=bounds, columns=columns, seed=3
        ).data,
        "mdav_dp": dpfast.mdav_dp(
            frame, k=10, epsilon=100.0, bounds=bounds, columns=columns, seed=3
        ).data,
    }


def test_api_rounds_by_dtype_only() -> None:
    frame = people()[["age", "income"]]
    as_float = _api_releases(frame.astype(np.float64))
    as_int = _api_releases(frame.astype(np.int64))
    neighbour = frame.astype(np.float64)
    neighbour.loc[0, "income"] += 0.5
    as_neighbour = _api_releases(neighbour)
    for name in as_float:
        for got in (as_float[name], as_neighbour[name]):
            assert (got.dtypes == np.float64).all(), name
            values = got.to_numpy()
            assert (values != np.round(values)).mean() > 0.5, name
        got = as_int[name]
        assert (got.dtypes == np.int64).all(), name
        assert got["age"].between(17, 90).all() and got["income"].between(0, 200_000).all()


def test_numeric_column_integer_flag_comes_from_the_dtype() -> None:
    whole = np.array([[1.0, 2.0], [3.0, 4.0]])
    for data, integer in ((whole, False), (whole.astype(np.int32), True)):
        engine = MemoryEngine.open(data, Opening("test"))
        got = engine.numeric_columns(engine.names)
        assert [column.integer for column in got] == [integer, integer]


# -- ordered categoricals: the declared domain decides, never which values occur ---------

JOBS = ["clerk", "nurse", "pilot", "welder"]
JOB_TAXONOMY = {"job": dpfast.Taxonomy.from_mapping({"*": {j: None for j in JOBS}})}


def _neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two tables that differ in one row: the only welder becomes a pilot."""
    rng = np.random.default_rng(3)
    jobs = rng.choice(JOBS[:3], N_ROWS).astype(object)
    jobs[7] = "welder"
    table = pd.DataFrame({"age": rng.integers(17, 91, N_ROWS), "job": jobs})
    neighbour = table.copy()
    neighbour.loc[7, "job"] = "pilot"
    return table, neighbour


ORDERED_RELEASES = {
    "ir_dp": lambda data, **o: dpfast.ir_dp(
        data, k=5, epsilon=4.0, bounds={"age": (17, 90)}, taxonomies=JOB_TAXONOMY, **o
    ),
    "mdav_dp": lambda data, **o: dpfast.mdav_dp(
        data, k=20, epsilon=50.0, bounds={"age": (17, 90)}, taxonomies=JOB_TAXONOMY, **o
    ),
    "mdav": lambda data, seed, **o: dpfast.mdav(data, k=5, taxonomies=JOB_TAXONOMY, **o),
    "randomized_response": lambda data, **o: dpfast.randomized_response(
        data, column="job", domain=JOBS, epsilon=1.0, **o
    ),
    "diffgen": lambda data, **o: dpfast.diffgen(
        data, target="job", epsilon=1.0, steps=2, bounds={"age": (17, 90)}, classes=JOBS, **o
    ),
}


def _categories(release: Any) -> list[tuple[str, list[str], bool]]:
    """The released table's category metadata: each categorical's categories and flag."""
    table = release.counts if isinstance(release, dpfast.DiffGenRelease) else release.data
    return [
        (str(name), list(table[name].cat.categories), bool(table[name].cat.ordered))
        for name in table.columns
        if isinstance(table[name].dtype, pd.CategoricalDtype)
    ]


@pytest.mark.parametrize("method", sorted(ORDERED_RELEASES))
def test_neighbours_with_a_declared_domain_get_the_same_categories(method) -> None:
    declared = pd.CategoricalDtype(list(reversed(JOBS)), ordered=True)  # every leaf
    got = [
        _categories(ORDERED_RELEASES[method](table.astype({"job": declared}), seed=1))
        for table in _neighbours()
    ]
    assert got[0] == got[1] and ("job", list(reversed(JOBS)), True) in got[0]


@pytest.mark.parametrize("method", sorted(ORDERED_RELEASES))
def test_neighbours_whose_categories_come_from_the_data_never_differ(method, tmp_path) -> None:
    # pd.Categorical(values, ordered=True) lists the values that occur: the welder's table
    # lists every leaf, its neighbour lacks one. Released, the two orders would differ
    # (the missing leaf placed last), telling whether a welder is in the table.
    got = []
    for table in _neighbours():
        data = table.assign(job=pd.Categorical(table["job"], ordered=True))
        try:
            got.append(_categories(ORDERED_RELEASES[method](data, seed=1)))
        except dpfast.DPFastError as refused:
            assert "categories lack 1 of the 4 values" in str(refused)
            assert "'welder'" in str(refused) and "pl.Enum(domain)" in str(refused)
            got.append(None)
    assert got[1] is None  # refused: its type lacks a leaf
    assert got[0] is not None and ("job", JOBS, True) in got[0]  # every leaf occurs: sorted
    # out of core too, from the Parquet file of the type (an ordered dictionary)
    neighbour = _neighbours()[1]
    path = tmp_path / "in.parquet"
    neighbour.assign(job=pd.Categorical(neighbour["job"], ordered=True)).to_parquet(path)
    if method != "mdav":  # mdav runs in memory only
        with pytest.raises(dpfast.DPFastError, match="categories lack 1 of the 4 values"):
            ORDERED_RELEASES[method](path, seed=1, output=tmp_path / "o.parquet")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
