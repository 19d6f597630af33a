"""``dpfast evaluate`` and ``--risk``: releases side by side, the risk-utility map, privacy.

The releases are made once through the command line (mdav at k = 3, 5 and 10, k-noise at
k = 5, which keep the row order; ir-dp and mdav-dp, which do not, with and without
``--risk``); each test reads the evaluation back (the JSON, or the page with the standard
library's HTML parser) and checks it against ``dpfast.metrics`` and ``dpfast.risk``.
"""

from __future__ import annotations

import json
import os
import stat
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpfast import cli, compare, metrics, risk
from dpfast.cli import _evaluate_command

N_ROWS = 300
SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "hours": {"type": "float", "bounds": [0, 100]},
        "zip": {"type": "integer", "bounds": [0, 19], "protect": False},
    }
}
COLUMNS = ["age", "income", "hours"]
IN_ORDER = ["mdav3.csv", "mdav5.csv", "mdav10.csv", "knoise5.csv"]


def _dpfast(*arguments: Any) -> int:
    return cli.main([str(a) for a in arguments])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ORIGINAL, its schema and six releases of it, written by the command line."""
    folder = tmp_path_factory.mktemp("evaluate")
    rng = np.random.default_rng(0)
    age = rng.integers(17, 91, N_ROWS)
    pd.DataFrame(
        {
            "age": age,
            "income": (age * 900 + rng.gamma(2.0, 9000.0, N_ROWS)).clip(0, 200000).round(2),
            "hours": rng.uniform(10, 60, N_ROWS).round(1),
            "zip": rng.integers(0, 20, N_ROWS),
        }
    ).to_csv(folder / "people.csv", index=False)
    (folder / "s.json").write_text(json.dumps(SCHEMA))
    common = ["--schema", folder / "s.json", "--quiet"]
    for k in (3, 5, 10):
        assert _dpfast("release", "mdav", folder / "people.csv", "-o", folder / f"mdav{k}.csv",
                       "--k", k, *common) == 0  # fmt: skip
    assert _dpfast("release", "k-noise", folder / "people.csv", "-o", folder / "knoise5.csv",
                   "--k", 5, "--seed", 1, *common) == 0  # fmt: skip
    for name, extra in (("irdp.csv", []), ("irdp_risk.csv", ["--risk"])):
        assert _dpfast("release", "ir-dp", folder / "people.csv", "-o", folder / name, "--k", 5,
                       "--epsilon", 4, "--seed", 2, *extra, *common) == 0  # fmt: skip
    assert _dpfast("release", "mdav-dp", folder / "people.csv", "-o", folder / "mdavdp.csv",
                   "--k", 5, "--epsilon", 50, "--seed", 3, "--risk", *common) == 0  # fmt: skip
    return folder


def _evaluate(files: Path, output: Path, *releases: str, extra: tuple[Any, ...] = ()) -> int:
    return _dpfast(
        "evaluate", files / "people.csv", *(files / r for r in releases),
        "--schema", files / "s.json", "-o", output, "--quiet", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def evaluation(files: Path) -> dict[str, Any]:
    output = files / "evaluation.json"
    code = _evaluate(
        files, output, *IN_ORDER, "irdp.csv", "mdavdp.csv",
        extra=("--quasi-identifiers", "age,zip", "--k", 3),
    )  # fmt: skip
    assert code == 0
    found: dict[str, Any] = json.loads(output.read_text())
    return found


def _release(evaluation: dict[str, Any], label: str) -> dict[str, Any]:
    return next(r for r in evaluation["releases"] if r["label"] == label)


class Page(HTMLParser):
    """An evaluation page: its map's points, title, banner, and its JSON block."""

    def __init__(self, text: str, block: str = "dpfast-evaluation") -> None:
        super().__init__(convert_charrefs=True)
        self.points: list[dict[str, str]] = []
        self.feed(text)
        block = f'<script type="application/json" id="{block}">'
        self.data = json.loads(text.split(block, 1)[1].split("</script>", 1)[0])
        self.title = text.split("<title>", 1)[1].split("</title>", 1)[0]
        self.banner = text.split('role="alert">', 1)[1].split("</div>", 1)[0]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {key: value or "" for key, value in attrs}
        if attributes.get("class") == "point":  # a circle, rect or polygon by its guarantee
            self.points.append(attributes)


