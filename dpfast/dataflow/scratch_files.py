"""Scratch files of 8-byte values: written whole, read by row range.

:func:`write_at` and :func:`append_array` finish a short write and raise ``ENOSPC`` on a
full disk, which two other ways of writing arrays lose (docs/engines.md, "Faults"):

* ``os.pwrite`` may write fewer bytes than given, without an error, when the disk fills
  during the call (the error comes only at the next call); a short write whose return value
  is ignored leaves a hole that reads back as zeros: a silently wrong release if no later
  write fails.
* ``ndarray.tofile`` reports a short write as ``DPFastOSError("N requested and M written")``,
  without the errno, so the command line cannot tell that the disk is full.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

__all__ = ["append_array", "chunks", "column_digest", "read_rows", "scratch_name", "write_at"]


def column_digest(name: Hashable) -> str:
    """Return a column's name as 32 hex digits: safe in a file name, whatever the name."""
    return hashlib.sha256(str(name).encode("utf-8")).hexdigest()[:32]


def scratch_name(name: Hashable, kind: str = "column") -> str:
    """Return the name of column ``name``'s scratch file of ``kind``."""
    return f"{kind}-{column_digest(name)}.bin"


def _bytes(values: np.ndarray | bytes) -> memoryview:
    """Return the bytes of ``values`` (an array in C order, or bytes) as a flat view."""
    if isinstance(values, bytes):
        return memoryview(values)
    return np.ascontiguousarray(values).data.cast("B")


def write_at(fd: int, values: np.ndarray | bytes, offset: int) -> None:
    """Write every byte of ``values`` at ``offset`` of the open file ``fd``.

    Calls ``os.pwrite`` until all is written: after a short write, the next call writes
    the rest or raises ``OSError`` (``ENOSPC`` when the disk is still full).
    """
    data = _bytes(values)
    written = 0
    while written < data.nbytes:
        written += os.pwrite(fd, data[written:], offset + written)


def append_array(file: BinaryIO, values: np.ndarray) -> None:
    """Append the bytes of ``values`` to ``file``, open for binary writing.

    The file object's ``write`` finishes short writes and raises ``OSError`` with the
    errno (``ENOSPC`` on a full disk), where ``values.tofile(file)`` would not.
    """
    file.write(_bytes(values))


def read_rows(path: Path, dtype: Any, first: int, count: int) -> np.ndarray:
    """Read rows ``[first, first + count)`` of a scratch file of 8-byte values."""
    return np.fromfile(path, dtype, count, offset=first * 8)


def chunks(n: int, rows: int) -> Iterator[tuple[int, int]]:
    """Yield ``(first, count)`` of consecutive ranges of at most ``rows`` of ``n`` rows."""
    for first in range(0, n, rows):
        yield first, min(rows, n - first)
