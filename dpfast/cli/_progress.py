"""Progress on the command line: one line, redrawn, and notes."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

__all__ = [
    "COMPILING",
    "IO_PROGRESS_DELAY",
    "ProgressLine",
    "delayed_progress",
    "note",
    "progress_line",
    "renamed",
]


#: What a progress line says while a kernel compiles: a signature the on-disk cache lacks
#: (``dpfast warm-up`` compiles the signatures the releases use).
COMPILING = "compiling (first run only)"


class ProgressLine:
    """Render ``progress(phase, done, total)`` calls on one line of a stream.

    On a terminal the line is redrawn in place, only when the phase or the whole percent
    changes. Elsewhere (a pipe, a log file) a line is printed when a phase starts, and then
    at most one every ``every`` seconds while it runs, with its percent done. With
    ``delay``, a phase shows only once it has run that many seconds: reading and writing
    files say nothing when they are quick. After :meth:`watch_compiles`, the line says
    :data:`COMPILING` while a kernel compiles (on a pipe: once), whatever the delay.
    """

    def __init__(self, stream: TextIO, every: float = 5.0, delay: float = 0.0) -> None:
        self._stream = stream
        try:
            self._tty = stream.isatty()
        except (AttributeError, ValueError):
            self._tty = False
        self._shown: tuple[str, int] | None = None
        self._width = 0
        self._every = every
        self._delay = delay
        self._started: tuple[str, float] | None = None
        self._last = 0.0
        self._lock = threading.Lock()
        self._unwatch: Callable[[], None] | None = None
        self._compiled = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        percent = 100 if total <= 0 else max(0, min(100, (100 * done) // total))
        with self._lock:
            if self._delay > 0:
                now = time.monotonic()
                if self._started is None or self._started[0] != phase:
                    self._started = (phase, now)
                if now - self._started[1] < self._delay:
                    return
            if self._tty:
                if self._shown == (phase, percent):
                    return
                self._draw(f"dpfast: {phase} {percent:3d}%")
            else:
                now = time.monotonic()
                if self._shown is None or self._shown[0] != phase:
                    self._stream.write(f"dpfast: {phase}...\n")
                elif percent != self._shown[1] and now - self._last >= self._every:
                    self._stream.write(f"dpfast: {phase} {percent}%\n")
                else:
                    return
                self._last = now
            self._shown = (phase, percent)
            self._stream.flush()

    def _draw(self, text: str) -> None:
        """Redraw the terminal's line with ``text`` (the caller holds the lock)."""
        self._stream.write("\r" + text.ljust(self._width))
        self._width = len(text)

    def watch_compiles(self) -> None:
        """Say :data:`COMPILING` while a kernel compiles, until :meth:`close`."""
        from dpfast._jit import watch_compiles

        if self._unwatch is None:
            self._unwatch = watch_compiles(
                lambda: self._compiling(True), lambda: self._compiling(False)
            )

    def _compiling(self, active: bool) -> None:
        """Show that a compile started (``active``) or ended: the phase shown comes back."""
        with self._lock:
            if self._tty:
                if active:
                    self._draw(f"dpfast: {COMPILING}")
                elif self._shown is not None:
                    phase, percent = self._shown
                    self._draw(f"dpfast: {phase} {percent:3d}%")
                else:
                    self._draw("")
            elif active and not self._compiled:
                self._stream.write(f"dpfast: {COMPILING}...\n")
            else:
                return
            self._compiled = self._compiled or active
            self._stream.flush()

    def close(self) -> None:
        """Stop watching compiles; clear the progress line (terminal only)."""
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        with self._lock:
            if self._tty and self._width:
                self._stream.write("\r" + " " * self._width + "\r")
                self._stream.flush()
                self._width = 0


def progress_line(args: argparse.Namespace) -> ProgressLine | None:
    """Return the progress line of a command (None with ``--quiet``); close it after use.

    It says :data:`COMPILING` while a kernel compiles.
    """
    if args.quiet:
        return None
    line = ProgressLine(sys.stderr)
    line.watch_compiles()
    return line


#: Reading and writing files, and a release out of core, show a phase once it has taken
#: this long.
IO_PROGRESS_DELAY = 1.0


@contextlib.contextmanager
def delayed_progress(args: argparse.Namespace) -> Iterator[ProgressLine | None]:
    """Yield a progress line that shows a phase only once it has run a second (or None).

    Reading and writing files, and a release out of core, say nothing when they are
    quick, so a refusal stays one line. A compile shows at once (:data:`COMPILING`).
    """
    if getattr(args, "quiet", False):
        yield None
        return
    line = ProgressLine(sys.stderr, delay=IO_PROGRESS_DELAY)
    line.watch_compiles()
    try:
        yield line
    finally:
        line.close()


def note(args: argparse.Namespace, text: str) -> None:
    """Print a note on stderr (unless ``--quiet``)."""
    if not args.quiet:
        print(f"dpfast: {text}", file=sys.stderr)


def renamed(
    progress: Callable[[str, int, int], None], phase: str
) -> Callable[[str, int, int], None]:
    """Return ``progress`` showing every phase as ``phase``."""
    return lambda _, done, total: progress(phase, done, total)
