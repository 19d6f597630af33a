"""How dpfast's messages name options and show values: the words every error and warning shares.

:func:`option` spells a keyword as the caller knows it (Python ``k=1``, or the command
line's ``--k 1`` inside :func:`cli_spelling`); :func:`quoted` shows a value briefly (at
most :data:`QUOTED_CHARACTERS` characters and :data:`QUOTED_VALUES` items, never a NumPy
repr); :func:`did_you_mean` names the closest known word.
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

# -- how texts name options: Python keywords, or the CLI's flags ---------------------------

_SPELLING: ContextVar[str] = ContextVar("dpfast_spelling", default="python")

#: Keywords whose CLI flag is not the keyword with dashes.
_CLI_FLAGS = {"n_threads": "threads"}


@contextmanager
def cli_spelling() -> Iterator[None]:
    """Within the block, messages, report texts and warnings name the CLI's flags and commands.

    The command line's ``main`` opens it; a context variable, so concurrent library calls in
    other threads keep the Python spelling.
    """
    token = _SPELLING.set("cli")
    try:
        yield
    finally:
        _SPELLING.reset(token)


def in_cli() -> bool:
    """Whether texts are being spelled for the command line (inside :func:`cli_spelling`)."""
    return _SPELLING.get() == "cli"


def option(name: str, value: Any = None) -> str:
    """Name an option as the caller knows it: ``linkage="columns"`` or ``--linkage columns``.

    Examples
    --------
    >>> option("linkage", "columns")
    'linkage="columns"'
    >>> option("n_threads")
    'n_threads'
    >>> with cli_spelling():
    ...     option("linkage", "columns"), option("n_threads"), option("risk", True)
    ('--linkage columns', '--threads', '--risk')
    """
    if in_cli():
        flag = _CLI_FLAGS.get(name, name).replace("_", "-")
        if value is False:
            return "--no-" + flag
        if value is True:  # a switch
            return "--" + flag
        return "--" + flag if value is None else f"--{flag} {value}"
    if value is None:
        return name
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return f"{name}={shown}"


def method_call(name: str) -> str:
    """Name a method as the caller knows it: ``mdav_dp()`` or ``dpfast release mdav-dp``."""
    if in_cli():
        return "dpfast release " + name.replace("_", "-")
    return f"dpfast.{name}()"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``"did you mean 'x'? "`` for the choice closest to ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {quoted(close[0])}? " if close else ""


#: The most characters of one value a message shows, and the most values it lists.
QUOTED_CHARACTERS = 40
QUOTED_VALUES = 5


def quoted(value: Any, *, listed: bool = False) -> str:
    """Show a value in a message: briefly, as the caller wrote it, never as a NumPy repr.

    Text is quoted, cut past :data:`QUOTED_CHARACTERS` characters (an ellipsis and its full
    length); NumPy scalars show as the Python values they hold; a list, tuple, set, mapping
    or array shows its first :data:`QUOTED_VALUES` items and how many more there are (with
    ``listed``, joined by commas without brackets); anything else, its repr cut the same way.

    Examples
    --------
    >>> quoted("age"), quoted(np.int64(48)), quoted(np.float64(0.5)), quoted((17, 90))
    ("'age'", '48', '0.5', '(17, 90)')
    >>> quoted("x" * 1_000_000)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…' (1,000,000 characters)"
    >>> quoted(list(range(17))), quoted(["a", "b"], listed=True)
    ('[0, 1, 2, 3, 4, … and 12 more]', "'a', 'b'")
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (str, bytes)):  # an excerpt, its ellipsis inside the quotes
        shown = repr(value[:QUOTED_CHARACTERS])
        if len(value) <= QUOTED_CHARACTERS:
            return shown
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{shown[:-1]}…{shown[-1]} ({len(value):,} {unit})"
    if isinstance(value, int) and value.bit_length() > 128:  # str() of a huge int is slow
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    if isinstance(value, Mapping):
        pairs = [
            f"{quoted(k)}: {quoted(v)}" for k, v in itertools.islice(value.items(), QUOTED_VALUES)
        ]
        return "{" + join_listed(pairs, len(value)) + "}"
    if isinstance(value, np.ndarray):
        items, total = value.ravel()[:QUOTED_VALUES].tolist(), int(value.size)
    elif isinstance(value, (list, tuple, set, frozenset, range)):
        items, total = list(itertools.islice(value, QUOTED_VALUES)), len(value)
    else:
        text = repr(value)
        if len(text) <= QUOTED_CHARACTERS:
            return text
        return f"{text[:QUOTED_CHARACTERS]}… ({len(text):,} characters)"
    shown = join_listed([quoted(v) for v in items], total)
    if listed:
        return shown
    if isinstance(value, tuple):
        return f"({shown},)" if total == 1 else f"({shown})"
    return f"{{{shown}}}" if isinstance(value, (set, frozenset)) else f"[{shown}]"


def join_listed(shown: Sequence[str], total: int) -> str:
    """Join quoted items, saying how many of ``total`` are left out."""
    more = total - len(shown)
    return ", ".join(shown) + (f", … and {more:,} more" if more > 0 else "")
