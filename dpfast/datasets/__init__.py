"""Bundled data sets: UCI Adult (Census Income), train and test splits.

The files are zstd-compressed Parquet copies of the UCI Adult data (CC BY 4.0; see
``README.md`` in this folder for attribution, provenance and checksums), plus a schema
file with public bounds for the numeric columns, and the ARX generalization hierarchies
of Adult's categorical columns (Apache-2.0; see ``hierarchies/NOTICE``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dpfast._validation import quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError
from dpfast.taxonomy import Taxonomy

__all__ = [
    "ADULT_HIERARCHIES",
    "ADULT_NUMERIC",
    "adult",
    "adult_hierarchy_path",
    "adult_mixed_schema_path",
    "adult_schema_path",
    "adult_taxonomy",
]

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


#: Adult columns with a bundled ARX hierarchy, and the hierarchy file of each.
ADULT_HIERARCHIES: dict[str, str] = {
    "age": "adult_hierarchy_age.csv",
    "workclass": "adult_hierarchy_workclass.csv",
    "education": "adult_hierarchy_education.csv",
    "marital-status": "adult_hierarchy_marital-status.csv",
    "occupation": "adult_hierarchy_occupation.csv",
    "race": "adult_hierarchy_race.csv",
    "sex": "adult_hierarchy_sex.csv",
    "native-country": "adult_hierarchy_native-country.csv",
    "income": "adult_hierarchy_salary-class.csv",
}


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
        raise DPFastValueError(f'split must be "train" or "test", got {quoted(split)}')
    if not isinstance(drop_missing, bool):
        raise DPFastTypeError(f"drop_missing must be True or False, got {quoted(drop_missing)}")
    frame = pd.read_parquet(_HERE / f"adult_{split}.parquet")
    if drop_missing:
        frame = frame.dropna().reset_index(drop=True)
    return frame


def adult_schema_path() -> Path:
    """Return the path of the bundled Adult schema (public bounds of the numeric columns).

    See ``README.md`` in this folder for where each bound comes from.

    Returns
    -------
    pathlib.Path
        The absolute path of ``adult.schema.json`` inside the installed package (a schema
        file as docs/schema.md describes, e.g. for the CLI's ``--schema``).

    Examples
    --------
    >>> from dpfast.datasets import adult_schema_path
    >>> adult_schema_path().name
    'adult.schema.json'
    """
    return _HERE / "adult.schema.json"


def adult_mixed_schema_path() -> Path:
    """Return the path of the bundled schema of the paper's mixed Adult table.

    It protects age and hours-per-week (public bounds) and occupation and native-country
    (with their bundled taxonomies), as in Sánchez et al. (2016) §4.3, and marks every
    other column ``"protect": false``.

    Returns
    -------
    pathlib.Path
        The absolute path of ``adult_mixed.schema.json`` inside the installed package.

    Examples
    --------
    >>> from dpfast.datasets import adult_mixed_schema_path
    >>> adult_mixed_schema_path().name
    'adult_mixed.schema.json'
    """
    return _HERE / "adult_mixed.schema.json"


def adult_hierarchy_path(column: str) -> Path:
    """Return the path of the bundled ARX hierarchy of an Adult column.

    Parameters
    ----------
    column : str
        One of :data:`ADULT_HIERARCHIES` (``"income"`` gives ARX's salary-class file).

    Returns
    -------
    pathlib.Path
        The absolute path of the column's ARX hierarchy file (``leaf;level1;...;*`` per
        line) inside the installed package; :meth:`dpfast.Taxonomy.from_arx` reads it.

    Raises
    ------
    ValueError
        For a column without a hierarchy.

    Examples
    --------
    >>> from dpfast.datasets import adult_hierarchy_path
    >>> adult_hierarchy_path("occupation").name
    'adult_hierarchy_occupation.csv'
    """
    if column not in ADULT_HIERARCHIES:
        raise DPFastValueError(
            f"no bundled hierarchy for column {quoted(column)}; choose one of "
            f"{sorted(ADULT_HIERARCHIES)}"
        )
    return _HERE / "hierarchies" / ADULT_HIERARCHIES[column]


def adult_taxonomy(column: str) -> Taxonomy:
    """Load the bundled ARX hierarchy of an Adult column as a :class:`~dpfast.Taxonomy`.

    The hierarchies come from the ARX anonymization tool (Apache-2.0; see
    ``hierarchies/NOTICE`` and ``README.md`` in this folder).

    Parameters
    ----------
    column : str
        One of :data:`ADULT_HIERARCHIES`.

    Returns
    -------
    Taxonomy

    Raises
    ------
    ValueError
        For a column without a hierarchy.

    Examples
    --------
    >>> from dpfast.datasets import adult_taxonomy
    >>> countries = adult_taxonomy("native-country")
    >>> len(countries), countries.most_marginal
    (41, 'South')
    """
    return Taxonomy.from_arx(adult_hierarchy_path(column))
