"""Bundled data sets: UCI Adult (Census Income), train and test splits.

The files are zstd-compressed Parquet copies of the UCI Adult data (CC BY 4.0; see
``README.md`` in this folder for attribution, provenance and checksums), plus a schema
file with public bounds for the numeric columns.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["ADULT_NUMERIC", "adult", "adult_schema_path"]

_HERE = Path(__file__).resolve().parent

#: The numeric columns of Adult, in file order.
ADULT_NUMERIC: tuple[str, ...] = (
    "age",
    "fnlwgt",
    "education-num",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
)


def adult(split: str = "train", *, drop_missing: bool = False) -> pd.DataFrame:
    """Load the UCI Adult (Census Income) data set.

    Parameters
    ----------
    split : {"train", "test"}
        ``"train"`` is UCI's ``adult.data`` (32,561 rows), ``"test"`` is ``adult.test``
        (16,281 rows).
    drop_missing : bool, default False
        Drop the rows with any missing value (UCI's ``?``), leaving 30,162 train or
        15,060 test rows: the subsets used by TDS, DiffGen, ARX and Sánchez et al. 2016.

    Returns
    -------
    pandas.DataFrame
        15 columns: the six numeric ones (:data:`ADULT_NUMERIC`) as int64, the others as
        strings with missing values as nulls. ``income`` is ``"<=50K"`` or ``">50K"``.
        The index is a fresh RangeIndex.

    Raises
    ------
    ValueError
        If ``split`` is not ``"train"`` or ``"test"``.

    References
    ----------
    Becker, B. & Kohavi, R. (1996). Adult [Dataset]. UCI Machine Learning Repository.
    https://doi.org/10.24432/C5XW20 (CC BY 4.0).

    Examples
    --------
    >>> from dpfast.datasets import adult
    >>> adult().shape
    (32561, 15)
    >>> adult("test", drop_missing=True).shape
    (15060, 15)
    """
    if split not in ("train", "test"):
        raise ValueError(f'split must be "train" or "test", got {split!r}')
    if not isinstance(drop_missing, bool):
        raise TypeError(f"drop_missing must be True or False, got {drop_missing!r}")
    frame = pd.read_parquet(_HERE / f"adult_{split}.parquet")
    if drop_missing:
        frame = frame.dropna().reset_index(drop=True)
    return frame


def adult_schema_path() -> Path:
    """Return the path of the bundled Adult schema (public bounds of the numeric columns).

    See ``README.md`` in this folder for where each bound comes from.

    Examples
    --------
    >>> from dpfast.datasets import adult_schema_path
    >>> adult_schema_path().name
    'adult.schema.json'
    """
    return _HERE / "adult.schema.json"
