"""Writing scratch files whole: a short write is finished, a full disk raises ``ENOSPC``.

Two ways of writing arrays lose a full disk (docs/engines.md, "Faults"):

* ``os.pwrite`` may write fewer bytes than it is given, without an error, when the disk
  fills up during the call; the error comes only at the next call. A short write whose
  return value is ignored leaves a hole that reads back as zeros: a silently wrong
  release if no later write fails.
* ``ndarray.tofile`` reports a short write as ``DPFastOSError("N requested and M written")``,
  without the errno, so the command line cannot tell that the disk is full.
"""

from __future__ import annotations

import os
from typing import BinaryIO

import numpy as np

__all__ = ["append_array", "write_at"]


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