# -- what is measured -------------------------------------------------------------------


def test_releases_in_row_order_are_measured_on_the_files(files, evaluation):
    original = pd.read_csv(files / "people.csv")
    for label in IN_ORDER:
        found = _release(evaluation, label)
        released = pd.read_csv(files / label)
        assert found["aligned"] is True
        assert found["risk"]["record_linkage"] == {
            "distance": risk.record_linkage(original, released, columns=COLUMNS),
            "rank": risk.record_linkage(original, released, columns=COLUMNS, method="rank"),
        }
        errors = [
            metrics.relative_error(original[c], released[c], tuple(SCHEMA["columns"][c]["bounds"]))
            for c in COLUMNS
        ]
        assert found["utility"]["mean_relative_error"] == pytest.approx(np.mean(errors), rel=1e-12)
        x, y = original[COLUMNS].to_numpy(float), released[COLUMNS].to_numpy(float)
        upper = np.triu_indices(3, k=1)
        expected = np.mean(np.abs(np.corrcoef(x.T)[upper] - np.corrcoef(y.T)[upper]))
        assert found["utility"]["correlation_error"] == pytest.approx(expected, rel=1e-9)
        assert found["risk"]["uniqueness"]["released"] == (
            risk.uniqueness(released, ["age", "zip"], k=3).as_dict()
        )
    assert _release(evaluation, "mdav3.csv")["risk"]["uniqueness"]["original"] == (
        risk.uniqueness(original, ["age", "zip"], k=3).as_dict()
    )


def test_k_noise_is_measured_at_twice_its_delta(files, evaluation):
    private = json.loads((files / "knoise5.csv.private-report.json").read_text())
    found = _release(evaluation, "knoise5.csv")["risk"]["neighbourhood"]
    assert set(found) == set(COLUMNS)
    assert found["age"]["width"] == 2 * private["deltas"]["age"]


def test_shuffled_releases_say_why_they_have_no_row_paired_measures(evaluation):
    found = _release(evaluation, "irdp.csv")
    assert found["aligned"] is False and "linkage='columns'" in found["alignment"]
    assert found["risk"]["record_linkage"] is None
    reason = found["risk"]["not_measured"]["record_linkage"]
    assert "not paired with ORIGINAL's" in reason and "--risk" in reason
    assert found["utility"]["mean_relative_error"] is None
    assert "irdp.csv" in evaluation["map"]["left_out"]
    # order-free measures are still there
    assert found["utility"]["mean_jensen_shannon"] is not None
    assert found["utility"]["correlation_error"] is not None


def test_a_release_made_with_risk_brings_its_own_pairing(files, evaluation):
    private = json.loads((files / "mdavdp.csv.private-report.json").read_text())
    found = _release(evaluation, "mdavdp.csv")
    assert found["aligned"] is False
    assert found["risk"]["record_linkage"] == private["risk"]["record_linkage"]
    assert found["risk"]["interval_disclosure"] == private["risk"]["interval_disclosure"]
    assert "private report (--risk)" in found["risk"]["source"]


# -- the map ----------------------------------------------------------------------------


def test_the_map_has_one_point_per_release_with_both_measures(files, evaluation):
    points = evaluation["map"]["points"]
    assert [p["label"] for p in points] == IN_ORDER
    for point in points:
        found = _release(evaluation, point["label"])
        assert point["utility"] == found["utility"]["mean_relative_error"]
        assert point["risk"] == found["risk"]["record_linkage"]["distance"]
    # more aggregation: less risk, more loss
    risks = [p["risk"] for p in points[:3]]
    losses = [p["utility"] for p in points[:3]]
    assert risks == sorted(risks, reverse=True) and losses == sorted(losses)


def test_the_page_is_private_and_draws_each_point(files, tmp_path):
    output = tmp_path / "evaluation.html"
    assert _evaluate(files, output, *IN_ORDER, "mdavdp.csv",
                     extra=("--utility-measure", "jensen_shannon")) == 0  # fmt: skip
    text = output.read_text()
    page = Page(text)
    assert page.banner == compare.BANNER and "PRIVATE" in page.title
    assert page.data["report"] == "PRIVATE: not for publication"
    labels = [p["data-label"] for p in page.points]
    assert labels == [*IN_ORDER, "mdavdp.csv"]  # an order-free loss places mdav-dp too
    for point, drawn in zip(page.data["map"]["points"], page.points, strict=True):
        assert float(drawn["data-utility"]) == point["utility"]
        assert float(drawn["data-risk"]) == point["risk"]
        assert drawn["data-dominated"] == str(point["dominated"]).lower()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "Duncan" in text and "dominated" in text


