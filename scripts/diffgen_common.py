"""Shared set-up of the DiffGen scripts and benchmark: Adult, its taxonomies, scaling."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfast.datasets import adult, adult_taxonomy
from dpfast.taxonomy import Taxonomy

TARGET = "income"
CLASSES = ["<=50K", ">50K"]
#: Public root intervals of Adult's numeric predictors (closed bounds; the integer root
#: interval of age is [17, 91)). See dpfast/datasets/README.md for their sources.
BOUNDS = {
    "age": (17, 90),
    "fnlwgt": (0, 1_500_000),
    "education-num": (1, 16),
    "capital-gain": (0, 99_999),
    "capital-loss": (0, 4_356),
    "hours-per-week": (1, 99),
}
#: Categorical predictors with a bundled ARX hierarchy.
ARX_COLUMNS = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "race",
    "sex",
    "native-country",
)
#: ARX ships no hierarchy for relationship: a flat one (every value under "*").
RELATIONSHIP = Taxonomy.from_mapping(
    {"*": ["Husband", "Not-in-family", "Other-relative", "Own-child", "Unmarried", "Wife"]},
    name="relationship (flat)",
)


def taxonomies() -> dict[str, Taxonomy]:
    """The taxonomies of Adult's 8 categorical predictors."""
    out = {column: adult_taxonomy(column) for column in ARX_COLUMNS}
    out["relationship"] = RELATIONSHIP
    return out


def adult_complete() -> pd.DataFrame:
    """UCI Adult training rows without missing values (30,162), categoricals as category."""
    frame = adult("train", drop_missing=True)
    for column in frame.columns:
        if frame[column].dtype == object or str(frame[column].dtype).startswith("str"):
            frame[column] = frame[column].astype("category")
    return frame


def scale_adult(
    frame: pd.DataFrame, n_rows: int, *, replace: float = 0.2, seed: int = 0
) -> pd.DataFrame:
    """Scale a table to ``n_rows`` as DiffGen's paper does.

    Each record is kept and followed by ``alpha - 1`` variations (``alpha = ceil(n_rows /
    len(frame))``, the result cut to ``n_rows``); in a variation every predictor value is
    replaced, with probability ``replace``, by a value drawn uniformly from the column's
    domain (its distinct values). The class is kept.
    """
    rng = np.random.default_rng(seed)
    alpha = -(-n_rows // len(frame))
    index = np.repeat(np.arange(len(frame)), alpha)[:n_rows]
    original = (np.arange(index.shape[0]) % alpha) == 0
    columns = {}
    for name in frame.columns:
        column = frame[name]
        values = column.to_numpy()[index]
        if name != TARGET:
            domain = np.unique(column.to_numpy())
            swap = (~original) & (rng.random(index.shape[0]) < replace)
            values = values.copy()
            values[swap] = domain[rng.integers(0, domain.shape[0], int(swap.sum()))]
        if isinstance(column.dtype, pd.CategoricalDtype):
            columns[name] = pd.Categorical(values, categories=column.cat.categories)
        else:
            columns[name] = values
    return pd.DataFrame(columns)
