"""The command line's refusals and messages, run through ``main(argv)`` (issue 43).

Each refusal is one line that names the flag as the user wrote it and says why; a flag a
command does not take because it spends no epsilon says so; the first bad argument is the
one reported; Ctrl-C at start-up is one line and exit code 130.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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


# -- the forecast of a dry run -----------------------------------------------------------


def test_a_dry_run_says_the_release_will_not_fit_the_budget_and_spends_nothing(workdir, capsys):
    assert cli.main(["budget", "init", "b.json", "--total-epsilon", "1.5"]) == 0
    release = ["release", "laplace", "people.csv", "-o", "r.csv", "--schema", "schema.json",
               "--budget", "b.json", "--seed", "1", "--quiet"]  # fmt: skip
    assert cli.main([*release, "--epsilon", "1"]) == 0
    before = (workdir / "b.json").read_bytes()
    capsys.readouterr()
    assert cli.main([*release, "--epsilon", "1", "--dry-run", "-o", "again.csv"]) == 0
    expected = (
        "budget: will NOT fit: the release needs --epsilon 1 but budget file 'b.json' has "
        "0.5 of 1.5 left; lower --epsilon to at most 0.5"
    )
    assert any(line.startswith(expected) for line in capsys.readouterr().out.splitlines())
    assert cli.main([*release, "--epsilon", "0.5", "--dry-run", "-o", "again.csv"]) == 0
    assert "budget: fits: budget file 'b.json' has 0.5 of 1.5 left" in capsys.readouterr().out
    assert (workdir / "b.json").read_bytes() == before
    assert not (workdir / "again.csv").exists()


# -- Ctrl-C at start-up and at the end ---------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]

#: A ``dpfast`` process that waits, at one stage, for the test's SIGINT: it prints
#: ``waiting`` and sleeps until the test, once it has sent the signal, makes the file
#: ``go``, so that the signal always lands in that stage (a stage that lets Ctrl-C
#: interrupt it raises in the sleep; the clean-up at exit notes it and goes on).
PAUSED = """
import atexit, builtins, os, sys, time

import dpfast.cli

def wait():
    print("waiting", flush=True)
    for _ in range(2400):
        if os.path.exists("go"):
            break
        time.sleep(0.05)

stage = sys.argv[1]
if stage == "import":  # an import the command line makes while it parses its arguments
    real_import = builtins.__import__

    def waiting_import(name, *args, **kwargs):
        if name == "dpfast.engines":
            builtins.__import__ = real_import
            wait()
        return real_import(name, *args, **kwargs)

    builtins.__import__ = waiting_import
elif stage == "parser":  # the parser being built
    build = dpfast.cli.build_parser
    dpfast.cli.build_parser = lambda: (wait(), build())[1]
elif stage == "exit":  # the clean-up after the command: an exit handler
    atexit.register(wait)
sys.argv = ["dpfast", *sys.argv[2:]]
dpfast.cli.run()
"""


@pytest.mark.parametrize(
    ("stage", "argv"),
    [
        ("import", ["release", "ir-dp", "in.parquet", "-o", "o.parquet", "--memory-limit",
                    "1GiB", "--k", "5", "--epsilon", "1", "--schema", "s.json"]),
        ("parser", ["--version"]),
        ("exit", ["--version"]),
    ],
)  # fmt: skip
def test_ctrl_c_at_any_stage_is_one_line_and_exit_code_130(stage, argv, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DPFAST_DEBUG", None)
    process = subprocess.Popen(
        [sys.executable, "-c", PAUSED, stage, *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:  # the start-up imports take their time: wait for it
            lines.append(line)
            if line.strip() == "waiting":
                break
        assert lines and lines[-1].strip() == "waiting", lines
        process.send_signal(signal.SIGINT)
        (tmp_path / "go").touch()
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert err == "dpfast: interrupted\n"


def test_a_budget_folder_that_cannot_be_written_is_a_usage_error(workdir, capsys, monkeypatch):
    assert cli.main(["budget", "init", "b.json", "--total-epsilon", "100"]) == 0
    (workdir / "b.json.lock").unlink()
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):  # as root, chmod would not stop a write
        if flags & os.O_CREAT and str(workdir) in os.path.abspath(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    for argv in (
        ["budget", "init", "c.json", "--total-epsilon", "2"],
        ["release", "laplace", "people.csv", "-o", "r.csv", "--epsilon", "60", "--schema",
         "schema.json", "--budget", "b.json", "--quiet"],
    ):  # fmt: skip
        line = refused(argv, capsys, workdir)
        assert "cannot be written (Permission denied)" in line and "must be writable" in line
