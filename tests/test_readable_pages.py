"""``dpfast evaluate`` and ``dpfast compare`` as a data holder reads them.

Releases of the bundled Adult data are made once through the command line: MDAV at k = 3
and 10 (not DP, rows in order), laplace (DP, rows in order), mdav-dp with ``--risk
--metrics`` and without them (DP, rows shuffled), and a copy of mdav k = 3 without its
reports. Each test reads the pages back (the standard library's HTML parser) or the
command's output: the verdict first, the map's markers and labels, rounded numbers, the
refusal of a release without reports and its override, the advice to release again, and
``--metrics`` in the private report and on the map.
"""

from __future__ import annotations

import contextlib
import html
import io
import itertools
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dpfast import cli, risk
from dpfast.compare import Candidate, evaluate
from dpfast.compare._format import percent, rounded
from dpfast.compare._rumap import Box, label_box, plot_area, ru_map_svg
from dpfast.compare._verdict import best_point, evaluation_verdict
from dpfast.datasets import adult, adult_schema_path
from dpfast.schema import Schema

N_ROWS = 1500
COLUMNS = "age,education-num,hours-per-week,capital-gain"
NUMERIC = COLUMNS.split(",")
MDAV_DP_EPSILON = 40.0
#: Significant digits a shown figure may have (docs/risk.md#evaluate).
SIGNIFICANT = 3


def _dpfast(*arguments: Any) -> int:
    return cli.main([str(a) for a in arguments])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The original Adult rows and their releases, written by the command line."""
    folder = tmp_path_factory.mktemp("readable")
    adult("train", drop_missing=True).head(N_ROWS).to_csv(folder / "adult.csv", index=False)
    common = ["--schema", adult_schema_path(), "--columns", COLUMNS, "--quiet"]
    source = folder / "adult.csv"
    for k in (3, 10):
        assert _dpfast("release", "mdav", source, "-o", folder / f"mdav{k}.csv", "--k", k,
                       *common) == 0  # fmt: skip
    assert _dpfast("release", "laplace", source, "-o", folder / "laplace.csv",
                   "--epsilon", 400, "--seed", 1, *common) == 0  # fmt: skip
    for name, extra in (("mdavdp.csv", ["--risk", "--metrics"]), ("mdavdp_plain.csv", [])):
        assert _dpfast("release", "mdav-dp", source, "-o", folder / name, "--k", 40,
                       "--epsilon", MDAV_DP_EPSILON, "--seed", 2, *extra, *common) == 0  # fmt: skip
    shutil.copy(folder / "mdav3.csv", folder / "copy.csv")  # no reports beside it
    return folder


def _evaluate(files: Path, output: Path, *releases: str, extra: tuple[Any, ...] = ()) -> int:
    return _dpfast(
        "evaluate", files / "adult.csv", *(files / r for r in releases),
        "--schema", adult_schema_path(), "--columns", COLUMNS, "-o", output, *extra,
    )  # fmt: skip


def _compare(files: Path, released: str, output: Path, *extra: Any) -> int:
    return _dpfast(
        "compare", files / "adult.csv", files / released, "--schema", adult_schema_path(),
        "--columns", COLUMNS, "-o", output, *extra,
    )  # fmt: skip


RELEASES = ("mdav3.csv", "mdav10.csv", "laplace.csv", "mdavdp.csv", "mdavdp_plain.csv")


@pytest.fixture(scope="module")
def evaluated(files: Path) -> dict[str, Any]:
    """The evaluation of every release: its page, its JSON and what the command printed."""
    page, data = files / "evaluation.html", files / "evaluation.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert _evaluate(files, page, *RELEASES) == 0
    assert _evaluate(files, data, *RELEASES, extra=("--quiet",)) == 0
    return {
        "page": Page(page.read_text(encoding="utf-8")),
        "json": json.loads(data.read_text()),
        "stdout": printed.getvalue(),
    }


class Page(HTMLParser):
    """What a page shows: the body's elements in order, its visible text, points, labels."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.source = text
        self.elements: list[tuple[str, dict[str, str]]] = []  # every start tag in the body
        self.visible: list[str] = []
        self.points: list[tuple[str, dict[str, str]]] = []
        self.labels: list[tuple[dict[str, str], str]] = []
        self._hidden = 0
        self._label: dict[str, str] | None = None
        self._in_body = "<body" not in text
        self.feed(text)
        self.close()
        block = re.search(r'<script type="application/json" id="([^"]+)">', text)
        self.data = (
            None if block is None else json.loads(text[block.end() :].split("</script>", 1)[0])
        )

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {key: value or "" for key, value in attrs}
        if tag == "body":
            self._in_body = True
            return
        if self._in_body:
            self.elements.append((tag, attributes))
        if tag in ("script", "style", "title"):
            self._hidden += 1
        if attributes.get("class") == "point":
            self.points.append((tag, attributes))
        if tag == "text" and attributes.get("class") == "point-label":
            self._label = attributes

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "title"):
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if self._label is not None:
            self.labels.append((self._label, data))
            self._label = None
        if not self._hidden:
            self.visible.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.visible).split())

    def verdict(self) -> str:
        start = self.source.index('<p class="verdict">') + len('<p class="verdict">')
        return " ".join(html.unescape(self.source[start:].split("</p>", 1)[0]).split())


