"""``dpfast compare``: the private HTML page of an original table against its release.

A real ir-dp release of bundled Adult rows is made once through the command line; each
test reads the page back with the standard library's HTML parser and checks its numbers
against ``dpfast.metrics`` and the release's reports.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from dpfast import cli, metrics
from dpfast.compare import BANNER, compare_html
from dpfast.datasets import adult, adult_mixed_schema_path, adult_schema_path
from dpfast.schema import Schema
from dpfast.taxonomy import as_taxonomy

N_ROWS = 2000
MIXED = ["age", "occupation", "hours-per-week", "native-country"]
NUMERIC = ["age", "hours-per-week"]
CATEGORICAL = ["occupation", "native-country"]


class Page(HTMLParser):
    """What the tests read from a page: title, banner, images, table cells, JSON block."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.banner = ""
        self.images: list[dict[str, str]] = []
        # {section id: {row's data-column: [cell text or data-value]}}
        self.cells: dict[str, dict[str, list[str | None]]] = {}
        self.data: Any = None
        self.text: list[str] = []
        self._in: list[str] = []
        self._section = ""
        self._row: str | None = None
        self._script = ""
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {key: value or "" for key, value in attrs}
        self._in.append(tag if attributes.get("class") != "private-banner" else "banner")
        if tag == "section" and "id" in attributes:
            self._section = attributes["id"]
        elif tag == "img":
            self.images.append(attributes)
            self._in.pop()
        elif tag == "tr":
            self._row = attributes.get("data-column")
            if self._row is not None:
                self.cells.setdefault(self._section, {})[self._row] = []
        elif tag == "td" and self._row is not None:
            self.cells[self._section][self._row].append(attributes.get("data-value"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.data = json.loads(self._script)
        if self._in:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        where = self._in[-1] if self._in else ""
        if where == "title":
            self.title += data
        elif where == "banner":
            self.banner += data
        elif where == "script":
            self._script += data
        else:
            self.text.append(data)

    def value(self, section: str, column: str, index: int) -> float:
        text = self.cells[section][column][index]
        assert text is not None, f"{section}/{column} cell {index} has no data-value"
        return float(text)

    @property
    def body_text(self) -> str:
        return " ".join(" ".join(self.text).split())


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A seeded ir-dp release (via the command line) of 2000 Adult rows, mixed columns."""
    folder = tmp_path_factory.mktemp("compare")
    original = folder / "adult.csv"
    adult("train", drop_missing=True).head(N_ROWS).to_csv(original, index=False)
    released = folder / "released.csv"
    code = cli.main(
        [
            "release", "ir-dp", str(original), "-o", str(released), "--k", "25",
            "--epsilon", "4", "--schema", str(adult_mixed_schema_path()), "--seed", "7",
            "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    return {"folder": folder, "original": original, "released": released}


def run_compare(release: dict[str, Path], output: Path, *extra: str) -> int:
    """Run ``dpfast compare``; ``extra`` is the released file, then more options."""
    released = str(extra[0]) if extra else str(release["released"])
    return cli.main(
        [
            "compare", str(release["original"]), released, "--schema",
            str(adult_mixed_schema_path()), "-o", str(output), "--quiet", *extra[1:],
        ]
    )  # fmt: skip


@pytest.fixture(scope="module")
def page(release: dict[str, Path]) -> Page:
    output = release["folder"] / "report.html"
    assert run_compare(release, output) == 0
    return Page(output.read_text(encoding="utf-8"))


def test_the_page_is_marked_private(page: Page) -> None:
    assert page.banner == BANNER
    assert "PRIVATE" in page.title


def test_one_png_plot_per_compared_column(page: Page) -> None:
    assert [image["data-column"] for image in page.images] == MIXED
    for image in page.images:
        prefix = "data:image/png;base64,"
        assert image["src"].startswith(prefix)
        assert base64.b64decode(image["src"][len(prefix) :]).startswith(b"\x89PNG\r\n\x1a\n")
    kinds = {image["data-column"]: image["data-plot"] for image in page.images}
    assert all(kinds[c] == "histogram" for c in NUMERIC)
    assert all(kinds[c].startswith("bar chart") for c in CATEGORICAL)


def test_the_page_loads_nothing_from_elsewhere(release: dict[str, Path], page: Page) -> None:
    text = (release["folder"] / "report.html").read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text
    assert "<link" not in text and "<script src" not in text


def test_metrics_equal_dpfast_metrics(release: dict[str, Path], page: Page) -> None:
    original = pd.read_csv(release["original"])
    released = pd.read_csv(release["released"])
    bounds = Schema.from_json(adult_mixed_schema_path()).bounds()
    for column in NUMERIC:
        x, y = original[column].to_numpy(), released[column].to_numpy()
        expected_jsd = metrics.jensen_shannon(x, y, bounds[column])
        expected_variation = metrics.variance_variation(x, y)
        assert page.value("metrics", column, 1) == expected_jsd
        assert page.value("metrics", column, 2) == expected_variation
        assert page.data["columns"][column]["metrics"] == {
            "jensen_shannon": expected_jsd,
            "variance_variation": expected_variation,
        }
        summary = page.data["columns"][column]["summary"]
        assert summary["original"]["mean"] == pytest.approx(np.mean(x), rel=1e-12)
        assert summary["released"]["median"] == np.median(y)
    for column in CATEGORICAL:
        expected = metrics.jensen_shannon(original[column].to_numpy(), released[column].to_numpy())
        assert page.value("metrics", column, 1) == expected
        assert page.cells["metrics"][column][2] is None  # no variance for categories
    # order-free only, and the page says why
    assert "relative_error" not in page.data["columns"]["age"]["metrics"]
    assert "shuffle their rows" in page.body_text


def test_noise_scale_and_domain_come_from_the_public_report(
    release: dict[str, Path], page: Page
) -> None:
    public = json.loads(Path(f"{release['released']}.public-report.json").read_text())
    for entry in public["ledger"]:
        (column,) = entry["columns"]
        cells = page.cells["noise"][column]
        assert float(cells[2] or "nan") == entry["epsilon"]
        assert float(cells[4] or "nan") == entry["noise_scale"]
    age_width = 90 - 17
    assert page.value("noise", "age", 5) == age_width
    age_scale = next(e["noise_scale"] for e in public["ledger"] if e["columns"] == ["age"])
    assert page.value("noise", "age", 6) == age_scale / age_width
    assert page.value("noise", "occupation", 5) == len(
        as_taxonomy(Schema.from_json(adult_mixed_schema_path())["occupation"].taxonomy).domain
    )


def test_clamped_counts_come_from_the_private_report(release: dict[str, Path], page: Page) -> None:
    private = json.loads(Path(f"{release['released']}.private-report.json").read_text())
    assert any(private["clamped_output"].values())  # the check below can fail
    for column, count in private["clamped"].items():
        assert page.value("clamped", column, 1) == count
    for column, count in private["clamped_output"].items():
        assert page.value("clamped", column, 2) == count
    assert page.data["clamped_output"] == private["clamped_output"]


def test_missing_reports_are_named(release: dict[str, Path], tmp_path: Path) -> None:
    alone = tmp_path / "released.csv"
    shutil.copy(release["released"], alone)
    output = tmp_path / "report.html"
    # without its reports nothing says how its rows lie: --no-aligned says they are shuffled
    assert run_compare(release, output, str(alone), "--no-aligned") == 0
    page = Page(output.read_text(encoding="utf-8"))
    assert f"The public report not found (looked for {alone}.public-report.json)" in page.body_text
    assert f"The private report not found (looked for {alone}.private-report.json)" in (
        page.body_text
    )
    assert "noise" not in page.cells  # no table without the ledger
    assert len(page.images) == len(MIXED)  # the plots need no report


def test_reports_given_elsewhere_are_read(release: dict[str, Path], tmp_path: Path) -> None:
    alone = tmp_path / "released.csv"
    shutil.copy(release["released"], alone)
    public = tmp_path / "public.json"
    shutil.copy(f"{release['released']}.public-report.json", public)
    output = tmp_path / "report.html"
    assert run_compare(release, output, str(alone), "--public-report", str(public)) == 0
    page = Page(output.read_text(encoding="utf-8"))
    assert "age" in page.cells["noise"]
    assert "private report not found" in page.body_text


def test_columns_restricts_the_page(release: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "report.html"
    code = run_compare(release, output, str(release["released"]), "--columns", "occupation,age")
    assert code == 0
    page = Page(output.read_text(encoding="utf-8"))
    assert [image["data-column"] for image in page.images] == ["occupation", "age"]


def test_unknown_column_is_refused(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "report.html"
    assert run_compare(release, output, str(release["released"]), "--columns", "salary") == 2
    assert "'salary' are not declared in the schema" in capsys.readouterr().err
    assert not output.exists()


def test_linked_adds_the_relative_error(tmp_path: Path) -> None:
    original = tmp_path / "adult.parquet"
    adult("train", drop_missing=True).head(N_ROWS).to_parquet(original)
    released = tmp_path / "noisy.parquet"
    schema = str(adult_schema_path())
    code = cli.main(
        [
            "release", "laplace", str(original), "-o", str(released), "--epsilon", "50",
            "--schema", schema, "--columns", "age,hours-per-week",
            "--unprotected", "keep", "--seed", "1", "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    output = tmp_path / "report.html"
    code = cli.main(
        [
            "compare", str(original), str(released), "--schema", schema, "-o", str(output),
            "--columns", "age,hours-per-week", "--linked", "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    page = Page(output.read_text(encoding="utf-8"))
    x, y = pd.read_parquet(original), pd.read_parquet(released)
    bounds = Schema.from_json(schema).bounds()
    for column in ("age", "hours-per-week"):
        expected = metrics.relative_error(
            x[column].to_numpy(), y[column].to_numpy(), bounds[column]
        )
        assert page.value("metrics", column, 3) == expected
        assert page.data["columns"][column]["metrics"]["relative_error"] == expected


def test_linked_with_a_categorical_column_uses_its_taxonomy() -> None:
    schema = Schema.from_dict({"columns": {"job": {"type": "categorical", "taxonomy": {
        "*": {"A": ["a1", "a2"], "b": None}}}}})  # fmt: skip
    got = compare_html(
        pd.DataFrame({"job": ["a1", "b", "b"]}),
        pd.DataFrame({"job": ["a2", "b", "b"]}),
        schema=schema,
        linked=True,
    )
    page = Page(got)
    expected = metrics.relative_error(
        np.array(["a1", "b", "b"]), np.array(["a2", "b", "b"]), taxonomies=as_taxonomy(
            {"*": {"A": ["a1", "a2"], "b": None}})
    )  # fmt: skip
    assert page.value("metrics", "job", 3) == expected > 0


def test_linked_needs_as_many_rows() -> None:
    schema = Schema.from_dict({"columns": {"age": {"type": "integer", "bounds": [0, 100]}}})
    with pytest.raises(ValueError, match="leave out --linked"):
        compare_html(
            pd.DataFrame({"age": [1, 2, 3]}), pd.DataFrame({"age": [1, 2]}),
            schema=schema, linked=True,
        )  # fmt: skip


def test_release_metrics_are_shown_when_present(tmp_path: Path) -> None:
    from dpfast.cli._outputs import write_release
    from dpfast.methods.ir_dp import ir_dp

    data = adult("train", drop_missing=True).head(500)[NUMERIC]
    schema = Schema.from_json(adult_mixed_schema_path())
    bounds = {c: schema.bounds()[c] for c in NUMERIC}
    release = ir_dp(data, k=10, epsilon=8.0, bounds=bounds, seed=3, metrics=True)
    released = tmp_path / "released.csv"
    write_release(release.data, release.report, release.private, released)
    public = json.loads(Path(f"{released}.public-report.json").read_text())
    private = json.loads(Path(f"{released}.private-report.json").read_text())
    page = Page(
        compare_html(
            data, pd.read_csv(released), schema=schema, public_report=public,
            private_report=private,
        )
    )  # fmt: skip
    for column in NUMERIC:
        assert (
            page.value("release-metrics", column, 1)
            == (private["metrics"]["relative_error"][column])
        )


def test_diffgen_release_is_refused(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    released = tmp_path / "counts.csv"
    shutil.copy(release["released"], released)
    report = json.loads(Path(f"{release['released']}.public-report.json").read_text())
    report["method"] = "diffgen"
    Path(f"{released}.public-report.json").write_text(json.dumps(report))
    output = tmp_path / "report.html"
    assert run_compare(release, output, str(released)) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpfast: error: ") and err.count("\n") == 1
    assert "compare supports microdata releases (ir-dp, laplace, mdav-dp, ...)" in err
    assert not output.exists()


def test_missing_matplotlib_says_how_to_install_it(
    release: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    output = tmp_path / "report.html"
    assert run_compare(release, output) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpfast: error: ") and err.count("\n") == 1
    assert "pip install 'dpfast[plots]'" in err
    assert not output.exists()


def test_existing_output_is_refused_without_force(
    release: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "report.html"
    output.write_text("earlier page")
    assert run_compare(release, output) == 2
    assert "pass --force" in capsys.readouterr().err
    assert output.read_text() == "earlier page"
    assert run_compare(release, output, str(release["released"]), "--force") == 0
    assert Page(output.read_text(encoding="utf-8")).banner == BANNER


def test_no_partial_file_when_writing_fails(
    release: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = []

    def full_disk(descriptor: int) -> None:
        written.append(os.fstat(descriptor).st_size)  # the page, not yet on disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    output = tmp_path / "report.html"
    assert run_compare(release, output) == 2
    assert written and written[0] > 0  # the failure happened while writing
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_page_is_readable_by_its_owner_only(
    release: dict[str, Path], tmp_path: Path, umask: int
) -> None:
    output = tmp_path / "report.html"
    previous = os.umask(umask)
    try:
        assert run_compare(release, output) == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_data_derived_text_is_escaped() -> None:
    schema = Schema.from_dict({"columns": {
        "<b>x": {"type": "integer", "bounds": [0, 10]},
        "job": {"type": "categorical", "taxonomy": ["<script>alert(1)</script>", "$a$"]},
    }})  # fmt: skip
    original = pd.DataFrame({"<b>x": [1, 2, 3], "job": ["<script>alert(1)</script>", "$a$", "$a$"]})
    got = compare_html(original, original, schema=schema)
    assert "<script>alert" not in got and "<b>x" not in got
    assert "&lt;b&gt;x" in got
    page = Page(got)
    assert page.data["columns"]["<b>x"]["metrics"]["jensen_shannon"] == 0.0
    assert [image["data-column"] for image in page.images] == ["<b>x", "job"]
