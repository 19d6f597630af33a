"""MkDocs hooks of the documentation site (``mkdocs.yml`` names this file under ``hooks:``).

- The command-line reference, generated from dpfast's argparse definitions: a page holding
  the line ``<!-- dpfast-cli-reference -->`` gets, in its place, one section per command
  with the command's ``--help`` text, so that the reference cannot drift from the parser.
- Links from a page to a repository file outside ``docs/`` (``../benchmarks/results/...``)
  become the file's repository path in code type, since the site does not serve it. A
  link to a file that does not exist is left alone, so that the strict build fails on it.
- The docstrings' Sphinx roles (``:class:`~dpfast.Release```, ``:func:`sse```) become
  mkdocstrings cross-references (``[`Release`][dpfast.Release]``) where the API reference
  renders their target, and code (```sse```) where it does not: :class:`SphinxRoles`, a
  Griffe extension that ``mkdocs.yml`` loads, rewrites each docstring as it is read, and
  the strict build fails on a cross-reference that does not resolve. A page that still
  shows a raw role fails the build too.

``tests/test_docs.py`` runs all three without MkDocs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import logging
import os
import re
from collections.abc import Iterator
from functools import cache
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


# -- Sphinx roles in docstrings ---------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: A Sphinx cross-reference role: ``:class:`~dpfast.Release```, ``:meth:`text <target>```.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(?P<body>[^`]+)`")

#: A role as the site shows it when nothing converted it: the role's name before the code.
RAW_ROLE_HTML = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):<code>")

_MISSING = object()


def _key(value: Any) -> tuple[str, str] | None:
    """Return what identifies a module, class, function or property, wherever it is bound."""
    if isinstance(value, (classmethod, staticmethod)) or inspect.ismethod(value):
        value = value.__func__
    if isinstance(value, property):
        value = value.fget
    if inspect.ismodule(value):
        return ("module", value.__name__)
    if inspect.isclass(value) or inspect.isfunction(value):
        return (value.__module__, value.__qualname__)
    return None


def _lookup(dotted: str) -> Any:
    """Return the object a dotted path names (a module, then attributes), or ``_MISSING``."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            value = getattr(value, name, _MISSING)
            if value is _MISSING:
                return _MISSING
        return value
    return _MISSING


def _documented(value: Any) -> bool:
    """Whether mkdocstrings renders ``value`` as a member: it has a docstring of its own."""
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    if isinstance(value, property):
        value = value.fget
    return bool(getattr(value, "__doc__", None))


def _members(value: Any, names: list[str] | None) -> Iterator[tuple[str, Any]]:
    """Yield the public members mkdocstrings renders under ``value`` (``names``: the page's)."""
    if inspect.ismodule(value):
        if names is None:
            names = list(getattr(value, "__all__", ())) or [
                name
                for name, member in vars(value).items()
                if getattr(member, "__module__", None) == value.__name__
            ]
        for name in names:
            yield name, getattr(value, name)
    elif inspect.isclass(value):
        for name, member in vars(value).items():
            if names is None or name in names:
                yield name, member


def _directives(text: str) -> Iterator[tuple[str, list[str] | None]]:
    """Yield each ``::: path`` of an API page, with its ``members:`` list if it has one."""
    for match in re.finditer(r"^::: (\S+)\n((?:[ \t]+\S.*\n?)*)", text, flags=re.MULTILINE):
        listed = re.search(r"members:\n((?:\s+- \S+\n?)+)", match[2])
        names = re.findall(r"- (\S+)", listed[1]) if listed else None
        yield match[1], names


@cache
def rendered(docs: Path = DOCS) -> dict[tuple[str, str], str]:
    """Map each object the API reference renders to its anchor, the dotted path it shows.

    The pages under ``docs/reference/api/`` render each ``::: path`` and its public
    members that have a docstring, two levels down (a module's classes and their methods);
    an attribute documented in its class body is not seen here, so a role naming one
    becomes code.
    """
    anchors: dict[tuple[str, str], str] = {}

    def add(path: str, value: Any, names: list[str] | None, depth: int) -> None:
        key = _key(value)
        if key is None or key in anchors:
            return
        anchors[key] = path
        if depth < 2:
            for name, member in _members(value, names):
                if not name.startswith("_") and _documented(member):
                    add(f"{path}.{name}", member, None, depth + 1)

    for page in sorted((docs / "reference" / "api").glob("*.md")):
        for path, names in _directives(page.read_text(encoding="utf-8")):
            add(path, _lookup(path), names, 0)
    return anchors


def _reference(body: str, owner: str, anchors: dict[tuple[str, str], str]) -> str:
    """Return the Markdown of one role's ``body`` in the docstring of ``owner``."""
    explicit = re.fullmatch(r"(?P<text>.+?)\s*<(?P<target>[^>]+)>", body)
    target = (explicit["target"] if explicit else body).strip().lstrip("~.").removesuffix("()")
    if explicit:
        text = explicit["text"]
    elif body.startswith("~"):
        text = target.rsplit(".", 1)[-1]
    else:
        text = body.lstrip(".")
    scopes = owner.split(".")
    candidates = [target] if target.startswith("dpfast.") else []  # never another package
    candidates += [f"{'.'.join(scopes[:n])}.{target}" for n in range(len(scopes), 0, -1)]
    for candidate in candidates:
        value = _lookup(candidate)
        key = None if value is _MISSING else _key(value)
        if key is not None and key in anchors:
            return f"[`{text}`][{anchors[key]}]"
    return f"`{text}`"


def sphinx_roles(docstring: str, owner: str, anchors: dict[tuple[str, str], str]) -> str:
    """Rewrite the Sphinx roles of ``owner``'s docstring as cross-references or code.

    ``owner`` is the dotted path where the docstring is defined: a relative target
    (``sse``, ``BudgetFile.reserve``) is looked up in the owner, then in each enclosing
    scope (class, module, package), as Python would find the name there.
    """
    return ROLE.sub(lambda match: _reference(match["body"], owner, anchors), docstring)


def on_post_page(output: str, page: Any, config: Any, **kwargs: Any) -> str:
    """Report a page that shows a raw Sphinx role (MkDocs event; the strict build fails).

    An error, not a warning: ``mkdocs build --quiet`` drops warnings before strict mode
    counts them, but not errors.
    """
    found = RAW_ROLE_HTML.findall(output)
    if found:
        logging.getLogger("mkdocs.hooks.dpfast").error(
            "%s shows %d raw Sphinx role(s) (%s...): write a cross-reference [text][path] or "
            "code instead",
            page.file.src_path,
            len(found),
            found[0],
        )
    return output


try:  # the docs extras: MkDocs loads this class through mkdocstrings (mkdocs.yml)
    import griffe
except ImportError:  # the test environment, which runs the functions above without it
    griffe = None

if griffe is not None:

    class SphinxRoles(griffe.Extension):
        """Rewrite each docstring's Sphinx roles as it is loaded (see :func:`sphinx_roles`)."""

        def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
            if obj.docstring is not None and ROLE.search(obj.docstring.value):
                obj.docstring.value = sphinx_roles(obj.docstring.value, obj.path, rendered())