def _drawn(tag: str, attributes: dict[str, str]) -> Box:
    """The box a point's marker covers, from its SVG shape."""
    if tag == "circle":
        x, y, r = (float(attributes[k]) for k in ("cx", "cy", "r"))
        return Box(x - r, y - r, x + r, y + r)
    if tag == "rect":
        x, y = float(attributes["x"]), float(attributes["y"])
        return Box(x, y, x + float(attributes["width"]), y + float(attributes["height"]))
    corners = [tuple(map(float, c.split(","))) for c in attributes["points"].split()]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    return Box(min(xs), min(ys), max(xs), max(ys))


def _significant(token: str) -> int:
    digits = token.replace(",", "").split("e")[0].replace("-", "").replace(".", "")
    return len(digits.lstrip("0"))


def _too_precise(text: str) -> list[str]:
    """Decimal numbers shown with more than SIGNIFICANT significant digits."""
    tokens = re.findall(r"-?\d[\d,]*\.\d+(?:e[+-]?\d+)?|\d(?:\.\d+)?e[+-]\d+", text)
    return [t for t in tokens if _significant(t) > SIGNIFICANT]


# -- --metrics: in the private report, and on the map ------------------------------------


def test_metrics_go_to_the_private_report_only(files):
    public = (files / "mdavdp.csv.public-report.json").read_text()
    private = json.loads((files / "mdavdp.csv.private-report.json").read_text())
    assert set(private["metrics"]["relative_error"]) == set(NUMERIC)
    assert private["metrics"]["mean_relative_error"] > 0
    assert "metrics" not in json.loads(public) and "relative_error" not in public
    plain = json.loads((files / "mdavdp_plain.csv.private-report.json").read_text())
    assert plain["metrics"] is None
    # the same seed gives the same release, with or without --risk --metrics
    assert (files / "mdavdp.csv").read_bytes() == (files / "mdavdp_plain.csv").read_bytes()


def test_a_dp_release_with_risk_and_metrics_is_on_the_default_map(files, evaluated):
    found = evaluated["json"]
    private = json.loads((files / "mdavdp.csv.private-report.json").read_text())
    points = {p["label"]: p for p in found["map"]["points"]}
    assert points["mdavdp.csv"]["utility"] == private["metrics"]["mean_relative_error"]
    assert points["mdavdp.csv"]["risk"] == private["risk"]["record_linkage"]["distance"]
    assert points["mdavdp.csv"]["kind"] == "dp"
    assert "mdavdp_plain.csv" not in points
    assert found["map"]["risk_measure"] == "record_linkage"  # the default map
    assert found["map"]["utility_measure"] == "relative_error"


FUNCTIONS = {
    "ir-dp": "ir_dp", "laplace": "laplace_dp", "individual-ranking": "individual_ranking",
    "mdav": "mdav", "mdav-dp": "mdav_dp", "k-noise": "k_noise", "k-pram": "k_pram",
    "randomized-response": "randomized_response", "diffgen": "diffgen",
}  # fmt: skip


