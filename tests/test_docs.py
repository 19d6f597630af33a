"""The documentation site's sources agree with the code (scripts/docs builds the site).

These run without MkDocs: the generated CLI reference covers every command and option,
every page is in the navigation and every navigation entry is a page, repository links
are rewritten only where the file exists, and every API name the reference pages render
is a public name of dpfast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_holds_every_command_and_option():
    from dpfast.cli import build_parser

    hooks = _hooks()
    text = hooks.cli_reference()
    found = list(hooks.commands(build_parser()))
    names = [" ".join(path) for path, _ in found]
    # every release method, every group's command, and the top-level commands
    for expected in ("dpfast", "dpfast release ir-dp", "dpfast budget init", "dpfast evaluate"):
        assert expected in names
    for path, parser in found:
        assert f"`{' '.join(path)}`" in text, path
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in text, (path, flag)
            if isinstance(action, argparse._SubParsersAction):
                assert set(action.choices) <= {p[len(path)] for p, _ in found if len(p) > len(path)}


def test_the_reference_page_holds_the_marker_the_hook_replaces():
    hooks = _hooks()
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert hooks.MARKER in page
    assert hooks.MARKER not in hooks.on_page_markdown(
        page,
        page=type("Page", (), {"file": type("File", (), {"src_path": "reference/cli.md"})()})(),
        config={"docs_dir": str(DOCS)},
    )


def test_repository_links_become_paths_only_where_the_file_exists():
    hooks = _hooks()
    markdown = (
        "[history](../benchmarks/results/engines-history.md), "
        "[missing](../benchmarks/results/no-such-file.md), "
        "[page](budget.md), [api](../../architecture.md#layers)"
    )
    got = hooks.repository_links(markdown, "engines.md", DOCS)
    assert "history (`benchmarks/results/engines-history.md` in the repository)" in got
    assert "[missing](../benchmarks/results/no-such-file.md)" in got  # the build fails on it
    assert "[page](budget.md)" in got
    # from a page two folders down, ../../architecture.md is a page of the site
    nested = hooks.repository_links("[a](../../architecture.md)", "reference/api/x.md", DOCS)
    assert nested == "[a](../../architecture.md)"


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") :]
    return re.findall(r":\s*(\S+\.md)\s*$", nav, flags=re.MULTILINE)


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page():
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    listed = _nav_pages()
    assert sorted(set(listed)) == sorted(listed), "a page is listed twice"
    assert sorted(listed) == pages


@pytest.mark.parametrize(
    "page", sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "reference").rglob("*.md"))
)
def test_every_api_name_the_reference_renders_exists(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    for dotted in re.findall(r"^::: (\S+)", text, flags=re.MULTILINE):
        parts = dotted.split(".")
        for split in range(len(parts), 0, -1):
            try:
                value = importlib.import_module(".".join(parts[:split]))
            except ImportError:
                continue
            for name in parts[split:]:
                value = getattr(value, name)  # AttributeError: the name is gone
            break
        else:
            pytest.fail(f"{page}: {dotted} is not importable")
        assert not any(part.startswith("_") for part in parts), dotted


NARRATION = re.compile(
    r"\b(?:this|previous|next|last|earlier|later|first|second|third|fourth|fifth|sixth|"
    r"seventh|eighth|ninth|tenth) session\b|\bthe commit before\b|\bthe run before\b|"
    r"\b(?:yesterday|five days ago)\b",
    flags=re.IGNORECASE,
)


def test_prose_speaks_of_the_code_not_of_who_ran_what_when():
    # history lives in CHANGELOG.md and as data under benchmarks/results/, whose READMEs
    # name each set of runs by its date, time window and commits
    pages = [ROOT / "README.md", *DOCS.rglob("*.md"), *(ROOT / "benchmarks").rglob("*.md")]
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if NARRATION.search(line)
    ]
    assert not found, found


def _cli_examples(text: str) -> list[str]:
    """Return the ``dpfast ...`` command lines of ``text``'s bash and console blocks."""
    found = []
    for block in re.findall(r"```(?:bash|console|sh|shell)\n(.*?)```", text, flags=re.DOTALL):
        logical = ""
        for line in block.splitlines():
            line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
            line = line.strip().removeprefix("$ ")
            logical = f"{logical} {line}".strip() if logical else line
            if logical.endswith("\\"):
                logical = logical[:-1].strip()
                continue
            # a synopsis ("dpfast release ir-dp ... --dry-run", "[--mixed]", "a | b") is
            # not an example
            synopsis = any(mark in logical for mark in ("...", " | ", "[-"))
            if logical.startswith("dpfast ") and not synopsis:
                found.append(logical)
            logical = ""
    return found


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_cli_example_in_the_docs_parses(page):
    # each example names commands and flags that exist, with values of the right kind
    import shlex

    from dpfast.cli import build_parser
    from dpfast.exceptions import DPFastError

    wrong = []
    for command in _cli_examples(page.read_text(encoding="utf-8")):
        try:
            build_parser().parse_args(shlex.split(command)[1:])
        except SystemExit as stopped:  # --help and --version exit 0
            if stopped.code != 0:
                wrong.append(command)
        except DPFastError as refused:  # the parser's usage errors
            wrong.append(f"{command}: {refused}")
    assert not wrong, wrong


