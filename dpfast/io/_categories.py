"""Categorical columns' categories: those a column's type declares, and a release's.

A pandas ordered categorical, a polars ``Enum`` and an Arrow dictionary of text marked
ordered declare their categories, in an order of their own: a release keeps them when
they hold every value of the public domain (:func:`check_declared`), and refuses them
otherwise, since categories that lack some values are those that occur in the data
(``pd.Categorical(values, ordered=True)``), and releasing them would show which occur.
Other categoricals (their categories often those that occur, in the order they occur)
take the public domain's, in its order (:func:`released_categories`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from dpfast._validation import quoted
from dpfast.exceptions import DPFastValueError

__all__ = [
    "arrow_labels",
    "check_declared",
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
            f"column {quoted(name)} is an ordered categorical (a dictionary marked ordered) whose "
            "parts hold different categories, so it has no one order to keep; give every "
            "part the same categories (one pandas CategoricalDtype, one polars Enum), or "
            "make the column text"
        )
    return [str(value) for value in first.to_pylist()]


def text_categories(categories: list[Any]) -> list[str] | None:
    """Return categories that are all text, else None (kept as the domain's labels)."""
    return categories if all(isinstance(c, str) for c in categories) else None


D = TypeVar("D", bound=Sequence[Any])


def check_declared(name: Hashable | None, declared: D | None, labels: Sequence[Any]) -> D | None:
    """Return the categories a column's type declares if they hold every label; else refuse.

    ``labels`` is the public domain the column is released in (a taxonomy's leaves,
    randomized response's domain, DiffGen's classes). Declared categories that lack some
    of them are what ``pd.Categorical(values, ordered=True)`` makes of the values that
    occur: released in their order (the others after them, as dpfast once did), their
    order would differ between neighbouring tables and show which values occur. Every
    label declared, the categories and their order are the caller's declaration, the same
    for every table; without a declaration (``None``) the domain's categories are used.
    """
    if declared is None:
        return None
    have = set(declared)
    missing = [label for label in labels if label not in have]
    if missing:
        raise DPFastValueError(
            f"{'a column' if name is None else f'column {quoted(name)}'} is an ordered "
            "categorical whose categories lack "
            f"{len(missing):,} of the {len(labels):,} values of its public domain "
            f"({quoted(missing, listed=True)}): categories that lack some values are often "
            "those that occur in the data, and releasing them in their order would show "
            "which occur. Declare every value of the domain in the column's type (pandas: "
            "pd.CategoricalDtype(domain, ordered=True); polars: pl.Enum(domain)), or make "
            "the column unordered or text: the release then takes the domain's categories"
        )
    return declared


def released_categories(
    codes: np.ndarray, labels: Sequence[Any], declared: Sequence[Any] | None
) -> tuple[list[Any], np.ndarray]:
    """Return a released categorical column's categories, and its codes among them.

    ``codes`` index ``labels`` (the public domain). Without ``declared`` categories the
    categories are ``labels``; with them (:meth:`TableData.declared_categories`, checked
    by :func:`check_declared` before the release), the declared ones in their order, so
    that the column keeps its type exactly. Neither depends on the values that occur.
    """
    if declared is None:
        return list(labels), codes
    categories = list(check_declared(None, declared, labels) or ())
    position = {value: i for i, value in enumerate(categories)}
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
