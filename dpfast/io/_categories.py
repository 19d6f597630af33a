"""Categorical columns' categories: those a column's type declares, and a release's.

A pandas ordered categorical, a polars ``Enum`` and an Arrow dictionary of text marked
ordered declare their categories, in an order of their own: a release keeps them, the
public domain's values they lack after them (:func:`released_categories`). Other
categoricals (their categories often those that occur, in the order they occur) take the
public domain's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from dpfast.exceptions import DPFastValueError

__all__ = [
    "arrow_labels",
    "is_declared_dictionary",
    "released_categories",
    "same_dictionaries",
    "text_categories",
]


def is_declared_dictionary(arrow_type: pa.DataType) -> bool:
    """Whether an Arrow type declares its categories: a dictionary of text marked ordered."""
    return bool(
        pa.types.is_dictionary(arrow_type)
        and arrow_type.ordered
        and (
            pa.types.is_string(arrow_type.value_type)
            or pa.types.is_large_string(arrow_type.value_type)
        )
    )


def same_dictionaries(name: Hashable, dictionaries: Sequence[pa.Array]) -> list[str]:
    """Return the categories of an ordered dictionary column, the same in every part.

    Refuses parts (chunks, batches, files) whose dictionaries differ: no order of the
    column's categories would then be its own.
    """
    if not dictionaries:
        return []
    first = dictionaries[0]
    if any(not first.equals(other) for other in dictionaries[1:]):
        raise DPFastValueError(
            f"column {name!r} is an ordered categorical (a dictionary marked ordered) whose "
            "parts hold different categories, so it has no one order to keep; give every "
            "part the same categories (one pandas CategoricalDtype, one polars Enum), or "
            "make the column text"
        )
    return [str(value) for value in first.to_pylist()]


def text_categories(categories: list[Any]) -> list[str] | None:
    """Return categories that are all text, else None (kept as the domain's labels)."""
    return categories if all(isinstance(c, str) for c in categories) else None


def released_categories(
    codes: np.ndarray, labels: Sequence[Any], declared: Sequence[Any] | None
) -> tuple[list[Any], np.ndarray]:
    """Return a released categorical column's categories, and its codes among them.

    ``codes`` index ``labels`` (the public domain). Without ``declared`` categories the
    categories are ``labels``; with them (:meth:`TableData.declared_categories`), the
    declared ones in their order, then the labels not among them in the domain's order,
    so that a column whose type declares every label keeps its type exactly.
    """
    if declared is None:
        return list(labels), codes
    categories = list(declared)
    position = {value: i for i, value in enumerate(categories)}
    for label in labels:
        if label not in position:
            position[label] = len(categories)
            categories.append(label)
    lookup = np.array([position[label] for label in labels], dtype=np.int64)
    return categories, lookup[codes] if len(lookup) else codes


def arrow_labels(
    codes: np.ndarray, labels: Sequence[Any], original: pa.DataType, declared: Sequence[Any] | None
) -> pa.Array:
    """Return released codes (indices of ``labels``) as an Arrow column of the input's kind.

    A dictionary column gives a dictionary: of the input's type when it declares its
    categories (:func:`released_categories`; a 32-bit index if its own cannot hold them
    all), else of ``labels`` (int32 index, string values); any other column gives the
    labels as values of its own type.
    """
    categories, codes = released_categories(codes, labels, declared)
    if declared is not None and pa.types.is_dictionary(original):
        index = original.index_type
        if len(categories) > _largest_index(index):
            index = pa.int32()
        return pa.DictionaryArray.from_arrays(
            pa.array(codes).cast(index),
            pa.array(categories, type=original.value_type),
            ordered=True,
        )
    array = pa.DictionaryArray.from_arrays(
        pa.array(codes, type=pa.int32()), pa.array(list(categories), type=pa.string())
    )
    if pa.types.is_dictionary(original):
        return array
    try:
        return array.cast(original)
    except pa.ArrowNotImplementedError:  # e.g. string_view: no cast from a dictionary
        return array.dictionary_decode().cast(original)


def _largest_index(index: pa.DataType) -> int:
    """Return how many categories a dictionary's index type can number."""
    return int(np.iinfo(index.to_pandas_dtype()).max) + 1
