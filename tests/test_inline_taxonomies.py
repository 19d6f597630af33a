"""Taxonomies written inline in the schema, and the same forms in every Python function."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast.cli import main
from dpfast.schema import Schema
from dpfast.taxonomy import Taxonomy, TaxonomyError, as_taxonomy

JOBS = {"*": {"office": ["clerk", "manager"], "field": ["nurse", "pilot"]}}


def test_as_taxonomy_takes_every_form(tmp_path: Path) -> None:
    tree = Taxonomy.from_mapping(JOBS, name="jobs")
    assert as_taxonomy(tree) is tree
    assert as_taxonomy(JOBS).domain == tree.domain
    flat = as_taxonomy(["yes", "no", "maybe"], "answer")
    assert flat.domain == ("maybe", "no", "yes") and flat.name == "answer"
    assert flat.distance("yes", "no") == flat.max_distance  # only the root is shared
    hierarchy = tmp_path / "jobs.csv"
    hierarchy.write_text("clerk;office;*\nmanager;office;*\nnurse;field;*\npilot;field;*\n")
    from_file = as_taxonomy(hierarchy)
    assert from_file.domain == tree.domain
    assert np.array_equal(from_file.distance_matrix(), tree.distance_matrix())
    assert as_taxonomy(str(hierarchy)).domain == tree.domain
    with pytest.raises(TypeError, match="list of leaves"):
        as_taxonomy(42, "job")
    with pytest.raises(TaxonomyError, match="may not hold"):
        as_taxonomy(["*", "a"])


def _schema(tmp_path: Path, taxonomy: object) -> Schema:
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"columns": {"job": {"type": "categorical", "taxonomy": taxonomy}}}),
        encoding="utf-8",
    )
    return Schema.from_json(path)


def test_the_schema_keeps_inline_taxonomies(tmp_path: Path) -> None:
    assert _schema(tmp_path, ["clerk", "nurse"])["job"].taxonomy == ["clerk", "nurse"]
    assert _schema(tmp_path, JOBS)["job"].taxonomy == JOBS
    assert _schema(tmp_path, JOBS).to_dict()["columns"]["job"]["taxonomy"] == JOBS


@pytest.mark.parametrize(
    ("taxonomy", "match"),
    [
        ([], "must hold the column's public values"),
        (["clerk", 3], "must hold the column's public values"),
        ({"a": ["x"], "b": ["y"]}, "must have one root"),
        (3, "a list of the public values"),
    ],
)
def test_malformed_inline_taxonomies_are_refused(tmp_path: Path, taxonomy, match) -> None:
    with pytest.raises(ValueError, match=match):
        _schema(tmp_path, taxonomy)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    n = 60
    pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "job": rng.choice(["clerk", "manager", "nurse", "pilot"], n),
            "answer": rng.choice(["yes", "no"], n),
        }
    ).to_parquet(tmp_path / "in.parquet")
    schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "job": {"type": "categorical", "taxonomy": JOBS},
            "answer": {"type": "categorical", "taxonomy": ["yes", "no"]},
        }
    }
    (tmp_path / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "command",
    [
        ["ir-dp", "--k", "5", "--epsilon", "2"],
        ["mdav-dp", "--k", "10", "--epsilon", "2"],
        ["mdav", "--k", "5"],
        ["diffgen", "--target", "answer", "--steps", "2", "--epsilon", "2"],
        ["randomized-response", "--column", "answer", "--epsilon", "1"],
    ],
)
def test_cli_commands_read_inline_taxonomies(files: Path, command: list[str]) -> None:
    out = files / "out.parquet"
    argv = ["release", command[0], str(files / "in.parquet"), "-o", str(out), "--quiet"]
    argv += ["--schema", str(files / "s.json"), *command[1:]]
    if command[0] != "mdav":  # the only deterministic one
        argv += ["--seed", "1"]
    assert main(argv) == 0
    released = pd.read_parquet(out)
    if "job" in released and command[0] != "diffgen":
        assert set(released["job"]) <= {"clerk", "manager", "nurse", "pilot"}
    if "answer" in released:
        assert set(released["answer"]) <= {"yes", "no"}


def test_python_functions_take_the_same_forms(files: Path) -> None:
    table = pd.read_parquet(files / "in.parquet")
    for method in (dpfast.ir_dp, dpfast.mdav_dp):
        by_tree = method(
            table[["job"]],
            k=5,
            epsilon=2.0,
            taxonomies={"job": Taxonomy.from_mapping(JOBS)},
            seed=4,
        )
        by_mapping = method(table[["job"]], k=5, epsilon=2.0, taxonomies={"job": JOBS}, seed=4)
        pd.testing.assert_frame_equal(by_tree.data, by_mapping.data)
    flat = dpfast.mdav(table[["answer"]], k=5, taxonomies={"answer": ["yes", "no"]})
    assert set(flat.data["answer"]) <= {"yes", "no"}
