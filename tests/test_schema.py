"""Schema files: parsing, defaults, every error, and checking a table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dpfast.schema import ColumnSpec, Schema

EXAMPLE = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "hours-per-week": {"type": "integer", "bounds": [1, 99]},
        "salary": {"type": "float", "bounds": [0, 1e6], "description": "codebook"},
        "occupation": {"type": "categorical"},
        "id": {"type": "string", "protect": False},
    }
}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def one_line_error(data: Any, match: str, base_dir: Path | None = None) -> str:
    with pytest.raises(ValueError, match=match) as info:
        Schema.from_dict(data, base_dir=base_dir)
    message = str(info.value)
    assert "\n" not in message
    return message


def columns(**entries: Any) -> dict[str, Any]:
    return {"columns": entries}


# -- parsing and defaults ------------------------------------------------------------------


def test_example_parses_with_defaults() -> None:
    schema = Schema.from_dict(EXAMPLE)
    assert schema.names == ["age", "hours-per-week", "salary", "occupation", "id"]
    assert schema["age"] == ColumnSpec("age", "integer", (17, 90), True, None, None)
    assert schema["salary"].bounds == (0.0, 1e6)
    assert schema["salary"].description == "codebook"
    assert schema["occupation"].protect is True
    assert schema["id"].protect is False
    assert schema.protected_numeric() == ["age", "hours-per-week", "salary"]
    assert schema.protected_categorical() == ["occupation"]
    assert schema.unprotected() == ["id"]
    assert schema.bounds() == {"age": (17, 90), "hours-per-week": (1, 99), "salary": (0.0, 1e6)}
    assert len(schema) == 5
    assert "age" in schema
    assert "nope" not in schema


def test_integer_bounds_stay_int_and_float_bounds_become_float() -> None:
    schema = Schema.from_dict(
        columns(a={"type": "integer", "bounds": [0.0, 5.0]}, b={"type": "float", "bounds": [0, 5]})
    )
    got_a, got_b = schema["a"].bounds, schema["b"].bounds
    assert got_a == (0, 5)
    assert all(type(v) is int for v in got_a)  # type: ignore[union-attr]
    assert all(type(v) is float for v in got_b)  # type: ignore[union-attr]


def test_column_spec_is_frozen() -> None:
    spec = Schema.from_dict(EXAMPLE)["age"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.bounds = (0, 1)  # type: ignore[misc]


def test_unprotected_numeric_needs_no_bounds_and_is_not_in_bounds() -> None:
    schema = Schema.from_dict(
        columns(
            a={"type": "float", "protect": False},
            b={"type": "integer", "bounds": [0, 9], "protect": False},
        )
    )
    assert schema.protected_numeric() == []
    assert schema.bounds() == {}
    assert schema["b"].bounds == (0, 9)


def test_equal_bounds_are_allowed() -> None:
    assert Schema.from_dict(columns(a={"type": "float", "bounds": [3, 3]})).bounds() == {
        "a": (3.0, 3.0)
    }


def test_from_json_and_round_trip(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", json.dumps(EXAMPLE))
    schema = Schema.from_json(path)
    assert schema.source == str(path)
    again = Schema.from_dict(schema.to_dict())
    assert list(again) == list(schema)


def test_taxonomy_is_resolved_against_schema_directory(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    write(tmp_path / "h" / "occupation.csv", "Sales;White-collar;*\n")
    path = write(
        tmp_path / "s.json",
        json.dumps(columns(occupation={"type": "categorical", "taxonomy": "h/occupation.csv"})),
    )
    got = Schema.from_json(path)["occupation"].taxonomy
    assert got == tmp_path / "h" / "occupation.csv"


def test_taxonomy_from_dict_uses_base_dir(tmp_path: Path) -> None:
    write(tmp_path / "t.csv", "a;*\n")
    schema = Schema.from_dict(
        columns(c={"type": "categorical", "taxonomy": "t.csv"}), base_dir=tmp_path
    )
    assert schema["c"].taxonomy == tmp_path / "t.csv"


def test_version_1_is_accepted() -> None:
    assert Schema.from_dict({"version": 1, "description": "x", **EXAMPLE}).description == "x"


# -- errors ------------------------------------------------------------------------------


def test_bad_json_reports_line_number(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", '{\n  "columns": {\n    "age": {"type": "integer",}\n}}')
    with pytest.raises(ValueError, match=r"not valid JSON: .* at line 3, column \d+") as info:
        Schema.from_json(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist; check the path"):
        Schema.from_json(tmp_path / "missing.json")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        Schema.from_json(tmp_path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b'{"columns": {"\xff": {}}}')
    with pytest.raises(ValueError, match="not UTF-8"):
        Schema.from_json(path)


def test_duplicate_column_in_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.json",
        '{"columns": {"a": {"type": "string", "protect": false},'
        ' "a": {"type": "string", "protect": false}}}',
    )
    with pytest.raises(ValueError, match="repeats the key 'a'"):
        Schema.from_json(path)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([1, 2], "top level must be a JSON object"),
        ({}, 'missing "columns"'),
        ({"columns": {}}, "non-empty object"),
        ({"columns": [{"name": "a"}]}, "non-empty object"),
        ({"colums": {}}, "unknown top-level key 'colums'; did you mean 'columns'"),
        ({"version": 2, **EXAMPLE}, "unsupported schema version 2"),
        ({"description": 5, **EXAMPLE}, "description must be a string"),
    ],
)
def test_top_level_errors(data: Any, match: str) -> None:
    one_line_error(data, match)


def test_unknown_type_names_column_and_suggests() -> None:
    message = one_line_error(
        columns(age={"type": "int", "bounds": [0, 1]}),
        r"column 'age' has unknown type 'int'; did you mean 'integer'",
    )
    assert "'float'" in message


def test_type_must_be_given() -> None:
    one_line_error(columns(age={"bounds": [0, 1]}), "column 'age' has no \"type\"")


def test_type_must_be_a_string() -> None:
    one_line_error(columns(age={"type": 3}), "unknown type a number")


def test_column_entry_must_be_object() -> None:
    one_line_error(columns(age="integer"), "column 'age' must map to an object")


def test_unknown_column_key_suggests() -> None:
    one_line_error(
        columns(age={"type": "integer", "bound": [0, 1]}),
        "column 'age' has unknown key 'bound'; did you mean 'bounds'",
    )


def test_missing_bounds_on_protected_numeric() -> None:
    message = one_line_error(
        columns(age={"type": "integer"}),
        "column 'age' is a protected integer column without bounds",
    )
    assert '"protect": false' in message


def test_protect_false_is_never_promised_to_copy_a_column_unchanged() -> None:
    # the DP methods leave unprotected columns out by default (--unprotected drop): the
    # messages point to what each method does instead of promising a copy
    for entry in ({"type": "integer"}, {"type": "string", "protect": True}):
        message = one_line_error(columns(age=entry), '"protect": false to leave it unprotected')
        assert "unchanged" not in message and '"Columns not protected"' in message
    documented = (Path(__file__).parents[1] / "docs" / "schema.md").read_text()
    assert "copies it to the output unchanged" not in documented
    assert "## Columns not protected" in documented or "### Columns not protected" in documented


def test_lower_greater_than_upper() -> None:
    one_line_error(
        columns(age={"type": "integer", "bounds": [90, 17]}),
        r"column 'age': lower bound 90 is greater than upper bound 17; "
        r"write them as \[17, 90\]",
    )


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_bounds(bad: float) -> None:
    one_line_error(
        columns(x={"type": "float", "bounds": [0, bad]}), "column 'x': bounds must be finite"
    )


def test_non_finite_bounds_from_json_literals(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.json", '{"columns": {"x": {"type": "float", "bounds": [0, Infinity]}}}'
    )
    with pytest.raises(ValueError, match="bounds must be finite"):
        Schema.from_json(path)


@pytest.mark.parametrize(
    "bounds", [[1], [1, 2, 3], "0-9", ["0", "9"], [True, 5], None, {"lower": 0, "upper": 1}]
)
def test_malformed_bounds(bounds: Any) -> None:
    one_line_error(
        columns(x={"type": "float", "bounds": bounds}),
        r"column 'x': \"bounds\" must be a list of two numbers",
    )


def test_integer_column_needs_whole_bounds() -> None:
    one_line_error(
        columns(age={"type": "integer", "bounds": [16.5, 90]}),
        "column 'age' is integer but its bounds .* are not whole numbers",
    )


def test_bounds_on_categorical() -> None:
    one_line_error(
        columns(c={"type": "categorical", "bounds": [0, 1]}),
        "column 'c' is categorical, but only integer and float columns take",
    )


def test_protect_must_be_bool() -> None:
    one_line_error(
        columns(c={"type": "categorical", "protect": "no"}),
        "column 'c': \"protect\" must be true or false",
    )


def test_string_columns_cannot_be_protected() -> None:
    one_line_error(
        columns(name={"type": "string", "protect": True}),
        "column 'name' is a string column, which no release method can protect",
    )


def test_taxonomy_only_on_categorical(tmp_path: Path) -> None:
    one_line_error(
        columns(a={"type": "integer", "bounds": [0, 1], "taxonomy": "t.csv"}),
        'only categorical columns take a "taxonomy"',
        tmp_path,
    )


def test_taxonomy_must_exist(tmp_path: Path) -> None:
    message = one_line_error(
        columns(c={"type": "categorical", "taxonomy": "nope.csv"}),
        "column 'c': taxonomy file .* does not exist",
        tmp_path,
    )
    assert str(tmp_path / "nope.csv") in message


def test_taxonomy_must_be_a_path() -> None:
    one_line_error(
        columns(c={"type": "categorical", "taxonomy": 3}),
        '"taxonomy" must be the path of a hierarchy file',
    )


def test_column_description_must_be_text() -> None:
    one_line_error(
        columns(c={"type": "categorical", "description": 1}), 'description" must be a string'
    )


# -- transforms and epsilon weights (docs/schema.md) -------------------------------------------


def test_transforms_and_weights_parse_round_trip_and_default_to_none() -> None:
    schema = Schema.from_dict(
        columns(
            revenue={"type": "float", "bounds": [0, 1e7], "transform": "log", "epsilon_weight": 3},
            profit={"type": "float", "bounds": [-1e6, 1e6], "transform": "asinh"},
            age={"type": "integer", "bounds": [17, 90]},
            job={"type": "categorical", "taxonomy": ["a", "b"], "epsilon_weight": 0.5},
        )
    )
    assert schema.transforms() == {"revenue": "log", "profit": "asinh"}
    assert schema["age"].transform is None and schema["age"].epsilon_weight is None
    assert schema.epsilon_weights(["revenue", "age", "job"]) == {
        "revenue": 3.0,
        "age": 1.0,
        "job": 0.5,
    }
    assert schema.epsilon_weights(["profit", "age"]) is None  # no weight among them
    again = Schema.from_dict(schema.to_dict())
    assert list(again) == list(schema)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        (
            {"type": "float", "bounds": [-1, 1], "transform": "log"},
            r'column \'x\': "transform": "log" \(log1p\) needs values >= 0, but the lower '
            r'bound is -1.0; use "asinh"',
        ),
        (
            {"type": "float", "bounds": [0, 1], "transform": "sqrt"},
            r'column \'x\': "transform" must be "log" .* got \'sqrt\'$',
        ),
        (
            {"type": "float", "bounds": [0, 1], "transform": "Log"},
            r"did you mean 'log'\?$",
        ),
        ({"type": "float", "bounds": [0, 1], "transform": 1}, r"got a number$"),
        (
            {"type": "categorical", "transform": "log"},
            r"column 'x' is a protected categorical, but only protected integer and float "
            'columns take a "transform"',
        ),
        (
            {"type": "float", "protect": False, "transform": "log"},
            r"column 'x' is not protected, but only protected integer and float",
        ),
        (
            {"type": "float", "bounds": [0, 1], "epsilon_weight": 0},
            r'"epsilon_weight" must be a finite number > 0, got 0; .* "protect": false',
        ),
        ({"type": "float", "bounds": [0, 1], "epsilon_weight": -1}, r"got -1;"),
        ({"type": "float", "bounds": [0, 1], "epsilon_weight": True}, r"got a boolean$"),
        ({"type": "float", "bounds": [0, 1], "epsilon_weight": "2"}, r"got a string$"),
        (
            {"type": "string", "protect": False, "epsilon_weight": 2},
            r"column 'x' is not protected, but only protected columns take an",
        ),
    ],
)
def test_bad_transforms_and_weights_are_refused(entry: dict[str, Any], match: str) -> None:
    one_line_error(columns(x=entry), match)


def test_duplicate_names_in_constructor() -> None:
    spec = ColumnSpec("a", "string", None, False, None)
    with pytest.raises(ValueError, match="declared twice"):
        Schema([spec, spec])


def test_error_messages_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", json.dumps(columns(age={"type": "integer"})))
    with pytest.raises(ValueError, match=rf"^{tmp_path}.*s\.json: column 'age'"):
        Schema.from_json(path)


# -- check_table ---------------------------------------------------------------------------


def table(**cols: Any) -> pa.Table:
    return pa.table(cols)


SMALL = Schema.from_dict(
    columns(
        age={"type": "integer", "bounds": [0, 120]},
        score={"type": "float", "bounds": [0, 1]},
        job={"type": "categorical", "protect": False},
    )
)


def test_check_table_accepts_matching_table() -> None:
    data = table(age=[30, 40], score=[0.5, 0.25], job=["a", "b"], extra=[1, 2])
    assert SMALL.check_table(data) is data


def test_check_table_missing_column_suggests_name() -> None:
    data = table(Age=[30], score=[0.5], job=["a"])
    with pytest.raises(
        ValueError,
        match="declares column\\(s\\) 'age' that the input does not have; did you mean 'Age'",
    ) as info:
        SMALL.check_table(data)
    assert "\n" not in str(info.value)


def test_check_table_numeric_column_must_be_numeric() -> None:
    data = table(age=["thirty"], score=[0.5], job=["a"])
    with pytest.raises(ValueError, match=r"column 'age' is declared integer .* but holds string"):
        SMALL.check_table(data)


def test_check_table_bool_is_not_numeric() -> None:
    data = table(age=[1], score=[True], job=["a"])
    with pytest.raises(ValueError, match=r"column 'score' is declared float .* holds bool"):
        SMALL.check_table(data)


def test_check_table_integer_column_with_fractions() -> None:
    data = table(age=[30.0, 40.5], score=[0.5, 0.5], job=["a", "b"])
    with pytest.raises(
        ValueError,
        match=r"column 'age' is declared integer .* holds 40.5 at "
        'row 1; declare it "float"',
    ):
        SMALL.check_table(data)


def test_check_table_casts_whole_floats_declared_integer() -> None:
    data = table(age=[30.0, 40.0], score=[0.5, 0.5], job=["a", "b"])
    got = SMALL.check_table(data)
    assert got.schema.field("age").type == pa.int64()
    assert got.column("age").to_pylist() == [30, 40]
    assert data.schema.field("age").type == pa.float64()  # the input is untouched


def test_check_table_casts_integers_declared_float() -> None:
    data = table(age=[30], score=[1], job=["a"])
    got = SMALL.check_table(data)
    assert got.schema.field("score").type == pa.float64()
    assert got.column("score").to_pylist() == [1.0]


def test_check_table_nulls_in_protected_column() -> None:
    data = table(age=[30, None, 50], score=[0.1, 0.2, 0.3], job=["a", "b", "c"])
    with pytest.raises(
        ValueError, match="protected column 'age' has 1 missing value\\(s\\) \\(first at row 1\\)"
    ):
        SMALL.check_table(data)


def test_check_table_nulls_in_unprotected_columns_are_fine() -> None:
    schema = Schema.from_dict(
        columns(
            n={"type": "integer", "protect": False}, c={"type": "categorical", "protect": False}
        )
    )
    data = table(n=pa.array([1, None], pa.int64()), c=["x", None])
    assert schema.check_table(data) is data


def test_check_table_categorical_columns_accept_any_type() -> None:
    schema = Schema.from_dict(columns(c={"type": "categorical", "protect": False}))
    data = pa.table({"c": pa.array(["a", "b"]).dictionary_encode()})
    assert schema.check_table(data) is data


def test_string_columns_default_to_unprotected() -> None:
    assert Schema.from_dict(columns(name={"type": "string"}))["name"].protect is False


def test_every_placeholder_is_reported_at_once_before_other_errors():
    data = {
        "columns": {
            "age": {"type": "integer", "bounds": "FILL IN: public bounds"},
            "id": {"type": "integer", "protect": False},
            "job": {"type": "categorical", "taxonomy": "FILL IN: public values"},
            "pay": {"type": "float", "bounds": "FILL IN"},
            "bad": {"type": "float", "bounds": [5, 1]},  # reported once they are filled in
        }
    }
    with pytest.raises(ValueError) as info:
        Schema.from_dict(data)
    text = str(info.value)
    assert "3 value(s) still the placeholder 'FILL IN'" in text
    assert "column 'age' \"bounds\", column 'job' \"taxonomy\", column 'pay' \"bounds\"" in text
    assert 'each "bounds" with [lower, upper] and each "taxonomy" with the column' in text
    assert "'id'" not in text and "'bad'" not in text
