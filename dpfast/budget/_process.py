"""Which process holds a reservation, and whether it still runs.

A reservation records its process's id, its host and the process's start time. On the
same host, a process that no longer exists (or is a zombie, or whose id now belongs to a
process started later) can never commit: its reservation is stale. On another host this
machine cannot tell.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

# Two readings of one process's start time differ by less than this (the boot time that
# Linux derives them from may move by a second).
_SAME_START = 1.5


@dataclass(frozen=True)
class Holder:
    """A process: its id, its host name, and when it started (seconds since the epoch).

    ``started`` is ``None`` where the system does not say (no ``/proc``).
    """

    pid: int
    host: str
    started: float | None

    @classmethod
    def this_process(cls) -> Holder:
        """Return the calling process."""
        pid = os.getpid()
        return cls(pid, socket.gethostname(), _start_time(pid))

    def is_local(self) -> bool:
        """Return whether the process ran on this host."""
        return self.host == socket.gethostname()

    def is_running(self) -> bool:
        """Return whether the process still runs; call only for a process of this host."""
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)  # signal 0: no signal, only the check that it exists
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, run by another user
        if _state(self.pid) == "Z":
            return False  # it has ended; only its exit status waits to be collected
        now = _start_time(self.pid)
        if self.started is not None and now is not None:
            return abs(now - self.started) < _SAME_START  # else: its id was given again
        return True


def _stat_fields(pid: int) -> list[str] | None:
    """Return the fields of ``/proc/PID/stat`` after the command name, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # the command name may hold spaces


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[0]


def _start_time(pid: int) -> float | None:
    """Return when process ``pid`` started, in seconds since the epoch (Linux), or None."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    try:
        lines = Path("/proc/stat").read_text(encoding="ascii").splitlines()
        boot = next(int(line.split()[1]) for line in lines if line.startswith("btime "))
        ticks = int(fields[19])  # field 22 of the line: the start, in clock ticks after boot
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