@pytest.mark.parametrize("method", sorted(FUNCTIONS))
def test_the_commands_whose_function_takes_metrics_offer_it(method, capsys):
    import dpfast
    from dpfast._release.options import options_class

    function = getattr(dpfast, FUNCTIONS[method])
    assert cli.main(["release", method, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    takes = "metrics" in options_class(function).__optional_keys__
    assert ("--metrics" in text) is takes
    if takes:
        assert "OUTPUT.private-report.json (PRIVATE; never the public report)" in text


def test_metrics_out_of_core_is_refused_in_the_command_lines_words(files, tmp_path, capsys):
    source = tmp_path / "adult.parquet"
    pd.read_csv(files / "adult.csv").to_parquet(source)
    code = _dpfast("release", "ir-dp", source, "-o", tmp_path / "o.parquet", "--k", 10,
                   "--epsilon", 1, "--schema", adult_schema_path(), "--columns", COLUMNS,
                   "--memory-limit", "1GiB", "--metrics")  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--metrics compares the release with the original" in err
    assert [p.name for p in tmp_path.iterdir()] == ["adult.parquet"]


# -- the verdict comes first -------------------------------------------------------------


def _before_verdict(page: Page) -> list[str]:
    tags = [tag for tag, _ in page.elements]
    index = next(i for i, (tag, a) in enumerate(page.elements) if a.get("id") == "verdict")
    return tags[:index]


def test_the_evaluation_opens_with_its_verdict(evaluated):
    found = evaluated
    page = found["page"]
    assert _before_verdict(page) == ["div", "h1"]  # the PRIVATE banner and the title
    assert page.source.index('id="verdict"') < page.source.index("<svg")
    text = page.verdict()
    assert text == found["json"]["verdict"]["text"] == page.data["verdict"]["text"]
    # which releases are DP, at what ε and level, from their public reports
    assert (
        f"3 of 5 releases are differentially private: laplace.csv (laplace_dp, ε = 400, "
        f"proven); mdavdp.csv, mdavdp_plain.csv (mdav_dp, ε = {MDAV_DP_EPSILON:g}, proven)."
    ) in text
    assert "Not differentially private: mdav3.csv, mdav10.csv (mdav)." in text
    # which is best on the map: the frontier's point closest to the lower-left corner
    best = best_point(found["json"]["map"]["points"])
    assert best is not None and found["json"]["verdict"]["best"] == best["label"]
    assert f": {best['label']} (loss " in text
    assert "Not on the map: mdavdp_plain.csv" in text
    # the command prints the same paragraph
    printed = " ".join(found["stdout"].split())
    assert printed == f"Verdict (PRIVATE): {text}"


def test_the_verdict_names_the_best_and_the_trade_off():
    def point(label: str, loss: float, risk: float, dominated: bool, kind: str) -> dict[str, Any]:
        return {"label": label, "utility": loss, "risk": risk, "dominated": dominated,
                "kind": kind}  # fmt: skip

    points = [
        point("a", 0.1, 0.5, False, "not_dp"),
        point("b", 0.4, 0.1, False, "not_dp"),
        point("c", 0.5, 0.6, True, "not_dp"),
        point("d", 1.0, 0.05, False, "dp"),
    ]
    # scaled by the largest loss (1.0) and risk (0.6): a 0.85, b 0.46, d 1.0
    assert best_point(points)["label"] == "b"
    found = {"points": points, "left_out": {}, "utility_title": "u", "risk_title": "r"}
    releases = [
        {"label": p["label"], "method": "m", "epsilon": 1.0 if p["kind"] == "dp" else None,
         "guarantee_level": "proven" if p["kind"] == "dp" else "none"}
        for p in points
    ]  # fmt: skip
    text = evaluation_verdict(releases, found)["text"]
    assert "no release is best on both: a has the least information loss (0.1), d the least " \
        "risk (0.05)" in text  # fmt: skip
    assert "Best balance" in text and ": b (loss 0.4, risk 0.1)." in text
    assert "Best differentially private release on the map: d (loss 1, risk 0.05)." in text


def test_the_comparison_opens_with_its_verdict(files, tmp_path, capsys):
    output = tmp_path / "c.html"
    assert _compare(files, "mdavdp.csv", output) == 0
    printed = " ".join(capsys.readouterr().out.split())
    text = output.read_text(encoding="utf-8")
    page = Page(text)
    assert _before_verdict(page) == ["div", "h1"]
    offset = text.index('id="verdict"')
    assert offset < 2_000 < len(text) // 20  # the page is long: its plots come last
    assert offset < text.index("<img")
    verdict = page.verdict()
    assert verdict.startswith(
        f"This mdav_dp release is differentially private: ε = {MDAV_DP_EPSILON:g}, proven"
    )
    private = json.loads((files / "mdavdp.csv.private-report.json").read_text())
    on_bound = private["clamped_output"]
    share = sum(on_bound.values()) / (N_ROWS * len(on_bound))
    assert f"Released values on a bound: {percent(share)} of them" in verdict
    linkage = private["risk"]["record_linkage"]["distance"]
    assert f"Risk: {percent(linkage)} of the records are re-identified" in verdict
    assert printed == f"Verdict (PRIVATE): {verdict}"


# -- markers, labels, rounding -----------------------------------------------------------


def test_dp_and_other_points_have_their_own_markers(evaluated):
    page = evaluated["page"]
    dominated = {p["label"]: p["dominated"] for p in evaluated["json"]["map"]["points"]}
    shapes = {a["data-label"]: (tag, a["data-kind"]) for tag, a in page.points}
    assert shapes["laplace.csv"] == ("circle", "dp")
    assert shapes["mdavdp.csv"] == ("circle", "dp")
    assert shapes["mdav3.csv"] == ("rect", "not_dp")
    legend = re.findall(r'data-legend="([^"]+)"', page.source)
    assert legend[:2] == ["DP (proven)", "not DP"]
    assert {"filled: on the frontier", "hollow: dominated"} <= set(legend)
    # the table under the map gives each point's number, marker and guarantee
    symbol = "○" if dominated["laplace.csv"] else "●"  # hollow when dominated
    assert f"{symbol} laplace.csv laplace_dp, ε = 400, proven, of everything released" in page.text
    symbol = "□" if dominated["mdav3.csv"] else "■"
    assert f"{symbol} mdav3.csv mdav: NOT DP" in page.text


def test_a_release_without_reports_is_a_diamond(files, tmp_path):
    output = tmp_path / "e.json"
    assert _evaluate(files, output, "copy.csv", "mdav10.csv", extra=("--aligned", "--quiet")) == 0
    found = json.loads(output.read_text())
    assert {p["label"]: p["kind"] for p in found["map"]["points"]} == {
        "copy.csv": "unknown", "mdav10.csv": "not_dp",
    }  # fmt: skip
    svg = ru_map_svg(found["map"]["points"], risk_title="r", utility_title="u")
    assert re.search(r'<polygon points="[^"]+"[^>]*data-label="copy.csv"', svg)


def _crowd() -> list[dict[str, Any]]:
    """Twelve releases at nearly one place, and four more along the edges."""
    points = [
        {"label": f"release-{i}-with-a-long-name.csv", "number": i + 1,
         "utility": 0.20 + 0.002 * (i % 4), "risk": 0.30 + 0.003 * (i // 4),
         "dominated": False, "kind": "dp" if i % 2 else "not_dp"}
        for i in range(12)
    ]  # fmt: skip
    for i, (loss, risk_) in enumerate([(0.0, 0.0), (0.5, 1.0), (0.5, 0.0), (0.0, 1.0)]):
        points.append({"label": f"edge{i}", "number": 13 + i, "utility": loss, "risk": risk_,
                       "dominated": True, "kind": "unknown"})  # fmt: skip
    return points


def test_labels_never_overlap_each_other_nor_a_point():
    svg = ru_map_svg(_crowd(), risk_title="record linkage", utility_title="loss")
    page = Page(svg)
    boxes = [
        label_box(float(a["x"]), float(a["y"]), text, float(a["font-size"]))
        for a, text in page.labels
    ]
    assert len(boxes) == 16  # every point has its label or its number
    for first, second in itertools.combinations(boxes, 2):
        assert not first.intersects(second), (first, second)
    markers = [_drawn(tag, attributes) for tag, attributes in page.points]
    assert len(markers) == 16
    for box in boxes:
        assert box.within(plot_area())
        assert not any(box.intersects(marker) for marker in markers)
    # the same labels at one fixed offset from their points (the map's old placement)
    # would overlap: the check above can fail
    naive = []
    for tag, attributes in page.points:
        drawn = _drawn(tag, attributes)
        x, y = (drawn.left + drawn.right) / 2, (drawn.top + drawn.bottom) / 2
        naive.append(label_box(x + 8, y - 6, attributes["data-label"]))
    assert any(a.intersects(b) for a, b in itertools.combinations(naive, 2))


def test_a_crowded_label_becomes_its_number():
    points = _crowd()
    svg = ru_map_svg(points, risk_title="r", utility_title="u")
    shown = {a["data-number"]: text for a, text in Page(svg).labels}
    assert sorted(shown, key=int) == [str(p["number"]) for p in points]
    assert any(number == text for number, text in shown.items())  # a number, not a label
    assert shown["13"] == "edge0"  # an uncrowded point keeps its label


def test_labels_are_placed_the_same_way_every_time():
    points = _crowd()
    assert ru_map_svg(points, risk_title="r", utility_title="u") == ru_map_svg(
        points, risk_title="r", utility_title="u"
    )


def test_numbers_are_rounded_on_the_pages_and_in_the_summary(files, evaluated, tmp_path):
    found = evaluated
    page = found["page"]
    assert _too_precise(page.text) == []
    assert _too_precise(found["stdout"]) == []
    # the exact values are still in the data: a measure shown rounded
    point = found["json"]["map"]["points"][0]
    assert repr(point["utility"]) in page.source
    assert rounded(point["utility"]) in page.text
    output = tmp_path / "c.html"
    assert _compare(files, "laplace.csv", output, "--quiet") == 0
    compared = Page(output.read_text(encoding="utf-8"))
    assert _too_precise(compared.text) == []


def test_the_rounding_check_finds_raw_numbers():
    assert _too_precise("loss 0.0123457, risk 0.25, rows 30,162, 1.5e+06") == ["0.0123457"]


# -- a release without its reports -------------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "compare"])
def test_a_release_without_reports_is_refused(files, tmp_path, capsys, command):
    output = tmp_path / "out.html"
    if command == "evaluate":
        code = _evaluate(files, output, "mdav10.csv", "copy.csv")
    else:
        code = _compare(files, "copy.csv", output)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("dpfast: error: ") and err.count("\n") == 1
    assert "copy.csv has no public report" in err
    assert "copy its reports beside it (" in err and "copy.csv.public-report.json" in err
    assert "--aligned if row i of it is the release of row i of ORIGINAL" in err
    assert "--no-aligned if not" in err and "aligned=True" not in err
    assert list(tmp_path.iterdir()) == []


def test_aligned_says_the_rows_are_originals(files, tmp_path):
    output = tmp_path / "e.json"
    assert _evaluate(files, output, "copy.csv", extra=("--aligned", "--quiet")) == 0
    found = json.loads(output.read_text())["releases"][0]
    assert found["aligned"] is True and "--aligned" in found["alignment"]
    original, released = pd.read_csv(files / "adult.csv"), pd.read_csv(files / "copy.csv")
    assert found["risk"]["record_linkage"]["distance"] == risk.record_linkage(
        original, released, columns=NUMERIC
    )
    assert _evaluate(files, output, "copy.csv", extra=("--no-aligned", "--quiet", "--force")) == 0
    found = json.loads(output.read_text())["releases"][0]
    assert found["aligned"] is False and found["risk"]["record_linkage"] is None
    assert found["utility"]["mean_jensen_shannon"] is not None  # order-free measures stay


@pytest.mark.parametrize("flag", ["--aligned", "--linked", "--no-aligned"])
def test_compare_takes_a_release_without_reports_when_told_how_its_rows_lie(files, tmp_path, flag):
    output = tmp_path / "c.html"
    assert _compare(files, "copy.csv", output, flag, "--quiet") == 0
    page = Page(output.read_text(encoding="utf-8"))
    linked = flag != "--no-aligned"
    assert ("relative_error" in page.data["columns"]["age"]["metrics"]) is linked
    assert page.verdict().startswith(
        "Whether this release is differentially private is unknown: no public report."
    )


def test_python_evaluate_refuses_a_release_without_reports():
    table = pd.DataFrame({"age": [20, 30, 40, 50]})
    schema = Schema.from_dict({"columns": {"age": {"type": "integer", "bounds": [0, 99]}}})
    with pytest.raises(ValueError, match=r"aligned=True if row i .* aligned=False if not"):
        evaluate(table, [Candidate("copy", table)], schema=schema)
    found = evaluate(table, [Candidate("copy", table)], schema=schema, aligned=True)
    assert found.to_dict()["releases"][0]["risk"]["record_linkage"]["distance"] == 1.0


# -- advice to release again -------------------------------------------------------------


def test_advice_to_release_again_says_it_spends_epsilon_again(evaluated):
    found = evaluated["json"]
    plain = next(r for r in found["releases"] if r["label"] == "mdavdp_plain.csv")
    spends = f"which spends ε = {MDAV_DP_EPSILON:g} again"
    for reason in (
        plain["risk"]["not_measured"]["record_linkage"],
        plain["utility"]["not_measured"]["mean_relative_error"],
    ):
        assert "release it again with --" in reason and spends in reason
        assert "a second release of the same data" in reason
    assert "release it again with --risk" in plain["risk"]["not_measured"]["record_linkage"]
    assert (
        "release it again with --metrics"
        in (plain["utility"]["not_measured"]["mean_relative_error"])
    )


def test_advice_without_a_report_says_epsilon_is_spent_again(files, tmp_path):
    shuffled = tmp_path / "shuffled.csv"
    shutil.copy(files / "mdavdp_plain.csv", shuffled)
    output = tmp_path / "e.json"
    code = _dpfast("evaluate", files / "adult.csv", shuffled, "--schema", adult_schema_path(),
                   "--columns", COLUMNS, "-o", output, "--no-aligned", "--quiet")  # fmt: skip
    assert code == 0
    reason = json.loads(output.read_text())["releases"][0]["risk"]["not_measured"]["record_linkage"]
    assert "spends ε again: as much as this one spent" in reason


def test_the_python_refusal_of_a_shuffled_release_says_epsilon_is_spent_again():
    import dpfast

    table = pd.DataFrame({"age": [20, 30, 40, 50, 60, 70]})
    released = dpfast.mdav_dp(table, k=2, epsilon=3.0, bounds={"age": (0, 99)}, seed=1)
    with pytest.raises(ValueError, match=r"spends its ε = 3 again"):
        risk.record_linkage(table, released)


# -- the compare page's clamped values as shares -----------------------------------------


def test_clamped_values_are_shown_as_shares_of_the_rows(files, tmp_path):
    output = tmp_path / "c.html"
    assert _compare(files, "mdavdp.csv", output, "--quiet") == 0
    text = output.read_text(encoding="utf-8")
    private = json.loads((files / "mdavdp.csv.private-report.json").read_text())
    assert any(private["clamped_output"].values())  # the check below can fail
    section = text[text.index('<section id="clamped">') :].split("</section>", 1)[0]
    for column, count in private["clamped_output"].items():
        row = section.split(f'<tr data-column="{column}">', 1)[1].split("</tr>", 1)[0]
        cells = re.findall(r"<td([^>]*)>([^<]*)</td>", row)
        attributes, shown = cells[2]  # after the name and the input values clamped
        assert f'data-value="{float(count)!r}"' in attributes
        assert f'data-share="{count / N_ROWS!r}"' in attributes
        assert shown == f"{count:,} ({percent(count / N_ROWS)})"