@pytest.mark.parametrize("umask", [0o022, 0o000])
@pytest.mark.parametrize("name", ["e.html", "e.json"])
def test_the_output_is_readable_by_its_owner_only(files, tmp_path, umask, name):
    output = tmp_path / name
    previous = os.umask(umask)
    try:
        assert _evaluate(files, output, "mdav5.csv") == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_dominated_releases_are_marked(monkeypatch):
    monkeypatch.setitem(compare.RISK_MEASURES, "test", ("r", ("r", "v")))
    monkeypatch.setitem(compare.UTILITY_MEASURES, "test", ("u", "u"))
    releases = [
        {
            "label": name,
            "utility": {"u": u, "not_measured": {}},
            "risk": {"r": {"v": r}, "not_measured": {}},
        }
        for name, u, r in (("a", 0.1, 0.5), ("b", 0.2, 0.2), ("c", 0.3, 0.3), ("d", 0.1, 0.5))
    ]
    points, left_out = compare.map_points(releases, "test", "test")
    # c loses more and risks more than b; a and d tie, neither better than the other
    assert {p["label"]: p["dominated"] for p in points} == {
        "a": False, "b": False, "c": True, "d": False,
    }  # fmt: skip
    assert left_out == {}


def test_labels_name_the_points(files, tmp_path):
    output = tmp_path / "e.json"
    assert _evaluate(files, output, "mdav3.csv", "mdav10.csv",
                     extra=("--labels", "mdav k=3,mdav k=10")) == 0  # fmt: skip
    found = json.loads(output.read_text())
    assert [p["label"] for p in found["map"]["points"]] == ["mdav k=3", "mdav k=10"]


def test_progress_is_shown_unless_quiet(files, tmp_path, capsys):
    code = _dpfast("evaluate", files / "people.csv", files / "mdav3.csv", files / "mdav5.csv",
                   "--schema", files / "s.json", "-o", tmp_path / "e.json")  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "evaluating mdav3.csv" in err and "evaluating mdav5.csv" in err
    assert "PRIVATE" in err and "2 on the risk-utility map" in err


# -- errors, in the command line's words ------------------------------------------------


@pytest.mark.parametrize(
    ("releases", "extra", "message"),
    [
        (["mdav3.csv"], ("-o", "e.txt"), "written as .html (a page with the map) or .json"),
        (["mdav3.csv"], ("--quasi-identifiers", "age"), "--quasi-identifiers needs --k"),
        (["mdav3.csv"], ("--k", "0"), "--k must be >= 1"),
        (["mdav3.csv"], ("--p", "150"), "--p must be a percentage"),
        (["mdav3.csv", "mdav5.csv"], ("--labels", "one"), "--labels gives 1 label(s) for 2"),
        (["missing.csv"], (), "does not exist"),
        (["mdav3.csv"], ("--columns", "nope"), "'nope' are not declared in the schema"),
        (["mdav3.csv"], ("--risk-measure", "bogus"), "invalid choice: 'bogus'"),
    ],
)
def test_bad_input_gets_one_clear_line(files, tmp_path, capsys, releases, extra, message):
    output = ("-o", tmp_path / "e.json") if "-o" not in extra else ()
    code = _dpfast("evaluate", files / "people.csv", *(files / r for r in releases),
                   "--schema", files / "s.json", *output, *extra)  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("dpfast: error:") and message in err
    assert list(tmp_path.iterdir()) == []


def test_an_existing_output_needs_force(files, tmp_path, capsys):
    output = tmp_path / "e.json"
    output.write_text("{}")
    assert _evaluate(files, output, "mdav3.csv") == 2
    assert "pass --force" in capsys.readouterr().err
    assert output.read_text() == "{}"
    assert _evaluate(files, output, "mdav3.csv", extra=("--force",)) == 0


