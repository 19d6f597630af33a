"""The bundled UCI Adult data and its schema (no access to the original CSV files needed)."""

from __future__ import annotations

import pandas as pd
import pytest

from dpfast.datasets import ADULT_NUMERIC, adult, adult_schema_path
from dpfast.io import read_table
from dpfast.schema import Schema

COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]
# From shared/data/adult/README.md (UCI adult.data / adult.test).
ROWS = {"train": 32_561, "test": 16_281}
COMPLETE_ROWS = {"train": 30_162, "test": 15_060}
MISSING = {
    "train": {"workclass": 1_836, "occupation": 1_843, "native-country": 583},
    "test": {"workclass": 963, "occupation": 966, "native-country": 274},
}
INCOME = {"train": {"<=50K": 24_720, ">50K": 7_841}, "test": {"<=50K": 12_435, ">50K": 3_846}}


@pytest.mark.parametrize("split", ["train", "test"])
def test_shape_columns_and_dtypes(split: str) -> None:
    frame = adult(split)
    assert frame.shape == (ROWS[split], 15)
    assert list(frame.columns) == COLUMNS
    assert isinstance(frame.index, pd.RangeIndex)
    for name in COLUMNS:
        if name in ADULT_NUMERIC:
            assert frame[name].dtype == "int64", name
        else:
            assert pd.api.types.is_string_dtype(frame[name]), name


@pytest.mark.parametrize("split", ["train", "test"])
def test_missing_values_are_nulls(split: str) -> None:
    frame = adult(split)
    got = {name: int(n) for name, n in frame.isna().sum().items() if n}
    assert got == MISSING[split]
    assert not (frame.astype(str) == "?").any().any()


@pytest.mark.parametrize("split", ["train", "test"])
def test_income_counts(split: str) -> None:
    got = adult(split)["income"].value_counts().to_dict()
    assert got == INCOME[split]


@pytest.mark.parametrize("split", ["train", "test"])
def test_drop_missing(split: str) -> None:
    frame = adult(split, drop_missing=True)
    assert len(frame) == COMPLETE_ROWS[split]
    assert not frame.isna().any().any()
    assert isinstance(frame.index, pd.RangeIndex)
    assert frame.index[-1] == COMPLETE_ROWS[split] - 1


def test_values_spot_check() -> None:
    first = adult("train").iloc[0]
    assert first["age"] == 39
    assert first["workclass"] == "State-gov"
    assert first["fnlwgt"] == 77516
    assert first["income"] == "<=50K"


def test_bad_split() -> None:
    with pytest.raises(ValueError, match='split must be "train" or "test"'):
        adult("validation")


def test_drop_missing_must_be_bool() -> None:
    with pytest.raises(TypeError, match="drop_missing must be True or False"):
        adult("train", drop_missing="yes")  # type: ignore[arg-type]


def test_schema_bounds_are_the_public_ones() -> None:
    schema = Schema.from_json(adult_schema_path())
    assert schema.names == COLUMNS
    assert schema.protected_numeric() == list(ADULT_NUMERIC)
    assert schema.bounds() == {
        "age": (17, 90),
        "fnlwgt": (0, 1_500_000),
        "education-num": (1, 16),
        "capital-gain": (0, 99_999),
        "capital-loss": (0, 4_356),
        "hours-per-week": (1, 99),
    }
    assert schema.protected_categorical() == []


@pytest.mark.parametrize("split", ["train", "test"])
def test_data_lie_within_schema_bounds(split: str) -> None:
    frame = adult(split)
    for name, (lower, upper) in Schema.from_json(adult_schema_path()).bounds().items():
        assert frame[name].between(lower, upper).all(), name


@pytest.mark.parametrize("split", ["train", "test"])
def test_schema_matches_the_parquet_file(split: str) -> None:
    path = adult_schema_path().parent / f"adult_{split}.parquet"
    table = read_table(path)
    assert Schema.from_json(adult_schema_path()).check_table(table) is table
