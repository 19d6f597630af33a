"""MkDocs hooks of the documentation site (``mkdocs.yml`` names this file under ``hooks:``).

- The command-line reference, generated from dpfast's argparse definitions: a page holding
  the line ``<!-- dpfast-cli-reference -->`` gets, in its place, one section per command
  with the command's ``--help`` text, so that the reference cannot drift from the parser.
- Links from a page to a repository file outside ``docs/`` (``../benchmarks/results/...``)
  become the file's repository path in code type, since the site does not serve it. A
  link to a file that does not exist is left alone, so that the strict build fails on it.

``tests/test_docs.py`` runs both without MkDocs.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARKER = "<!-- dpfast-cli-reference -->"
WIDTH = 88  # the help text's width, whatever the terminal that builds the site


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("dpfast",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Yield ``(command path, parser)`` for ``parser`` and every subcommand, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*path, name))


def cli_reference() -> str:
    """Return the Markdown reference of every ``dpfast`` command, from its parser."""
    from dpfast.cli import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        sections = []
        for path, parser in commands(build_parser()):
            title = " ".join(path)
            level = "#" * min(len(path) + 1, 4)
            text = parser.format_help().rstrip()
            sections.append(f"{level} `{title}`\n\n```text\n{text}\n```\n")
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(sections)


_LINK = re.compile(r"\[(?P<text>[^\]]+)\]\((?P<target>\.\./[^)#\s]+)(?P<anchor>#[^)\s]*)?\)")


def repository_links(markdown: str, page: str, docs: Path) -> str:
    """Rewrite ``page``'s links to existing repository files outside ``docs`` as paths.

    ``page`` is the page's path relative to ``docs``; ``[text](../x/y.md)`` becomes
    ``text (`x/y.md` in the repository)``.
    """
    docs = docs.resolve()
    root = docs.parent
    here = (docs / page).parent

    def rewrite(match: re.Match[str]) -> str:
        target = (here / match["target"]).resolve()
        if target.is_relative_to(docs) or not target.is_relative_to(root) or not target.exists():
            return match[0]
        return f"{match['text']} (`{target.relative_to(root).as_posix()}` in the repository)"

    return _LINK.sub(rewrite, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, **kwargs: Any) -> str:
    """Generate the CLI reference and rewrite repository links (MkDocs event)."""
    markdown = repository_links(markdown, page.file.src_path, Path(config["docs_dir"]))
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return markdown
