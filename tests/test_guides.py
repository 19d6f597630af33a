"""The guides cannot drift from the code: their commands parse and their snippets run.

Every ``dpfast`` command of docs/first-release.md must parse with the command line's own
parser, and the Python blocks of docs/python.md must run, in order, in one namespace, in
an empty directory. The page's snippets use tables of 2,000 rows, so this stays fast.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from dpfast.cli import build_parser

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```(\w*)\s*$")


def code_blocks(page: str, languages: set[str]) -> list[str]:
    """Return the fenced code blocks of ``docs/page`` in one of ``languages``, in order."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        fence = FENCE.match(line)
        if current is None:
            if fence and fence.group(1) in languages:
                current = []
        elif fence and not fence.group(1):
            blocks.append("\n".join(current) + "\n")
            current = None
        else:
            current.append(line)
    assert current is None, f"docs/{page}: a code block is not closed"
    return blocks


def commands(page: str) -> list[str]:
    """Return every ``dpfast`` command of the page's bash and console blocks, lines joined."""
    found = []
    for block in code_blocks(page, {"bash", "console"}):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("dpfast "):
                found.append(line)
    return found


FIRST_RELEASE = commands("first-release.md")


def test_first_release_has_its_commands():
    got = {shlex.split(line)[1] for line in FIRST_RELEASE}
    expected = {"schema", "release", "budget", "compare", "evaluate"}
    assert expected <= got


@pytest.mark.parametrize("line", FIRST_RELEASE)
def test_first_release_command_parses(line):
    parser = build_parser()  # a fresh one: a release command adds its options on first use
    try:
        parser.parse_args(shlex.split(line)[1:])
    except (SystemExit, Exception) as error:  # argparse exits; dpfast's parser raises
        pytest.fail(f"docs/first-release.md: {line!r} does not parse: {error!r}")


def test_python_guide_runs(tmp_path, monkeypatch):
    blocks = code_blocks("python.md", {"python"})
    assert blocks, "docs/python.md has no python block"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_python"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"docs/python.md, python block {number}", "exec")
        exec(code, namespace)
