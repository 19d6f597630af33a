"""The command line's refusals and messages, run through ``main(argv)`` (issue 43).

Each refusal is one line that names the flag as the user wrote it and says why; a flag a
command does not take because it spends no epsilon says so; the first bad argument is the
one reported; Ctrl-C at start-up is one line and exit code 130.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfast import cli, datasets

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "protect": False},
    }
}
DIFFGEN_SCHEMA = str(Path(datasets.__file__).with_name("adult_diffgen.schema.json"))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rng = np.random.default_rng(0)
    people = pd.DataFrame(
        {
            "age": rng.integers(17, 91, 40),
            "income": rng.uniform(0, 150_000, 40),
            "job": rng.choice(["clerk", "nurse", "pilot"], 40),
        }
    )
    people.to_csv(tmp_path / "people.csv", index=False)
    people.to_parquet(tmp_path / "people.parquet", index=False)
    datasets.adult("train", drop_missing=True).head(200).to_parquet(tmp_path / "adult.parquet")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], workdir: Path) -> str:
    """Run ``argv``: exit code 2, one error line (returned), no file written."""
    before = sorted(p.name for p in workdir.iterdir())
    code = cli.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("dpfast: error: "), err
    assert sorted(p.name for p in workdir.iterdir()) == before
    return err[0]


# -- flags a command does not take -------------------------------------------------------

NOT_DP = {
    "mdav": ["release", "mdav", "people.csv", "-o", "o.csv", "--k", "3", "--columns", "age"],
    "individual-ranking": ["release", "individual-ranking", "people.csv", "-o", "o.csv",
                           "--k", "3", "--columns", "age"],
    "k-noise": ["release", "k-noise", "people.csv", "-o", "o.csv", "--k", "3",
                "--columns", "age"],
    "k-pram": ["release", "k-pram", "people.csv", "-o", "o.csv", "--k", "3", "--columns", "age"],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(NOT_DP))
@pytest.mark.parametrize("flag", [["--budget", "b.json"], ["--epsilon", "1"], ["--epsilon"]])
def test_a_command_that_spends_no_epsilon_says_so_of_dp_flags(command, flag, workdir, capsys):
    line = refused([*NOT_DP[command], *flag], capsys, workdir)
    assert f"dpfast release {command} spends no epsilon" in line
    assert f"so it takes no {flag[0]}" in line and "mdav-dp" in line
    assert "unrecognized arguments" not in line


# -- silent acceptance, now refused ------------------------------------------------------


def test_diffgen_risk_is_refused_saying_it_would_measure_nothing(workdir, capsys):
    line = refused(
        ["release", "diffgen", "adult.parquet", "-o", "d.csv", "--target", "income",
         "--steps", "2", "--epsilon", "1", "--schema", DIFFGEN_SCHEMA, "--risk", "--quiet"],
        capsys, workdir,
    )  # fmt: skip
    assert "--risk measures nothing for dpfast release diffgen" in line
    assert line.endswith("drop --risk") and "risk=True" not in line


@pytest.mark.parametrize("name", ["c.txt", "page", "report.json"])
def test_compare_writes_html_only_to_a_name_that_says_so(name, workdir, capsys):
    assert cli.main(["release", "laplace", "people.csv", "-o", "r.csv", "--epsilon", "4",
                     "--schema", "schema.json", "--quiet"]) == 0  # fmt: skip
    capsys.readouterr()
    line = refused(
        ["compare", "people.csv", "r.csv", "--schema", "schema.json", "-o", name, "--quiet"],
        capsys, workdir,
    )  # fmt: skip
    assert f"-o '{name}' does not end in .html" in line and ".html" in line.split("name it")[1]
    output = workdir / "Page.HTML"  # any case of the extension
    assert cli.main(["compare", "people.csv", "r.csv", "--schema", "schema.json", "-o",
                     str(output), "--quiet"]) == 0  # fmt: skip
    assert output.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
