"""docs/skewed.md cannot drift from its figures, and its code runs.

The page quotes docs/figures/skewed_guide.json, which scripts/skewed_guide.py measures
(about two minutes: not run here). Every table and quoted line the script renders from the
JSON must be on the page as rendered, and every measured percentage on the page (written
``37.6%``, without a space; constants such as "10 %" take one) must be one the script
rendered. The page's Python blocks and ``dpfast`` commands then run in order in an empty
directory, on the first 3,000 rows of Adult instead of its 32,561 (a small version, so the
test stays under about 20 seconds): the code is checked, not its figures.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "skewed.md"
FIGURES = ROOT / "docs" / "figures" / "skewed_guide.json"
FENCE = re.compile(r"^```(\w*)")
SMALL_ROWS = 3_000


def _script():
    spec = importlib.util.spec_from_file_location(
        "skewed_guide", ROOT / "scripts" / "skewed_guide.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks(text: str) -> list[tuple[str, str]]:
    """Return the page's fenced blocks as (language, body), in order."""
    blocks: list[tuple[str, str]] = []
    language: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        fence = FENCE.match(line)
        if language is None:
            if fence:
                language, body = fence.group(1), []
        elif fence and not fence.group(1):
            blocks.append((language, "\n".join(body) + "\n"))
            language = None
        else:
            body.append(line)
    assert language is None, "docs/skewed.md: a code block is not closed"
    return blocks


def _prose(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def test_the_page_quotes_every_rendered_figure():
    rendered = _script().render(json.loads(FIGURES.read_text(encoding="utf-8")))
    page = PAGE.read_text(encoding="utf-8")
    missing = [text for text in rendered if text not in page]
    assert not missing, missing


def test_every_measured_percentage_on_the_page_is_in_the_figures():
    rendered = "\n".join(_script().render(json.loads(FIGURES.read_text(encoding="utf-8"))))
    got = set(re.findall(r"[+-]?\d[\d,]*\.\d+%", _prose(PAGE.read_text(encoding="utf-8"))))
    assert got, "the page quotes no measured share"
    assert not {share for share in got if share not in rendered}


def test_the_quote_check_sees_a_changed_figure():
    # a figure measured again that the page does not follow fails the first test
    script = _script()
    figures = json.loads(FIGURES.read_text(encoding="utf-8"))
    figures["steps"][0]["measured"]["columns"]["fnlwgt"]["mean_off"] += 0.01
    page = PAGE.read_text(encoding="utf-8")
    assert any(text not in page for text in script.render(figures))


def test_the_script_steps_are_the_pages_arguments():
    # the page's final release is the script's last step
    script = _script()
    final = script.step_arguments("k100")
    assert final["k"] == 100
    assert final["remainder"] == "middle"
    assert final["transforms"] == {"capital-gain": "log"}
    assert final["epsilon_weights"] == script.WEIGHTS
    assert final["bounds"]["fnlwgt"].upper_quantile == script.DP_BOUNDS["upper_quantile"]
    assert script.step_arguments("last")["remainder"] == "last"
    assert "remainder" not in script.step_arguments("weights")


@pytest.fixture
def small_adult(monkeypatch):
    import dpfast.datasets

    full = dpfast.datasets.adult

    def head(split: str = "train", *, drop_missing: bool = False):
        return full(split, drop_missing=drop_missing).head(SMALL_ROWS)

    monkeypatch.setattr(dpfast.datasets, "adult", head)


def test_the_pages_code_runs_on_a_small_table(tmp_path, monkeypatch, small_adult, capsys):
    from dpfast.cli import main

    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_skewed"}
    ran = {"python": 0, "bash": 0}
    with warnings.catch_warnings():
        # the poor release warns that its noise dominates: that is the page's point
        warnings.simplefilter("ignore")
        for number, (language, body) in enumerate(_blocks(PAGE.read_text(encoding="utf-8")), 1):
            if language == "python":
                exec(compile(body, f"docs/skewed.md, block {number}", "exec"), namespace)
                ran["python"] += 1
            elif language == "bash":
                for line in body.replace("\\\n", " ").splitlines():
                    argv = shlex.split(line.split("  #", 1)[0])
                    assert argv[0] == "dpfast", line
                    assert main(argv[1:]) == 0, line
                    ran["bash"] += 1
    assert ran == {"python": 12, "bash": 4}
    assert namespace["good"].report.guarantee_level == "proven"
    assert len(namespace["table"]) == SMALL_ROWS
    for output in ("poor.parquet", "poor.html", "good.parquet", "good.parquet.private-report.json"):
        assert (tmp_path / output).exists(), output
