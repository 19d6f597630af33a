"""``--dry-run``, the forecast's warning before any ε is reserved, and the summary's lines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfast.budget import BudgetFile
from dpfast.cli import main

JOBS = "clerk;Office;*\nnurse;Care;*\npilot;Care;*\n"
SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "taxonomy": "jobs.csv"},
    }
}

# every release command, with the options it needs on the table below
COMMANDS = {
    "ir-dp": ["--k", "5", "--epsilon", "1"],
    "laplace": ["--epsilon", "1", "--columns", "age,income"],
    "mdav-dp": ["--k", "10", "--epsilon", "1"],
    "randomized-response": ["--column", "job", "--epsilon", "1"],
    "diffgen": ["--target", "job", "--steps", "2", "--epsilon", "1"],
    "individual-ranking": ["--k", "3", "--columns", "age,income"],
    "mdav": ["--k", "3", "--columns", "age,income"],
    "k-noise": ["--k", "3", "--columns", "age,income"],
    "k-pram": ["--k", "3", "--columns", "age,income"],
}
SPENDS = {"ir-dp", "laplace", "mdav-dp", "randomized-response", "diffgen"}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(8)
    n = 60
    pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.uniform(0, 150_000, n),
            "job": rng.choice(["clerk", "nurse", "pilot"], n),
        }
    ).to_parquet(tmp_path / "people.parquet", index=False)
    (tmp_path / "jobs.csv").write_text(JOBS, encoding="utf-8")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    BudgetFile.create(tmp_path / "budget.json", 1.0)
    return tmp_path


def _argv(workdir: Path, command: str, *extra: str) -> list[str]:
    argv = ["release", command, str(workdir / "people.parquet"), "-o", str(workdir / "out.parquet")]
    argv += ["--schema", str(workdir / "schema.json"), *COMMANDS[command], *extra]
    if command in SPENDS:
        argv += ["--budget", str(workdir / "budget.json")]
    return argv


def _files(workdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(workdir.iterdir())}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_dry_run_prints_the_forecast_spends_nothing_writes_nothing(workdir, capsys, command):
    before = _files(workdir)
    assert main(_argv(workdir, command, "--dry-run")) == 0
    out = capsys.readouterr().out
    method = command.replace("-", "_").replace("laplace", "laplace_dp")
    assert out.startswith(f"forecast of {method} from public values only: nothing spent")
    assert _files(workdir) == before  # no output, no report, the budget file byte for byte
    if command in ("ir-dp", "laplace", "mdav-dp"):
        assert "on a bound*" in out and "age" in out and "income" in out
        assert "* on a bound: the share of released values on a bound if the values were " in out
    private = "forecast from the data (PRIVATE: computed from the values of this table"
    if command in ("ir-dp", "mdav-dp", "randomized-response"):  # the data was read
        head, data = out.split(private)
        assert "not for publication" in data and "chosen from the data" in data
        assert "not for publication" not in head  # the public forecast comes first
    else:
        assert private not in out
    if command in ("ir-dp", "mdav-dp"):
        assert "pushed*" in data and "mean bias" in data
        assert "--k whose forecast from the data puts under 10%" in data
    if command == "randomized-response":
        assert "tvd" in data
    if command in ("individual-ranking", "mdav", "k-noise", "k-pram"):
        assert "NOT differential privacy: no epsilon" in out


def test_dry_run_does_not_refuse_an_existing_output(workdir, capsys):
    (workdir / "out.parquet").write_bytes(b"an earlier release")
    before = _files(workdir)
    assert main(_argv(workdir, "laplace", "--dry-run")) == 0
    assert _files(workdir) == before
    assert main(_argv(workdir, "laplace")) == 2  # the release itself still refuses
    assert "already exists; pass --force" in capsys.readouterr().err


def test_the_warning_is_one_line_printed_before_the_budget_is_asked(workdir, capsys, monkeypatch):
    seen_at_reserve: list[str] = []
    reserve = BudgetFile.reserve

    def watched(self, *args, **kwargs):
        seen_at_reserve.append(capsys.readouterr().err)
        return reserve(self, *args, **kwargs)

    monkeypatch.setattr(BudgetFile, "reserve", watched)
    assert main(_argv(workdir, "laplace", "--quiet", "--seed", "1")) == 0
    err = seen_at_reserve[0] + capsys.readouterr().err
    warned = [line for line in err.splitlines() if line.startswith("dpfast: warning:")]
    assert len(warned) == 1, err  # the release's own warning is not shown again
    assert "the noise would put 10% or more" in warned[0]
    assert "if the values were spread evenly" in warned[0]
    assert "in 'age', 'income'" in warned[0]
    assert "raise --epsilon" in warned[0]
    assert warned[0] in seen_at_reserve[0]  # printed before any epsilon was reserved
    report = json.loads((workdir / "out.parquet.public-report.json").read_text(encoding="utf-8"))
    assert report["warnings"] == [warned[0].removeprefix("dpfast: warning: ")]


def _summary(workdir: Path, capsys, command: str, *extra: str) -> tuple[str, dict, dict]:
    assert main(_argv(workdir, command, "--seed", "3", *extra)) == 0
    out = capsys.readouterr().out
    public = json.loads((workdir / "out.parquet.public-report.json").read_text(encoding="utf-8"))
    private = json.loads((workdir / "out.parquet.private-report.json").read_text(encoding="utf-8"))
    return out, public, private


def _shares(counts: dict[str, int], rows: int) -> str:
    overall = sum(counts.values()) / (rows * len(counts))
    return f"{overall:.1%} (age {counts['age'] / rows:.1%}, income {counts['income'] / rows:.1%})"


def test_summary_shows_the_private_share_on_a_bound_and_that_rows_are_not_records(workdir, capsys):
    out, public, private = _summary(workdir, capsys, "ir-dp")
    rows = private["input_rows"]
    pushed, released = private["pushed_onto_bound"], private["clamped_output"]
    before = private["on_bound_before_noise"]
    assert set(pushed) == set(released) == set(before) == {"age", "income"}
    expected = (
        "values on a bound (PRIVATE: counted in this release, do not publish): pushed there "
        f"by the noise {_shares(pushed, rows)}; released on a bound {_shares(released, rows)}; "
        f"there before the noise {_shares(before, rows)}"
    )
    assert expected in out.splitlines()
    for field in ("clamped_output", "pushed_onto_bound", "on_bound_before_noise"):
        assert field not in public
    assert "on a bound (PRIVATE" not in json.dumps(public)
    lines = [line for line in out.splitlines() if line.startswith("rows are not records")]
    assert len(lines) == 1
    assert "relationships between columns" in lines[0] and "are not kept" in lines[0]
    assert "dpfast release mdav-dp" in lines[0] and "--linkage records" in lines[0]


def test_summary_of_linked_releases_does_not_say_rows_are_not_records(workdir, capsys):
    out, _, _ = _summary(workdir, capsys, "laplace")
    assert "values on a bound (PRIVATE" in out
    assert "rows are not records" not in out
    (workdir / "budget.json").unlink()
    BudgetFile.create(workdir / "budget.json", 10.0)
    out, _, _ = _summary(workdir, capsys, "mdav-dp", "--force")
    assert "rows are not records" not in out


def test_summary_of_a_method_without_bounds_has_no_share_line(workdir, capsys):
    out, _, _ = _summary(workdir, capsys, "randomized-response")
    assert "on a bound" not in out