def test_a_diffgen_release_is_refused(files, tmp_path, capsys):
    released = tmp_path / "counts.csv"
    pd.read_csv(files / "mdav3.csv").to_csv(released, index=False)
    Path(f"{released}.public-report.json").write_text(json.dumps({"method": "diffgen"}))
    code = _dpfast("evaluate", files / "people.csv", released, "--schema", files / "s.json",
                   "-o", tmp_path / "e.json")  # fmt: skip
    assert code == 2
    assert "DiffGen release" in capsys.readouterr().err


def test_help_names_every_option_and_says_private(capsys):
    assert cli.main(["evaluate", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--schema", "--quasi-identifiers", "--k", "--labels", "--risk-measure",
                 "--utility-measure", "--width", "--p", "--force", "--aligned", "--no-aligned",
                 "PRIVATE", "0600", "verdict"):  # fmt: skip
        assert flag in text
    assert cli.main(["--help"]) == 0
    assert "dpfast evaluate" in capsys.readouterr().out


def test_the_command_offers_the_measures_the_library_has():
    assert _evaluate_command._RISK_MEASURES == tuple(compare.RISK_MEASURES)
    assert _evaluate_command._UTILITY_MEASURES == tuple(compare.UTILITY_MEASURES)


# -- release --risk, and compare's risk section -----------------------------------------


def test_release_risk_goes_to_the_private_report_only(files):
    public = (files / "irdp_risk.csv.public-report.json").read_text()
    private = json.loads((files / "irdp_risk.csv.private-report.json").read_text())
    assert "risk" not in json.loads(public) and "record_linkage" not in public
    assert private["risk"]["pairing"] == "column by column"
    plain = json.loads((files / "irdp.csv.private-report.json").read_text())
    assert plain["risk"] is None
    # the same seed gives the same release, with or without --risk
    assert (files / "irdp.csv").read_bytes() == (files / "irdp_risk.csv").read_bytes()


def test_release_risk_out_of_core_is_refused_in_the_command_lines_words(files, tmp_path, capsys):
    source = tmp_path / "people.parquet"
    pd.read_csv(files / "people.csv").to_parquet(source)
    code = _dpfast("release", "laplace", source, "-o", tmp_path / "o.parquet",
                   "--epsilon", 1, "--schema", files / "s.json", "--memory-limit", "1GiB",
                   "--risk")  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--risk pairs each released row with its source" in err
    assert "risk=True" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["people.parquet"]


def test_compare_has_a_risk_section(files, tmp_path):
    pytest.importorskip("matplotlib")
    output = tmp_path / "c.html"
    code = _dpfast("compare", files / "people.csv", files / "mdav5.csv", "--schema",
                   files / "s.json", "-o", output, "--linked", "--quasi-identifiers", "age",
                   "--k", 3, "--quiet")  # fmt: skip
    assert code == 0
    page = Page(output.read_text(), "dpfast-compare")
    original, released = pd.read_csv(files / "people.csv"), pd.read_csv(files / "mdav5.csv")
    found = page.data["risk"]
    assert found["record_linkage"]["distance"] == risk.record_linkage(
        original, released, columns=COLUMNS
    )
    assert found["uniqueness"]["released"] == risk.uniqueness(released, ["age"], k=3).as_dict()
    assert 'id="risk"' in output.read_text()
    # a shuffled release: its own pairing from its private report, or none
    assert _dpfast("compare", files / "people.csv", files / "mdavdp.csv", "--schema",
                   files / "s.json", "-o", output, "--force", "--quiet") == 0  # fmt: skip
    private = json.loads((files / "mdavdp.csv.private-report.json").read_text())
    assert (
        Page(output.read_text(), "dpfast-compare").data["risk"]["record_linkage"]
        == (private["risk"]["record_linkage"])
    )
    assert _dpfast("compare", files / "people.csv", files / "irdp.csv", "--schema",
                   files / "s.json", "-o", output, "--force", "--quiet") == 0  # fmt: skip
    found = Page(output.read_text(), "dpfast-compare").data["risk"]
    assert found["record_linkage"] is None
    assert "not linked" in found["not_measured"]["record_linkage"]


@pytest.mark.parametrize("method", ["ir-dp", "laplace", "mdav", "mdav-dp", "k-noise", "diffgen"])
def test_every_release_command_offers_risk(method, capsys):
    assert cli.main(["release", method, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--risk" in text and "(PRIVATE), where dpfast evaluate reads it" in text