def test_the_cli_example_finder_sees_continued_lines_and_comments():
    text = "```bash\ndpfast release ir-dp a.csv -o b.parquet \\\n    --k 5  # note\n```\n"
    assert _cli_examples(text) == ["dpfast release ir-dp a.csv -o b.parquet --k 5"]


def _docstring_owners(hooks) -> list[tuple[str, str]]:
    """(owner, docstring) of every object the API reference renders, as Griffe reads them."""
    import inspect

    found = []
    for key, anchor in hooks.rendered().items():
        value = hooks._lookup(anchor)
        doc = (value.fget if isinstance(value, property) else value).__doc__
        if doc:
            owner = key[1] if key[0] == "module" else ".".join(key)
            found.append((owner, inspect.cleandoc(doc)))
    return found


def test_the_api_reference_renders_what_the_role_converter_links_to():
    anchors = set(_hooks().rendered().values())
    for expected in (
        "dpfast.ir_dp",
        "dpfast.BudgetFile.reserve",  # a method of a class on a page
        "dpfast.metrics.sse",  # a member of a module on a page, from its __all__
        "dpfast.engines.base.Engine.write",
        "dpfast.exceptions.PrivacyLeakWarning",  # a module without __all__: its own classes
        "dpfast.engines.parse_memory",  # a page's members: list
    ):
        assert expected in anchors, expected
    assert not any(part.startswith("_") for anchor in anchors for part in anchor.split("."))
    assert "dpfast.engines.base" not in anchors  # imported by a page's class only


def test_every_sphinx_role_of_the_api_reference_becomes_a_link_or_code():
    hooks = _hooks()
    anchors = hooks.rendered()
    links = 0
    for owner, doc in _docstring_owners(hooks):
        got = hooks.sphinx_roles(doc, owner, anchors)
        assert not hooks.ROLE.search(got), (owner, hooks.ROLE.search(got)[0])
        for target in re.findall(r"\[`[^`]+`\]\[([^\]]+)\]", got):
            assert target in anchors.values(), (owner, target)  # the strict build resolves it
            links += 1
    assert links >= 100  # 186 roles were shown raw before they were converted


@pytest.mark.parametrize(
    ("role", "owner", "expected"),
    [
        (
            ":class:`~dpfast.exceptions.PrivacyLeakWarning`",
            "dpfast.methods.ir_dp.ir_dp",
            "[`PrivacyLeakWarning`][dpfast.exceptions.PrivacyLeakWarning]",
        ),
        (":func:`dpfast.ir_dp`", "dpfast.metrics", "[`dpfast.ir_dp`][dpfast.ir_dp]"),
        # relative: found in the owner's module, as Python would find the name
        (":func:`sse`", "dpfast.metrics._loss.information_loss", "[`sse`][dpfast.metrics.sse]"),
        # relative to the owner's class
        (
            ":meth:`write`",
            "dpfast.engines.base.Engine.each_column",
            "[`write`][dpfast.engines.base.Engine.write]",
        ),
        # an explicit title, and a target shown under its public name
        (
            ":class:`the budget <dpfast.budget.BudgetFile>`",
            "dpfast.budget",
            "[`the budget`][dpfast.BudgetFile]",
        ),
        # not rendered on the site (private, or a constant, or Python's): code
        (":class:`~dpfast._release.columns.TableView`", "dpfast", "`TableView`"),
        (":data:`THRESHOLD`", "dpfast.metrics", "`THRESHOLD`"),
        (":class:`TypeError`", "dpfast.exceptions", "`TypeError`"),
        (":mod:`json`", "dpfast", "`json`"),
    ],
)
def test_a_sphinx_role_becomes(role, owner, expected):
    hooks = _hooks()
    assert hooks.sphinx_roles(f"see {role}.", owner, hooks.rendered()) == f"see {expected}."


def test_a_page_that_shows_a_raw_role_is_reported(caplog):
    hooks = _hooks()
    page = type("Page", (), {"file": type("File", (), {"src_path": "x.md"})()})()
    assert hooks.on_post_page("<p>see <code>sse</code></p>", page=page, config={})
    assert not caplog.records
    html = "<p>see :func:<code>sse</code></p>"
    assert hooks.on_post_page(html, page=page, config={}) == html
    assert "x.md shows 1 raw Sphinx role" in caplog.text


def test_the_site_config_converts_roles_wraps_signatures_and_links_to_files():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "- scripts/docs_hooks.py:SphinxRoles" in text
    assert "class SphinxRoles(" in (ROOT / "scripts" / "docs_hooks.py").read_text()
    assert re.search(r"^use_directory_urls: false$", text, flags=re.MULTILINE)
    assert re.search(r"^\s+line_length: \d+", text, flags=re.MULTILINE)
    # mkdocstrings wraps a signature only with a formatter installed
    assert (
        '"ruff'
        in re.search(r"^docs = \[.*\]$", (ROOT / "pyproject.toml").read_text(), flags=re.MULTILINE)[
            0
        ]
    )


def test_the_ci_docs_build_is_not_quiet():
    # mkdocs build --quiet drops warnings before --strict counts them: a broken link passed
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    docs = [line for line in run.splitlines() if "scripts/docs" in line and "bash" in line]
    assert docs and not any("--quiet" in line.split("#")[0] for line in docs), docs
