"""The least memory limit the out-of-core engine can keep to, and how columns share it."""

from __future__ import annotations

from dpfast._validation import option
from dpfast.exceptions import DPFastValueError

__all__ = ["SMALLEST_MEMORY_LIMIT", "check_memory_limit", "most_columns"]

#: The least working memory each column in flight can be held to: every pass works on at
#: least 1,024 items (values, rows, positions) at a time, of at most 96 bytes each (rows
#: placed through spill files, ``_output.py``); below it a pass would exceed the limit.
SMALLEST_MEMORY_LIMIT = 1024 * 96


def most_columns(memory: int) -> int:
    """How many columns a limit of ``memory`` bytes can run at once, each its least share."""
    return max(1, memory // SMALLEST_MEMORY_LIMIT)


def check_memory_limit(memory: int) -> int:
    """Return ``memory`` (bytes), refusing less than :data:`SMALLEST_MEMORY_LIMIT`."""
    if memory < SMALLEST_MEMORY_LIMIT:
        raise DPFastValueError(
            f"{option('memory_limit')} must be at least 96KiB ({SMALLEST_MEMORY_LIMIT:,} "
            f"bytes), got {memory:,} bytes: every pass works on at least 1,024 values of "
            "up to 96 bytes each, so a smaller limit could not be kept to; raise it"
        )
    return memory
